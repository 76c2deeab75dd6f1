//! The nginx blocks of the docs, read from docs/src/proxies/nginx.md and run
//! as they are (only their addresses changed) in a real nginx. In front of
//! a small protected origin: no pass is sent to the waiting room, a valid
//! pass of the room gets through, and another room's pass, a pass given up
//! with `leave`, or a forged `X-Waitroom-Room` header do not; a session
//! kept on by its requests lasts, an idle one is sent to the room. With no
//! waitroom node answering, the fail-open block serves the site and the
//! fail-closed one its static page (and both still judge passes while a
//! node answers). In front of three nodes of the waiting room on one
//! Redis: a rolling restart of the nodes, while visitors join, poll and
//! hold sockets through nginx, loses no place and no admission and answers
//! no request with a 5xx.
//!
//! Needs Debian's `nginx` (`/usr/sbin/nginx`; `./scripts/test` installs it).
//! The test starts its own nginx on a free port, with its own prefix and
//! configuration in a temporary directory, in the foreground, and kills it
//! when done.

use support::origin::{ProtectedOrigin, Says};
use waitroom_testkit as support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, COOKIE, LOCATION};
use serde_json::json;
use support::TestApp;
use support::docs::replaced;
use support::node::{ADMIN_TOKEN, Node};

const NGINX: &str = "/usr/sbin/nginx";
/// The room the docs' blocks guard.
const ROOM: &str = "spring-sale";
const WAITING_ROOM: &str = "https://queue.example/rooms/spring-sale";

/// The first nginx block of docs/src/proxies/nginx.md after `heading`,
/// exactly as printed there.
fn doc_block(heading: &str) -> String {
    support::docs::doc_block("docs/src/proxies/nginx.md", heading, "nginx")
}

/// A foreground nginx with a prefix of its own; killed when dropped.
struct Nginx {
    port: u16,
    dir: PathBuf,
    child: Child,
}

impl Nginx {
    /// Runs `http_block` (what goes in `http { … }`, with `listen 80;`) on a
    /// free port (another, when nginx finds it taken).
    fn start(http_block: &str) -> Self {
        assert!(
            std::path::Path::new(NGINX).exists(),
            "{NGINX} is needed for this test: apt-get install nginx (./scripts/test installs it)"
        );
        support::ports::start_on_free_port("nginx", |port| Self::start_on(http_block, port))
    }

    fn start_on(http_block: &str, port: u16) -> Result<Self, String> {
        let dir =
            std::env::temp_dir().join(format!("waitroom-nginx-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let http_block = replaced(
            http_block,
            "listen 80;",
            &format!("listen 127.0.0.1:{port};"),
        );
        let config = format!(
            "daemon off;\n\
             master_process off;\n\
             worker_processes 1;\n\
             pid {dir}/nginx.pid;\n\
             error_log {dir}/logs/error.log info;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n\
             access_log {dir}/logs/access.log;\n\
             client_body_temp_path {dir}/client_body;\n\
             proxy_temp_path {dir}/proxy;\n\
             fastcgi_temp_path {dir}/fastcgi;\n\
             uwsgi_temp_path {dir}/uwsgi;\n\
             scgi_temp_path {dir}/scgi;\n\
             {http_block}\n\
             }}\n",
            dir = dir.display(),
        );
        let config_path = dir.join("nginx.conf");
        std::fs::write(&config_path, config).unwrap();
        let mut child = Command::new(NGINX)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .arg("-c")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{NGINX} did not start: {e}"));
        match support::ports::wait_until_listening(&mut child, port, Duration::from_secs(10)) {
            Ok(()) => Ok(Self { port, dir, child }),
            Err(reason) => {
                let log = std::fs::read_to_string(dir.join("logs/error.log")).unwrap_or_default();
                let _ = std::fs::remove_dir_all(&dir);
                Err(format!("{reason}:\n{log}"))
            }
        }
    }

    /// The plain block of the docs ("With nginx in front of the protected
    /// site"), in front of the node on `node` and the origin on `origin`.
    fn in_front(node: u16, origin: u16) -> Self {
        let block = doc_block("## With nginx in front of the protected site");
        let block = replaced(
            &block,
            "server 127.0.0.1:8080;",
            &format!("server 127.0.0.1:{node};"),
        );
        let block = replaced(
            &block,
            "server 127.0.0.1:3000;",
            &format!("server 127.0.0.1:{origin};"),
        );
        Self::start(&block)
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The error log's lines about the upstream nodes, to say why a 502 came.
    fn upstream_errors(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("logs/error.log")).unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|line| line.contains("upstream"))
            .collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_nginx_block_lets_through_only_valid_passes_of_its_room() {
    let app = TestApp::spawn().await;
    app.create_room(ROOM, json!({"admit_per_tick": 1_000}))
        .await;
    app.create_room("autumn-sale", json!({"admit_per_tick": 1_000}))
        .await;
    let origin = ProtectedOrigin::start(Says::Protected).await;
    let origin_port = origin.port;

    let nginx = Nginx::in_front(app.port, origin_port);

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let get = |headers: &[(reqwest::header::HeaderName, String)]| {
        let mut request = client.get(nginx.url("/checkout"));
        for (name, value) in headers {
            request = request.header(name.clone(), value.clone());
        }
        async move { request.send().await.expect("nginx answers") }
    };
    let sent_to_the_waiting_room = |response: reqwest::Response, what: &str| {
        assert_eq!(response.status(), 302, "{what}");
        assert_eq!(response.headers()[LOCATION], WAITING_ROOM, "{what}");
    };
    let let_through = |response: reqwest::Response, what: &'static str| async move {
        assert_eq!(response.status(), 200, "{what}");
        assert_eq!(response.text().await.unwrap(), "protected", "{what}");
    };
    let room_header = || reqwest::header::HeaderName::from_static("x-waitroom-room");

    // No pass: to the waiting room.
    sent_to_the_waiting_room(get(&[]).await, "no pass");
    sent_to_the_waiting_room(
        get(&[(COOKIE, "wr_pass=not-a-pass".into())]).await,
        "garbage",
    );

    // A valid pass of the room, as the cookie or a Bearer token: through.
    let admitted = app.join_api(ROOM).await;
    let pass = admitted["pass"].as_str().unwrap().to_string();
    let_through(get(&[(COOKIE, format!("wr_pass={pass}"))]).await, "cookie").await;
    let_through(
        get(&[(AUTHORIZATION, format!("Bearer {pass}"))]).await,
        "bearer",
    )
    .await;
    // Naming another room in the header changes nothing (nginx drops it).
    let_through(
        get(&[
            (COOKIE, format!("wr_pass={pass}")),
            (room_header(), "autumn-sale".into()),
        ])
        .await,
        "a valid pass with another room in the header",
    )
    .await;

    // Another room's pass, alone or with a forged header naming its room.
    let autumn = app.pass_for("autumn-sale").await;
    sent_to_the_waiting_room(
        get(&[(COOKIE, format!("wr_pass={autumn}"))]).await,
        "another room's pass",
    );
    sent_to_the_waiting_room(
        get(&[
            (COOKIE, format!("wr_pass={autumn}")),
            (room_header(), "autumn-sale".into()),
        ])
        .await,
        "another room's pass with a forged X-Waitroom-Room",
    );
    sent_to_the_waiting_room(
        get(&[
            (AUTHORIZATION, format!("Bearer {autumn}")),
            (room_header(), "autumn-sale".into()),
        ])
        .await,
        "another room's Bearer pass with a forged X-Waitroom-Room",
    );

    // Given up with leave: refused from then on.
    let left = app
        .http
        .post(app.url(&format!("/api/rooms/{ROOM}/leave")))
        .bearer_auth(admitted["ticket"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 204);
    sent_to_the_waiting_room(
        get(&[(COOKIE, format!("wr_pass={pass}"))]).await,
        "a pass given up with leave",
    );

    assert_eq!(
        origin.served(),
        3,
        "the origin saw only the requests let through"
    );
}

/// api.md, "Sessions", through nginx's `auth_request`: a visitor who keeps
/// using the site past `session_idle_s` keeps access with the same cookie,
/// and one idle past it is sent to the waiting room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_nginx_an_active_session_lasts_and_an_idle_one_goes_to_the_waiting_room() {
    let app = TestApp::spawn().await;
    let config: serde_json::Value = serde_json::from_str(crate::proxies::SESSIONS).unwrap();
    app.create_room(ROOM, config).await;
    let origin = ProtectedOrigin::start(Says::Protected).await;
    let nginx = Nginx::in_front(app.port, origin.port);
    let pass = app.pass_for(ROOM).await;
    crate::proxies::a_session_through(&app, &pass, &nginx.url("/checkout"), WAITING_ROOM).await;
    assert_eq!(
        origin.served(),
        5,
        "the origin saw the active requests only"
    );
}

/// The fail-open and fail-closed blocks: while a node answers, they judge
/// passes as the plain block does; with no node answering (nothing listens
/// where waitroom should be), the first serves the site and the second its
/// static "back soon" page, the site seeing no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_waitroom_node_the_fail_open_block_serves_the_site_and_fail_closed_a_static_page() {
    let app = TestApp::spawn().await;
    app.create_room(ROOM, json!({"admit_per_tick": 1_000}))
        .await;
    let origin = ProtectedOrigin::start(Says::Protected).await;
    let origin_port = origin.port;
    let pass = app.pass_for(ROOM).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let get = |nginx: &Nginx, cookie: Option<&str>| {
        let mut request = client.get(nginx.url("/checkout"));
        if let Some(pass) = cookie {
            request = request.header(COOKIE, format!("wr_pass={pass}"));
        }
        async move { request.send().await.expect("nginx answers") }
    };
    // Nothing listens there: the port was free a moment ago and is not ours.
    let no_node = support::ports::free_port();

    for (heading, fails_open) in [("### Fail open", true), ("### Fail closed", false)] {
        let block = doc_block(heading);
        let block = replaced(
            &block,
            "server 127.0.0.1:3000;",
            &format!("server 127.0.0.1:{origin_port};"),
        );
        let in_front_of = |node: u16| {
            replaced(
                &block,
                "server 127.0.0.1:8080;",
                &format!("server 127.0.0.1:{node};"),
            )
        };

        let nginx = Nginx::start(&in_front_of(app.port));
        let answer = get(&nginx, None).await;
        assert_eq!(answer.status(), 302, "{heading}, a node up, no pass");
        assert_eq!(answer.headers()[LOCATION], WAITING_ROOM, "{heading}");
        let answer = get(&nginx, Some("not-a-pass")).await;
        assert_eq!(answer.status(), 302, "{heading}, a node up, a forged pass");
        let answer = get(&nginx, Some(&pass)).await;
        assert_eq!(answer.status(), 200, "{heading}, a node up, a valid pass");
        drop(nginx);

        let nginx = Nginx::start(&in_front_of(no_node));
        let before = origin.served();
        for cookie in [None, Some(pass.as_str())] {
            let answer = get(&nginx, cookie).await;
            if fails_open {
                assert_eq!(answer.status(), 200, "{heading}, no node, {cookie:?}");
                assert_eq!(answer.text().await.unwrap(), "protected");
            } else {
                assert_eq!(answer.status(), 503, "{heading}, no node, {cookie:?}");
                assert_eq!(answer.headers()["retry-after"], "30");
                let page = answer.text().await.unwrap();
                assert!(page.contains("<h1>Back soon</h1>"), "{page}");
            }
        }
        let expected = if fails_open { before + 2 } else { before };
        assert_eq!(
            origin.served(),
            expected,
            "{heading}: what the site saw with no node up"
        );
    }
}

/// A node of the rolling deployment: the real binary on the shared Redis,
/// draining for `drain_s` when it is stopped.
fn node(redis_url: &str, drain_s: u64) -> Node {
    let drain_s = drain_s.to_string();
    Node::start(
        env!("CARGO_BIN_EXE_waitroom"),
        &[
            "--redis-url",
            redis_url,
            "--drain-s",
            &drain_s,
            "--workers",
            "1",
        ],
    )
}

/// The seconds nginx sets a refusing node aside (`fail_timeout=`, at most
/// a second more), the same on every `server` line of the block.
fn fail_timeout_s(block: &str) -> u64 {
    let timeouts: Vec<u64> = block
        .lines()
        .filter(|line| line.trim_start().starts_with("server 127.0.0.1:"))
        .map(|line| {
            let (_, rest) = line
                .split_once("fail_timeout=")
                .unwrap_or_else(|| panic!("no fail_timeout in {line:?}"));
            let seconds = rest.split_once('s').map_or(rest, |(seconds, _)| seconds);
            seconds.parse().unwrap_or_else(|_| panic!("{line:?}"))
        })
        .collect();
    assert_eq!(timeouts.len(), 3, "three nodes in the block");
    assert!(timeouts.windows(2).all(|pair| pair[0] == pair[1]));
    timeouts[0]
}

/// What the visitors saw that they should not have.
#[derive(Default)]
struct Trouble(parking_lot::Mutex<Vec<String>>);

impl Trouble {
    fn note(&self, what: String) {
        self.0.lock().push(what);
    }

    /// Notes an answer of 500 or more (a 5xx nginx could have spared them).
    fn check(&self, what: &str, status: reqwest::StatusCode) {
        if status.is_server_error() {
            self.note(format!("{what}: {status}"));
        }
    }
}

/// Through nginx: who is waiting, and how they follow their place.
struct Visitors {
    http: reqwest::Client,
    nginx_port: u16,
    trouble: Arc<Trouble>,
    /// Sockets told 1012 "service restart".
    restarts: AtomicUsize,
}

impl Visitors {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.nginx_port)
    }

    /// A new visitor joins the line: their `Status`, if the join answered.
    async fn join(&self) -> Option<serde_json::Value> {
        let answer = match self
            .http
            .post(self.url("/api/rooms/drop/join"))
            .send()
            .await
        {
            Ok(answer) => answer,
            Err(error) => {
                self.trouble.note(format!("join: {error}"));
                return None;
            }
        };
        self.trouble.check("join", answer.status());
        if answer.status() != 200 {
            self.trouble
                .note(format!("join answered {}", answer.status()));
            return None;
        }
        answer.json().await.ok()
    }

    /// Takes in a status: the position never rises; returns the pass once
    /// admitted.
    fn follow(&self, who: &str, status: &serde_json::Value, last: &mut u64) -> Option<String> {
        match status["state"].as_str() {
            Some("admitted") => return status["pass"].as_str().map(String::from),
            Some("waiting") => {}
            other => self.trouble.note(format!("{who}: state {other:?}")),
        }
        if let Some(position) = status["position"].as_u64() {
            if position > *last {
                self.trouble
                    .note(format!("{who}: position rose from {last} to {position}"));
            }
            *last = position;
        }
        None
    }

    /// A visitor who holds a socket, as the waiting page does: on 1012 it
    /// reconnects (through nginx, so to any node) after a random 0–2 s.
    /// Returns the pass it was admitted with.
    async fn with_socket(&self, ticket: String, mut last: u64) -> Option<String> {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::{Error, Message};

        let url = format!(
            "ws://127.0.0.1:{}/api/rooms/drop/ws?ticket={ticket}",
            self.nginx_port
        );
        loop {
            let mut socket = match tokio_tungstenite::connect_async(&url).await {
                Ok((socket, _)) => socket,
                Err(Error::Http(answer)) => {
                    self.trouble.check("socket", answer.status());
                    self.trouble
                        .note(format!("socket refused: {}", answer.status()));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(error) => {
                    self.trouble.note(format!("socket: {error}"));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            loop {
                match socket.next().await {
                    Some(Ok(Message::Text(text))) => {
                        let message: serde_json::Value = serde_json::from_str(&text).unwrap();
                        if message["type"] == "status"
                            && let Some(pass) = self.follow("socket", &message, &mut last)
                        {
                            return Some(pass);
                        }
                    }
                    Some(Ok(Message::Close(Some(close)))) if u16::from(close.code) == 1012 => {
                        self.restarts.fetch_add(1, Ordering::SeqCst);
                        let jitter = rand::random_range(0..2_000);
                        tokio::time::sleep(Duration::from_millis(jitter)).await;
                        break;
                    }
                    Some(Ok(Message::Close(close))) => {
                        self.trouble.note(format!("socket closed: {close:?}"));
                        break;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => {
                        self.trouble.note(format!("socket failed: {error}"));
                        break;
                    }
                    None => {
                        self.trouble.note("socket ended without a close".into());
                        break;
                    }
                }
            }
        }
    }

    /// A visitor who polls their status (a page without WebSockets).
    async fn polling(&self, ticket: String, mut last: u64) -> Option<String> {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let answer = match self
                .http
                .get(self.url("/api/rooms/drop/status"))
                .bearer_auth(&ticket)
                .send()
                .await
            {
                Ok(answer) => answer,
                Err(error) => {
                    self.trouble.note(format!("poll: {error}"));
                    continue;
                }
            };
            self.trouble.check("poll", answer.status());
            let Ok(status) = answer.json::<serde_json::Value>().await else {
                continue;
            };
            if let Some(pass) = self.follow("poll", &status, &mut last) {
                return Some(pass);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_behind_nginx_loses_no_place_nor_admission_and_answers_no_5xx() {
    const WITH_SOCKETS: usize = 24;
    const POLLING: usize = 8;

    let mut block = doc_block("## In front of the waiting room's nodes");
    // As the block's comment asks: a node drains a second longer than
    // nginx sets a refusing node aside (in whole seconds), so the node
    // restarted before is back in nginx's list when the next one stops;
    // with a shorter drain, nginx can find two nodes set aside while the
    // third stops, and answer 502 ("no live upstreams").
    let drain_s = fail_timeout_s(&block) + 1;
    let redis = support::redis::RedisServer::start();
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let mut node = node(&redis.url(), drain_s);
        node.wait_until("/readyz").await;
        nodes.push(node);
    }
    let ports: Vec<u16> = nodes.iter().map(|node| node.port).collect();
    for (documented, port) in [8081, 8082, 8083].into_iter().zip(&ports) {
        block = replaced(
            &block,
            &format!("server 127.0.0.1:{documented} "),
            &format!("server 127.0.0.1:{port} "),
        );
    }
    let nginx = Nginx::start(&block);
    let visitors = Arc::new(Visitors {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        nginx_port: nginx.port,
        trouble: Arc::default(),
        restarts: AtomicUsize::new(0),
    });
    let created = visitors
        .http
        .post(nginx.url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(
            &json!({"id": "drop", "name": "Drop", "target_url": "/x", "paused": true,
                      "admit_per_tick": 1, "tick_ms": 1000, "abandon_after_s": 600}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    // The line: sockets and pollers, spread over the nodes by nginx.
    let mut followers = Vec::new();
    for i in 0..WITH_SOCKETS + POLLING {
        let status = visitors.join().await.expect("the line forms");
        let ticket = status["ticket"].as_str().unwrap().to_string();
        let position = status["position"].as_u64().unwrap();
        assert_eq!(position, i as u64 + 1);
        let visitors = visitors.clone();
        followers.push(tokio::spawn(async move {
            if i < WITH_SOCKETS {
                visitors.with_socket(ticket, position).await
            } else {
                visitors.polling(ticket, position).await
            }
        }));
    }
    // Newcomers keep joining behind them, a few a second.
    let done = tokio_util::sync::CancellationToken::new();
    let arrivals = {
        let (visitors, done) = (visitors.clone(), done.clone());
        tokio::spawn(async move {
            let mut joined = 0;
            while !done.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(150)).await;
                if visitors.join().await.is_some() {
                    joined += 1;
                }
            }
            joined
        })
    };
    let opened = visitors
        .http
        .patch(nginx.url("/api/admin/rooms/drop"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"paused": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);

    // One node after the other: stop it, wait for it to exit, start it
    // again, wait until it is ready.
    for (i, node) in nodes.iter_mut().enumerate() {
        node.signal("-TERM");
        let exit = tokio::task::block_in_place(|| node.wait(Duration::from_secs(30)));
        assert_eq!(exit, Some(0), "node {i}'s exit");
        node.restart();
        node.wait_until("/readyz").await;
    }

    let mut passes = Vec::new();
    for follower in followers {
        let pass = tokio::time::timeout(Duration::from_secs(90), follower)
            .await
            .expect("every visitor of the line is admitted in time")
            .unwrap()
            .expect("a pass");
        passes.push(pass);
    }
    for pass in &passes {
        let verified = visitors
            .http
            .get(nginx.url("/api/verify?room=drop"))
            .bearer_auth(pass)
            .send()
            .await
            .unwrap();
        assert_eq!(verified.status(), 204, "every admission holds");
    }
    done.cancel();
    let newcomers = arrivals.await.unwrap();
    assert!(newcomers > 0, "joins went on");
    let trouble = visitors.trouble.0.lock();
    assert!(
        trouble.is_empty(),
        "{trouble:#?}\nnginx's upstream errors:\n{}",
        nginx.upstream_errors()
    );
    let restarts = visitors.restarts.load(Ordering::SeqCst);
    assert!(
        restarts >= WITH_SOCKETS / 4,
        "the nodes' sockets were told to reconnect ({restarts} times)"
    );
}
