//! The application's state, in parts by concern. Each part is registered as
//! a `web::Data` of its own, so a handler or extractor takes only the parts
//! it uses, and its signature says which:
//! - the stores as they are: `web::Data<dyn Store>`, `web::Data<dyn SaleStore>`,
//!   and the sale views' cache, `web::Data<SaleViews>`;
//! - the keys and the time: `web::Data<Credentials>`, `web::Data<dyn Clock>`;
//! - [`Live`]: the hub, the promoter's wake-ups and room history, the
//!   tasks, the socket cap;
//! - [`AdminAccess`]: the admin token and the login guard;
//! - [`ClientRules`]: who a request's client is, and how often it may join;
//! - [`ServerSettings`]: cookies and body deadlines, read by middleware;
//! - [`Ops`]: metrics and draining, for the operations endpoints;
//! - `web::Data<RefusalLog>`: the rate limit on lines about refused requests;
//! - `web::Data<OperatorTemplates>`: the operator's waiting-page templates.
//!
//! [`AppParts`] holds one handle on each, for start-up to build and register.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use actix_web::web;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::http::client_address::TrustedProxies;
use crate::http::login_guard::LoginGuard;
use crate::http::pages::operator_templates::OperatorTemplates;
use crate::http::refusal_log::RefusalLog;
use crate::http::sale_views::SaleViews;
use crate::live::history::RoomHistory;
use crate::live::hub::Hub;
use crate::live::promoter::Wakeups;
use crate::live::tasks::Tasks;
use crate::store::{SaleStore, Store};
use crate::words::RoomId;
use crate::words::clock::Clock;
use crate::words::credentials::{Credentials, constant_time_eq};
use crate::words::origin_token::OriginToken;

/// The live side of the node, as the routes reach it.
pub struct Live {
    pub hub: Arc<Hub>,
    /// Rooms used on this node, for the promoter to tick.
    pub wakeups: Arc<Wakeups>,
    /// Each room's last hour of figures on this node, for the admin chart.
    pub history: Arc<RoomHistory>,
    /// Every task of the application: sockets are spawned through it, and
    /// readiness reports a background task that died.
    pub tasks: Tasks,
    /// Sockets this node accepts before answering 503: its open-files limit
    /// less a reserve, so health checks, operators and polling visitors
    /// still get through when the sockets have taken the rest.
    pub socket_limit: usize,
    /// The sockets' heartbeat: a quiet socket is pinged this often
    /// (`--socket-ping-ms`).
    pub socket_ping: Duration,
}

/// What lets an operator in, and the protected sites' narrower tokens.
pub struct AdminAccess {
    pub token: String,
    /// Tokens of the protected sites (`--origin-token`): they may revoke
    /// passes (in their rooms, where limited) and call `/api/verify`,
    /// nothing else.
    pub origin_tokens: Vec<OriginToken>,
    /// Wrong admin and origin tokens, counted per client block (see `client_block`).
    pub login_guard: LoginGuard,
}

/// Whose token a request's Bearer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenHolder {
    Operator,
    /// The site holding origin token number `.0` (from 0).
    Origin(usize),
}

impl AdminAccess {
    /// Whose token `sent` is, if anyone's. Every token is compared, in
    /// constant time, whatever matched first: how long the answer takes
    /// says nothing about which token, or how much of one, was right.
    pub fn holder_of(&self, sent: &str) -> Option<TokenHolder> {
        let operator = constant_time_eq(sent, &self.token);
        let origin = self
            .origin_tokens
            .iter()
            .enumerate()
            .fold(None, |found, (index, token)| {
                let matched = constant_time_eq(sent, token.token());
                found.or(matched.then_some(index))
            });
        if operator {
            Some(TokenHolder::Operator)
        } else {
            origin.map(TokenHolder::Origin)
        }
    }

    /// Whether the site holding origin token `index` may act in `room`.
    pub fn origin_covers(&self, index: usize, room: &RoomId) -> bool {
        self.origin_tokens
            .get(index)
            .is_some_and(|token| token.covers(room))
    }
}

/// Who a request's client is, and how often it may take a place.
pub struct ClientRules {
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// The IPv6 prefix whose addresses count as one client, for the join
    /// limit and the login limit.
    pub ipv6_prefix: u8,
    /// New places a client address may take per minute in a room, if limited.
    pub join_rate_per_ip: Option<u32>,
    /// Wrong codes a client address may try per minute in a room, unless
    /// turned off (`--code-guesses-per-ip 0`).
    pub code_guesses_per_ip: Option<u32>,
    /// Places of one client address that may hold a request to be
    /// notified at once (`--notify-per-ip`).
    pub notify_per_ip: u32,
    /// Where a client's push subscription may point (`--push-hosts`).
    pub push_hosts: crate::words::push::PushHosts,
}

/// Settings the middleware reads on every request.
pub struct ServerSettings {
    /// Every cookie carries `Secure` (the server is reached over HTTPS).
    pub secure_cookies: bool,
    /// How long a request body may take to arrive.
    pub body_timeout: Duration,
    /// Origins whose pages may call the visitor API (`--cors-origins`; see `http::cors`).
    pub cors_origins: Vec<String>,
}

/// What the operations endpoints report.
pub struct Ops {
    pub metrics: PrometheusHandle,
    /// `/metrics` is served on its own address (`--metrics-listen`), not here.
    pub metrics_elsewhere: bool,
    /// Set once the node is shutting down: `/readyz` answers 503 from then
    /// on, so that load balancers send new visitors elsewhere.
    pub draining: Arc<AtomicBool>,
}

/// One handle on every part (cheap to clone), registered together.
#[derive(Clone)]
pub struct AppParts {
    pub store: web::Data<dyn Store>,
    pub sale: web::Data<dyn SaleStore>,
    /// The public sale view, read at most once a second per room.
    pub sale_views: web::Data<SaleViews>,
    pub credentials: web::Data<Credentials>,
    pub clock: web::Data<dyn Clock>,
    pub live: web::Data<Live>,
    pub admin: web::Data<AdminAccess>,
    /// Which lines about refused requests are written (a flood of bad
    /// requests writes a line per kind and window, not one each).
    pub refusal_log: web::Data<RefusalLog>,
    pub clients: web::Data<ClientRules>,
    pub server: web::Data<ServerSettings>,
    pub ops: web::Data<Ops>,
    /// The operator's own waiting pages (`--templates-dir`), if any.
    pub templates: web::Data<OperatorTemplates>,
}

impl AppParts {
    /// Registers every part as application data.
    pub fn register(&self, cfg: &mut web::ServiceConfig) {
        cfg.app_data(self.store.clone())
            .app_data(self.sale.clone())
            .app_data(self.sale_views.clone())
            .app_data(self.credentials.clone())
            .app_data(self.clock.clone())
            .app_data(self.live.clone())
            .app_data(self.admin.clone())
            .app_data(self.refusal_log.clone())
            .app_data(self.clients.clone())
            .app_data(self.server.clone())
            .app_data(self.ops.clone())
            .app_data(self.templates.clone());
    }
}
