//! Who besides the operator and the waiting page may call a node: the
//! protected site with an origin token (`--origin-token`: revoke passes and
//! `/api/verify`, nothing else), and pages of the origins in
//! `--cors-origins` (the visitor API from a browser, never the admin API).
//!
//! The operator routes are read from the routes' source (every
//! `web::resource("/api/admin…")` and its methods), so a route added later
//! is checked too without anyone remembering to list it here.

use waitroom_testkit as support;

use std::process::Command;
use std::sync::Arc;

use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use support::{TestApp, test_settings};
use waitroom::Application;
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;

const ORIGIN_TOKEN: &str = "origin-token-of-the-shop-0123456789abcdef";
const OTHER_ORIGIN_TOKEN: &str = "a-second-origin-token-during-rotation-0123";
const LISTED: &str = "https://shop.example.com";
const UNLISTED: &str = "https://evil.example.net";
const REVOKE: &str = "/api/admin/rooms/{room}/passes/revoke";

/// Every operator API route, `(method, path pattern)`, as the source
/// registers them: each `web::resource("/api/admin…")` and the methods
/// chained on it up to the next resource.
fn admin_routes() -> Vec<(Method, String)> {
    let mut routes = Vec::new();
    let mut files = vec![std::path::PathBuf::from("src")];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for piece in source.split("web::resource(\"").skip(1) {
            let Some((pattern, rest)) = piece.split_once('"') else {
                continue;
            };
            if !pattern.starts_with("/api/admin") {
                continue;
            }
            // Up to the end of the `routes` function, for the last resource.
            let rest = rest.split("\n}").next().unwrap_or(rest);
            for (name, method) in [
                ("get", Method::GET),
                ("post", Method::POST),
                ("put", Method::PUT),
                ("patch", Method::PATCH),
                ("delete", Method::DELETE),
            ] {
                if rest.contains(&format!(".{name}(")) {
                    routes.push((method, pattern.to_string()));
                }
            }
        }
    }
    routes.sort_by(|a, b| (&a.1, a.0.as_str()).cmp(&(&b.1, b.0.as_str())));
    routes
}

#[test]
fn the_route_reader_finds_the_operator_api() {
    let routes = admin_routes();
    for expected in [
        (Method::GET, "/api/admin/rooms"),
        (Method::POST, "/api/admin/rooms"),
        (Method::GET, "/api/admin/rooms/{room}"),
        (Method::PATCH, "/api/admin/rooms/{room}"),
        (Method::DELETE, "/api/admin/rooms/{room}"),
        (Method::POST, REVOKE),
        (Method::PUT, "/api/admin/rooms/{room}/sale"),
        (Method::GET, "/api/admin/rooms/{room}/sale/orders"),
    ] {
        assert!(
            routes
                .iter()
                .any(|(method, path)| *method == expected.0 && path == expected.1),
            "{expected:?} not found in {routes:?}"
        );
    }
}

async fn app_with(origin_tokens: &[&str], cors_origins: &[&str]) -> TestApp {
    let mut settings = test_settings();
    settings.origin_tokens = origin_tokens.iter().map(|t| t.to_string()).collect();
    settings.cors_origins = cors_origins.iter().map(|o| o.to_string()).collect();
    let clock = ManualClock::new(support::START_MS);
    TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await
}

fn path_in(pattern: &str, room: &str) -> String {
    pattern.replace("{room}", room)
}

async fn body(response: Response) -> Value {
    response.json().await.unwrap_or(Value::Null)
}

async fn call(app: &TestApp, method: Method, path: &str, token: &str) -> Response {
    let request = app
        .http
        .request(method.clone(), app.url(path))
        .bearer_auth(token);
    let request = if method == Method::GET {
        request
    } else {
        request.json(&json!({}))
    };
    request.send().await.unwrap()
}

async fn verify(app: &TestApp, room: &str, bearer: Option<&str>, cookie: Option<&str>) -> Response {
    let mut request = app.http.get(app.url(&format!("/api/verify?room={room}")));
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    if let Some(pass) = cookie {
        request = request.header("cookie", format!("wr_pass={pass}"));
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn an_origin_token_revokes_a_pass_and_may_call_verify() {
    let app = app_with(&[OTHER_ORIGIN_TOKEN, ORIGIN_TOKEN], &[]).await;
    app.create_room("shop", json!({})).await;
    let pass = app.pass_for("shop").await;

    // At /api/verify the token is accepted and changes nothing: the pass
    // is the cookie, and a missing one is still missing.
    let answer = verify(&app, "shop", Some(ORIGIN_TOKEN), Some(&pass)).await;
    assert_eq!(answer.status(), 204, "{:?}", body(answer).await);
    let answer = verify(&app, "shop", Some(ORIGIN_TOKEN), None).await;
    assert_eq!(answer.status(), 401);
    assert_eq!(body(answer).await["error"]["code"], "missing_pass");

    let revoked = app
        .http
        .post(app.url(&path_in(REVOKE, "shop")))
        .bearer_auth(ORIGIN_TOKEN)
        .json(&json!({"pass": pass}))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 204, "{:?}", body(revoked).await);
    let answer = verify(&app, "shop", None, Some(&pass)).await;
    assert_eq!(answer.status(), 401);
    assert_eq!(body(answer).await["error"]["code"], "pass_revoked");

    // Every listed token works (rotation: the old and the new side by side).
    let second = app.pass_for("shop").await;
    let revoked = app
        .http
        .post(app.url(&path_in(REVOKE, "shop")))
        .bearer_auth(OTHER_ORIGIN_TOKEN)
        .json(&json!({"pass": second}))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 204);
    assert_eq!(
        verify(&app, "shop", Some(&second), None).await.status(),
        401
    );
}

#[tokio::test]
async fn an_origin_token_is_refused_on_every_other_operator_route_and_the_admin_token_is_not() {
    let app = app_with(&[ORIGIN_TOKEN], &[]).await;
    app.create_room("shop", json!({"paused": true})).await;
    let routes = admin_routes();
    let others: Vec<_> = routes
        .iter()
        .filter(|(method, path)| !(*method == Method::POST && path == REVOKE))
        .collect();
    assert!(others.len() >= 7, "{routes:?}");
    for (method, pattern) in &others {
        let path = path_in(pattern, "shop");
        let answer = call(&app, method.clone(), &path, ORIGIN_TOKEN).await;
        assert_eq!(answer.status(), 403, "{method} {path} with an origin token");
        assert_eq!(
            body(answer).await["error"]["code"],
            "origin_token_not_allowed",
            "{method} {path}"
        );
    }
    // Nothing changed: the room is there, still paused, open.
    let room = body(call(&app, Method::GET, "/api/admin/rooms/shop", &app.admin_token).await).await;
    assert_eq!(room["paused"], true, "{room}");
    assert_eq!(app.join_api("shop").await["state"], "waiting");

    // The admin token passes every one of them, the revocation included
    // (the answers past the check are the route's own: a 400 for an empty
    // body, a 404 for a sale not set up).
    for (method, pattern) in &routes {
        let path = path_in(pattern, "shop");
        let answer = call(&app, method.clone(), &path, &app.admin_token).await;
        let status = answer.status();
        let code = body(answer).await["error"]["code"].clone();
        assert!(
            status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
            "{method} {path} with the admin token: {status} {code}"
        );
    }
}

/// The admin page takes no Bearer token at all, and its login form takes
/// the admin token only: an origin token there is a wrong login.
#[tokio::test]
async fn an_origin_token_does_not_log_in_to_the_admin_page() {
    let app = app_with(&[ORIGIN_TOKEN], &[]).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = client
        .get(app.url("/admin"))
        .bearer_auth(ORIGIN_TOKEN)
        .send()
        .await
        .unwrap();
    let cookie = |response: &Response, name: &str| {
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix(&format!("{name}=")))
            .map(|v| v.split(';').next().unwrap().to_string())
    };
    let login_csrf = cookie(&page, "wr_csrf").expect("the login form, not the operator's page");
    let html = page.text().await.unwrap();
    let at = html.find(r#"name="csrf" value=""#).expect("a csrf field") + 19;
    let form_csrf = html[at..].split('"').next().unwrap().to_string();
    let login = |token: String| {
        client
            .post(app.url("/admin/login"))
            .header("cookie", format!("wr_csrf={login_csrf}"))
            .form(&[("token", token), ("csrf", form_csrf.clone())])
            .send()
    };
    let refused = login(ORIGIN_TOKEN.to_string()).await.unwrap();
    assert_eq!(cookie(&refused, "wr_admin"), None, "no operator session");
    assert_ne!(refused.status(), 303);
    let admitted = login(app.admin_token.clone()).await.unwrap();
    assert_eq!(admitted.status(), 303, "the admin token logs in");
    assert!(cookie(&admitted, "wr_admin").is_some());
}

#[tokio::test]
async fn wrong_tokens_are_refused_and_count_towards_the_login_lockout() {
    let app = app_with(&[ORIGIN_TOKEN], &[]).await;
    app.create_room("shop", json!({})).await;
    let pass = app.pass_for("shop").await;
    let revoke = |token: &'static str| {
        app.http
            .post(app.url(&path_in(REVOKE, "shop")))
            .bearer_auth(token)
            .json(&json!({"pass": pass}))
            .send()
    };
    let wrong = "origin-token-of-the-shop-0123456789abcdeX";
    let mut statuses = Vec::new();
    for _ in 0..11 {
        let answer = revoke(wrong).await.unwrap();
        statuses.push(answer.status().as_u16());
        if answer.status() == 401 {
            assert_eq!(body(answer).await["error"]["code"], "invalid_admin_token");
        }
    }
    assert_eq!(statuses[..10], [401; 10], "{statuses:?}");
    assert_eq!(statuses[10], 429, "past 10 wrong tokens a minute");
    let right = revoke(ORIGIN_TOKEN).await.unwrap();
    assert_eq!(right.status(), 429, "the right token too, while shut out");
    assert_eq!(verify(&app, "shop", Some(&pass), None).await.status(), 204);
}

/// security.md, item 8: an origin token limited to rooms revokes in those
/// alone (403 elsewhere), so one site's token cannot cut another site's
/// visitors; a token without rooms keeps every room.
#[tokio::test]
async fn an_origin_token_limited_to_rooms_revokes_in_those_alone() {
    let limited = format!("{ORIGIN_TOKEN}@shop+outlet");
    let app = app_with(&[&limited, OTHER_ORIGIN_TOKEN], &[]).await;
    for room in ["shop", "outlet", "elsewhere"] {
        app.create_room(room, json!({})).await;
    }
    let revoke = |room: &'static str, token: &'static str, pass: String| {
        app.http
            .post(app.url(&path_in(REVOKE, room)))
            .bearer_auth(token)
            .json(&json!({ "pass": pass }))
            .send()
    };
    for room in ["shop", "outlet"] {
        let pass = app.pass_for(room).await;
        let answer = revoke(room, ORIGIN_TOKEN, pass).await.unwrap();
        assert_eq!(answer.status(), 204, "{room}");
    }
    let pass = app.pass_for("elsewhere").await;
    let answer = revoke("elsewhere", ORIGIN_TOKEN, pass.clone())
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
    let error = body(answer).await;
    assert_eq!(
        error["error"]["code"], "origin_token_not_allowed",
        "{error}"
    );
    assert_eq!(
        verify(&app, "elsewhere", None, Some(&pass)).await.status(),
        204,
        "the pass stands"
    );
    // Verify is open to it everywhere, as to anyone.
    assert_eq!(
        verify(&app, "elsewhere", Some(ORIGIN_TOKEN), Some(&pass))
            .await
            .status(),
        204
    );
    let answer = revoke("elsewhere", OTHER_ORIGIN_TOKEN, pass).await.unwrap();
    assert_eq!(
        answer.status(),
        204,
        "a token without rooms keeps every room"
    );
}

#[tokio::test]
async fn a_short_origin_token_or_the_admin_token_stops_the_start() {
    let start = |tokens: Vec<String>| async move {
        let mut settings = test_settings();
        settings.origin_tokens = tokens;
        let clock = ManualClock::new(support::START_MS);
        Application::build_with_stores(
            settings,
            Arc::new(clock.clone()),
            Stores::memory(Arc::new(clock)),
        )
        .await
        .err()
        .map(|error| error.to_string())
    };
    let short = start(vec![ORIGIN_TOKEN.into(), "too-short".into()]).await;
    assert_eq!(
        short.as_deref(),
        Some(
            "origin token number 2: it must be at least 32 characters (it has 9); \
             make one with, say, `openssl rand -hex 32`"
        )
    );
    let admin = test_settings().admin_token.unwrap();
    let same = start(vec![admin]).await;
    assert!(
        same.as_deref()
            .is_some_and(|e| e.contains("origin token number 1 is the admin token")),
        "{same:?}"
    );
}

#[test]
fn the_binary_reads_origin_tokens_comma_separated_from_its_environment() {
    let output = Command::new(env!("CARGO_BIN_EXE_waitroom"))
        .args(["--listen", "127.0.0.1:0"])
        .env(
            "WAITROOM_ADMIN_TOKEN",
            "test-admin-token-of-at-least-32-chars",
        )
        .env("WAITROOM_ORIGIN_TOKEN", format!("{ORIGIN_TOKEN},short"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let printed = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
    assert!(
        printed.contains("origin token number 2: it must be at least 32 characters (it has 5)"),
        "{printed}"
    );
    assert!(
        !printed.contains(ORIGIN_TOKEN),
        "no token in the output: {printed}"
    );
}

// --- CORS ---------------------------------------------------------------------

const CORS_HEADERS: [&str; 6] = [
    "access-control-allow-origin",
    "access-control-allow-credentials",
    "access-control-allow-methods",
    "access-control-allow-headers",
    "access-control-expose-headers",
    "access-control-max-age",
];

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

fn no_cors_headers(response: &Response, what: &str) {
    for name in CORS_HEADERS {
        assert_eq!(header(response, name), None, "{what}: {name}");
    }
}

async fn preflight(app: &TestApp, path: &str, origin: &str, method: &str) -> Response {
    app.http
        .request(Method::OPTIONS, app.url(path))
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_listed_origin_may_call_the_visitor_api_with_credentials() {
    let app = app_with(&[], &["http://127.0.0.1:3000", LISTED]).await;
    app.create_room("shop", json!({"paused": true})).await;

    let answer = preflight(&app, "/api/rooms/shop/join", LISTED, "POST").await;
    assert_eq!(answer.status(), 204);
    assert_eq!(
        header(&answer, "access-control-allow-origin").as_deref(),
        Some(LISTED)
    );
    assert_eq!(
        header(&answer, "access-control-allow-credentials").as_deref(),
        Some("true")
    );
    let methods = header(&answer, "access-control-allow-methods").unwrap_or_default();
    assert!(
        methods.contains("POST") && methods.contains("DELETE"),
        "{methods}"
    );
    let headers = header(&answer, "access-control-allow-headers").unwrap_or_default();
    assert!(
        headers.contains("Authorization") && headers.contains("Content-Type"),
        "{headers}"
    );

    let joined = app
        .http
        .post(app.url("/api/rooms/shop/join"))
        .header("origin", LISTED)
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), 200);
    assert_eq!(
        header(&joined, "access-control-allow-origin").as_deref(),
        Some(LISTED)
    );
    assert_eq!(
        header(&joined, "access-control-allow-credentials").as_deref(),
        Some("true")
    );
    assert!(
        header(&joined, "vary")
            .unwrap_or_default()
            .contains("Origin")
    );
    let exposed = header(&joined, "access-control-expose-headers").unwrap_or_default();
    assert!(exposed.contains("Retry-After"), "{exposed}");

    // Error answers carry it too, so the app can read them.
    let refused = app
        .http
        .get(app.url("/api/rooms/shop/status"))
        .header("origin", LISTED)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        header(&refused, "access-control-allow-origin").as_deref(),
        Some(LISTED)
    );

    // The client module loads as a module script from that origin.
    let module = app
        .http
        .get(app.url("/static/waitroom-client.js"))
        .header("origin", LISTED)
        .send()
        .await
        .unwrap();
    assert_eq!(module.status(), 200);
    assert_eq!(
        header(&module, "access-control-allow-origin").as_deref(),
        Some(LISTED)
    );
}

#[tokio::test]
async fn an_unlisted_origin_gets_no_cors_headers_and_the_same_answers_as_before() {
    let app = app_with(&[], &[LISTED]).await;
    let plain = app_with(&[], &[]).await;
    for node in [&app, &plain] {
        node.create_room("shop", json!({"paused": true})).await;
    }
    let with_flag = preflight(&app, "/api/rooms/shop/join", UNLISTED, "POST").await;
    let without = preflight(&plain, "/api/rooms/shop/join", UNLISTED, "POST").await;
    no_cors_headers(&with_flag, "an unlisted origin's preflight");
    assert_eq!(
        with_flag.status(),
        without.status(),
        "answered as without the flag"
    );

    let joined = app
        .http
        .post(app.url("/api/rooms/shop/join"))
        .header("origin", UNLISTED)
        .send()
        .await
        .unwrap();
    assert_eq!(
        joined.status(),
        200,
        "the request itself is served; the browser hides it"
    );
    no_cors_headers(&joined, "an unlisted origin's join");

    // Without the flag, not even a listed-looking origin gets any.
    let joined = plain
        .http
        .post(plain.url("/api/rooms/shop/join"))
        .header("origin", LISTED)
        .send()
        .await
        .unwrap();
    no_cors_headers(&joined, "no --cors-origins");
    let answer = preflight(&plain, "/api/rooms/shop/join", LISTED, "POST").await;
    no_cors_headers(&answer, "no --cors-origins, a preflight");
}

#[tokio::test]
async fn the_admin_api_never_answers_cors_even_to_a_listed_origin() {
    let app = app_with(&[ORIGIN_TOKEN], &[LISTED]).await;
    app.create_room("shop", json!({"paused": true})).await;
    let mut paths: Vec<(Method, String)> = admin_routes()
        .into_iter()
        .map(|(method, pattern)| (method, path_in(&pattern, "shop")))
        .collect();
    paths.extend([
        (Method::GET, "/admin".to_string()),
        (Method::POST, "/admin/login".to_string()),
        (Method::GET, "/api/verify?room=shop".to_string()),
        (Method::GET, "/rooms/shop".to_string()),
    ]);
    // Closing the room last, so every other route still finds it.
    paths.sort_by_key(|(method, _)| *method == Method::DELETE);
    for (method, path) in &paths {
        let answer = preflight(&app, path, LISTED, method.as_str()).await;
        no_cors_headers(&answer, &format!("preflight of {method} {path}"));
        let request = app
            .http
            .request(method.clone(), app.url(path))
            .header("origin", LISTED)
            .bearer_auth(&app.admin_token);
        let request = if *method == Method::GET {
            request
        } else {
            request.json(&json!({}))
        };
        let answer = request.send().await.unwrap();
        no_cors_headers(&answer, &format!("{method} {path}"));
    }
}
