//! `POST`/`DELETE /api/rooms/{room}/notify` from outside (api.md, "Step
//! away"): a waiting visitor's request is kept and `notify` says so; bad
//! input gets its own clear error and changes nothing: malformed JSON, an
//! unknown field, a contact without a webhook or too long, `ahead` out of
//! bounds, a push endpoint off the allowed hosts, a forged ticket, an
//! unknown room, a visitor not waiting, and past `--notify-per-ip`.

use serde_json::{Value, json};
use waitroom_testkit::{TestApp, error_of};

const SECRET: &str = "0123456789abcdef0123456789abcdef";

async fn post(app: &TestApp, room: &str, ticket: &str, body: &str) -> reqwest::Response {
    app.http
        .post(app.url(&format!("/api/rooms/{room}/notify")))
        .bearer_auth(ticket)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

async fn waiting_ticket(app: &TestApp, room: &str) -> String {
    let status = app.join_api(room).await;
    assert_eq!(status["state"], "waiting", "{status}");
    status["ticket"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_waiting_visitor_asks_and_bad_requests_change_nothing() {
    let app = TestApp::spawn().await;
    app.create_room(
        "n",
        json!({"admit_per_tick": 1, "notify_webhook_url": "https://hooks.example/wr", "notify_webhook_secret": SECRET}),
    )
    .await;
    app.create_room("plain", json!({"admit_per_tick": 1})).await;
    let through = app.join_api("n").await;
    assert_eq!(through["state"], "admitted");
    let ticket = waiting_ticket(&app, "n").await;

    for (body, code) in [
        ("{", "invalid_json"),
        (r#"{"contact":"a","extra":1}"#, "invalid_json"),
        ("{}", "invalid_notify"),
        (r#"{"contact":""}"#, "invalid_notify"),
        (
            &format!(r#"{{"contact":"{}"}}"#, "x".repeat(201)),
            "invalid_notify",
        ),
        (r#"{"contact":"a","ahead":0}"#, "invalid_notify"),
        (r#"{"contact":"a","ahead":1001}"#, "invalid_notify"),
        (
            r#"{"push":{"endpoint":"https://push.attacker.example/x","keys":{"p256dh":"BAAA","auth":"AAAA"}}}"#,
            "invalid_notify",
        ),
        (
            r#"{"push":{"endpoint":"http://127.0.0.1:9/x","keys":{"p256dh":"BAAA","auth":"AAAA"}}}"#,
            "invalid_notify",
        ),
    ] {
        let (status, got) = error_of(post(&app, "n", &ticket, body).await).await;
        assert_eq!((status, got.as_str()), (400, code), "{body}");
    }
    let status: Value = app.status_api("n", &ticket).await.json().await.unwrap();
    assert_eq!(status["notify"], false, "nothing was kept: {status}");

    let asked = post(&app, "n", &ticket, r#"{"contact":"+15550100","ahead":3}"#).await;
    // 204, as api.md says: the place's status says the rest.
    assert_eq!(asked.status(), 204);
    let status: Value = app.status_api("n", &ticket).await.json().await.unwrap();
    assert_eq!(
        (status["state"].as_str(), status["notify"].as_bool()),
        (Some("waiting"), Some(true))
    );

    // The admin API never shows a contact.
    let info = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/n")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!info.contains("15550100"), "{info}");
    assert!(!info.contains(SECRET), "the webhook's secret is write-only");

    let cancelled = app
        .http
        .delete(app.url("/api/rooms/n/notify"))
        .bearer_auth(&ticket)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 204);
    let status: Value = app.status_api("n", &ticket).await.json().await.unwrap();
    assert_eq!(status["notify"], false);

    // A contact goes nowhere in a room without a webhook.
    let plain_ticket = {
        app.join_api("plain").await;
        waiting_ticket(&app, "plain").await
    };
    let (status, code) =
        error_of(post(&app, "plain", &plain_ticket, r#"{"contact":"a"}"#).await).await;
    assert_eq!((status, code.as_str()), (400, "invalid_notify"));

    // Credentials and rooms that are not.
    let forged = format!("{}x", &ticket[..ticket.len() - 1]);
    let (status, code) = error_of(post(&app, "n", &forged, r#"{"contact":"a"}"#).await).await;
    assert_eq!((status, code.as_str()), (401, "invalid_ticket"));
    let (status, _) = error_of(post(&app, "n", &plain_ticket, r#"{"contact":"a"}"#).await).await;
    assert_eq!(status, 401, "a ticket of another room");
    let (status, code) = error_of(post(&app, "nowhere", &ticket, r#"{"contact":"a"}"#).await).await;
    assert_eq!(status, 401, "{code}: a ticket is for its own room only");
    let admitted = through["ticket"].as_str().unwrap();
    let (status, code) = error_of(post(&app, "n", admitted, r#"{"contact":"a"}"#).await).await;
    assert_eq!((status, code.as_str()), (409, "not_waiting"));
}

#[tokio::test]
async fn one_address_holds_a_few_requests_at_once() {
    let app = TestApp::spawn().await;
    app.create_room(
        "n",
        json!({"admit_per_tick": 1, "notify_webhook_url": "https://hooks.example/wr", "notify_webhook_secret": SECRET}),
    )
    .await;
    app.join_api("n").await;
    let mut tickets = Vec::new();
    for _ in 0..6 {
        tickets.push(waiting_ticket(&app, "n").await);
    }
    for ticket in &tickets[..5] {
        assert_eq!(
            post(&app, "n", ticket, r#"{"contact":"a"}"#).await.status(),
            204
        );
    }
    let (status, code) = error_of(post(&app, "n", &tickets[5], r#"{"contact":"a"}"#).await).await;
    assert_eq!(
        (status, code.as_str()),
        (409, "too_many_notifications"),
        "the default --notify-per-ip is 5"
    );
    assert_eq!(
        post(&app, "n", &tickets[0], r#"{"contact":"b"}"#)
            .await
            .status(),
        204,
        "asking again is no new place"
    );
}

/// A request holds a place as long as a join makes one: it spends one of
/// the address's joins (`--join-rate-per-ip`), and past them is refused
/// as a join would be.
#[tokio::test]
async fn a_request_spends_one_of_the_addresss_joins() {
    let mut settings = waitroom_testkit::test_settings();
    settings.join_rate_per_ip = Some(3);
    let clock = waitroom::words::clock::ManualClock::new(waitroom_testkit::START_MS);
    let app = TestApp::spawn_with(
        settings,
        waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone())),
        clock,
    )
    .await;
    app.create_room(
        "n",
        json!({"admit_per_tick": 1, "notify_webhook_url": "https://hooks.example/wr", "notify_webhook_secret": SECRET}),
    )
    .await;
    app.join_api("n").await;
    let ticket = waiting_ticket(&app, "n").await;
    assert_eq!(
        post(&app, "n", &ticket, r#"{"contact":"a"}"#)
            .await
            .status(),
        204,
        "the third of three"
    );
    let (status, code) = error_of(post(&app, "n", &ticket, r#"{"contact":"b"}"#).await).await;
    assert_eq!((status, code.as_str()), (429, "rate_limited"));
    let status: Value = app.status_api("n", &ticket).await.json().await.unwrap();
    assert_eq!(status["notify"], true, "the request made before stands");
}
