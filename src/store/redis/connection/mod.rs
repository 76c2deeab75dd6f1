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
//!
//! Here: the link every store call goes through ([`Link`]). Beside it: what
//! a URL names (`redis_url`), where and how to connect (`endpoint`), the
//! connection one call takes (`calls`) and each worker's own (`workers`),
//! one followed server (`server`) or cluster (`cluster`), the gate that
//! paces their checks (`follow`), and how a failure is told apart and
//! counted (`failure`).

mod calls;
mod cluster;
mod endpoint;
mod failure;
mod follow;
mod redis_url;
mod server;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, PushInfo, RedisError, Script, TlsCertificates, Value};
use tokio::sync::{broadcast, mpsc};

use crate::store::StoreError;
use crate::words::StoreEvent;

pub(super) use calls::Connection;
use cluster::FollowedCluster;
pub(super) use endpoint::RESPONSE_TIMEOUT;
use endpoint::{DURABLE_CONNECTIONS, Endpoint};
pub(super) use failure::*;
use follow::Follow;
pub use redis_url::*;
use server::FollowedServer;

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
