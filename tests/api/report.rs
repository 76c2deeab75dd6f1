//! After the drop, over HTTP: the room's report as JSON and CSV, the list
//! of reports, what a wrong query gets, and the waits in `/metrics`.

use support::error_of;
use waitroom_testkit as support;

use reqwest::Method;
use serde_json::{Value, json};
use support::{FetchJson, TestApp};

async fn report(app: &TestApp, query: &str) -> reqwest::Response {
    report_of(app, "drop", query).await
}

async fn report_of(app: &TestApp, room: &str, query: &str) -> reqwest::Response {
    app.admin(
        Method::GET,
        &format!("/api/admin/rooms/{room}/report{query}"),
    )
    .send()
    .await
    .unwrap()
}

/// Four wait in a paused room; two ticks admit them, two after 5 s and two
/// after 10 s.
async fn drop_of_four(app: &TestApp, room: &str) {
    app.create_room(room, json!({"admit_per_tick": 2, "paused": true}))
        .await;
    app.put_sale(room, json!({"stock": 3, "per_user_limit": 1}))
        .await;
    for _ in 0..4 {
        app.join_api(room).await;
    }
    assert_eq!(
        app.patch_room(room, json!({"paused": false}))
            .await
            .status(),
        200
    );
    app.step(5_000).await;
    app.step(5_000).await;
}

#[tokio::test]
async fn the_report_reads_as_json_and_its_minutes_as_csv() {
    let app = TestApp::spawn().await;
    drop_of_four(&app, "drop").await;
    let response = report(&app, "").await;
    assert_eq!(response.status(), 200);
    let r: Value = response.json().await.unwrap();
    assert_eq!(r["room"], "drop");
    assert_eq!(
        (r["arrivals"].as_u64(), r["admitted"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(r["passed_through"], 0);
    assert_eq!(r["turned_away"], json!({}));
    assert_eq!(r["wait_seconds"]["max"], 10.0);
    assert_eq!(r["wait_seconds"]["p50"], 5.0);
    assert_eq!(
        r["wait_seconds"]["buckets"][2],
        json!({"le": "5", "count": 2})
    );
    assert_eq!(
        r["wait_seconds"]["buckets"][13],
        json!({"le": "+Inf", "count": 4})
    );
    assert_eq!(r["peak_waiting"], 4);
    assert_eq!(r["closed_at"], Value::Null);
    assert_eq!(r["draw"], Value::Null);
    assert_eq!(
        r["sale"],
        json!({"kind": "stock", "orders": 0, "sold": 0, "left": 3})
    );
    assert_eq!(r["minutes"].as_array().unwrap().len(), 1);

    let csv = report(&app, "?format=csv").await;
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    assert!(
        csv.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"drop-"),
        "a download"
    );
    let body = csv.text().await.unwrap();
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(
        lines[0],
        "at,span_s,arrivals,admitted,waiting,active,wait_p50,wait_p90"
    );
    assert_eq!(lines.len(), 2, "{body}");
    assert!(lines[1].contains(",60,4,4,0,4,"), "{}", lines[1]);

    let listed = app
        .admin(Method::GET, "/api/admin/reports")
        .fetch_json()
        .await;
    assert_eq!(listed["reports"][0]["room"], "drop");
    assert_eq!(listed["reports"][0]["created_at"], r["created_at"]);
    assert_eq!(listed["reports"][0]["closed_at"], Value::Null);

    // Closed: the same counts, kept, and its time of making reads it.
    let closed = app
        .admin(Method::DELETE, "/api/admin/rooms/drop")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    let created_at = r["created_at"].as_str().unwrap().to_owned();
    let kept = app
        .admin(
            Method::GET,
            &format!("/api/admin/rooms/drop/report?created_at={created_at}"),
        )
        .fetch_json()
        .await;
    assert_eq!(kept["admitted"], 4);
    assert!(kept["closed_at"].is_string());
    assert_eq!(kept["sale"], r["sale"], "the sale as it was at the close");
}

#[tokio::test]
async fn a_wrong_report_query_gets_a_clear_error_and_changes_nothing() {
    let app = TestApp::spawn().await;
    drop_of_four(&app, "drop").await;
    for (query, status, code) in [
        ("?format=xml", 400, "invalid_query"),
        ("?created_at=yesterday", 400, "invalid_query"),
        ("?since=2026-01-01T00:00:00Z", 400, "invalid_query"),
        ("?created_at=2020-01-01T00:00:00Z", 404, "report_not_found"),
    ] {
        assert_eq!(
            error_of(report(&app, query).await).await,
            (status, code.into()),
            "{query}"
        );
    }
    let unknown = app
        .admin(Method::GET, "/api/admin/rooms/nowhere/report")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(unknown).await, (404, "room_not_found".into()));
    for path in ["/api/admin/rooms/drop/report", "/api/admin/reports"] {
        let anonymous = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(error_of(anonymous).await.0, 401, "{path}");
    }
    let r: Value = report(&app, "").await.json().await.unwrap();
    assert_eq!(r["admitted"], 4, "nothing was lost");
}

#[tokio::test]
async fn the_metrics_count_each_admissions_wait_once() {
    let app = TestApp::spawn().await;
    // The recorder is the test binary's: a room of this test's own.
    drop_of_four(&app, "waits-metered").await;
    let metrics = app.get_text("/metrics").await;
    let line = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        line("waitroom_wait_seconds_bucket{room=\"waits-metered\",le=\"5\"}"),
        "2"
    );
    assert_eq!(
        line("waitroom_wait_seconds_bucket{room=\"waits-metered\",le=\"10\"}"),
        "4"
    );
    assert_eq!(
        line("waitroom_wait_seconds_count{room=\"waits-metered\"}"),
        "4"
    );
    assert_eq!(
        line("waitroom_wait_seconds_sum{room=\"waits-metered\"}"),
        "30"
    );
}

#[tokio::test]
async fn with_the_store_down_the_report_is_a_503_and_nothing_is_lost() {
    use std::sync::Arc;

    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let (store, stores) = support::unreachable::Unreachable::memory(Arc::new(clock.clone()));
    let app = TestApp::spawn_on(stores, clock).await;
    drop_of_four(&app, "drop").await;
    store.set_down(true);
    for path in ["/api/admin/rooms/drop/report", "/api/admin/reports"] {
        let down = app.admin(Method::GET, path).send().await.unwrap();
        assert_eq!(
            error_of(down).await,
            (503, "store_unavailable".into()),
            "{path}"
        );
    }
    store.set_down(false);
    let r: Value = report(&app, "").await.json().await.unwrap();
    assert_eq!(
        (r["arrivals"].as_u64(), r["admitted"].as_u64()),
        (Some(4), Some(4))
    );
}
