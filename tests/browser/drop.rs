//! A drop on the admin page in a real browser: the schedule's timeline
//! (applied, skipped with its error, next, pending) follows the room live,
//! an operator's pause is said to hold it, and the chart marks each of
//! autotune's changes at its time with the change in words as its title;
//! markup in an entry stays text. With
//! `WAITROOM_SCREENSHOT_DIR=docs/src/images` this makes the book's
//! `admin-drop.png`.

use waitroom_testkit as support;

use std::path::Path;
use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use support::browser::{Driver, admin_login};
use support::drop_scene::{LAST_S, NEXT_S, NOTICE, ROOM, USER_KEY, drop_halfway};
use support::{START_MS, TestApp, eventually};

const PATIENCE: Duration = Duration::from_secs(30);

/// What `script` returns on the page.
async fn run(browser: &Client, script: &str) -> Value {
    browser.execute(script, vec![]).await.unwrap()
}

/// The timeline's entries' states, in order.
async fn states(browser: &Client) -> Value {
    run(
        browser,
        "return Array.from(document.querySelectorAll('#schedule-drop-entries li'))\
         .map((li) => li.getAttribute('data-state'));",
    )
    .await
}

/// Waits until the page has its live figures.
async fn until_live(browser: &Client) {
    eventually("the live figures", PATIENCE, || async {
        let state = run(
            browser,
            "return document.getElementById('live-status').dataset.state;",
        )
        .await;
        (state == "live").then_some(())
    })
    .await;
}

/// Waits until the timeline's entries stand as `expected`.
async fn until_states(browser: &Client, expected: Value) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let now = states(browser).await;
        if now == expected {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the timeline stands at {now}, not {expected}; the page says: {}",
            run(
                browser,
                "return [document.getElementById('live-status').textContent, \
                 document.getElementById('schedule-drop-replaced').hidden];"
            )
            .await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_follows_the_schedule_and_marks_autotunes_changes() {
    let app = TestApp::spawn().await;
    let room = drop_halfway(&app).await;
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 1000, json!({})).await;
    admin_login(&browser, &app).await;
    until_live(&browser).await;
    until_states(&browser, json!(["applied", "skipped", "next", "pending"])).await;

    // A mark for each change, at its time, with the change as its title.
    let changes = room["stats"]["autotune"]["changes"].as_array().unwrap();
    let marks = eventually("the marks", PATIENCE, || async {
        let marks = run(
            &browser,
            "return Array.from(document.querySelectorAll('#chart-drop g.autotune-mark'))\
             .map((g) => [g.getAttribute('data-at'), Number(g.getAttribute('data-from')), \
                          Number(g.getAttribute('data-to')), g.querySelector('title').textContent]);",
        )
        .await;
        (marks.as_array().map(Vec::len) == Some(changes.len())).then_some(marks)
    })
    .await;
    for (mark, change) in marks.as_array().unwrap().iter().zip(changes) {
        let said = format!(
            "{}: {} → {}, {}",
            change["at"].as_str().unwrap(),
            change["from"],
            change["to"],
            change["reason"].as_str().unwrap()
        );
        assert_eq!(
            mark,
            &json!([change["at"], change["from"], change["to"], said])
        );
    }
    let inside = run(
        &browser,
        "return Array.from(document.querySelectorAll('#chart-drop g.autotune-mark')).map((g) => {\
           const x = g.transform.baseVal.consolidate().matrix.e; return x >= 52 && x <= 680; });",
    )
    .await;
    assert!(
        inside.as_array().unwrap().iter().all(|v| v == true),
        "the marks are on the chart, before now: {inside}"
    );

    // The notice is text: shown as written, never run.
    let shown = run(
        &browser,
        "const e = document.querySelector('#schedule-drop-entries li[data-entry=\"2\"] .entry-changes');\
         return [e.textContent, e.querySelectorAll('script').length];",
    )
    .await;
    assert_eq!(
        shown,
        json!([format!("notice → “{NOTICE}”, user_key → set"), 0])
    );
    let source = browser.source().await.unwrap();
    assert!(!source.contains(USER_KEY), "a user key never shows");
    browser
        .execute(
            "document.getElementById('chart-drop').scrollIntoView({block: 'start'})",
            vec![],
        )
        .await
        .unwrap();
    if let Some(dir) = std::env::var_os("WAITROOM_SCREENSHOT_DIR") {
        let png = browser.screenshot().await.expect("a screenshot");
        std::fs::write(Path::new(&dir).join("admin-drop.png"), png).unwrap();
    }

    // The next entry applies: the page follows.
    app.clock.set_ms(START_MS + NEXT_S * 1000 + 1);
    app.promote().await;
    until_states(&browser, json!(["applied", "skipped", "applied", "next"])).await;
    let current = run(
        &browser,
        "return Array.from(document.querySelectorAll('#schedule-drop-entries li[aria-current]'))\
         .map((li) => li.getAttribute('data-entry'));",
    )
    .await;
    assert_eq!(current, json!(["3"]), "only the next entry is current");
    let held = "return document.getElementById('schedule-drop-held').hidden;";
    assert_eq!(run(&browser, held).await, json!(true));

    // An operator's pause holds the last entry once it is due. The page
    // times entries by the node's clock as it loaded, and this one jumped
    // ten minutes at once: load it again.
    let paused = app.patch_room(ROOM, json!({"paused": true})).await;
    assert_eq!(paused.status(), 200);
    app.clock.set_ms(START_MS + LAST_S * 1000 + 1);
    app.promote().await;
    browser.refresh().await.unwrap();
    eventually("the schedule said to be held", PATIENCE, || async {
        (run(&browser, held).await == json!(false)).then_some(())
    })
    .await;
    until_live(&browser).await;
    assert_eq!(run(&browser, held).await, json!(false), "still held");
    assert_eq!(
        states(&browser).await,
        json!(["applied", "skipped", "applied", "next"])
    );
    let note = browser
        .find(Locator::Id("schedule-drop-held"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(note.starts_with("The schedule is held"), "{note}");
    browser.close().await.unwrap();
}
