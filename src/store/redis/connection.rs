//! How the Redis store reaches Redis, and keeps reaching it through
//! restarts and failovers: one server at a fixed address, the master that
//! Redis Sentinel names, or a Redis Cluster; TLS and credentials from the
//! URL; and the connections themselves.
//!
//! redis-rs reconnects a connection whose server went away, but it does not
//! follow a master that moved: a Cluster connection whose master stalls
//! (a frozen host, a network partition: requests time out, nothing is
//! refused) keeps sending that slot's requests there after a replica took
//! over, and a connection to a Sentinel-managed master keeps the old
//! address. So each topology here is *followed*: a call that fails the way
//! a moved master fails sets off a check (at most one at a time, at most one
//! a second), which builds fresh connections from what the Cluster or the
//! Sentinels say now, resubscribes the room channels on them, and tells the
//! hub to read its sockets' places again (events may have been lost).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Cmd, ConnectionAddr, ErrorKind, Pipeline, ProtocolVersion, PushInfo, RedisError, RedisFuture,
    Script, ServerErrorKind, TlsCertificates, TlsMode, Value,
};
use tokio::sync::{broadcast, mpsc};

use super::keys::EVENTS_PATTERN;

use crate::store::StoreError;
use crate::words::StoreEvent;

/// A request that takes longer than this counts as the store being down.
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The shortest time between two checks of where the master is.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How the node reaches Redis, beyond the URL.
#[derive(Debug, Clone, Default)]
pub struct RedisOptions {
    /// PEM file of the certificate authority that signed the servers'
    /// certificates (`rediss://`), instead of the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// Replicas that must have each write before it is answered (`WAIT`);
    /// 0 answers once the master has it.
    pub wait_replicas: u32,
}

/// What a `redis://`, `rediss://`, `redis+cluster://` or
/// `redis+sentinel://` URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RedisUrl {
    pub tls: bool,
    pub topology: Topology,
    /// The credentials of the Redis servers (not of the Sentinels).
    pub username: Option<String>,
    pub password: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Topology {
    /// One server: the URL as redis-rs reads it.
    Server(String),
    /// `host:port` of each seed node.
    Cluster(Vec<(String, u16)>),
    Sentinel {
        sentinels: Vec<(String, u16)>,
        master: String,
        /// The Sentinels' own credentials (`sentinel_username`,
        /// `sentinel_password` in the query).
        username: Option<String>,
        password: Option<String>,
    },
}

impl RedisUrl {
    pub fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| "it is not a URL (no \"://\")".to_owned())?;
        let (tls, kind) = match scheme {
            "redis" => (false, ""),
            "rediss" => (true, ""),
            "redis+cluster" => (false, "cluster"),
            "rediss+cluster" => (true, "cluster"),
            "redis+sentinel" => (false, "sentinel"),
            "rediss+sentinel" => (true, "sentinel"),
            other => {
                return Err(format!(
                    "unknown scheme {other:?}: use redis, rediss, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel"
                ));
            }
        };
        let (authority, path_and_query) = split_authority(rest);
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = userinfo.map(credentials).unwrap_or_default();
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let topology = match kind {
            "" => Topology::Server(url.to_owned()),
            "cluster" => Topology::Cluster(host_ports(hosts, 6379)?),
            _ => {
                let master = path.trim_matches('/');
                if master.is_empty() || master.contains('/') {
                    return Err(
                        "a Sentinel URL names its master: redis+sentinel://HOST:PORT[,HOST:PORT…]/MASTER_NAME".into(),
                    );
                }
                let parameter = |name: &str| {
                    url::form_urlencoded::parse(query.as_bytes())
                        .find(|(key, _)| key == name)
                        .map(|(_, value)| value.into_owned())
                };
                Topology::Sentinel {
                    sentinels: host_ports(hosts, 26379)?,
                    master: decode(master),
                    username: parameter("sentinel_username"),
                    password: parameter("sentinel_password"),
                }
            }
        };
        Ok(Self {
            tls,
            topology,
            username,
            password,
        })
    }

    /// The URL of one node of this deployment, as redis-rs reads it.
    fn node_url(&self, host: &str, port: u16) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{host}:{port}/?protocol=resp3")
    }
}

/// `url` with its passwords (the servers' in the userinfo, the Sentinels'
/// in the query) replaced by `***`: what a log or an error may show.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path_and_query) = split_authority(rest);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{hosts}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let path_and_query = match path_and_query.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.ends_with("password") => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => path_and_query.to_owned(),
    };
    format!("{scheme}://{authority}{path_and_query}")
}

/// What follows `scheme://`, as the authority and the path with its query.
/// The authority ends at the first `/` or `?` after its `@`, if it has one
/// (before any `?`): a password left unencoded may hold a `/` (base64 keys
/// do), and must never be taken for the path, where it would be shown.
fn split_authority(rest: &str) -> (&str, &str) {
    let before_query = rest.find('?').unwrap_or(rest.len());
    let hosts_from = rest[..before_query].rfind('@').map_or(0, |at| at + 1);
    match rest[hosts_from..].find(['/', '?']) {
        Some(at) => rest.split_at(hosts_from + at),
        None => (rest, ""),
    }
}

/// `user:password` (either part may be empty), percent-decoded.
fn credentials(userinfo: &str) -> (Option<String>, Option<String>) {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let some = |s: &str| (!s.is_empty()).then(|| decode(s));
    (some(user), some(password))
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// `a:1,b:2` (the port defaulting to `default_port`).
fn host_ports(hosts: &str, default_port: u16) -> Result<Vec<(String, u16)>, String> {
    hosts
        .split(',')
        .map(|host| {
            let (name, port) = match host.rsplit_once(':') {
                Some((name, port)) if !name.ends_with(':') => (
                    name,
                    port.parse().map_err(|_| format!("bad port in {host:?}"))?,
                ),
                _ => (host, default_port),
            };
            let name = name.trim_start_matches('[').trim_end_matches(']');
            if name.is_empty() {
                return Err(format!("no host in {hosts:?}"));
            }
            Ok((name.to_owned(), port))
        })
        .collect()
}

fn with_resp3(url: &str) -> String {
    if url.contains("protocol=") {
        url.to_string()
    } else if url.contains('?') {
        format!("{url}&protocol=resp3")
    } else {
        format!("{url}?protocol=resp3")
    }
}

/// What a write whose replicas did not confirm it in time fails with.
const REPLICAS_UNCONFIRMED: &str = "replicas did not confirm the write";

pub(super) fn unavailable(error: RedisError) -> StoreError {
    count_failure(&error);
    StoreError::Unavailable(error.to_string())
}

/// The kinds of failure `waitroom_store_errors_total{store="redis"}` tells
/// apart, each registered at zero when the store connects.
pub(super) const FAILURE_KINDS: &[&str] =
    &["timeout", "connection", "failover", "replicas", "other"];

/// Counts a call that failed on Redis (once per call a caller sees fail;
/// the attempts `again_if_it_never_ran` repeats are not counted), by kind.
pub(super) fn count_failure(error: &RedisError) {
    let kind = if error.is_timeout() {
        "timeout"
    } else if error.to_string().contains(REPLICAS_UNCONFIRMED) {
        "replicas"
    } else if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.kind() == ErrorKind::ClusterConnectionNotFound
    {
        "connection"
    } else if matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::TryAgain
                | ServerErrorKind::BusyLoading
                | ServerErrorKind::Moved
                | ServerErrorKind::Ask
        )
    ) {
        "failover"
    } else {
        "other"
    };
    metrics::counter!(crate::store::measured::STORE_ERRORS, "store" => "redis", "kind" => kind)
        .increment(1);
}

/// Whether an error is how a call fails when its server is gone, stalled
/// or no longer the master: worth asking where the master is now.
fn master_may_have_moved(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || matches!(
            error.kind(),
            ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Server(ServerErrorKind::ReadOnly)
                | ErrorKind::Server(ServerErrorKind::MasterDown)
                | ErrorKind::Server(ServerErrorKind::ClusterDown)
        )
}

/// Sends a request, and again when an attempt is known not to have run:
/// - it could not even connect. A manager whose reconnect attempts ran out
///   while Redis was away keeps that failure as its connection until a call
///   finds it: that call, the first after Redis returns, fails without
///   having reached Redis (and sets the manager reconnecting), so it is sent
///   once more, whatever it does;
/// - Redis answered that it is still loading its data after a restart (it
///   ran nothing): sent again after a pause, for up to a second.
///
/// A connection that broke while a request was out is not retried: the
/// request may have run.
async fn again_if_it_never_ran<T, Sent>(
    connection: &ConnectionManager,
    send: impl Fn(ConnectionManager) -> Sent,
) -> Result<T, RedisError>
where
    Sent: Future<Output = Result<T, RedisError>>,
{
    const LOADING_PAUSE: Duration = Duration::from_millis(100);
    const LOADING_ATTEMPTS: usize = 10;
    let mut reconnected = false;
    let mut loading = 0;
    loop {
        match send(connection.clone()).await {
            Err(error) if error.is_connection_refusal() && !reconnected => reconnected = true,
            Err(error)
                if error.kind() == ErrorKind::Server(ServerErrorKind::BusyLoading)
                    && loading < LOADING_ATTEMPTS =>
            {
                loading += 1;
                tokio::time::sleep(LOADING_PAUSE).await;
            }
            answer => return answer,
        }
    }
}

/// A connection for one call (a cheap handle to a shared one).
#[derive(Clone)]
pub(super) enum Connection {
    /// One server (or the master Sentinel names) through a reconnecting
    /// manager, noting its failures for the link to follow.
    Server(ConnectionManager, Arc<FollowedServer>),
    /// An actix worker's own connection to the server: forgotten on a
    /// connection-level error, so that the worker's next call makes a
    /// fresh one.
    Worker(
        ConnectionManager,
        Arc<WorkerConnections>,
        Arc<FollowedServer>,
    ),
    Cluster(ClusterConnection, Arc<FollowedCluster>),
}

impl Connection {
    fn follower(&self) -> Arc<dyn Follow> {
        match self {
            Connection::Server(_, server) | Connection::Worker(_, _, server) => server.clone(),
            Connection::Cluster(_, cluster) => cluster.clone(),
        }
    }
}

/// `answer`, noting how it ended: a failure of the kind a moved master
/// causes sets off a check of where the master is.
fn noted<'a, T: Send + 'a>(
    follow: Arc<dyn Follow>,
    answer: RedisFuture<'a, T>,
) -> RedisFuture<'a, T> {
    Box::pin(async move {
        let answer = answer.await;
        if let Err(error) = &answer
            && master_may_have_moved(error)
        {
            follow.check_soon();
        }
        answer
    })
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let follow = self.follower();
        let send = move |mut c: ConnectionManager| async move { c.send_packed_command(cmd).await };
        let answer: RedisFuture<'a, Value> = match &*self {
            Connection::Server(c, _) => Box::pin(again_if_it_never_ran(c, send)),
            Connection::Cluster(c, _) => {
                let mut c = c.clone();
                Box::pin(async move { c.req_packed_command(cmd).await })
            }
            Connection::Worker(c, workers, _) => {
                workers.watch(Box::pin(again_if_it_never_ran(c, send)))
            }
        };
        noted(follow, answer)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let follow = self.follower();
        let send = move |mut c: ConnectionManager| async move {
            c.send_packed_commands(cmd, offset, count).await
        };
        let answer: RedisFuture<'a, Vec<Value>> = match &*self {
            Connection::Server(c, _) => Box::pin(again_if_it_never_ran(c, send)),
            Connection::Cluster(c, _) => {
                let mut c = c.clone();
                Box::pin(async move { c.req_packed_commands(cmd, offset, count).await })
            }
            Connection::Worker(c, workers, _) => {
                workers.watch(Box::pin(again_if_it_never_ran(c, send)))
            }
        };
        noted(follow, answer)
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Server(c, _) | Connection::Worker(c, _, _) => c.get_db(),
            Connection::Cluster(c, _) => c.get_db(),
        }
    }
}

/// Something that follows where its master is.
trait Follow: Send + Sync {
    /// A call failed the way it fails when the master moved: check, soon.
    fn check_soon(self: Arc<Self>);
}

/// At most one check at a time, and one a second.
#[derive(Default)]
struct CheckGate {
    running: AtomicBool,
    last: Mutex<Option<Instant>>,
}

impl CheckGate {
    /// Whether a check may start now; if so, it must call [`CheckGate::done`].
    fn start(&self) -> bool {
        if self
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        let mut last = self.last.lock();
        if last.is_some_and(|at| at.elapsed() < CHECK_EVERY) {
            self.running.store(false, Ordering::Release);
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    fn done(&self) {
        self.running.store(false, Ordering::Release);
    }
}

/// The link to Redis: one server (fixed or Sentinel's master), or a
/// Cluster; and how many replicas must have a write before it is answered.
pub(super) struct Link {
    followed: Followed,
    /// `--redis-wait-replicas`: 0 answers a write once its master has it.
    wait_replicas: u32,
}

enum Followed {
    Server(Arc<FollowedServer>),
    Cluster(Arc<FollowedCluster>),
}

/// Connections for writes that wait for replicas, per node: `WAIT` answers
/// after a round trip to a replica, and what is sent behind it on the same
/// connection waits, so waited writes go out over several, apart from reads.
const DURABLE_CONNECTIONS: usize = 4;

/// How long `WAIT` waits for the replicas before the write is answered 503.
pub(super) const WAIT_TIMEOUT: Duration = Duration::from_secs(1);

/// What a script does, for `WAIT` and the events it publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effect {
    /// Reads only, or marks presence (a lost mark is made again within
    /// seconds): answered at once.
    Reads,
    /// Changes what clients are told succeeded: with `--redis-wait-replicas`
    /// answered only once that many replicas have it.
    Writes,
}

/// A script call: `script` on `keys` with `args`. A room script (one that
/// shares `lua/lib.lua`) publishes on `channel`: it takes how to publish as
/// its first argument, given here.
pub(super) struct ScriptCall<'a> {
    pub script: &'a Script,
    pub keys: &'a [String],
    pub args: Vec<String>,
    pub channel: Option<&'a str>,
    pub effect: Effect,
}

impl Link {
    /// Connects to what `url` names and subscribes to every room's events,
    /// which go out on `pushes`; `events` hears when a master moved.
    pub async fn connect(
        url: &str,
        options: &RedisOptions,
        pushes: mpsc::UnboundedSender<PushInfo>,
        events: broadcast::Sender<StoreEvent>,
    ) -> Result<Self, StoreError> {
        let parsed = RedisUrl::parse(url)
            .map_err(|reason| StoreError::Unavailable(format!("invalid Redis URL: {reason}")))?;
        let certificates = match &options.ca_file {
            Some(path) => Some(TlsCertificates {
                client_tls: None,
                root_cert: Some(std::fs::read(path).map_err(|e| {
                    StoreError::Unavailable(format!(
                        "cannot read the CA file {}: {e}",
                        path.display()
                    ))
                })?),
            }),
            None => None,
        };
        let endpoint = Endpoint {
            url: parsed,
            certificates,
            durable_connections: if options.wait_replicas > 0 {
                DURABLE_CONNECTIONS
            } else {
                0
            },
        };
        let followed = match &endpoint.url.topology {
            Topology::Cluster(_) => {
                Followed::Cluster(FollowedCluster::connect(endpoint, pushes, events).await?)
            }
            _ => Followed::Server(FollowedServer::connect(endpoint, pushes, events).await?),
        };
        let link = Self {
            followed,
            wait_replicas: options.wait_replicas,
        };
        link.warn_if_replicas_are_missing().await;
        Ok(link)
    }

    /// With `--redis-wait-replicas N`, says at start if a master has fewer
    /// than N replicas: every write would then wait its second and answer
    /// 503. A warning, not a refusal: a replica may be on its way back.
    async fn warn_if_replicas_are_missing(&self) {
        if self.wait_replicas == 0 {
            return;
        }
        let fewest = match &self.followed {
            Followed::Server(server) => server.replicas().await,
            Followed::Cluster(cluster) => cluster.built.lock().fewest_replicas,
        };
        if let Some(replicas) = fewest
            && replicas < self.wait_replicas as usize
        {
            tracing::warn!(
                replicas,
                wait_replicas = self.wait_replicas,
                "a master has fewer replicas than --redis-wait-replicas: every write will wait a second and answer 503 until enough are connected"
            );
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.followed, Followed::Cluster(_))
    }

    fn publish_command(&self) -> &'static str {
        if self.is_cluster() {
            "SPUBLISH"
        } else {
            "PUBLISH"
        }
    }

    /// The connection for a call from this thread: on an actix worker (a
    /// current-thread runtime) its own on one server, made on first use;
    /// elsewhere (the promoter, the hub) and on a cluster the shared one.
    pub async fn connection(&self) -> Connection {
        match &self.followed {
            Followed::Server(server) => server.connection().await,
            Followed::Cluster(cluster) => cluster.connection(),
        }
    }

    /// A connection for a write that waits for replicas: one of those kept
    /// for them, in turn.
    async fn durable_connection(&self) -> Connection {
        match &self.followed {
            Followed::Server(server) => server.durable_connection(),
            Followed::Cluster(cluster) => cluster.durable_connection(),
        }
    }

    /// Runs a script. A write waits for `--redis-wait-replicas` replicas
    /// (`WAIT`, in the same round trip and on the same connection, so at
    /// the room's own master): if they do not confirm it within
    /// [`WAIT_TIMEOUT`] the answer is an error (503) and nothing was
    /// acknowledged, and the events the script would have published are
    /// not published, so no socket hears of what a failover could undo.
    pub async fn run(&self, call: ScriptCall<'_>) -> Result<Value, RedisError> {
        let durable = self.wait_replicas > 0 && call.effect == Effect::Writes;
        let mut args = call.args;
        if call.channel.is_some() {
            // '' asks the script to return its events instead (lua/lib.lua).
            let publish = if durable { "" } else { self.publish_command() };
            args.insert(0, publish.to_owned());
        }
        if !durable {
            let mut connection = self.connection().await;
            let mut invocation = call.script.prepare_invoke();
            for key in call.keys {
                invocation.key(key);
            }
            for arg in &args {
                invocation.arg(arg);
            }
            return invocation.invoke_async(&mut connection).await;
        }
        let mut pipeline = redis::pipe();
        pipeline
            .cmd("EVALSHA")
            .arg(call.script.get_hash())
            .arg(call.keys.len())
            .arg(call.keys)
            .arg(&args);
        let pipeline = self.then_wait(pipeline);
        let mut connection = self.durable_connection().await;
        let mut answers = connection.req_packed_commands(&pipeline, 0, 2).await?;
        if matches!(answers.first(), Some(Value::ServerError(e)) if e.code() == "NOSCRIPT") {
            call.script.load_async(&mut connection).await?;
            answers = connection.req_packed_commands(&pipeline, 0, 2).await?;
        }
        let reply = self.confirmed(&connection, answers)?;
        match call.channel {
            Some(channel) => self.publish_deferred(&mut connection, channel, reply).await,
            None => Ok(reply),
        }
    }

    /// `pipeline` (one write), then `WAIT`: in the same round trip and on
    /// the same connection, so at the write's own master.
    fn then_wait(&self, mut pipeline: redis::Pipeline) -> redis::Pipeline {
        pipeline
            .cmd("WAIT")
            .arg(self.wait_replicas)
            .arg(WAIT_TIMEOUT.as_millis() as u64);
        pipeline
    }

    /// Sends one command that writes, waiting for the replicas as a
    /// script's write does.
    pub async fn write(&self, command: &Cmd) -> Result<Value, RedisError> {
        if self.wait_replicas == 0 {
            return command.query_async(&mut self.connection().await).await;
        }
        let mut connection = self.durable_connection().await;
        let mut pipeline = redis::pipe();
        pipeline.add_command(command.clone());
        let answers = connection
            .req_packed_commands(&self.then_wait(pipeline), 0, 2)
            .await?;
        self.confirmed(&connection, answers)
    }

    /// A write's reply and `WAIT`'s, as one answer: the reply, if enough
    /// replicas confirmed it. A pipeline answers the server's errors as
    /// values, past the check that follows a moved master: done here.
    fn confirmed(&self, connection: &Connection, answers: Vec<Value>) -> Result<Value, RedisError> {
        let mut answers = answers.into_iter();
        let (Some(reply), Some(confirmed)) = (answers.next(), answers.next()) else {
            return Err(unexpected(
                "a write and WAIT answered with fewer than two replies",
            ));
        };
        let server_error = |error: RedisError| {
            if master_may_have_moved(&error) {
                connection.follower().check_soon();
            }
            error
        };
        let reply = reply.extract_error().map_err(server_error)?;
        let confirmed: i64 =
            redis::from_redis_value(confirmed.extract_error().map_err(server_error)?)?;
        if confirmed < i64::from(self.wait_replicas) {
            return Err(RedisError::from((
                ErrorKind::Io,
                REPLICAS_UNCONFIRMED,
                format!(
                    "{confirmed} of {} within {} ms; nothing was acknowledged",
                    self.wait_replicas,
                    WAIT_TIMEOUT.as_millis()
                ),
            )));
        }
        Ok(reply)
    }

    /// A deferring script's `{reply, {event…}}`: publishes the events now
    /// that the replicas have them, and gives the reply.
    async fn publish_deferred(
        &self,
        connection: &mut Connection,
        channel: &str,
        deferred: Value,
    ) -> Result<Value, RedisError> {
        let Value::Array(mut parts) = deferred else {
            return Err(unexpected(
                "a deferring script answered no {reply, events} pair",
            ));
        };
        let (Some(events), Some(reply)) = (parts.pop(), parts.pop()) else {
            return Err(unexpected(
                "a deferring script answered no {reply, events} pair",
            ));
        };
        let events: Vec<Value> = match events {
            Value::Array(events) => events,
            Value::Nil => Vec::new(),
            _ => return Err(unexpected("a deferring script's events are no list")),
        };
        if !events.is_empty() {
            let mut pipeline = redis::pipe();
            for event in events {
                let event: Vec<u8> = redis::from_redis_value(event)?;
                pipeline
                    .cmd(self.publish_command())
                    .arg(channel)
                    .arg(event)
                    .ignore();
            }
            // The write stands whether or not its events go out: a node that
            // misses one reads its sockets' places again at the next.
            if let Err(error) = pipeline.exec_async(connection).await {
                tracing::warn!(%channel, %error, "could not publish a confirmed write's events");
            }
        }
        Ok(reply)
    }

    /// Makes sure this node hears `channel` (a cluster's sharded channels
    /// are subscribed one by one; one server's pattern hears them all).
    pub async fn watch(&self, channel: &str) -> Result<(), RedisError> {
        match &self.followed {
            Followed::Server(_) => Ok(()),
            Followed::Cluster(cluster) => cluster.watch(channel).await,
        }
    }

    /// The subscription's connection went away (it reconnects by itself on
    /// one server): check where the master is, and ping until it answers.
    pub fn on_disconnection(&self) {
        match &self.followed {
            Followed::Server(server) => {
                server.clone().check_soon();
                tokio::spawn(server.clone().ping_subscriber_until_it_answers());
            }
            Followed::Cluster(cluster) => cluster.clone().check_soon(),
        }
    }
}

/// A call that took longer than it may: an error of the kind a response
/// timeout is (so a store that does not answer is `store_unavailable`).
pub(super) fn timed_out(what: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} took too long"),
    ))
}

pub(super) fn unexpected(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Client, what))
}

/// Where to connect and how: the URL and its TLS roots.
struct Endpoint {
    url: RedisUrl,
    certificates: Option<TlsCertificates>,
    /// Connections of their own for writes that wait for replicas (none
    /// without `--redis-wait-replicas`): `WAIT` holds the connection it
    /// runs on, so every read and mark sent behind it would wait too.
    durable_connections: usize,
}

impl Endpoint {
    /// A client for one server at `url` (given in full: credentials, TLS).
    fn client(&self, url: &str) -> Result<redis::Client, RedisError> {
        match &self.certificates {
            Some(certificates) => redis::Client::build_with_tls(url, certificates.clone()),
            None => redis::Client::open(url),
        }
    }

    /// A client for one node, with the URL's credentials.
    fn node_client(&self, host: &str, port: u16) -> Result<redis::Client, RedisError> {
        let info = redis::IntoConnectionInfo::into_connection_info(self.url.node_url(host, port))?;
        let mut settings = info.redis_settings().clone();
        if let Some(username) = &self.url.username {
            settings = settings.set_username(username);
        }
        if let Some(password) = &self.url.password {
            settings = settings.set_password(password);
        }
        let info = info.set_redis_settings(settings);
        match &self.certificates {
            Some(certificates) => redis::Client::build_with_tls(info, certificates.clone()),
            None => redis::Client::open(info),
        }
    }

    fn sentinel(&self) -> Option<Result<SentinelClient, RedisError>> {
        let Topology::Sentinel {
            sentinels,
            master,
            username,
            password,
        } = &self.url.topology
        else {
            return None;
        };
        let addresses = sentinels.iter().map(|(host, port)| {
            if self.url.tls {
                ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host.clone(), *port)
            }
        });
        let build = || {
            let mut builder =
                SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)?
                    .set_client_to_redis_protocol(ProtocolVersion::RESP3);
            if self.url.tls {
                builder = builder
                    .set_client_to_redis_tls_mode(TlsMode::Secure)
                    .set_client_to_sentinel_tls_mode(TlsMode::Secure);
            }
            if let Some(certificates) = &self.certificates {
                builder = builder
                    .set_client_to_redis_certificates(certificates.clone())
                    .set_client_to_sentinel_certificates(certificates.clone());
            }
            if let Some(username) = &self.url.username {
                builder = builder.set_client_to_redis_username(username);
            }
            if let Some(password) = &self.url.password {
                builder = builder.set_client_to_redis_password(password);
            }
            if let Some(username) = username {
                builder = builder.set_client_to_sentinel_username(username);
            }
            if let Some(password) = password {
                builder = builder.set_client_to_sentinel_password(password);
            }
            builder.build()
        };
        Some(build())
    }

    fn cluster_client(
        &self,
        seeds: &[(String, u16)],
        pushes: Option<mpsc::UnboundedSender<PushInfo>>,
    ) -> Result<ClusterClient, RedisError> {
        let urls: Vec<String> = seeds
            .iter()
            .map(|(host, port)| self.url.node_url(host, *port))
            .collect();
        let mut builder = ClusterClientBuilder::new(urls)
            .use_protocol(ProtocolVersion::RESP3)
            .response_timeout(RESPONSE_TIMEOUT)
            .connection_timeout(RESPONSE_TIMEOUT);
        if self.url.tls {
            builder = builder.tls(TlsMode::Secure);
        }
        if let Some(certificates) = &self.certificates {
            builder = builder.certs(certificates.clone());
        }
        if let Some(username) = &self.url.username {
            builder = builder.username(username);
        }
        if let Some(password) = &self.url.password {
            builder = builder.password(password);
        }
        if let Some(pushes) = pushes {
            builder = builder.push_sender(pushes);
        }
        builder.build()
    }
}

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_connection_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500))
}

/// One server: at a fixed address, or wherever the Sentinels say the
/// master is now.
pub(super) struct FollowedServer {
    endpoint: Endpoint,
    sentinel: Option<tokio::sync::Mutex<SentinelClient>>,
    current: RwLock<Arc<ServerConnections>>,
    durable_turn: AtomicUsize,
    pushes: mpsc::UnboundedSender<PushInfo>,
    events: broadcast::Sender<StoreEvent>,
    gate: CheckGate,
}

/// The connections to one server.
struct ServerConnections {
    /// The master's address, as the Sentinels gave it (none for a fixed URL).
    address: Option<String>,
    shared: ConnectionManager,
    subscriber: ConnectionManager,
    workers: Arc<WorkerConnections>,
    /// For writes that wait for replicas ([`DURABLE_CONNECTIONS`]).
    durable: Vec<ConnectionManager>,
}

impl FollowedServer {
    async fn connect(
        endpoint: Endpoint,
        pushes: mpsc::UnboundedSender<PushInfo>,
        events: broadcast::Sender<StoreEvent>,
    ) -> Result<Arc<Self>, StoreError> {
        let sentinel = endpoint
            .sentinel()
            .transpose()
            .map_err(unavailable)?
            .map(tokio::sync::Mutex::new);
        let found = Self::master_client(&endpoint, sentinel.as_ref())
            .await
            .map_err(unavailable)?;
        let connections = Self::connections_to(found, &pushes, endpoint.durable_connections)
            .await
            .map_err(unavailable)?;
        Ok(Arc::new(Self {
            endpoint,
            sentinel,
            current: RwLock::new(Arc::new(connections)),
            durable_turn: AtomicUsize::new(0),
            pushes,
            events,
            gate: CheckGate::default(),
        }))
    }

    /// A client for the master: the URL's server, or the one the Sentinels name.
    async fn master_client(
        endpoint: &Endpoint,
        sentinel: Option<&tokio::sync::Mutex<SentinelClient>>,
    ) -> Result<(redis::Client, Option<String>), RedisError> {
        match (sentinel, &endpoint.url.topology) {
            (Some(sentinel), _) => {
                let client = sentinel.lock().await.async_get_client().await?;
                let address = client.get_connection_info().addr().to_string();
                Ok((client, Some(address)))
            }
            (None, Topology::Server(url)) => Ok((endpoint.client(&with_resp3(url))?, None)),
            (None, _) => unreachable!("a server link is made for a server URL or Sentinels"),
        }
    }

    async fn connections_to(
        (client, address): (redis::Client, Option<String>),
        pushes: &mpsc::UnboundedSender<PushInfo>,
        durable: usize,
    ) -> Result<ServerConnections, RedisError> {
        let config = manager_config();
        let shared = client
            .get_connection_manager_with_config(config.clone())
            .await?;
        let durable = futures_util::future::try_join_all(
            (0..durable).map(|_| client.get_connection_manager_with_config(config.clone())),
        )
        .await?;
        let mut subscriber = client
            .get_connection_manager_with_config(
                config
                    .clone()
                    .set_push_sender(pushes.clone())
                    .set_automatic_resubscription(),
            )
            .await?;
        subscriber.psubscribe(EVENTS_PATTERN).await?;
        Ok(ServerConnections {
            address,
            shared,
            subscriber,
            durable,
            workers: Arc::new(WorkerConnections {
                client,
                config,
                by_thread: Mutex::new(HashMap::new()),
            }),
        })
    }

    async fn connection(self: &Arc<Self>) -> Connection {
        let current = self.current.read().clone();
        let on_worker = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
        });
        if on_worker {
            match current.workers.of_this_thread().await {
                Ok(connection) => {
                    return Connection::Worker(connection, current.workers.clone(), self.clone());
                }
                // Redis is down: the shared connection fails too, and the
                // request reports that; a warning per request would flood.
                Err(error) => {
                    tracing::debug!(%error, "no connection of this worker's own; using the shared one")
                }
            }
        }
        Connection::Server(current.shared.clone(), self.clone())
    }

    /// One of the connections for waited writes, in turn (the shared one
    /// when there are none).
    fn durable_connection(self: &Arc<Self>) -> Connection {
        let current = self.current.read().clone();
        let turn = self.durable_turn.fetch_add(1, Ordering::Relaxed);
        let manager = match current.durable.len() {
            0 => current.shared.clone(),
            n => current.durable[turn % n].clone(),
        };
        Connection::Server(manager, self.clone())
    }

    /// How many replicas the master has connected now, if it says.
    async fn replicas(self: &Arc<Self>) -> Option<usize> {
        let mut shared = self.current.read().shared.clone();
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut shared)
            .await
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
    }

    /// Pings through the subscriber until Redis answers: each attempt
    /// makes its manager reconnect (and resubscribe).
    async fn ping_subscriber_until_it_answers(self: Arc<Self>) {
        loop {
            let mut subscriber = self.current.read().subscriber.clone();
            let pong: Result<String, _> = redis::cmd("PING").query_async(&mut subscriber).await;
            if pong.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Asks the Sentinels where the master is, again and again for a while
    /// (a failover takes them a few seconds); once it moved, connects there
    /// and tells the hub to read its sockets' places again.
    async fn follow_the_master(&self) -> Result<(), RedisError> {
        let deadline = Instant::now() + FOLLOW_FOR;
        loop {
            // redis-rs checks the master it is told of (ROLE): a stalled one
            // would hold the question until its timeout, past the promotion.
            let asked = tokio::time::timeout(
                VIEW_TIMEOUT,
                Self::master_client(&self.endpoint, self.sentinel.as_ref()),
            )
            .await;
            if let Ok(Ok((client, address))) = asked
                && address != self.current.read().address
            {
                let connections = Self::connections_to(
                    (client, address.clone()),
                    &self.pushes,
                    self.endpoint.durable_connections,
                )
                .await?;
                *self.current.write() = Arc::new(connections);
                tracing::warn!(
                    master = address.as_deref().unwrap_or_default(),
                    "the Sentinels name a new master; following it"
                );
                let _ = self.events.send(StoreEvent::Resumed);
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
    }
}

impl Follow for FollowedServer {
    fn check_soon(self: Arc<Self>) {
        // A fixed address has nowhere else to be: its managers reconnect.
        if self.sentinel.is_none() || !self.gate.start() {
            return;
        }
        tokio::spawn(async move {
            if let Err(error) = self.follow_the_master().await {
                tracing::debug!(%error, "could not ask the Sentinels for the master");
            }
            self.gate.done();
        });
    }
}

/// Connections made on the threads that answer HTTP, one per thread, driven
/// by that thread's own runtime. With one shared connection a join's answer
/// crossed from its actix worker to the multiplexer's task on another
/// thread and back: those wake-ups were the biggest part of a node's CPU per
/// Redis join (BENCHMARKS.md, issue 14, item 3). Each reconnects by itself
/// (RESP3 tells it of a disconnect), and a call that finds its reconnect
/// attempts spent is sent again ([`again_if_it_never_ran`]), so the first
/// call after Redis returns succeeds; one that failed a call is dropped and
/// made again on the worker's next call.
pub(super) struct WorkerConnections {
    client: redis::Client,
    config: ConnectionManagerConfig,
    by_thread: Mutex<HashMap<ThreadId, Arc<tokio::sync::OnceCell<ConnectionManager>>>>,
}

impl WorkerConnections {
    /// This thread's connection, made on first use. Its making is held to
    /// [`RESPONSE_TIMEOUT`] whatever the retries inside it: a master that
    /// was stopped (not killed) accepts the connection and never answers
    /// its handshake, and a caller waiting on it would wait past the
    /// promotion of its replica.
    async fn of_this_thread(&self) -> Result<ConnectionManager, RedisError> {
        let cell = self
            .by_thread
            .lock()
            .entry(std::thread::current().id())
            .or_default()
            .clone();
        if let Some(made) = cell.get() {
            return Ok(made.clone());
        }
        let made = cell.get_or_try_init(|| {
            self.client
                .get_connection_manager_with_config(self.config.clone())
        });
        match tokio::time::timeout(RESPONSE_TIMEOUT, made).await {
            Ok(made) => made.cloned(),
            Err(_) => Err(timed_out("making this thread's connection")),
        }
    }

    /// `answer`, forgetting this thread's connection if it fails with an
    /// error of the connection itself (not a script's refusal).
    fn watch<'a, T: Send + 'a>(self: &Arc<Self>, answer: RedisFuture<'a, T>) -> RedisFuture<'a, T> {
        let workers = self.clone();
        Box::pin(async move {
            let answer = answer.await;
            if let Err(error) = &answer
                && (error.is_io_error()
                    || error.is_connection_dropped()
                    || error.is_connection_refusal()
                    || error.is_timeout())
            {
                workers
                    .by_thread
                    .lock()
                    .remove(&std::thread::current().id());
            }
            answer
        })
    }
}

/// A Redis Cluster, its connections made again when the cluster's view of
/// who serves which slots changes (a replica promoted) after calls failed.
pub(super) struct FollowedCluster {
    endpoint: Endpoint,
    /// The URL's seeds.
    url_seeds: Vec<(String, u16)>,
    /// The view the connections were made from, with the nodes it lists.
    built: Mutex<ClusterView>,
    commands: RwLock<ClusterConnection>,
    subscriber: RwLock<ClusterConnection>,
    /// For writes that wait for replicas ([`DURABLE_CONNECTIONS`]).
    durable: RwLock<Vec<ClusterConnection>>,
    durable_turn: AtomicUsize,
    /// The room channels this node subscribed to.
    watched: Mutex<HashSet<String>>,
    pushes: mpsc::UnboundedSender<PushInfo>,
    events: broadcast::Sender<StoreEvent>,
    gate: CheckGate,
}

/// Who serves which slots, as a node of the cluster sees it (`CLUSTER
/// NODES`), and which nodes answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ClusterView {
    /// Each slot range and its master, failing or not: this changes when a
    /// replica is promoted, not when a master is first suspected.
    slots: Vec<((u16, u16), (String, u16))>,
    /// The nodes not marked failing: seeds for fresh connections.
    healthy: Vec<(String, u16)>,
    /// The fewest healthy replicas a master that serves slots has.
    fewest_replicas: Option<usize>,
}

impl ClusterView {
    /// Reads `CLUSTER NODES`:
    /// `<id> <ip:port@bus[,host]> <flags> <master> <ping> <pong> <epoch> <link> <slots…>`.
    fn parse(text: &str) -> Self {
        let mut view = Self::default();
        // The masters that serve slots, and the healthy replicas of each.
        let mut serving = HashSet::new();
        let mut replicas: HashMap<&str, usize> = HashMap::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(id), Some(flags), Some(master)) =
                (fields.first(), fields.get(2), fields.get(3))
            else {
                continue;
            };
            if flags.contains("master") && fields.len() > 8 {
                serving.insert(*id);
            } else if flags.contains("slave") && !flags.contains("fail") {
                *replicas.entry(master).or_insert(0) += 1;
            }
        }
        view.fewest_replicas = serving
            .iter()
            .map(|id| replicas.get(id).copied().unwrap_or(0))
            .min();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(address), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            let address = address.split(['@', ',']).next().unwrap_or_default();
            let Some((host, port)) = address
                .rsplit_once(':')
                .and_then(|(host, port)| Some((host.to_owned(), port.parse::<u16>().ok()?)))
            else {
                continue;
            };
            if host.is_empty() {
                continue;
            }
            let failing = ["fail", "noaddr", "handshake"]
                .iter()
                .any(|flag| flags.contains(flag));
            if !failing {
                view.healthy.push((host.clone(), port));
            }
            if flags.contains("master") {
                for range in fields.iter().skip(8).filter(|r| !r.starts_with('[')) {
                    let bounds = match range.split_once('-') {
                        Some((a, b)) => a.parse().ok().zip(b.parse().ok()),
                        None => range.parse().ok().map(|slot| (slot, slot)),
                    };
                    if let Some(bounds) = bounds {
                        view.slots.push((bounds, (host.clone(), port)));
                    }
                }
            }
        }
        view.slots.sort();
        view.healthy.sort();
        view
    }
}

/// How long asking one node for its view may take.
const VIEW_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a check goes on asking for a new view after calls failed, and
/// how often: a failover takes the cluster a few seconds.
const FOLLOW_FOR: Duration = Duration::from_secs(15);
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

impl FollowedCluster {
    async fn connect(
        endpoint: Endpoint,
        pushes: mpsc::UnboundedSender<PushInfo>,
        events: broadcast::Sender<StoreEvent>,
    ) -> Result<Arc<Self>, StoreError> {
        let Topology::Cluster(seeds) = &endpoint.url.topology else {
            unreachable!("a cluster link is made for a cluster URL")
        };
        let url_seeds = seeds.clone();
        let view = Self::view(&endpoint, &url_seeds).await.unwrap_or_default();
        let (commands, subscriber, durable) =
            Self::connections(&endpoint, &Self::seeds(&view, &url_seeds), &pushes)
                .await
                .map_err(unavailable)?;
        Ok(Arc::new(Self {
            endpoint,
            url_seeds,
            built: Mutex::new(view),
            commands: RwLock::new(commands),
            subscriber: RwLock::new(subscriber),
            durable: RwLock::new(durable),
            durable_turn: AtomicUsize::new(0),
            watched: Mutex::new(HashSet::new()),
            pushes,
            events,
            gate: CheckGate::default(),
        }))
    }

    /// The healthy nodes of `view`, or the URL's seeds when it has none: a
    /// stalled seed would hold up every fresh connection until it timed out.
    fn seeds(view: &ClusterView, url_seeds: &[(String, u16)]) -> Vec<(String, u16)> {
        if view.healthy.is_empty() {
            url_seeds.to_vec()
        } else {
            view.healthy.clone()
        }
    }

    /// The view of whichever of `nodes` answers first.
    async fn view(endpoint: &Endpoint, nodes: &[(String, u16)]) -> Option<ClusterView> {
        let asks = nodes.iter().map(|(host, port)| {
            Box::pin(async move {
                let ask = async {
                    let mut connection = endpoint
                        .node_client(host, *port)?
                        .get_multiplexed_async_connection()
                        .await?;
                    redis::cmd("CLUSTER")
                        .arg("NODES")
                        .query_async::<String>(&mut connection)
                        .await
                };
                match tokio::time::timeout(VIEW_TIMEOUT, ask).await {
                    Ok(Ok(text)) => Ok(ClusterView::parse(&text)),
                    _ => Err(()),
                }
            })
        });
        futures_util::future::select_ok(asks)
            .await
            .ok()
            .map(|(view, _)| view)
    }

    async fn connections(
        endpoint: &Endpoint,
        seeds: &[(String, u16)],
        pushes: &mpsc::UnboundedSender<PushInfo>,
    ) -> Result<(ClusterConnection, ClusterConnection, Vec<ClusterConnection>), RedisError> {
        let commands = endpoint.cluster_client(seeds, None)?;
        let subscriber = endpoint.cluster_client(seeds, Some(pushes.clone()))?;
        let durable = endpoint.cluster_client(seeds, None)?;
        let durable = futures_util::future::try_join_all(
            (0..endpoint.durable_connections).map(|_| durable.get_async_connection()),
        );
        futures_util::try_join!(
            commands.get_async_connection(),
            subscriber.get_async_connection(),
            durable
        )
    }

    fn connection(self: &Arc<Self>) -> Connection {
        Connection::Cluster(self.commands.read().clone(), self.clone())
    }

    /// One of the connections for waited writes, in turn (the commands'
    /// when there are none).
    fn durable_connection(self: &Arc<Self>) -> Connection {
        let durable = self.durable.read();
        let turn = self.durable_turn.fetch_add(1, Ordering::Relaxed);
        match durable.len() {
            0 => self.connection(),
            n => Connection::Cluster(durable[turn % n].clone(), self.clone()),
        }
    }

    async fn watch(&self, channel: &str) -> Result<(), RedisError> {
        if !self.watched.lock().insert(channel.to_owned()) {
            return Ok(());
        }
        let mut subscriber = self.subscriber.read().clone();
        if let Err(error) = subscriber.ssubscribe(channel).await {
            self.watched.lock().remove(channel);
            return Err(error);
        }
        Ok(())
    }

    /// Asks the cluster for its view until it differs from the one the
    /// connections were made from (a replica was promoted), for a while;
    /// then makes fresh connections from it.
    async fn follow_the_cluster(&self) -> Result<(), RedisError> {
        let deadline = Instant::now() + FOLLOW_FOR;
        while Instant::now() < deadline {
            let built = self.built.lock().clone();
            // Every node known, the failing ones too: asked in parallel, the
            // first answer counts.
            let mut nodes = built.healthy.clone();
            nodes.extend(built.slots.iter().map(|(_, node)| node.clone()));
            nodes.extend(self.url_seeds.iter().cloned());
            nodes.sort();
            nodes.dedup();
            if let Some(view) = Self::view(&self.endpoint, &nodes).await
                && view.slots != built.slots
            {
                return self.reconnect(view).await;
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
        Ok(())
    }

    /// Makes fresh connections from `view`, subscribes every watched
    /// channel on them, and tells the hub that events may have been lost.
    async fn reconnect(&self, view: ClusterView) -> Result<(), RedisError> {
        let seeds = Self::seeds(&view, &self.url_seeds);
        let (commands, mut subscriber, durable) =
            Self::connections(&self.endpoint, &seeds, &self.pushes).await?;
        let channels: Vec<String> = self.watched.lock().iter().cloned().collect();
        for channel in &channels {
            subscriber.ssubscribe(channel).await?;
        }
        *self.commands.write() = commands;
        *self.subscriber.write() = subscriber;
        *self.durable.write() = durable;
        *self.built.lock() = view;
        tracing::warn!(
            channels = channels.len(),
            "the cluster moved slots to other masters; following them"
        );
        let _ = self.events.send(StoreEvent::Resumed);
        Ok(())
    }
}

impl Follow for FollowedCluster {
    fn check_soon(self: Arc<Self>) {
        if !self.gate.start() {
            return;
        }
        tokio::spawn(async move {
            if let Err(error) = self.follow_the_cluster().await {
                tracing::debug!(%error, "could not reconnect to the cluster yet");
            }
            self.gate.done();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_urls_shown() {
        assert_eq!(
            redacted("rediss://app:p%40ss@h:6380/0"),
            "rediss://app:***@h:6380/0"
        );
        assert_eq!(redacted("redis://:secret@h"), "redis://:***@h");
        assert_eq!(
            redacted("redis+sentinel://:a@s1,s2/m?sentinel_username=u&sentinel_password=b"),
            "redis+sentinel://:***@s1,s2/m?sentinel_username=u&sentinel_password=***"
        );
        assert_eq!(redacted("redis://h:6379/"), "redis://h:6379/");
        // An unencoded `/` in a password (base64 keys have them).
        assert_eq!(
            redacted("rediss://:ab/c+d=@h:6380/0"),
            "rediss://:***@h:6380/0"
        );
        assert_eq!(
            redacted("redis+cluster://:ab/cd@h1,h2/"),
            "redis+cluster://:***@h1,h2/"
        );
    }

    #[test]
    fn urls_name_their_topology_tls_and_credentials() {
        let url = RedisUrl::parse("redis://127.0.0.1:6379/").unwrap();
        assert_eq!(
            url.topology,
            Topology::Server("redis://127.0.0.1:6379/".into())
        );
        assert!(!url.tls);

        let url = RedisUrl::parse("rediss+cluster://app:p%40ss@a:7000,b:7001/").unwrap();
        assert!(url.tls);
        assert_eq!(
            url.topology,
            Topology::Cluster(vec![("a".into(), 7000), ("b".into(), 7001)])
        );
        assert_eq!(url.username.as_deref(), Some("app"));
        assert_eq!(url.password.as_deref(), Some("p@ss"));

        let url = RedisUrl::parse(
            "redis+sentinel://:secret@s1:26379,s2/mymaster?sentinel_password=watch%20it",
        )
        .unwrap();
        assert_eq!(
            url.topology,
            Topology::Sentinel {
                sentinels: vec![("s1".into(), 26379), ("s2".into(), 26379)],
                master: "mymaster".into(),
                username: None,
                password: Some("watch it".into()),
            }
        );
        assert_eq!(url.username, None);
        assert_eq!(url.password.as_deref(), Some("secret"));
    }

    #[test]
    fn a_cluster_view_changes_when_a_replica_is_promoted_not_when_a_master_fails() {
        let before = before_text();
        let suspected = before.replace("myself,master - 0 0 1", "master,fail? - 0 0 1");
        let promoted = "\
a1 127.0.0.1:7000@17000 master,fail - 0 0 1 disconnected
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383
c3 127.0.0.1:7002@17002 myself,master - 0 0 3 connected 0-8191";
        let (before, suspected, promoted) = (
            ClusterView::parse(before),
            ClusterView::parse(&suspected),
            ClusterView::parse(promoted),
        );
        assert_eq!(before.slots, suspected.slots);
        assert_ne!(
            suspected.healthy, before.healthy,
            "a failing node is no seed"
        );
        assert_ne!(promoted.slots, before.slots);
        assert_eq!(promoted.slots[0], ((0, 8191), ("127.0.0.1".into(), 7002)));
        // a1 has its replica, b2 none; after the promotion nobody has one.
        assert_eq!(before.fewest_replicas, Some(0));
        assert_eq!(promoted.fewest_replicas, Some(0));
        let both = format!(
            "{}\nd4 127.0.0.1:7003@17003 slave b2 0 0 2 connected",
            before_text()
        );
        assert_eq!(ClusterView::parse(&both).fewest_replicas, Some(1));
    }

    fn before_text() -> &'static str {
        "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-8191
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383
c3 127.0.0.1:7002@17002 slave a1 0 0 1 connected"
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, says) in [
            ("http://x", "unknown scheme"),
            ("localhost:6379", "not a URL"),
            ("redis+sentinel://s1:26379/", "names its master"),
            ("redis+cluster://a:x/", "bad port"),
            ("redis+cluster://:1/", "no host"),
        ] {
            let error = RedisUrl::parse(url).unwrap_err();
            assert!(error.contains(says), "{url}: {error}");
        }
    }
}
