//! A drop's schedule through the API and the rooms file ("Running a
//! drop"): the chapter's own rooms file makes a room whose phases apply at
//! their times; a schedule a PATCH would refuse is refused naming its
//! entry; `?at=` previews the config; a bad preview time is a 400.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;
use waitroom_testkit::docs::doc_block;
use waitroom_testkit::{FetchJson, START_MS, TestApp, error_of, test_settings};

/// 2026-12-05T10:00:00Z, the presale in the chapter's file.
const PRESALE_MS: u64 = 1_796_464_800_000;

async fn room(app: &TestApp, query: &str) -> Value {
    app.admin(
        Method::GET,
        &format!("/api/admin/rooms/sneaker-drop{query}"),
    )
    .fetch_json()
    .await
}

#[tokio::test]
async fn the_chapters_drop_runs_its_phases_at_their_times() {
    let dir = std::env::temp_dir().join(format!("waitroom-drop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rooms.toml");
    std::fs::write(
        &file,
        doc_block(
            "docs/src/running-a-drop.md",
            "## A drop in the rooms file",
            "toml",
        ),
    )
    .unwrap();
    let mut settings = test_settings();
    settings.rooms = Some(file);
    let clock = ManualClock::new(START_MS);
    let app = TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await;

    let before = room(&app, "").await;
    assert_eq!(before["schedule"].as_array().unwrap().len(), 3);
    assert_eq!(before["stats"]["next_change_at"], "2026-12-05T10:00:00Z");
    let preview = room(&app, "?at=2026-12-05T11:00:00Z").await;
    assert_eq!(preview["admit_per_tick"], 40);
    assert_eq!(preview["notice"], "The sale is open to everyone.");
    assert_eq!(before["admit_per_tick"], 20, "the preview changes nothing");

    app.clock.set_ms(PRESALE_MS + 1);
    let join = app
        .http
        .post(app.url("/api/rooms/sneaker-drop/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(join.status(), 403, "the presale is for code holders");
    let body: Value = join.json().await.unwrap();
    assert_eq!(body["error"]["code"], "code_required");
    let presale = room(&app, "").await;
    assert_eq!(
        presale["schedule"][0]["applied_at"],
        "2026-12-05T10:00:00.001Z"
    );
    assert_eq!(presale["stats"]["next_change_at"], "2026-12-05T11:00:00Z");

    app.clock.set_ms(PRESALE_MS + 3_600_000);
    let join = app
        .http
        .post(app.url("/api/rooms/sneaker-drop/join"))
        .send()
        .await
        .unwrap();
    assert!(join.status().is_success(), "{}", join.status());
    let open = room(&app, "").await;
    assert_eq!(open["admit_per_tick"], 40);
    assert_eq!(open["stats"]["admit_per_tick_effective"], 40);
    assert_eq!(open["autotune"]["latency_target_ms"], 800);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_schedule_a_patch_would_refuse_is_refused_naming_its_entry() {
    let app = TestApp::spawn().await;
    app.create_room("r", json!({})).await;
    let refused = app
        .admin(Method::PATCH, "/api/admin/rooms/r")
        .json(&json!({"schedule": [
            {"at": "2026-06-01T10:00:00Z", "set": {"notice": "Soon"}},
            {"at": "2026-06-01T11:00:00Z", "set": {"admit_per_tick": 0}},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_config");
    assert!(
        body.to_string().contains("schedule[1]"),
        "the entry is named: {body}"
    );
    let bad_time = app
        .admin(Method::GET, "/api/admin/rooms/r?at=tomorrow")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(bad_time).await, (400, "invalid_query".into()));
    let unchanged: Value = app
        .admin(Method::GET, "/api/admin/rooms/r")
        .fetch_json()
        .await;
    assert_eq!(unchanged["schedule"], json!([]), "nothing was set");
}
