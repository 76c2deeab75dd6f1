//! A drop on the admin page, as the server renders it (no script needed):
//! the schedule's timeline, each entry saying what it changes, when, and
//! where it stands (applied at, skipped with its error, next, pending),
//! held while an operator's pause holds it; autotune's effective rate
//! next to `admit_per_tick`, its last decision and its changes (which the
//! chart marks, tests/browser). What an entry sets is text: markup in a
//! notice is escaped, a user key shown only as set.

use reqwest::Method;
use serde_json::{Value, json};
use waitroom_testkit::drop_scene::{NEXT_S, NOTICE, ROOM, USER_KEY, drop_halfway};
use waitroom_testkit::{FetchJson, START_MS, TestApp};

use crate::api::{log_in, no_redirects};

/// The admin page as a browser asking for `language` gets it.
async fn admin_page(app: &TestApp, language: &str) -> String {
    let client = no_redirects();
    let session = log_in(app, &client).await;
    client
        .get(app.url("/admin"))
        .header("cookie", format!("wr_admin={session}"))
        .header("accept-language", language)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The timeline's entry `i`, from its `<li>` to its `</li>`.
fn entry(html: &str, i: usize) -> &str {
    let start = html
        .find(&format!(r#"data-entry="{i}""#))
        .unwrap_or_else(|| panic!("no entry {i} in the timeline"));
    let end = start + html[start..].find("</li>").unwrap();
    &html[start..end]
}

/// Text as askama writes it into HTML.
fn escaped(text: &str) -> String {
    text.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

#[tokio::test]
async fn the_admin_page_shows_the_schedule_and_autotunes_changes() {
    let app = TestApp::spawn().await;
    let room = drop_halfway(&app).await;
    let html = admin_page(&app, "en").await;

    let applied = entry(&html, 0);
    assert!(applied.contains(r#"data-state="applied""#), "{applied}");
    assert!(
        applied
            .contains("<code>admit_per_tick</code> → 40, <code>notice</code> → “The sale is open”"),
        "what it changed, in words: {applied}"
    );
    let applied_at = room["schedule"][0]["applied_at"].as_str().unwrap();
    assert!(
        applied.contains(&format!("applied at {applied_at}")),
        "{applied}"
    );
    assert!(applied.contains(r#"<time datetime="2026-01-01T00:00:01Z">"#));

    let skipped = entry(&html, 1);
    assert!(skipped.contains(r#"data-state="skipped""#), "{skipped}");
    let error = room["schedule"][1]["error"].as_str().unwrap();
    assert!(error.contains("pass_ttl_s"), "{error}");
    assert!(
        skipped.contains(&format!("skipped: {}", escaped(error))),
        "{skipped}"
    );

    let next = entry(&html, 2);
    assert_eq!(room["stats"]["next_change_at"], "2026-01-01T00:40:00Z");
    assert!(
        next.contains(r#"data-state="next" aria-current="step""#),
        "{next}"
    );
    assert!(
        next.contains(&format!("<code>notice</code> → “{}”", escaped(NOTICE))),
        "{next}"
    );
    assert!(next.contains("<code>user_key</code> → set"), "{next}");
    let pending = entry(&html, 3);
    assert!(pending.contains(r#"data-state="pending""#), "{pending}");
    assert!(
        pending.contains("<code>paused</code> → paused, <code>queue_method</code> → "),
        "switches and choices as the form says them: {pending}"
    );
    assert!(!html.contains("<script>alert"), "the notice is text");
    assert!(!html.contains(USER_KEY), "a user key never shows");
    assert!(
        html.contains(r#"id="schedule-drop-held" hidden>"#),
        "nothing is held"
    );

    let stats = &room["stats"];
    let effective = stats["admit_per_tick_effective"].as_u64().unwrap();
    assert!(effective < 40, "autotune cut the rate: {stats}");
    assert!(html.contains(&format!(
        r#"data-autotune="effective">{effective}</span> <span class="hint" data-room="drop" data-autotune="configured" data-value="40">(admit_per_tick: 40)</span>"#
    )));
    let reason = stats["autotune"]["reason"].as_str().unwrap();
    assert!(html.contains(&format!(
        r#"data-autotune="state" data-value="{state}">{state}</span> <span class="reason" data-room="drop" data-autotune="reason">{reason}</span>"#,
        state = stats["autotune"]["state"].as_str().unwrap(),
        reason = escaped(reason),
    )));
    for change in stats["autotune"]["changes"].as_array().unwrap() {
        let mark = format!(
            r#"<li data-at="{}" data-from="{}" data-to="{}">"#,
            change["at"].as_str().unwrap(),
            change["from"],
            change["to"]
        );
        assert!(html.contains(&mark), "{mark} in the list of changes");
    }
    assert!(
        html.contains(r#"class="key key-autotune""#),
        "the chart's key"
    );
}

/// An operator's pause holds the schedule: the page says so once an entry
/// falls due, and the entry applies when the room is unpaused.
#[tokio::test]
async fn an_operators_pause_holds_the_schedule_and_the_page_says_so() {
    let app = TestApp::spawn().await;
    drop_halfway(&app).await;
    let paused = app.patch_room(ROOM, json!({"paused": true})).await;
    assert_eq!(paused.status(), 200);
    app.clock.set_ms(START_MS + NEXT_S * 1000 + 1);
    app.promote().await;
    let html = admin_page(&app, "en").await;
    assert!(
        html.contains(r#"id="schedule-drop-held">The schedule is held"#),
        "the pause holds it"
    );
    assert!(entry(&html, 2).contains(r#"data-state="next""#));
    let korean = admin_page(&app, "ko").await;
    assert!(korean.contains(r#"id="schedule-drop-held">일정이 보류되었습니다"#));
    assert!(korean.contains("건너뜀: "), "skipped, in Korean");

    let unpaused = app.patch_room(ROOM, json!({"paused": false})).await;
    assert_eq!(unpaused.status(), 200);
    let room: Value = app
        .admin(Method::GET, &format!("/api/admin/rooms/{ROOM}"))
        .fetch_json()
        .await;
    assert!(room["schedule"][2]["applied_at"].is_string(), "{room}");
    let html = admin_page(&app, "en").await;
    assert!(entry(&html, 2).contains(r#"data-state="applied""#));
    assert!(entry(&html, 3).contains(r#"data-state="next""#));
    assert!(html.contains(r#"id="schedule-drop-held" hidden>"#));
}
