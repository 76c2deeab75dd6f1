//! `/api/gate`, forward auth for proxies that hand its answer to the
//! visitor (api.md, "Gates that answer the visitor directly"), asked the
//! way a proxy asks it: 204 for a valid pass; a 302 to the room's page with
//! `return=` the URL asked for; one 302 that turns a pass in the URL into
//! the cookie; the `return` carried through the join (body or query) to
//! `redirect_url` only on the target's origin, also when the visitor is
//! admitted on a later tick by another node; with the store down, by
//! signature alone; and Envoy's way of asking (`/api/gate/<path>`). An app
//! or API client that asks for JSON is refused with a 401 naming the room,
//! where to join and where to wait, and presents its pass in
//! `X-Waitroom-Pass` when its `Authorization` is its own. The real proxies
//! are in tests/deploy/proxies.rs.

use waitroom_testkit as support;

use std::sync::Arc;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use support::{TestApp, test_settings};
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;
use waitroom::words::return_url::PublicUrl;

const ROOM: &str = "spring-sale";
const TARGET: &str = "https://shop.example/";
const PUBLIC: &str = "https://queue.example";

/// The app with `--public-url https://queue.example`, on `stores`.
async fn app_on(stores: Stores, clock: ManualClock) -> TestApp {
    let mut settings = test_settings();
    settings.public_url = Some(PublicUrl::parse(PUBLIC).unwrap());
    TestApp::spawn_with(settings, stores, clock).await
}

async fn app() -> TestApp {
    let clock = ManualClock::new(support::START_MS);
    let app = app_on(Stores::memory(Arc::new(clock.clone())), clock).await;
    app.create_room(ROOM, json!({"target_url": TARGET, "admit_per_tick": 1_000}))
        .await;
    app.create_room("autumn-sale", json!({"admit_per_tick": 1_000}))
        .await;
    app
}

/// Asks the gate as a proxy does about `uri` on https://shop.example.
fn ask(app: &TestApp, uri: &str) -> reqwest::RequestBuilder {
    ask_about(app, "shop.example", uri)
}

/// Asks the gate as a proxy does about `uri` on `host`, over https.
fn ask_about(app: &TestApp, host: &str, uri: &str) -> reqwest::RequestBuilder {
    gate(app, "/api/gate")
        .header("X-Waitroom-Room", ROOM)
        .header("X-Forwarded-Proto", "https")
        .header("X-Forwarded-Host", host)
        .header("X-Forwarded-Uri", uri)
}

/// A GET of `path` that does not follow the gate's redirects.
fn gate(app: &TestApp, path: &str) -> reqwest::RequestBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(app.url(path))
}

async fn send(request: reqwest::RequestBuilder) -> reqwest::Response {
    request.send().await.expect("the gate answers")
}

fn location(answer: &reqwest::Response) -> &str {
    answer.headers()[LOCATION].to_str().unwrap()
}

fn room_page_returning(to: &str) -> String {
    let to: String = url::form_urlencoded::byte_serialize(to.as_bytes()).collect();
    format!("{PUBLIC}/rooms/{ROOM}?return={to}")
}

/// A join of `room` with `body` (and `query` appended to its URL).
async fn join(app: &TestApp, room: &str, query: &str, body: Value) -> Value {
    let answer = app
        .http
        .post(app.url(&format!("/api/rooms/{room}/join{query}")))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "joining {room}");
    answer.json().await.unwrap()
}

#[tokio::test]
async fn the_gate_lets_a_valid_pass_through_and_sends_anyone_else_to_the_room_with_the_return() {
    let app = app().await;
    let ask = |uri: &str| ask(&app, uri);

    // No pass: to the room's page, absolute, with the URL asked for.
    let answer = send(ask("/checkout?item=7")).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(
        location(&answer),
        room_page_returning("https://shop.example/checkout?item=7")
    );
    assert_eq!(answer.headers()["x-waitroom-refused"], "missing_pass");
    assert_eq!(answer.headers()["cache-control"], "no-store");

    // A valid pass, as the cookie or Bearer: 204, naming the visitor.
    let status = app.join_api(ROOM).await;
    let pass = status["pass"].as_str().unwrap().to_string();
    for answer in [
        send(ask("/checkout").header(COOKIE, format!("wr_pass={pass}"))).await,
        send(ask("/checkout").bearer_auth(&pass)).await,
    ] {
        assert_eq!(answer.status(), 204);
        assert!(answer.headers().contains_key("x-waitroom-visitor"));
    }

    // Another room's pass, a forged one, a revoked one: to the room.
    let autumn = app.pass_for("autumn-sale").await;
    let answer = send(ask("/x").header(COOKIE, format!("wr_pass={autumn}"))).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(answer.headers()["x-waitroom-refused"], "invalid_pass");
    let answer = send(ask("/x").header(COOKIE, "wr_pass=forged")).await;
    assert_eq!(answer.status(), 302);
    let revoked = app.pass_for(ROOM).await;
    let answer = app
        .admin(
            reqwest::Method::POST,
            &format!("/api/admin/rooms/{ROOM}/passes/revoke"),
        )
        .json(&json!({"pass": revoked}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 204);
    let answer = send(ask("/x").header(COOKIE, format!("wr_pass={revoked}"))).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(answer.headers()["x-waitroom-refused"], "pass_revoked");
    assert_eq!(
        location(&answer),
        room_page_returning("https://shop.example/x")
    );

    // A room header and ?room= that disagree, none, an unknown room.
    let answer = send(ask("/x").query(&[("room", "autumn-sale")])).await;
    assert_eq!(answer.status(), 400);
    assert_eq!(error_code(answer).await, "room_mismatch");
    let answer = send(gate(&app, "/api/gate")).await;
    assert_eq!(answer.status(), 400);
    assert_eq!(error_code(answer).await, "room_required");
    let answer =
        send(gate(&app, "/api/gate?room=no-such-room").header(COOKIE, format!("wr_pass={pass}")))
            .await;
    assert_eq!(answer.status(), 404);
    assert_eq!(error_code(answer).await, "room_not_found");
    let answer = send(gate(&app, "/api/gate?room=no-such-room")).await;
    assert_eq!(answer.status(), 404);
}

async fn error_code(answer: reqwest::Response) -> String {
    let body: Value = answer.json().await.unwrap();
    body["error"]["code"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_pass_in_the_url_becomes_the_cookie_with_one_redirect() {
    let app = app().await;
    let pass = app.pass_for(ROOM).await;

    let answer = send(ask(&app, &format!("/checkout?item=7&wr_pass={pass}"))).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(location(&answer), "https://shop.example/checkout?item=7");
    let cookie = answer.headers()[SET_COOKIE].to_str().unwrap();
    assert!(cookie.starts_with(&format!("wr_pass={pass};")), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/", "Max-Age="] {
        assert!(cookie.contains(attribute), "{attribute}: {cookie}");
    }
    // Alone in the query: the URL is left without one.
    let answer = send(ask(&app, &format!("/checkout?wr_pass={pass}"))).await;
    assert_eq!(location(&answer), "https://shop.example/checkout");

    // Over plain http, no Secure.
    let answer = send(
        gate(&app, "/api/gate")
            .header("X-Waitroom-Room", ROOM)
            .header("X-Forwarded-Proto", "http")
            .header("X-Forwarded-Host", "shop.example")
            .header("X-Forwarded-Uri", format!("/checkout?wr_pass={pass}")),
    )
    .await;
    assert_eq!(answer.status(), 302);
    let cookie = answer.headers()[SET_COOKIE].to_str().unwrap();
    assert!(!cookie.contains("Secure"), "{cookie}");

    // The same with X-Original-URL instead of X-Forwarded-*.
    let answer = send(gate(&app, "/api/gate?room=spring-sale").header(
        "X-Original-URL",
        format!("https://shop.example/a?wr_pass={pass}"),
    ))
    .await;
    assert_eq!(answer.status(), 302);
    assert_eq!(location(&answer), "https://shop.example/a");
    assert!(answer.headers().contains_key(SET_COOKIE));

    // Another room's pass in the URL is no cookie: to the room, and the
    // return leaves it out.
    let autumn = app.pass_for("autumn-sale").await;
    let answer = send(ask(&app, &format!("/checkout?wr_pass={autumn}&b=2"))).await;
    assert_eq!(answer.status(), 302);
    assert!(!answer.headers().contains_key(SET_COOKIE));
    assert_eq!(
        location(&answer),
        room_page_returning("https://shop.example/checkout?b=2")
    );
    // A bad pass in the URL next to a good cookie: the cookie lets it through.
    let answer = send(
        ask(&app, &format!("/checkout?wr_pass={autumn}")).header(COOKIE, format!("wr_pass={pass}")),
    )
    .await;
    assert_eq!(answer.status(), 204);
}

/// security.md, item 2: a pass in the URL never replaces a valid pass of
/// the same room that the browser holds, so a link cannot hand a visitor
/// someone else's pass (whose holder could then leave or revoke it).
#[tokio::test]
async fn a_pass_in_the_url_never_replaces_a_valid_one_in_the_cookie() {
    let app = app().await;
    let own = app.pass_for(ROOM).await;
    let other = app.pass_for(ROOM).await;
    assert_ne!(own, other);
    let answer = send(
        ask(&app, &format!("/checkout?wr_pass={other}")).header(COOKIE, format!("wr_pass={own}")),
    )
    .await;
    assert_eq!(answer.status(), 302);
    assert_eq!(
        location(&answer),
        "https://shop.example/checkout",
        "the URL loses the link's pass all the same"
    );
    assert!(
        !answer.headers().contains_key(SET_COOKIE),
        "the visitor's own pass stays: {:?}",
        answer.headers().get(SET_COOKIE)
    );
    // A cookie that is no longer a pass of this room is replaced.
    app.admin(
        reqwest::Method::POST,
        &format!("/api/admin/rooms/{ROOM}/passes/revoke"),
    )
    .json(&json!({"pass": own}))
    .send()
    .await
    .unwrap();
    let autumn = app.pass_for("autumn-sale").await;
    for held in [own.as_str(), autumn.as_str(), "forged"] {
        let answer = send(
            ask(&app, &format!("/checkout?wr_pass={other}"))
                .header(COOKIE, format!("wr_pass={held}")),
        )
        .await;
        assert_eq!(answer.status(), 302);
        let cookie = answer.headers()[SET_COOKIE].to_str().unwrap();
        assert!(cookie.starts_with(&format!("wr_pass={other};")), "{cookie}");
    }
}

/// The demo's protected page shows the pass the browser holds, not one a
/// link offers in its place.
#[tokio::test]
async fn the_demo_target_shows_the_held_pass_over_a_linked_one() {
    let app = app().await;
    let own = app.join_api(ROOM).await;
    let other = app.join_api(ROOM).await;
    let page = app
        .http
        .get(app.url(&format!(
            "/demo/target?wr_pass={}",
            other["pass"].as_str().unwrap()
        )))
        .header(COOKIE, format!("wr_pass={}", own["pass"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let visitor_of = |status: &Value| {
        let pass = status["pass"].as_str().unwrap();
        let claims = pass.split('.').nth(1).unwrap();
        let claims: Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, claims)
                .unwrap(),
        )
        .unwrap();
        claims["sub"].as_str().unwrap().to_string()
    };
    assert!(page.contains(&visitor_of(&own)), "{page}");
    assert!(!page.contains(&visitor_of(&other)), "{page}");
}

/// security.md, item 10: an absolute `X-Original-URL` carrying a pass is
/// held to the room's target's origin, as a `return` is: the gate never
/// redirects to another host.
#[tokio::test]
async fn an_original_url_with_a_pass_is_held_to_the_targets_origin() {
    let app = app().await;
    let pass = app.pass_for(ROOM).await;
    for elsewhere in [
        "https://evil.example/a",
        "http://shop.example/a",
        "https://shop.example:8443/a",
    ] {
        let answer = send(
            gate(&app, &format!("/api/gate?room={ROOM}"))
                .header("X-Original-URL", format!("{elsewhere}?wr_pass={pass}")),
        )
        .await;
        assert_eq!(answer.status(), 302, "{elsewhere}");
        assert!(
            !answer.headers().contains_key(SET_COOKIE),
            "{elsewhere}: no cookie"
        );
        assert_eq!(
            location(&answer),
            format!("{PUBLIC}/rooms/{ROOM}"),
            "{elsewhere}: to the room, with no return"
        );
    }
    let answer = send(gate(&app, &format!("/api/gate?room={ROOM}")).header(
        "X-Original-URL",
        format!("https://shop.example/a?wr_pass={pass}"),
    ))
    .await;
    assert_eq!(location(&answer), "https://shop.example/a");
}

#[tokio::test]
async fn the_room_page_is_on_the_public_url_or_else_the_forwarded_host() {
    // Without --public-url: on the forwarded host.
    let app = TestApp::spawn().await;
    app.create_room(ROOM, json!({"target_url": TARGET})).await;
    let answer = send(ask(&app, "/checkout")).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(
        location(&answer),
        "https://shop.example/rooms/spring-sale?return=https%3A%2F%2Fshop.example%2Fcheckout"
    );
    // Neither: the gate says what is missing.
    let answer = send(gate(&app, "/api/gate").header("X-Waitroom-Room", ROOM)).await;
    assert_eq!(answer.status(), 400);
    assert_eq!(error_code(answer).await, "public_url_unknown");
    // A forwarded host that is more than a host is none.
    for host in ["evil.example/x", "shop.example@evil.example", "a b", ""] {
        let answer = send(ask_about(&app, host, "/checkout")).await;
        assert_eq!(answer.status(), 400, "{host:?}");
    }

    // With it, whatever the forwarded host; an odd one gives no return.
    let app = self::app().await;
    let answer = send(ask_about(&app, "evil.example/x", "/c")).await;
    assert_eq!(location(&answer), format!("{PUBLIC}/rooms/{ROOM}"));
    let answer = send(ask(&app, "//evil.example/c")).await;
    assert_eq!(location(&answer), format!("{PUBLIC}/rooms/{ROOM}"));
    let answer = send(ask(&app, &format!("/{}", "a".repeat(3_000)))).await;
    assert_eq!(location(&answer), format!("{PUBLIC}/rooms/{ROOM}"));
}

#[tokio::test]
async fn the_return_leads_back_only_on_the_targets_origin() {
    let app = app().await;
    let back = |status: &Value| status["redirect_url"].as_str().unwrap().to_string();
    let with_pass = |url: &str, status: &Value| {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!(
            "{url}{separator}wr_pass={}",
            status["pass"].as_str().unwrap()
        )
    };

    // In the body, or the query.
    let status = join(
        &app,
        ROOM,
        "",
        json!({"return": "https://shop.example/checkout?item=7"}),
    )
    .await;
    assert_eq!(
        back(&status),
        with_pass("https://shop.example/checkout?item=7", &status)
    );
    let status = join(
        &app,
        ROOM,
        "?return=https%3A%2F%2Fshop.example%2Fcart",
        json!({}),
    )
    .await;
    assert_eq!(
        back(&status),
        with_pass("https://shop.example/cart", &status)
    );

    // Anything else is ignored, never refused: to the target.
    for tricky in [
        json!("//evil.example/"),
        json!("/checkout"),
        json!("https://shop.example.evil/"),
        json!("https://shop.example@evil.example/"),
        json!("https://user@shop.example/"),
        json!("http://shop.example/"),
        json!("https://shop.example:8443/"),
        json!("https:\\\\evil.example/"),
        json!("https://shop.example\\@evil.example/"),
        json!("https:evil.example"),
        json!("javascript:alert(1)"),
        json!(" https://shop.example/"),
        json!(format!("https://shop.example/{}", "a".repeat(3_000))),
        json!(7),
        json!(null),
    ] {
        let status = join(&app, ROOM, "", json!({ "return": tricky })).await;
        assert_eq!(status["state"], "admitted");
        assert_eq!(back(&status), with_pass(TARGET, &status), "{tricky}");
    }

    // A path target is on the public URL's origin.
    app.create_room(
        "on-queue",
        json!({"target_url": "/shop", "admit_per_tick": 10}),
    )
    .await;
    let status = join(
        &app,
        "on-queue",
        "",
        json!({"return": "https://queue.example/shop/item"}),
    )
    .await;
    assert_eq!(
        back(&status),
        with_pass("https://queue.example/shop/item", &status)
    );
    let status = join(
        &app,
        "on-queue",
        "",
        json!({"return": "https://shop.example/item"}),
    )
    .await;
    assert_eq!(back(&status), with_pass("/shop", &status));

    // The target moved to another origin since: the return is ignored.
    app.create_room(
        "moved",
        json!({"target_url": TARGET, "paused": true, "tick_ms": 1000, "admit_per_tick": 10}),
    )
    .await;
    let waiting = join(
        &app,
        "moved",
        "",
        json!({"return": "https://shop.example/a"}),
    )
    .await;
    assert_eq!(waiting["state"], "waiting");
    let patched = app
        .patch_room(
            "moved",
            json!({"target_url": "https://elsewhere.example/", "paused": false}),
        )
        .await;
    assert_eq!(patched.status(), 200);
    app.step(1_000).await;
    let status: Value = app
        .status_api("moved", waiting["ticket"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(status["state"], "admitted");
    assert_eq!(
        back(&status),
        with_pass("https://elsewhere.example/", &status)
    );
}

/// The return is kept in the ticket, not the store: a visitor who joined
/// on one node with it is admitted on a later tick run by another node,
/// and each node's status (HTTP and socket) leads back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_return_survives_a_later_admission_on_another_node() {
    let redis = support::redis::RedisServer::start();
    let clock = ManualClock::new(support::START_MS);
    let mut nodes = Vec::new();
    for _ in 0..2 {
        let stores = Stores::redis(&redis.url(), Some(Arc::new(clock.clone())))
            .await
            .expect("the node connects to Redis");
        nodes.push(app_on(stores, clock.clone()).await);
    }
    let (first, second) = (&nodes[0], &nodes[1]);
    first
        .create_room(
            ROOM,
            json!({"target_url": TARGET, "paused": true, "tick_ms": 1000}),
        )
        .await;
    let waiting = join(
        first,
        ROOM,
        "",
        json!({"return": "https://shop.example/checkout?item=7"}),
    )
    .await;
    assert_eq!(waiting["state"], "waiting");
    assert_eq!(waiting["redirect_url"], Value::Null);
    let ticket = waiting["ticket"].as_str().unwrap();
    let mut socket = second.connect(ROOM, ticket).await;
    assert_eq!(support::next_status(&mut socket).await["state"], "waiting");

    assert_eq!(
        second
            .patch_room(ROOM, json!({"paused": false}))
            .await
            .status(),
        200
    );
    clock.advance_ms(1_000);
    second.promote().await;

    let pushed = loop {
        let status = support::next_status(&mut socket).await;
        if status["state"] == "admitted" {
            break status;
        }
    };
    let expected = format!(
        "https://shop.example/checkout?item=7&wr_pass={}",
        pushed["pass"].as_str().unwrap()
    );
    assert_eq!(pushed["redirect_url"], expected.as_str(), "over the socket");
    for node in [first, second] {
        let status: Value = node.status_api(ROOM, ticket).await.json().await.unwrap();
        assert_eq!(status["redirect_url"], expected.as_str(), "polled");
    }
}

#[tokio::test]
async fn with_the_store_down_the_gate_decides_by_signature_alone() {
    let clock = ManualClock::new(support::START_MS);
    let (store, stores) = support::unreachable::Unreachable::memory(Arc::new(clock.clone()));
    let app = app_on(stores, clock).await;
    app.create_room(ROOM, json!({"target_url": TARGET, "admit_per_tick": 10}))
        .await;
    app.create_room("autumn-sale", json!({"admit_per_tick": 10}))
        .await;
    let pass = app.pass_for(ROOM).await;
    let autumn = app.pass_for("autumn-sale").await;
    store.set_down(true);

    let answer = send(ask(&app, "/c").header(COOKIE, format!("wr_pass={pass}"))).await;
    assert_eq!(answer.status(), StatusCode::NO_CONTENT);
    assert_eq!(answer.headers()["x-waitroom-verified"], "signature");
    let answer = send(ask(&app, &format!("/c?wr_pass={pass}"))).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(location(&answer), "https://shop.example/c");
    assert!(answer.headers().contains_key(SET_COOKIE));
    // Without a valid pass: to the room's page all the same.
    for cookie in [None, Some(autumn.as_str()), Some("forged")] {
        let mut request = ask(&app, "/c");
        if let Some(cookie) = cookie {
            request = request.header(COOKIE, format!("wr_pass={cookie}"));
        }
        let answer = send(request).await;
        assert_eq!(answer.status(), 302, "{cookie:?}");
        assert_eq!(
            location(&answer),
            room_page_returning("https://shop.example/c")
        );
    }
}

/// Envoy's `ext_authz` asks `/api/gate` + the visitor's path and query,
/// with their `Host`, and lets only a 200 through.
#[tokio::test]
async fn envoy_asks_with_the_path_appended() {
    let app = app().await;
    let pass = app.pass_for(ROOM).await;
    let envoy = |path: &str| {
        gate(&app, &format!("/api/gate{path}"))
            .header("Host", "shop.example")
            .header("X-Forwarded-Proto", "https")
            .header("X-Waitroom-Room", ROOM)
    };
    let answer = send(envoy("/checkout?item=7&room=autumn-sale")).await;
    assert_eq!(answer.status(), 302, "the visitor's ?room= is theirs");
    assert_eq!(
        location(&answer),
        room_page_returning("https://shop.example/checkout?item=7&room=autumn-sale")
    );
    let answer = send(envoy("/checkout").header(COOKIE, format!("wr_pass={pass}"))).await;
    assert_eq!(answer.status(), 200);
    let answer = send(envoy(&format!("/checkout?wr_pass={pass}"))).await;
    assert_eq!(answer.status(), 302);
    assert_eq!(location(&answer), "https://shop.example/checkout");
    assert!(answer.headers().contains_key(SET_COOKIE));
    // No room header: Envoy's configuration names none.
    let answer = send(
        gate(&app, "/api/gate/checkout?room=spring-sale").header(COOKIE, format!("wr_pass={pass}")),
    )
    .await;
    assert_eq!(answer.status(), 400);
    assert_eq!(error_code(answer).await, "room_required");
}

/// axios's default `Accept`: JSON named, HTML only through `*/*`.
const AXIOS: &str = "application/json, text/plain, */*";
const JOIN_URL: &str = "https://queue.example/api/rooms/spring-sale/join";

/// The gate's 401 to an app, read: its refusal header and body, after
/// checking what every such answer carries. The body is the error as every
/// error answer has it, and the room, the join and the page, nothing else.
async fn refusal_of(answer: reqwest::Response) -> (String, Value) {
    assert_eq!(answer.status(), 401);
    assert_eq!(answer.headers()[CACHE_CONTROL], "no-store");
    assert_eq!(answer.headers()[CONTENT_TYPE], "application/json");
    assert!(!answer.headers().contains_key(LOCATION));
    let refused = answer.headers()["x-waitroom-refused"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = answer.json().await.unwrap();
    let keys = |value: &Value| {
        let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    assert_eq!(
        keys(&body),
        ["error", "join_url", "page_url", "room"],
        "{body}"
    );
    assert_eq!(keys(&body["error"]), ["code", "message"], "{body}");
    assert_eq!(body["error"]["code"], refused.as_str(), "{body}");
    assert!(!body["error"]["message"].as_str().unwrap().is_empty());
    (refused, body)
}

#[tokio::test]
async fn an_app_that_asks_for_json_gets_each_refusal_as_a_401_with_where_to_join() {
    let app = app().await;
    let ask = |uri: &str| ask(&app, uri).header(ACCEPT, AXIOS);
    let expected = |code: &str| {
        json!({
            "code": code,
            "room": ROOM,
            "join_url": JOIN_URL,
            "page_url": room_page_returning("https://shop.example/checkout?item=7"),
        })
    };
    let got = |(code, body): (String, Value)| {
        json!({
            "code": code,
            "room": body["room"],
            "join_url": body["join_url"],
            "page_url": body["page_url"],
        })
    };

    let answer = send(ask("/checkout?item=7")).await;
    assert_eq!(got(refusal_of(answer).await), expected("missing_pass"));

    let autumn = app.pass_for("autumn-sale").await;
    for forged in [autumn.as_str(), "forged"] {
        let answer =
            send(ask("/checkout?item=7").header(COOKIE, format!("wr_pass={forged}"))).await;
        assert_eq!(got(refusal_of(answer).await), expected("invalid_pass"));
    }

    let revoked = app.pass_for(ROOM).await;
    let answer = app
        .admin(
            reqwest::Method::POST,
            &format!("/api/admin/rooms/{ROOM}/passes/revoke"),
        )
        .json(&json!({"pass": revoked}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 204);
    let answer = send(ask("/checkout?item=7").bearer_auth(&revoked)).await;
    assert_eq!(got(refusal_of(answer).await), expected("pass_revoked"));

    // The pass in the URL that is no pass of this room: the same answer,
    // its return without it.
    let answer = send(ask(&format!("/checkout?item=7&wr_pass={autumn}"))).await;
    assert_eq!(got(refusal_of(answer).await), expected("missing_pass"));

    // A pass that ran out.
    assert_eq!(
        app.patch_room(ROOM, json!({"pass_ttl_s": 30}))
            .await
            .status(),
        200
    );
    let short = app.pass_for(ROOM).await;
    let answer = send(ask("/checkout?item=7").bearer_auth(&short)).await;
    assert_eq!(answer.status(), 204, "valid until it runs out");
    app.clock.advance_ms(30_000);
    let answer = send(ask("/checkout?item=7").bearer_auth(&short)).await;
    assert_eq!(got(refusal_of(answer).await), expected("pass_expired"));

    // No URL asked for: the page without a return.
    let answer =
        send(gate(&app, &format!("/api/gate?room={ROOM}")).header(ACCEPT, "application/json"))
            .await;
    let (_, body) = refusal_of(answer).await;
    assert_eq!(body["page_url"], format!("{PUBLIC}/rooms/{ROOM}"));
    assert_eq!(body["join_url"], JOIN_URL);
}

#[tokio::test]
async fn without_a_public_url_the_json_answer_is_on_the_forwarded_host() {
    let app = TestApp::spawn().await;
    app.create_room(ROOM, json!({"target_url": TARGET})).await;
    let answer = send(ask(&app, "/checkout").header(ACCEPT, AXIOS)).await;
    let (code, body) = refusal_of(answer).await;
    assert_eq!(code, "missing_pass");
    assert_eq!(
        body["join_url"],
        "https://shop.example/api/rooms/spring-sale/join"
    );
    assert_eq!(
        body["page_url"],
        "https://shop.example/rooms/spring-sale?return=https%3A%2F%2Fshop.example%2Fcheckout"
    );
    // Neither: the same 400 as a browser gets.
    let answer = send(
        gate(&app, "/api/gate")
            .header("X-Waitroom-Room", ROOM)
            .header(ACCEPT, AXIOS),
    )
    .await;
    assert_eq!(answer.status(), 400);
    assert_eq!(error_code(answer).await, "public_url_unknown");
}

#[tokio::test]
async fn only_an_accept_that_prefers_json_gets_json_a_browser_keeps_the_redirect() {
    let app = app().await;
    for (accept, json) in [
        ("*/*", false),
        (
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            false,
        ),
        ("application/json;q=0.5, text/html", false),
        ("application/json;q=0", false),
        ("application/json", true),
        (AXIOS, true),
    ] {
        let answer = send(ask(&app, "/x").header(ACCEPT, accept)).await;
        let status = if json { 401 } else { 302 };
        assert_eq!(answer.status(), status, "{accept}");
        assert_eq!(answer.headers()["x-waitroom-refused"], "missing_pass");
    }
    // A valid pass passes whatever the Accept.
    let pass = app.pass_for(ROOM).await;
    let answer = send(ask(&app, "/x").header(ACCEPT, AXIOS).bearer_auth(&pass)).await;
    assert_eq!(answer.status(), 204);
    // An unknown room is the 404 it always was, an error body like any.
    let answer = send(
        gate(&app, "/api/gate?room=no-such-room")
            .header(ACCEPT, AXIOS)
            .header(COOKIE, format!("wr_pass={pass}")),
    )
    .await;
    assert_eq!(answer.status(), 404);
    assert_eq!(error_code(answer).await, "room_not_found");
    let answer = send(gate(&app, "/api/gate?room=no-such-room").header(ACCEPT, AXIOS)).await;
    assert_eq!(answer.status(), 404);
    assert_eq!(error_code(answer).await, "room_not_found");
    // A room closed since is no room to the store either.
    let closed = app
        .admin(reqwest::Method::DELETE, &format!("/api/admin/rooms/{ROOM}"))
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    let answer = send(ask(&app, "/x").header(ACCEPT, AXIOS).bearer_auth(&pass)).await;
    assert_eq!(answer.status(), 404);
    assert_eq!(error_code(answer).await, "room_not_found");
}

#[tokio::test]
async fn envoy_asking_for_json_gets_the_same_401() {
    let app = app().await;
    let answer = send(
        gate(&app, "/api/gate/checkout?item=7")
            .header("Host", "shop.example")
            .header("X-Forwarded-Proto", "https")
            .header("X-Waitroom-Room", ROOM)
            .header(ACCEPT, AXIOS)
            .header(COOKIE, "wr_pass=forged"),
    )
    .await;
    let (code, body) = refusal_of(answer).await;
    assert_eq!(code, "invalid_pass");
    assert_eq!(body["room"], ROOM);
    assert_eq!(body["join_url"], JOIN_URL);
    assert_eq!(
        body["page_url"],
        room_page_returning("https://shop.example/checkout?item=7")
    );
}

/// An app whose `Authorization` carries its own token presents the pass in
/// `X-Waitroom-Pass`, or leaves it to the `wr_pass` cookie: its token
/// hides neither. The gate and `/api/verify` read the pass alike.
#[tokio::test]
async fn an_apps_own_bearer_hides_neither_x_waitroom_pass_nor_the_cookie() {
    let app = app().await;
    let pass = app.pass_for(ROOM).await;
    let autumn = app.pass_for("autumn-sale").await;
    let verify = || {
        app.http
            .get(app.url("/api/verify"))
            .header("X-Waitroom-Room", ROOM)
    };
    let asks: [(&str, &dyn Fn() -> reqwest::RequestBuilder); 2] = [
        ("gate", &|| ask(&app, "/x").header(ACCEPT, AXIOS)),
        ("verify", &verify),
    ];
    for (who, ask) in asks {
        // The header, beside an app's own Bearer.
        let answer = send(ask().bearer_auth("xyz").header("X-Waitroom-Pass", &pass)).await;
        assert_eq!(answer.status(), 204, "{who}: X-Waitroom-Pass");
        assert!(answer.headers().contains_key("x-waitroom-visitor"));
        // The cookie, beside an app's own Bearer.
        let answer = send(
            ask()
                .bearer_auth("xyz")
                .header(COOKIE, format!("wr_pass={pass}")),
        )
        .await;
        assert_eq!(answer.status(), 204, "{who}: the cookie");
        // The header outranks a valid Bearer and cookie: a forged one is refused.
        let answer = send(
            ask()
                .bearer_auth(&pass)
                .header(COOKIE, format!("wr_pass={pass}"))
                .header("X-Waitroom-Pass", support::tamper(&pass)),
        )
        .await;
        assert_eq!(answer.status(), 401, "{who}: a forged X-Waitroom-Pass");
        assert_eq!(error_code(answer).await, "invalid_pass", "{who}");
        // A pass of ours as the Bearer is judged as one, not swapped for the
        // cookie: another room's is refused.
        let answer = send(
            ask()
                .bearer_auth(&autumn)
                .header(COOKIE, format!("wr_pass={pass}")),
        )
        .await;
        assert_eq!(
            error_code(answer).await,
            "invalid_pass",
            "{who}: another room's Bearer"
        );
        // A Bearer that is no pass, alone: refused as what it was sent as.
        let answer = send(ask().bearer_auth("xyz")).await;
        assert_eq!(
            error_code(answer).await,
            "invalid_pass",
            "{who}: a Bearer alone"
        );
        // An empty header is none.
        let answer = send(
            ask()
                .header("X-Waitroom-Pass", "")
                .header(COOKIE, format!("wr_pass={pass}")),
        )
        .await;
        assert_eq!(answer.status(), 204, "{who}: an empty X-Waitroom-Pass");
        let answer = send(ask().header("X-Waitroom-Pass", "")).await;
        assert_eq!(error_code(answer).await, "missing_pass", "{who}");
    }
}
