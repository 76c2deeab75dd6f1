//! Autotune against a real origin on loopback whose latency and answers
//! the test controls (`HealthOrigin`): the node whose tick ran takes the
//! health sample through the guarded client, and the next ticks decide
//! from it. A slow origin cuts the rate within 3 ticks, a recovered one
//! raises it within 5; 5xx, a refused connection and a timeout cut too;
//! `dry_run` never changes the rate; the rate never leaves its bounds; and
//! a node not allowed to call loopback records only failures.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use waitroom_testkit::health_origin::HealthOrigin;
use waitroom_testkit::{FetchJson, TestApp, test_settings};

const TICK_MS: u64 = 1_000;

/// A node that may call loopback (where the test's origin is).
async fn node() -> TestApp {
    let mut settings = test_settings();
    settings.outbound_allow_networks = vec!["127.0.0.0/8".parse().unwrap()];
    let clock = waitroom::words::clock::ManualClock::new(waitroom_testkit::START_MS);
    TestApp::spawn_with(
        settings,
        waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone())),
        clock,
    )
    .await
}

/// A room of 10 a tick following `origin` (target 100 ms, so 200 ms is a
/// timeout), with a line of 300.
async fn room(app: &TestApp, origin: &HealthOrigin, tune: Value) -> &'static str {
    let mut autotune = json!({"health_url": origin.url(), "latency_target_ms": 100});
    autotune
        .as_object_mut()
        .unwrap()
        .extend(tune.as_object().cloned().unwrap());
    app.create_room(
        "drop",
        json!({"admit_per_tick": 10, "tick_ms": TICK_MS, "abandon_after_s": 86400, "autotune": autotune}),
    )
    .await;
    for _ in 0..300 {
        app.join_api("drop").await;
    }
    "drop"
}

async fn stats(app: &TestApp) -> Value {
    let room: Value = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    room["stats"].clone()
}

async fn rate(app: &TestApp) -> u64 {
    stats(app).await["admit_per_tick_effective"]
        .as_u64()
        .unwrap()
}

/// Runs ticks until the rate moves from `from`, at most `ticks`: how many it took.
async fn ticks_until_it_moves(app: &TestApp, from: u64, ticks: u32) -> Option<u32> {
    for n in 1..=ticks {
        app.step(TICK_MS).await;
        if rate(app).await != from {
            return Some(n);
        }
    }
    None
}

#[tokio::test]
async fn a_slow_origin_cuts_within_3_ticks_and_a_recovered_one_raises_within_5() {
    let app = node().await;
    let origin = HealthOrigin::start().await;
    room(&app, &origin, json!({"min_per_tick": 2})).await;
    app.step(TICK_MS).await;
    assert_eq!(rate(&app).await, 10);
    origin.set_delay(Duration::from_millis(150));
    let took = ticks_until_it_moves(&app, 10, 3).await;
    assert!(took.is_some(), "cut within 3 ticks");
    assert_eq!(rate(&app).await, 7);
    let autotune = stats(&app).await["autotune"].clone();
    assert_eq!(autotune["state"], "cut");
    assert!(
        autotune["reason"]
            .as_str()
            .unwrap()
            .ends_with("ms > 100 ms"),
        "{autotune}"
    );
    origin.set_delay(Duration::ZERO);
    // A slow sample may still be on its way: the rate may fall once more.
    let mut low = rate(&app).await;
    let mut raised = None;
    for n in 1..=6 {
        app.step(TICK_MS).await;
        let now = rate(&app).await;
        if now > low {
            raised = Some(n);
            break;
        }
        low = now;
    }
    let raised = raised.expect("raised once the origin recovered");
    assert!(raised <= 5, "raised within 5 ticks, took {raised}");
    let changes = stats(&app).await["autotune"]["changes"].clone();
    let reason = changes.as_array().unwrap().last().unwrap()["reason"].clone();
    assert!(
        reason
            .as_str()
            .unwrap()
            .starts_with("3 healthy samples, p95 "),
        "{reason}"
    );
}

#[tokio::test]
async fn errors_refusals_and_timeouts_cut_the_rate() {
    for (case, set_up) in [("503", 0), ("a refused connection", 1), ("a timeout", 2)] {
        let app = node().await;
        let origin = HealthOrigin::start().await;
        room(&app, &origin, json!({})).await;
        app.step(TICK_MS).await;
        match set_up {
            0 => origin.set_status(503),
            1 => origin.refuse().await,
            _ => origin.set_delay(Duration::from_secs(2)),
        }
        let took = ticks_until_it_moves(&app, 10, 3).await;
        assert!(took.is_some(), "{case}: cut within 3 ticks");
        let reason = stats(&app).await["autotune"]["reason"].clone();
        let named = ["503", "failed", "timeout"][set_up];
        assert!(reason.as_str().unwrap().contains(named), "{case}: {reason}");
    }
}

#[tokio::test]
async fn a_dry_run_never_changes_the_rate_and_bounds_hold() {
    let app = node().await;
    let origin = HealthOrigin::start().await;
    room(&app, &origin, json!({"dry_run": true})).await;
    origin.set_status(500);
    for _ in 0..6 {
        app.step(TICK_MS).await;
        assert_eq!(rate(&app).await, 10, "the rate stays");
    }
    let autotune = stats(&app).await["autotune"].clone();
    assert!(
        autotune["reason"].as_str().unwrap().contains("(500)"),
        "it says what it would do: {autotune}"
    );
    assert_eq!(
        autotune["changes"][0]["to"], 7,
        "and what it would have set"
    );

    let app = node().await;
    let origin = HealthOrigin::start().await;
    room(
        &app,
        &origin,
        json!({"min_per_tick": 6, "max_per_tick": 12}),
    )
    .await;
    origin.set_status(500);
    for _ in 0..6 {
        app.step(TICK_MS).await;
        assert!(rate(&app).await >= 6, "never below min_per_tick");
    }
    origin.set_status(200);
    for _ in 0..40 {
        app.step(TICK_MS).await;
        assert!(rate(&app).await <= 12, "never above max_per_tick");
    }
    assert_eq!(rate(&app).await, 12);
}

#[tokio::test]
async fn a_node_not_allowed_loopback_records_only_failures_and_never_calls_it() {
    let app = TestApp::spawn().await;
    let origin = HealthOrigin::start().await;
    room(&app, &origin, json!({})).await;
    for _ in 0..3 {
        app.step(TICK_MS).await;
    }
    assert!(
        origin.requests().is_empty(),
        "a private address is not called"
    );
    let cut = stats(&app).await["autotune"]["changes"][0]["reason"].clone();
    assert_eq!(cut, "errors 100% > 5% (failed)");
}
