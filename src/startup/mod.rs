//! Start-up: building and running the application: the store, the hub, the promoter,
//! and the HTTP server, wired together and stopped by one shutdown signal,
//! after a drain that lets a load balancer take the node out first.

pub mod config;
pub mod demo;
pub mod healthcheck;
pub mod rooms_file;
mod server;
pub mod telemetry;
mod write_guard;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::dev::{Server, ServerHandle};
use actix_web::web;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::http::client_address::TrustedProxies;
use crate::http::ops;
use crate::http::pages::operator_templates::{OperatorTemplates, TemplatesDirError};
use crate::http::state::{AdminAccess, AppParts, ClientRules, Live, Ops, ServerSettings};
use crate::live::callbacks::{Callbacks, CallbacksParts};
use crate::live::history::RoomHistory;
use crate::live::hub::Hub;
use crate::live::outbound::{Outbound, OutboundPolicy};
use crate::live::promoter::{Promoter, Wakeups};
use crate::live::tasks::Tasks;
use crate::store::measured::Measured;
use crate::store::memory::MemoryStore;
use crate::store::redis::{RedisOptions, RedisStore};
use crate::store::{SaleStore, Store};
use crate::words::clock::{Moment, SharedClock};
use crate::words::credentials::{Credentials, random_secret};
use crate::words::origin_token::{OriginToken, OriginTokenError};
use crate::words::push::PushHosts;
use config::Settings;
use rooms_file::RoomsFile;

/// How long shutdown waits for sockets to send their close frames and
/// background tasks to stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Open files kept for everything but visitor sockets.
const RESERVED_FILES: u64 = 500;

fn default_socket_limit() -> usize {
    let open_files = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    open_files.saturating_sub(RESERVED_FILES).max(1) as usize
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: String,
        source: std::io::Error,
    },
    #[error("cannot use the Redis store at {url}: {reason}")]
    Store { url: String, reason: String },
    #[error("could not set up the demo room: {0}")]
    Demo(String),
    #[error(transparent)]
    Rooms(#[from] rooms_file::RoomsFileError),
    #[error(transparent)]
    Templates(#[from] TemplatesDirError),
    #[error(
        "the admin token must be at least {min} characters (it has {given}); leave it out to have a strong one generated"
    )]
    WeakAdminToken { min: usize, given: usize },
    #[error("origin token number {number}: {error}")]
    BadOriginToken {
        number: usize,
        error: OriginTokenError,
    },
    #[error(
        "origin token number {number} is the admin token; an origin token must be a token of its own"
    )]
    OriginTokenIsAdminToken { number: usize },
    #[error(
        "--previous-secret is the same as --secret; give the secret being replaced, or leave it out"
    )]
    PreviousSecretIsCurrent,
    #[error("could not write the generated admin token to {path}: {source}; give --admin-token")]
    AdminTokenFile {
        path: String,
        source: std::io::Error,
    },
}

/// Makes an admin token for a node started without one and hands it to the
/// operator through a file only they can read, never through the log, which
/// log shippers copy to places the operator does not control.
fn generate_admin_token() -> Result<String, StartError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    let token = random_secret();
    let path = std::env::temp_dir().join(format!("waitroom-admin-token-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| writeln!(file, "{token}"));
    if let Err(source) = written {
        return Err(StartError::AdminTokenFile {
            path: path.display().to_string(),
            source,
        });
    }
    tracing::warn!(
        admin_token_file = %path.display(),
        "no --admin-token given: generated one for this process and wrote it to a file only this user can read"
    );
    Ok(token)
}

/// Each origin token read (`TOKEN`, or `TOKEN=ROOM+ROOM…`), long enough
/// to be unguessable and not the admin token (which would make the
/// narrower token a second name for the full one).
fn read_origin_tokens(
    tokens: &[String],
    admin_token: &str,
) -> Result<Vec<OriginToken>, StartError> {
    tokens
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let number = index + 1;
            let token = OriginToken::parse(text, config::MIN_ORIGIN_TOKEN_CHARS)
                .map_err(|error| StartError::BadOriginToken { number, error })?;
            if token.token() == admin_token {
                return Err(StartError::OriginTokenIsAdminToken { number });
            }
            Ok(token)
        })
        .collect()
}

/// The stores an application runs on: admission and the sale, on the
/// embedded memory store or on one shared Redis.
#[derive(Clone)]
pub struct Stores {
    pub admission: Arc<dyn Store>,
    pub sale: Arc<dyn SaleStore>,
}

impl Stores {
    pub fn memory(clock: SharedClock) -> Self {
        Self::memory_keeping(clock, crate::words::report::DEFAULT_REPORT_KEEP_DAYS)
    }

    /// [`Stores::memory`], keeping closed rooms' reports `report_keep_days`.
    pub fn memory_keeping(clock: SharedClock, report_keep_days: u64) -> Self {
        let store = MemoryStore::new(clock).keep_reports_for(report_keep_days);
        Self {
            sale: Arc::new(store.sale()),
            admission: Arc::new(store),
        }
    }

    /// Redis at `url`; `clock`: `None` for Redis server time, a driven clock in tests.
    pub async fn redis(
        url: &str,
        clock: Option<SharedClock>,
    ) -> Result<Self, crate::store::StoreError> {
        Self::redis_with(url, &RedisOptions::default(), clock).await
    }

    /// [`Stores::redis`], with TLS roots and replicas to wait for.
    pub async fn redis_with(
        url: &str,
        options: &RedisOptions,
        clock: Option<SharedClock>,
    ) -> Result<Self, crate::store::StoreError> {
        let store = Arc::new(RedisStore::connect_with(url, options, clock).await?);
        Ok(Self {
            admission: store.clone(),
            sale: store,
        })
    }
}

/// Handles the embedding code (and tests) keep once the server runs.
#[derive(Clone)]
pub struct AppHandle {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub promoter: Promoter,
    pub credentials: Arc<Credentials>,
    pub clock: SharedClock,
    /// Every task of the application (tests may add their own).
    pub tasks: Tasks,
    server: ServerHandle,
    metrics_server: Option<ServerHandle>,
    /// `/readyz` answers 503 once set.
    draining: Arc<AtomicBool>,
    /// How long a drain keeps serving (`--drain-s`).
    drain: Duration,
    /// The listening socket (another handle on the server's), to stop
    /// accepting connections without stopping the server.
    listener: Arc<std::net::TcpListener>,
}

impl AppHandle {
    /// Stops the node the way a load balancer needs: `/readyz` answers 503
    /// at once while everything else is served as before for the drain's
    /// length (or until `cut_short` resolves); then the listening socket is
    /// closed, so a new connection is refused at once (a proxy tries
    /// another node), every socket is told to reconnect (1012), and the
    /// requests in flight are finished (`shutdown`).
    pub async fn drain_and_stop(&self, cut_short: impl std::future::Future<Output = ()>) {
        self.draining.store(true, Ordering::Relaxed);
        tracing::info!(
            drain_s = self.drain.as_secs(),
            "draining: /readyz answers 503; serving on until the drain ends"
        );
        tokio::select! {
            () = tokio::time::sleep(self.drain) => {}
            () = cut_short => tracing::warn!("drain cut short"),
        }
        self.stop_accepting().await;
        tracing::info!(
            sockets = self.hub.registry().open_sockets(),
            "no longer accepting connections; telling every socket to reconnect (1012)"
        );
        self.hub.close_every_socket_for_restart();
        self.shutdown().await;
    }

    /// Accepts no more connections: the server stops polling its listener,
    /// which is then shut at once, so that connecting is refused (a proxy
    /// tries another node) rather than left waiting in the kernel's queue,
    /// where a request could be sent and never answered. (Shut first, the
    /// server's accept loop would log an error; shut after, it still may:
    /// see `telemetry::listener_shut`.) Connections already open go on.
    async fn stop_accepting(&self) {
        self.server.pause().await;
        telemetry::listener_shut();
        if let Err(error) =
            socket2::SockRef::from(&*self.listener).shutdown(std::net::Shutdown::Read)
        {
            tracing::warn!(%error, "could not close the listening socket");
        }
    }

    /// Whether shutdown has begun: every task was told to stop.
    pub fn stopping(&self) -> bool {
        self.tasks.stopping()
    }

    /// Closes every socket ("service restart": 1012) and stops every task,
    /// waiting for them, then stops the server gracefully: the requests in
    /// flight are finished.
    pub async fn shutdown(&self) {
        if !self.tasks.shut_down(SHUTDOWN_GRACE).await {
            tracing::warn!("some tasks were still running when shutdown stopped waiting");
        }
        self.server.stop(true).await;
        if let Some(metrics) = &self.metrics_server {
            metrics.stop(true).await;
        }
    }
}

pub struct Application {
    port: u16,
    server: Server,
    /// The `--metrics-listen` server and its port.
    metrics_server: Option<(Server, u16)>,
    handle: AppHandle,
}

impl Application {
    /// Builds the application on the store the settings name: Redis (its
    /// server time decides) with `--redis-url`, the memory store without.
    pub async fn build(settings: Settings, clock: SharedClock) -> Result<Self, StartError> {
        // A bad rooms file stops the start before anything is connected.
        let rooms = read_rooms(&settings)?;
        let stores = match &settings.redis_url {
            Some(url) => Stores::redis_with(url, &settings.redis_options(), None)
                .await
                .map_err(|error| StartError::Store {
                    url: crate::store::redis::redacted(url),
                    reason: error.to_string(),
                })?,
            None => Stores::memory_keeping(clock.clone(), settings.report_keep_days),
        };
        Self::assemble(settings, clock, stores, rooms).await
    }

    /// Builds the application on given stores (tests drive their clock).
    pub async fn build_with_stores(
        settings: Settings,
        clock: SharedClock,
        stores: Stores,
    ) -> Result<Self, StartError> {
        let rooms = read_rooms(&settings)?;
        Self::assemble(settings, clock, stores, rooms).await
    }

    /// The application's steps: its keys, the rooms file's rooms, the live
    /// parts and their tasks, the demo, then the servers.
    async fn assemble(
        settings: Settings,
        clock: SharedClock,
        stores: Stores,
        rooms: Option<RoomsFile>,
    ) -> Result<Self, StartError> {
        // First, so that what is measured from here on is recorded.
        let metrics = ops::metrics_handle();
        let Stores {
            admission: store,
            sale,
        } = stores;
        let sale = Measured::sale(sale, store.name());
        let store = Measured::store(store);
        let keys = Keys::from_settings(&settings)?;
        let bound = bind(&settings)?;
        // Before anything serves or ticks: the node's first answer already
        // knows the file's rooms.
        if let Some(rooms) = &rooms {
            rooms.apply(store.as_ref()).await?;
        }
        let outbound = Outbound::new(OutboundPolicy {
            allow_networks: settings.outbound_allow_networks.clone(),
        });
        let push_hosts = PushHosts::new(settings.push_hosts.clone());
        let live = LiveParts::start(
            &store,
            &sale,
            &keys.credentials,
            &clock,
            outbound,
            push_hosts,
            settings.notify_takeover_s * 1000,
        );
        if settings.demo_room {
            start_demo(&settings, &store, &sale, &clock, &live).await?;
        }
        let credentials = keys.credentials.clone();
        let parts = app_parts(&settings, &store, &sale, &clock, keys, &live, metrics)?;
        let draining = parts.ops.draining.clone();
        let (port, server, metrics_server, listening) = serve(&settings, parts, bound)?;
        let handle = AppHandle {
            store,
            hub: live.hub,
            promoter: live.promoter,
            credentials,
            clock,
            tasks: live.tasks,
            server: server.handle(),
            metrics_server: metrics_server.as_ref().map(|(server, _)| server.handle()),
            draining,
            drain: Duration::from_secs(settings.drain_s),
            listener: Arc::new(listening),
        };
        Ok(Self {
            port,
            server,
            metrics_server,
            handle,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the `--metrics-listen` server, when there is one.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_server.as_ref().map(|(_, port)| *port)
    }

    pub fn handle(&self) -> AppHandle {
        self.handle.clone()
    }

    /// Serves until stopped; SIGINT or SIGTERM drain the node first (a
    /// second signal cuts the drain short).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let handle = self.handle.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            handle.drain_and_stop(wait_for_signal()).await;
        });
        if let Some((metrics, _)) = self.metrics_server {
            tokio::spawn(metrics);
        }
        self.server.await
    }
}

/// What the node signs and checks with: the credentials, the admin token
/// and the origins' tokens, from the settings (generated where allowed).
struct Keys {
    credentials: Arc<Credentials>,
    admin_token: String,
    origin_tokens: Vec<OriginToken>,
}

impl Keys {
    fn from_settings(settings: &Settings) -> Result<Keys, StartError> {
        let secret = settings.secret.clone().unwrap_or_else(|| {
            tracing::warn!("no --secret given: generated one for this process; tickets and passes will not survive a restart or verify on other nodes");
            random_secret()
        });
        if settings.previous_secret.as_ref() == Some(&secret) {
            return Err(StartError::PreviousSecretIsCurrent);
        }
        if let Some(token) = &settings.admin_token
            && token.chars().count() < config::MIN_ADMIN_TOKEN_CHARS
        {
            return Err(StartError::WeakAdminToken {
                min: config::MIN_ADMIN_TOKEN_CHARS,
                given: token.chars().count(),
            });
        }
        let admin_token = match settings.admin_token.clone() {
            Some(token) => token,
            None => generate_admin_token()?,
        };
        let origin_tokens = read_origin_tokens(&settings.origin_tokens, &admin_token)?;
        let credentials = Arc::new(
            Credentials::rotating(&secret, settings.previous_secret.as_deref())
                .with_public_url(settings.public_url.clone()),
        );
        Ok(Keys {
            credentials,
            admin_token,
            origin_tokens,
        })
    }
}

/// This node's live side: the hub and its sockets, the promoter (with the
/// guarded client its health checks call origins through, and the
/// notifications' sender it tells of rooms with events), and the tasks
/// that run them.
struct LiveParts {
    tasks: Tasks,
    hub: Arc<Hub>,
    promoter: Promoter,
    wakeups: Arc<Wakeups>,
    history: Arc<RoomHistory>,
}

impl LiveParts {
    /// The parts, with the hub and the promoter running.
    fn start(
        store: &Arc<dyn Store>,
        sale: &Arc<dyn SaleStore>,
        credentials: &Arc<Credentials>,
        clock: &SharedClock,
        outbound: Outbound,
        push_hosts: PushHosts,
        takeover_ms: u64,
    ) -> LiveParts {
        let tasks = Tasks::new();
        let callbacks = Callbacks::new(CallbacksParts {
            store: store.clone(),
            clock: clock.clone(),
            credentials: credentials.clone(),
            outbound: outbound.clone(),
            push_hosts,
            tasks: tasks.clone(),
            takeover_ms,
        });
        let hub = Arc::new(Hub::new(store.clone(), credentials.clone()));
        let wakeups = Arc::new(Wakeups::default());
        let history = Arc::new(RoomHistory::new(clock.clone()));
        let promoter = Promoter::with_outbound(
            store.clone(),
            sale.clone(),
            hub.clone(),
            wakeups.clone(),
            history.clone(),
            outbound,
        )
        .with_callbacks(callbacks);
        tasks.spawn_service("hub", hub.clone().run(tasks.clone()));
        tasks.spawn_service("promoter", promoter.clone().run(tasks.clone()));
        LiveParts {
            tasks,
            hub,
            promoter,
            wakeups,
            history,
        }
    }
}

/// The demo room (`--demo-room`), and its simulated visitors.
async fn start_demo(
    settings: &Settings,
    store: &Arc<dyn Store>,
    sale: &Arc<dyn SaleStore>,
    clock: &SharedClock,
    live: &LiveParts,
) -> Result<(), StartError> {
    let opens_at = settings
        .demo_opens_in
        .map(|s| Moment((clock.now_ms() / 1000 + s) * 1000));
    let room = demo::create(
        store.as_ref(),
        sale.as_ref(),
        opens_at,
        settings.demo_target.as_deref(),
    )
    .await
    .map_err(StartError::Demo)?;
    live.tasks.spawn_service(
        "demo visitors",
        demo::simulate_visitors(
            store.clone(),
            live.wakeups.clone(),
            room,
            live.tasks.shutdown_token(),
        ),
    );
    Ok(())
}

/// What the HTTP routes share.
fn app_parts(
    settings: &Settings,
    store: &Arc<dyn Store>,
    sale: &Arc<dyn SaleStore>,
    clock: &SharedClock,
    keys: Keys,
    live: &LiveParts,
    metrics: PrometheusHandle,
) -> Result<AppParts, StartError> {
    let socket_limit = settings.max_sockets.unwrap_or_else(default_socket_limit);
    metrics::gauge!("waitroom_socket_limit").set(socket_limit as f64);
    // From the start, not from the first socket: a node nobody has
    // connected to yet shows 0, not nothing.
    metrics::gauge!("waitroom_sockets_open").set(live.hub.registry().open_sockets() as f64);
    let templates = match &settings.templates_dir {
        Some(dir) => OperatorTemplates::load(dir)?,
        None => OperatorTemplates::none(),
    };
    Ok(AppParts {
        store: web::Data::from(store.clone()),
        sale: web::Data::from(sale.clone()),
        sale_views: Default::default(),
        credentials: web::Data::from(keys.credentials),
        clock: web::Data::from(clock.clone()),
        live: web::Data::new(Live {
            hub: live.hub.clone(),
            wakeups: live.wakeups.clone(),
            history: live.history.clone(),
            tasks: live.tasks.clone(),
            socket_limit,
            socket_ping: Duration::from_millis(settings.socket_ping_ms),
        }),
        admin: web::Data::new(AdminAccess {
            token: keys.admin_token,
            origin_tokens: keys.origin_tokens,
            login_guard: Default::default(),
        }),
        refusal_log: Default::default(),
        clients: web::Data::new(ClientRules {
            trusted_proxies: TrustedProxies::new(settings.trusted_proxies.clone()),
            ipv6_prefix: settings.join_rate_ipv6_prefix,
            join_rate_per_ip: settings.join_rate_per_ip,
            code_guesses_per_ip: Some(settings.code_guesses_per_ip).filter(|n| *n > 0),
            notify_per_ip: settings.notify_per_ip,
            push_hosts: crate::words::push::PushHosts::new(settings.push_hosts.clone()),
        }),
        server: web::Data::new(ServerSettings {
            secure_cookies: settings.secure_cookies,
            body_timeout: Duration::from_millis(settings.body_timeout_ms),
            cors_origins: settings.cors_origins.clone(),
        }),
        ops: web::Data::new(Ops {
            metrics,
            metrics_elsewhere: settings.metrics_listen.is_some(),
            draining: Arc::new(AtomicBool::new(false)),
        }),
        templates: web::Data::new(templates),
    })
}

/// The servers, listening: the port, the server, the `--metrics-listen`
/// one with its port, and another handle on the listening socket.
type Serving = (u16, Server, Option<(Server, u16)>, std::net::TcpListener);

/// The node's sockets, bound before anything is written to the store: a
/// node that cannot have its port (the previous process still holds it)
/// stops before it applies its rooms file, not after. They listen only
/// once the servers are made, just before the node handles signals, so a
/// SIGTERM sent as soon as the port answers finds the drain in place.
struct Bound {
    listener: socket2::Socket,
    metrics: Option<socket2::Socket>,
}

fn listen_error(address: &str) -> impl FnOnce(std::io::Error) -> StartError {
    let address = address.to_string();
    move |source| StartError::Listen { address, source }
}

fn bind(settings: &Settings) -> Result<Bound, StartError> {
    let listener = bind_socket(&settings.listen).map_err(listen_error(&settings.listen))?;
    let metrics = match &settings.metrics_listen {
        Some(address) => Some(bind_socket(address).map_err(listen_error(address))?),
        None => None,
    };
    Ok(Bound { listener, metrics })
}

/// The kernel's default queue, as the metrics listener always had.
const METRICS_BACKLOG: i32 = 128;

fn serve(settings: &Settings, parts: AppParts, bound: Bound) -> Result<Serving, StartError> {
    let Bound { listener, metrics } = bound;
    let listener = listen(listener, LISTEN_BACKLOG).map_err(listen_error(&settings.listen))?;
    let listening = listener
        .try_clone()
        .map_err(listen_error(&settings.listen))?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let metrics_server = match (metrics, &settings.metrics_listen) {
        (Some(metrics), Some(address)) => {
            let metrics = listen(metrics, METRICS_BACKLOG).map_err(listen_error(address))?;
            Some(server::serve_metrics(parts.ops.clone(), metrics).map_err(listen_error(address))?)
        }
        _ => None,
    };
    let server = server::serve(parts, listener, settings, SHUTDOWN_GRACE)
        .map_err(listen_error(&settings.listen))?;
    Ok((port, server, metrics_server, listening))
}

/// The rooms file the settings name, read and checked.
fn read_rooms(settings: &Settings) -> Result<Option<RoomsFile>, StartError> {
    Ok(settings.rooms.as_deref().map(RoomsFile::load).transpose()?)
}

/// Waits for SIGTERM or SIGINT. SIGHUP, which many daemons take for
/// "reload" and whose default would end the node at once (no drain, a
/// memory store lost), is logged and otherwise ignored: nothing here is
/// reloaded, the rooms file is read at start.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int), Ok(mut hangup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            std::future::pending::<()>().await;
            return;
        };
        loop {
            tokio::select! {
                _ = term.recv() => return,
                _ = int.recv() => return,
                _ = hangup.recv() => tracing::warn!(
                    "SIGHUP ignored: nothing is reloaded (the rooms file is read at start; restart the node to apply it)"
                ),
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Connections the kernel queues for `accept`: visitors arrive in bursts,
/// and a full queue drops SYNs, which clients retry only after a second.
pub const LISTEN_BACKLOG: i32 = 4096;

/// A socket bound to `address`, not yet listening: the port is this
/// node's (another process listening on it fails the bind), while
/// connections are still refused.
fn bind_socket(address: &str) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Socket, Type};
    let address = std::net::ToSocketAddrs::to_socket_addrs(address)?
        .next()
        .ok_or_else(|| std::io::Error::other("the address resolves to nothing"))?;
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    Ok(socket)
}

/// The bound socket listening, with a queue of `backlog` (a listener from
/// `std::net::TcpListener::bind` gets the kernel's default of 128).
fn listen(socket: socket2::Socket, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    socket.listen(backlog)?;
    Ok(socket.into())
}
