//! The notifications' sender (`waitroom::live::callbacks`), end to end on
//! one node: a visitor who asked to be notified (through the store's
//! `Notify`, as the HTTP route does) is admitted by a tick, and the room's
//! webhook, a loopback receiver the test controls, gets one signed POST of
//! the `admitted` event with the contact and an absolute resume link; a
//! receiver that fails is retried with backoff under the same `id` until it
//! answers 2xx, and the event is then settled (the outbox is empty).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use waitroom::store::StoreExt;
use waitroom::words::RoomId;
use waitroom::words::notify::{Ask, NotifyRequest};
use waitroom::words::op::Notify;
use waitroom::words::return_url::PublicUrl;
use waitroom_testkit::health_origin::{HealthOrigin, Received};
use waitroom_testkit::{PATIENCE, START_MS, TestApp, eventually, logs, test_settings};

const SECRET: &str = "whsec-a-room-secret-of-at-least-32-chars";
const CONTACT: &str = "+15550100";
const TICK_MS: u64 = 1_000;

/// A node that may call loopback, on `https://queue.example`.
async fn node() -> TestApp {
    let mut settings = test_settings();
    settings.outbound_allow_networks = vec!["127.0.0.0/8".parse().unwrap()];
    settings.public_url = Some(PublicUrl::parse("https://queue.example").unwrap());
    let clock = waitroom::words::clock::ManualClock::new(START_MS);
    TestApp::spawn_with(
        settings,
        waitroom::startup::Stores::memory(Arc::new(clock.clone())),
        clock,
    )
    .await
}

/// A room of one a tick whose webhook is `receiver`, and a visitor at the
/// head of its line who asked to be notified at `CONTACT`.
async fn room_with_a_visitor_who_asked(app: &TestApp, receiver: &HealthOrigin) -> RoomId {
    app.create_room(
        "drop",
        json!({
            "admit_per_tick": 1,
            // Paused while the line forms, so nobody passes straight through.
            "paused": true,
            "tick_ms": TICK_MS,
            "abandon_after_s": 86400,
            "notify_webhook_url": receiver.url_for("/hooks/waitroom"),
            "notify_webhook_secret": SECRET,
        }),
    )
    .await;
    let room = RoomId::parse("drop").unwrap();
    let joined = app.join_api("drop").await;
    let ticket = joined["ticket"].as_str().unwrap();
    let visitor = app.handle.credentials.ticket_holder(&room, ticket).unwrap();
    let place = app
        .handle
        .store
        .run(Notify {
            room: room.clone(),
            visitor,
            ask: Some(Box::new(Ask {
                request: NotifyRequest {
                    contact: Some(CONTACT.into()),
                    push: None,
                    ahead: 5,
                },
                client: "127.0.0.1/32".into(),
                per_client: 5,
                join_limit: None,
            })),
        })
        .await
        .unwrap();
    assert!(place.notify);
    let resumed = app.patch_room("drop", json!({"paused": false})).await;
    assert_eq!(resumed.status(), 200);
    room
}

async fn received(receiver: &HealthOrigin, n: usize) -> Vec<Received> {
    eventually(&format!("{n} webhook calls"), PATIENCE, || async {
        let received = receiver.received();
        (received.len() >= n).then_some(received)
    })
    .await
}

async fn outbox(app: &TestApp, room: &RoomId) -> u64 {
    app.handle.store.tick(room).await.unwrap().outbox
}

#[tokio::test]
async fn an_admitted_visitor_who_asked_is_called_back_once_signed_with_the_contact() {
    logs::init();
    let app = node().await;
    let receiver = HealthOrigin::start().await;
    let room = room_with_a_visitor_who_asked(&app, &receiver).await;
    app.step(TICK_MS).await;

    let calls = received(&receiver, 1).await;
    let request = &calls[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/hooks/waitroom");
    request.assert_signed(SECRET);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["type"], "admitted");
    assert_eq!(body["room"], "drop");
    assert_eq!(body["contact"], CONTACT);
    let resume = body["resume_url"].as_str().unwrap();
    assert!(
        resume.starts_with("https://queue.example/rooms/drop/resume?code="),
        "{resume}"
    );
    assert!(!body["id"].as_str().unwrap().is_empty());

    eventually("the event settled", PATIENCE, || async {
        (outbox(&app, &room).await == 0).then_some(())
    })
    .await;
    // Settled: the receiver had its call before the sender heard its
    // answer, and more ticks find nothing to send.
    app.step(TICK_MS).await;
    app.step(TICK_MS).await;
    assert_eq!(receiver.received().len(), 1, "sent once");
    // Item 8: the contact and the resume code are never logged.
    let code = resume.split("code=").nth(1).unwrap();
    let logged = logs::captured();
    assert!(logged.contains("drop"), "the test reads this node's logs");
    assert!(!logged.contains(CONTACT), "the contact was logged");
    assert!(!logged.contains(code), "the resume code was logged");
}

#[tokio::test]
async fn a_failing_receiver_is_retried_with_backoff_under_the_same_id_then_settled() {
    let app = node().await;
    let receiver = HealthOrigin::start().await;
    receiver.set_status(500);
    let room = room_with_a_visitor_who_asked(&app, &receiver).await;
    app.step(TICK_MS).await;
    received(&receiver, 1).await;
    assert!(outbox(&app, &room).await > 0, "not settled while failing");

    // Not before its backoff (1 s).
    app.step(500).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1, "no retry before the backoff");
    app.step(500).await;
    received(&receiver, 2).await;

    // Then 2 s.
    receiver.set_status(200);
    app.step(2_000).await;
    let calls = received(&receiver, 3).await;
    assert_eq!(calls.len(), 3);
    let ids: Vec<String> = calls
        .iter()
        .map(|call| {
            call.assert_signed(SECRET);
            let body: Value = serde_json::from_slice(&call.body).unwrap();
            body["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");

    eventually("the event settled", PATIENCE, || async {
        (outbox(&app, &room).await == 0).then_some(())
    })
    .await;
    app.step(20_000).await;
    assert_eq!(receiver.received().len(), 3, "nothing after delivery");
}
