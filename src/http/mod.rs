//! HTTP: the state every handler shares, the errors and extractors, and the
//! routes by feature (visitor API, sockets, operators, sale, pages, ops), and
//! the middleware every answer goes through.

pub mod admin;
pub mod body_configs;
pub mod client_address;
pub mod cookies;
pub mod draw;
pub mod error;
pub mod extractors;
pub mod limits;
pub mod login_guard;
pub mod middleware;
pub mod ops;
pub mod pages;
pub mod refusal_log;
pub mod sale;
pub mod sale_views;
pub mod sockets;
pub mod visitor;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::live::hub::Hub;
use crate::live::promoter::Wakeups;
use crate::live::tasks::Tasks;
use crate::store::{SaleStore, Store};
use crate::words::clock::SharedClock;
use crate::words::credentials::Credentials;

/// What every handler shares. Cheap to clone (all handles).
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub sale: Arc<dyn SaleStore>,
    /// The public sale view, read at most once a second per room.
    pub sale_views: sale_views::SaleViews,
    pub hub: Arc<Hub>,
    /// Rooms used on this node, for the promoter to tick.
    pub wakeups: Arc<Wakeups>,
    pub credentials: Arc<Credentials>,
    pub clock: SharedClock,
    pub admin_token: String,
    /// Wrong admin tokens, counted per client block (see `client_block`).
    pub login_guard: login_guard::LoginGuard,
    /// Which lines about refused requests are written (a flood of bad
    /// requests writes a line per kind and window, not one each).
    pub refusal_log: refusal_log::RefusalLog,
    /// Every task of the application: sockets are spawned through it, and
    /// readiness reports a background task that died.
    pub tasks: Tasks,
    pub metrics: PrometheusHandle,
    /// `/metrics` is served on its own address (`--metrics-listen`), not here.
    pub metrics_elsewhere: bool,
    /// Every cookie carries `Secure` (the server is reached over HTTPS).
    pub secure_cookies: bool,
    /// How long a request body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// Sockets this node accepts before answering 503: its open-files limit
    /// less a reserve, so health checks, operators and polling visitors
    /// still get through when the sockets have taken the rest.
    pub socket_limit: usize,
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: client_address::TrustedProxies,
    /// New places a client address may take per minute in a room, if limited.
    pub join_rate_per_ip: Option<u32>,
    /// Set once the node is shutting down: `/readyz` answers 503 from then
    /// on, so that load balancers send new visitors elsewhere.
    pub draining: Arc<AtomicBool>,
    /// The IPv6 prefix whose addresses count as one client, for the join
    /// limit and the login limit.
    pub join_rate_ipv6_prefix: u8,
}
