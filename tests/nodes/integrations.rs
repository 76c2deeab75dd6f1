//! The edge worker and the protected origins of `integrations/`, run as they
//! are against a real node (the `waitroom` binary, memory store): the worker
//! in `workerd` (Cloudflare Workers' runtime) in front of a small origin,
//! and the Node (Express + jose), Python (Flask + PyJWT) and Go (net/http +
//! golang-jwt) sites, each once checking passes offline by the JWKS and once
//! through `/api/verify`.
//!
//! Each must send to the waiting room a visitor with no pass, garbage,
//! another room's pass, an expired pass, a pass with its signature or its
//! room changed, one signed by another deployment, one forged under our key's
//! kid and one with `alg: none`; let a valid pass through (naming the
//! visitor, whatever header the client forged); and turn `?wr_pass=` into
//! the cookie with a 303 to the clean URL. Offline, they fetch the JWKS
//! once for all of it (it comes through a relay here that counts). A
//! revoked pass is refused through `/api/verify` and, as the docs say, still
//! let through offline; with the node gone, offline checks go on from the
//! cached JWKS and `/api/verify` mode fails closed (503).
//!
//! Needs Node and npm, Python 3 with venv, Go and Debian's
//! golang-github-golang-jwt-jwt-dev, and what `./scripts/integrations-setup`
//! installs into the repo (`./scripts/test` does all of it): a missing one
//! fails the test, saying so.

use support::origin::{ProtectedOrigin, Says};
use support::repo;
use waitroom_testkit as support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, COOKIE, HeaderName, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use support::TestApp;
use support::docs::replaced;
use support::node::{ADMIN_TOKEN, Node, SECRET};

/// What the protected site holds to revoke a pass: an origin token, never
/// the admin's.
const ORIGIN_TOKEN: &str = "an-origin-token-for-the-shop-0123456789";
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;

/// The room the sites guard.
const ROOM: &str = "spring-sale";
const OTHER_ROOM: &str = "autumn-sale";
/// How long a site may take to listen (Flask and workerd take a second).
const STARTUP: Duration = Duration::from_secs(20);

/// Fails loudly when `path` is missing, saying how to get it.
fn needs(path: &Path, how: &str) {
    assert!(
        path.exists(),
        "{} is needed for this test: {how} (./scripts/test does)",
        path.display()
    );
}

/// Fails loudly when `program` does not run.
fn needs_program(program: &str, package: &str) {
    let runs = Command::new(program)
        .arg(if program == "go" {
            "version"
        } else {
            "--version"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        runs,
        "`{program}` is needed for this test: apt-get install {package} (./scripts/test does)"
    );
}

/// Where the sites' output goes: the test's, with WAITROOM_TEST_NODE_LOG.
fn log() -> Stdio {
    if std::env::var_os("WAITROOM_TEST_NODE_LOG").is_some() {
        Stdio::inherit()
    } else {
        Stdio::null()
    }
}

/// The passes the tests present: one valid, the rest each wrong in one way.
struct Passes {
    valid: String,
    /// The valid pass's `sub`.
    visitor: String,
    /// Each refused by every site, with what it is.
    bad: Vec<(&'static str, String)>,
}

fn jwt_parts(token: &str) -> Vec<String> {
    token.split('.').map(String::from).collect()
}

fn decoded(part: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

fn encoded(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap())
}

/// A node with both rooms, and the passes.
struct Deployment {
    node: Node,
    http: reqwest::Client,
    passes: Passes,
}

impl Deployment {
    async fn start() -> Self {
        let mut node = Node::start(
            env!("CARGO_BIN_EXE_waitroom"),
            &["--workers", "1", "--origin-token", ORIGIN_TOKEN],
        );
        node.wait_until("/readyz").await;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // Everything answers from this machine at once.
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        for room in [ROOM, OTHER_ROOM] {
            let created = http
                .post(node.url("/api/admin/rooms"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&json!({"id": room, "name": room, "target_url": "https://shop.example/checkout", "admit_per_tick": 1_000}))
                .send()
                .await
                .unwrap();
            assert_eq!(created.status(), 201, "creating {room}");
        }
        let join = |room: &'static str| {
            let request = http.post(node.url(&format!("/api/rooms/{room}/join")));
            async move {
                let status: Value = request.send().await.unwrap().json().await.unwrap();
                status["pass"]
                    .as_str()
                    .unwrap_or_else(|| panic!("admitted at once to {room}: {status}"))
                    .to_string()
            }
        };
        let valid = join(ROOM).await;
        let other_room = join(OTHER_ROOM).await;
        let visitor = decoded(&jwt_parts(&valid)[1])["sub"]
            .as_str()
            .unwrap()
            .to_string();

        // A pass of this very deployment (its secret), from an admission in
        // January: long expired by the wall clock the sites read.
        let past = past_deployment(Some(SECRET), support::START_MS).await;
        let expired = past.pass_for(ROOM).await;
        // A pass valid in every way but signed by another deployment's key.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let elsewhere = past_deployment(None, now_ms).await;
        let foreign = elsewhere.pass_for(ROOM).await;

        let [header, payload, _] = <[String; 3]>::try_from(jwt_parts(&valid)).unwrap();
        let [_, other_payload, other_signature] =
            <[String; 3]>::try_from(jwt_parts(&other_room)).unwrap();
        let [_, foreign_payload, foreign_signature] =
            <[String; 3]>::try_from(jwt_parts(&foreign)).unwrap();
        let mut moved = decoded(&other_payload);
        moved["room"] = ROOM.into();
        let mut none = decoded(&header);
        none["alg"] = "none".into();

        let bad = vec![
            ("another room's pass", other_room.clone()),
            ("an expired pass", expired),
            ("a pass with its signature changed", support::tamper(&valid)),
            (
                "another room's pass rewritten to name this room",
                format!("{header}.{}.{other_signature}", encoded(&moved)),
            ),
            ("a pass of another deployment", foreign),
            (
                "another key's signature under our kid",
                format!("{header}.{foreign_payload}.{foreign_signature}"),
            ),
            (
                "an unsigned pass (alg none)",
                format!("{}.{payload}.", encoded(&none)),
            ),
        ];
        let deployment = Self {
            node,
            http,
            passes: Passes {
                valid,
                visitor,
                bad,
            },
        };
        deployment.node_agrees().await;
        deployment
    }

    /// The node itself takes the valid pass and refuses every bad one, so
    /// the sites are held to what waitroom says.
    async fn node_agrees(&self) {
        assert_eq!(self.verify(&self.passes.valid).await, 204);
        for (what, pass) in &self.passes.bad {
            assert_eq!(self.verify(pass).await, 401, "{what}");
        }
    }

    async fn verify(&self, pass: &str) -> StatusCode {
        self.http
            .get(self.node.url(&format!("/api/verify?room={ROOM}")))
            .bearer_auth(pass)
            .send()
            .await
            .unwrap()
            .status()
    }

    async fn revoke_the_valid_pass(&self) {
        let revoked = self
            .http
            .post(
                self.node
                    .url(&format!("/api/admin/rooms/{ROOM}/passes/revoke")),
            )
            .bearer_auth(ORIGIN_TOKEN)
            .json(&json!({"pass": self.passes.valid}))
            .send()
            .await
            .unwrap();
        assert_eq!(revoked.status(), 204);
        assert_eq!(self.verify(&self.passes.valid).await, 401);
    }

    fn url(&self) -> String {
        self.node.url("")
    }
}

/// An in-process deployment on a driven clock at `now_ms`, with `secret`
/// (another one when `None`), and room ROOM.
async fn past_deployment(secret: Option<&str>, now_ms: u64) -> TestApp {
    let clock = ManualClock::new(now_ms);
    let mut settings = support::test_settings();
    if let Some(secret) = secret {
        settings.secret = Some(secret.into());
    }
    let app = TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await;
    app.create_room(ROOM, json!({"admit_per_tick": 1_000}))
        .await;
    app
}

/// A site's process on a free port; killed when dropped.
struct Site {
    child: Child,
    port: u16,
    what: String,
    /// Answers the site gave with the page: requests it let through.
    served: usize,
    /// Whether it takes the pass as a Bearer token too (the origins do; the
    /// edge worker serves browsers, and takes the cookie only).
    takes_bearer: bool,
    /// The waiting room's page, where it sends those without a valid pass.
    waiting_room: String,
}

impl Site {
    /// Starts the site; it is to send visitors to `waiting_room`.
    fn start(what: String, waiting_room: String, command: impl FnMut(u16) -> Command) -> Self {
        let (child, port) = support::ports::spawn_listening(&what, STARTUP, command);
        Self {
            child,
            port,
            what,
            served: 0,
            takes_bearer: true,
            waiting_room,
        }
    }

    async fn get(
        &self,
        deployment: &Deployment,
        path: &str,
        headers: &[(HeaderName, String)],
    ) -> reqwest::Response {
        let mut request = deployment
            .http
            .get(format!("http://127.0.0.1:{}{path}", self.port));
        for (name, value) in headers {
            request = request.header(name.clone(), value.clone());
        }
        request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{} answers: {e}", self.what))
    }

    async fn refuses(&self, deployment: &Deployment, what: &str, headers: &[(HeaderName, String)]) {
        let answer = self.get(deployment, "/checkout", headers).await;
        assert_eq!(answer.status(), 302, "{}: {what}", self.what);
        assert_eq!(
            answer.headers()[LOCATION],
            self.waiting_room.as_str(),
            "{}: {what}",
            self.what
        );
        assert!(
            !answer.headers().contains_key(SET_COOKIE),
            "{}: {what}",
            self.what
        );
    }

    async fn lets_through(
        &mut self,
        deployment: &Deployment,
        what: &str,
        headers: &[(HeaderName, String)],
    ) {
        let answer = self.get(deployment, "/checkout", headers).await;
        assert_eq!(answer.status(), 200, "{}: {what}", self.what);
        assert_eq!(
            answer.text().await.unwrap(),
            format!("protected: {}", deployment.passes.visitor),
            "{}: {what}",
            self.what
        );
        self.served += 1;
    }

    fn cookie(pass: &str) -> (HeaderName, String) {
        (COOKIE, format!("wr_pass={pass}"))
    }

    fn bearer(pass: &str) -> (HeaderName, String) {
        (AUTHORIZATION, format!("Bearer {pass}"))
    }

    /// Everything but revocation.
    async fn guards(&mut self, deployment: &Deployment) {
        let passes = &deployment.passes;
        self.refuses(deployment, "no pass", &[]).await;
        self.refuses(deployment, "garbage", &[Self::cookie("not-a-pass")])
            .await;

        // The visitor named is the pass's, whatever the client sends.
        let forged_visitor = (
            HeaderName::from_static("x-waitroom-visitor"),
            "someone-else".to_string(),
        );
        self.lets_through(
            deployment,
            "a valid pass as the cookie",
            &[Self::cookie(&passes.valid), forged_visitor],
        )
        .await;
        if self.takes_bearer {
            self.lets_through(
                deployment,
                "a valid Bearer pass",
                &[Self::bearer(&passes.valid)],
            )
            .await;
        }

        // Back from the waiting room with ?wr_pass=…: the cookie, and the
        // address without the pass.
        let link = self
            .get(
                deployment,
                &format!("/checkout?x=1&wr_pass={}", passes.valid),
                &[],
            )
            .await;
        assert_eq!(link.status(), 303, "{}: the link", self.what);
        assert_eq!(link.headers()[LOCATION], "/checkout?x=1", "{}", self.what);
        let cookie = link.headers()[SET_COOKIE].to_str().unwrap();
        assert!(
            cookie.starts_with(&format!("wr_pass={};", passes.valid))
                && cookie.contains("HttpOnly"),
            "{}: {cookie}",
            self.what
        );
        let tampered = support::tamper(&passes.valid);
        let answer = self
            .get(deployment, &format!("/checkout?wr_pass={tampered}"), &[])
            .await;
        assert_eq!(answer.status(), 302, "{}: a tampered link", self.what);
        assert!(!answer.headers().contains_key(SET_COOKIE), "{}", self.what);

        for (what, pass) in &passes.bad {
            self.refuses(deployment, what, &[Self::cookie(pass)]).await;
            if self.takes_bearer {
                self.refuses(deployment, what, &[Self::bearer(pass)]).await;
            }
        }
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The checks of one integration: `offline` checks passes by the JWKS,
/// `api` (where there is one) through `/api/verify`.
async fn check(deployment: &mut Deployment, offline: &mut Site, mut api: Option<&mut Site>) {
    let deployment = &mut *deployment;
    offline.guards(deployment).await;
    if let Some(api) = &mut api {
        api.guards(deployment).await;
    }

    // Revoked: /api/verify knows; an offline check cannot (the docs say so).
    deployment.revoke_the_valid_pass().await;
    let valid = [Site::cookie(&deployment.passes.valid)];
    if let Some(api) = &api {
        api.refuses(deployment, "a revoked pass", &valid).await;
    }
    offline
        .lets_through(deployment, "a revoked pass, offline", &valid)
        .await;

    // The node gone: offline checks go on with the JWKS they keep (still
    // refusing a bad signature), and /api/verify mode fails closed with a
    // 503 rather than sending visitors to a waiting room that is down too.
    deployment.node.signal("-KILL");
    deployment.node.wait(Duration::from_secs(5));
    offline
        .lets_through(deployment, "a valid pass, the node gone", &valid)
        .await;
    let tampered = support::tamper(&deployment.passes.valid);
    offline
        .refuses(
            deployment,
            "a tampered pass, the node gone",
            &[Site::cookie(&tampered)],
        )
        .await;
    if let Some(api) = &api {
        let answer = api.get(deployment, "/checkout", &valid).await;
        assert_eq!(answer.status(), 503, "{}: the node gone", api.what);
    }
}

/// An origin of `integrations/origins/`, started as `program args` in `dir`
/// with its environment naming waitroom's URL, the room and `mode`.
fn origin(
    what: &str,
    waitroom: &str,
    mode: &str,
    program: &Path,
    args: &[&str],
    dir: &Path,
) -> Site {
    Site::start(
        format!("the {what} origin ({mode})"),
        format!("{waitroom}/rooms/{ROOM}"),
        |port| {
            let mut command = Command::new(program);
            command
                .args(args)
                .current_dir(dir)
                .env("WAITROOM_URL", waitroom)
                .env("WAITROOM_ROOM", ROOM)
                .env("WAITROOM_VERIFY", mode)
                .env("PORT", port.to_string())
                .stdin(Stdio::null())
                .stdout(log())
                .stderr(log());
            command
        },
    )
}

/// Runs an origin both ways: offline (the JWKS through a relay that counts
/// its fetches) and through /api/verify (on the node).
async fn check_origin(what: &str, program: &Path, args: &[&str], dir: &Path) {
    let mut deployment = Deployment::start().await;
    let (relay_port, jwks_fetches) = jwks_relay(deployment.url()).await;
    let relay = format!("http://127.0.0.1:{relay_port}");
    let mut offline = origin(what, &relay, "offline", program, args, dir);
    let mut api = origin(what, &deployment.url(), "api", program, args, dir);
    check(&mut deployment, &mut offline, Some(&mut api)).await;
    // Some 50 requests, a pass with an unknown kid among them: one fetch,
    // kept (the unknown kid may fetch again only 30 s after the last).
    assert_eq!(
        jwks_fetches.load(Ordering::SeqCst),
        1,
        "{what}: JWKS fetches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_origin_lets_through_only_valid_passes_of_its_room() {
    needs_program("node", "nodejs");
    let dir = repo("integrations/origins/node");
    for package in ["express", "jose"] {
        needs(
            &dir.join("node_modules").join(package),
            "npm ci in integrations/origins/node (./scripts/integrations-setup)",
        );
    }
    check_origin("Node", Path::new("node"), &["server.mjs"], &dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_origin_lets_through_only_valid_passes_of_its_room() {
    let python = repo("target/integrations/python-venv/bin/python");
    needs(
        &python,
        "a venv with integrations/origins/python/requirements.txt (./scripts/integrations-setup)",
    );
    let dir = repo("integrations/origins/python");
    check_origin("Python", &python, &["app.py"], &dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_origin_lets_through_only_valid_passes_of_its_room() {
    needs_program("go", "golang-go");
    needs(
        Path::new("/usr/share/gocode/src/github.com/golang-jwt/jwt"),
        "apt-get install golang-github-golang-jwt-jwt-dev",
    );
    // Built here, so the test always runs the file as it is now (Go's build
    // cache makes a rebuild of an unchanged file instant).
    let dir = repo("integrations/origins/go");
    let built = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-origin");
    let build = Command::new("go")
        .args(["build", "-o"])
        .arg(&built)
        .arg("main.go")
        .current_dir(&dir)
        // Debian's packages, in GOPATH mode: the module proxy is not
        // reachable from here (nor, often, from where this is deployed).
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOFLAGS", "")
        .env(
            "GOCACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-cache"),
        )
        .output()
        .expect("go runs");
    assert!(
        build.status.success(),
        "integrations/origins/go/main.go builds:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    check_origin("Go", &built, &[], &dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_worker_lets_through_only_valid_passes_of_its_room() {
    // The platform's binary itself (node_modules/.bin/workerd may be a
    // script that starts it, which killing would leave running).
    let workerd =
        repo("integrations/edge-worker/node_modules/@cloudflare/workerd-linux-64/bin/workerd");
    needs(
        &workerd,
        "npm ci in integrations/edge-worker (./scripts/integrations-setup)",
    );
    let mut deployment = Deployment::start().await;
    let origin = ProtectedOrigin::start(Says::ProtectedAndTheVisitor).await;
    let origin_port = origin.port;
    // The worker's WAITROOM_URL: the node's JWKS, counting its fetches.
    let (relay_port, jwks_fetches) = jwks_relay(deployment.url()).await;
    let waitroom = format!("http://127.0.0.1:{relay_port}");

    // The committed config and worker, their addresses changed, in a
    // directory of their own (the config embeds the worker beside it).
    let dir = std::env::temp_dir().join(format!(
        "waitroom-workerd-{}-{origin_port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo("integrations/edge-worker/worker.js"),
        dir.join("worker.js"),
    )
    .unwrap();
    let config = std::fs::read_to_string(repo("integrations/edge-worker/config.capnp")).unwrap();
    let config = replaced(
        &config,
        "\"http://127.0.0.1:8080\"",
        &format!("{waitroom:?}"),
    );
    let config = replaced(
        &config,
        "\"http://127.0.0.1:3000\"",
        &format!("\"http://127.0.0.1:{origin_port}\""),
    );
    let config = replaced(&config, "\"spring-sale\"", &format!("{ROOM:?}"));
    let waiting_room = format!("{waitroom}/rooms/{ROOM}");
    let mut worker = Site::start("the edge worker".into(), waiting_room, |port| {
        let path = dir.join(format!("config-{port}.capnp"));
        let listen = replaced(
            &config,
            "\"127.0.0.1:8787\"",
            &format!("\"127.0.0.1:{port}\""),
        );
        std::fs::write(&path, listen).unwrap();
        let mut command = Command::new(&workerd);
        command
            .arg("serve")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(log())
            .stderr(log());
        command
    });
    worker.takes_bearer = false;

    check(&mut deployment, &mut worker, None).await;
    assert_eq!(
        origin.served(),
        worker.served,
        "the origin saw only the requests let through"
    );
    // Some 30 requests, a pass with an unknown kid among them: one fetch,
    // kept (the unknown kid fetches again only 30 s after the last).
    assert_eq!(jwks_fetches.load(Ordering::SeqCst), 1, "JWKS fetches");
    drop(worker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Serves the JWKS of the node at `node` (fetched from it at each request,
/// so 502 once it is gone), counting the requests; anything else is 404.
async fn jwks_relay(node: String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let fetches = Arc::new(AtomicUsize::new(0));
    let count = fetches.clone();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let (count, http, node) = (count.clone(), http.clone(), node.clone());
            tokio::spawn(async move {
                let Some(head) = support::origin::request_head(&mut stream).await else {
                    return;
                };
                let (status, body) = if head.starts_with("GET /.well-known/jwks.json ") {
                    count.fetch_add(1, Ordering::SeqCst);
                    let url = format!("{node}/.well-known/jwks.json");
                    match http.get(url).send().await {
                        Ok(answer) => ("200 OK", answer.text().await.unwrap_or_default()),
                        Err(_) => ("502 Bad Gateway", String::new()),
                    }
                } else {
                    ("404 Not Found", String::new())
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (port, fetches)
}

/// The docs show the very files these tests run (mdBook includes them), so
/// they cannot drift apart.
#[test]
fn the_docs_include_the_tested_files() {
    for (doc, files) in [
        (
            "docs/src/edge-worker.md",
            &[
                "integrations/edge-worker/worker.js",
                "integrations/edge-worker/config.capnp",
            ][..],
        ),
        (
            "docs/src/origins.md",
            &[
                "integrations/origins/node/server.mjs",
                "integrations/origins/python/app.py",
                "integrations/origins/go/main.go",
            ][..],
        ),
    ] {
        let text = std::fs::read_to_string(repo(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
        for file in files {
            let include = format!("{{{{#include ../../{file}}}}}");
            assert!(text.contains(&include), "{doc} shows {file} with {include}");
            assert!(repo(file).exists(), "{file} exists");
        }
    }
}
