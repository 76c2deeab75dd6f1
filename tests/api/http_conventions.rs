//! HTTP conventions and hygiene (issue 11): HEAD, 405 with `Allow`, a JSON
//! body on every error, 415 for a wrong media type, the security headers,
//! and logs without tickets or passes.
//!
//! The log tests read what the test binary's one subscriber kept
//! (`support::logs`), each by what only its own requests wrote.

use std::time::Instant;

use waitroom_testkit as support;

use reqwest::{Method, Response};
use serde_json::{Value, json};
use support::{FetchJson, PATIENCE, TestApp};

fn logged() -> String {
    support::logs::captured()
}

async fn spawn() -> TestApp {
    TestApp::spawn().await
}

async fn error_of(response: Response) -> (u16, String, Value) {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "a {status} answered {content_type:?}, not JSON"
    );
    let body: Value = response.json().await.expect("a JSON error body");
    let code = body["error"]["code"]
        .as_str()
        .expect("error.code")
        .to_string();
    assert!(
        body["error"]["message"].is_string(),
        "error.message: {body}"
    );
    (status, code, body)
}

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test]
async fn head_is_answered_wherever_get_is_without_a_body() {
    let app = spawn().await;
    app.create_room("heads", json!({})).await;
    for path in [
        "/healthz",
        "/rooms/heads",
        "/static/style.css",
        "/admin",
        "/.well-known/jwks.json",
        "/api/rooms/heads/status",
    ] {
        let get = app.http.get(app.url(path)).send().await.unwrap();
        let head = app.http.head(app.url(path)).send().await.unwrap();
        assert_eq!(head.status(), get.status(), "HEAD {path}");
        assert_eq!(
            header(&head, "content-type"),
            header(&get, "content-type"),
            "HEAD {path}"
        );
        assert!(
            head.bytes().await.unwrap().is_empty(),
            "HEAD {path}: no body"
        );
    }
    let get = app.http.get(app.url("/static/style.css")).send().await;
    let length = get.unwrap().bytes().await.unwrap().len();
    let head = app.http.head(app.url("/static/style.css")).send().await;
    assert_eq!(
        header(&head.unwrap(), "content-length"),
        Some(length.to_string()),
        "HEAD gives the length GET would"
    );
}

#[tokio::test]
async fn a_wrong_method_on_a_known_path_is_405_with_allow_and_a_json_body() {
    let app = spawn().await;
    app.create_room("methods", json!({})).await;
    for (method, path, allow) in [
        (Method::GET, "/api/rooms/methods/join", "POST"),
        (Method::DELETE, "/api/rooms/methods/status", "GET, HEAD"),
        (Method::POST, "/healthz", "GET, HEAD"),
        (Method::PUT, "/api/admin/rooms", "GET, HEAD, POST"),
        (
            Method::POST,
            "/api/admin/rooms/methods",
            "GET, HEAD, PATCH, DELETE",
        ),
        (Method::HEAD, "/admin/login", "POST"),
        (Method::PATCH, "/static/style.css", "GET, HEAD"),
    ] {
        let response = app.admin(method.clone(), path).send().await.unwrap();
        assert_eq!(response.status(), 405, "{method} {path}");
        assert_eq!(
            header(&response, "allow").as_deref(),
            Some(allow),
            "{method} {path}"
        );
        if method != Method::HEAD {
            let (_, code, _) = error_of(response).await;
            assert_eq!(code, "method_not_allowed");
        }
    }
    // An unknown path is still a 404, and an allowed method still reaches
    // its route (which may answer 404 itself).
    let (status, code, _) = error_of(app.http.get(app.url("/nowhere")).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
    let (status, code, _) = error_of(
        app.admin(Method::GET, "/api/admin/rooms/absent")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (404, "room_not_found"));
}

#[tokio::test]
async fn errors_outside_the_json_api_have_the_json_error_body_too() {
    let app = spawn().await;
    let missing_asset = app
        .http
        .get(app.url("/static/nope.js"))
        .send()
        .await
        .unwrap();
    let (status, code, _) = error_of(missing_asset).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
    let bad_sale_page = app.http.get(app.url("/rooms/NOT_A_ROOM/sale")).send().await;
    let (status, code, _) = error_of(bad_sale_page.unwrap()).await;
    assert_eq!((status, code.as_str()), (404, "room_not_found"));
}

#[tokio::test]
async fn a_body_that_is_not_json_on_a_json_route_is_415() {
    let app = spawn().await;
    let create = |content_type: Option<&'static str>| {
        let request = app
            .admin(Method::POST, "/api/admin/rooms")
            .body(r#"{"id":"typed","name":"Typed","target_url":"/x"}"#);
        match content_type {
            Some(content_type) => request.header("Content-Type", content_type),
            None => request,
        }
        .send()
    };
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let (status, code, _) = error_of(create(content_type).await.unwrap()).await;
        assert_eq!(
            (status, code.as_str()),
            (415, "unsupported_media_type"),
            "{content_type:?}"
        );
    }
    let created = create(Some("application/json; charset=utf-8"))
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // Malformed JSON is still the 400 api.md gives malformed input.
    let malformed = app
        .admin(Method::PATCH, "/api/admin/rooms/typed")
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (status, code, _) = error_of(malformed).await;
    assert_eq!((status, code.as_str()), (400, "invalid_json"));
}

#[tokio::test]
async fn a_join_takes_json_or_nothing() {
    let app = spawn().await;
    app.create_room("typed-join", json!({"paused": true})).await;
    let join = || app.http.post(app.url("/api/rooms/typed-join/join"));
    for (content_type, body) in [
        (Some("text/plain"), "{}"),
        (Some("application/x-www-form-urlencoded"), "{}"),
        (Some("text/plain"), "not json"),
        (None, "{}"),
    ] {
        let request = match content_type {
            Some(content_type) => join().header("Content-Type", content_type),
            None => join(),
        };
        let (status, code, _) = error_of(request.body(body).send().await.unwrap()).await;
        assert_eq!(
            (status, code.as_str()),
            (415, "unsupported_media_type"),
            "{content_type:?} {body:?}"
        );
    }
    // The visitor API's `curl -X POST …/join` (docs/src/api-visitor.md):
    // no body, no Content-Type.
    let bare = join().send().await.unwrap();
    assert_eq!(bare.status(), 200);
    for content_type in ["application/json", "application/json; charset=utf-8"] {
        let typed = join()
            .header("Content-Type", content_type)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(typed.status(), 200, "{content_type}");
    }
    let room = app
        .admin(Method::GET, "/api/admin/rooms/typed-join")
        .fetch_json()
        .await;
    assert_eq!(
        room["stats"]["waiting"], 3,
        "only the accepted joins made places"
    );
}

#[tokio::test]
async fn pages_and_api_answers_carry_the_security_headers() {
    let app = spawn().await;
    app.create_room("headers", json!({})).await;
    let pages = [
        "/rooms/headers",
        "/rooms/headers/sale",
        "/rooms/nowhere",
        "/admin",
        "/demo/target?wr_pass=not-a-pass",
    ];
    for path in pages {
        let page = app.http.get(app.url(path)).send().await.unwrap();
        assert!(
            header(&page, "content-type")
                .unwrap()
                .starts_with("text/html"),
            "{path} is a page"
        );
        let csp = header(&page, "content-security-policy").expect("a CSP");
        for directive in [
            "default-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {directive} in {csp}");
        }
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
        assert_eq!(
            header(&page, "x-frame-options").as_deref(),
            Some("DENY"),
            "{path}"
        );
    }
    let everything = pages.into_iter().chain([
        "/static/room.js",
        "/static/nope.js",
        "/healthz",
        "/api/rooms/headers/status",
        "/api/admin/rooms",
        "/nowhere",
    ]);
    for path in everything {
        let response = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(
            header(&response, "x-content-type-options").as_deref(),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            header(&response, "referrer-policy").as_deref(),
            Some("no-referrer"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_flood_of_bad_requests_writes_a_line_not_a_line_each() {
    let app = spawn().await;
    let lines_about = |target: &str| {
        logged()
            .lines()
            .filter(|line| line.contains("Error encountered") && line.contains(target))
            .count()
    };
    for _ in 0..50 {
        let bad = app.http.get(app.url("/flooded-path")).send().await.unwrap();
        assert_eq!(bad.status(), 404);
        let malformed = app
            .admin(Method::PATCH, "/api/admin/rooms/flooded")
            .header("Content-Type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(malformed.status(), 400);
    }
    // Each line is written before its answer is sent.
    assert_eq!(lines_about("http.target=/flooded-path"), 1, "{}", logged());
    assert_eq!(lines_about("http.target=/api/admin/rooms/flooded"), 1);
    // The next window's first line says how many were left out.
    app.clock.advance_ms(waitroom::http::refusal_log::WINDOW_MS);
    app.http.get(app.url("/flooded-path")).send().await.unwrap();
    let summary = logged()
        .lines()
        .filter(|line| line.contains("http.target=/flooded-path") && line.contains("left_out=49"))
        .count();
    assert_eq!(summary, 1, "{}", logged());
}

#[tokio::test]
async fn tickets_and_passes_in_the_address_never_reach_the_logs() {
    let app = spawn().await;
    app.create_room("quiet", json!({})).await;
    let ticket = app.join_api("quiet").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    // A socket with a good ticket, and a handshake refused with a 401 (an
    // error is logged inside the request's span).
    let socket = app.connect("quiet", &ticket).await;
    drop(socket);
    let refused = app
        .http
        .get(app.url(&format!("/api/rooms/quiet/ws?ticket={ticket}x")))
        .header("X-Forwarded-For", "198.18.42.77")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let page = app
        .http
        .get(app.url(&format!("/demo/target?wr_pass={ticket}&room=quiet")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);

    let deadline = Instant::now() + PATIENCE;
    loop {
        let logs = logged();
        let seen = [
            "/api/rooms/quiet/ws?ticket=[redacted]",
            "/demo/target?wr_pass=[redacted]&room=[redacted]",
        ]
        .iter()
        .all(|target| logs.contains(target));
        if seen {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the requests are logged with their query redacted:\n{logs}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let logs = logged();
    assert!(
        !logs.contains(&ticket),
        "a ticket reached the logs:\n{logs}"
    );
    assert!(
        logs.contains("http.client_ip=127.0.0.1"),
        "the peer address is logged:\n{logs}"
    );
    assert!(
        !logs.contains("198.18.42.77"),
        "X-Forwarded-For from an untrusted peer is not believed:\n{logs}"
    );
}

/// Sends `request` on a connection of its own and reads until the server
/// closes it: the whole answer. Fails if no answer, or no close, comes.
async fn answer_then_close(port: u16, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer)).await;
    let shown = String::from_utf8_lossy(&answer).into_owned();
    match read {
        Ok(Ok(_)) => shown,
        // A reset after the whole answer still closes the connection.
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionReset => shown,
        Ok(Err(error)) => panic!("the connection failed: {error}; read {shown:?}"),
        Err(_) => panic!("no answer, or the connection was left open; read {shown:?}"),
    }
}

#[tokio::test]
async fn an_upgrade_header_on_a_route_that_reads_a_body_is_answered_and_closed() {
    let app = spawn().await;
    app.create_room("upgrades", json!({})).await;
    app.admin(Method::PUT, "/api/admin/rooms/upgrades/sale")
        .json(&json!({"stock": 5}))
        .send()
        .await
        .unwrap();
    let pass = app.pass_for("upgrades").await;
    let token = app.admin_token.clone();
    let upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==";
    let with_body = |head: &str, content_type: &str, body: &str| {
        format!(
            "{head} HTTP/1.1\r\nHost: x\r\n{upgrade}\r\nContent-Type: {content_type}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let cases = [
        (
            "join, with its body",
            with_body("POST /api/rooms/upgrades/join", "application/json", "{}"),
        ),
        (
            "join, without a body",
            format!("POST /api/rooms/upgrades/join HTTP/1.1\r\nHost: x\r\n{upgrade}\r\n\r\n"),
        ),
        (
            "the admin login form",
            with_body(
                "POST /admin/login",
                "application/x-www-form-urlencoded",
                "token=x&csrf=y",
            ),
        ),
        (
            "an admin JSON route",
            with_body(
                "PATCH /api/admin/rooms/upgrades",
                "application/json",
                r#"{"paused":true}"#,
            )
            .replace(
                "Host: x\r\n",
                &format!("Host: x\r\nAuthorization: Bearer {token}\r\n"),
            ),
        ),
        (
            "a sale claim",
            with_body(
                "POST /api/rooms/upgrades/sale/claims",
                "application/json",
                r#"{"quantity":1}"#,
            )
            .replace(
                "Host: x\r\n",
                &format!("Host: x\r\nAuthorization: Bearer {pass}\r\n"),
            ),
        ),
    ];
    for (what, request) in cases {
        let answer = answer_then_close(app.port, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{what}: {answer}");
        assert!(
            answer.contains(r#""code":"upgrade_refused""#),
            "{what}: {answer}"
        );
        assert!(
            answer.contains("nosniff"),
            "{what}: the usual headers: {answer}"
        );
    }
    // A GET is answered as if the header were not there.
    let page = answer_then_close(
        app.port,
        format!("GET /rooms/upgrades HTTP/1.1\r\nHost: x\r\n{upgrade}\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    // Nothing was changed by the refused requests.
    let room = app
        .admin(Method::GET, "/api/admin/rooms/upgrades")
        .fetch_json()
        .await;
    assert_eq!(room["paused"], false, "{room}");
    let sale = app
        .http
        .get(app.url("/api/rooms/upgrades/sale"))
        .bearer_auth(&pass)
        .fetch_json()
        .await;
    assert_eq!(sale["stock_left"], 5, "{sale}");
}
