//! waitroom-testkit: what the integration tests and benches share.
//!
//! Spawns the real application on port 0 with a driven clock, and talks to it
//! over real HTTP and real WebSockets.
#![forbid(unsafe_code)]

pub mod browser;
pub mod docs;
pub mod draw;
pub mod drop_scene;
pub mod health_origin;
pub mod logs;
pub mod node;
pub mod origin;
pub mod ports;
pub mod redis;
pub mod tls;
pub mod unreachable;

pub use ports::free_port;

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use waitroom::startup::Stores;
use waitroom::startup::config::{LogFormat, Settings};
use waitroom::words::clock::ManualClock;
use waitroom::words::join_limit::{DEFAULT_CODE_GUESSES_PER_IP, DEFAULT_IPV6_PREFIX};
use waitroom::words::push::PushHosts;
use waitroom::{AppHandle, Application};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// 2026-01-01T00:00:00Z: a fixed start so runs are repeatable.
pub const START_MS: u64 = 1_767_225_600_000;
/// How long a test waits for something that should happen at once.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Settings for tests: the memory store, an OS-chosen port, fixed secrets,
/// two workers. Kept here rather than in the server, which has no use for
/// them (tests change the fields they need).
pub fn test_settings() -> Settings {
    Settings {
        mode: None,
        listen: "127.0.0.1:0".into(),
        redis_url: None,
        redis_ca_file: None,
        redis_wait_replicas: 0,
        report_keep_days: waitroom::words::report::DEFAULT_REPORT_KEEP_DAYS,
        admin_token: Some("test-admin-token-of-at-least-32-chars".into()),
        secret: Some("test-secret".into()),
        previous_secret: None,
        demo_room: false,
        demo_opens_in: None,
        demo_target: None,
        log_format: LogFormat::Text,
        max_sockets: None,
        workers: Some(2),
        metrics_listen: None,
        secure_cookies: false,
        body_timeout_ms: 10_000,
        write_timeout_ms: 30_000,
        socket_ping_ms: 10_000,
        join_rate_per_ip: None,
        code_guesses_per_ip: DEFAULT_CODE_GUESSES_PER_IP,
        notify_per_ip: 5,
        notify_takeover_s: 60,
        join_rate_ipv6_prefix: DEFAULT_IPV6_PREFIX,
        trusted_proxies: Vec::new(),
        outbound_allow_networks: Vec::new(),
        drain_s: 5,
        public_url: None,
        rooms: None,
        templates_dir: None,
        origin_tokens: Vec::new(),
        cors_origins: Vec::new(),
        push_hosts: PushHosts::default().into_hosts(),
    }
}

pub struct TestApp {
    pub address: String,
    pub port: u16,
    /// The `--metrics-listen` port, when the settings name one.
    pub metrics_port: Option<u16>,
    pub admin_token: String,
    pub clock: ManualClock,
    pub handle: AppHandle,
    /// A client without cookies: each request is a new visitor unless it
    /// sends a ticket.
    pub http: reqwest::Client,
}

impl TestApp {
    /// The app on the memory store, on its own driven clock.
    pub async fn spawn() -> Self {
        let clock = ManualClock::new(START_MS);
        Self::spawn_on(Stores::memory(Arc::new(clock.clone())), clock).await
    }

    /// The app on given stores (several apps on one Redis make many nodes).
    pub async fn spawn_on(stores: Stores, clock: ManualClock) -> Self {
        Self::spawn_with(test_settings(), stores, clock).await
    }

    /// The app with given settings.
    pub async fn spawn_with(settings: Settings, stores: Stores, clock: ManualClock) -> Self {
        logs::init();
        let admin_token = settings.admin_token.clone().unwrap();
        let app = Application::build_with_stores(settings, Arc::new(clock.clone()), stores)
            .await
            .expect("the app builds");
        let port = app.port();
        let metrics_port = app.metrics_port();
        let handle = app.handle();
        tokio::spawn(app.run_until_stopped());
        Self {
            address: format!("http://127.0.0.1:{port}"),
            port,
            metrics_port,
            admin_token,
            clock,
            handle,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                // Never reuse a connection near the server's 5 s keep-alive,
                // when the server may be closing it as a request goes out.
                .pool_idle_timeout(Duration::from_secs(1))
                .build()
                .unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// The body of `GET path`, as text (the metrics, a listing).
    pub async fn get_text(&self, path: &str) -> String {
        self.http
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .bearer_auth(&self.admin_token)
    }

    /// Creates a room through the operator API; `config` may override
    /// anything, including `name` and `target_url`.
    pub async fn create_room(&self, id: &str, config: Value) -> Value {
        let mut body = json!({"id": id, "name": format!("Room {id}"), "target_url": "https://shop.example/buy"});
        body.as_object_mut()
            .unwrap()
            .extend(config.as_object().cloned().unwrap_or_default());
        let response = self
            .admin(reqwest::Method::POST, "/api/admin/rooms")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "creating room {id}");
        response.json().await.unwrap()
    }

    /// Sets up (or replaces) a room's sale through the operator API; the
    /// sale as it answers.
    pub async fn put_sale(&self, room: &str, sale: Value) -> Value {
        let response = self
            .admin(
                reqwest::Method::PUT,
                &format!("/api/admin/rooms/{room}/sale"),
            )
            .json(&sale)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "setting up the sale in {room}");
        response.json().await.unwrap()
    }

    pub async fn patch_room(&self, id: &str, change: Value) -> reqwest::Response {
        self.admin(reqwest::Method::PATCH, &format!("/api/admin/rooms/{id}"))
            .json(&change)
            .send()
            .await
            .unwrap()
    }

    /// A new visitor joins; returns their `Status`.
    pub async fn join_api(&self, room: &str) -> Value {
        let response = self
            .http
            .post(self.url(&format!("/api/rooms/{room}/join")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "joining {room}");
        response.json().await.unwrap()
    }

    pub async fn status_api(&self, room: &str, ticket: &str) -> reqwest::Response {
        self.http
            .get(self.url(&format!("/api/rooms/{room}/status")))
            .bearer_auth(ticket)
            .send()
            .await
            .unwrap()
    }

    /// Advances the driven clock and runs one promoter pass.
    pub async fn step(&self, ms: u64) {
        self.clock.advance_ms(ms);
        self.promote().await;
    }

    /// One promoter pass now, the clock where it is: presence, then every
    /// room's tick (`Promoter::tick_all`). A failed tick (some tests take
    /// the store away) is written out and left to the next pass.
    pub async fn promote(&self) {
        let promoter = &self.handle.promoter;
        promoter.refresh_presence().await;
        if let Err(error) = promoter.tick_all().await {
            eprintln!("tick failed: {error}");
        }
    }

    pub fn ws_url(&self, room: &str, ticket: &str) -> String {
        format!(
            "ws://127.0.0.1:{}/api/rooms/{room}/ws?ticket={ticket}",
            self.port
        )
    }

    pub async fn connect(&self, room: &str, ticket: &str) -> Socket {
        let (socket, _) = tokio_tungstenite::connect_async(self.ws_url(room, ticket))
            .await
            .expect("the socket opens");
        socket
    }

    /// `/api/verify` of `pass` for `room`, the pass as Bearer (see
    /// [`pass_answer`]).
    pub async fn verify(&self, room: &str, pass: &str) -> (u16, String) {
        let response = self
            .http
            .get(self.url(&format!("/api/verify?room={room}")))
            .bearer_auth(pass)
            .send()
            .await
            .unwrap();
        pass_answer(response).await
    }

    /// A new visitor who passes straight into `room`: their pass.
    pub async fn pass_for(&self, room: &str) -> String {
        let status = self.join_api(room).await;
        status["pass"]
            .as_str()
            .unwrap_or_else(|| panic!("a pass for {room}: {status}"))
            .to_owned()
    }

    /// A new visitor of `room` with its socket open and its first status read.
    pub async fn visitor_socket(&self, room: &str) -> (Socket, Value) {
        let status = self.join_api(room).await;
        let mut socket = self
            .connect(room, status["ticket"].as_str().expect("a ticket"))
            .await;
        let first = next_status(&mut socket).await;
        (socket, first)
    }
}

/// A path in the repository: the docs, configs and scripts the tests read.
pub fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A pass check's answer (`/api/verify`, `/api/gate`, a sale call): its
/// status, and for a success how the pass was verified
/// (`X-Waitroom-Verified`: `signature`, else `fully`), for a refusal its
/// error code (see [`error_of`]).
pub async fn pass_answer(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    if status >= 300 {
        return error_of(response).await;
    }
    let how = response
        .headers()
        .get("x-waitroom-verified")
        .map_or("fully", |v| v.to_str().unwrap());
    (status, how.to_string())
}

/// An error answer's status and its `error.code`; the answer must be the
/// JSON error body, saying what went wrong.
pub async fn error_of(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.expect("a JSON error body");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "errors say what went wrong: {body}");
    (status, body["error"]["code"].as_str().unwrap().to_string())
}

/// The next JSON message on a socket (pings and pongs skipped).
pub async fn next_json(socket: &mut Socket) -> Value {
    loop {
        let frame = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .expect("a message in time")
            .expect("the socket is open")
            .expect("a valid frame");
        match frame {
            Message::Text(text) => return serde_json::from_str(&text).expect("JSON"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("expected a text message, got {other:?}"),
        }
    }
}

/// The next `status` message on a socket.
pub async fn next_status(socket: &mut Socket) -> Value {
    loop {
        let message = next_json(socket).await;
        if message["type"] == "status" {
            return message;
        }
    }
}

/// Waits for the close frame and returns its code.
pub async fn close_code(socket: &mut Socket) -> u16 {
    loop {
        let frame = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .expect("the close in time");
        match frame {
            Some(Ok(Message::Close(Some(close)))) => return close.code.into(),
            Some(Ok(Message::Close(None))) => return 1005,
            Some(Ok(_)) => continue,
            Some(Err(error)) => panic!("socket failed instead of closing: {error}"),
            None => panic!("socket ended without a close frame"),
        }
    }
}

pub async fn send_text(socket: &mut Socket, text: impl Into<String>) {
    socket.send(Message::text(text.into())).await.unwrap();
}

/// Sends a request and reads its JSON body, for tests where anything else is a failure.
pub trait FetchJson {
    fn fetch_json(self) -> impl std::future::Future<Output = Value>;
}

impl FetchJson for reqwest::RequestBuilder {
    async fn fetch_json(self) -> Value {
        self.send()
            .await
            .expect("the request is answered")
            .json()
            .await
            .expect("a JSON body")
    }
}

/// A JWT with one character of its signature changed: always a different
/// signature (a middle character carries six whole bits; the last one may
/// carry only padding, so changing it can change nothing).
pub fn tamper(token: &str) -> String {
    let at = token.rfind('.').expect("a JWT") + 5;
    let was = token.as_bytes()[at];
    let now = if was == b'A' { 'B' } else { 'A' };
    format!("{}{now}{}", &token[..at], &token[at + 1..])
}

/// Polls `check` every 100 ms until it gives `Some`, or fails the test
/// naming `what` after `patience` (for what a test cannot await: a page's
/// state, another process).
pub async fn eventually<T, F, Fut>(what: &str, patience: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + patience;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
