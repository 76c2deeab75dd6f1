//! The sale over real HTTP: thousands of claimers racing for stock and
//! seats, on one memory node and on three nodes sharing one Redis.

use waitroom_testkit as support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures_util::{StreamExt, stream};
use reqwest::Method;
use serde_json::{Value, json};
use support::redis::RedisServer;
use support::{FetchJson, TestApp};
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;

/// Requests in flight at once: enough for a real race, few enough that a
/// busy 2-core machine answers every one within the server's 5 s timeouts
/// (every node is in this process, so a connection costs two of its files).
const IN_FLIGHT: usize = 256;

async fn memory_node() -> Vec<TestApp> {
    vec![TestApp::spawn().await]
}

async fn redis_nodes(redis: &RedisServer) -> Vec<TestApp> {
    let clock = ManualClock::new(support::START_MS);
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let stores = Stores::redis(&redis.url(), Some(Arc::new(clock.clone())))
            .await
            .unwrap();
        nodes.push(TestApp::spawn_on(stores, clock.clone()).await);
    }
    nodes
}

/// A room everyone passes straight into, with a sale; returns each visitor's pass.
async fn admitted_visitors(
    nodes: &[TestApp],
    room: &str,
    sale: Value,
    count: usize,
) -> Vec<String> {
    nodes[0]
        .create_room(
            room,
            json!({"admit_per_tick": 100_000, "abandon_after_s": 86_400}),
        )
        .await;
    let put = nodes[0]
        .admin(Method::PUT, &format!("/api/admin/rooms/{room}/sale"))
        .json(&sale)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    stream::iter(0..count)
        .map(|i| async move {
            let status = nodes[i % nodes.len()].join_api(room).await;
            assert_eq!(status["state"], "admitted");
            status["pass"].as_str().unwrap().to_string()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await
}

async fn claim(node: &TestApp, room: &str, pass: &str, body: Value) -> (u16, Value) {
    let response = node
        .http
        .post(node.url(&format!("/api/rooms/{room}/sale/claims")))
        .bearer_auth(pass)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = format!("{:?}", response.headers());
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("a claim answered {status} {headers} {text:?}: {error}"));
    (status, body)
}

async fn five_thousand_claimers_take_exactly_the_stock(nodes: &[TestApp]) {
    rlimit::increase_nofile_limit(u64::MAX).unwrap();
    let passes = admitted_visitors(nodes, "stock", json!({"stock": 100}), 5_000).await;
    let results: Vec<(u16, Value)> = stream::iter(passes.iter().enumerate())
        .map(|(i, pass)| {
            claim(
                &nodes[i % nodes.len()],
                "stock",
                pass,
                json!({"quantity": 1}),
            )
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let held: Vec<&Value> = results
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, c)| c)
        .collect();
    assert_eq!(held.len(), 100, "exactly the stock is held");
    for (status, body) in results.iter().filter(|(status, _)| *status != 201) {
        assert_eq!(
            (*status, body["error"]["code"].as_str()),
            (409, Some("sold_out"))
        );
    }
    let visitors: HashSet<&str> = held
        .iter()
        .map(|c| c["visitor"].as_str().unwrap())
        .collect();
    assert_eq!(visitors.len(), 100, "no visitor holds two");
    let mut sequences: Vec<u64> = held
        .iter()
        .map(|c| c["sequence"].as_u64().unwrap())
        .collect();
    sequences.sort_unstable();
    assert_eq!(
        sequences,
        (1..=100).collect::<Vec<_>>(),
        "one number each, no gaps"
    );
    let sale: Value = nodes[0]
        .http
        .get(nodes[0].url("/api/rooms/stock/sale"))
        .fetch_json()
        .await;
    assert_eq!(sale["stock_left"], 0, "stock never goes below zero");
}

async fn overlapping_seat_claims_never_share_a_seat(nodes: &[TestApp]) {
    rlimit::increase_nofile_limit(u64::MAX).unwrap();
    let seats: Vec<String> = (1..=60).map(|n| format!("S{n}")).collect();
    let passes = admitted_visitors(
        nodes,
        "seats",
        json!({"seats": seats, "per_user_limit": 3}),
        1_000,
    )
    .await;
    // Claim i asks for 1 to 3 neighbouring seats starting at seat i mod 60: every set overlaps others.
    let asks: Vec<Vec<String>> = (0..1_000)
        .map(|i| {
            (0..=(i % 3))
                .map(|k| format!("S{}", (i + k) % 60 + 1))
                .collect()
        })
        .collect();
    let results: Vec<(u16, Value)> = stream::iter(passes.iter().zip(&asks).enumerate())
        .map(|(i, (pass, ask))| {
            claim(
                &nodes[i % nodes.len()],
                "seats",
                pass,
                json!({"seats": ask}),
            )
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut owner: HashMap<String, String> = HashMap::new();
    for (i, (status, body)) in results.iter().enumerate() {
        match status {
            201 => {
                let got: Vec<&str> = body["seats"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap())
                    .collect();
                assert_eq!(got.len(), body["quantity"].as_u64().unwrap() as usize);
                assert!(!got.is_empty());
                for seat in got {
                    let claim_id = body["claim_id"].as_str().unwrap().to_string();
                    assert!(
                        owner.insert(seat.to_string(), claim_id).is_none(),
                        "seat {seat} held twice"
                    );
                }
            }
            409 => assert_eq!(body["error"]["code"], "seat_taken", "claim {i}"),
            other => panic!("claim {i}: unexpected {other} {body}"),
        }
    }
    // Every successful claim got all it asked for: the held seats are exactly theirs.
    let last = nodes.last().unwrap();
    let sale: Value = last
        .http
        .get(last.url("/api/rooms/seats/sale"))
        .fetch_json()
        .await;
    let held: HashSet<&str> = sale["seats"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, state)| *state == "held")
        .map(|(seat, _)| seat.as_str())
        .collect();
    assert_eq!(
        held,
        owner.keys().map(String::as_str).collect::<HashSet<_>>()
    );
    assert_eq!(sale["stock_left"], 60 - owner.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_race_on_one_memory_node() {
    five_thousand_claimers_take_exactly_the_stock(&memory_node().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_race_on_three_redis_nodes() {
    let redis = RedisServer::start();
    five_thousand_claimers_take_exactly_the_stock(&redis_nodes(&redis).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seat_race_on_one_memory_node() {
    overlapping_seat_claims_never_share_a_seat(&memory_node().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seat_race_on_three_redis_nodes() {
    let redis = RedisServer::start();
    overlapping_seat_claims_never_share_a_seat(&redis_nodes(&redis).await).await;
}

async fn expiry_and_bad_input(nodes: &[TestApp]) {
    let app = &nodes[0];
    let passes = admitted_visitors(
        nodes,
        "tickets",
        json!({"seats": ["A1", "A2", "A3"], "per_user_limit": 2, "hold_ttl_s": 60}),
        2,
    )
    .await;
    let (mine, theirs) = (&passes[0], &passes[1]);
    app.create_room("elsewhere", json!({})).await;
    let foreign = app.join_api("elsewhere").await["pass"]
        .as_str()
        .unwrap()
        .to_string();

    let anonymous = app
        .http
        .post(app.url("/api/rooms/tickets/sale/claims"))
        .json(&json!({"seats": ["A1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let (status, body) = claim(app, "tickets", &foreign, json!({"seats": ["A1"]})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("invalid_pass")),
        "another room's pass"
    );
    let (status, _) = claim(app, "tickets", "not.a.pass", json!({"seats": ["A1"]})).await;
    assert_eq!(status, 401);
    for (body, code) in [
        (json!({"quantity": 0}), "invalid_quantity"),
        (json!({"quantity": -2}), "invalid_quantity"),
        (json!({"quantity": 1.5}), "invalid_quantity"),
        (json!({"seats": []}), "invalid_seats"),
        (json!({"seats": ["A1", "A1"]}), "invalid_seats"),
        (json!({"seats": ["Z9"]}), "unknown_seat"),
        (json!({"quantity": 1}), "wrong_kind"),
        (json!({"quantity": 1, "seats": ["A1"]}), "invalid_claim"),
        (json!(["A1"]), "invalid_claim"),
    ] {
        let (status, error) = claim(app, "tickets", mine, body.clone()).await;
        assert_eq!(
            (status, error["error"]["code"].as_str()),
            (400, Some(code)),
            "{body}"
        );
    }
    let (status, body) = claim(app, "tickets", mine, json!({"seats": ["A1", "A2", "A3"]})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("limit_reached"))
    );

    // A double click with one Idempotency-Key takes the seats once.
    let send = || {
        app.http
            .post(app.url("/api/rooms/tickets/sale/claims"))
            .bearer_auth(mine)
            .header("Idempotency-Key", "click-42")
            .json(&json!({"seats": ["A1", "A2"]}))
            .send()
    };
    let (first, second) = tokio::join!(send(), send());
    let (first, second): (Value, Value) = (
        first.unwrap().json().await.unwrap(),
        second.unwrap().json().await.unwrap(),
    );
    assert_eq!(first["claim_id"], second["claim_id"]);
    let (status, body) = claim(app, "tickets", theirs, json!({"seats": ["A2"]})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("seat_taken"))
    );

    // Not confirmed in time: back to stock, someone else takes it, the late confirm is 410.
    nodes[0].clock.advance_ms(60_000);
    let (status, _) = claim(app, "tickets", theirs, json!({"seats": ["A2"]})).await;
    assert_eq!(status, 201, "the expired hold went back to stock");
    let late = app
        .http
        .post(app.url(&format!(
            "/api/rooms/tickets/sale/claims/{}/confirm",
            first["claim_id"].as_str().unwrap()
        )))
        .bearer_auth(mine)
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 410);
    assert_eq!(
        late.json::<Value>().await.unwrap()["error"]["code"],
        "hold_expired"
    );
    let unknown = app
        .http
        .post(app.url("/api/rooms/tickets/sale/claims/nope/confirm"))
        .bearer_auth(mine)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let no_sale = app
        .http
        .get(app.url("/api/rooms/elsewhere/sale"))
        .send()
        .await
        .unwrap();
    assert_eq!(no_sale.status(), 404);
    let bad_sale = app
        .admin(Method::PUT, "/api/admin/rooms/tickets/sale")
        .json(&json!({"stock": 5, "seats": ["A1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_sale.status(), 400);
    let no_room = app
        .admin(Method::PUT, "/api/admin/rooms/nowhere/sale")
        .json(&json!({"stock": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_room.status(), 404);
    let anonymous_admin = app
        .http
        .put(app.url("/api/admin/rooms/tickets/sale"))
        .json(&json!({"stock": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous_admin.status(), 401);
}

#[tokio::test]
async fn expiry_and_bad_input_on_memory() {
    expiry_and_bad_input(&memory_node().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expiry_and_bad_input_on_redis() {
    let redis = RedisServer::start();
    expiry_and_bad_input(&redis_nodes(&redis).await).await;
}

#[tokio::test]
async fn confirmed_orders_reach_the_operator_and_the_redis_stream() {
    let redis = RedisServer::start();
    let nodes = redis_nodes(&redis).await;
    let passes = admitted_visitors(
        &nodes,
        "orders",
        json!({"stock": 10, "per_user_limit": 2}),
        2,
    )
    .await;
    let mut confirmed = Vec::new();
    for (i, pass) in passes.iter().enumerate() {
        let (_, held) = claim(&nodes[i], "orders", pass, json!({"quantity": 2})).await;
        let id = held["claim_id"].as_str().unwrap().to_string();
        let confirm = |node: &TestApp| {
            node.http
                .post(node.url(&format!("/api/rooms/orders/sale/claims/{id}/confirm")))
                .bearer_auth(pass)
                .send()
        };
        let first: Value = confirm(&nodes[2]).await.unwrap().json().await.unwrap();
        let again: Value = confirm(&nodes[1]).await.unwrap().json().await.unwrap();
        assert_eq!(
            (first["state"].as_str(), &again),
            (Some("confirmed"), &first),
            "confirming twice is harmless"
        );
        confirmed.push(id);
    }
    let orders: Value = nodes[1]
        .admin(Method::GET, "/api/admin/rooms/orders/sale/orders")
        .fetch_json()
        .await;
    let ids: Vec<&str> = orders["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["claim_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        confirmed.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // Another service reads the same orders from the stream, with a consumer group.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "wr:{orders}:orders", "fulfilment", "0"][..])
        .query_async(&mut connection)
        .await
        .unwrap();
    let read: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
        .arg(
            &[
                "GROUP",
                "fulfilment",
                "worker-1",
                "COUNT",
                "10",
                "STREAMS",
                "wr:{orders}:orders",
                ">",
            ][..],
        )
        .query_async(&mut connection)
        .await
        .unwrap();
    let streamed: Vec<String> = read.keys[0]
        .ids
        .iter()
        .map(|entry| entry.get::<String>("claim_id").unwrap())
        .collect();
    assert_eq!(streamed, confirmed);
}

/// What an answer's JSON error code is (empty if none).
async fn code_of(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or_default();
    let code = body["error"]["code"].as_str().unwrap_or_default();
    (status, code.to_string())
}

async fn verify_code(node: &TestApp, room: &str, pass: &str) -> (u16, String) {
    let response = node
        .http
        .get(node.url(&format!("/api/verify?room={room}")))
        .bearer_auth(pass)
        .send()
        .await
        .unwrap();
    if response.status() == 204 {
        return (204, String::new());
    }
    code_of(response).await
}

async fn claim_code(node: &TestApp, room: &str, pass: &str) -> (u16, String, Value) {
    let (status, body) = claim(node, room, pass, json!({"quantity": 1})).await;
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (status, code, body)
}

async fn on_claim(
    node: &TestApp,
    method: Method,
    room: &str,
    id: &str,
    pass: &str,
) -> (u16, String) {
    let path = if method == Method::DELETE {
        format!("/api/rooms/{room}/sale/claims/{id}")
    } else {
        format!("/api/rooms/{room}/sale/claims/{id}/confirm")
    };
    let response = node
        .http
        .request(method, node.url(&path))
        .bearer_auth(pass)
        .send()
        .await
        .unwrap();
    if response.status() == 204 {
        return (204, String::new());
    }
    code_of(response).await
}

/// `GET …/sale` with `pass` as Bearer: the status, and the error's code
/// or else how many claims it shows as the caller's.
async fn view_code(node: &TestApp, room: &str, pass: &str) -> (u16, String) {
    let response = node
        .http
        .get(node.url(&format!("/api/rooms/{room}/sale")))
        .bearer_auth(pass)
        .send()
        .await
        .unwrap();
    if response.status() == 200 {
        let body: Value = response.json().await.unwrap();
        return (
            200,
            format!("mine {}", body["mine"].as_array().unwrap().len()),
        );
    }
    code_of(response).await
}

/// (ticket, pass) of a visitor joining on `node`, who passes straight through.
async fn admitted(node: &TestApp, room: &str) -> (String, String) {
    let status = node.join_api(room).await;
    assert_eq!(status["state"], "admitted", "{status}");
    (
        status["ticket"].as_str().unwrap().to_string(),
        status["pass"].as_str().unwrap().to_string(),
    )
}

async fn leave(node: &TestApp, room: &str, ticket: &str) {
    let left = node
        .http
        .post(node.url(&format!("/api/rooms/{room}/leave")))
        .bearer_auth(ticket)
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 204);
}

/// Issue 11, finding 2: whatever `/api/verify` refuses, the sale refuses
/// too, on every node at once: a pass given up with `leave`, a closed room,
/// a pass from before the room's id was closed and created again.
async fn the_sale_takes_only_the_passes_verify_takes(nodes: &[TestApp]) {
    let node = |i: usize| &nodes[i % nodes.len()];
    let room = "gate";
    node(0)
        .create_room(room, json!({"admit_per_tick": 1_000, "pass_ttl_s": 30}))
        .await;
    node(0)
        .put_sale(
            room,
            json!({"stock": 10, "per_user_limit": 5, "hold_ttl_s": 120}),
        )
        .await;

    // Given up with leave (on one node): refused everywhere, as verify refuses it.
    let (ticket, given_up) = admitted(node(0), room).await;
    let (status, _, held) = claim_code(node(1), room, &given_up).await;
    assert_eq!(status, 201);
    let held = held["claim_id"].as_str().unwrap().to_string();
    leave(node(0), room, &ticket).await;
    for i in 0..nodes.len() {
        assert_eq!(
            verify_code(node(i), room, &given_up).await,
            (401, "pass_revoked".into())
        );
        let (status, code, _) = claim_code(node(i), room, &given_up).await;
        assert_eq!((status, code.as_str()), (401, "pass_revoked"), "claim");
        assert_eq!(
            on_claim(node(i), Method::POST, room, &held, &given_up).await,
            (401, "pass_revoked".into()),
            "confirm"
        );
        assert_eq!(
            view_code(node(i), room, &given_up).await,
            (401, "pass_revoked".into()),
            "the sale's view"
        );
    }
    // A pass of another room is taken for none (the cookie is the site's):
    // the public view; one that is no pass at all is refused.
    node(0)
        .create_room("elsewhere", json!({"admit_per_tick": 1_000}))
        .await;
    let (_, elsewhere) = admitted(node(0), "elsewhere").await;
    assert_eq!(
        view_code(node(1), room, &elsewhere).await,
        (200, "mine 0".into())
    );
    assert_eq!(
        view_code(node(1), room, "not.a.pass").await,
        (401, "invalid_pass".into())
    );
    // Still refused once it has run out too.
    node(0).clock.advance_ms(30_000);
    assert_eq!(
        on_claim(node(1), Method::POST, room, &held, &given_up).await,
        (401, "pass_revoked".into())
    );

    // A pass that simply ran out still confirms the hold made in time.
    let (_, ran_out) = admitted(node(0), room).await;
    let (_, _, in_time) = claim_code(node(1), room, &ran_out).await;
    let in_time = in_time["claim_id"].as_str().unwrap().to_string();
    node(0).clock.advance_ms(30_000);
    assert_eq!(verify_code(node(0), room, &ran_out).await.0, 401);
    assert_eq!(claim_code(node(1), room, &ran_out).await.0, 401);
    assert_eq!(
        view_code(node(2), room, &ran_out).await,
        (200, "mine 1".into()),
        "its hold is still its to see"
    );
    assert_eq!(
        on_claim(node(2), Method::POST, room, &in_time, &ran_out)
            .await
            .0,
        200
    );

    // A closed room sells nothing, to any pass it issued.
    let (_, before_close) = admitted(node(0), room).await;
    let (_, _, pending) = claim_code(node(0), room, &before_close).await;
    let pending = pending["claim_id"].as_str().unwrap().to_string();
    let closed = node(1)
        .admin(Method::DELETE, &format!("/api/admin/rooms/{room}"))
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    for i in 0..nodes.len() {
        assert_eq!(
            verify_code(node(i), room, &before_close).await,
            (401, "room_closed".into())
        );
        let (status, code, _) = claim_code(node(i), room, &before_close).await;
        assert_eq!((status, code.as_str()), (409, "room_closed"), "claim");
        for method in [Method::POST, Method::DELETE] {
            assert_eq!(
                on_claim(node(i), method, room, &pending, &before_close).await,
                (409, "room_closed".into())
            );
        }
        assert_eq!(
            view_code(node(i), room, &before_close).await.0,
            409,
            "the sale's view"
        );
    }

    // Created again under the same id: it starts empty, and no pass of its
    // predecessor counts in it.
    node(2)
        .create_room(room, json!({"admit_per_tick": 1_000}))
        .await;
    let orders: Value = node(0)
        .admin(Method::GET, &format!("/api/admin/rooms/{room}/sale/orders"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(orders["error"]["code"], "sale_not_found", "{orders}");
    node(0)
        .put_sale(room, json!({"stock": 3, "per_user_limit": 3}))
        .await;
    for i in 0..nodes.len() {
        assert_eq!(
            verify_code(node(i), room, &before_close).await,
            (401, "pass_revoked".into())
        );
        let (status, code, _) = claim_code(node(i), room, &before_close).await;
        assert_eq!((status, code.as_str()), (401, "pass_revoked"), "claim");
        assert_eq!(
            on_claim(node(i), Method::POST, room, &in_time, &ran_out)
                .await
                .0,
            404,
            "an order of the old room is not one of the new room's"
        );
    }
    let (_, newcomer) = admitted(node(1), room).await;
    let (status, _, first) = claim_code(node(2), room, &newcomer).await;
    assert_eq!((status, first["sequence"].as_u64()), (201, Some(1)));
    // The public view may be a second old (the node's cache), and the
    // predecessor's was read above.
    node(0).clock.advance_ms(1_000);
    let sale: Value = node(0)
        .http
        .get(node(0).url(&format!("/api/rooms/{room}/sale")))
        .fetch_json()
        .await;
    assert_eq!(
        sale["stock_left"], 2,
        "the new sale's stock is the new sale's"
    );
    let orders: Value = node(0)
        .admin(Method::GET, &format!("/api/admin/rooms/{room}/sale/orders"))
        .fetch_json()
        .await;
    assert_eq!(orders["orders"], json!([]));
}

#[tokio::test]
async fn the_sale_takes_only_the_passes_verify_takes_on_memory() {
    the_sale_takes_only_the_passes_verify_takes(&memory_node().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sale_takes_only_the_passes_verify_takes_on_three_redis_nodes() {
    let redis = RedisServer::start();
    let nodes = redis_nodes(&redis).await;
    the_sale_takes_only_the_passes_verify_takes(&nodes).await;
    // The old sale's order stream went with it, for consumers too.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let length: u64 = redis::cmd("XLEN")
        .arg("wr:{gate}:orders")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(length, 0);
}

const USER_KEY: &str = "the-shop-s-user-key-0123456789abcdef";

/// A signed-in user of the room's site joins (a device of their own, no
/// cookies): their `Status`.
async fn join_as_user(node: &TestApp, room: &str, user: &str) -> Value {
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": user, "room": room, "exp": support::START_MS / 1000 + 3_600}),
        &jsonwebtoken::EncodingKey::from_secret(USER_KEY.as_bytes()),
    )
    .unwrap();
    reqwest::Client::new()
        .post(node.url(&format!("/api/rooms/{room}/join")))
        .json(&json!({"user": token}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Issue 24, item 15: where the pass came from a user token, the
/// per-user limit counts that user's claims of every visit and device.
async fn a_users_limit_holds_across_visits(nodes: &[TestApp]) {
    let node = |i: usize| &nodes[i % nodes.len()];
    let room = "members";
    node(0)
        .create_room(room, json!({"admit_per_tick": 1_000, "user_key": USER_KEY}))
        .await;
    node(0)
        .put_sale(room, json!({"stock": 10, "per_user_limit": 2}))
        .await;

    let first = join_as_user(node(0), room, "alice").await;
    assert_eq!(first["state"], "admitted");
    let pass = first["pass"].as_str().unwrap();
    let (status, bought) = claim(node(0), room, pass, json!({"quantity": 2})).await;
    assert_eq!(status, 201, "{bought}");
    let id = bought["claim_id"].as_str().unwrap();
    assert_eq!(on_claim(node(0), Method::POST, room, id, pass).await.0, 200);
    leave(node(0), room, first["ticket"].as_str().unwrap()).await;

    let again = join_as_user(node(1), room, "alice").await;
    assert_eq!(again["state"], "admitted");
    assert_ne!(
        again["ticket"], first["ticket"],
        "a new visit, a new visitor"
    );
    let (status, code, _) = claim_code(node(1), room, again["pass"].as_str().unwrap()).await;
    assert_eq!(
        (status, code.as_str()),
        (409, "limit_reached"),
        "she bought her limit on her first visit"
    );

    let bob = join_as_user(node(1), room, "bob").await;
    let (status, _) = claim(
        node(0),
        room,
        bob["pass"].as_str().unwrap(),
        json!({"quantity": 2}),
    )
    .await;
    assert_eq!(status, 201, "another user's limit is his own");
}

#[tokio::test]
async fn a_users_limit_holds_across_visits_on_memory() {
    a_users_limit_holds_across_visits(&memory_node().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_users_limit_holds_across_visits_on_redis() {
    let redis = RedisServer::start();
    a_users_limit_holds_across_visits(&redis_nodes(&redis).await).await;
}

/// Issue 24, item 18: a pass taken back (revoked by the operator, given up
/// with `leave`, by pass or by ticket) gives its holds back to stock at once.
async fn a_pass_taken_back_gives_its_holds_back(nodes: &[TestApp]) {
    let node = |i: usize| &nodes[i % nodes.len()];
    let room = "revocable";
    node(0)
        .create_room(room, json!({"admit_per_tick": 1_000}))
        .await;
    node(0).put_sale(room, json!({"seats": ["A1", "A2"]})).await;
    let hold_a1 = |i: usize, pass: String| async move {
        claim(node(i), room, &pass, json!({"seats": ["A1"]})).await
    };

    let (_, revoked) = admitted(node(0), room).await;
    assert_eq!(hold_a1(0, revoked.clone()).await.0, 201);
    let (_, next) = admitted(node(1), room).await;
    assert_eq!(
        hold_a1(1, next.clone()).await.1["error"]["code"],
        "seat_taken"
    );
    let revoke = node(1)
        .admin(
            Method::POST,
            &format!("/api/admin/rooms/{room}/passes/revoke"),
        )
        .json(&json!({"pass": revoked}))
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), 204);
    assert_eq!(
        hold_a1(1, next.clone()).await.0,
        201,
        "the revoked pass's hold went back with it"
    );

    leave(node(0), room, &next).await; // the pass as Bearer
    let (ticket, third) = admitted(node(0), room).await;
    assert_eq!(hold_a1(0, third).await.0, 201, "given up with leave");

    leave(node(1), room, &ticket).await; // the ticket: the pass goes too
    let (_, fourth) = admitted(node(1), room).await;
    assert_eq!(hold_a1(0, fourth).await.0, 201, "left with the ticket");
}

#[tokio::test]
async fn a_pass_taken_back_gives_its_holds_back_on_memory() {
    a_pass_taken_back_gives_its_holds_back(&memory_node().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pass_taken_back_gives_its_holds_back_on_redis() {
    let redis = RedisServer::start();
    a_pass_taken_back_gives_its_holds_back(&redis_nodes(&redis).await).await;
}

/// The `Set-Cookie` headers of an answer.
fn set_cookies(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

/// Issue 11, finding 3: the sale page turns only a pass that verifies for
/// its room into a cookie, as it is, and never one that would displace the
/// visitor's own; anything else is dropped and the page redirects without a
/// cookie.
async fn the_sale_page_sets_only_a_verified_pass_of_the_visitors_own(nodes: &[TestApp]) {
    let app = &nodes[0];
    app.create_room("fair", json!({"admit_per_tick": 1_000}))
        .await;
    app.create_room("other", json!({"admit_per_tick": 1_000}))
        .await;
    app.put_sale("fair", json!({"stock": 5})).await;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let open = |query: String, cookies: Option<String>| {
        let node = &nodes[nodes.len() - 1];
        let mut request = browser.get(node.url(&format!("/rooms/fair/sale?{query}")));
        if let Some(cookies) = cookies {
            request = request.header(reqwest::header::COOKIE, cookies);
        }
        async move { request.send().await.unwrap() }
    };
    let redirected_without_cookie = |response: reqwest::Response, what: &str| {
        assert_eq!(response.status(), 303, "{what}");
        assert_eq!(
            response.headers()[reqwest::header::LOCATION],
            "/rooms/fair/sale",
            "{what}"
        );
        assert_eq!(set_cookies(&response), Vec::<String>::new(), "{what}");
    };

    // Attributes or headers smuggled in the value: dropped, no 500.
    for injected in [
        "abc%3B%20Domain%3Dexample.com%3B%20Max-Age%3D999999999",
        "abc%0d%0aSet-Cookie%3A%20wr_admin%3Dx",
        "abc%0aX-Injected%3A%201",
        "%22abc%22",
        "",
    ] {
        redirected_without_cookie(open(format!("wr_pass={injected}"), None).await, injected);
    }
    let bad_room = browser
        .get(app.url("/rooms/fair%0d%0aX-Injected:%201/sale?wr_pass=abc"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_room.status(), 404);

    // A valid pass of the room, for a browser with none: set as it is.
    let (mine_ticket, mine) = admitted(app, "fair").await;
    let response = open(format!("wr_pass={mine}"), None).await;
    assert_eq!(response.status(), 303);
    let cookies = set_cookies(&response);
    assert_eq!(cookies.len(), 1, "{cookies:?}");
    let cookie = &cookies[0];
    assert!(cookie.starts_with(&format!("wr_pass={mine};")), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=600"] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");

    // Passes /api/verify refuses are refused here too.
    let (_, foreign) = admitted(app, "other").await;
    redirected_without_cookie(open(format!("wr_pass={foreign}"), None).await, "other room");
    let (given_up_ticket, given_up) = admitted(app, "fair").await;
    leave(app, "fair", &given_up_ticket).await;
    redirected_without_cookie(open(format!("wr_pass={given_up}"), None).await, "given up");

    // Someone else's valid pass does not replace the visitor's own pass…
    let (_, theirs) = admitted(app, "fair").await;
    redirected_without_cookie(
        open(format!("wr_pass={theirs}"), Some(format!("wr_pass={mine}"))).await,
        "over my own pass",
    );
    // …nor is it given to a visitor whose ticket names someone else.
    redirected_without_cookie(
        open(
            format!("wr_pass={theirs}"),
            Some(format!("wr_ticket_fair={mine_ticket}")),
        )
        .await,
        "to another visitor's browser",
    );
    // The visitor's own pass, beside their ticket, or over a stale pass: set.
    for cookies in [
        format!("wr_ticket_fair={mine_ticket}"),
        format!("wr_pass={given_up}; wr_ticket_fair={mine_ticket}"),
        format!("wr_pass={mine}"),
    ] {
        let response = open(format!("wr_pass={mine}"), Some(cookies.clone())).await;
        let set = set_cookies(&response);
        assert!(
            set.len() == 1 && set[0].starts_with(&format!("wr_pass={mine};")),
            "{cookies}: {set:?}"
        );
    }
}

#[tokio::test]
async fn the_sale_page_sets_only_a_verified_pass_on_memory() {
    the_sale_page_sets_only_a_verified_pass_of_the_visitors_own(&memory_node().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sale_page_sets_only_a_verified_pass_on_redis() {
    let redis = RedisServer::start();
    the_sale_page_sets_only_a_verified_pass_of_the_visitors_own(&redis_nodes(&redis).await).await;
}

/// Issue 13, the sale-aware line: `stock_left` in every status, and a sale
/// sold out (no hold out) closes the waiting line on every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sold_out_sale_closes_the_line_on_every_node() {
    let redis = RedisServer::start();
    let nodes = redis_nodes(&redis).await;
    nodes[0]
        .create_room(
            "drop",
            json!({"admit_per_tick": 1, "max_active": 1, "tick_ms": 1000, "abandon_after_s": 86_400}),
        )
        .await;
    nodes[0]
        .put_sale("drop", json!({"stock": 1, "hold_ttl_s": 60}))
        .await;
    let (_, pass) = admitted(&nodes[0], "drop").await;
    let mut sockets = Vec::new();
    for i in 0..3 {
        let status = nodes[i].join_api("drop").await;
        assert_eq!(status["state"], "waiting");
        let mut socket = nodes[(i + 1) % 3]
            .connect("drop", status["ticket"].as_str().unwrap())
            .await;
        let first = support::next_status(&mut socket).await;
        assert_eq!(first["stock_left"], 1, "the sale's stock in every status");
        sockets.push(socket);
    }

    let (code, held) = claim(&nodes[1], "drop", &pass, json!({"quantity": 1})).await;
    assert_eq!(code, 201, "{held}");
    let confirmed = nodes[2]
        .http
        .post(nodes[2].url(&format!(
            "/api/rooms/drop/sale/claims/{}/confirm",
            held["claim_id"].as_str().unwrap()
        )))
        .bearer_auth(&pass)
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status(), 200);

    nodes[0].clock.advance_ms(1_000);
    futures_util::future::join_all(nodes.iter().map(|node| node.promote())).await;
    for socket in &mut sockets {
        // The tick's own status may come first; the close follows it.
        let status = loop {
            let status = support::next_status(socket).await;
            if status["state"] != "waiting" {
                break status;
            }
        };
        assert_eq!(
            (status["state"].as_str(), status["reason"].as_str()),
            (Some("closed"), Some("sold_out")),
            "{status}"
        );
        assert_eq!(status["stock_left"], 0);
        assert_eq!(support::close_code(socket).await, 1000);
    }
    let late = nodes[1].join_api("drop").await;
    assert_eq!(
        (late["state"].as_str(), late["reason"].as_str()),
        (Some("closed"), Some("sold_out")),
        "new arrivals get the same answer"
    );
}
