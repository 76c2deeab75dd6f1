//! Sessions over HTTP (api.md, "Sessions"): verify, the gate and the sale
//! each renew a pass's session; one idle past `session_idle_s` is refused
//! everywhere as `pass_expired`, told `expired` (`session_idle`) on its
//! status, counted in the stats, the report and `/metrics`; with the store
//! down, nothing lapses for idleness; and the setting's bounds.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};
use support::{FetchJson, TestApp, pass_answer};
use waitroom::words::clock::ManualClock;
use waitroom_testkit as support;

/// The gate as an app asks it: JSON, the pass in `X-Waitroom-Pass` beside
/// an `Authorization` of the app's own.
async fn gate(app: &TestApp, room: &str, pass: &str) -> (u16, String) {
    let response = app
        .http
        .get(app.url("/api/gate"))
        .header("X-Waitroom-Room", room)
        .header("X-Forwarded-Proto", "https")
        .header("X-Forwarded-Host", "shop.example")
        .header("X-Forwarded-Uri", "/api/cart")
        .header("Accept", "application/json")
        .header("X-Waitroom-Pass", pass)
        .bearer_auth("the-apps-own-token")
        .send()
        .await
        .unwrap();
    pass_answer(response).await
}

async fn claim(app: &TestApp, room: &str, pass: &str) -> (u16, String) {
    let response = app
        .http
        .post(app.url(&format!("/api/rooms/{room}/sale/claims")))
        .bearer_auth(pass)
        .json(&json!({"quantity": 1}))
        .send()
        .await
        .unwrap();
    pass_answer(response).await
}

async fn status_of(app: &TestApp, room: &str, ticket: &str) -> Value {
    app.status_api(room, ticket).await.json().await.unwrap()
}

async fn stats(app: &TestApp, room: &str) -> Value {
    app.admin(Method::GET, &format!("/api/admin/rooms/{room}"))
        .fetch_json()
        .await["stats"]
        .clone()
}

#[tokio::test]
async fn verify_the_gate_and_the_sale_keep_a_session_on_and_an_idle_one_lapses_everywhere() {
    let app = TestApp::spawn().await;
    let room = "sessions";
    app.create_room(
        room,
        json!({"max_active": 1, "pass_ttl_s": 600, "session_idle_s": 30, "abandon_after_s": 3600}),
    )
    .await;
    app.put_sale(room, json!({"stock": 10, "per_user_limit": 5}))
        .await;
    let joined = app.join_api(room).await;
    let pass = joined["pass"].as_str().unwrap().to_owned();
    let ticket = joined["ticket"].as_str().unwrap().to_owned();
    let expires_at = joined["expires_at"].clone();
    let waiting = app.join_api(room).await;
    assert_eq!(waiting["position"], 1, "the cap holds");

    // Each kind of call, 25 s apart: 100 s on, far past the idle time.
    for call in 0..4 {
        app.step(25_000).await;
        let answer = match call {
            0 | 3 => app.verify(room, &pass).await,
            1 => gate(&app, room, &pass).await,
            _ => claim(&app, room, &pass).await,
        };
        assert!(answer.0 < 300, "call {call}: {answer:?}");
    }
    let status = status_of(&app, room, &ticket).await;
    assert_eq!(status["state"], "admitted");
    assert_eq!(
        status["expires_at"], expires_at,
        "the pass's hard limit, unchanged"
    );

    // Idle from 100 s: 33 s later (the idle time and its tenth) it is over.
    app.step(33_000).await;
    assert_eq!(app.verify(room, &pass).await, (401, "pass_expired".into()));
    assert_eq!(gate(&app, room, &pass).await, (401, "pass_expired".into()));
    assert_eq!(claim(&app, room, &pass).await, (401, "pass_expired".into()));
    let status = status_of(&app, room, &ticket).await;
    assert_eq!(
        (&status["state"], &status["reason"]),
        (&json!("expired"), &json!("session_idle"))
    );

    app.step(5_000).await;
    let next = status_of(&app, room, waiting["ticket"].as_str().unwrap()).await;
    assert_eq!(next["state"], "admitted", "the slot went to the next");
    assert_eq!(stats(&app, room).await["sessions_lapsed"], 1);
    let report = app
        .admin(Method::GET, &format!("/api/admin/rooms/{room}/report"))
        .fetch_json()
        .await;
    assert_eq!(report["sessions_lapsed"], 1);
    let metrics = app.get_text("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "waitroom_sessions_lapsed_total{room=\"sessions\"} 1"),
        "{metrics}"
    );
}

/// api.md: with the store unreachable, verify decides by signature and
/// `exp` alone, so nothing lapses for idleness meanwhile; `exp` still ends
/// a pass.
#[tokio::test]
async fn with_the_store_down_nothing_lapses_for_idleness_and_exp_still_ends_a_pass() {
    let clock = ManualClock::new(support::START_MS);
    let (store, stores) = support::unreachable::Unreachable::memory(Arc::new(clock.clone()));
    let app = TestApp::spawn_on(stores, clock).await;
    app.create_room("outage", json!({"pass_ttl_s": 120, "session_idle_s": 10}))
        .await;
    let pass = app.pass_for("outage").await;
    store.set_down(true);
    app.clock.advance_ms(60_000);
    assert_eq!(app.verify("outage", &pass).await, (204, "signature".into()));
    app.clock.advance_ms(60_000);
    assert_eq!(
        app.verify("outage", &pass).await,
        (401, "pass_expired".into())
    );
    store.set_down(false);
    assert_eq!(
        app.verify("outage", &pass).await,
        (401, "pass_expired".into())
    );
}

#[tokio::test]
async fn session_idle_s_is_bounded_by_its_range_and_by_pass_ttl_s() {
    let app = TestApp::spawn().await;
    app.create_room("bounds", json!({"pass_ttl_s": 600})).await;
    for (change, field) in [
        (json!({"session_idle_s": 4}), "session_idle_s"),
        (json!({"session_idle_s": 86_401}), "session_idle_s"),
        (json!({"session_idle_s": 601}), "session_idle_s"),
        (json!({"session_idle_s": "60"}), "session_idle_s"),
    ] {
        let response = app.patch_room("bounds", change.clone()).await;
        assert_eq!(response.status(), 400, "{change}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_config", "{change}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{change}: {body}"
        );
    }
    let set = app
        .patch_room("bounds", json!({"session_idle_s": 600}))
        .await;
    assert_eq!(set.status(), 200);
    let lowered = app.patch_room("bounds", json!({"pass_ttl_s": 300})).await;
    assert_eq!(lowered.status(), 400, "the hard limit below the idle time");
    let room = app
        .admin(Method::GET, "/api/admin/rooms/bounds")
        .fetch_json()
        .await;
    assert_eq!(
        (&room["session_idle_s"], &room["pass_ttl_s"]),
        (&json!(600), &json!(600))
    );
    let off = app
        .patch_room("bounds", json!({"session_idle_s": null}))
        .await;
    assert_eq!(off.status(), 200);
    let room = app
        .admin(Method::GET, "/api/admin/rooms/bounds")
        .fetch_json()
        .await;
    assert_eq!(room["session_idle_s"], Value::Null);
}
