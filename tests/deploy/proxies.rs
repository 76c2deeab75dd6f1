//! The proxies of docs/src/proxies/, each config read from its page and run
//! as printed (only addresses and paths changed) in the real proxy, started
//! by the test on a free port in front of a small origin the test runs:
//! - Caddy (`forward_auth` to `/api/gate`): the whole round trip, from no
//!   pass to the room's page with the `return`, the join with it, the
//!   admission on a later tick, back through Caddy with `wr_pass` in the
//!   URL, one 302 that makes it the cookie, and the next request passing
//!   by cookie; and the refusals (another room's pass, a revoked one, a
//!   forged `X-Waitroom-Room` or `X-Forwarded-Host`).
//! - HAProxy (a Lua action with HAProxy's own HTTP client): no pass → to
//!   the room, a valid pass → through, the pass in the URL → the cookie,
//!   and the same refusals; with no waitroom node, the "back soon" page.
//! - Sessions through Caddy and HAProxy: a visitor active past
//!   `session_idle_s` keeps access, one idle past it goes to the room.
//! - Traefik and Envoy, for which Debian has no package: their YAML is
//!   parsed (python3's PyYAML) and its keys checked.
//!
//! Needs Debian's `caddy`, `haproxy` and `python3-yaml` (`./scripts/test`
//! installs them); a missing one fails the test.

use support::origin::{ProtectedOrigin, Says};
use waitroom_testkit as support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use support::docs::replaced;
use support::{TestApp, test_settings};
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;
use waitroom::words::return_url::PublicUrl;

const ROOM: &str = "spring-sale";
const OTHER_ROOM: &str = "autumn-sale";
const PUBLIC: &str = "https://queue.example";

/// The first ````lang` block of docs/src/proxies/`page` after `heading`.
fn doc_block(page: &str, heading: &str, lang: &str) -> String {
    support::docs::doc_block(&format!("docs/src/proxies/{page}"), heading, lang)
}

/// A proxy running in the foreground in a directory of its own; killed
/// (and the directory removed) when dropped.
struct Proxy {
    port: u16,
    dir: PathBuf,
    child: Child,
}

impl Proxy {
    /// Runs `command(port, dir)` on a free port (another, when it is taken).
    fn start(what: &str, command: impl Fn(u16, &Path) -> Command) -> Self {
        support::ports::start_on_free_port(what, |port| {
            let dir =
                std::env::temp_dir().join(format!("waitroom-{what}-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut child = command(port, &dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("{what} did not start: {e}"));
            match support::ports::wait_until_listening(&mut child, port, Duration::from_secs(10)) {
                Ok(()) => Ok(Self { port, dir, child }),
                Err(reason) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    Err(reason)
                }
            }
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn needs(binary: &str, package: &str) {
    assert!(
        Path::new(binary).exists(),
        "{binary} is needed for this test: apt-get install {package} (./scripts/test installs it)"
    );
}

/// The waiting room, with `--public-url https://queue.example`.
async fn waitroom() -> TestApp {
    let clock = ManualClock::new(support::START_MS);
    let mut settings = test_settings();
    settings.public_url = Some(PublicUrl::parse(PUBLIC).unwrap());
    settings.origin_tokens = vec![ORIGIN_TOKEN.to_string()];
    TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn room_page_returning(to: &str) -> String {
    let to: String = url::form_urlencoded::byte_serialize(to.as_bytes()).collect();
    format!("{PUBLIC}/rooms/{ROOM}?return={to}")
}

/// The `return` of a Location to the room's page.
fn return_of(location: &str) -> String {
    let url = url::Url::parse(location).unwrap();
    url.query_pairs()
        .find(|(name, _)| name == "return")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_else(|| panic!("{location} has a return"))
}

/// As the protected site revokes: with an origin token, not the admin's.
async fn revoke(app: &TestApp, pass: &str) {
    let answer = client()
        .post(app.url(&format!("/api/admin/rooms/{ROOM}/passes/revoke")))
        .bearer_auth(ORIGIN_TOKEN)
        .json(&json!({ "pass": pass }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 204);
}

const ORIGIN_TOKEN: &str = "an-origin-token-for-the-shop-0123456789";

const CADDY: &str = "/usr/bin/caddy";

/// Caddy with the documented Caddyfile, asking the waitroom node on `node`
/// (a port) in front of the origin on `origin`.
fn caddy(node: u16, origin: u16) -> Proxy {
    needs(CADDY, "caddy");
    let caddyfile = doc_block("caddy.md", "## The Caddyfile", "caddyfile");
    let caddyfile = replaced(
        &caddyfile,
        "forward_auth 127.0.0.1:8080 {",
        &format!("forward_auth 127.0.0.1:{node} {{"),
    );
    let caddyfile = replaced(
        &caddyfile,
        "reverse_proxy 127.0.0.1:3000",
        &format!("reverse_proxy 127.0.0.1:{origin}"),
    );
    Proxy::start("caddy", |port, dir| {
        let config = replaced(
            &caddyfile,
            ":80 {",
            &format!(":{port} {{\n\tbind 127.0.0.1"),
        );
        let path = dir.join("Caddyfile");
        std::fs::write(&path, config).unwrap();
        let mut command = Command::new(CADDY);
        command
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&path)
            .env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"));
        command
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caddy_forward_auth_round_trip_through_the_room_and_back() {
    let app = waitroom().await;
    let seen = ProtectedOrigin::start(Says::Protected).await;
    let caddy = caddy(app.port, seen.port);
    let site = format!("http://127.0.0.1:{}", caddy.port);
    app.create_room(
        ROOM,
        json!({"target_url": format!("{site}/"), "paused": true, "tick_ms": 1000}),
    )
    .await;
    app.create_room(OTHER_ROOM, json!({"admit_per_tick": 100}))
        .await;
    let http = client();

    // 1. No pass: to the room's page, with the URL asked for.
    let answer = http
        .get(caddy.url("/checkout?item=7"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 302);
    let to_room = answer.headers()[LOCATION].to_str().unwrap().to_string();
    assert_eq!(
        to_room,
        room_page_returning(&format!("{site}/checkout?item=7"))
    );
    assert_eq!(seen.served(), 0);

    // 2. The page joins with the return (here over the HTTP API); the room
    // is paused, so the visitor waits.
    let answer = app
        .http
        .post(app.url(&format!("/api/rooms/{ROOM}/join")))
        .json(&json!({ "return": return_of(&to_room) }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let waiting: Value = answer.json().await.unwrap();
    assert_eq!(waiting["state"], "waiting");

    // 3. Admitted on a later tick: redirect_url is the original URL.
    assert_eq!(
        app.patch_room(ROOM, json!({"paused": false}))
            .await
            .status(),
        200
    );
    app.step(1_000).await;
    let status: Value = app
        .status_api(ROOM, waiting["ticket"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(status["state"], "admitted");
    let pass = status["pass"].as_str().unwrap().to_string();
    let redirect_url = status["redirect_url"].as_str().unwrap();
    assert_eq!(
        redirect_url,
        format!("{site}/checkout?item=7&wr_pass={pass}")
    );

    // 4. Back through Caddy with the pass in the URL: one 302 to the same
    // URL without it, and the cookie.
    let answer = http.get(redirect_url).send().await.unwrap();
    assert_eq!(answer.status(), 302);
    assert_eq!(
        answer.headers()[LOCATION],
        format!("{site}/checkout?item=7").as_str()
    );
    let cookie = answer.headers()[SET_COOKIE].to_str().unwrap().to_string();
    assert!(cookie.starts_with(&format!("wr_pass={pass};")), "{cookie}");
    assert_eq!(
        seen.served(),
        0,
        "the origin is not asked until the pass is a cookie"
    );

    // 5. The next request passes by cookie; the origin is told the visitor.
    let answer = http
        .get(format!("{site}/checkout?item=7"))
        .header(COOKIE, format!("wr_pass={pass}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "protected");
    assert_eq!(seen.served(), 1);
    let head = seen.last();
    assert!(head.starts_with("get /checkout?item=7 "), "{head}");
    let visitor = waiting_visitor(&app, &pass);
    assert!(
        head.contains(&format!("x-waitroom-visitor: {visitor}")),
        "{head}"
    );

    // Refused, each sent to the room and the origin not asked.
    let other = app.pass_for(OTHER_ROOM).await;
    let refused = [
        (
            "another room's pass",
            vec![(COOKIE, format!("wr_pass={other}"))],
            "/a",
        ),
        (
            "another room's pass, with a forged X-Waitroom-Room",
            vec![
                (COOKIE, format!("wr_pass={other}")),
                ("x-waitroom-room".parse().unwrap(), OTHER_ROOM.to_string()),
            ],
            "/a",
        ),
        (
            "another room's Bearer pass, with a forged X-Waitroom-Room",
            vec![
                (AUTHORIZATION, format!("Bearer {other}")),
                ("x-waitroom-room".parse().unwrap(), OTHER_ROOM.to_string()),
            ],
            "/a",
        ),
        ("another room's pass in the URL", vec![], "/a?wr_pass=OTHER"),
    ];
    for (what, headers, path) in refused {
        let mut request = http.get(caddy.url(&path.replace("OTHER", &other)));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 302, "{what}");
        assert_eq!(
            answer.headers()[LOCATION],
            room_page_returning(&format!("{site}/a")).as_str(),
            "{what}"
        );
        assert!(!answer.headers().contains_key(SET_COOKIE), "{what}");
    }
    // A forged X-Forwarded-Host: Caddy says where the visitor really was.
    let answer = http
        .get(caddy.url("/a"))
        .header("X-Forwarded-Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.headers()[LOCATION],
        room_page_returning(&format!("{site}/a")).as_str()
    );
    // Revoked: refused from then on.
    revoke(&app, &pass).await;
    let answer = http
        .get(caddy.url("/checkout"))
        .header(COOKIE, format!("wr_pass={pass}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 302, "a revoked pass");
    assert_eq!(answer.headers()["x-waitroom-refused"], "pass_revoked");
    assert_eq!(
        seen.served(),
        1,
        "the origin saw only the request let through"
    );
}

/// The visitor (`sub`) a pass names, read from its claims.
fn waiting_visitor(_app: &TestApp, pass: &str) -> String {
    use base64::Engine;
    let claims = pass.split('.').nth(1).unwrap();
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims)
        .unwrap();
    let claims: Value = serde_json::from_slice(&claims).unwrap();
    claims["sub"].as_str().unwrap().to_string()
}

/// A room of `app` whose passes are sessions of 30 s idle, an hour at most.
pub(crate) const SESSIONS: &str =
    r#"{"admit_per_tick": 1000, "pass_ttl_s": 3600, "session_idle_s": 30}"#;

/// api.md, "Sessions", through a real proxy: `pass`, used on `url` every
/// 20 s for 100 s, keeps access with the same cookie (nothing to copy: the
/// pass does not change); idle past `session_idle_s` (30 s, and its
/// tenth), it is sent to `to_room`.
pub(crate) async fn a_session_through(app: &TestApp, pass: &str, url: &str, to_room: &str) {
    let http = client();
    let get = || {
        http.get(url)
            .header(COOKIE, format!("wr_pass={pass}"))
            .send()
    };
    for step in 1..=5 {
        app.clock.advance_ms(20_000);
        let answer = get().await.unwrap();
        assert_eq!(answer.status(), 200, "{} s in, active", step * 20);
    }
    app.clock.advance_ms(33_000);
    let answer = get().await.unwrap();
    assert_eq!(answer.status(), 302, "idle past session_idle_s");
    assert_eq!(answer.headers()[LOCATION], to_room);
}

/// `a_session_through` the proxy serving `site`, in front of waitroom.
async fn a_session_through_the_site(app: &TestApp, site: &str) {
    let mut config: Value = serde_json::from_str(SESSIONS).unwrap();
    config["target_url"] = json!(format!("{site}/"));
    app.create_room(ROOM, config).await;
    let pass = app.pass_for(ROOM).await;
    let url = format!("{site}/checkout");
    a_session_through(app, &pass, &url, &room_page_returning(&url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_caddy_an_active_session_lasts_and_an_idle_one_goes_to_the_room() {
    let app = waitroom().await;
    let seen = ProtectedOrigin::start(Says::Protected).await;
    let caddy = caddy(app.port, seen.port);
    a_session_through_the_site(&app, &format!("http://127.0.0.1:{}", caddy.port)).await;
    assert_eq!(seen.served(), 5, "the origin saw the active requests only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_haproxy_an_active_session_lasts_and_an_idle_one_goes_to_the_room() {
    let app = waitroom().await;
    let seen = ProtectedOrigin::start(Says::Protected).await;
    let proxy = haproxy(app.port, seen.port);
    a_session_through_the_site(&app, &format!("http://127.0.0.1:{}", proxy.port)).await;
    assert_eq!(seen.served(), 5, "the origin saw the active requests only");
}

const HAPROXY: &str = "/usr/sbin/haproxy";

/// HAProxy with the documented configuration and Lua action, asking the
/// waitroom node on `node` (a port) in front of the origin on `origin`.
fn haproxy(node: u16, origin: u16) -> Proxy {
    needs(HAPROXY, "haproxy");
    let lua = doc_block("haproxy.md", "## The Lua action", "lua");
    let config = doc_block("haproxy.md", "## The configuration", "haproxy");
    let config = replaced(
        &config,
        "http://127.0.0.1:8080",
        &format!("http://127.0.0.1:{node}"),
    );
    let config = replaced(
        &config,
        "server site 127.0.0.1:3000",
        &format!("server site 127.0.0.1:{origin}"),
    );
    Proxy::start("haproxy", |port, dir| {
        let script = dir.join("waitroom.lua");
        std::fs::write(&script, &lua).unwrap();
        let config = replaced(
            &config,
            "lua-load /etc/haproxy/waitroom.lua",
            &format!("lua-load {}", script.display()),
        );
        let config = replaced(&config, "bind :80", &format!("bind 127.0.0.1:{port}"));
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let mut command = Command::new(HAPROXY);
        command.arg("-db").arg("-f").arg(&path);
        command
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_lua_gate_lets_through_only_valid_passes_of_its_room() {
    let app = waitroom().await;
    let seen = ProtectedOrigin::start(Says::Protected).await;
    let origin = seen.port;
    let proxy = haproxy(app.port, origin);
    let site = format!("http://127.0.0.1:{}", proxy.port);
    app.create_room(
        ROOM,
        json!({"target_url": format!("{site}/"), "admit_per_tick": 100}),
    )
    .await;
    app.create_room(OTHER_ROOM, json!({"admit_per_tick": 100}))
        .await;
    let http = client();
    let get = |path: &str, headers: Vec<(reqwest::header::HeaderName, String)>| {
        let mut request = http.get(proxy.url(path));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send().await.expect("haproxy answers") }
    };
    let room_header = || reqwest::header::HeaderName::from_static("x-waitroom-room");

    // No pass: to the room's page, with the URL asked for.
    let answer = get("/checkout?item=7", vec![]).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(
        answer.headers()[LOCATION],
        room_page_returning(&format!("{site}/checkout?item=7")).as_str()
    );

    // Admitted with that return: back to it, with the pass.
    let admitted: Value = app
        .http
        .post(app.url(&format!("/api/rooms/{ROOM}/join")))
        .json(&json!({ "return": format!("{site}/checkout?item=7") }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let pass = admitted["pass"].as_str().unwrap().to_string();
    let redirect_url = admitted["redirect_url"].as_str().unwrap();
    assert_eq!(
        redirect_url,
        format!("{site}/checkout?item=7&wr_pass={pass}")
    );

    // The pass in the URL: one 302 to the URL without it, and the cookie.
    let answer = http.get(redirect_url).send().await.unwrap();
    assert_eq!(answer.status(), 302);
    assert_eq!(
        answer.headers()[LOCATION],
        format!("{site}/checkout?item=7").as_str()
    );
    let cookie = answer.headers()[SET_COOKIE].to_str().unwrap();
    assert!(cookie.starts_with(&format!("wr_pass={pass};")), "{cookie}");
    assert_eq!(seen.served(), 0);

    // A valid pass, as the cookie or Bearer: through, the origin told who.
    let visitor = waiting_visitor(&app, &pass);
    for (what, headers) in [
        ("cookie", vec![(COOKIE, format!("wr_pass={pass}"))]),
        ("bearer", vec![(AUTHORIZATION, format!("Bearer {pass}"))]),
        (
            "with a forged X-Waitroom-Visitor",
            vec![
                (COOKIE, format!("wr_pass={pass}")),
                ("x-waitroom-visitor".parse().unwrap(), "someone-else".into()),
            ],
        ),
    ] {
        let answer = get("/checkout?item=7", headers).await;
        assert_eq!(answer.status(), 200, "{what}");
        assert_eq!(answer.text().await.unwrap(), "protected", "{what}");
        let head = seen.last();
        assert!(
            head.contains(&format!("x-waitroom-visitor: {visitor}\r\n"))
                && !head.contains("someone-else"),
            "{what}: {head}"
        );
    }
    let let_through = seen.served();
    assert_eq!(let_through, 3);

    // Refused: another room's pass (with or without a forged header naming
    // its room), a pass in the URL of another room, a revoked pass.
    let other = app.pass_for(OTHER_ROOM).await;
    for (what, path, headers) in [
        (
            "another room's pass",
            "/a".to_string(),
            vec![(COOKIE, format!("wr_pass={other}"))],
        ),
        (
            "another room's pass with a forged X-Waitroom-Room",
            "/a".to_string(),
            vec![
                (COOKIE, format!("wr_pass={other}")),
                (room_header(), OTHER_ROOM.to_string()),
            ],
        ),
        (
            "another room's Bearer pass with a forged X-Waitroom-Room",
            "/a".to_string(),
            vec![
                (AUTHORIZATION, format!("Bearer {other}")),
                (room_header(), OTHER_ROOM.to_string()),
            ],
        ),
        (
            "another room's pass in the URL",
            format!("/a?wr_pass={other}"),
            vec![],
        ),
    ] {
        let answer = get(&path, headers).await;
        assert_eq!(answer.status(), 302, "{what}");
        assert_eq!(
            answer.headers()[LOCATION],
            room_page_returning(&format!("{site}/a")).as_str(),
            "{what}"
        );
        assert!(!answer.headers().contains_key(SET_COOKIE), "{what}");
    }
    revoke(&app, &pass).await;
    let answer = get("/checkout", vec![(COOKIE, format!("wr_pass={pass}"))]).await;
    assert_eq!(answer.status(), 302, "a revoked pass");
    assert_eq!(
        seen.served(),
        let_through,
        "the origin saw only those let through"
    );

    // No waitroom node answering: the static page (fail closed).
    let no_node = support::ports::free_port();
    let closed = haproxy(no_node, origin);
    let answer = http
        .get(closed.url("/checkout"))
        .header(COOKIE, format!("wr_pass={pass}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()["retry-after"], "30");
    assert!(answer.text().await.unwrap().contains("<h1>Back soon</h1>"));
    assert_eq!(seen.served(), let_through);
}

/// A YAML block of the docs, as JSON (parsed by python3's PyYAML: there is
/// no YAML crate in the tree, and PyYAML is a Debian package).
fn yaml(page: &str, heading: &str) -> Value {
    let text = doc_block(page, heading, "yaml");
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed for this test (./scripts/test installs python3-yaml)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{page}'s YAML does not parse (or PyYAML is missing: apt-get install python3-yaml):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `value` at `pointer`, which must be there.
fn at<'a>(value: &'a Value, pointer: &str) -> &'a Value {
    value
        .pointer(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in {value:#}"))
}

/// Every key of the object at `pointer` is one the proxy reads.
fn keys_among(value: &Value, pointer: &str, known: &[&str]) {
    let object = at(value, pointer)
        .as_object()
        .unwrap_or_else(|| panic!("{pointer} is an object"));
    for key in object.keys() {
        assert!(
            known.contains(&key.as_str()),
            "{pointer}: unknown key {key:?}"
        );
    }
}

#[test]
fn the_traefik_configuration_parses_and_names_the_gate() {
    let config = yaml("traefik.md", "## Dynamic configuration");
    keys_among(&config, "", &["http"]);
    keys_among(&config, "/http", &["routers", "middlewares", "services"]);
    keys_among(
        &config,
        "/http/routers/shop",
        &[
            "rule",
            "entryPoints",
            "middlewares",
            "service",
            "priority",
            "tls",
        ],
    );
    assert_eq!(
        at(&config, "/http/routers/shop/middlewares"),
        &json!(["waitroom-room", "waitroom"]),
        "the room is named before the gate is asked"
    );
    keys_among(&config, "/http/middlewares/waitroom-room", &["headers"]);
    assert_eq!(
        at(
            &config,
            "/http/middlewares/waitroom-room/headers/customRequestHeaders/X-Waitroom-Room"
        ),
        ROOM
    );
    keys_among(
        &config,
        "/http/middlewares/waitroom/forwardAuth",
        &[
            "address",
            "tls",
            "trustForwardHeader",
            "authResponseHeaders",
            "authResponseHeadersRegex",
            "authRequestHeaders",
            "addAuthCookiesToResponse",
        ],
    );
    let address = at(&config, "/http/middlewares/waitroom/forwardAuth/address");
    assert_eq!(address, "http://127.0.0.1:8080/api/gate");
    assert_eq!(
        at(
            &config,
            "/http/middlewares/waitroom/forwardAuth/authResponseHeaders"
        ),
        &json!(["X-Waitroom-Visitor"])
    );
    assert!(at(&config, "/http/services/shop/loadBalancer/servers/0/url").is_string());
}

#[test]
fn the_envoy_configuration_parses_and_names_the_gate() {
    let config = yaml("envoy.md", "## Bootstrap configuration");
    let manager = at(
        &config,
        "/static_resources/listeners/0/filter_chains/0/filters/0",
    );
    assert_eq!(
        at(manager, "/name"),
        "envoy.filters.network.http_connection_manager"
    );
    assert_eq!(
        at(manager, "/typed_config/@type"),
        "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
    );
    let filters = at(manager, "/typed_config/http_filters")
        .as_array()
        .unwrap();
    assert_eq!(filters.len(), 2);
    assert_eq!(
        at(&filters[1], "/name"),
        "envoy.filters.http.router",
        "the router comes last"
    );
    let authz = &filters[0];
    assert_eq!(at(authz, "/name"), "envoy.filters.http.ext_authz");
    assert_eq!(
        at(authz, "/typed_config/@type"),
        "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"
    );
    keys_among(
        authz,
        "/typed_config",
        &[
            "@type",
            "transport_api_version",
            "http_service",
            "failure_mode_allow",
            "with_request_body",
            "clear_route_cache",
            "status_on_error",
        ],
    );
    keys_among(
        authz,
        "/typed_config/http_service",
        &[
            "server_uri",
            "path_prefix",
            "authorization_request",
            "authorization_response",
        ],
    );
    keys_among(
        authz,
        "/typed_config/http_service/server_uri",
        &["uri", "cluster", "timeout"],
    );
    assert_eq!(
        at(authz, "/typed_config/http_service/path_prefix"),
        "/api/gate"
    );
    keys_among(
        authz,
        "/typed_config/http_service/authorization_request",
        &["allowed_headers", "headers_to_add"],
    );
    assert_eq!(
        at(
            authz,
            "/typed_config/http_service/authorization_request/headers_to_add"
        ),
        &json!([{"key": "X-Waitroom-Room", "value": ROOM}])
    );
    let allowed = at(
        authz,
        "/typed_config/http_service/authorization_request/allowed_headers/patterns",
    );
    for header in ["cookie", "authorization"] {
        assert!(
            allowed
                .as_array()
                .unwrap()
                .contains(&json!({ "exact": header })),
            "{header} goes to the gate"
        );
    }
    keys_among(
        authz,
        "/typed_config/http_service/authorization_response",
        &[
            "allowed_upstream_headers",
            "allowed_upstream_headers_to_append",
            "allowed_client_headers",
            "allowed_client_headers_on_success",
            "dynamic_metadata_from_headers",
        ],
    );
    let to_client = at(
        authz,
        "/typed_config/http_service/authorization_response/allowed_client_headers/patterns",
    );
    for header in ["location", "set-cookie"] {
        assert!(
            to_client
                .as_array()
                .unwrap()
                .contains(&json!({ "exact": header })),
            "{header} goes back to the visitor"
        );
    }
    let cluster = at(authz, "/typed_config/http_service/server_uri/cluster");
    let clusters = at(&config, "/static_resources/clusters")
        .as_array()
        .unwrap();
    assert!(
        clusters.iter().any(|c| &c["name"] == cluster),
        "the gate's cluster {cluster} is defined"
    );
}
