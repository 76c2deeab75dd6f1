//! A drop halfway through, for the tests of the admin page (its HTML, and
//! in a browser): a room whose schedule has one entry applied, one skipped
//! with its error, the next (a notice with markup in it, and a user key)
//! and one pending; and whose autotune has cut the rate. Its origin is on
//! loopback, which a node with the test settings may not call, so every
//! health sample counts as `failed` (tests/api/autotune.rs drives a real
//! origin; here only the page's view of the changes matters).

use serde_json::{Value, json};
use waitroom::words::clock::rfc3339;

use crate::{START_MS, TestApp};

/// The room's id.
pub const ROOM: &str = "drop";

/// The notice the next entry sets: markup the page must show as text.
pub const NOTICE: &str = "<script>alert('drop')</script> Last sizes & colours";

/// The user key the next entry sets, which the page never shows.
pub const USER_KEY: &str = "k3y-that-must-never-show-0123456789abcdef";

/// How far the scene goes: six ticks, five minutes apart (the room ticks
/// every second, but a tick runs once per pass), so the chart's marks of
/// autotune's changes stand apart.
pub const HALFWAY_S: u64 = 6 * STEP_S;
const STEP_S: u64 = 300;

/// When the next entry falls due, in seconds from START_MS; and the last.
/// Within an operator session's idle limit of the scene's end, so a
/// browser test can go there.
pub const NEXT_S: u64 = HALFWAY_S + 600;
pub const LAST_S: u64 = HALFWAY_S + 1200;

/// The room as described, at START_MS + HALFWAY_S: the operator API's
/// view of it (`GET /api/admin/rooms/drop`).
pub async fn drop_halfway(app: &TestApp) -> Value {
    let at = |s: u64| rfc3339(START_MS + s * 1000);
    app.create_room(
        ROOM,
        json!({
            "name": "The December drop",
            "admit_per_tick": 10, "tick_ms": 1000, "max_active": 5,
            "pass_ttl_s": 600, "abandon_after_s": 86400,
            "autotune": {"health_url": "http://127.0.0.1:9/healthz",
                         "latency_target_ms": 100, "min_per_tick": 5},
            "schedule": [
                {"at": at(1), "set": {"admit_per_tick": 40, "notice": "The sale is open"}},
                {"at": at(2), "set": {"session_idle_s": 300}},
                {"at": at(NEXT_S), "set": {"notice": NOTICE, "user_key": USER_KEY}},
                {"at": at(LAST_S), "set": {"queue_method": "reject", "paused": true}},
            ],
        }),
    )
    .await;
    for _ in 0..100 {
        app.join_api(ROOM).await;
    }
    // Since the schedule was set, the hard limit fell below the idle limit
    // the second entry sets: it will no longer apply.
    let lowered = app
        .patch_room(ROOM, json!({"pass_ttl_s": 120}))
        .await
        .status();
    assert_eq!(lowered, 200, "pass_ttl_s lowered");
    for _ in 0..HALFWAY_S / STEP_S {
        app.step(STEP_S * 1000).await;
    }
    let room: Value = app
        .admin(reqwest::Method::GET, &format!("/api/admin/rooms/{ROOM}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schedule = &room["schedule"];
    assert!(schedule[0]["applied_at"].is_string(), "{schedule}");
    assert!(schedule[1]["error"].is_string(), "{schedule}");
    assert!(
        schedule[2]["applied_at"].is_null() && schedule[3]["applied_at"].is_null(),
        "{schedule}"
    );
    let changes = &room["stats"]["autotune"]["changes"];
    assert!(
        changes.as_array().is_some_and(|c| !c.is_empty()),
        "autotune cut the rate: {}",
        room["stats"]
    );
    room
}
