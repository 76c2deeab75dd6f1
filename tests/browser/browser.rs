//! The pages in a real browser: headless Chromium driven over WebDriver
//! (chromedriver), against the app on port 0 with a driven clock.
//!
//! Needs Debian's `chromium` and `chromium-driver` packages (or the paths in
//! `WAITROOM_CHROMIUM` / `WAITROOM_CHROMEDRIVER`); without them these tests
//! fail, they never skip. Set `WAITROOM_SCREENSHOT_DIR` to keep screenshots
//! of the pages they visit.

use waitroom_testkit as support;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use support::browser::{Driver, admin_login};
use support::{FetchJson, TestApp, eventually};
use waitroom::words::clock::rfc3339;
use waitroom::words::draw::{DrawSeed, EntryId};

/// How long the browser gets for something that should happen promptly.
const BROWSER_PATIENCE: Duration = Duration::from_secs(30);

/// Waits until the page says its WebSocket is live.
async fn wait_until_live(browser: &Client, what: &str) {
    eventually(what, BROWSER_PATIENCE, || async {
        (attr_of(browser, "#connection", "data-state")
            .await
            .as_deref()
            == Some("live"))
        .then_some(())
    })
    .await;
}

/// Text content of the element with this id (as written, before CSS
/// transforms), or `None` if it is not on the page.
/// Finds an element and clicks it; either failing fails the test.
async fn click(client: &Client, locator: Locator<'_>) {
    client
        .find(locator)
        .await
        .unwrap_or_else(|error| panic!("no element {locator:?}: {error}"))
        .click()
        .await
        .unwrap_or_else(|error| panic!("could not click {locator:?}: {error}"));
}

async fn text_of(client: &Client, id: &str) -> Option<String> {
    let element = client.find(Locator::Id(id)).await.ok()?;
    let text = element.prop("textContent").await.ok().flatten()?;
    Some(text.trim().to_string())
}

async fn attr_of(client: &Client, css: &str, attr: &str) -> Option<String> {
    let element = client.find(Locator::Css(css)).await.ok()?;
    element.attr(attr).await.ok().flatten()
}

async fn position(client: &Client) -> Option<u64> {
    text_of(client, "position").await?.parse().ok()
}

async fn path_of(client: &Client) -> String {
    client
        .current_url()
        .await
        .map(|u| u.path().to_string())
        .unwrap_or_default()
}

/// Saves a screenshot when `WAITROOM_SCREENSHOT_DIR` is set.
async fn screenshot(client: &Client, name: &str) {
    let Some(dir) = std::env::var_os("WAITROOM_SCREENSHOT_DIR") else {
        return;
    };
    let png = client.screenshot().await.expect("a screenshot");
    let path = Path::new(&dir).join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_follows_the_line_live_and_sends_the_visitor_on() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    // Paused while the line forms, so no one is let through before the browser joins.
    app.create_room(
        "drop",
        json!({"name": "Spring drop", "admit_per_tick": 1, "tick_ms": 1000, "paused": true,
               "target_url": app.url("/demo/target")}),
    )
    .await;
    for expected in 1..=3 {
        let status = app.join_api("drop").await;
        assert_eq!(status["position"], expected);
    }

    let browser = driver.browser(390, 844, json!({})).await;
    record_websockets(&driver, &browser).await;
    browser.goto(&app.url("/rooms/drop")).await.unwrap();
    assert_eq!(
        attr_of(&browser, "html", "lang").await.as_deref(),
        Some("en")
    );
    assert_eq!(
        text_of(&browser, "room-name").await.as_deref(),
        Some("Spring drop")
    );
    let first = eventually("the browser's position", BROWSER_PATIENCE, || async {
        position(&browser).await
    })
    .await;
    assert_eq!(first, 4, "three visitors joined before the browser");
    wait_until_live(&browser, "the WebSocket to be live").await;
    // The page's socket goes with the cookie alone (from the room's own
    // origin): no ticket in its URL, which proxies log, nor anywhere else.
    let sockets = opened_sockets(&browser).await;
    assert!(!sockets.is_empty(), "the page's sockets were recorded");
    for socket in &sockets {
        let url = socket["url"].as_str().unwrap();
        assert!(
            url.ends_with("/api/rooms/drop/ws") && !url.contains("ticket"),
            "{socket}"
        );
        assert_eq!(socket["protocols"], Value::Null, "{socket}");
    }
    assert_eq!(text_of(&browser, "waiting").await.as_deref(), Some("4"));
    assert_eq!(
        attr_of(&browser, "#progress", "aria-valuenow")
            .await
            .as_deref(),
        Some("0")
    );
    screenshot(&browser, "waiting-page").await;

    assert_eq!(
        app.patch_room("drop", json!({"paused": false}))
            .await
            .status(),
        200
    );
    app.step(1_000).await;
    let moved = eventually(
        "the position to fall after a tick",
        BROWSER_PATIENCE,
        || async { position(&browser).await.filter(|&p| p < first) },
    )
    .await;
    assert!(moved >= 1, "still waiting after one tick, at {moved}");
    let progress: u64 = attr_of(&browser, "#progress", "aria-valuenow")
        .await
        .and_then(|v| v.parse().ok())
        .expect("a numeric aria-valuenow");
    assert!(progress > 0 && progress < 100, "progress {progress}%");
    let eta = text_of(&browser, "eta").await.unwrap_or_default();
    assert!(!eta.is_empty(), "an ETA is shown");

    // Tick until the browser is admitted; it then goes on to the target.
    let mut last = moved;
    let mut admitted = false;
    for _ in 0..10 {
        app.step(1_000).await;
        let now = eventually("the page to take in the tick", BROWSER_PATIENCE, || async {
            let state = attr_of(&browser, "#message", "data-state").await;
            if state.as_deref() == Some("admitted") || path_of(&browser).await == "/demo/target" {
                return Some(None);
            }
            position(&browser).await.filter(|&p| p < last).map(Some)
        })
        .await;
        match now {
            None => {
                admitted = true;
                break;
            }
            Some(position) => last = position,
        }
    }
    assert!(
        admitted,
        "the browser was never admitted (last position {last})"
    );
    if path_of(&browser).await != "/demo/target" {
        screenshot(&browser, "admitted").await;
    }
    eventually("the redirect to the target", BROWSER_PATIENCE, || async {
        (path_of(&browser).await == "/demo/target").then_some(())
    })
    .await;
    assert_eq!(
        attr_of(&browser, "#pass-state", "data-valid")
            .await
            .as_deref(),
        Some("true"),
        "the target verified the pass"
    );
    // The pass came in the address; the page takes it out (history.replaceState).
    eventually(
        "the pass out of the address bar",
        BROWSER_PATIENCE,
        || async {
            let url = browser.current_url().await.ok()?;
            (!url.query_pairs().any(|(k, _)| k == "wr_pass")).then_some(())
        },
    )
    .await;
    assert_eq!(
        text_of(&browser, "pass-state").await.as_deref(),
        Some("You're through")
    );
    assert!(
        text_of(&browser, "pass-room")
            .await
            .unwrap_or_default()
            .contains("drop"),
        "the pass names the room"
    );
    screenshot(&browser, "target-page").await;

    // Back from the target: the waiting page says the visitor is through and
    // offers the link; nothing on it looks like a live line.
    browser.back().await.unwrap();
    eventually("the waiting page again", BROWSER_PATIENCE, || async {
        (path_of(&browser).await == "/rooms/drop").then_some(())
    })
    .await;
    eventually("the admitted page, settled", BROWSER_PATIENCE, || async {
        let state = attr_of(&browser, "#message", "data-state").await;
        (state.as_deref() == Some("admitted") && displayed(&browser, "continue").await)
            .then_some(())
    })
    .await;
    let connection = attr_of(&browser, "#connection", "data-state").await;
    assert_eq!(
        connection.as_deref(),
        Some("done"),
        "no live connection shown"
    );
    assert_eq!(text_of(&browser, "position").await.as_deref(), Some("✓"));
    assert_eq!(
        text_of(&browser, "message").await.as_deref(),
        Some("You're through. Use the button to go on to the site."),
        "no promise of a redirect that will not come"
    );
    assert!(
        !displayed(&browser, "waiting").await,
        "the line's figures are over"
    );
    assert_eq!(
        attr_of(&browser, "body", "data-state").await.as_deref(),
        Some("admitted")
    );
    screenshot(&browser, "back-on-the-waiting-page").await;
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_logs_in_changes_a_room_and_shows_live_figures() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "sale",
        json!({"name": "Big sale", "admit_per_tick": 10, "paused": true}),
    )
    .await;

    let browser = driver.browser(1280, 1000, json!({})).await;
    browser.goto(&app.url("/admin")).await.unwrap();
    // A wrong token first: the form comes back with an error.
    browser
        .find(Locator::Id("token"))
        .await
        .expect("the login form")
        .send_keys("not-the-token")
        .await
        .unwrap();
    click(&browser, Locator::Id("login-submit")).await;
    eventually("the login error", BROWSER_PATIENCE, || async {
        text_of(&browser, "login-error").await
    })
    .await;
    browser
        .find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(&app.admin_token)
        .await
        .unwrap();
    click(&browser, Locator::Id("login-submit")).await;
    let form = eventually("the room's edit form", BROWSER_PATIENCE, || async {
        browser.find(Locator::Id("edit-sale")).await.ok()
    })
    .await;

    // Live figures arrive without a reload.
    let waiting_cell = r#"[data-room="sale"][data-stat="waiting"]"#;
    let cell_text = |css: &'static str| {
        let browser = &browser;
        async move {
            browser
                .find(Locator::Css(css))
                .await
                .ok()?
                .text()
                .await
                .ok()
        }
    };
    assert_eq!(cell_text(waiting_cell).await.as_deref(), Some("0"));
    eventually("the live status line", BROWSER_PATIENCE, || async {
        (attr_of(&browser, "#live-status", "data-state")
            .await
            .as_deref()
            == Some("live"))
        .then_some(())
    })
    .await;
    app.join_api("sale").await;
    app.join_api("sale").await;
    eventually(
        "the waiting cell to update live",
        BROWSER_PATIENCE,
        || async { (cell_text(waiting_cell).await.as_deref() == Some("2")).then_some(()) },
    )
    .await;
    // The room's live chart has the line in it, and a forecast under it.
    eventually("the chart to draw the line", BROWSER_PATIENCE, || async {
        let samples: u32 = attr_of(&browser, "#chart-sale", "data-samples")
            .await?
            .parse()
            .ok()?;
        let top = attr_of(&browser, "#chart-sale", "data-top").await?;
        // Two waiting: a scale of 0 to 4 in steps of 1.
        (samples >= 2 && top == "4").then_some(())
    })
    .await;
    let points = attr_of(
        &browser,
        r#"#chart-sale polyline[data-series="waiting"]"#,
        "points",
    )
    .await
    .unwrap_or_default();
    assert!(points.split(' ').count() >= 2, "{points}");
    let forecast = text_of(&browser, "forecast-sale").await.unwrap_or_default();
    assert!(forecast.starts_with("2 waiting"), "{forecast}");

    // Change admit_per_tick through the form.
    let input = form
        .find(Locator::Css(r#"input[name="admit_per_tick"]"#))
        .await
        .unwrap();
    assert_eq!(input.prop("value").await.unwrap().as_deref(), Some("10"));
    input.clear().await.unwrap();
    input.send_keys("7").await.unwrap();
    // The once-a-second refresh must not undo what the operator typed.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(input.prop("value").await.unwrap().as_deref(), Some("7"));
    screenshot(&browser, "admin-page").await;
    click(&browser, Locator::Id("edit-sale-submit")).await;
    eventually("the confirmation", BROWSER_PATIENCE, || async {
        text_of(&browser, "flash-message").await
    })
    .await;
    let room: Value = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/sale")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        room["admit_per_tick"], 7,
        "the form changed the room: {room}"
    );
    assert_eq!(room["paused"], true, "fields left alone stay as they were");
    let shown = browser
        .find(Locator::Css(r#"#edit-sale input[name="admit_per_tick"]"#))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(shown.as_deref(), Some("7"));

    // A change made elsewhere shows up in the (untouched) form and the table.
    assert_eq!(
        app.patch_room("sale", json!({"paused": false, "tick_ms": 2000}))
            .await
            .status(),
        200
    );
    eventually(
        "the paused cell and the form to follow",
        BROWSER_PATIENCE,
        || async {
            let paused = attr_of(
                &browser,
                r#"[data-room="sale"][data-stat="paused"]"#,
                "data-value",
            )
            .await;
            let tick = browser
                .find(Locator::Css(r#"#edit-sale input[name="tick_ms"]"#))
                .await
                .ok()?
                .prop("value")
                .await
                .ok()
                .flatten();
            (paused.as_deref() == Some("false") && tick.as_deref() == Some("2000")).then_some(())
        },
    )
    .await;
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_korean_browser_gets_the_korean_page_and_an_unknown_room_a_404_page() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("ko", json!({"name": "봄 세일", "paused": true}))
        .await;
    let browser = driver
        .browser(
            390,
            844,
            json!({"intl": {"accept_languages": "ko-KR,ko,en-US"}}),
        )
        .await;
    browser.goto(&app.url("/rooms/ko")).await.unwrap();
    assert_eq!(
        attr_of(&browser, "html", "lang").await.as_deref(),
        Some("ko")
    );
    eventually("the Korean position", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 1)
    })
    .await;
    assert_eq!(
        text_of(&browser, "heading").await.as_deref(),
        Some("대기열에 들어왔습니다")
    );
    eventually("the Korean connection state", BROWSER_PATIENCE, || async {
        (text_of(&browser, "connection").await.as_deref() == Some("실시간")).then_some(())
    })
    .await;
    screenshot(&browser, "waiting-page-ko").await;

    browser.goto(&app.url("/rooms/no-such-room")).await.unwrap();
    assert_eq!(
        text_of(&browser, "room-id").await.as_deref(),
        Some("no-such-room")
    );
    assert_eq!(
        attr_of(&browser, "html", "lang").await.as_deref(),
        Some("ko")
    );
    browser.close().await.unwrap();
}

/// The text of `key` in the catalogue of `code` (static/i18n/{code}.json):
/// what the page must show, read from the file the server embeds.
fn catalogue_text(code: &str, key: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("static/i18n/{code}.json"));
    let catalogue: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    catalogue[key]
        .as_str()
        .unwrap_or_else(|| panic!("{code} has no {key}"))
        .to_string()
}

/// The waiting page in three languages, each reached by another rule: a
/// `?lang=` (then kept by its cookie), the browser's languages, and the
/// room's own `language` for a browser that asks for none we speak. With
/// `WAITROOM_SCREENSHOT_DIR=docs/src/images` this makes the book's
/// `room-ko.png`, `room-ja.png` and `room-de.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_speaks_korean_japanese_and_german() {
    let app = TestApp::spawn().await;
    app.create_room(
        "drop",
        json!({"name": "Spring drop", "paused": true, "language": "de"}),
    )
    .await;
    for _ in 0..41 {
        app.join_api("drop").await;
    }
    let italian = json!({"intl": {"accept_languages": "it-IT,it"}});
    let cases = [
        ("ko", "/rooms/drop?lang=ko", italian.clone()),
        (
            "ja",
            "/rooms/drop",
            json!({"intl": {"accept_languages": "ja-JP,ja,en-US"}}),
        ),
        ("de", "/rooms/drop", italian.clone()),
    ];
    for (code, path, prefs) in cases {
        // A browser of its own each (a driver's sessions share a profile,
        // so its cookies): nobody's earlier choice or place carries over.
        let driver = Driver::start().await;
        let browser = driver.browser(390, 844, prefs).await;
        browser.goto(&app.url(path)).await.unwrap();
        assert_eq!(
            attr_of(&browser, "html", "lang").await.as_deref(),
            Some(code)
        );
        let heading = catalogue_text(code, "room.heading");
        assert_eq!(
            text_of(&browser, "heading").await.as_deref(),
            Some(heading.as_str()),
            "{code}"
        );
        eventually(
            &format!("the {code} page's place"),
            BROWSER_PATIENCE,
            || async { position(&browser).await.filter(|&p| p > 41) },
        )
        .await;
        // The script speaks the page's language too.
        let live = catalogue_text(code, "room.conn_live");
        eventually(
            &format!("the {code} page live"),
            BROWSER_PATIENCE,
            || async {
                (text_of(&browser, "connection").await.as_deref() == Some(live.as_str()))
                    .then_some(())
            },
        )
        .await;
        assert_eq!(
            text_of(&browser, "heading").await.as_deref(),
            Some(heading.as_str()),
            "{code}: the script keeps the heading"
        );
        screenshot(&browser, &format!("room-{code}")).await;
        if code == "ko" {
            // The cookie keeps the choice for the next page, over the room's.
            browser.goto(&app.url("/rooms/drop")).await.unwrap();
            assert_eq!(
                attr_of(&browser, "html", "lang").await.as_deref(),
                Some("ko")
            );
        }
        browser.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_who_left_can_join_again_and_a_closed_room_says_so() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("line", json!({"name": "Line", "paused": true}))
        .await;
    app.join_api("line").await;
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/line")).await.unwrap();
    eventually("the first place", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 2)
    })
    .await;
    wait_until_live(&browser, "the WebSocket to be live").await;
    let join_again = browser.find(Locator::Id("join-again")).await.unwrap();
    assert!(
        !join_again.is_displayed().await.unwrap(),
        "no rejoin button while waiting"
    );

    // The visitor gives the place up elsewhere (another tab, say).
    let ticket = browser
        .get_named_cookie("wr_ticket_line")
        .await
        .expect("join set the ticket cookie")
        .value()
        .to_string();
    let left = app
        .http
        .post(app.url("/api/rooms/line/leave"))
        .bearer_auth(&ticket)
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 204);
    // Sockets hear of departures with the next tick.
    app.step(5_000).await;
    eventually(
        "the page to say the place is gone",
        BROWSER_PATIENCE,
        || async {
            let state = attr_of(&browser, "#message", "data-state").await;
            (state.as_deref() == Some("left")).then_some(())
        },
    )
    .await;
    assert!(
        join_again.is_displayed().await.unwrap(),
        "a way back into the line"
    );
    screenshot(&browser, "left").await;

    join_again.click().await.unwrap();
    eventually(
        "a new place at the back of the line",
        BROWSER_PATIENCE,
        || async {
            let waiting = attr_of(&browser, "#message", "data-state").await;
            position(&browser)
                .await
                // The room is paused, and the page says so.
                .filter(|&p| p == 2 && matches!(waiting.as_deref(), Some("waiting" | "paused")))
        },
    )
    .await;
    assert!(!join_again.is_displayed().await.unwrap());
    wait_until_live(&browser, "the new socket to be live").await;

    let closed = app
        .admin(reqwest::Method::DELETE, "/api/admin/rooms/line")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    eventually(
        "the page to say the room closed",
        BROWSER_PATIENCE,
        || async {
            (attr_of(&browser, "#message", "data-state").await.as_deref() == Some("closed"))
                .then_some(())
        },
    )
    .await;
    assert!(
        !join_again.is_displayed().await.unwrap(),
        "no way back into a closed room"
    );
    screenshot(&browser, "closed").await;
    browser.close().await.unwrap();
}

/// With JavaScript off nothing on the waiting page can move, so the page
/// says plainly that it needs JavaScript and shows nothing that would
/// pretend otherwise (no "Getting you a place", no "Connecting…").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_javascript_the_page_says_so_and_nothing_else() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("plain", json!({"name": "Plain", "paused": true}))
        .await;
    // With it on, the live parts are there and the notice is not. (First:
    // the profile keeps the preference of the session after it.)
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/plain")).await.unwrap();
    wait_until_live(&browser, "the WebSocket to be live").await;
    let message = browser.find(Locator::Id("message")).await.unwrap();
    assert!(message.is_displayed().await.unwrap());
    assert!(browser.find(Locator::Id("noscript")).await.is_err());
    browser.close().await.unwrap();

    let no_script = json!({"profile.managed_default_content_settings.javascript": 2});
    let browser = driver.browser(390, 844, no_script).await;
    browser.goto(&app.url("/rooms/plain")).await.unwrap();
    let notice = browser.find(Locator::Id("noscript")).await.unwrap();
    assert!(notice.is_displayed().await.unwrap());
    let text = notice.text().await.unwrap();
    assert!(text.contains("needs JavaScript"), "{text}");
    for live in ["heading", "message", "connection", "position", "keep-open"] {
        let element = browser.find(Locator::Id(live)).await.unwrap();
        assert!(!element.is_displayed().await.unwrap(), "#{live} is shown");
    }
    screenshot(&browser, "no-javascript").await;
    browser.close().await.unwrap();
}

/// A phone that locks keeps its place for the time the page states; a
/// visitor back after that is told plainly that they were away too long,
/// with one button to join again at the back of the line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_away_too_long_is_told_so_and_joins_again_at_the_back() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "away",
        json!({"name": "Away", "paused": true, "abandon_after_s": 20}),
    )
    .await;
    app.join_api("away").await;
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/away")).await.unwrap();
    eventually("the first place", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 2)
    })
    .await;
    wait_until_live(&browser, "the WebSocket to be live").await;
    let note = text_of(&browser, "keep-open").await.unwrap_or_default();
    assert!(note.contains("kept for 20 s"), "{note}");
    // The operator lengthens it: the note follows with the next status.
    app.patch_room("away", json!({"abandon_after_s": 60})).await;
    eventually("the note to follow", BROWSER_PATIENCE, || async {
        let note = text_of(&browser, "keep-open").await.unwrap_or_default();
        note.contains("kept for 1 min").then_some(())
    })
    .await;
    app.patch_room("away", json!({"abandon_after_s": 20})).await;

    // The tab goes away (its socket with it) for longer than the room keeps
    // a place; the other visitor keeps polling.
    browser.goto("about:blank").await.unwrap();
    let other = app.join_api("away").await;
    let other = other["ticket"].as_str().unwrap().to_owned();
    for _ in 0..6 {
        app.step(5_000).await;
        assert_eq!(app.status_api("away", &other).await.status(), 200);
    }
    browser.goto(&app.url("/rooms/away")).await.unwrap();
    eventually(
        "the page to say the place lapsed",
        BROWSER_PATIENCE,
        || async {
            let state = attr_of(&browser, "#message", "data-state").await;
            (state.as_deref() == Some("expired")).then_some(())
        },
    )
    .await;
    let message = text_of(&browser, "message").await.unwrap_or_default();
    assert!(message.contains("away for more than 20 s"), "{message}");
    let join_again = browser.find(Locator::Id("join-again")).await.unwrap();
    assert!(join_again.is_displayed().await.unwrap(), "one way back");
    screenshot(&browser, "away-too-long").await;
    join_again.click().await.unwrap();
    eventually("a new place at the back", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 2)
    })
    .await;
    browser.close().await.unwrap();
}

/// Makes every page the browser opens from now on see WebSockets that never
/// connect (as behind a proxy that drops upgrades), through chromedriver's
/// DevTools bridge.
async fn break_websockets(driver: &Driver, browser: &Client) {
    let session = browser.session_id().await.unwrap().expect("a session id");
    let source = "(function () {\
        function Broken() {\
          var self = this; self.readyState = 0;\
          setTimeout(function () {\
            self.readyState = 3;\
            if (self.onerror) self.onerror(new Event('error'));\
            if (self.onclose) self.onclose(new CloseEvent('close', {code: 1006}));\
          }, 20);\
        }\
        Broken.prototype.send = function () { throw new Error('not open'); };\
        Broken.prototype.close = function () {};\
        window.WebSocket = Broken;\
      })();";
    run_on_every_new_page(driver, &session, source, "the WebSocket breaker").await;
}

/// Runs `source` in every page the browser opens from now on, before the
/// page's own scripts, through chromedriver's DevTools bridge.
async fn run_on_every_new_page(driver: &Driver, session: &str, source: &str, what: &str) {
    let response = reqwest::Client::new()
        .post(format!(
            "{}/session/{session}/goog/cdp/execute",
            driver.url()
        ))
        .json(
            &json!({"cmd": "Page.addScriptToEvaluateOnNewDocument", "params": {"source": source}}),
        )
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "installing {what}");
}

/// Makes every page the browser opens from now on note each WebSocket it
/// opens (its URL and the subprotocols offered), for [`opened_sockets`].
async fn record_websockets(driver: &Driver, browser: &Client) {
    let session = browser.session_id().await.unwrap().expect("a session id");
    let source = "(function () {\
        var Real = window.WebSocket;\
        window.openedSockets = [];\
        function Recorded(url, protocols) {\
          window.openedSockets.push({url: String(url), protocols: protocols === undefined ? null : protocols});\
          return protocols === undefined ? new Real(url) : new Real(url, protocols);\
        }\
        Recorded.prototype = Real.prototype;\
        window.WebSocket = Recorded;\
      })();";
    run_on_every_new_page(driver, &session, source, "the WebSocket recorder").await;
}

/// The WebSockets the page opened: their URLs and the subprotocols offered.
async fn opened_sockets(browser: &Client) -> Vec<Value> {
    let opened = browser
        .execute("return window.openedSockets || [];", vec![])
        .await
        .unwrap();
    opened.as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_websockets_the_page_polls_and_still_gets_through() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "poll",
        json!({"name": "Polling", "admit_per_tick": 1, "tick_ms": 1000, "paused": true,
               "target_url": app.url("/demo/target")}),
    )
    .await;
    app.join_api("poll").await;
    let browser = driver.browser(390, 844, json!({})).await;
    break_websockets(&driver, &browser).await;
    browser.goto(&app.url("/rooms/poll")).await.unwrap();
    eventually("the place", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 2)
    })
    .await;
    eventually(
        "the page to fall back to polling",
        BROWSER_PATIENCE,
        || async {
            (attr_of(&browser, "#connection", "data-state")
                .await
                .as_deref()
                == Some("polling"))
            .then_some(())
        },
    )
    .await;
    screenshot(&browser, "polling").await;

    assert_eq!(
        app.patch_room("poll", json!({"paused": false}))
            .await
            .status(),
        200
    );
    app.step(1_000).await;
    // A poll every 5 s picks the move up.
    eventually("a poll to show the new place", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 1)
    })
    .await;
    app.step(1_000).await;
    eventually(
        "a poll to admit the visitor and the redirect",
        BROWSER_PATIENCE,
        || async { (path_of(&browser).await == "/demo/target").then_some(()) },
    )
    .await;
    assert_eq!(
        attr_of(&browser, "#pass-state", "data-valid")
            .await
            .as_deref(),
        Some("true")
    );
    browser.close().await.unwrap();
}

/// A visitor a forward-auth gate sent here (`/rooms/{room}?return=…`):
/// the page hands the return to its join, and once admitted the visitor
/// lands on the page they first asked for (on the target's origin), not
/// the target; a return on another origin leads to the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_sends_the_visitor_back_where_the_gate_found_them() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "back",
        json!({"name": "Back", "admit_per_tick": 1, "tick_ms": 1000, "paused": true,
               "target_url": app.url("/demo/target")}),
    )
    .await;
    let browser = driver.browser(390, 844, json!({})).await;
    for (asked, lands_on) in [
        (app.url("/demo/target?from=gate"), "from=gate"),
        (
            "https://elsewhere.example/demo/target?from=evil".to_string(),
            "",
        ),
    ] {
        let encoded: String = url::form_urlencoded::byte_serialize(asked.as_bytes()).collect();
        browser
            .goto(&app.url(&format!("/rooms/back?return={encoded}")))
            .await
            .unwrap();
        eventually("the place", BROWSER_PATIENCE, || async {
            position(&browser).await.filter(|&p| p == 1)
        })
        .await;
        assert_eq!(
            app.patch_room("back", json!({"paused": false}))
                .await
                .status(),
            200
        );
        app.step(1_000).await;
        let query = eventually("the redirect", BROWSER_PATIENCE, || async {
            let url = browser.current_url().await.ok()?;
            (url.path() == "/demo/target").then(|| url.query().unwrap_or_default().to_string())
        })
        .await;
        assert!(
            query
                .split('&')
                .filter(|p| !p.is_empty() && !p.starts_with("wr_pass="))
                .eq(lands_on.split('&').filter(|p| !p.is_empty())),
            "{asked}: landed with ?{query}"
        );
        assert_eq!(
            app.patch_room("back", json!({"paused": true}))
                .await
                .status(),
            200
        );
        browser.delete_all_cookies().await.unwrap();
    }
    browser.close().await.unwrap();
}

/// An hour of a room's traffic, driven on the app's clock, then the admin
/// page: the chart draws the node's history with its scale, time labels,
/// cap and the forecast's time; a value the browser would stop, sent with
/// its checks off, comes back refused next to its field. With
/// `WAITROOM_SCREENSHOT_DIR=docs/src/images` this makes the book's
/// `admin-chart.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_chart_reads_at_a_glance_and_a_refused_field_says_why() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    // 24 a minute by rate, 20 by the cap (60 passes of 3 minutes).
    app.create_room(
        "drop",
        json!({"name": "Spring drop", "admit_per_tick": 4, "tick_ms": 10_000,
               "max_active": 60, "pass_ttl_s": 180, "abandon_after_s": 86_400}),
    )
    .await;
    // Forty minutes of 30 arrivals a minute, then twenty of 6: the line
    // grows, then shrinks, and still holds people at the end.
    for step in 0..360 {
        let arrivals = if step < 240 { 5 } else { 1 };
        for _ in 0..arrivals {
            app.join_api("drop").await;
        }
        app.step(10_000).await;
    }
    let room = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    let waiting = room["stats"]["waiting"].as_u64().unwrap();
    assert!(waiting > 0 && room["stats"]["admitted_last_minute"].as_u64().unwrap() > 0);

    let browser = driver.browser(1280, 1000, json!({})).await;
    admin_login(&browser, &app).await;
    let chart = "#chart-drop";
    // The node's hour of samples, not only what the page saw since it opened.
    eventually("the hour of history", BROWSER_PATIENCE, || async {
        let samples: u32 = attr_of(&browser, chart, "data-samples")
            .await?
            .parse()
            .ok()?;
        (samples >= 300).then_some(())
    })
    .await;
    let texts = |css: String| {
        let browser = &browser;
        async move {
            let mut out = Vec::new();
            for element in browser.find_all(Locator::Css(&css)).await.unwrap() {
                out.push(
                    element
                        .prop("textContent")
                        .await
                        .unwrap()
                        .unwrap_or_default(),
                );
            }
            out
        }
    };
    assert_eq!(
        texts(format!("{chart} text.time-label")).await,
        ["−60 min", "−30 min", "now"]
    );
    let top: u64 = attr_of(&browser, chart, "data-top")
        .await
        .unwrap()
        .parse()
        .unwrap();
    let scale = texts(format!("{chart} text.y-label")).await;
    assert_eq!(scale.len(), 5, "{scale:?}");
    assert_eq!(scale[0], "0");
    assert_eq!(scale[4].replace(',', "").parse::<u64>().unwrap(), top);
    assert!(
        top >= waiting,
        "the scale holds the line: {top} < {waiting}"
    );
    let cap_line = format!("{chart} line.cap-line");
    assert_eq!(
        attr_of(&browser, &cap_line, "data-value").await.as_deref(),
        Some("60")
    );
    assert!(
        !attr_of(&browser, &cap_line, "class")
            .await
            .unwrap()
            .contains("is-hidden")
    );
    assert_eq!(texts(format!("{chart} text.cap-label")).await, ["cap 60"]);
    let label = format!("{chart} text.forecast-label");
    assert_eq!(
        attr_of(&browser, &label, "data-state").await.as_deref(),
        Some("empties")
    );
    let empties = texts(label).await.remove(0);
    let time = empties.strip_prefix("empties ≈ ").unwrap_or_default();
    assert!(
        time.len() >= 4
            && time.chars().filter(|c| *c == ':').count() == 1
            && time.chars().any(|c| c.is_ascii_digit()),
        "the forecast gives a time: {empties:?}"
    );
    let projection = format!("{chart} line.forecast-line");
    assert!(
        !attr_of(&browser, &projection, "class")
            .await
            .unwrap()
            .contains("is-hidden")
    );
    let legend = texts("#room-drop [data-legend]".into()).await;
    assert_eq!(legend[0], waiting.to_string(), "{legend:?}");
    assert_eq!(legend[3], "60", "{legend:?}");
    let figure = browser
        .find(Locator::Css("#room-drop figure.chart"))
        .await
        .unwrap();
    browser
        .execute(
            "document.getElementById('chart-drop').scrollIntoView()",
            vec![],
        )
        .await
        .unwrap();
    if let Some(dir) = std::env::var_os("WAITROOM_SCREENSHOT_DIR") {
        let png = figure
            .screenshot()
            .await
            .expect("a screenshot of the chart");
        std::fs::write(Path::new(&dir).join("admin-chart.png"), png).unwrap();
    }

    // The browser stops a value out of range before it is sent...
    let field = "edit-drop-admit_per_tick";
    let input = browser.find(Locator::Id(field)).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys("0").await.unwrap();
    click(&browser, Locator::Id("edit-drop-submit")).await;
    assert!(
        browser
            .find(Locator::Css(&format!("#{field}:invalid")))
            .await
            .is_ok(),
        "the browser's own check holds it"
    );
    assert!(
        text_of(&browser, "flash-error").await.is_none(),
        "nothing was sent"
    );
    // ...and with its checks off, the server refuses it next to the field.
    browser
        .execute(
            "document.getElementById('edit-drop').noValidate = true",
            vec![],
        )
        .await
        .unwrap();
    let notice = browser.find(Locator::Id("edit-drop-notice")).await.unwrap();
    notice.send_keys("Back at noon").await.unwrap();
    click(&browser, Locator::Id("edit-drop-submit")).await;
    let message = "admit_per_tick must be between 1 and 100000";
    let shown = eventually(
        "the refusal next to the field",
        BROWSER_PATIENCE,
        || async { text_of(&browser, &format!("{field}-error")).await },
    )
    .await;
    assert_eq!(shown, message);
    assert_eq!(
        text_of(&browser, "flash-error").await.as_deref(),
        Some(message)
    );
    let input = browser.find(Locator::Id(field)).await.unwrap();
    assert_eq!(
        input.attr("aria-invalid").await.unwrap().as_deref(),
        Some("true")
    );
    assert_eq!(
        input.attr("aria-describedby").await.unwrap(),
        Some(format!("{field}-error"))
    );
    let focused = browser
        .execute("return document.activeElement.id", vec![])
        .await
        .unwrap();
    assert_eq!(focused, json!(field), "the refused field has the focus");
    // What the operator typed comes back with the refusal, to be put right.
    let typed = browser
        .execute(
            "return [document.getElementById('edit-drop-notice').value, \
                     document.getElementById(arguments[0]).value]",
            vec![json!(field)],
        )
        .await
        .unwrap();
    assert_eq!(
        typed,
        json!(["Back at noon", "0"]),
        "the form keeps its edits"
    );
    assert_eq!(
        app.admin(reqwest::Method::GET, "/api/admin/rooms/drop")
            .fetch_json()
            .await["admit_per_tick"],
        4,
        "nothing changed"
    );
    screenshot(&browser, "admin-refused-field").await;
    browser.close().await.unwrap();
}

/// A visitor who joins over the API and is let through with the next tick
/// (the room must admit at once and tick every `tick_ms`); returns the pass.
async fn admitted_pass(app: &TestApp, room: &str, tick_ms: u64) -> String {
    let ticket = app.join_api(room).await["ticket"]
        .as_str()
        .expect("a ticket")
        .to_string();
    app.step(tick_ms).await;
    let status: Value = app.status_api(room, &ticket).await.json().await.unwrap();
    assert_eq!(status["state"], "admitted", "the visitor got in: {status}");
    status["pass"].as_str().expect("a pass").to_string()
}

/// The text of the first element matching `css`, or `None`.
async fn css_text(client: &Client, css: &str) -> Option<String> {
    let element = client.find(Locator::Css(css)).await.ok()?;
    let text = element.prop("textContent").await.ok().flatten()?;
    Some(text.trim().to_string())
}

async fn seat_state(client: &Client, seat: &str) -> Option<String> {
    attr_of(
        client,
        &format!(r#"#seat-map [data-seat="{seat}"]"#),
        "data-state",
    )
    .await
}

async fn displayed(client: &Client, id: &str) -> bool {
    match client.find(Locator::Id(id)).await {
        Ok(element) => element.is_displayed().await.unwrap_or(false),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admitted_visitor_holds_seats_confirms_them_and_gets_a_numbered_ticket() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "seats",
        json!({"name": "Front rows", "admit_per_tick": 1, "tick_ms": 1000, "paused": true,
               "target_url": app.url("/rooms/seats/sale")}),
    )
    .await;
    app.put_sale(
        "seats",
        json!({"seats": ["A1", "A2", "A3", "A4"], "per_user_limit": 2}),
    )
    .await;

    // Through the waiting room first.
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/seats")).await.unwrap();
    eventually("the browser's place", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 1)
    })
    .await;
    wait_until_live(&browser, "the WebSocket to be live").await;
    assert_eq!(
        app.patch_room("seats", json!({"paused": false}))
            .await
            .status(),
        200
    );
    app.step(1_000).await;
    eventually("the sale page", BROWSER_PATIENCE, || async {
        (path_of(&browser).await == "/rooms/seats/sale").then_some(())
    })
    .await;
    let url = browser.current_url().await.unwrap();
    assert!(
        !url.query_pairs().any(|(k, _)| k == "wr_pass"),
        "the pass left the address bar: {url}"
    );
    let cookie = browser
        .get_named_cookie("wr_pass")
        .await
        .expect("the pass moved into a cookie");
    assert_eq!(
        cookie.http_only(),
        Some(true),
        "the pass cookie is HttpOnly"
    );

    assert_eq!(
        text_of(&browser, "sale-room-name").await.as_deref(),
        Some("Front rows")
    );
    let phase = || async { attr_of(&browser, "body", "data-phase").await };
    let map = tokio::time::timeout(BROWSER_PATIENCE, async {
        while seat_state(&browser, "A4").await.as_deref() != Some("free") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        map.is_ok(),
        "timed out waiting for the seat map; the page's phase {:?}, its message {:?}",
        phase().await,
        text_of(&browser, "sale-message").await
    );
    assert_eq!(text_of(&browser, "stock-left").await.as_deref(), Some("4"));
    let seat = |id: &'static str| {
        let browser = &browser;
        async move {
            browser
                .find(Locator::Css(&format!(r#"#seat-map [data-seat="{id}"]"#)))
                .await
                .unwrap()
        }
    };
    seat("A1").await.click().await.unwrap();
    seat("A2").await.click().await.unwrap();
    // Two per person: a third seat is not taken.
    seat("A3").await.click().await.unwrap();
    for (id, pressed) in [("A1", "true"), ("A2", "true"), ("A3", "false")] {
        assert_eq!(
            seat(id)
                .await
                .attr("aria-pressed")
                .await
                .unwrap()
                .as_deref(),
            Some(pressed),
            "seat {id}"
        );
    }

    screenshot(&browser, "sale-seats").await;

    click(&browser, Locator::Id("hold")).await;
    eventually("the hold panel", BROWSER_PATIENCE, || async {
        displayed(&browser, "hold-panel").await.then_some(())
    })
    .await;
    let countdown = eventually("a running countdown", BROWSER_PATIENCE, || async {
        text_of(&browser, "countdown")
            .await
            .filter(|t| t.len() == 5 && t.as_bytes()[2] == b':' && t.as_str() != "00:00")
    })
    .await;
    assert!(
        countdown.starts_with("05:") || countdown.starts_with("04:"),
        "a fresh five-minute hold, shown as {countdown}"
    );
    let held_text = text_of(&browser, "held-what").await.unwrap_or_default();
    assert!(
        held_text.contains("A1") && held_text.contains("A2"),
        "the panel says what is held: {held_text}"
    );
    app.clock.advance_ms(1_000); // the public view may be a second old
    let view: Value = app
        .http
        .get(app.url("/api/rooms/seats/sale"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["seats"]["A1"], "held", "{view}");
    assert_eq!(view["seats"]["A2"], "held", "{view}");
    screenshot(&browser, "sale-hold").await;

    // Someone else holds A4 meanwhile (the room's second claim).
    let other = admitted_pass(&app, "seats", 1_000).await;
    // The public view read now, as a page's refresh may read it: cached
    // without the other's hold until the clock moves on.
    let cached = app.http.get(app.url("/api/rooms/seats/sale")).send().await;
    assert_eq!(cached.unwrap().status(), 200);
    let taken = app
        .http
        .post(app.url("/api/rooms/seats/sale/claims"))
        .bearer_auth(&other)
        .json(&json!({"seats": ["A4"]}))
        .header("Idempotency-Key", "other-visitor-1")
        .send()
        .await
        .unwrap();
    assert_eq!(taken.status(), 201);

    click(&browser, Locator::Id("confirm")).await;
    let sequence = eventually("the ticket", BROWSER_PATIENCE, || async {
        if !displayed(&browser, "ticket").await {
            return None;
        }
        text_of(&browser, "ticket-sequence")
            .await
            .filter(|t| !t.is_empty())
    })
    .await;
    assert_eq!(sequence, "1", "the first successful claim in the room");
    assert!(!displayed(&browser, "hold-panel").await);
    let ticket_text = text_of(&browser, "ticket").await.unwrap_or_default();
    assert!(
        ticket_text.contains("Ticket #1") && ticket_text.contains("A1"),
        "the ticket: {ticket_text}"
    );
    screenshot(&browser, "sale-ticket").await;

    // The page kept its (now hidden) map in step: the visitor's seats are
    // sold to them, and the other visitor's hold shows as held. The public
    // view may be a second old (sale_views::MAX_AGE_MS) by the app's clock,
    // which this test drives: a page refresh between the other's hold and
    // the confirm may have cached it without them, so the clock moves on a
    // second at a time, a few times, as it would by itself.
    let aged = std::cell::Cell::new(0);
    eventually("the map to follow the sale", BROWSER_PATIENCE, || async {
        if aged.get() < 5 {
            aged.set(aged.get() + 1);
            app.clock.advance_ms(waitroom::http::sale_views::MAX_AGE_MS);
        }
        let a4 = seat_state(&browser, "A4").await;
        let a1 = seat_state(&browser, "A1").await;
        let mine = attr_of(&browser, r#"#seat-map [data-seat="A1"]"#, "data-mine").await;
        (a4.as_deref() == Some("held")
            && a1.as_deref() == Some("sold")
            && mine.as_deref() == Some("sold"))
        .then_some(())
    })
    .await;
    assert_eq!(text_of(&browser, "stock-left").await.as_deref(), Some("1"));
    assert!(
        !displayed(&browser, "buy-more").await,
        "two per person, and both are bought"
    );

    let orders: Value = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/seats/sale/orders")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let orders = orders["orders"].as_array().expect("a list of orders");
    assert_eq!(orders.len(), 1, "one order: {orders:?}");
    assert_eq!(orders[0]["seats"], json!(["A1", "A2"]));
    assert_eq!(orders[0]["sequence"], 1);
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_follows_sales_and_sets_up_a_stock_sale() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("shop", json!({"name": "Shop", "paused": true}))
        .await;
    app.create_room(
        "hall",
        json!({"name": "Hall", "admit_per_tick": 10, "tick_ms": 1000}),
    )
    .await;
    app.put_sale("hall", json!({"seats": ["A1", "A2", "B1"]}))
        .await;

    let browser = driver.browser(1280, 1000, json!({})).await;
    admin_login(&browser, &app).await;
    let stat = |room: &'static str, stat: &'static str| {
        let browser = &browser;
        async move {
            css_text(
                browser,
                &format!(r#"[data-room="{room}"][data-sale-stat="{stat}"]"#),
            )
            .await
        }
    };
    eventually("the room without a sale", BROWSER_PATIENCE, || async {
        (stat("shop", "stock_left").await.as_deref() == Some("no sale")).then_some(())
    })
    .await;
    eventually("the seat sale's figures", BROWSER_PATIENCE, || async {
        (stat("hall", "stock_left").await.as_deref() == Some("3")
            && stat("hall", "held").await.as_deref() == Some("0")
            && stat("hall", "orders").await.as_deref() == Some("0"))
        .then_some(())
    })
    .await;

    // A visitor holds a seat, then buys it: the figures follow live.
    let pass = admitted_pass(&app, "hall", 1_000).await;
    let claim: Value = app
        .http
        .post(app.url("/api/rooms/hall/sale/claims"))
        .bearer_auth(&pass)
        .json(&json!({"seats": ["B1"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    eventually("the hold to show", BROWSER_PATIENCE, || async {
        (stat("hall", "held").await.as_deref() == Some("1")
            && stat("hall", "stock_left").await.as_deref() == Some("2"))
        .then_some(())
    })
    .await;
    let claim_id = claim["claim_id"].as_str().expect("a claim id");
    let confirmed = app
        .http
        .post(app.url(&format!("/api/rooms/hall/sale/claims/{claim_id}/confirm")))
        .bearer_auth(&pass)
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status(), 200);
    app.clock.advance_ms(1_000); // the public view may be a second old
    eventually("the order to show", BROWSER_PATIENCE, || async {
        (stat("hall", "held").await.as_deref() == Some("0")
            && stat("hall", "orders").await.as_deref() == Some("1"))
        .then_some(())
    })
    .await;

    // The form sets up a stock sale in the other room.
    let field = |name: &'static str| {
        let browser = &browser;
        async move {
            browser
                .find(Locator::Id(&format!("sale-shop-{name}")))
                .await
                .unwrap()
        }
    };
    field("stock").await.send_keys("50").await.unwrap();
    let limit = field("per_user_limit").await;
    limit.clear().await.unwrap();
    limit.send_keys("2").await.unwrap();
    let ttl = field("hold_ttl_s").await;
    ttl.clear().await.unwrap();
    ttl.send_keys("90").await.unwrap();
    click(&browser, Locator::Css("#sale-shop-submit")).await;
    eventually("the confirmation", BROWSER_PATIENCE, || async {
        text_of(&browser, "flash-message").await
    })
    .await;
    let view: Value = app
        .http
        .get(app.url("/api/rooms/shop/sale"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["kind"], "stock", "{view}");
    assert_eq!(view["stock_left"], 50, "{view}");
    assert_eq!(view["per_user_limit"], 2, "{view}");
    assert_eq!(view["hold_ttl_s"], 90, "{view}");
    eventually("the new sale's figures", BROWSER_PATIENCE, || async {
        (stat("shop", "stock_left").await.as_deref() == Some("50")
            && stat("shop", "held").await.as_deref() == Some("–")
            && stat("shop", "orders").await.as_deref() == Some("0"))
        .then_some(())
    })
    .await;
    browser
        .execute(
            "document.getElementById('sale-section-shop').scrollIntoView()",
            vec![],
        )
        .await
        .unwrap();
    screenshot(&browser, "admin-sales").await;
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_in_customer_keeps_one_place_and_a_stranger_is_sent_to_sign_in() {
    const KEY: &str = "the-shop-s-user-key-0123456789abcdef";
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "members",
        json!({"paused": true, "user_key": KEY, "user_required": true,
               "target_url": "https://shop.example/checkout"}),
    )
    .await;
    let token_of = |user: &str| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &json!({"sub": user, "room": "members", "exp": support::START_MS / 1000 + 3600}),
            &jsonwebtoken::EncodingKey::from_secret(KEY.as_bytes()),
        )
        .unwrap()
    };
    let join_as = |user: &str| {
        app.http
            .post(app.url("/api/rooms/members/join"))
            .json(&json!({"user": token_of(user)}))
            .send()
    };
    // Alice already holds a place, joined from her phone; Bob is behind her.
    let phone: Value = join_as("alice").await.unwrap().json().await.unwrap();
    assert_eq!(join_as("bob").await.unwrap().status(), 200);
    let token = token_of("alice");

    let laptop = driver.browser(1280, 800, json!({})).await;
    laptop
        .goto(&app.url(&format!("/rooms/members?user={token}")))
        .await
        .unwrap();
    let seen = eventually("the laptop's position", BROWSER_PATIENCE, || async {
        position(&laptop).await
    })
    .await;
    assert_eq!(
        seen,
        phone["position"].as_u64().unwrap(),
        "the phone's place, not a new one"
    );
    let address = laptop.current_url().await.unwrap();
    assert!(
        !address.as_str().contains("user="),
        "the token leaves the address bar: {address}"
    );

    // Another person: a browser of their own (a driver has one profile).
    let other_driver = Driver::start().await;
    let stranger = other_driver.browser(390, 844, json!({})).await;
    stranger.goto(&app.url("/rooms/members")).await.unwrap();
    eventually("the sign-in link", BROWSER_PATIENCE, || async {
        displayed(&stranger, "sign-in").await.then_some(())
    })
    .await;
    assert_eq!(
        attr_of(&stranger, "#sign-in", "href").await.as_deref(),
        Some("https://shop.example/")
    );
    let said = text_of(&stranger, "message").await.unwrap_or_default();
    assert!(said.contains("signed-in customers"), "{said}");
    screenshot(&stranger, "sign-in-first").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_solves_the_proof_of_work_before_joining() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("guarded", json!({"paused": true, "pow_difficulty": 1}))
        .await;
    let refused = app
        .http
        .post(app.url("/api/rooms/guarded/join"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403, "no place without the work");

    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/guarded")).await.unwrap();
    let joined = eventually("the page to solve and join", BROWSER_PATIENCE, || async {
        position(&browser).await
    })
    .await;
    assert_eq!(joined, 1);
    let stats = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/guarded")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["stats"]
        .clone();
    assert_eq!(stats["waiting"], 1);
    assert_eq!(
        stats["turned_away"], 2,
        "ours above, and the page's first try"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_appears_on_the_waiting_page_live() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("drop", json!({"paused": true})).await;
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/drop")).await.unwrap();
    wait_until_live(&browser, "the WebSocket to be live").await;
    assert!(!displayed(&browser, "notice").await, "no notice yet");

    let notice = "Restock at 10:00 <b>stay</b> on this page";
    assert_eq!(
        app.patch_room("drop", json!({ "notice": notice }))
            .await
            .status(),
        200
    );
    let shown = eventually("the notice to appear", BROWSER_PATIENCE, || async {
        if !displayed(&browser, "notice").await {
            return None;
        }
        text_of(&browser, "notice").await
    })
    .await;
    assert_eq!(shown, notice, "shown as text, never as markup");
    screenshot(&browser, "notice").await;

    app.patch_room("drop", json!({ "notice": null })).await;
    eventually("the notice to go", BROWSER_PATIENCE, || async {
        (!displayed(&browser, "notice").await).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_counts_the_stock_down_and_ends_at_sold_out() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "drop",
        json!({"admit_per_tick": 1, "max_active": 1, "tick_ms": 1000}),
    )
    .await;
    app.put_sale("drop", json!({"stock": 1})).await;
    let buyer = app.join_api("drop").await;
    assert_eq!(buyer["state"], "admitted");

    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/drop")).await.unwrap();
    let left = eventually("the stock to show", BROWSER_PATIENCE, || async {
        if !displayed(&browser, "stock").await {
            return None;
        }
        text_of(&browser, "stock").await
    })
    .await;
    assert_eq!(left, "1 still for sale");

    let pass = buyer["pass"].as_str().unwrap();
    let held: Value = app
        .http
        .post(app.url("/api/rooms/drop/sale/claims"))
        .bearer_auth(pass)
        .json(&json!({"quantity": 1}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let confirmed = app
        .http
        .post(app.url(&format!(
            "/api/rooms/drop/sale/claims/{}/confirm",
            held["claim_id"].as_str().unwrap()
        )))
        .bearer_auth(pass)
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status(), 200);
    app.step(1_000).await;
    let said = eventually("the sold-out end", BROWSER_PATIENCE, || async {
        let state = attr_of(&browser, "#message", "data-state").await;
        if state.as_deref() != Some("closed") {
            return None;
        }
        text_of(&browser, "message").await
    })
    .await;
    assert!(said.starts_with("Sold out"), "{said}");
    screenshot(&browser, "sold-out").await;
}

/// A countdown's `HH:MM:SS` as seconds; `None` for anything else (such as
/// the text shown once it is over).
fn clock_seconds(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split(':').collect();
    let two_digits = |part: &&str| part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit());
    if parts.len() != 3 || !parts.iter().all(two_digits) {
        return None;
    }
    parts.iter().try_fold(0, |total, part| {
        Some(total * 60 + part.parse::<u64>().ok()?)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn countdown_then_the_drawn_position_then_admission() {
    const OPENS_IN_S: u64 = 8;
    const TICK_MS: u64 = 1_000;
    const ADMIT_PER_TICK: u64 = 2;
    const OTHERS: usize = 5;
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    let browser = driver.browser(390, 844, json!({})).await;

    // The page counts down on the browser's clock (Date.now()), so the
    // driven server clock is set to the real time first: `opens_at` is then
    // OPENS_IN_S real seconds away for both. The server clock still moves
    // only when the test steps it, so the opening and every tick happen when
    // the test says, however slow the machine; the real clock only has to
    // bring the browser's countdown to zero, which the test waits for.
    // The clock starts half a second past a whole second: ticks fall on the
    // half seconds and the opening (whole seconds on the wire) between two
    // of them, so the step onto the opening draws the line without
    // admitting anyone, and the page can show the drawn position first.
    let real_now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let second = real_now / 1_000 * 1_000;
    app.clock.set_ms(second + 500);
    let opens_at = second + OPENS_IN_S * 1_000;
    app.create_room(
        "drop",
        json!({"name": "Midnight drop", "admit_per_tick": ADMIT_PER_TICK, "tick_ms": TICK_MS,
               "paused": false, "opens_at": rfc3339(opens_at),
               "target_url": app.url("/demo/target")}),
    )
    .await;
    for _ in 0..OTHERS {
        let status = app.join_api("drop").await;
        assert!(
            status["state"] == "waiting" && status["position"].is_null(),
            "in the pre-queue, without a position: {status}"
        );
    }

    browser.goto(&app.url("/rooms/drop")).await.unwrap();
    wait_until_live(&browser, "the WebSocket to be live").await;
    assert!(displayed(&browser, "opening").await, "the countdown card");
    assert_eq!(
        attr_of(&browser, "#message", "data-state").await.as_deref(),
        Some("pre-queue")
    );
    assert_eq!(
        text_of(&browser, "position").await.as_deref(),
        Some("Drawn at the opening")
    );
    let left = eventually("a running countdown", BROWSER_PATIENCE, || async {
        clock_seconds(&text_of(&browser, "countdown").await?)
    })
    .await;
    assert!(
        (1..=OPENS_IN_S).contains(&left),
        "{left} s shown for an opening {OPENS_IN_S} s away"
    );
    // The entry shown is the one the server gave this visitor's ticket.
    let ticket = browser
        .get_named_cookie("wr_ticket_drop")
        .await
        .expect("the page's join set the ticket cookie")
        .value()
        .to_string();
    let mine: Value = app.status_api("drop", &ticket).await.json().await.unwrap();
    let entry = mine["entry"]
        .as_str()
        .expect("a pre-queue entry")
        .to_string();
    assert!(
        entry.len() == 24 && entry.bytes().all(|b| b.is_ascii_hexdigit()),
        "an entry of 12 bytes in hex: {entry}"
    );
    assert!(displayed(&browser, "entry").await, "the entry is shown");
    assert_eq!(text_of(&browser, "entry").await, Some(entry.clone()));
    screenshot(&browser, "pre-queue").await;

    eventually(
        "the countdown to reach the opening",
        Duration::from_secs(OPENS_IN_S) + BROWSER_PATIENCE,
        || async {
            (text_of(&browser, "countdown").await.as_deref() == Some("Drawing the order…"))
                .then_some(())
        },
    )
    .await;
    // A tick just before the opening admits nobody; then the opening.
    app.step(OPENS_IN_S * 1_000 - 1_000).await;
    app.step(500).await;

    // The drawn order, as anyone can check it: the entries listed in
    // ascending HMAC-SHA256(seed, entry).
    let draw = app
        .http
        .get(app.url("/api/rooms/drop/draw"))
        .fetch_json()
        .await;
    let seed: DrawSeed = draw["seed"]
        .as_str()
        .expect("the seed, revealed at the opening")
        .parse()
        .expect("64 hex characters");
    let listed = app
        .http
        .get(app.url("/api/rooms/drop/draw/entries"))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200, "the entries after the opening");
    let listed: Vec<String> = listed
        .text()
        .await
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut recomputed = listed.clone();
    recomputed.sort_by_cached_key(|e| seed.key_of(&e.parse::<EntryId>().expect("an entry")));
    assert_eq!(recomputed, listed, "the entries in drawn order");
    assert_eq!(listed.len(), OTHERS + 1, "{listed:?}");
    let drawn = listed
        .iter()
        .position(|e| *e == entry)
        .expect("the browser's entry is drawn") as u64
        + 1;

    let shown = eventually("the drawn position", BROWSER_PATIENCE, || async {
        position(&browser).await
    })
    .await;
    assert_eq!(shown, drawn, "line {drawn} of /draw/entries");
    assert!(
        !displayed(&browser, "opening").await,
        "the countdown card goes"
    );
    assert_eq!(
        attr_of(&browser, "#message", "data-state").await.as_deref(),
        Some("waiting")
    );
    // Said at once, in the same update that shows the position; the next
    // announcement waits at least ten seconds unless it is the admission.
    assert_eq!(
        text_of(&browser, "announce").await,
        Some(format!(
            "The draw is done. Your position in line is {drawn}."
        ))
    );
    screenshot(&browser, "drawn").await;

    // Ticks admit the line in drawn order, ADMIT_PER_TICK at a time: the
    // page counts its place down, and on its turn goes on to the target.
    let turn = drawn.div_ceil(ADMIT_PER_TICK);
    for tick in 1..turn {
        app.step(TICK_MS).await;
        let expected = drawn - tick * ADMIT_PER_TICK;
        eventually(
            &format!("position {expected} after tick {tick}"),
            BROWSER_PATIENCE,
            || async { (position(&browser).await == Some(expected)).then_some(()) },
        )
        .await;
    }
    app.step(TICK_MS).await;
    eventually(
        &format!("the redirect to the target on tick {turn}"),
        BROWSER_PATIENCE,
        || async { (path_of(&browser).await == "/demo/target").then_some(()) },
    )
    .await;
    assert_eq!(
        attr_of(&browser, "#pass-state", "data-valid")
            .await
            .as_deref(),
        Some("true")
    );
    browser.close().await.unwrap();
}

/// How many requests the page has made to paths containing `part`.
async fn requests_to(browser: &Client, part: &str) -> u64 {
    browser
        .execute(
            "var part = arguments[0]; return performance.getEntriesByType('resource')\
               .filter(function (e) { return e.name.indexOf(part) >= 0; }).length;",
            vec![json!(part)],
        )
        .await
        .unwrap()
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_service_restart_close_the_page_reconnects_and_keeps_its_place() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("drop", json!({"paused": true, "admit_per_tick": 1}))
        .await;
    for _ in 0..2 {
        app.join_api("drop").await;
    }
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/drop")).await.unwrap();
    wait_until_live(&browser, "the WebSocket to be live").await;
    assert_eq!(position(&browser).await, Some(3));
    let (joins, polls) = (
        requests_to(&browser, "/join").await,
        requests_to(&browser, "/status").await,
    );
    let room = waitroom::words::RoomId::parse("drop").unwrap();
    let sockets = || {
        app.handle
            .hub
            .registry()
            .with_room(&room, |sockets| {
                sockets.sockets.keys().copied().collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let before = sockets();
    assert_eq!(before.len(), 1);
    assert_eq!(joins, 1, "the page joined once");

    // What a node does at the end of its drain: every socket gets 1012.
    app.handle.hub.close_every_socket_for_restart();
    eventually("the page to reconnect", BROWSER_PATIENCE, || async {
        let now = sockets();
        (now.len() == 1 && now != before).then_some(())
    })
    .await;
    wait_until_live(&browser, "the new WebSocket to be live").await;
    assert_eq!(position(&browser).await, Some(3), "the same place");
    assert_eq!(
        (
            requests_to(&browser, "/join").await,
            requests_to(&browser, "/status").await
        ),
        (joins, polls),
        "back over a socket, with the same ticket, without joining or polling"
    );
    // And the place still moves live.
    app.patch_room("drop", json!({"paused": false})).await;
    app.step(5_000).await;
    eventually("the next tick's position", BROWSER_PATIENCE, || async {
        position(&browser).await.filter(|&p| p == 2)
    })
    .await;
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_korean_browser_gets_the_sale_page_in_korean() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "hall",
        json!({"name": "봄 공연", "admit_per_tick": 1, "tick_ms": 1000}),
    )
    .await;
    app.put_sale("hall", json!({"seats": ["A1", "A2"], "per_user_limit": 1}))
        .await;
    let pass = admitted_pass(&app, "hall", 1_000).await;
    let browser = driver
        .browser(390, 844, json!({"intl": {"accept_languages": "ko-KR,ko"}}))
        .await;
    browser
        .goto(&app.url(&format!("/rooms/hall/sale?wr_pass={pass}")))
        .await
        .unwrap();
    assert_eq!(
        attr_of(&browser, "html", "lang").await.as_deref(),
        Some("ko")
    );
    // Drawn by the scripts, from the texts the page handed them.
    eventually("the Korean seat map", BROWSER_PATIENCE, || async {
        (text_of(&browser, "sale-heading").await.as_deref() == Some("좌석을 고르세요"))
            .then_some(())
    })
    .await;
    assert_eq!(
        attr_of(&browser, r#"#seat-map [data-seat="A1"]"#, "aria-label")
            .await
            .as_deref(),
        Some("좌석 A1, 빈 좌석")
    );
    assert_eq!(text_of(&browser, "hold").await.as_deref(), Some("예약"));
    screenshot(&browser, "sale-page-ko").await;
    browser.close().await.unwrap();
}

/// Words of the big number split across lines, and whether it overflows
/// its box (issue 27, item 7: "Auslosung" broke as "Auslo-sung" on a phone).
async fn broken_words(browser: &Client) -> Value {
    browser
        .execute(
            r#"const el = document.getElementById('position');
            const text = el.firstChild;
            const broken = [];
            const re = /\S+/g;
            let m;
            while ((m = re.exec(text.data)) !== null) {
              const range = document.createRange();
              range.setStart(text, m.index);
              range.setEnd(text, m.index + m[0].length);
              const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
              if (lines.size > 1) broken.push(m[0]);
            }
            return { text: text.data, broken, overflows: el.scrollWidth > el.clientWidth };"#,
            vec![],
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_big_number_never_breaks_a_word_on_a_small_phone() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    let opens_at = rfc3339(support::START_MS + 3_600_000);
    app.create_room("later", json!({"name": "Drop", "opens_at": opens_at}))
        .await;
    app.create_room(
        "lottery",
        json!({"name": "Drop", "queue_method": "random", "paused": true}),
    )
    .await;
    app.join_api("lottery").await;
    let browser = driver.browser(320, 640, json!({})).await;
    for lang in ["de", "en", "fr", "pt-BR", "es", "ja"] {
        for room in ["later", "lottery"] {
            browser
                .goto(&app.url(&format!("/rooms/{room}?lang={lang}")))
                .await
                .unwrap();
            eventually("the phrase in the big number", BROWSER_PATIENCE, || async {
                attr_of(&browser, "#position", "class")
                    .await
                    .filter(|class| class.contains("phrase"))
            })
            .await;
            let found = broken_words(&browser).await;
            assert_eq!(found["broken"], json!([]), "{lang} {room}: {found}");
            assert_eq!(found["overflows"], false, "{lang} {room}: {found}");
        }
    }
    screenshot(&browser, "big-number-phrase").await;
    browser.close().await.unwrap();
}

/// Issue 27, item 1: a code in the waiting page's address puts the visitor
/// in the priority line, and leaves the address bar (a link shared after
/// is not a code shared).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_in_the_address_puts_the_visitor_ahead_and_leaves_the_address_bar() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("presale", json!({"paused": true})).await;
    let added = app
        .admin(reqwest::Method::POST, "/api/admin/rooms/presale/codes")
        .json(&json!({"group": "fanclub", "codes": ["FAN-7c4e9a1b3d5f8e20"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    for _ in 0..3 {
        app.join_api("presale").await;
    }
    let browser = driver.browser(390, 844, json!({})).await;
    browser
        .goto(&app.url("/rooms/presale?code=FAN-7c4e9a1b3d5f8e20&utm=mail"))
        .await
        .unwrap();
    let seen = eventually("the code holder's position", BROWSER_PATIENCE, || async {
        position(&browser).await
    })
    .await;
    assert_eq!(seen, 1, "ahead of the three who joined without a code");
    let address = browser.current_url().await.unwrap();
    assert!(
        !address.as_str().contains("code="),
        "the code leaves the address bar: {address}"
    );
    assert!(
        address.as_str().contains("utm=mail"),
        "the rest stays: {address}"
    );
    let groups = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/presale/codes")
        .fetch_json()
        .await;
    assert_eq!(groups["groups"][0]["used"], 1);

    // The same code again, in another browser: it was used.
    let other_driver = Driver::start().await;
    let other = other_driver.browser(390, 844, json!({})).await;
    other
        .goto(&app.url("/rooms/presale?code=FAN-7c4e9a1b3d5f8e20"))
        .await
        .unwrap();
    let said = eventually("the used code's message", BROWSER_PATIENCE, || async {
        text_of(&other, "message")
            .await
            .filter(|m| m.contains("used"))
    })
    .await;
    assert!(said.contains("used already"), "{said}");
}

/// The admin page's codes panel: a group of generated codes is added, its
/// CSV offered once, the group listed with used/total, then removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_codes_panel_adds_lists_and_removes_groups() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("presale", json!({"name": "Presale", "paused": true}))
        .await;
    app.admin(reqwest::Method::POST, "/api/admin/rooms/presale/codes")
        .json(&json!({"group": "staff", "priority": 0, "uses": 2, "codes": ["STAFF-3f9c1a7e5b2d4c6f", "STAFF-8a0e1b3d5f7a9c2e"]}))
        .send()
        .await
        .unwrap();
    let browser = driver.browser(1280, 1400, json!({})).await;
    admin_login(&browser, &app).await;
    eventually("the listed group", BROWSER_PATIENCE, || async {
        attr_of(
            &browser,
            "#codes-presale-groups tr[data-group='staff']",
            "data-group",
        )
        .await
    })
    .await;
    let fill = |id: &'static str, text: &'static str| {
        let browser = browser.clone();
        async move {
            let field = browser.find(Locator::Id(id)).await.unwrap();
            field.clear().await.unwrap();
            field.send_keys(text).await.unwrap();
        }
    };
    fill("codes-presale-group", "fanclub").await;
    fill("codes-presale-priority", "2").await;
    fill("codes-presale-generate", "25").await;
    click(&browser, Locator::Id("codes-presale-submit")).await;
    let link = eventually("the CSV download", BROWSER_PATIENCE, || async {
        browser
            .find(Locator::Css("#codes-presale-result a.codes-download"))
            .await
            .ok()
    })
    .await;
    assert_eq!(
        link.attr("download").await.unwrap().as_deref(),
        Some("codes-presale-fanclub.csv")
    );
    let used = eventually("the new group's row", BROWSER_PATIENCE, || async {
        let row = browser
            .find(Locator::Css(
                "#codes-presale-groups tr[data-group='fanclub']",
            ))
            .await
            .ok()?;
        row.text().await.ok()
    })
    .await;
    assert!(used.contains("0 / 25"), "{used}");
    screenshot(&browser, "admin-codes").await;
    if let Some(dir) = std::env::var_os("WAITROOM_DOCS_IMAGES") {
        let panel = browser.find(Locator::Id("codes-presale")).await.unwrap();
        let png = panel.screenshot().await.unwrap();
        std::fs::write(Path::new(&dir).join("admin-codes.png"), png).unwrap();
    }
    let groups = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/presale/codes")
        .fetch_json()
        .await;
    assert_eq!(groups["groups"].as_array().unwrap().len(), 2);

    // Removing asks first; accepted, the group is gone.
    browser
        .execute("window.confirm = function () { return true; };", vec![])
        .await
        .unwrap();
    click(
        &browser,
        Locator::Css("#codes-presale-groups tr[data-group='staff'] button"),
    )
    .await;
    eventually("the removed group gone", BROWSER_PATIENCE, || async {
        browser
            .find(Locator::Css("#codes-presale-groups tr[data-group='staff']"))
            .await
            .is_err()
            .then_some(())
    })
    .await;
    let groups = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/presale/codes")
        .fetch_json()
        .await;
    assert_eq!(groups["groups"][0]["group"], "fanclub");
    assert_eq!(groups["groups"].as_array().unwrap().len(), 1);
}

/// A drop's report on the admin page: every count the API gives, the
/// histogram's bars, the rows' chart, the sale, a CSV that downloads, and
/// a print stylesheet. With `WAITROOM_SCREENSHOT_DIR=docs/src/images` this
/// makes the book's `admin-report.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_page_shows_what_the_api_counts_and_prints() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room(
        "drop",
        json!({"name": "Spring drop", "admit_per_tick": 4, "tick_ms": 10_000,
               "max_active": 40, "pass_ttl_s": 120, "abandon_after_s": 86_400}),
    )
    .await;
    app.put_sale("drop", json!({"stock": 500, "per_user_limit": 2}))
        .await;
    // Ten minutes of 36 arrivals a minute, then ten of 6; one in ten leaves.
    for step in 0..120 {
        let arrivals = if step < 60 { 6 } else { 1 };
        for n in 0..arrivals {
            let joined = app.join_api("drop").await;
            if n == 0 && step % 10 == 3 {
                let ticket = joined["ticket"].as_str().unwrap();
                app.http
                    .post(app.url("/api/rooms/drop/leave"))
                    .bearer_auth(ticket)
                    .send()
                    .await
                    .unwrap();
            }
        }
        app.step(10_000).await;
    }
    let api = app
        .admin(reqwest::Method::GET, "/api/admin/rooms/drop/report")
        .fetch_json()
        .await;
    assert!(api["admitted"].as_u64().unwrap() > 100 && api["left"].as_u64().unwrap() > 0);

    // Tall enough for the whole report in one screenshot.
    let browser = driver.browser(1000, 2400, json!({})).await;
    admin_login(&browser, &app).await;
    click(&browser, Locator::Id("report-drop")).await;
    eventually("the report", BROWSER_PATIENCE, || async {
        (path_of(&browser).await == "/admin/rooms/drop/report").then_some(())
    })
    .await;
    for count in [
        "arrivals",
        "admitted",
        "passed_through",
        "left",
        "peak_waiting",
        "peak_joins_per_minute",
    ] {
        let shown = attr_text(&browser, &format!("[data-count=\"{count}\"]")).await;
        assert_eq!(shown, api[count].to_string(), "{count}");
    }
    let max = api["wait_seconds"]["max"].as_f64().unwrap();
    assert_eq!(
        attr_text(&browser, "[data-wait=\"max\"]").await,
        format!("{max:.1} s")
    );
    assert_eq!(
        browser
            .find_all(Locator::Css("rect.bar"))
            .await
            .unwrap()
            .len(),
        14
    );
    assert_eq!(attr_text(&browser, "[data-sale=\"left\"]").await, "500");
    let points = attr_of(&browser, "polyline.series-arrivals", "points")
        .await
        .unwrap();
    assert_eq!(
        points.split(' ').count(),
        api["minutes"].as_array().unwrap().len(),
        "a point a row"
    );
    // The CSV link downloads the rows, with the operator's session.
    let csv = browser
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
            fetch(document.querySelector('a[download]').href).then(r => r.text()).then(done, e => done('failed: ' + e));"#,
            vec![],
        )
        .await
        .unwrap();
    let csv = csv.as_str().unwrap();
    assert!(
        csv.starts_with("at,span_s,arrivals,admitted,waiting,active,wait_p50,wait_p90\n"),
        "{csv:.200}"
    );
    assert_eq!(
        csv.lines().count(),
        api["minutes"].as_array().unwrap().len() + 1
    );
    // Printed, the page leaves its links out.
    let print_hides_links = browser
        .execute(
            r#"return [...document.styleSheets].flatMap(s => [...s.cssRules])
                .some(r => r.media && r.media.mediaText === 'print' && r.cssText.includes('.report-nav'));"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(print_hides_links, json!(true));
    if let Some(dir) = std::env::var_os("WAITROOM_SCREENSHOT_DIR") {
        let report = browser.find(Locator::Css("main.report")).await.unwrap();
        let png = report
            .screenshot()
            .await
            .expect("a screenshot of the report");
        std::fs::write(Path::new(&dir).join("admin-report.png"), png).unwrap();
    }
    browser.close().await.unwrap();
}

/// The text of the first element `css` finds, trimmed.
async fn attr_text(client: &Client, css: &str) -> String {
    let element = client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|error| panic!("no element {css}: {error}"));
    let text = element
        .prop("textContent")
        .await
        .unwrap()
        .unwrap_or_default();
    text.trim().to_string()
}
