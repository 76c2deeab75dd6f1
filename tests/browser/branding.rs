//! A room's branding (api.md "The page: branding and languages"): the
//! `page` config checked field by field, shown on the waiting and sale
//! pages as text, its colours from the room's stylesheet, an `https://`
//! logo's origin in the page's `img-src`; the operator's own templates
//! (`--templates-dir`), a room's own winning over `room.html` and a broken
//! one giving way to the built-in page with a warning; a rooms file's
//! `page` table; and, in headless Chromium, a branded waiting page and the
//! admin page's live preview.

use support::repo;
use waitroom_testkit as support;

use std::fs::OpenOptions;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, Locator};
use reqwest::Method;
use serde_json::{Value, json};
use support::browser::{Driver, TempDir, admin_login};
use support::node::{ADMIN_TOKEN, Node, SECRET};
use support::{FetchJson, START_MS, TestApp, eventually, test_settings};
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;

const BINARY: &str = env!("CARGO_BIN_EXE_waitroom");
const BROWSER_PATIENCE: Duration = Duration::from_secs(30);

/// A branding with every field set, markup and line breaks included.
fn full_page() -> Value {
    json!({
        "title": "Spring drop <2026>",
        "headline": "Spring <i>drop</i>",
        "message": "Doors open at 10:00.\nPlease keep this tab open. <script>alert(1)</script>",
        "logo_url": "https://cdn.example/brand/logo.svg",
        "accent_color": "#0A7A3B",
        "background_color": "#101820",
        "footer": "© Shop & Co.\nTerms apply"
    })
}

async fn get(app: &TestApp, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(app.url(path))
        .send()
        .await
        .unwrap()
}

/// HTML with its escapes written one way (askama writes `&#60;`,
/// minijinja `&lt;`), so a test says what is shown, not how.
fn escapes_alike(html: String) -> String {
    html.replace("&#60;", "&lt;")
        .replace("&#62;", "&gt;")
        .replace("&#38;", "&amp;")
        .replace("&#34;", "&quot;")
        .replace("&#x27;", "&#39;")
        .replace("&#x2f;", "/")
}

async fn page_html(response: reqwest::Response) -> String {
    escapes_alike(response.text().await.unwrap())
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn each_bad_page_field_is_a_400_naming_it_and_changes_nothing() {
    let app = TestApp::spawn().await;
    app.create_room("drop", json!({"page": {"headline": "Kept"}}))
        .await;
    let long = "x".repeat(1_001);
    let cases = [
        ("title", json!({"title": "two\nlines"})),
        ("headline", json!({"headline": "a\u{202E}b"})),
        ("message", json!({"message": "bell\u{7}"})),
        ("footer", json!({"footer": "\u{2066}isolate"})),
        (
            "logo_url",
            json!({"logo_url": "http://cdn.example/logo.png"}),
        ),
        ("logo_url", json!({"logo_url": "//evil.example/logo.png"})),
        (
            "logo_url",
            json!({"logo_url": "https://evil.example,script-src/x.png"}),
        ),
        (
            "logo_url",
            json!({"logo_url": "https://evil.example'/x.png"}),
        ),
        ("accent_color", json!({"accent_color": "green"})),
        ("background_color", json!({"background_color": "#12345g"})),
    ];
    for (field, page) in cases {
        for (method, path, body) in [
            (
                Method::POST,
                "/api/admin/rooms".to_string(),
                json!({"id": "new", "name": "New", "target_url": "/buy", "page": page}),
            ),
            (
                Method::PATCH,
                "/api/admin/rooms/drop".to_string(),
                json!({ "page": page }),
            ),
        ] {
            let response = app
                .admin(method.clone(), &path)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 400, "{method} {field}: {page}");
            let error: Value = response.json().await.unwrap();
            assert_eq!(error["error"]["code"], "invalid_config", "{error}");
            let message = error["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with(&format!("page.{field} ")),
                "{method} {page}: {message}"
            );
        }
    }
    // The budget is the page's as a whole; an unknown field is named too.
    let over = app
        .patch_room("drop", json!({"page": {"message": long, "footer": long}}))
        .await;
    assert_eq!(over.status(), 400);
    let message = over.json::<Value>().await.unwrap()["error"]["message"].clone();
    assert!(
        message
            .as_str()
            .unwrap()
            .starts_with("page must be at most 2000 characters"),
        "{message}"
    );
    let unknown = app
        .patch_room("drop", json!({"page": {"colour": "#ffffff"}}))
        .await;
    assert_eq!(unknown.status(), 400);
    let body = unknown.text().await.unwrap();
    assert!(body.contains("unknown field `colour`"), "{body}");

    let room = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(room["page"], json!({"headline": "Kept"}), "nothing changed");
    let missing = app
        .admin(Method::GET, "/api/admin/rooms/new")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404, "no room was made of a bad page");
}

#[tokio::test]
async fn the_waiting_page_shows_the_branding_as_text_under_its_policy() {
    let app = TestApp::spawn().await;
    let created = app
        .create_room("drop", json!({ "page": full_page() }))
        .await;
    assert_eq!(created["page"]["accent_color"], "#0A7A3B");

    let response = get(&app, "/rooms/drop").await;
    assert_eq!(response.status(), 200);
    let policy = header(&response, "content-security-policy");
    let html = page_html(response).await;
    assert!(
        policy.contains("img-src 'self' data: https://cdn.example;"),
        "{policy}"
    );
    assert!(policy.contains("script-src") || policy.contains("default-src 'self'"));
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    assert!(
        html.contains("<title>Spring drop &lt;2026&gt;</title>"),
        "{html}"
    );
    assert!(
        html.contains(r#"id="room-name">Spring &lt;i&gt;drop&lt;/i&gt;</p>"#),
        "{html}"
    );
    assert!(
        html.contains(
            "Doors open at 10:00.\nPlease keep this tab open. &lt;script&gt;alert(1)&lt;/script&gt;"
        ),
        "the message is text, its line break kept: {html}"
    );
    assert!(!html.contains("<script>alert(1)"), "{html}");
    assert!(
        html.contains(
            r#"<img class="brand-logo" id="brand-logo" src="https://cdn.example/brand/logo.svg""#
        ),
        "{html}"
    );
    assert!(
        html.contains("© Shop &amp; Co.\nTerms apply</footer>"),
        "{html}"
    );
    assert!(html.contains(r#"class="intro brand-text""#), "{html}");
    assert!(!html.contains(" style="), "no inline style: {html}");
    assert!(html.contains(r#"href="/rooms/drop/style.css?v="#), "{html}");

    // The sale page: title, headline, logo, footer, the same policy.
    let sale = get(&app, "/rooms/drop/sale").await;
    let sale_policy = header(&sale, "content-security-policy");
    let sale_html = page_html(sale).await;
    assert_eq!(sale_policy, policy);
    assert!(
        sale_html.contains("<title>Spring drop &lt;2026&gt;</title>"),
        "{sale_html}"
    );
    assert!(
        sale_html.contains("Spring &lt;i&gt;drop&lt;/i&gt;"),
        "{sale_html}"
    );
    assert!(
        sale_html.contains("© Shop &amp; Co.\nTerms apply"),
        "{sale_html}"
    );
    assert!(sale_html.contains(r#"href="/rooms/drop/style.css?v="#));
}

#[tokio::test]
async fn a_room_without_branding_keeps_the_defaults_and_the_policy() {
    let app = TestApp::spawn().await;
    app.create_room("plain", json!({})).await;
    let response = get(&app, "/rooms/plain").await;
    let policy = header(&response, "content-security-policy");
    let html = page_html(response).await;
    assert!(policy.contains("img-src 'self' data:;"), "{policy}");
    assert!(
        html.contains("<title>Room plain · Waiting room</title>"),
        "{html}"
    );
    assert!(html.contains(r#"id="room-name">Room plain</p>"#), "{html}");
    assert!(!html.contains("brand-logo"), "{html}");
    assert!(!html.contains("page-footer"), "{html}");
    assert!(!html.contains("/rooms/plain/style.css"), "{html}");

    // A logo on this site widens nothing.
    app.patch_room("plain", json!({"page": {"logo_url": "/static/logo.png"}}))
        .await;
    let response = get(&app, "/rooms/plain").await;
    assert!(header(&response, "content-security-policy").contains("img-src 'self' data:;"));
}

#[tokio::test]
async fn the_room_stylesheet_carries_the_colours_and_its_version() {
    let app = TestApp::spawn().await;
    app.create_room(
        "drop",
        json!({"page": {"accent_color": "#0A7A3B", "background_color": "#101820"}}),
    )
    .await;
    let html = app.get_text("/rooms/drop").await;
    let href = html
        .split(r#"<link rel="stylesheet" href=""#)
        .nth(2)
        .and_then(|rest| rest.split('"').next())
        .expect("the room's stylesheet after style.css")
        .to_string();
    assert!(href.starts_with("/rooms/drop/style.css?v="), "{href}");
    let version = href.rsplit('=').next().unwrap().to_string();

    let css = get(&app, &href).await;
    assert_eq!(css.status(), 200);
    assert!(header(&css, "content-type").starts_with("text/css"));
    assert_eq!(header(&css, "etag"), format!("\"{version}\""));
    assert!(header(&css, "cache-control").contains("immutable"));
    let text = css.text().await.unwrap();
    assert!(text.contains("--accent: #0a7a3b;"), "{text}");
    assert!(text.contains("--bg: #101820;"), "{text}");
    assert!(
        text.contains("color-scheme: dark"),
        "a dark background: {text}"
    );

    let again = reqwest::Client::new()
        .get(app.url("/rooms/drop/style.css"))
        .header("If-None-Match", format!("\"{version}\""))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(
        header(&again, "cache-control"),
        "no-cache",
        "no version asked"
    );

    // A new colour: a new version on the page, and the old one is stale.
    app.patch_room("drop", json!({"page": {"accent_color": "#FFBF47"}}))
        .await;
    let html = app.get_text("/rooms/drop").await;
    assert!(!html.contains(&href), "the page links the new version");
    let stale = get(&app, &href).await;
    assert_eq!(header(&stale, "cache-control"), "no-cache");
    assert!(stale.text().await.unwrap().contains("--accent: #ffbf47;"));

    let unknown = get(&app, "/rooms/nope/style.css").await;
    assert_eq!(unknown.status(), 404);
}

/// An app whose `--templates-dir` holds `files`.
async fn app_with_templates(files: &[(&str, &str)]) -> (TestApp, TempDir) {
    let dir = TempDir::new("templates");
    for (name, text) in files {
        std::fs::write(dir.0.join(name), text).unwrap();
    }
    let mut settings = test_settings();
    settings.templates_dir = Some(dir.0.clone());
    let clock = ManualClock::new(START_MS);
    let app = TestApp::spawn_with(
        settings,
        Stores::memory(std::sync::Arc::new(clock.clone())),
        clock,
    )
    .await;
    (app, dir)
}

const SHARED_TEMPLATE: &str = r#"<!doctype html>
<html lang="{{ lang }}"><head><title>{{ title }}</title>
<script id="wr-texts" type="application/json">{{ texts_json }}</script></head>
<body data-room="{{ room.id }}"><h1 id="shared">{{ headline }}</h1>
<p id="message">{{ page.message }}</p><p id="waiting-label">{{ texts.waiting_label }}</p>
<p id="policy">{{ csp }}</p>{% if room_style_url %}<link rel="stylesheet" href="{{ room_style_url }}">{% endif %}
<script type="module" src="{{ script_url }}"></script></body></html>"#;

#[tokio::test]
async fn the_operator_s_template_renders_a_room_s_own_winning_and_a_broken_one_falls_back() {
    let (app, _dir) = app_with_templates(&[
        ("room.html", SHARED_TEMPLATE),
        // A page may extend another file of the directory.
        ("layout.html", "<main>{% block body %}{% endblock %}</main>"),
        (
            "room-vip.html",
            "{% extends \"layout.html\" %}{% block body %}<p id=\"vip\">VIP {{ room.name }}</p>{% endblock %}",
        ),
        // Does not parse: given way to at every request.
        ("room-broken.html", "<p>{% if %}</p>"),
        // Parses, fails as it renders: the name is misspelt.
        ("room-typo.html", "<p>{{ page.headlin.upper() }}</p>"),
        // Not a room template: never read.
        ("notes.txt", "{{"),
    ])
    .await;
    for room in ["shared", "vip", "broken", "typo"] {
        app.create_room(room, json!({ "page": full_page() })).await;
    }

    let shared = get(&app, "/rooms/shared").await;
    let policy = header(&shared, "content-security-policy");
    let html = page_html(shared).await;
    assert!(
        html.contains(r#"<h1 id="shared">Spring &lt;i&gt;drop&lt;/i&gt;</h1>"#),
        "{html}"
    );
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "autoescaped: {html}"
    );
    assert!(!html.contains("<script>alert(1)"), "{html}");
    assert!(
        html.contains(r#"<p id="waiting-label">People in line</p>"#),
        "{html}"
    );
    assert!(
        html.contains(r#""room.heading":"#),
        "the texts' JSON is not escaped: {html}"
    );
    assert!(html.contains(r#"src="/static/room.js""#), "{html}");
    assert!(
        html.contains(r#"href="/rooms/shared/style.css?v="#),
        "{html}"
    );
    assert!(policy.contains("https://cdn.example"), "{policy}");
    assert!(
        html.contains("img-src &#39;self&#39; data: https://cdn.example"),
        "{html}"
    );

    let vip = app.get_text("/rooms/vip").await;
    assert_eq!(
        vip, r#"<main><p id="vip">VIP Room vip</p></main>"#,
        "the room's own wins"
    );

    for room in ["broken", "typo"] {
        let response = get(&app, &format!("/rooms/{room}")).await;
        assert_eq!(response.status(), 200, "{room}");
        let html = page_html(response).await;
        assert!(
            html.contains(r#"id="position""#),
            "{room}: the built-in page: {html}"
        );
        assert!(html.contains(r#"src="/static/room.js""#), "{room}");
        assert!(
            html.contains("Spring &lt;i&gt;drop&lt;/i&gt;"),
            "{room}: still branded"
        );
    }
    // The built-in page's join works as ever.
    let status = app.join_api("broken").await;
    assert!(status["state"].is_string(), "{status}");
}

/// A node of the binary with `args`, logging JSON lines to `log`.
fn node(log: &Path, args: &[&str]) -> Node {
    let log = log.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    Node::start_with(move |port| {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("the node's log file");
        let mut command = Command::new(BINARY);
        command
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-token", ADMIN_TOKEN, "--secret", SECRET])
            .args(["--log-format", "json"])
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("a second handle on the log"))
            .stderr(out);
        command
    })
}

fn log_lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[tokio::test]
async fn a_failing_template_is_logged_with_its_room_and_why() {
    let dir = TempDir::new("templates-log");
    let templates = dir.0.join("templates");
    std::fs::create_dir_all(&templates).unwrap();
    std::fs::write(templates.join("room.html"), "<p>\n{{ page.headlin }}</p>").unwrap();
    let log = dir.0.join("node.log");
    let mut node = node(&log, &["--templates-dir", templates.to_str().unwrap()]);
    node.wait_until("/readyz").await;
    let http = reqwest::Client::new();
    let created = http
        .post(node.url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": "drop", "name": "Drop", "target_url": "/buy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // Five views: each gets the built-in page; one warning is written
    // (a flood of views writes one a template every 10 s), before the
    // answer is sent (the log writes to stdout as it goes).
    for _ in 0..5 {
        let page = http.get(node.url("/rooms/drop")).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.text().await.unwrap().contains(r#"id="position""#));
    }
    let warnings: Vec<Value> = log_lines(&log)
        .into_iter()
        .filter(|line| {
            line["level"] == "WARN"
                && line["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("operator template failed to render"))
        })
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one warning for five views: {warnings:?}"
    );
    let warned = &warnings[0];
    assert_eq!(warned["left_out"], 0);
    let text = warned.to_string();
    assert!(text.contains(r#""room":"drop""#), "{text}");
    assert!(text.contains(r#""template":"room.html""#), "{text}");
    assert!(
        text.contains("undefined value (in room.html:2)"),
        "the error says what and where: {text}"
    );

    // A directory that cannot be read stops the start.
    let output = Command::new(BINARY)
        .args(["--listen", "127.0.0.1:0", "--admin-token", ADMIN_TOKEN])
        .args(["--templates-dir", dir.0.join("nowhere").to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr).to_string()
        + &String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains("cannot read the templates directory"),
        "{said}"
    );
}

#[tokio::test]
async fn a_rooms_file_s_page_table_brands_the_room() {
    let dir = TempDir::new("rooms-page");
    let rooms = dir.0.join("rooms.toml");
    std::fs::write(
        &rooms,
        r##"[[room]]
id = "drop"
name = "Drop"
target_url = "/buy"

[room.page]
headline = "Spring drop"
message = """
Doors open at ten.
Be early."""
accent_color = "#0a7a3b"
"##,
    )
    .unwrap();
    let log = dir.0.join("node.log");
    let mut node = node(&log, &["--rooms", rooms.to_str().unwrap()]);
    node.wait_until("/readyz").await;
    let html = reqwest::get(node.url("/rooms/drop"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"id="room-name">Spring drop</p>"#), "{html}");
    assert!(html.contains("Doors open at ten.\nBe early."), "{html}");
    assert!(html.contains("/rooms/drop/style.css?v="), "{html}");

    // The docs chapter's rooms-file snippets load as they are printed.
    let chapter = std::fs::read_to_string(repo("docs/src/branding.md")).unwrap();
    let mut snippets = 0;
    for block in chapter.split("```toml\n").skip(1) {
        let snippet = block.split("```").next().unwrap();
        waitroom::startup::rooms_file::RoomsFile::parse(&rooms, snippet)
            .unwrap_or_else(|error| panic!("{error}\n{snippet}"));
        snippets += 1;
    }
    assert!(snippets >= 1);
}

// --- in a browser --------------------------------------------------------------

/// A computed style property of the first element `css` matches.
async fn computed(browser: &Client, css: &str, property: &str) -> String {
    let value = browser
        .execute(
            "return getComputedStyle(document.querySelector(arguments[0])).getPropertyValue(arguments[1]);",
            vec![json!(css), json!(property)],
        )
        .await
        .unwrap();
    value.as_str().unwrap_or_default().trim().to_string()
}

async fn text_of(browser: &Client, css: &str) -> String {
    let element = browser.find(Locator::Css(css)).await.unwrap();
    element
        .prop("textContent")
        .await
        .unwrap()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branded_waiting_page_in_a_browser() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    let mut page = full_page();
    // No image is served here: the logo's markup and policy are tested above.
    page["logo_url"] = Value::Null;
    page["background_color"] = json!("#fdf6ec");
    page["accent_color"] = json!("#b3261e");
    page["headline"] = json!("Spring drop");
    app.create_room("drop", json!({ "paused": true, "page": page }))
        .await;
    // Some ahead of the browser, so its place shows in a line.
    for _ in 0..3 {
        app.join_api("drop").await;
    }
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/drop")).await.unwrap();
    eventually("the page's script to run", BROWSER_PATIENCE, || async {
        let state = browser
            .find(Locator::Css("#connection"))
            .await
            .ok()?
            .attr("data-state")
            .await
            .ok()??;
        (state == "live").then_some(())
    })
    .await;

    assert_eq!(browser.title().await.unwrap(), "Spring drop <2026>");
    assert_eq!(text_of(&browser, "#room-name").await, "Spring drop");
    let intro = text_of(&browser, "#intro").await;
    assert!(
        intro.contains("<script>alert(1)</script>"),
        "shown as text: {intro}"
    );
    assert!(intro.contains("10:00.\nPlease"), "{intro}");
    assert_eq!(
        computed(&browser, "#intro", "white-space").await,
        "pre-line",
        "its line break shows"
    );
    assert_eq!(
        computed(&browser, "body", "background-color").await,
        "rgb(253, 246, 236)"
    );
    assert_eq!(
        computed(&browser, ".progress-fill", "background-color").await,
        "rgb(179, 38, 30)"
    );
    assert_eq!(
        computed(&browser, "#room-name", "color").await,
        "rgb(179, 38, 30)",
        "the headline in the accent colour"
    );
    assert_eq!(
        computed(&browser, "#page-footer", "white-space").await,
        "pre-line"
    );
    let alerted = browser
        .execute("return typeof window.alertCalled;", vec![])
        .await
        .unwrap();
    assert_eq!(alerted, json!("undefined"));
    let shot = browser.screenshot().await.unwrap();
    // `WAITROOM_SCREENSHOT_DIR=docs/src/images` makes the book's image.
    if let Some(dir) = std::env::var_os("WAITROOM_SCREENSHOT_DIR") {
        std::fs::write(Path::new(&dir).join("room-branded.png"), &shot).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_previews_the_branding_as_it_is_typed_and_saves_it() {
    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    app.create_room("drop", json!({})).await;
    let browser = driver.browser(1280, 1400, json!({})).await;
    admin_login(&browser, &app).await;

    let type_into = |id: &'static str, text: &'static str| {
        let browser = browser.clone();
        async move {
            browser
                .find(Locator::Id(id))
                .await
                .unwrap()
                .send_keys(text)
                .await
                .unwrap();
        }
    };
    type_into("edit-drop-page_headline", "Spring <b>drop</b>").await;
    type_into("edit-drop-page_message", "Line one\nLine two").await;
    type_into("edit-drop-page_background_color", "#101820").await;
    type_into("edit-drop-page_accent_color", "#ffbf47").await;
    type_into("edit-drop-page_footer", "© Shop").await;

    let preview = "#preview-drop [data-preview=\"headline\"]";
    assert_eq!(text_of(&browser, preview).await, "Spring <b>drop</b>");
    assert_eq!(
        text_of(&browser, "#preview-drop [data-preview=\"message\"]").await,
        "Line one\nLine two"
    );
    assert_eq!(
        computed(&browser, "#preview-drop .preview-page", "background-color").await,
        "rgb(16, 24, 32)"
    );
    assert_eq!(
        computed(&browser, "#preview-drop .preview-page", "color").await,
        "rgb(232, 237, 243)",
        "light text on the dark background"
    );
    assert_eq!(
        computed(&browser, "#preview-drop .preview-fill", "background-color").await,
        "rgb(255, 191, 71)"
    );
    assert_eq!(
        computed(&browser, preview, "color").await,
        "rgb(255, 191, 71)",
        "the headline in the accent colour, as on the page"
    );
    // A colour the server would refuse is marked as the operator types.
    let field = browser
        .find(Locator::Id("edit-drop-page_accent_color"))
        .await
        .unwrap();
    field.clear().await.unwrap();
    field.send_keys("green").await.unwrap();
    let invalid = browser
        .find(Locator::Id("edit-drop-page_accent_color"))
        .await
        .unwrap()
        .attr("aria-invalid")
        .await
        .unwrap();
    assert!(invalid.is_some(), "marked invalid");
    field.clear().await.unwrap();
    field.send_keys("#ffbf47").await.unwrap();
    let element = browser.find(Locator::Id("edit-drop-page")).await.unwrap();
    let png = element.screenshot().await.unwrap();
    // `WAITROOM_SCREENSHOT_DIR=docs/src/images` makes the book's image.
    if let Some(dir) = std::env::var_os("WAITROOM_SCREENSHOT_DIR") {
        std::fs::write(Path::new(&dir).join("admin-branding.png"), png).unwrap();
    }

    browser
        .find(Locator::Id("edit-drop-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let saved = eventually("the page config saved", BROWSER_PATIENCE, || async {
        let room: Value = app
            .admin(Method::GET, "/api/admin/rooms/drop")
            .fetch_json()
            .await;
        (room["page"]["footer"] == "© Shop").then_some(room)
    })
    .await;
    assert_eq!(saved["page"]["headline"], "Spring <b>drop</b>");
    assert_eq!(
        saved["page"]["message"], "Line one\nLine two",
        "\\r\\n kept as \\n"
    );
    assert_eq!(saved["page"]["background_color"], "#101820");
    assert_eq!(saved["page"]["accent_color"], "#ffbf47");
    assert_eq!(
        saved["page"].get("title"),
        None,
        "an empty field is no field"
    );
}

/// An app serving the example template of deploy/templates.
async fn app_with_the_example_template() -> TestApp {
    let mut settings = test_settings();
    settings.templates_dir = Some(repo("deploy/templates"));
    let clock = ManualClock::new(START_MS);
    TestApp::spawn_with(
        settings,
        Stores::memory(std::sync::Arc::new(clock.clone())),
        clock,
    )
    .await
}

#[tokio::test]
async fn the_example_template_renders_with_the_ids_the_page_script_fills() {
    let app = app_with_the_example_template().await;
    app.create_room("drop", json!({ "page": full_page() }))
        .await;
    let html = page_html(get(&app, "/rooms/drop").await).await;
    assert!(
        html.contains("operator-page"),
        "the example, not the built-in page"
    );
    for id in [
        "heading",
        "position",
        "waiting",
        "eta",
        "progress",
        "progress-fill",
        "connection",
        "message",
        "announce",
        "join-again",
        "continue",
        "sign-in",
        "notice",
        "stock",
        "opening",
        "countdown",
        "entry-line",
        "entry",
        "keep-open",
    ] {
        assert!(html.contains(&format!(r#"id="{id}""#)), "#{id} missing");
    }
    assert!(html.contains(r#"data-room="drop""#));
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(
        html.contains("© Shop &amp; Co.\nTerms apply</footer>"),
        "{html}"
    );
    let chapter = std::fs::read_to_string(repo("docs/src/branding.md")).unwrap();
    assert!(
        chapter.contains("{{#include ../../deploy/templates/room.html}}"),
        "the chapter shows the example as it is"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_template_s_page_goes_live_in_a_browser() {
    let app = app_with_the_example_template().await;
    let driver = Driver::start().await;
    app.create_room(
        "drop",
        json!({"paused": true, "page": {"headline": "Spring drop"}}),
    )
    .await;
    let browser = driver.browser(390, 844, json!({})).await;
    browser.goto(&app.url("/rooms/drop")).await.unwrap();
    eventually(
        "the operator's page to go live",
        BROWSER_PATIENCE,
        || async {
            let element = browser.find(Locator::Css("#connection")).await.ok()?;
            (element.attr("data-state").await.ok()?? == "live").then_some(())
        },
    )
    .await;
    assert_eq!(text_of(&browser, "#position").await, "1");
    assert_eq!(text_of(&browser, ".room-name").await, "Spring drop");
}
