//! Every page, checked by axe-core in a real headless Chromium (issue 27,
//! item 8): the waiting page (waiting, branded, in Japanese, in the
//! countdown, closed; its "Notify me" among them), a notification's
//! resume link (its button, and a refusal), the
//! sale page (seats and stock), the unknown-room page, the admin login and the admin page with a room and its sale (and a drop's schedule and autotune), a room's report, and the demo
//! target. Each page is checked once its scripts have drawn it (what a
//! visitor meets), against axe's WCAG 2.x A and AA rules and its best
//! practices; any violation fails, with its rule, help and elements.
//!
//! axe-core comes from npm into `tests/a11y/node_modules` (installed by
//! `./scripts/integrations-setup`, which `./scripts/test` runs); without it
//! this test fails and says so. Needs Debian's `chromium` and
//! `chromium-driver`, like tests/browser/browser.rs.

use waitroom_testkit as support;

use std::path::Path;
use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::{Value, json};
use support::TestApp;
use support::browser::{Driver, admin_login};
use waitroom::words::clock::rfc3339;

const PATIENCE: Duration = Duration::from_secs(10);

/// axe-core's script, as npm installed it.
fn axe_source() -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a11y/node_modules/axe-core/axe.min.js");
    std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "{} is missing ({error}): run ./scripts/integrations-setup (./scripts/test does)",
            path.display()
        )
    })
}

/// The violations axe finds on the page as it stands, one line each.
async fn violations(browser: &Client, axe: &str) -> Vec<String> {
    browser
        .execute(axe, vec![])
        .await
        .expect("axe-core loads into the page");
    let found = browser
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
            axe.run(document, {
              runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
              // Experimental in axe, and the one the sale's seat buttons failed.
              rules: { 'label-content-name-mismatch': { enabled: true } },
              resultTypes: ['violations'],
            }).then(
              (r) => done(r.violations.map((v) => v.id + ' (' + v.impact + '): ' + v.help + ' at '
                + v.nodes.map((n) => n.target.join(' ')).join(', '))),
              (e) => done(['axe failed: ' + e]));"#,
            vec![],
        )
        .await
        .expect("axe runs");
    serde_json::from_value(found).expect("a list of violations")
}

/// Polls until `ready` holds (the page's scripts have drawn it).
async fn until(browser: &Client, what: &str, ready: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let holds = browser
            .execute(&format!("return Boolean({ready});"), vec![])
            .await
            .unwrap();
        if holds == Value::Bool(true) {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "timed out waiting for {what}; the page: {}",
                page_state(browser).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a page that never got ready shows: its address, the body's
/// attributes (a sale page's `data-phase`) and its message, if any.
async fn page_state(browser: &Client) -> String {
    let said = browser
        .execute(
            "const m = document.querySelector('.message'); \
             return [location.href, document.body && document.body.getAttribute('data-phase'), \
                     m && m.textContent.trim()].join(' | ');",
            vec![],
        )
        .await;
    format!("{said:?}")
}

/// Opens `url`, waits for `ready`, and adds what axe finds to `found`.
async fn check(
    browser: &Client,
    axe: &str,
    found: &mut Vec<String>,
    (what, url, ready): (&str, String, &str),
) {
    browser.goto(&url).await.unwrap();
    until(browser, what, ready).await;
    for violation in violations(browser, axe).await {
        found.push(format!("{what}: {violation}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axe_finds_no_violation_on_any_page() {
    let axe = axe_source();
    let app = TestApp::spawn().await;
    // First: it drives the clock. A drop halfway through, for the admin
    // page's timeline of its schedule and the chart's marks of autotune.
    support::drop_scene::drop_halfway(&app).await;
    let driver = Driver::start().await;
    let target = app.url("/demo/target");
    app.create_room(
        "line",
        json!({"name": "Spring drop", "paused": true, "target_url": target,
               "notice": "Doors open at noon.\nOne pair per order."}),
    )
    .await;
    for _ in 0..3 {
        app.join_api("line").await;
    }
    app.create_room(
        "branded",
        json!({"name": "Shop", "paused": true, "target_url": target,
               "page": {"headline": "Spring drop", "message": "Doors open at ten.\nBe early.",
                        "accent_color": "#0a7a3b", "background_color": "#101820",
                        "footer": "© Shop"},
               // "Notify me" with its contact field.
               "notify_webhook_url": "https://hooks.example/wr",
               "notify_webhook_secret": "0123456789abcdef0123456789abcdef"}),
    )
    .await;
    app.join_api("branded").await;
    let opens_at = rfc3339(support::START_MS + 3_600_000);
    app.create_room(
        "later",
        json!({"name": "Summer drop", "opens_at": opens_at, "target_url": target}),
    )
    .await;
    app.create_room("shut", json!({"name": "Gone", "target_url": target}))
        .await;
    for (room, sale) in [
        (
            "seats",
            json!({"seats": ["A1", "A2", "A3", "B1", "B2"], "per_user_limit": 2}),
        ),
        ("units", json!({"stock": 40, "per_user_limit": 2})),
    ] {
        app.create_room(
            room,
            json!({"name": "Hall", "tick_ms": 1000, "target_url": target}),
        )
        .await;
        app.put_sale(room, sale).await;
    }
    let seats_pass = app.pass_for("seats").await;
    // A notification's resume link (its code as the node would sign it),
    // and one whose code is not: the page with its button, and the refusal.
    let resume_code = {
        let credentials = waitroom::words::credentials::Credentials::from_secret(
            support::test_settings().secret.as_deref().unwrap(),
        );
        let room = waitroom::words::RoomId::parse("line").unwrap();
        credentials.resume_code(
            &room,
            waitroom::words::VisitorId(1),
            waitroom::words::notify::EventKind::Near,
        )
    };
    let units_pass = app.pass_for("units").await;

    let browser = driver.browser(390, 844, json!({})).await;
    let mut found = Vec::new();
    let waiting = "document.getElementById('position').textContent.trim() === '4'";
    for page in [
        ("the waiting page", app.url("/rooms/line"), waiting),
        (
            "a branded waiting page",
            app.url("/rooms/branded"),
            "document.getElementById('position').textContent.trim() === '2'",
        ),
        (
            "the waiting page in Japanese",
            app.url("/rooms/line?lang=ja"),
            "document.documentElement.lang === 'ja' && /^[0-9]+$/.test(document.getElementById('position').textContent.trim())",
        ),
        (
            "the countdown",
            app.url("/rooms/later"),
            "!document.getElementById('opening').hidden",
        ),
        (
            "the seat map",
            app.url(&format!("/rooms/seats/sale?wr_pass={seats_pass}")),
            "document.querySelector('#seat-map [data-seat=\"A1\"]')",
        ),
        (
            "the stock sale",
            app.url(&format!("/rooms/units/sale?wr_pass={units_pass}")),
            "document.getElementById('sale-heading') && document.getElementById('sale-heading').textContent.trim() !== ''",
        ),
        (
            "a resume link",
            app.url(&format!("/rooms/line/resume?code={resume_code}")),
            "document.getElementById('resume')",
        ),
        (
            "a resume link that is not valid",
            app.url("/rooms/line/resume?code=forged"),
            "document.getElementById('to-room')",
        ),
        (
            "the unknown-room page",
            app.url("/rooms/nowhere"),
            "document.readyState === 'complete'",
        ),
        (
            "the demo target",
            app.url("/demo/target"),
            "document.readyState === 'complete'",
        ),
        (
            "the admin login",
            app.url("/admin"),
            "document.getElementById('token')",
        ),
    ] {
        check(&browser, &axe, &mut found, page).await;
    }

    // A closed room.
    let closed = app
        .admin(reqwest::Method::DELETE, "/api/admin/rooms/shut")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    check(
        &browser,
        &axe,
        &mut found,
        (
            "the closed room",
            app.url("/rooms/shut"),
            "document.readyState === 'complete' && (!document.getElementById('message') || document.getElementById('message').dataset.state !== 'joining')",
        ),
    )
    .await;

    // The admin page, signed in, with every room and the sales' panels.
    admin_login(&browser, &app).await;
    until(
        &browser,
        "the live figures",
        "document.getElementById('live-status').dataset.state === 'live'",
    )
    .await;
    for violation in violations(&browser, &axe).await {
        found.push(format!("the admin page: {violation}"));
    }
    // A room's report (the waiting line's, with its chart) and a closed
    // room's (the sale's rooms have sales).
    for (what, room) in [
        ("a room's report", "line"),
        ("a report with a sale", "units"),
        ("a closed room's report", "shut"),
    ] {
        check(
            &browser,
            &axe,
            &mut found,
            (
                what,
                app.url(&format!("/admin/rooms/{room}/report")),
                "document.querySelector('.report-counts')",
            ),
        )
        .await;
    }
    browser.close().await.unwrap();
    assert!(found.is_empty(), "axe found:\n{}", found.join("\n"));
}
