//! HTTP: the state every handler shares, the errors and extractors, and the
//! routes by feature (visitor API, sockets, operators, sale, pages, ops), and
//! the middleware every answer goes through.

pub mod admin;
pub mod error;
pub mod extractors;
pub mod middleware;
pub mod ops;
pub mod pages;
pub mod sale;
pub mod sockets;
pub mod visitor;

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::live::hub::Hub;
use crate::live::tasks::Tasks;
use crate::store::{SaleStore, Store};
use crate::words::clock::SharedClock;
use crate::words::credentials::Credentials;

/// What every handler shares. Cheap to clone (all handles).
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub sale: Arc<dyn SaleStore>,
    pub hub: Arc<Hub>,
    pub credentials: Arc<Credentials>,
    pub clock: SharedClock,
    pub admin_token: String,
    /// Every task of the application: sockets are spawned through it, and
    /// readiness reports a background task that died.
    pub tasks: Tasks,
    pub metrics: PrometheusHandle,
    /// Sockets this node accepts before answering 503: its open-files limit
    /// less a reserve, so health checks, operators and polling visitors
    /// still get through when the sockets have taken the rest.
    pub socket_limit: usize,
}
