//! The seeds' bug, over real HTTP: many visitors racing for a capped room.
//! A check and an act in separate steps lets more than the cap in; here every
//! join is one atomic step, so exactly the cap gets through.

use waitroom_testkit as support;

use support::FetchJson;

use std::collections::HashSet;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use support::TestApp;

const VISITORS: usize = 2_000;
const CAP: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_thousand_concurrent_joins_admit_exactly_the_cap() {
    rlimit::increase_nofile_limit(u64::MAX).unwrap();
    let app = TestApp::spawn().await;
    app.create_room(
        "rush",
        json!({"admit_per_tick": 1000, "max_active": CAP, "abandon_after_s": 86_400}),
    )
    .await;

    let joins = (0..VISITORS).map(|_| async {
        let response = app
            .http
            .post(app.url("/api/rooms/rush/join"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.json::<Value>().await.unwrap()
    });
    let statuses = join_all(joins).await;

    let admitted = statuses.iter().filter(|s| s["state"] == "admitted").count() as u64;
    assert_eq!(admitted, CAP, "exactly the cap passes through, never more");
    let tickets: HashSet<&str> = statuses
        .iter()
        .map(|s| s["ticket"].as_str().unwrap())
        .collect();
    assert_eq!(tickets.len(), VISITORS, "every visitor is someone else");
    let mut positions: Vec<u64> = statuses
        .iter()
        .filter_map(|s| s["position"].as_u64())
        .collect();
    positions.sort_unstable();
    let expected: Vec<u64> = (1..=(VISITORS as u64 - CAP)).collect();
    assert_eq!(positions, expected, "one place each, no gaps, no doubles");

    // Everyone waiting submits twice more at once: still one place each.
    let waiting: Vec<&Value> = statuses
        .iter()
        .filter(|s| s["state"] == "waiting")
        .collect();
    let app = &app;
    let double_submits = waiting
        .iter()
        .flat_map(|s| [*s, *s])
        .map(|status| async move {
            let again: Value = app
                .http
                .post(app.url("/api/rooms/rush/join"))
                .bearer_auth(status["ticket"].as_str().unwrap())
                .fetch_json()
                .await;
            assert_eq!(
                again["position"], status["position"],
                "a double submit keeps the place"
            );
        });
    join_all(double_submits).await;

    let stats = room_stats(app).await;
    assert_eq!(
        (stats["active"].as_u64(), stats["waiting"].as_u64()),
        (Some(CAP), Some(VISITORS as u64 - CAP))
    );
    // Ticks have tokens to spare but the cap is reached.
    for _ in 0..3 {
        app.step(5_000).await;
    }
    assert_eq!(room_stats(app).await["active"], CAP);
    // When the passes expire, the next tick refills exactly the cap.
    app.step(600_000).await;
    let stats = room_stats(app).await;
    assert_eq!(stats["active"], CAP);
    assert_eq!(stats["admitted_total"], 2 * CAP);
    assert_eq!(stats["waiting"], VISITORS as u64 - 2 * CAP);
}

async fn room_stats(app: &TestApp) -> Value {
    let room: Value = app
        .admin(Method::GET, "/api/admin/rooms/rush")
        .fetch_json()
        .await;
    room["stats"].clone()
}
