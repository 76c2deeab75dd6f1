//! The client module from another origin, in a real browser: a page that
//! this test serves on a port of its own, under another host name
//! (`localhost`, where the node is `127.0.0.1`: another origin and another
//! site, so the browser keeps the node's cookies out and the ticket the
//! page keeps is what carries the place), imports
//! `/static/waitroom-client.js` from the node and follows one visitor
//! from waiting to admitted, through CORS (`--cors-origins`). The page is
//! the example of `docs/src/client.md`, read from there.
//!
//! Needs Debian's `chromium` and `chromium-driver` (see tests/browser/browser.rs).

use waitroom_testkit as support;

use std::sync::Arc;

use fantoccini::{Client, Locator};
use serde_json::json;
use support::browser::Driver;
use support::{PATIENCE, TestApp, eventually, test_settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;

/// The example page of docs/src/client.md, for `node` and `room`.
fn example_page(node: &str, room: &str) -> String {
    let doc = std::fs::read_to_string("docs/src/client.md").expect("docs/src/client.md");
    let block = doc
        .split("<!-- client-example:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- client-example:end -->").next())
        .expect("the example between its markers");
    let html = block
        .trim()
        .strip_prefix("```html")
        .and_then(|rest| rest.strip_suffix("```"))
        .expect("an html block");
    assert!(html.contains("'https://wait.example.com'") && html.contains("'spring-sale'"));
    html.replace("https://wait.example.com", node)
        .replace("spring-sale", room)
}

/// Serves `page` at every path from `listener` (127.0.0.1), until the test ends.
fn serve_app_page(listener: TcpListener, page: String) {
    let page = Arc::new(page);
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            let page = page.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match connection.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{}",
                    page.len(),
                    page
                );
                let _ = connection.write_all(answer.as_bytes()).await;
            });
        }
    });
}

async fn node(cors_origins: Vec<String>) -> TestApp {
    let mut settings = test_settings();
    settings.cors_origins = cors_origins;
    let clock = ManualClock::new(support::START_MS);
    TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await
}

async fn text_of(browser: &Client, id: &str) -> Option<String> {
    let element = browser.find(Locator::Id(id)).await.ok()?;
    element
        .prop("textContent")
        .await
        .ok()
        .flatten()
        .map(|t| t.trim().to_string())
}

/// A node, and the app's page on another origin (`http://localhost:PORT`),
/// listed in the node's `--cors-origins` or not, following room `room`.
async fn node_and_app_page(listed: bool, room: &str) -> (TestApp, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://localhost:{}", listener.local_addr().unwrap().port());
    let app = node(if listed { vec![origin.clone()] } else { vec![] }).await;
    serve_app_page(listener, example_page(&app.address, room));
    (app, origin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_on_another_origin_follows_a_visitor_from_waiting_to_admitted() {
    let (app, page) = node_and_app_page(true, "drop").await;
    let driver = Driver::start().await;
    app.create_room(
        "drop",
        json!({"name": "Drop", "admit_per_tick": 1, "tick_ms": 1000, "paused": true,
               "target_url": app.url("/demo/target")}),
    )
    .await;
    for expected in 1..=2 {
        assert_eq!(app.join_api("drop").await["position"], expected);
    }

    let browser = driver.browser(800, 600, json!({})).await;
    browser.goto(&page).await.unwrap();
    eventually(
        "the app's page to show the visitor waiting third",
        PATIENCE,
        || async {
            let state = text_of(&browser, "state").await?;
            let position = text_of(&browser, "position").await?;
            (state == "waiting" && position == "3").then_some(())
        },
    )
    .await;
    eventually(
        "the status socket to be live, across origins",
        PATIENCE,
        || async { (text_of(&browser, "connection").await? == "live").then_some(()) },
    )
    .await;
    // The page keeps the ticket itself (the node's cookies are a third
    // party's here): it is in its storage, and it is a valid one.
    let kept = browser
        .execute("return localStorage.getItem('wr-ticket:drop');", vec![])
        .await
        .unwrap();
    let ticket = kept.as_str().expect("the page kept its ticket").to_string();
    assert_eq!(app.status_api("drop", &ticket).await.status(), 200);
    // Coming back to the page keeps the place: the kept ticket carries it
    // (the node's cookie, a third party's, does not reach it here).
    browser.refresh().await.unwrap();
    eventually(
        "the reloaded page to show the same place",
        PATIENCE,
        || async {
            let state = text_of(&browser, "state").await?;
            let position = text_of(&browser, "position").await?;
            let connection = text_of(&browser, "connection").await?;
            (state == "waiting" && connection == "live").then_some(())?;
            assert_eq!(position, "3", "the same place, not a new one behind it");
            Some(())
        },
    )
    .await;
    assert_eq!(app.join_api("drop").await["position"], 4, "one place each");

    // The admin API stays closed to the page, listed origin or not.
    let admin = browser
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0] + '/api/admin/rooms', {credentials: 'include'})
               .then(() => done('read'), () => done('refused'));",
            vec![json!(app.address)],
        )
        .await
        .unwrap();
    assert_eq!(admin, "refused");

    // Tick by tick: the position falls live, until the app sends the
    // admitted visitor on to the target with the pass.
    assert_eq!(
        app.patch_room("drop", json!({"paused": false}))
            .await
            .status(),
        200
    );
    let mut last = 3;
    // (The fourth visitor, joined through the API, waits behind.)
    let mut sent_on = false;
    for _ in 0..5 {
        app.step(1_000).await;
        let now = eventually("the app's page to take in the tick", PATIENCE, || async {
            let url = browser.current_url().await.ok()?;
            if url.path() == "/demo/target" {
                return Some(None);
            }
            let position: u64 = text_of(&browser, "position").await?.parse().ok()?;
            (position < last).then_some(Some(position))
        })
        .await;
        match now {
            Some(position) => last = position,
            None => {
                sent_on = true;
                break;
            }
        }
    }
    assert!(sent_on, "never admitted (last position {last})");
    eventually("the target to verify the pass", PATIENCE, || async {
        let element = browser.find(Locator::Id("pass-state")).await.ok()?;
        (element.attr("data-valid").await.ok()?? == "true").then_some(())
    })
    .await;
    browser.close().await.unwrap();
}

/// The bite: the same page, its origin not listed: the browser refuses
/// the module (and would refuse every call), and the page says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cors_origins_the_app_on_another_origin_cannot_use_the_node() {
    let (app, page) = node_and_app_page(false, "drop").await;
    let driver = Driver::start().await;
    app.create_room("drop", json!({"paused": true})).await;
    let browser = driver.browser(800, 600, json!({})).await;
    browser.goto(&page).await.unwrap();
    eventually(
        "the page to find the node unavailable",
        PATIENCE,
        || async { (text_of(&browser, "state").await? == "unavailable").then_some(()) },
    )
    .await;
    // And the calls themselves are refused by the browser too, module or not.
    let answer = browser
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0] + '/api/rooms/drop/join', {method: 'POST', credentials: 'include'})
               .then(() => done('read'), () => done('refused'));",
            vec![json!(app.address)],
        )
        .await
        .unwrap();
    assert_eq!(answer, "refused");
    browser.close().await.unwrap();
}
