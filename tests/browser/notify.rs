//! Step away, we'll call you (api.md, "Step away: notifications"), from
//! the visitor's side: the resume link's rules over HTTP (a `GET` spends
//! nothing, a `POST` gives the browser the place once, a browser's own
//! place is never replaced by a link, a forged code is refused, and the
//! code never reaches the log), and the waiting page's "Notify me" in a
//! real Chromium: the permission (granted through DevTools), the service
//! worker, a push subscription (the browser's `PushManager.subscribe`
//! stood in for: headless Chromium reaches no push service) sent to the
//! notify route, the away note telling the truth, a push delivered to the
//! worker showing its notification, and the resume link's button.

use waitroom_testkit as support;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use support::browser::Driver;
use support::origin::{ProtectedOrigin, Says};
use support::{START_MS, TestApp, eventually, test_settings};
use waitroom::startup::Stores;
use waitroom::words::RoomId;
use waitroom::words::clock::ManualClock;
use waitroom::words::credentials::Credentials;
use waitroom::words::notify::EventKind;
use waitroom::words::push::parse_push_host;

const BROWSER_PATIENCE: Duration = Duration::from_secs(30);
const WEBHOOK_SECRET: &str = "0123456789abcdef0123456789abcdef";

/// The test app's credentials (`test_settings`' secret): resume codes as
/// its notifications would carry them.
fn credentials() -> Credentials {
    Credentials::from_secret(test_settings().secret.as_deref().unwrap())
}

/// A client with a cookie jar that follows no redirect: one browser.
fn browser_like() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn error_code(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON error");
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_string(),
    )
}

#[tokio::test]
async fn the_resume_link_gives_the_place_once_and_never_replaces_a_held_one() {
    let app = TestApp::spawn().await;
    app.create_room(
        "r",
        json!({"name": "Spring drop", "paused": true,
               "notify_webhook_url": "https://hooks.example/wr", "notify_webhook_secret": WEBHOOK_SECRET}),
    )
    .await;
    let room = RoomId::parse("r").unwrap();
    let credentials = credentials();

    // A visitor who asked to be notified, as the notify route keeps one.
    let joined = app.join_api("r").await;
    let ticket = joined["ticket"].as_str().unwrap().to_string();
    let position = joined["position"].clone();
    let asked = app
        .http
        .post(app.url("/api/rooms/r/notify"))
        .bearer_auth(&ticket)
        .json(&json!({"contact": "+15550100"}))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 204);
    let visitor = credentials.ticket_holder(&room, &ticket).unwrap();
    let code = credentials.resume_code(&room, visitor, EventKind::Near);
    let link = app.url(&format!("/rooms/r/resume?code={code}"));

    // A GET (a link scanner, a preview) spends nothing: a page with one
    // button, posting to the same address.
    for _ in 0..2 {
        let page = browser_like().get(&link).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert!(
            page.headers().get(SET_COOKIE).is_none(),
            "a GET gives nothing"
        );
        let html = page.text().await.unwrap();
        assert!(
            html.contains(&format!(
                r#"<form method="post" action="/rooms/r/resume?code={code}">"#
            )),
            "{html}"
        );
        assert_eq!(html.matches("<button").count(), 1, "{html}");
    }

    // The first browser to POST it takes the place.
    let first = browser_like();
    let taken = first.post(&link).send().await.unwrap();
    assert_eq!(taken.status(), 303);
    assert_eq!(taken.headers()[LOCATION], "/rooms/r");
    let cookie = taken.headers()[SET_COOKIE].to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("wr_ticket_r=") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let status: Value = first
        .get(app.url("/api/rooms/r/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["state"], "waiting", "{status}");
    assert_eq!(status["position"], position, "the same place: {status}");
    assert_eq!(status["notify"], true, "{status}");
    let holder = credentials
        .ticket_holder(&room, status["ticket"].as_str().unwrap())
        .unwrap();
    assert_eq!(holder, visitor, "the same visitor's place");

    // Another browser comes too late: the link was used (JSON for an app,
    // a page for a person).
    let (status, code_of) = error_code(
        browser_like()
            .post(&link)
            .header(ACCEPT, "application/json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), code_of.as_str()), (410, "resume_used"));
    let page = browser_like().post(&link).send().await.unwrap();
    assert_eq!(page.status(), 410);
    assert!(page.headers().get(SET_COOKIE).is_none());
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"data-code="resume_used""#), "{html}");
    assert!(html.contains("another device"), "{html}");

    // The browser that holds the place may post it again: to the room.
    let again = first.post(&link).send().await.unwrap();
    assert_eq!(again.status(), 303);
    assert_eq!(again.headers()[LOCATION], "/rooms/r");

    // A browser holding another visitor's place in the room keeps it: a
    // link never replaces it, even an unspent one.
    let other = browser_like();
    let joined_other: Value = other
        .post(app.url("/api/rooms/r/join"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(joined_other["state"], "waiting");
    let admitted_code = credentials.resume_code(&room, visitor, EventKind::Admitted);
    let admitted_link = app.url(&format!("/rooms/r/resume?code={admitted_code}"));
    let (status, code_of) = error_code(
        other
            .post(&admitted_link)
            .header(ACCEPT, "application/json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status.as_u16(), code_of.as_str()), (409, "place_held"));
    let page = other.post(&admitted_link).send().await.unwrap();
    assert_eq!(page.status(), 409);
    assert!(page.headers().get(SET_COOKIE).is_none());
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"data-code="place_held""#), "{html}");
    // ... and the code was not spent by the refusal.
    let fresh = browser_like();
    assert_eq!(
        fresh.post(&admitted_link).send().await.unwrap().status(),
        303
    );

    // A forged code, another room's, or none: 400, nothing given.
    let other_room = RoomId::parse("elsewhere").unwrap();
    let elsewhere = credentials.resume_code(&other_room, visitor, EventKind::Near);
    let forged = format!("{}x", &code[..code.len() - 1]);
    for query in [
        format!("code={forged}"),
        format!("code={elsewhere}"),
        "code=".to_string(),
        String::new(),
    ] {
        let url = app.url(&format!("/rooms/r/resume?{query}"));
        let (status, code_of) = error_code(
            browser_like()
                .post(&url)
                .header(ACCEPT, "application/json")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status.as_u16(), code_of.as_str()),
            (400, "invalid_resume"),
            "{query}"
        );
        for page in [
            browser_like().post(&url).send().await.unwrap(),
            browser_like().get(&url).send().await.unwrap(),
        ] {
            assert_eq!(page.status(), 400, "{query}");
            assert!(page.headers().get(SET_COOKIE).is_none());
            let html = page.text().await.unwrap();
            assert!(html.contains(r#"data-code="invalid_resume""#), "{html}");
            assert!(!html.contains("<form"), "{html}");
        }
    }
    // An unknown room: the unknown-room page.
    let page = browser_like()
        .post(app.url(&format!("/rooms/nowhere/resume?code={code}")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);

    // The code is a credential: the log has the path, never the code.
    let log = support::logs::captured();
    assert!(
        log.contains("/rooms/r/resume?code=[redacted]"),
        "the requests were logged"
    );
    for secret in [&code, &admitted_code, &forged] {
        let mac = secret.rsplit('.').next().unwrap();
        assert!(!log.contains(mac), "a resume code was logged");
    }
}

/// DevTools through chromedriver (`goog/cdp/execute`): the command's result.
async fn cdp(driver: &Driver, browser: &Client, cmd: &str, params: Value) -> Value {
    let session = browser.session_id().await.unwrap().expect("a session id");
    let response = reqwest::Client::new()
        .post(format!(
            "{}/session/{session}/goog/cdp/execute",
            driver.url()
        ))
        .json(&json!({"cmd": cmd, "params": params}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{cmd}: {status} {body}");
    body["value"].clone()
}

async fn run(browser: &Client, script: &str) -> Value {
    browser.execute(script, vec![]).await.unwrap()
}

/// Runs an async script (its result is what `done` is called with).
async fn run_async(browser: &Client, script: &str) -> Value {
    browser
        .execute_async(
            &format!("const done = arguments[arguments.length - 1]; {script}"),
            vec![],
        )
        .await
        .unwrap()
}

async fn text_of(browser: &Client, id: &str) -> String {
    let script = format!(
        "const e = document.getElementById('{id}'); return e ? e.textContent.trim() : null;"
    );
    run(browser, &script)
        .await
        .as_str()
        .unwrap_or("")
        .to_string()
}

async fn visible(browser: &Client, id: &str) -> bool {
    let script = format!(
        "const e = document.getElementById('{id}'); return Boolean(e && !e.hidden && e.offsetParent !== null);"
    );
    run(browser, &script).await == Value::Bool(true)
}

/// A browser's push keys, made by the test: a P-256 point (from a fixed
/// scalar) and a 16-byte secret, base64url as `toJSON()` gives them.
fn browser_keys() -> (String, String) {
    let secret = p256::SecretKey::from_slice(&[7u8; 32]).expect("a valid scalar");
    let point = secret.public_key().to_sec1_bytes();
    assert_eq!(point.len(), 65, "uncompressed");
    (
        URL_SAFE_NO_PAD.encode(point),
        URL_SAFE_NO_PAD.encode([9u8; 16]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_me_subscribes_the_browser_and_the_page_tells_the_truth() {
    // A stand-in push service on loopback, which the node may send to.
    let push_service = ProtectedOrigin::start(Says::Protected).await;
    let mut settings = test_settings();
    settings.push_hosts = vec![parse_push_host("127.0.0.1").unwrap()];
    settings.outbound_allow_networks = vec!["127.0.0.0/8".parse().unwrap()];
    let clock = ManualClock::new(START_MS);
    let app = TestApp::spawn_with(
        settings,
        Stores::memory(std::sync::Arc::new(clock.clone())),
        clock,
    )
    .await;
    app.create_room(
        "n",
        json!({"name": "Spring drop", "paused": true, "notify_return_s": 600,
               "target_url": app.url("/demo/target")}),
    )
    .await;
    for _ in 0..2 {
        app.join_api("n").await;
    }
    let driver = Driver::start().await;
    let browser = driver.browser(390, 844, json!({})).await;
    cdp(
        &driver,
        &browser,
        "Browser.grantPermissions",
        json!({"origin": app.address, "permissions": ["notifications"]}),
    )
    .await;
    // The browser's PushManager, stood in for: the subscription the test
    // made, its endpoint the stand-in push service; the options noted.
    let endpoint = format!("http://127.0.0.1:{}/push/browser-1", push_service.port);
    let (p256dh, auth) = browser_keys();
    let stub = format!(
        "(function () {{\
          if (typeof PushManager !== 'function') return;\
          const json = {{endpoint: {endpoint:?}, expirationTime: null, keys: {{p256dh: {p256dh:?}, auth: {auth:?}}}}};\
          PushManager.prototype.getSubscription = function () {{ return Promise.resolve(null); }};\
          PushManager.prototype.subscribe = function (options) {{\
            const key = new Uint8Array(options.applicationServerKey);\
            window.subscribedWith = {{userVisibleOnly: options.userVisibleOnly, key: Array.from(key)}};\
            return Promise.resolve({{endpoint: json.endpoint, options: options,\
              toJSON: function () {{ return json; }}, unsubscribe: function () {{ return Promise.resolve(true); }}}});\
          }};\
        }})();"
    );
    cdp(
        &driver,
        &browser,
        "Page.addScriptToEvaluateOnNewDocument",
        json!({"source": stub}),
    )
    .await;

    browser.goto(&app.url("/rooms/n")).await.unwrap();
    eventually("the page's place", BROWSER_PATIENCE, || async {
        (text_of(&browser, "position").await == "3").then_some(())
    })
    .await;
    assert!(
        visible(&browser, "notify").await,
        "the section shows while waiting"
    );
    assert!(visible(&browser, "notify-on").await);
    assert!(!visible(&browser, "notify-off").await);
    assert!(
        run(
            &browser,
            "return document.getElementById('notify-contact');"
        )
        .await
        .is_null(),
        "no webhook, no contact field"
    );
    let before = text_of(&browser, "keep-open").await;
    assert!(before.contains("kept for"), "{before}");

    browser
        .find(Locator::Id("notify-on"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the request to hold", BROWSER_PATIENCE, || async {
        visible(&browser, "notify-off").await.then_some(())
    })
    .await;
    let note = text_of(&browser, "keep-open").await;
    assert!(
        note.contains("until we call you") && note.contains("10 min"),
        "the note says the place is kept until the call, then notify_return_s: {note}"
    );
    assert!(!visible(&browser, "notify-on").await);
    assert!(
        text_of(&browser, "notify-state")
            .await
            .contains("when your turn is near")
    );

    // What the page subscribed with: the server's VAPID key, visible only.
    let key: Value = app
        .http
        .get(app.url("/api/push/key"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = URL_SAFE_NO_PAD
        .decode(key["public_key"].as_str().unwrap())
        .unwrap();
    let subscribed = run(&browser, "return window.subscribedWith || null;").await;
    assert_eq!(subscribed["userVisibleOnly"], true, "{subscribed}");
    assert_eq!(subscribed["key"], json!(key), "{subscribed}");
    // The worker serves every waiting page.
    let scope = run_async(
        &browser,
        "navigator.serviceWorker.getRegistration('/rooms/n').then((r) => done(r ? r.scope : null));",
    )
    .await;
    assert_eq!(scope, json!(app.url("/rooms/")));

    // The server kept it: the place's status says so.
    let ticket = browser
        .get_named_cookie("wr_ticket_n")
        .await
        .expect("the page's ticket cookie")
        .value()
        .to_string();
    let status: Value = app.status_api("n", &ticket).await.json().await.unwrap();
    assert_eq!(status["notify"], true, "{status}");

    // A push reaches the worker: it shows the event's notification, its
    // resume link kept for a click.
    let room = RoomId::parse("n").unwrap();
    let visitor = credentials().ticket_holder(&room, &ticket).unwrap();
    let code = credentials().resume_code(&room, visitor, EventKind::Near);
    let resume_url = app.url(&format!("/rooms/n/resume?code={code}"));
    let event = json!({"id": "e1", "type": "near", "room": "n", "visitor": visitor.to_string(),
                       "position": 3, "resume_url": resume_url, "at": "2026-01-01T00:00:00Z"});
    cdp(&driver, &browser, "ServiceWorker.enable", json!({})).await;
    let shown = deliver_push(&driver, &browser, &app.address, &event.to_string()).await;
    assert_eq!(shown["title"], "Your turn is near", "{shown}");
    assert_eq!(shown["url"], json!(resume_url), "{shown}");

    // "Stop notifying me": the request is dropped, the note says so.
    browser
        .find(Locator::Id("notify-off"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the request to go", BROWSER_PATIENCE, || async {
        visible(&browser, "notify-on").await.then_some(())
    })
    .await;
    let status: Value = app.status_api("n", &ticket).await.json().await.unwrap();
    assert_eq!(status["notify"], false, "{status}");
    assert!(text_of(&browser, "keep-open").await.contains("kept for"));

    // The notification's link: a page with one button, which posts, and
    // this browser (holding the place already) is back in the room.
    browser.goto(&resume_url).await.unwrap();
    assert!(
        visible(&browser, "resume").await,
        "the resume page's button"
    );
    browser
        .find(Locator::Id("resume"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the waiting page", BROWSER_PATIENCE, || async {
        let url = browser.current_url().await.ok()?;
        (url.path() == "/rooms/n").then_some(())
    })
    .await;
    eventually("the same place", BROWSER_PATIENCE, || async {
        (text_of(&browser, "position").await == "3").then_some(())
    })
    .await;
    browser.close().await.unwrap();
}

/// Delivers `data` as a push to the origin's service worker (DevTools'
/// `ServiceWorker.deliverPushMessage`), and returns the notification it
/// showed: its title and link. The registration's id is not exposed to
/// pages, so the push is sent to each of the first ids a profile hands out
/// (a push to an id of no registration goes nowhere), and then the page's
/// registration is asked, for as long as a page gets to show something.
async fn deliver_push(driver: &Driver, browser: &Client, origin: &str, data: &str) -> Value {
    let session = browser.session_id().await.unwrap().expect("a session id");
    let http = reqwest::Client::new();
    for id in 0..32 {
        let _ = http
            .post(format!("{}/session/{session}/goog/cdp/execute", driver.url()))
            .json(&json!({"cmd": "ServiceWorker.deliverPushMessage",
                          "params": {"origin": origin, "registrationId": id.to_string(), "data": data}}))
            .send()
            .await;
    }
    let deadline = std::time::Instant::now() + BROWSER_PATIENCE;
    while std::time::Instant::now() < deadline {
        let shown = run_async(
            browser,
            "navigator.serviceWorker.getRegistration('/rooms/').then((r) => r ? r.getNotifications() : [])\
               .then((list) => done(list.length ? {title: list[0].title, url: list[0].data && list[0].data.url} : null));",
        )
        .await;
        if !shown.is_null() {
            return shown;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no push reached the service worker");
}
