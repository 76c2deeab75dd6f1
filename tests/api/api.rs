//! The visitor and operator APIs end to end: real HTTP and real WebSockets
//! against the app on port 0, time driven by hand.

use support::error_of;
use waitroom_testkit as support;

use reqwest::Method;
use serde_json::{Value, json};
use support::{FetchJson, PATIENCE, TestApp, close_code, next_json, next_status, send_text};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn ten_visitors_are_admitted_two_per_tick_in_join_order_over_websockets() {
    let app = TestApp::spawn().await;
    // Paused while the line forms, so nobody passes straight through.
    app.create_room("drop", json!({"admit_per_tick": 2, "paused": true}))
        .await;
    let mut visitors = Vec::new();
    for expected in 1..=10 {
        let status = app.join_api("drop").await;
        assert_eq!(status["state"], "waiting");
        assert_eq!(status["position"], expected);
        let ticket = status["ticket"].as_str().unwrap().to_string();
        let mut socket = app.connect("drop", &ticket).await;
        let first = next_status(&mut socket).await;
        assert_eq!(
            first["position"], expected,
            "the socket starts at the joined place"
        );
        visitors.push((ticket, socket, expected));
    }
    assert_eq!(
        app.patch_room("drop", json!({"paused": false}))
            .await
            .status(),
        200
    );
    for socket in visitors.iter_mut() {
        let after_config = next_status(&mut socket.1).await;
        assert_eq!(
            after_config["position"], socket.2,
            "a config change moves nobody"
        );
    }

    let mut passes = Vec::new();
    for tick in 0..5 {
        app.step(5_000).await;
        for (i, (_, socket, last_position)) in visitors.iter_mut().enumerate() {
            if *last_position == 0 {
                continue; // admitted earlier
            }
            let status = next_status(socket).await;
            if i < (tick + 1) * 2 {
                assert_eq!(status["state"], "admitted", "visitor {i} at tick {tick}");
                assert_eq!(status["position"], Value::Null);
                assert!(status["expires_at"].is_string());
                let redirect = status["redirect_url"].as_str().unwrap();
                assert!(redirect.starts_with("https://shop.example/buy?wr_pass="));
                passes.push(status["pass"].as_str().unwrap().to_string());
                *last_position = 0;
            } else {
                let position = status["position"].as_u64().unwrap();
                assert!(position < *last_position, "positions only fall");
                assert_eq!(position, (i - (tick + 1) * 2 + 1) as u64);
                assert_eq!(status["waiting"], (10 - (tick + 1) * 2) as u64);
                assert!(status["eta_seconds"].as_u64().is_some());
                *last_position = position;
            }
        }
    }
    assert_eq!(passes.len(), 10);
    for pass in &passes {
        let verified = app
            .http
            .get(app.url("/api/verify"))
            .bearer_auth(pass)
            .header("X-Waitroom-Room", "drop")
            .send()
            .await
            .unwrap();
        assert_eq!(verified.status(), 204);
    }
    // A pass for this room is not a pass for another.
    let wrong_room = app
        .http
        .get(app.url("/api/verify?room=other"))
        .bearer_auth(&passes[0])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_room.status(), 401);
}

#[tokio::test]
async fn passes_verify_offline_with_the_published_jwks() {
    let app = TestApp::spawn().await;
    app.create_room("offline", json!({})).await;
    let status = app.join_api("offline").await;
    assert_eq!(
        status["state"], "admitted",
        "an empty room lets the first visitor through"
    );
    let pass = status["pass"].as_str().unwrap();

    let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_value(
        app.http
            .get(app.url("/.well-known/jwks.json"))
            .fetch_json()
            .await,
    )
    .unwrap();
    let header = jsonwebtoken::decode_header(pass).unwrap();
    let jwk = jwks
        .find(header.kid.as_deref().unwrap())
        .expect("the pass names a published key");
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    // The driven clock is in 2026-01; the library checks against the real one.
    validation.validate_exp = false;
    let claims = jsonwebtoken::decode::<Value>(pass, &key, &validation)
        .unwrap()
        .claims;
    assert_eq!(claims["room"], "offline");
    assert_eq!(
        claims["jti"],
        format!("{}.{}", claims["sub"].as_str().unwrap(), support::START_MS),
        "the admission's id: its visitor and the moment of admission"
    );
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        600
    );
}

#[tokio::test]
async fn passes_stop_verifying_when_they_expire_or_are_given_up() {
    let app = TestApp::spawn().await;
    app.create_room("short", json!({"pass_ttl_s": 30})).await;
    let kept = app.join_api("short").await;
    let given_up = app.join_api("short").await;
    let verify = |pass: String| {
        let request = app
            .http
            .get(app.url("/api/verify?room=short"))
            .bearer_auth(pass);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let kept_pass = kept["pass"].as_str().unwrap().to_string();
    let given_up_pass = given_up["pass"].as_str().unwrap().to_string();
    assert_eq!(verify(kept_pass.clone()).await, 204);
    let left = app
        .http
        .post(app.url("/api/rooms/short/leave"))
        .bearer_auth(given_up["ticket"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 204);
    assert_eq!(verify(given_up_pass).await, 401);
    app.clock.advance_ms(30_000);
    assert_eq!(verify(kept_pass).await, 401);
    let expired = app
        .status_api("short", kept["ticket"].as_str().unwrap())
        .await;
    assert_eq!(expired.json::<Value>().await.unwrap()["state"], "expired");
}

#[tokio::test]
async fn join_is_idempotent_per_ticket_and_cookie() {
    let app = TestApp::spawn().await;
    app.create_room("once", json!({"paused": true})).await;
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let join = || browser.post(app.url("/api/rooms/once/join")).send();
    let first: Value = join().await.unwrap().json().await.unwrap();
    let (a, b) = tokio::join!(join(), join());
    for again in [a, b] {
        let again: Value = again.unwrap().json().await.unwrap();
        assert_eq!(
            again["ticket"], first["ticket"],
            "the cookie keeps the visitor"
        );
        assert_eq!(again["position"], 1);
    }
    let by_header: Value = app
        .http
        .post(app.url("/api/rooms/once/join"))
        .bearer_auth(first["ticket"].as_str().unwrap())
        .fetch_json()
        .await;
    assert_eq!(by_header["position"], 1);
    let room: Value = app
        .admin(Method::GET, "/api/admin/rooms/once")
        .fetch_json()
        .await;
    assert_eq!(room["stats"]["waiting"], 1);
}

#[tokio::test]
async fn forged_tickets_and_passes_are_refused() {
    let app = TestApp::spawn().await;
    app.create_room("guarded", json!({"paused": true})).await;
    let real = app.join_api("guarded").await;
    let ticket = real["ticket"].as_str().unwrap();
    let mut forged = ticket.to_string();
    forged.replace_range(forged.len() - 4.., "AAAA");

    let (status, code) = error_of(app.status_api("guarded", &forged).await).await;
    assert_eq!((status, code.as_str()), (401, "invalid_ticket"));
    let (status, code) = error_of(app.status_api("guarded", "not-a-ticket").await).await;
    assert_eq!((status, code.as_str()), (401, "invalid_ticket"));
    let anonymous = app
        .http
        .get(app.url("/api/rooms/guarded/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(anonymous).await, (401, "missing_ticket".into()));

    // A ticket from another room, or signed with another secret.
    app.create_room("elsewhere", json!({"paused": true})).await;
    let other_room = app.join_api("elsewhere").await;
    let (status, _) = error_of(
        app.status_api("guarded", other_room["ticket"].as_str().unwrap())
            .await,
    )
    .await;
    assert_eq!(status, 401);
    let foreign = waitroom::words::credentials::Credentials::from_secret("someone else")
        .issue_ticket(
            &waitroom::words::RoomId::parse("guarded").unwrap(),
            waitroom::words::VisitorId::random(),
            0,
        );
    assert_eq!(
        error_of(app.status_api("guarded", &foreign).await).await.0,
        401
    );

    // The socket refuses the forged ticket before upgrading.
    let refused = tokio_tungstenite::connect_async(app.ws_url("guarded", &forged)).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401)
        }
        other => panic!("expected a 401 handshake, got {other:?}"),
    }

    // Passes: forged, foreign, garbage, missing.
    let foreign_pass = waitroom::words::credentials::Credentials::from_secret("someone else")
        .issue_pass(
            &waitroom::words::RoomId::parse("guarded").unwrap(),
            waitroom::words::VisitorId::random(),
            support::START_MS,
            support::START_MS + 600_000,
        );
    for pass in [foreign_pass.as_str(), "x.y.z", ticket] {
        let verified = app
            .http
            .get(app.url("/api/verify?room=guarded"))
            .bearer_auth(pass)
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_of(verified).await,
            (401, "invalid_pass".into()),
            "{pass}"
        );
    }
    let missing = app
        .http
        .get(app.url("/api/verify?room=guarded"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(missing).await.0, 401);
}

#[tokio::test]
async fn verify_needs_the_room_and_a_client_cannot_name_another() {
    let app = TestApp::spawn().await;
    app.create_room("spring", json!({})).await;
    app.create_room("autumn", json!({})).await;
    let spring = app.pass_for("spring").await;
    let autumn = app.pass_for("autumn").await;
    let verify = |pass: &str, query: &str, header: Option<&str>| {
        let mut request = app
            .http
            .get(app.url(&format!("/api/verify{query}")))
            .bearer_auth(pass);
        if let Some(room) = header {
            request = request.header("X-Waitroom-Room", room);
        }
        async move { request.send().await.unwrap() }
    };

    // No room named: no pass of any room gets through.
    for pass in [&spring, &autumn] {
        let (status, code) = error_of(verify(pass, "", None).await).await;
        assert_eq!((status, code.as_str()), (400, "room_required"));
        let (status, code) = error_of(verify(pass, "?room=", Some("")).await).await;
        assert_eq!((status, code.as_str()), (400, "room_required"));
    }
    let anonymous = app.http.get(app.url("/api/verify")).send().await.unwrap();
    assert_eq!(error_of(anonymous).await, (400, "room_required".into()));

    // The header cannot override the query (nor the query the header).
    for (query, header) in [("?room=spring", "autumn"), ("?room=autumn", "spring")] {
        for pass in [&spring, &autumn] {
            let (status, code) = error_of(verify(pass, query, Some(header)).await).await;
            assert_eq!(
                (status, code.as_str()),
                (400, "room_mismatch"),
                "{query} {header}"
            );
        }
    }
    let twice = app
        .http
        .get(app.url("/api/verify"))
        .bearer_auth(&autumn)
        .header("X-Waitroom-Room", "autumn")
        .header("X-Waitroom-Room", "spring")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(twice).await, (400, "room_mismatch".into()));
    let (status, code) = error_of(verify(&spring, "?room=Spring%20Sale", None).await).await;
    assert_eq!((status, code.as_str()), (400, "invalid_room"));

    // Named once, or twice alike: the pass must be that room's.
    for (query, header) in [
        ("?room=spring", None),
        ("", Some("spring")),
        ("?room=spring", Some("spring")),
        ("?room=spring", Some("")),
    ] {
        assert_eq!(verify(&spring, query, header).await.status(), 204);
        let (status, code) = error_of(verify(&autumn, query, header).await).await;
        assert_eq!((status, code.as_str()), (401, "invalid_pass"), "{query}");
    }
}

#[tokio::test]
async fn unknown_rooms_and_paths_are_404() {
    let app = TestApp::spawn().await;
    for (method, path) in [
        (Method::POST, "/api/rooms/nowhere/join"),
        (Method::POST, "/api/rooms/Not%20A%20Slug/join"),
        (Method::GET, "/api/no-such-endpoint"),
    ] {
        let response = app
            .http
            .request(method, app.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(error_of(response).await.0, 404, "{path}");
    }
    let (status, code) = error_of(
        app.admin(Method::GET, "/api/admin/rooms/nowhere")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (404, "room_not_found"));
    let page = app
        .http
        .get(app.url("/rooms/nowhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    assert!(page.text().await.unwrap().contains("nowhere"));
}

#[tokio::test]
async fn every_page_speaks_the_language_the_browser_asks_for() {
    let app = TestApp::spawn().await;
    app.create_room("hall", json!({})).await;
    let page = |path: &'static str, language: &'static str| {
        let request = app
            .http
            .get(app.url(path))
            .header("Accept-Language", language);
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    for (path, korean) in [
        ("/rooms/hall", "대기열에 들어왔습니다"),
        ("/rooms/nowhere", "대기실을 찾을 수 없습니다"),
        ("/rooms/hall/sale", "판매 정보를 불러오는 중…"),
        ("/admin", "운영자 로그인"),
    ] {
        let html = page(path, "ko-KR,ko;q=0.9").await;
        assert!(html.contains("<html lang=\"ko\">"), "{path}: {html}");
        assert!(html.contains(korean), "{path}: {html}");
        let html = page(path, "en-US").await;
        assert!(html.contains("<html lang=\"en\">"), "{path}: {html}");
        assert!(!html.contains(korean), "{path}: {html}");
    }
    // The scripts get their page's texts, in the same language.
    let html = page("/rooms/hall", "ko").await;
    assert!(html.contains(r#"<script id="wr-texts" type="application/json">{"room."#));
    assert!(html.contains(r#""room.conn_live":"실시간""#), "{html}");
    let html = page("/rooms/hall/sale", "ko").await;
    assert!(html.contains(r#"<script id="wr-texts" type="application/json">{"sale."#));
    assert!(html.contains(r#""sale.hold":"예약""#), "{html}");
    // The operator's page, signed in.
    let client = no_redirects();
    let session = log_in(&app, &client).await;
    let html = client
        .get(app.url("/admin"))
        .header("cookie", format!("wr_admin={session}"))
        .header("Accept-Language", "ko")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("<html lang=\"ko\">"), "{html}");
    assert!(html.contains("변경 사항 저장"), "{html}");
    assert!(html.contains(r#""admin.live_unavailable":"#), "{html}");
}

/// A visitor page as a browser would ask for it: `lang` the page's
/// `?lang=`, `cookie` its `wr_lang` cookie, `header` its Accept-Language.
async fn page_in(
    app: &TestApp,
    path: &str,
    lang: Option<&str>,
    cookie: Option<&str>,
    header: Option<&str>,
) -> reqwest::Response {
    let url = match lang {
        Some(lang) => format!("{path}?lang={lang}"),
        None => path.to_string(),
    };
    let mut request = no_redirects().get(app.url(&url));
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("wr_lang={cookie}"));
    }
    if let Some(header) = header {
        request = request.header("Accept-Language", header);
    }
    request.send().await.unwrap()
}

/// The `<html lang>` of a page.
fn html_lang(html: &str) -> &str {
    let rest = html.split("<html lang=\"").nth(1).expect("an <html lang>");
    rest.split('"').next().unwrap()
}

/// The `wr_lang` cookie an answer sets, whole.
fn language_cookie(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|cookie| cookie.starts_with("wr_lang="))
        .map(str::to_string)
}

#[tokio::test]
async fn the_page_language_is_the_query_then_the_cookie_then_the_header_then_the_room() {
    let app = TestApp::spawn().await;
    app.create_room("halle", json!({"language": "de"})).await;
    let lang_of = |lang, cookie, header| {
        let app = &app;
        async move {
            let page = page_in(app, "/rooms/halle", lang, cookie, header).await;
            assert_eq!(page.status(), 200);
            html_lang(&page.text().await.unwrap()).to_string()
        }
    };
    // Each rule beats every one after it.
    assert_eq!(lang_of(Some("fr"), Some("ja"), Some("ko")).await, "fr");
    assert_eq!(lang_of(None, Some("ja"), Some("ko")).await, "ja");
    assert_eq!(lang_of(None, None, Some("ko-KR,ko;q=0.9")).await, "ko");
    assert_eq!(lang_of(None, None, None).await, "de");
    assert_eq!(lang_of(None, None, Some("it, nl;q=0.5")).await, "de");
    // The aliases, in any case.
    assert_eq!(lang_of(Some("zh-CN"), None, None).await, "zh-Hans");
    assert_eq!(lang_of(Some("ZH-sg"), None, None).await, "zh-Hans");
    assert_eq!(lang_of(Some("zh"), None, None).await, "zh-Hans");
    assert_eq!(lang_of(Some("pt"), None, None).await, "pt-BR");
    assert_eq!(lang_of(None, Some("pt-PT"), None).await, "pt-BR");
    assert_eq!(lang_of(None, None, Some("zh-CN,zh;q=0.9")).await, "zh-Hans");
    // A choice naming no language of ours falls through to the next.
    assert_eq!(lang_of(Some("klingon"), Some("es"), Some("ko")).await, "es");
    assert_eq!(lang_of(Some("zh-TW"), Some("xx"), Some("ja")).await, "ja");
    assert_eq!(lang_of(Some(""), None, Some("zh-HK")).await, "de");

    // The texts are the chosen language's, the script's too.
    let html = page_in(&app, "/rooms/halle", None, None, None)
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("Sie sind in der Warteschlange"), "{html}");
    assert!(html.contains(r#""room.conn_live":"Live""#), "{html}");
    assert!(html.contains("Geschätzte Wartezeit"), "{html}");
    let html = page_in(&app, "/rooms/halle", Some("ja"), None, None)
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("順番待ちの列に並んでいます"), "{html}");
    assert!(
        html.contains(r#""room.conn_live":"リアルタイム""#),
        "{html}"
    );
    assert!(!html.contains("Warteschlange"), "{html}");
}

#[tokio::test]
async fn a_lang_in_the_address_is_kept_in_a_cookie_and_nothing_else_sets_it() {
    let app = TestApp::spawn().await;
    app.create_room("hall", json!({})).await;
    let page = page_in(&app, "/rooms/hall", Some("zh-CN"), None, None).await;
    let cookie = language_cookie(&page).expect("?lang= sets the cookie");
    let attributes: Vec<&str> = cookie.split(';').map(str::trim).collect();
    assert_eq!(
        attributes[0], "wr_lang=zh-Hans",
        "kept as its code: {cookie}"
    );
    assert!(attributes.contains(&"Path=/"), "{cookie}");
    assert!(attributes.contains(&"SameSite=Lax"), "{cookie}");
    assert!(
        attributes.iter().any(|a| a.starts_with("Max-Age=")),
        "{cookie}"
    );
    // The cookie, sent back, is the choice on the next page.
    let kept = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("wr_lang=");
    let html = page_in(&app, "/rooms/hall", None, Some(kept), Some("ko"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(html_lang(&html), "zh-Hans");
    assert!(html.contains("您正在排队"), "{html}");
    // Only a `?lang=` naming a language of ours sets it.
    for (lang, cookie, header) in [
        (None, Some("ja"), Some("ko")),
        (Some("klingon"), None, None),
        (None, None, Some("fr")),
    ] {
        let page = page_in(&app, "/rooms/hall", lang, cookie, header).await;
        assert_eq!(
            language_cookie(&page),
            None,
            "{lang:?} {cookie:?} {header:?}"
        );
    }
    // The sale page and the unknown-room page keep it alike.
    for path in ["/rooms/hall/sale", "/rooms/nowhere"] {
        let page = page_in(&app, path, Some("pt-PT"), None, None).await;
        let cookie = language_cookie(&page).unwrap_or_default();
        assert!(cookie.starts_with("wr_lang=pt-BR;"), "{path}: {cookie}");
    }
}

#[tokio::test]
async fn the_sale_page_and_the_unknown_room_page_follow_the_same_rules() {
    let app = TestApp::spawn().await;
    app.create_room("salle", json!({"language": "fr"})).await;
    let html = |path: &'static str, lang, cookie, header| {
        let app = &app;
        async move {
            page_in(app, path, lang, cookie, header)
                .await
                .text()
                .await
                .unwrap()
        }
    };
    // The sale page: the room's language, then the visitor's choices over it.
    let page = html("/rooms/salle/sale", None, None, None).await;
    assert_eq!(html_lang(&page), "fr");
    assert!(page.contains("Chargement de la vente…"), "{page}");
    assert!(page.contains(r#""sale.hold":"Réserver""#), "{page}");
    let page = html("/rooms/salle/sale", None, None, Some("es-MX")).await;
    assert_eq!(html_lang(&page), "es");
    assert!(page.contains("Cargando la venta…"), "{page}");
    let page = html("/rooms/salle/sale", Some("de"), Some("es"), Some("ko")).await;
    assert_eq!(html_lang(&page), "de");
    assert!(page.contains(r#""sale.hold":"Reservieren""#), "{page}");
    let page = html("/rooms/salle/sale", None, Some("pt-BR"), Some("ko")).await;
    assert_eq!(html_lang(&page), "pt-BR");
    assert!(page.contains("Carregando a venda…"), "{page}");

    // No room, no room language: English, unless the visitor asks.
    let page = html("/rooms/nowhere", None, None, None).await;
    assert_eq!(html_lang(&page), "en");
    assert!(page.contains("Waiting room not found"), "{page}");
    let page = html("/rooms/nowhere", Some("ja"), Some("ko"), Some("de")).await;
    assert_eq!(html_lang(&page), "ja");
    assert!(page.contains("待合室が見つかりません"), "{page}");
    let page = html("/rooms/nowhere", None, Some("zh"), Some("de")).await;
    assert_eq!(html_lang(&page), "zh-Hans");
    assert!(page.contains("找不到该排队"), "{page}");
    let page = html("/rooms/nowhere", None, None, Some("pt-PT,pt;q=0.9")).await;
    assert_eq!(html_lang(&page), "pt-BR");
    assert!(page.contains("Sala de espera não encontrada"), "{page}");
    let page = html("/rooms/Bad%20Id", Some("es"), None, None).await;
    assert_eq!(html_lang(&page), "es");
    assert!(page.contains("Sala de espera no encontrada"), "{page}");
}

#[tokio::test]
async fn a_rooms_language_must_be_one_we_speak_and_a_bad_one_loses_nothing() {
    let app = TestApp::spawn().await;
    let room = app.create_room("drop", json!({"language": "ZH-cn"})).await;
    assert_eq!(room["language"], "zh-Hans", "an alias, kept as its code");
    let room = app.create_room("plain", json!({})).await;
    assert_eq!(room["language"], "en", "the default");

    let refused = app
        .admin(Method::POST, "/api/admin/rooms")
        .json(&json!({"id": "bad", "name": "Bad", "target_url": "/x", "language": "klingon"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_config");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"klingon\""),
        "names the value: {message}"
    );
    assert!(message.contains("pt-BR"), "says what would do: {message}");
    let missing = app
        .admin(Method::GET, "/api/admin/rooms/bad")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404, "nothing was created");

    for bad in ["zh-TW", "", "english", "pt-AO"] {
        let refused = app.patch_room("drop", json!({"language": bad})).await;
        assert_eq!(refused.status(), 400, "{bad:?}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_config", "{bad:?}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("{bad:?}")), "{message}");
    }
    let room: Value = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        room["language"], "zh-Hans",
        "a refused change loses nothing"
    );

    let changed = app.patch_room("drop", json!({"language": "pt"})).await;
    assert_eq!(changed.status(), 200);
    let room: Value = changed.json().await.unwrap();
    assert_eq!(room["language"], "pt-BR");
    let html = page_in(&app, "/rooms/drop", None, None, None)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(html_lang(&html), "pt-BR", "the page follows the change");
    assert!(html.contains("Você está na fila"), "{html}");
}

/// A join's body: nothing, `null` and `{}` are the same join; fields this
/// version does not know are ignored; anything but an object is refused
/// as JSON (an array is not read as the fields in order); a field of the
/// wrong type gets its own refusal.
#[tokio::test]
async fn a_join_body_is_an_object_or_nothing() {
    let app = TestApp::spawn().await;
    app.create_room("drop", json!({"paused": true})).await;
    let join = |body: &'static str| {
        reqwest::Client::new()
            .post(app.url("/api/rooms/drop/join"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
    };
    for body in ["", "null", "{}", r#"{"newer_field": [1, 2], "code": ""}"#] {
        let joined = join(body).await.unwrap();
        assert_eq!(joined.status(), 200, "the body {body:?}");
        let status: Value = joined.json().await.unwrap();
        assert_eq!(status["state"], "waiting", "the body {body:?}");
    }
    for body in ["[]", r#"["pow", "user"]"#, r#""text""#, "5", "{not json"] {
        let (status, code) = error_of(join(body).await.unwrap()).await;
        assert_eq!(
            (status, code.as_str()),
            (400, "invalid_json"),
            "the body {body:?}"
        );
    }
    let (status, code) = error_of(join(r#"{"code": 5}"#).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (400, "invalid_body"));
    let (status, code) = error_of(join(r#"{"user": {}}"#).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (401, "invalid_user_token"));
    let (status, code) = error_of(join(r#"{"pow": true}"#).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (403, "pow_invalid"));
}

#[tokio::test]
async fn malformed_input_gets_a_400_that_names_the_problem() {
    let app = TestApp::spawn().await;
    let post = |body: &'static str| {
        app.admin(Method::POST, "/api/admin/rooms")
            .header("Content-Type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(
        error_of(post("{not json").await.unwrap()).await,
        (400, "invalid_json".into())
    );
    let (status, code) = error_of(
        post(r#"{"id":"a","name":"A","target_url":"/x","admit_per_tick":-1}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_room"));
    let (status, code) = error_of(
        post(r#"{"id":"a","name":"A","target_url":"/x","tick_ms":1}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_config"));
    let (status, code) = error_of(
        post(r#"{"id":"a","name":"A","target_url":"javascript:alert(1)"}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_config"));

    let huge = format!(
        r#"{{"id":"a","name":"{}","target_url":"/x"}}"#,
        "n".repeat(64 * 1024)
    );
    let too_large = app
        .admin(Method::POST, "/api/admin/rooms")
        .header("Content-Type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(too_large).await, (413, "payload_too_large".into()));

    app.create_room("exists", json!({})).await;
    let again = app
        .admin(Method::POST, "/api/admin/rooms")
        .json(&json!({"id":"exists","name":"x","target_url":"/x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(again).await, (409, "room_exists".into()));
    let bad_patch = app.patch_room("exists", json!({"paused": "yes"})).await;
    assert_eq!(error_of(bad_patch).await.0, 400);
    let room: Value = app
        .admin(Method::GET, "/api/admin/rooms/exists")
        .fetch_json()
        .await;
    assert_eq!(room["paused"], false, "a refused change changes nothing");
}

#[tokio::test]
async fn the_operator_api_needs_the_admin_token() {
    let app = TestApp::spawn().await;
    for (method, path) in [
        (Method::GET, "/api/admin/rooms"),
        (Method::POST, "/api/admin/rooms"),
        (Method::GET, "/api/admin/rooms/any"),
        (Method::PATCH, "/api/admin/rooms/any"),
        (Method::DELETE, "/api/admin/rooms/any"),
        (Method::GET, "/api/admin/rooms/any/history"),
    ] {
        let anonymous = app
            .http
            .request(method.clone(), app.url(path))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(error_of(anonymous).await.0, 401, "{method} {path}");
        let wrong = app
            .http
            .request(method.clone(), app.url(path))
            .bearer_auth("guess")
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(error_of(wrong).await.0, 401, "{method} {path}");
    }
}

#[tokio::test]
async fn operators_change_rooms_and_closing_tells_every_socket() {
    let app = TestApp::spawn().await;
    let created = app
        .create_room("live", json!({"admit_per_tick": 1, "max_active": 5}))
        .await;
    assert_eq!(created["max_active"], 5);
    assert_eq!(created["stats"]["waiting"], 0);
    app.join_api("live").await;
    let waiting = app.join_api("live").await;
    let mut socket = app
        .connect("live", waiting["ticket"].as_str().unwrap())
        .await;
    assert_eq!(next_status(&mut socket).await["position"], 1);

    let changed: Value = app
        .patch_room("live", json!({"admit_per_tick": 7, "max_active": null}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            changed["admit_per_tick"].as_u64(),
            changed["max_active"].is_null()
        ),
        (Some(7), true)
    );
    let listed: Value = app
        .admin(Method::GET, "/api/admin/rooms")
        .fetch_json()
        .await;
    assert_eq!(listed["rooms"][0]["id"], "live");
    assert_eq!(listed["rooms"][0]["stats"]["active"], 1);
    assert_eq!(
        next_status(&mut socket).await["state"],
        "waiting",
        "a config change reaches sockets"
    );

    let closed = app
        .admin(Method::DELETE, "/api/admin/rooms/live")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    assert_eq!(next_status(&mut socket).await["state"], "closed");
    assert_eq!(close_code(&mut socket).await, 1000);
    let after: Value = app
        .status_api("live", waiting["ticket"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(after["state"], "closed");
    let join_closed = app
        .http
        .post(app.url("/api/rooms/live/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(join_closed).await, (409, "room_closed".into()));
}

#[tokio::test]
async fn bad_frames_close_only_their_socket() {
    let app = TestApp::spawn().await;
    app.create_room("frames", json!({"paused": true})).await;
    let mut sockets = Vec::new();
    for _ in 0..3 {
        let status = app.join_api("frames").await;
        let mut socket = app
            .connect("frames", status["ticket"].as_str().unwrap())
            .await;
        next_status(&mut socket).await;
        sockets.push(socket);
    }
    // Pings are answered; unknown messages get an error, not a crash.
    send_text(&mut sockets[0], r#"{"type":"ping"}"#).await;
    assert_eq!(next_json(&mut sockets[0]).await["type"], "pong");
    send_text(&mut sockets[0], r#"{"type":"teleport"}"#).await;
    assert_eq!(next_json(&mut sockets[0]).await["code"], "unknown_type");
    send_text(&mut sockets[0], "not json").await;
    assert_eq!(next_json(&mut sockets[0]).await["type"], "error");

    send_text(&mut sockets[1], "x".repeat(5 * 1024)).await;
    assert_eq!(
        close_code(&mut sockets[1]).await,
        1009,
        "oversized frames: message too big"
    );
    use futures_util::SinkExt;
    sockets[2]
        .send(Message::binary(vec![1u8, 2, 3]))
        .await
        .unwrap();
    assert_eq!(
        close_code(&mut sockets[2]).await,
        1003,
        "binary frames: unsupported data"
    );

    let health = app.http.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    app.patch_room("frames", json!({"paused": false})).await;
    app.step(5_000).await;
    let survivor = next_status(&mut sockets[0]).await;
    assert_eq!(
        survivor["type"], "status",
        "the well-behaved socket still gets updates"
    );
}

#[tokio::test]
async fn a_reconnect_keeps_the_place_and_absence_loses_it() {
    let app = TestApp::spawn().await;
    app.create_room(
        "steady",
        json!({"admit_per_tick": 1, "abandon_after_s": 20, "paused": true}),
    )
    .await;
    let kept = app.join_api("steady").await;
    let lost = app.join_api("steady").await;
    let ticket = kept["ticket"].as_str().unwrap();
    drop(app.connect("steady", ticket).await);
    let mut again = app.connect("steady", ticket).await;
    assert_eq!(
        next_status(&mut again).await["position"],
        1,
        "reconnecting keeps the place"
    );
    // 25 s: the socket holder stays present, the other never polls.
    for _ in 0..5 {
        app.step(5_000).await;
    }
    let gone = app
        .status_api("steady", lost["ticket"].as_str().unwrap())
        .await;
    let gone: Value = gone.json().await.unwrap();
    assert_eq!(
        (&gone["state"], &gone["reason"]),
        (&json!("expired"), &json!("away_too_long")),
        "told plainly why: {gone}"
    );
    assert_eq!(gone["kept_away_seconds"], Value::Null);
    let here: Value = app.status_api("steady", ticket).await.json().await.unwrap();
    assert_eq!(here["position"], 1);
    assert_eq!(here["kept_away_seconds"], 20);
}

/// The page says how long a place is kept while away, as the room is set
/// now (five minutes by default), and the status carries it so the page's
/// script keeps the note true when the operator changes it.
#[tokio::test]
async fn the_page_says_how_long_a_place_is_kept_while_away() {
    let app = TestApp::spawn().await;
    app.create_room("away", json!({})).await;
    let page = app.get_text("/rooms/away").await;
    assert!(
        page.contains("your place is kept for 5 min.")
            && page.contains(r#"data-kept-away-seconds="300""#),
        "{page}"
    );
    app.patch_room("away", json!({"abandon_after_s": 45})).await;
    let page = app.get_text("/rooms/away").await;
    assert!(page.contains("your place is kept for 45 s."), "{page}");
    app.patch_room("away", json!({"abandon_after_s": 600, "paused": true}))
        .await;
    let joined = app.join_api("away").await;
    assert_eq!(joined["kept_away_seconds"], 600, "{joined}");
}

#[tokio::test]
async fn every_socket_holder_stays_present_when_they_fill_more_than_one_batch() {
    let app = TestApp::spawn().await;
    app.create_room(
        "crowded",
        json!({"admit_per_tick": 1, "abandon_after_s": 20, "paused": true}),
    )
    .await;
    let holders = waitroom::live::promoter::PRESENCE_BATCH + 1;
    let mut tickets = Vec::new();
    for _ in 0..holders {
        tickets.push(
            app.join_api("crowded").await["ticket"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let mut sockets = Vec::new();
    for ticket in &tickets {
        let mut socket = app.connect("crowded", ticket).await;
        next_status(&mut socket).await;
        sockets.push(socket);
    }
    // 25 s: past abandon_after_s for anyone the refresh left out.
    for _ in 0..5 {
        app.step(5_000).await;
    }
    // Whoever the refresh left out would be gone, and the last to join
    // would stand nearer the front.
    let last: Value = app
        .status_api("crowded", tickets.last().unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(last["state"], "waiting", "{last}");
    assert_eq!(last["position"], holders as u64, "{last}");
}

#[tokio::test]
async fn operations_endpoints_answer() {
    let app = TestApp::spawn().await;
    app.create_room("ops", json!({})).await;
    app.join_api("ops").await;
    app.step(5_000).await;
    assert_eq!(
        app.http
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        app.http
            .get(app.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let metrics = app.get_text("/metrics").await;
    for name in [
        "waitroom_waiting",
        "waitroom_active",
        "waitroom_join_seconds_bucket",
        "waitroom_tick_seconds_bucket",
        "process_resident_memory_bytes",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
}

#[tokio::test]
async fn a_visitor_who_leaves_hears_left_and_those_behind_move_up() {
    let app = TestApp::spawn().await;
    app.create_room("exit", json!({"paused": true})).await;
    let leaver = app.join_api("exit").await;
    let stayer = app.join_api("exit").await;
    let mut leaver_socket = app
        .connect("exit", leaver["ticket"].as_str().unwrap())
        .await;
    let mut stayer_socket = app
        .connect("exit", stayer["ticket"].as_str().unwrap())
        .await;
    next_status(&mut leaver_socket).await;
    assert_eq!(next_status(&mut stayer_socket).await["position"], 2);
    let left = app
        .http
        .post(app.url("/api/rooms/exit/leave"))
        .bearer_auth(leaver["ticket"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 204);
    assert_eq!(next_status(&mut leaver_socket).await["state"], "left");
    app.step(5_000).await;
    assert_eq!(next_status(&mut stayer_socket).await["position"], 1);
}

#[tokio::test]
async fn a_node_full_of_sockets_refuses_more_with_a_503_and_frees_places_as_they_close() {
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let mut settings = waitroom_testkit::test_settings();
    settings.max_sockets = Some(2);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    let app = TestApp::spawn_with(settings, stores, clock).await;
    app.create_room("full", json!({"paused": true})).await;
    let mut tickets = Vec::new();
    for _ in 0..3 {
        tickets.push(
            app.join_api("full").await["ticket"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut first = app.connect("full", &tickets[0]).await;
    next_status(&mut first).await;
    let mut second = app.connect("full", &tickets[1]).await;
    next_status(&mut second).await;
    match tokio_tungstenite::connect_async(app.ws_url("full", &tickets[2])).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503);
            let body: Value =
                serde_json::from_slice(response.body().as_deref().unwrap_or_default()).unwrap();
            assert_eq!(body["error"]["code"], "too_many_sockets");
        }
        other => panic!("expected a 503, got {other:?}"),
    }
    // The refused visitor still polls, and gets a socket once one closes.
    let polled = app.status_api("full", &tickets[2]).await;
    assert_eq!(polled.status(), 200);
    first.close(None).await.unwrap();
    // The node forgets a socket before it sends the closing frame, so the place is free now.
    assert_eq!(close_code(&mut first).await, 1005);
    let mut third = app.connect("full", &tickets[2]).await;
    assert_eq!(next_status(&mut third).await["position"], 3);
}

/// Writes raw bytes on a new connection and reads until `until` appears in
/// what came back (or the connection ends), returning all of it as text.
async fn raw_exchange(port: u16, request: &[u8], until: &str) -> String {
    let answer = raw_exchange_within(port, request, until, std::time::Duration::from_secs(10));
    String::from_utf8_lossy(&answer.await).into_owned()
}

/// [`raw_exchange`]'s bytes as they came, waiting up to `limit` for `until`.
async fn raw_exchange_within(
    port: u16,
    request: &[u8],
    until: &str,
    limit: std::time::Duration,
) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream.write_all(request).await.unwrap();
    let mut received = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&received).contains(until) {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read)
        .await
        .expect("an answer in time");
    received
}

/// The handshake of a WebSocket to `room` with `ticket`, as raw bytes.
fn raw_handshake(room: &str, ticket: &str) -> Vec<u8> {
    format!(
        "GET /api/rooms/{room}/ws?ticket={ticket} HTTP/1.1\r\nHost: x\r\n\
         Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .into_bytes()
}

/// Sends a WebSocket handshake to `room` with `ticket` on a raw
/// connection and reads until the socket's first status has come; returns
/// what it read (the answer's head, then frames).
async fn handshake_until_status(
    stream: &mut tokio::net::TcpStream,
    room: &str,
    ticket: &str,
) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(&raw_handshake(room, ticket))
        .await
        .unwrap();
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while !String::from_utf8_lossy(&received).contains(r#""type":"status""#) {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut chunk))
            .await
            .expect("the handshake's answer in time")
            .unwrap();
        assert!(n > 0, "the server hung up during the handshake");
        received.extend_from_slice(&chunk[..n]);
    }
    received
}

/// What a flooding client saw of a socket it broke the protocol on.
#[derive(Debug)]
struct Flooded {
    /// The code of the server's close frame.
    close_code: Option<u16>,
    /// Bytes the client wrote after its violation before the server cut
    /// the connection.
    written_after: usize,
}

/// The most a flooding client may write past its violation: what the
/// server may read after refusing (64 KiB), plus what the two kernels hold
/// (the server's receive buffer, which reads of a few KiB leave at its
/// default, and the client's small send buffer, 64 KiB to spare). Here
/// clients wrote 48–80 KiB; a server that kept reading took all 256 MiB.
fn flood_allowance() -> usize {
    let rmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").expect("Linux's /proc");
    let default_receive_buffer: usize = rmem
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("tcp_rmem's default");
    64 * 1024 + default_receive_buffer + 64 * 1024
}

/// Opens a socket over raw TCP (with a small send buffer, so what the
/// client has written is close to what reached the server), waits for its
/// first status, sends `violation`, then writes `flood` over and over as
/// fast as the server takes it until the connection fails (or 256 MiB
/// went, which only a server that keeps reading takes).
async fn violate_then_flood(app: &TestApp, room: &str, violation: &[u8], flood: &[u8]) -> Flooded {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    app.create_room(room, json!({"paused": true})).await;
    let status = app.join_api(room).await;
    let ticket = status["ticket"].as_str().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(4096).unwrap();
    let mut stream = socket
        .connect(([127, 0, 0, 1], app.port).into())
        .await
        .unwrap();
    let mut received = handshake_until_status(&mut stream, room, ticket).await;
    let mut chunk = vec![0u8; 64 * 1024];
    stream.write_all(violation).await.unwrap();
    let flood = flood.repeat((16 * 1024 / flood.len()).max(1));
    let mut written_after = 0usize;
    let (mut reader, mut writer) = stream.split();
    let flooding = async {
        let (mut reading, mut writing) = (true, true);
        // Until the server has cut the connection, and everything it sent
        // before that (its close frame) is read.
        while reading || writing {
            tokio::select! {
                read = reader.read(&mut chunk), if reading => match read {
                    Ok(0) | Err(_) => reading = false,
                    Ok(n) => received.extend_from_slice(&chunk[..n]),
                },
                written = writer.write(&flood), if writing => match written {
                    Ok(n) => {
                        written_after += n;
                        writing = written_after < 256 << 20;
                    }
                    Err(_) => writing = false,
                },
            }
        }
    };
    tokio::time::timeout(PATIENCE, flooding)
        .await
        .expect("the server cuts the connection in time");
    Flooded {
        close_code: close_code_in(&received),
        written_after,
    }
}

/// The code of the first close frame among the server's frames in
/// `received` (the handshake's answer, then unmasked frames).
fn close_code_in(received: &[u8]) -> Option<u16> {
    let head_end = received.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let mut frames = &received[head_end..];
    while frames.len() >= 2 {
        let (length, start) = match frames[1] & 0x7f {
            126 => (usize::from(u16::from_be_bytes([frames[2], frames[3]])), 4),
            127 => return None,
            short => (usize::from(short), 2),
        };
        if frames[0] & 0x0f == 0x8 {
            let payload = frames.get(start..start + 2)?;
            return Some(u16::from_be_bytes([payload[0], payload[1]]));
        }
        frames = frames.get(start + length..)?;
    }
    None
}

#[tokio::test]
async fn a_client_that_breaks_the_protocol_then_floods_is_cut_off_at_once() {
    let app = TestApp::spawn().await;
    // A masked text frame declaring 1 GiB, its "data" the flood.
    let mut huge = vec![0x81, 0x80 | 127];
    huge.extend_from_slice(&(1u64 << 30).to_be_bytes());
    huge.extend_from_slice(&[0, 0, 0, 0]);
    // A masked binary frame of three bytes, then well-formed pings.
    let binary = [0x82, 0x83, 0, 0, 0, 0, 1, 2, 3];
    let ping = br#"{"type":"ping"}"#;
    let mut pings = vec![0x81, 0x80 | ping.len() as u8, 0, 0, 0, 0];
    pings.extend_from_slice(ping);
    // A text frame the client did not mask.
    let unmasked = [0x81, 0x02, b'h', b'i'];
    let allowance = flood_allowance();
    for (room, violation, flood, code) in [
        ("flood-huge", &huge[..], &[0u8][..], 1009),
        ("flood-binary", &binary[..], &pings[..], 1003),
        ("flood-unmasked", &unmasked[..], &[0u8][..], 1002),
    ] {
        let flooded = violate_then_flood(&app, room, violation, flood).await;
        assert_eq!(flooded.close_code, Some(code), "{room}: {flooded:?}");
        assert!(
            flooded.written_after <= allowance,
            "{room}: the server kept reading after its refusal: {flooded:?}, allowed {allowance}"
        );
    }
}

#[tokio::test]
async fn a_quiet_socket_is_pinged_and_let_go_when_it_never_answers() {
    // A heartbeat of 200 ms (10 s unless set): the rule is the same at any beat.
    let mut settings = waitroom_testkit::test_settings();
    settings.socket_ping_ms = 200;
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    let app = TestApp::spawn_with(settings, stores, clock).await;
    // Paused, with a tick an hour apart: after its first status the socket
    // hears nothing, so its heartbeat pings it (at every beat from the
    // second: the first finds the first status sent).
    app.create_room("quiet", json!({"paused": true, "tick_ms": 3_600_000}))
        .await;
    let status = app.join_api("quiet").await;
    let ticket = status["ticket"].as_str().unwrap();
    // A client that reads but never answers a ping: its pings go
    // unanswered, and three beats after the first it is closed (1001).
    let answer = raw_exchange_within(
        app.port,
        &raw_handshake("quiet", ticket),
        "no answer to pings",
        std::time::Duration::from_secs(10),
    )
    .await;
    let shown = String::from_utf8_lossy(&answer);
    assert!(shown.starts_with("HTTP/1.1 101"), "{shown}");
    // A ping frame: FIN and opcode 9, an empty payload.
    assert!(
        answer.windows(2).any(|frame| frame == [0x89, 0x00]),
        "{shown}"
    );
    // A close frame with code 1001 and the reason, at the end.
    let reason = b"no answer to pings";
    assert!(answer.ends_with(reason), "{shown}");
    let code = &answer[answer.len() - reason.len() - 2..answer.len() - reason.len()];
    assert_eq!(code, 1001u16.to_be_bytes(), "{shown}");
}

#[tokio::test]
async fn upgrade_requests_for_other_protocols_get_the_plain_http_answer() {
    let app = TestApp::spawn().await;
    // What `curl --http2 http://…` sends: every upgrade request passes the
    // node's upgrade path, which must answer it like any other request.
    let answer = raw_exchange(
        app.port,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n\
          Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
        "\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let refused = raw_exchange(
        app.port,
        b"GET /api/rooms/nowhere/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n\
          Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        "}}",
    )
    .await;
    // A refused WebSocket gets its HTTP error whole, as JSON.
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(refused.contains(r#""code":"missing_ticket""#), "{refused}");
}

#[tokio::test]
async fn a_frame_sent_right_behind_the_handshake_is_answered() {
    let app = TestApp::spawn().await;
    app.create_room("eager", json!({"paused": true})).await;
    let status = app.join_api("eager").await;
    let ticket = status["ticket"].as_str().unwrap();
    // The handshake and a ping in one write: the ping reaches the server
    // with the request, before the socket leaves the HTTP dispatcher.
    let mut request = raw_handshake("eager", ticket);
    let ping = br#"{"type":"ping"}"#;
    // A masked text frame; a zero mask leaves the payload as it is.
    request.extend_from_slice(&[0x81, 0x80 | ping.len() as u8, 0, 0, 0, 0]);
    request.extend_from_slice(ping);
    let answer = raw_exchange(app.port, &request, r#"{"type":"pong"}"#).await;
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    assert!(answer.contains(r#""type":"status""#), "{answer}");
    assert!(answer.contains(r#"{"type":"pong"}"#), "{answer}");
}

#[tokio::test]
async fn a_client_ping_frame_gets_its_pong() {
    use futures_util::{SinkExt, StreamExt};
    let app = TestApp::spawn().await;
    app.create_room("pings", json!({"paused": true})).await;
    let (mut socket, _) = app.visitor_socket("pings").await;
    socket
        .send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
        .await
        .expect("a pong in time")
        .expect("the socket is open")
        .expect("a valid frame");
    assert_eq!(answer, Message::Pong(b"are you there".to_vec().into()));
}

#[tokio::test]
async fn a_websocket_handshake_the_server_would_not_relay_is_refused() {
    let app = TestApp::spawn().await;
    app.create_room("odd", json!({"paused": true})).await;
    let status = app.join_api("odd").await;
    let ticket = status["ticket"].as_str().unwrap();
    // actix's HTTP/1 parser takes a request for an upgrade only when its
    // `Upgrade` is `websocket` alone and it has no chunked body; actix-ws's
    // handshake check takes both of these. Neither would ever get its
    // frames through: each gets the handshake's own refusal, and no socket.
    let handshake = raw_handshake("odd", ticket);
    let handshake = String::from_utf8(handshake).unwrap();
    for (what, request) in [
        (
            "another protocol beside websocket",
            handshake.replace("Upgrade: websocket", "Upgrade: websocket, foo"),
        ),
        (
            "a chunked body",
            handshake.replace(
                "\r\n\r\n",
                "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            ),
        ),
    ] {
        let answer = raw_exchange(app.port, request.as_bytes(), "}").await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{what}: {answer}");
        assert!(
            answer.contains(r#""code":"not_a_websocket""#),
            "{what}: {answer}"
        );
    }
    // The same ticket's plain handshake opens its socket.
    let mut socket = app.connect("odd", ticket).await;
    assert_eq!(next_status(&mut socket).await["position"], 1);
}

#[tokio::test]
async fn the_listen_queue_holds_a_burst_of_visitors() {
    // A full accept queue drops SYNs, and clients retry only after a
    // second; the kernel's default (128) is far below a ticket drop's burst.
    let app = TestApp::spawn().await;
    let output = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{}", app.port)])
        .output()
        .expect("`ss` (Debian's iproute2) reads the listen queue's size; scripts/test installs it");
    let listing = String::from_utf8_lossy(&output.stdout);
    // "LISTEN 0 4096 127.0.0.1:PORT 0.0.0.0:*": the third column is the backlog.
    let backlog: Vec<&str> = listing
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    assert_eq!(
        backlog,
        [waitroom::startup::LISTEN_BACKLOG.to_string()],
        "{listing}"
    );
}

/// This process's resident memory (the app runs in it), from /proc.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux's /proc");
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|pages| pages.parse::<u64>().ok())
        .expect("resident pages")
        * 4096
}

#[tokio::test]
async fn a_frame_declaring_more_than_the_limit_is_refused_at_its_header() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn().await;
    app.create_room("huge", json!({"paused": true})).await;
    let status = app.join_api("huge").await;
    let ticket = status["ticket"].as_str().unwrap();
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", app.port))
        .await
        .unwrap();
    handshake_until_status(&mut stream, "huge", ticket).await;
    // Only what comes after the first status is searched for the close.
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let before = resident_bytes();
    // A masked text frame declaring 2^40 bytes, then as much data as the
    // server will take, up to 64 MiB.
    let mut header = vec![0x81, 0x80 | 127];
    header.extend_from_slice(&(1u64 << 40).to_be_bytes());
    header.extend_from_slice(&[0, 0, 0, 0]);
    stream.write_all(&header).await.unwrap();
    let data = vec![b'x'; 64 * 1024];
    let close_1009 = [0x88u8, 0x03, 0xF1];
    let mut sent = 0usize;
    let mut writing = true;
    let (mut reader, mut writer) = stream.split();
    let found = tokio::time::timeout(PATIENCE, async {
        loop {
            if received.windows(3).any(|w| w == close_1009) {
                return true;
            }
            tokio::select! {
                read = reader.read(&mut chunk) => match read {
                    Ok(0) | Err(_) => return received.windows(3).any(|w| w == close_1009),
                    Ok(n) => received.extend_from_slice(&chunk[..n]),
                },
                written = writer.write(&data), if writing => match written {
                    Ok(n) => {
                        sent += n;
                        writing = sent < 64 * 1024 * 1024;
                    }
                    // Cut off: what the server sent before is still to read.
                    Err(_) => writing = false,
                },
            }
        }
    })
    .await
    .expect("the server answers in time");
    // The close frame's first bytes: 0x88, a length, then 1009 (0x03F1).
    let close_at = received.windows(2).position(|w| w[0] == 0x88);
    assert!(
        found || close_at.is_some_and(|at| received[at + 2..].starts_with(&[0x03, 0xF1])),
        "closed with 1009; got {:?}",
        &received[..received.len().min(64)]
    );
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 16 * 1024 * 1024,
        "the server buffered the frame: resident memory grew by {grown} bytes"
    );
}

#[tokio::test]
async fn a_fragmented_text_message_is_read_whole() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let app = TestApp::spawn().await;
    app.create_room("fragments", json!({"paused": true})).await;
    let (mut socket, _) = app.visitor_socket("fragments").await;
    let (first, rest) = r#"{"type":"ping"}"#.split_at(6);
    socket
        .send(Message::Frame(Frame::message(
            first.as_bytes().to_vec(),
            OpCode::Data(Data::Text),
            false,
        )))
        .await
        .unwrap();
    socket
        .send(Message::Frame(Frame::message(
            rest.as_bytes().to_vec(),
            OpCode::Data(Data::Continue),
            true,
        )))
        .await
        .unwrap();
    assert_eq!(next_json(&mut socket).await["type"], "pong");
}

/// security.md, item 11: a fragmented message over the limit closes with
/// 1009, as a single frame over it does (the docs' promise).
#[tokio::test]
async fn a_fragmented_message_over_the_limit_closes_with_1009() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let app = TestApp::spawn().await;
    app.create_room("fragments", json!({"paused": true})).await;
    let (mut socket, _) = app.visitor_socket("fragments").await;
    let limit = waitroom::live::socket::MAX_MESSAGE_BYTES;
    let half = vec![b' '; limit / 2 + 1];
    for (opcode, last) in [(Data::Text, false), (Data::Continue, true)] {
        // The server may already have closed before the second: no unwrap.
        let _ = socket
            .send(Message::Frame(Frame::message(
                half.clone(),
                OpCode::Data(opcode),
                last,
            )))
            .await;
    }
    assert_eq!(close_code(&mut socket).await, 1009);
}

#[tokio::test]
async fn a_background_task_that_dies_makes_the_node_unready() {
    let app = TestApp::spawn().await;
    let ready = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    app.handle.tasks.spawn_service("probe", async {});
    let deadline = std::time::Instant::now() + PATIENCE;
    while app.handle.tasks.failures().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the failure is recorded"
        );
        tokio::task::yield_now().await;
    }
    let unready = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(unready.status(), 503);
    let body: Value = unready.json().await.unwrap();
    assert_eq!(body["error"]["code"], "task_failed");
    assert!(body["error"]["message"].as_str().unwrap().contains("probe"));
}

#[tokio::test]
async fn one_ticket_holds_a_few_sockets_and_the_newest_replace_the_oldest() {
    let app = TestApp::spawn().await;
    app.create_room("tabs", json!({"paused": true})).await;
    let status = app.join_api("tabs").await;
    let ticket = status["ticket"].as_str().unwrap();
    let limit = waitroom::live::registry::SOCKETS_PER_TICKET;
    let mut sockets = Vec::new();
    for _ in 0..limit + 2 {
        let mut socket = app.connect("tabs", ticket).await;
        next_status(&mut socket).await;
        sockets.push(socket);
    }
    for socket in &mut sockets[..2] {
        assert_eq!(close_code(socket).await, 1008, "the oldest are replaced");
    }
    assert_eq!(app.handle.hub.registry().open_sockets(), limit);
    // The newest still hear their room.
    send_text(&mut sockets[limit + 1], r#"{"type":"ping"}"#).await;
    assert_eq!(next_json(&mut sockets[limit + 1]).await["type"], "pong");
}

#[tokio::test]
async fn metrics_can_live_on_their_own_address() {
    let mut settings = waitroom_testkit::test_settings();
    settings.metrics_listen = Some("127.0.0.1:0".into());
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    let app = TestApp::spawn_with(settings, stores, clock).await;
    let public = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(public.status(), 404, "not on the public port");
    let port = app.metrics_port.expect("a metrics port");
    let private = app
        .http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(private.status(), 200);
    assert!(
        private
            .text()
            .await
            .unwrap()
            .contains("process_resident_memory_bytes")
    );
}

#[tokio::test]
async fn a_body_that_trickles_in_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut settings = waitroom_testkit::test_settings();
    settings.body_timeout_ms = 300;
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    let app = TestApp::spawn_with(settings, stores, clock).await;
    app.create_room("slow", json!({})).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", app.port))
        .await
        .unwrap();
    // A body of 10,000 bytes declared, 1 sent, and then nothing.
    let request = format!(
        "PATCH /api/admin/rooms/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{{",
        app.admin_token
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes the connection in time")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#""code":"body_timeout""#), "{answer}");
}

/// The value of the first `name="csrf"` hidden field of a page.
fn csrf_field(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a csrf field") + 19;
    html[at..].split('"').next().unwrap().to_string()
}

/// The value a response sets for cookie `name`.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_string())
}

/// Logs in through the admin page's form; returns the session cookie.
pub(crate) async fn log_in(app: &TestApp, client: &reqwest::Client) -> String {
    let page = client.get(app.url("/admin")).send().await.unwrap();
    let login_csrf = set_cookie(&page, "wr_csrf").expect("the login form's cookie");
    let form_csrf = csrf_field(&page.text().await.unwrap());
    let answer = client
        .post(app.url("/admin/login"))
        .header("cookie", format!("wr_csrf={login_csrf}"))
        .form(&[("token", app.admin_token.as_str()), ("csrf", &form_csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303, "logged in");
    set_cookie(&answer, "wr_admin").expect("a session cookie")
}

pub(crate) fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn guessing_the_admin_token_is_shut_out_per_address() {
    let app = TestApp::spawn().await;
    let rooms = app.url("/api/admin/rooms");
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let answer = app
            .http
            .get(&rooms)
            .bearer_auth("a-wrong-guess")
            .send()
            .await
            .unwrap();
        statuses.push(answer.status().as_u16());
    }
    assert_eq!(&statuses[..10], [401; 10]);
    assert_eq!(&statuses[10..], [429, 429], "past 10 wrong tokens a minute");
    let right = app
        .http
        .get(&rooms)
        .bearer_auth(&app.admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 429, "the right token too, while shut out");
    let retry_after: u64 = right.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let body: Value = right.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_attempts");
    // The login form is shut for that address too.
    let client = no_redirects();
    let page = client.get(app.url("/admin")).send().await.unwrap();
    let login_csrf = set_cookie(&page, "wr_csrf").unwrap();
    let form_csrf = csrf_field(&page.text().await.unwrap());
    let answer = client
        .post(app.url("/admin/login"))
        .header("cookie", format!("wr_csrf={login_csrf}"))
        .form(&[("token", app.admin_token.as_str()), ("csrf", &form_csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 429);
}

#[tokio::test]
async fn an_admin_session_ends_at_logout_and_when_idle() {
    let app = TestApp::spawn().await;
    let client = no_redirects();
    let rooms = app.url("/api/admin/rooms");
    let with = |cookie: &str| {
        client
            .get(&rooms)
            .header("cookie", format!("wr_admin={cookie}"))
    };
    // Logout: the old cookie stops working.
    let session = log_in(&app, &client).await;
    assert_eq!(with(&session).send().await.unwrap().status(), 200);
    let page = client
        .get(app.url("/admin"))
        .header("cookie", format!("wr_admin={session}"))
        .send()
        .await
        .unwrap();
    let csrf = csrf_field(&page.text().await.unwrap());
    let out = client
        .post(app.url("/admin/logout"))
        .header("cookie", format!("wr_admin={session}"))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    assert_eq!(with(&session).send().await.unwrap().status(), 401, "ended");
    // Idle: unused for 31 minutes, a session ends; used, it is refreshed.
    let session = log_in(&app, &client).await;
    app.clock.advance_ms(20 * 60_000);
    let used = with(&session).send().await.unwrap();
    assert_eq!(used.status(), 200);
    let refreshed = set_cookie(&used, "wr_admin").expect("a refreshed cookie");
    app.clock.advance_ms(20 * 60_000);
    assert_eq!(
        with(&session).send().await.unwrap().status(),
        401,
        "the old one went idle"
    );
    assert_eq!(
        with(&refreshed).send().await.unwrap().status(),
        200,
        "the refreshed one lives"
    );
    app.clock.advance_ms(31 * 60_000);
    assert_eq!(with(&refreshed).send().await.unwrap().status(), 401, "idle");
}

#[tokio::test]
async fn a_join_with_the_pages_body_keeps_its_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn().await;
    app.create_room("kept", json!({"paused": true})).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", app.port))
        .await
        .unwrap();
    // Two requests on one connection: the join with the body the page
    // sends, then a health check.
    stream
        .write_all(
            b"POST /api/rooms/kept/join HTTP/1.1\r\nHost: x\r\n\
              Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}\
              GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 8192];
    let read = async {
        while String::from_utf8_lossy(&answer)
            .matches("HTTP/1.1 200")
            .count()
            < 2
        {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection closed after the join");
            answer.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("both answers in time");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        !answer.to_lowercase().contains("connection: close"),
        "{answer}"
    );
    // A body that is no JSON object is refused, and says so.
    let refused = app
        .http
        .post(app.url("/api/rooms/kept/join"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");
}

#[tokio::test]
async fn cookies_carry_secure_when_the_server_is_reached_over_https() {
    for secure in [false, true] {
        let mut settings = waitroom_testkit::test_settings();
        settings.secure_cookies = secure;
        let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
        let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
        let app = TestApp::spawn_with(settings, stores, clock).await;
        app.create_room("tls", json!({})).await;
        let joined = app
            .http
            .post(app.url("/api/rooms/tls/join"))
            .send()
            .await
            .unwrap();
        let cookies: Vec<String> = joined
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        assert!(cookies.len() >= 2, "the ticket and the pass: {cookies:?}");
        for cookie in &cookies {
            assert_eq!(cookie.contains("; Secure"), secure, "{cookie}");
        }
    }
}

/// An app whose joins are limited to `per_minute` new places per client
/// address, believing `X-Forwarded-For` only from `trusted`.
async fn limited_app(per_minute: u32, trusted: &[&str]) -> TestApp {
    limited_app_by(per_minute, trusted, 64).await
}

/// `limited_app`, with IPv6 addresses counted per network of `ipv6_prefix` bits.
async fn limited_app_by(per_minute: u32, trusted: &[&str], ipv6_prefix: u8) -> TestApp {
    let mut settings = waitroom_testkit::test_settings();
    settings.join_rate_per_ip = Some(per_minute);
    settings.join_rate_ipv6_prefix = ipv6_prefix;
    settings.trusted_proxies = trusted
        .iter()
        .map(|entry| waitroom::http::client_address::parse_trusted_proxy(entry).unwrap())
        .collect();
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    TestApp::spawn_with(settings, stores, clock).await
}

async fn join_from(app: &TestApp, room: &str, forwarded_for: &str) -> reqwest::Response {
    app.http
        .post(app.url(&format!("/api/rooms/{room}/join")))
        .header("X-Forwarded-For", forwarded_for)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
}

async fn join_from_bytes(app: &TestApp, room: &str, forwarded_for: &[u8]) -> reqwest::Response {
    app.http
        .post(app.url(&format!("/api/rooms/{room}/join")))
        .header(
            "X-Forwarded-For",
            reqwest::header::HeaderValue::from_bytes(forwarded_for).unwrap(),
        )
        .json(&json!({}))
        .send()
        .await
        .unwrap()
}

/// security.md, item 1: an `X-Forwarded-For` that is not text never makes
/// the trusted proxy the client. Behind the proxy (here the test's own
/// 127.0.0.1), what it appended is still read; what cannot be read makes
/// an unknown client, never inside a bypass, and all unknown clients share
/// one join budget.
#[tokio::test]
async fn a_forwarded_for_that_is_not_text_never_makes_the_proxy_the_client() {
    let app = limited_app(1, &["127.0.0.1"]).await;
    let networks = json!(["127.0.0.0/8", "203.0.113.0/24"]);
    app.create_room("drop", json!({"paused": true, "bypass_networks": networks}))
        .await;
    let status: Value = join_from_bytes(&app, "drop", b"\xff, 203.0.113.9")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        status["state"], "admitted",
        "the client the proxy appended is read past the bytes left of it"
    );
    let answer = join_from_bytes(&app, "drop", b"\xff").await;
    assert_eq!(answer.status(), 200);
    let status: Value = answer.json().await.unwrap();
    assert_eq!(
        status["state"], "waiting",
        "an unreadable client is not the proxy, whose address is a bypass"
    );
    let second = join_from_bytes(&app, "drop", b"nonsense").await;
    assert_eq!(
        second.status(),
        429,
        "every unknown client shares one join budget"
    );
}

/// api.md, "Bypass networks": the address is the one the join limit reads
/// (a trusted proxy's `X-Forwarded-For`); such a client is admitted at once,
/// paused room, cap or join limit notwithstanding, outside the cap.
#[tokio::test]
async fn a_bypass_networks_client_is_let_in_at_once_and_bad_entries_are_named() {
    let app = limited_app(1, &["127.0.0.1"]).await;
    let networks = json!(["203.0.113.0/24", "2001:db8::/32", "192.0.2.7"]);
    let created = app
        .create_room(
            "drop",
            json!({"paused": true, "max_active": 1, "bypass_networks": networks}),
        )
        .await;
    assert_eq!(created["bypass_networks"], networks, "shown as given");
    for (from, state) in [
        ("203.0.113.9", "admitted"),
        ("203.0.113.9", "admitted"),
        ("2001:db8::7", "admitted"),
        ("198.51.100.1", "waiting"),
        ("192.0.2.7", "admitted"),
    ] {
        let answer = join_from(&app, "drop", from).await;
        assert_eq!(answer.status(), 200, "{from}: past the join limit too");
        let status: Value = answer.json().await.unwrap();
        assert_eq!(status["state"], state, "{from}");
        if state == "admitted" {
            let verified = app
                .http
                .get(app.url("/api/verify?room=drop"))
                .bearer_auth(status["pass"].as_str().unwrap())
                .send()
                .await
                .unwrap();
            assert_eq!(verified.status(), 204, "{from}: the pass is a pass");
        }
    }
    // Without the trusted proxy's word, the peer (127.0.0.1) is no bypass.
    let direct = limited_app(10, &[]).await;
    direct
        .create_room("drop", json!({"paused": true, "bypass_networks": networks}))
        .await;
    let status: Value = join_from(&direct, "drop", "203.0.113.9")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        status["state"], "waiting",
        "a client's own X-Forwarded-For is ignored"
    );

    let room = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    let stats = &room["stats"];
    assert_eq!(
        (
            &stats["bypassed"],
            &stats["bypassed_active"],
            &stats["active"],
            &stats["waiting"]
        ),
        (&json!(4), &json!(4), &json!(0), &json!(1))
    );

    for (bad, named) in [
        (json!(["10.0.0.0/33"]), "\"10.0.0.0/33\""),
        (json!(["10.0.0.1", "shop.example"]), "\"shop.example\""),
        (json!(["2001:db8::/129"]), "\"2001:db8::/129\""),
        (json!("10.0.0.0/8"), "bypass_networks"),
    ] {
        let refused = app
            .patch_room("drop", json!({"bypass_networks": bad}))
            .await;
        assert_eq!(refused.status(), 400, "{bad}");
        let body: Value = refused.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{bad}: {message}");
        assert_eq!(body["error"]["code"], "invalid_config", "{bad}");
        let created = app
            .admin(Method::POST, "/api/admin/rooms")
            .json(&json!({"id": "other", "name": "O", "target_url": "/", "bypass_networks": bad}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 400, "{bad}");
    }
    let room = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    assert_eq!(
        room["bypass_networks"], networks,
        "a refused change changes nothing"
    );
}

/// The rooms table counts the priority line among those waiting.
#[tokio::test]
async fn the_admin_page_shows_the_priority_line() {
    let app = TestApp::spawn().await;
    app.create_room("drop", json!({"paused": true})).await;
    let added = app
        .admin(Method::POST, "/api/admin/rooms/drop/codes")
        .json(&json!({"group": "fans", "codes": ["FAN-7c4e9a1b3d5f8e20"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    for body in [json!({"code": "FAN-7c4e9a1b3d5f8e20"}), json!({})] {
        let joined = app
            .http
            .post(app.url("/api/rooms/drop/join"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(joined.status(), 200, "{body}");
    }
    let client = no_redirects();
    let session = log_in(&app, &client).await;
    let html = client
        .get(app.url("/admin"))
        .header("cookie", format!("wr_admin={session}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(r#"data-stat="waiting">2</td>"#),
        "two waiting"
    );
    assert!(
        html.contains(r#"data-stat="priority_waiting">1</td>"#),
        "one of them in the priority line"
    );
}

/// The admin page edits the list one entry a line; a bad entry comes back
/// as the page's error and changes nothing.
#[tokio::test]
async fn the_admin_page_edits_bypass_networks() {
    let app = TestApp::spawn().await;
    app.create_room("drop", json!({})).await;
    let client = no_redirects();
    let session = log_in(&app, &client).await;
    let page = |client: &reqwest::Client| {
        client
            .get(app.url("/admin"))
            .header("cookie", format!("wr_admin={session}"))
            .send()
    };
    let csrf = csrf_field(&page(&client).await.unwrap().text().await.unwrap());
    let post = |networks: &'static str| {
        client
            .post(app.url("/admin/rooms/drop"))
            .header("cookie", format!("wr_admin={session}"))
            .form(&[("csrf", csrf.as_str()), ("bypass_networks", networks)])
            .send()
    };
    let answer = post("203.0.113.7\r\n 10.20.0.0/16 \n\n2001:db8::/32")
        .await
        .unwrap();
    assert_eq!(answer.status(), 303);
    let room = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    assert_eq!(
        room["bypass_networks"],
        json!(["203.0.113.7", "10.20.0.0/16", "2001:db8::/32"])
    );
    let html = page(&client).await.unwrap().text().await.unwrap();
    assert!(
        html.contains(">203.0.113.7\n10.20.0.0/16\n2001:db8::/32</textarea>"),
        "shown one a line"
    );

    let refused = post("10.0.0.0/8\nnot-a-network").await.unwrap();
    assert_eq!(refused.status(), 400);
    let html = refused.text().await.unwrap();
    assert!(html.contains("not-a-network"), "the refusal names it");
    let room = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    assert_eq!(room["bypass_networks"].as_array().unwrap().len(), 3);

    assert_eq!(post("").await.unwrap().status(), 303);
    let room = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    assert_eq!(room["bypass_networks"], json!([]), "emptied");
}

/// Each node keeps a room's last hour of figures from its tick answers,
/// one sample per 10 s at most, 360 at most; the operator API serves them.
#[tokio::test]
async fn a_rooms_history_holds_its_last_hour_of_ticks() {
    let app = TestApp::spawn().await;
    app.create_room(
        "drop",
        json!({"admit_per_tick": 1, "tick_ms": 1000, "max_active": 50}),
    )
    .await;
    let history = |room: &str| {
        app.admin(Method::GET, &format!("/api/admin/rooms/{room}/history"))
            .send()
    };
    let anonymous = app
        .http
        .get(app.url("/api/admin/rooms/drop/history"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(anonymous).await.0, 401);
    assert_eq!(
        error_of(history("nowhere").await.unwrap()).await,
        (404, "room_not_found".into())
    );
    let empty: Value = history("drop").await.unwrap().json().await.unwrap();
    // A room made through the API is asked for its tick at once: at most
    // that answer, of an empty room.
    let samples = empty["samples"].as_array().unwrap();
    assert!(samples.len() <= 1, "{samples:?}");
    assert!(
        samples
            .iter()
            .all(|s| s["waiting"] == 0 && s["active"] == 0),
        "{samples:?}"
    );
    assert_eq!(
        (empty["every_s"].as_u64(), empty["kept"].as_u64()),
        (Some(10), Some(360))
    );

    for _ in 0..3 {
        app.join_api("drop").await;
    }
    // The node's own promoter may have sampled the first join already (at
    // the start); the driven tick ten seconds on is sampled either way,
    // and one a second later is too soon for another.
    app.step(10_000).await;
    app.step(1_000).await;
    let answer: Value = history("drop").await.unwrap().json().await.unwrap();
    let samples = answer["samples"].as_array().unwrap();
    assert!((1..=2).contains(&samples.len()), "{answer}");
    assert_eq!(
        samples.last().unwrap(),
        &json!({"at": "2026-01-01T00:00:10.000Z", "waiting": 1, "active": 2,
               "admitted_last_minute": 2, "max_active": 50}),
        "one passed through, one admitted by the tick, one waits"
    );
    assert_eq!(answer["now"], "2026-01-01T00:00:11.000Z");

    // Seventy minutes of ticks: the ring keeps the last hour, in order.
    for _ in 0..420 {
        app.step(10_000).await;
    }
    let answer: Value = history("drop").await.unwrap().json().await.unwrap();
    let samples = answer["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 360, "never more than an hour of samples");
    assert_eq!(samples[359]["at"], answer["now"]);
    let at = |i: usize| samples[i]["at"].as_str().unwrap().to_owned();
    assert!((1..360).all(|i| at(i - 1) < at(i)), "oldest first");

    // A room closed and made again starts with no history of the old one.
    let closed = app
        .admin(Method::DELETE, "/api/admin/rooms/drop")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    app.create_room("drop", json!({})).await;
    // The node's promoter hears of the close as a store event.
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let answer: Value = history("drop").await.unwrap().json().await.unwrap();
        let samples = answer["samples"].as_array().unwrap();
        if samples.iter().all(|s| s["at"] == answer["now"]) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the old room's samples stay: {}",
            samples.len()
        );
        tokio::task::yield_now().await;
    }
}

/// A room form the server refuses is answered with the page itself (400),
/// the refusal next to the field it names (aria-invalid, aria-describedby,
/// focused) and at the top; what went through is named in the URL by a word
/// of the catalogue.
#[tokio::test]
async fn a_refused_room_form_shows_the_error_next_to_its_field() {
    let app = TestApp::spawn().await;
    app.create_room("drop", json!({})).await;
    let client = no_redirects();
    let session = log_in(&app, &client).await;
    let cookie = format!("wr_admin={session}");
    let page = |path: String| client.get(app.url(&path)).header("cookie", &cookie).send();
    let csrf = csrf_field(&page("/admin".into()).await.unwrap().text().await.unwrap());
    let post = |path: &'static str, form: Vec<(&'static str, &'static str)>| {
        let mut form = form;
        form.push(("csrf", csrf.as_str()));
        client
            .post(app.url(path))
            .header("cookie", &cookie)
            .form(&form)
            .send()
    };
    let refused_page = |answer: reqwest::Response| async move {
        assert_eq!(answer.status(), 400);
        assert!(
            answer.headers().get("location").is_none(),
            "the refusal's text never travels in a URL"
        );
        answer.text().await.unwrap()
    };

    let refused = post("/admin/rooms/drop", vec![("admit_per_tick", "0")])
        .await
        .unwrap();
    let html = refused_page(refused).await;
    let message = "admit_per_tick must be between 1 and 100000";
    assert!(
        html.contains(r#"name="admit_per_tick" value="10" aria-invalid="true" aria-describedby="edit-drop-admit_per_tick-error" autofocus>"#),
        "the field is marked"
    );
    assert!(html.contains(&format!(
        r#"<p class="field-error" id="edit-drop-admit_per_tick-error">{message}</p>"#
    )));
    assert!(
        html.contains(&format!(r#"id="flash-error" role="alert">{message}</p>"#)),
        "and at the top"
    );
    assert_eq!(html.matches("aria-invalid").count(), 1, "only that field");
    let room = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    assert_eq!(room["admit_per_tick"], 10, "nothing changed");

    // The form's own checks name their field too.
    let refused = post("/admin/rooms/drop", vec![("opens_at", "tomorrow")])
        .await
        .unwrap();
    let html = refused_page(refused).await;
    assert!(html.contains(r#"aria-describedby="edit-drop-opens_at-error" autofocus>"#));

    // The create form's fields are its own: no room.
    let refused = post(
        "/admin/rooms",
        vec![("id", "Bad Id"), ("name", "A"), ("target_url", "/a")],
    )
    .await
    .unwrap();
    let html = refused_page(refused).await;
    assert!(html.contains(r#"aria-invalid="true" aria-describedby="create-id-error" autofocus>"#));
    assert!(html.contains(r#"<p class="field-error" id="create-id-error">id must be"#));

    // What went through: a word and a room in the URL, the text the page's.
    let done = post("/admin/rooms/drop", vec![("admit_per_tick", "20")])
        .await
        .unwrap();
    assert_eq!(done.status(), 303);
    let back = done.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(back, "/admin?done=room_updated&room=drop");
    let html = page(back).await.unwrap().text().await.unwrap();
    assert!(html.contains(r#"id="flash-message" role="status">Room drop updated.</p>"#));
}

/// security.md, item 7: the admin page shows no text from its URL; a link
/// anyone can make names at most a word of the catalogue.
#[tokio::test]
async fn the_admin_page_shows_no_text_from_its_url() {
    let app = TestApp::spawn().await;
    app.create_room("drop", json!({})).await;
    let client = no_redirects();
    let session = log_in(&app, &client).await;
    let planted = "Session locked: call 555-0100 and read out your admin token";
    let query = serde_urlencoded::to_string([
        ("error", planted),
        ("message", planted),
        ("field", "admit_per_tick"),
        ("room", "drop"),
        ("done", planted),
        ("refused", planted),
    ])
    .unwrap();
    let html = client
        .get(app.url(&format!("/admin?{query}")))
        .header("cookie", format!("wr_admin={session}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"id="rooms-table""#), "the page itself");
    assert!(!html.contains("555-0100"), "{html}");
    assert!(!html.contains("flash"), "nothing to say");
    assert!(!html.contains("aria-invalid"), "no field marked");
}

#[tokio::test]
async fn joins_past_the_per_address_limit_are_429_with_retry_after() {
    let app = limited_app(2, &[]).await;
    app.create_room("drop", json!({"paused": true})).await;
    // No proxy is trusted: a rotating X-Forwarded-For changes nothing.
    assert_eq!(join_from(&app, "drop", "203.0.113.1").await.status(), 200);
    let kept = join_from(&app, "drop", "203.0.113.2").await;
    assert_eq!(kept.status(), 200);
    let ticket = kept.json::<Value>().await.unwrap()["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = join_from(&app, "drop", "203.0.113.3").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "30");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");

    let again = app
        .http
        .post(app.url("/api/rooms/drop/join"))
        .bearer_auth(&ticket)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200, "a place already held is not a new one");
    let room: Value = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await;
    assert_eq!(room["stats"]["waiting"], 2);
    assert_eq!(room["stats"]["turned_away"], 1);

    app.clock.advance_ms(30_000);
    assert_eq!(
        join_from(&app, "drop", "203.0.113.4").await.status(),
        200,
        "one more per 30 s"
    );
}

#[tokio::test]
async fn only_a_trusted_proxy_names_the_client() {
    let app = limited_app(1, &["127.0.0.0/8"]).await;
    app.create_room("drop", json!({"paused": true})).await;
    // The test client is the trusted proxy: each address it names is a client.
    for client in ["203.0.113.1", "203.0.113.2", "2001:db8::7"] {
        assert_eq!(
            join_from(&app, "drop", client).await.status(),
            200,
            "{client}"
        );
    }
    let same = join_from(&app, "drop", "6.6.6.6, 203.0.113.1").await;
    assert_eq!(
        same.status(),
        429,
        "the proxy's own entry counts, not what the client wrote before it"
    );
    let garbage = join_from(&app, "drop", "not-an-address").await;
    assert_eq!(
        garbage.status(),
        200,
        "garbage falls back to the proxy itself"
    );
    assert_eq!(
        join_from(&app, "drop", "still-not").await.status(),
        429,
        "…which is one client"
    );
}

#[tokio::test]
async fn an_ipv4_address_counts_once_however_written_and_ipv6_per_network() {
    // One new place a minute per client; the test client is the trusted
    // proxy, so each X-Forwarded-For it sends is a client.
    let app = limited_app(1, &["127.0.0.0/8"]).await;
    app.create_room("drop", json!({"paused": true})).await;
    let joins = |clients: &'static [&'static str]| {
        let app = &app;
        async move {
            let mut statuses = Vec::new();
            for client in clients {
                statuses.push(join_from(app, "drop", client).await.status().as_u16());
            }
            statuses
        }
    };
    assert_eq!(
        joins(&["203.0.113.1", "::ffff:203.0.113.1"]).await,
        [200, 429],
        "IPv4-mapped is the same address"
    );
    assert_eq!(
        joins(&["::ffff:203.0.113.2", "203.0.113.2"]).await,
        [200, 429]
    );
    assert_eq!(
        joins(&["2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:3::1"]).await,
        [200, 429, 200],
        "one budget per /64, another /64 has its own"
    );

    // Per /48: the two /64s above share one budget; per /128 each address has its own.
    let wide = limited_app_by(1, &["127.0.0.0/8"], 48).await;
    wide.create_room("drop", json!({"paused": true})).await;
    let mut statuses = Vec::new();
    for client in ["2001:db8:1:2::1", "2001:db8:1:3::1", "2001:db8:2::1"] {
        statuses.push(join_from(&wide, "drop", client).await.status().as_u16());
    }
    assert_eq!(statuses, [200, 429, 200]);
    let narrow = limited_app_by(1, &["127.0.0.0/8"], 128).await;
    narrow.create_room("drop", json!({"paused": true})).await;
    let mut statuses = Vec::new();
    for client in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::1"] {
        statuses.push(join_from(&narrow, "drop", client).await.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
}

#[tokio::test]
async fn guessing_the_admin_token_from_many_addresses_of_one_network_is_shut_out() {
    let app = limited_app(1, &["127.0.0.0/8"]).await;
    let guess = |client: String| {
        app.http
            .get(app.url("/api/admin/rooms"))
            .header("X-Forwarded-For", client)
            .bearer_auth("a-wrong-guess")
            .send()
    };
    let mut statuses = Vec::new();
    for n in 1..=11 {
        statuses.push(
            guess(format!("2001:db8:7:7::{n:x}"))
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(&statuses[..10], [401; 10]);
    assert_eq!(
        statuses[10], 429,
        "a new address of the same /64 is the same guesser"
    );
    let mapped = guess("::ffff:192.0.2.1".into()).await.unwrap().status();
    assert_eq!(mapped, 401, "another client is not shut out");
}

async fn verify_status(app: &TestApp, room: &str, pass: &str) -> u16 {
    app.http
        .get(app.url(&format!("/api/verify?room={room}")))
        .bearer_auth(pass)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A pass's `sub`, read without checking it (the test made the pass).
fn sub_of(pass: &str) -> String {
    let payload = pass.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload)
            .unwrap(),
    )
    .unwrap();
    claims["sub"].as_str().unwrap().to_owned()
}

async fn revoke(app: &TestApp, room: &str, body: Value) -> reqwest::Response {
    app.admin(
        Method::POST,
        &format!("/api/admin/rooms/{room}/passes/revoke"),
    )
    .json(&body)
    .send()
    .await
    .unwrap()
}

#[tokio::test]
async fn passes_are_revoked_by_pass_by_visitor_and_by_leave_and_free_their_slot() {
    let app = TestApp::spawn().await;
    app.create_room("gate", json!({"max_active": 3, "admit_per_tick": 3}))
        .await;
    let holders: Vec<Value> =
        futures_util::future::join_all((0..3).map(|_| app.join_api("gate"))).await;
    let waiting = app.join_api("gate").await;
    assert_eq!(waiting["state"], "waiting");
    let pass = |n: usize| holders[n]["pass"].as_str().unwrap().to_owned();
    for n in 0..3 {
        assert_eq!(verify_status(&app, "gate", &pass(n)).await, 204);
    }

    assert_eq!(
        revoke(&app, "gate", json!({"pass": pass(0)}))
            .await
            .status(),
        204
    );
    assert_eq!(
        revoke(&app, "gate", json!({"visitor": sub_of(&pass(1))}))
            .await
            .status(),
        204
    );
    let left = app
        .http
        .post(app.url("/api/rooms/gate/leave"))
        .bearer_auth(pass(2))
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 204, "leave takes the pass as Bearer");
    for n in 0..3 {
        let refused = app
            .http
            .get(app.url("/api/verify?room=gate"))
            .bearer_auth(pass(n))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "pass_revoked", "pass {n}");
    }
    let stats = app
        .admin(Method::GET, "/api/admin/rooms/gate")
        .fetch_json()
        .await["stats"]
        .clone();
    assert_eq!(stats["active"], 0, "every slot is free at once");
    assert_eq!(
        revoke(&app, "gate", json!({"pass": pass(0)}))
            .await
            .status(),
        204,
        "revoking again is no error"
    );
    // The report tells the two revocations from the holder who left.
    let report = app
        .admin(Method::GET, "/api/admin/rooms/gate/report")
        .fetch_json()
        .await;
    assert_eq!(
        (&report["revoked"], &report["left"]),
        (&json!(2), &json!(1))
    );
}

#[tokio::test]
async fn revocations_that_name_nothing_are_clear_errors() {
    let app = TestApp::spawn().await;
    app.create_room("gate", json!({})).await;
    app.create_room("other", json!({})).await;
    let other_pass = app.pass_for("other").await;
    let forged = support::tamper(&app.pass_for("gate").await);
    for (body, code) in [
        (json!({"pass": forged}), "invalid_pass"),
        (json!({"pass": "not-a-jwt"}), "invalid_pass"),
        (json!({"pass": other_pass}), "invalid_pass"),
        (json!({"visitor": "nobody"}), "invalid_visitor"),
        (json!({}), "invalid_revocation"),
        (json!({"pass": "x", "visitor": "y"}), "invalid_revocation"),
        (json!({"jti": "x"}), "invalid_revocation"),
    ] {
        let answer = revoke(&app, "gate", body.clone()).await;
        assert_eq!(answer.status(), 400, "{body}");
        let error: Value = answer.json().await.unwrap();
        assert_eq!(error["error"]["code"], code, "{body}");
    }
    assert_eq!(
        revoke(&app, "nowhere", json!({"visitor": sub_of(&other_pass)}))
            .await
            .status(),
        404
    );
    let anonymous = app
        .http
        .post(app.url("/api/admin/rooms/gate/passes/revoke"))
        .json(&json!({"visitor": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test]
async fn a_pass_never_seen_at_verify_is_reclaimed_after_the_grace() {
    let app = TestApp::spawn().await;
    app.create_room(
        "grace",
        json!({"max_active": 2, "admit_per_tick": 2, "arrival_grace_s": 30, "tick_ms": 1000}),
    )
    .await;
    let arrives = app.join_api("grace").await;
    let never = app.join_api("grace").await;
    let next = app.join_api("grace").await;
    assert_eq!(next["state"], "waiting");
    let arrives_pass = arrives["pass"].as_str().unwrap();
    assert_eq!(verify_status(&app, "grace", arrives_pass).await, 204);
    app.step(30_000).await;
    assert_eq!(
        verify_status(&app, "grace", arrives_pass).await,
        204,
        "seen: kept"
    );
    assert_eq!(
        verify_status(&app, "grace", never["pass"].as_str().unwrap()).await,
        401,
        "never seen: reclaimed"
    );
    let room = app
        .admin(Method::GET, "/api/admin/rooms/grace")
        .fetch_json()
        .await;
    assert_eq!(room["arrival_grace_s"], 30);
    assert_eq!(room["stats"]["no_shows"], 1);
    let next_now = app
        .status_api("grace", next["ticket"].as_str().unwrap())
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(next_now["state"], "admitted", "the slot went to the next");
}

const USER_KEY: &str = "the-shop-s-user-key-0123456789abcdef";

/// A user token as the room's site mints it.
fn user_token(key: &str, room: &str, sub: &str, exp_ms: u64) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": sub, "room": room, "exp": exp_ms / 1000}),
        &jsonwebtoken::EncodingKey::from_secret(key.as_bytes()),
    )
    .unwrap()
}

/// A user token with a header and claims of the test's choosing.
fn user_token_with(header: jsonwebtoken::Header, claims: Value) -> String {
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(USER_KEY.as_bytes()),
    )
    .unwrap()
}

async fn join_as(app: &TestApp, room: &str, body: Value) -> reqwest::Response {
    // A fresh client each time: another device, no cookies.
    reqwest::Client::new()
        .post(app.url(&format!("/api/rooms/{room}/join")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// `join_as`, answered 200: the `Status`.
async fn joined_as(app: &TestApp, room: &str, body: Value) -> Value {
    let answer = join_as(app, room, body).await;
    assert_eq!(answer.status(), 200);
    answer.json().await.unwrap()
}

#[tokio::test]
async fn a_known_user_gets_one_place_on_every_device() {
    let app = TestApp::spawn().await;
    let created = app
        .create_room(
            "members",
            json!({"paused": true, "user_key": USER_KEY, "user_required": true}),
        )
        .await;
    assert!(created.get("user_key").is_none(), "the key is write-only");
    assert_eq!(created["user_key_set"], true);
    let in_an_hour = support::START_MS + 3_600_000;
    let alice = user_token(USER_KEY, "members", "alice", in_an_hour);

    let phone = joined_as(&app, "members", json!({"user": alice})).await;
    let laptop = joined_as(&app, "members", json!({"user": alice})).await;
    assert_eq!(phone["position"], 1);
    assert_eq!(laptop["position"], 1, "the same place");
    let bob = user_token(USER_KEY, "members", "bob", in_an_hour);
    let bobs = joined_as(&app, "members", json!({"user": bob})).await;
    assert_eq!(bobs["position"], 2);
    let laptop_status = app
        .status_api("members", laptop["ticket"].as_str().unwrap())
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        laptop_status["position"], 1,
        "the laptop's ticket is for that place"
    );

    let shown = app
        .admin(Method::GET, "/api/admin/rooms/members")
        .fetch_json()
        .await;
    assert!(shown.get("user_key").is_none());
    assert_eq!(shown["stats"]["waiting"], 2);
}

#[tokio::test]
async fn user_tokens_that_fail_are_refused_and_create_no_place() {
    let app = TestApp::spawn().await;
    app.create_room(
        "members",
        json!({"paused": true, "user_key": USER_KEY, "user_required": true}),
    )
    .await;
    let later = support::START_MS + 3_600_000;
    let forged = support::tamper(&user_token(USER_KEY, "members", "alice", later));
    let oversized = format!("{}.{}", "x".repeat(5000), "y");
    let hs256 = || jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    // Good from ten minutes on only.
    let not_yet = user_token_with(
        hs256(),
        json!({"sub": "alice", "room": "members", "exp": later / 1000, "nbf": support::START_MS / 1000 + 600}),
    );
    // Names an extension the token must not be read without.
    let critical = user_token_with(
        jsonwebtoken::Header {
            crit: Some(vec!["exp".into()]),
            ..hs256()
        },
        json!({"sub": "alice", "room": "members", "exp": later / 1000}),
    );
    for (body, code) in [
        (json!({}), "user_required"),
        (json!({"user": null}), "user_required"),
        (
            json!({"user": user_token(USER_KEY, "elsewhere", "alice", later)}),
            "invalid_user_token",
        ),
        (
            json!({"user": user_token(USER_KEY, "members", "alice", support::START_MS)}),
            "invalid_user_token",
        ),
        (
            json!({"user": user_token("another-key-of-thirty-two-chars-long!!", "members", "alice", later)}),
            "invalid_user_token",
        ),
        (json!({"user": forged}), "invalid_user_token"),
        (json!({"user": not_yet}), "invalid_user_token"),
        (json!({"user": critical}), "invalid_user_token"),
        (json!({"user": "not a token"}), "invalid_user_token"),
        (json!({"user": oversized}), "invalid_user_token"),
        (json!({"user": 42}), "invalid_user_token"),
    ] {
        let answer = join_as(&app, "members", body.clone()).await;
        assert_eq!(answer.status(), 401, "{body}");
        let error: Value = answer.json().await.unwrap();
        assert_eq!(error["error"]["code"], code, "{body}");
    }
    let room = app
        .admin(Method::GET, "/api/admin/rooms/members")
        .fetch_json()
        .await;
    assert_eq!(room["stats"]["waiting"], 0, "no refused join made a place");
    app.clock.advance_ms(600_000);
    let now_valid = join_as(&app, "members", json!({"user": not_yet})).await;
    assert_eq!(now_valid.status(), 200, "valid from its nbf on");

    for (change, field) in [
        (json!({"user_key": "short"}), "user_key"),
        (
            json!({"user_key": null, "user_required": true}),
            "user_required",
        ),
    ] {
        let refused = app.patch_room("members", change.clone()).await;
        assert_eq!(refused.status(), 400, "{change}");
        let error: Value = refused.json().await.unwrap();
        assert!(
            error["error"]["message"].as_str().unwrap().contains(field),
            "{error}"
        );
    }
}

/// Solves a room's challenge as the page's worker does; the payload a join
/// carries.
async fn solve_challenge(app: &TestApp, room: &str) -> String {
    let challenge: Value = app
        .http
        .get(app.url(&format!("/api/rooms/{room}/challenge")))
        .fetch_json()
        .await;
    assert_eq!(challenge["algorithm"], "SHA-256");
    let number = waitroom_solve(&challenge);
    let payload = json!({
        "algorithm": "SHA-256", "challenge": challenge["challenge"], "number": number,
        "salt": challenge["salt"], "signature": challenge["signature"],
    });
    base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        payload.to_string(),
    )
}

fn waitroom_solve(challenge: &Value) -> u64 {
    altcha_lib_rs::solve_challenge(
        challenge["challenge"].as_str().unwrap(),
        challenge["salt"].as_str().unwrap(),
        None,
        challenge["maxnumber"].as_u64(),
        0,
    )
    .unwrap()
}

#[tokio::test]
async fn a_join_with_proof_of_work_counts_once_and_bad_ones_are_refused() {
    let app = TestApp::spawn().await;
    // The place outlives the challenge's expiry below, whichever tick runs.
    app.create_room(
        "guarded",
        json!({"paused": true, "pow_difficulty": 1, "abandon_after_s": 3600}),
    )
    .await;
    app.create_room("other", json!({"pow_difficulty": 1})).await;
    let refused = join_as(&app, "guarded", json!({})).await;
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["error"]["code"],
        "pow_required"
    );

    let solution = solve_challenge(&app, "guarded").await;
    let joined = join_as(&app, "guarded", json!({"pow": solution})).await;
    assert_eq!(joined.status(), 200, "{:?}", joined.text().await);
    let replayed = join_as(&app, "guarded", json!({"pow": solution})).await;
    assert_eq!(replayed.status(), 403, "a solution counts once");
    assert_eq!(
        replayed.json::<Value>().await.unwrap()["error"]["code"],
        "pow_invalid"
    );

    let elsewhere = solve_challenge(&app, "other").await;
    let late = solve_challenge(&app, "guarded").await;
    app.step(5 * 60_000 + 1_000).await;
    for (body, what) in [
        (json!({"pow": elsewhere}), "another room's"),
        (json!({"pow": late}), "expired"),
        (json!({"pow": "bm90IGpzb24="}), "not a payload"),
        (json!({"pow": "%%%"}), "not base64"),
        (json!({"pow": "A".repeat(3000)}), "too long"),
        (json!({"pow": 7}), "not a string"),
    ] {
        let answer = join_as(&app, "guarded", body).await;
        assert_eq!(answer.status(), 403, "{what}");
        let code = answer.json::<Value>().await.unwrap()["error"]["code"].clone();
        assert_eq!(code, "pow_invalid", "{what}");
    }
    let room = app
        .admin(Method::GET, "/api/admin/rooms/guarded")
        .fetch_json()
        .await;
    assert_eq!(
        room["stats"]["waiting"], 1,
        "only the good solution made a place"
    );
    assert_eq!(room["pow_difficulty"], 1);
    let metrics = app.get_text("/metrics").await;
    for reason in ["pow_required", "pow_invalid"] {
        assert!(
            metrics
                .lines()
                .any(|line| line.starts_with("waitroom_turned_away_total{")
                    && line.contains(&format!("reason=\"{reason}\""))
                    && line.contains("room=\"guarded\"")),
            "{reason} counted in /metrics"
        );
    }
    let missing = app
        .http
        .get(app.url("/api/rooms/nowhere/challenge"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(
        app.patch_room("guarded", json!({"pow_difficulty": 21}))
            .await
            .status(),
        400
    );
}

/// `payload` (a solution, base64 of ALTCHA's JSON) with its salt rewritten.
fn with_salt(payload: &str, edit: impl Fn(&str) -> String) -> String {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut json: Value = serde_json::from_slice(&engine.decode(payload).unwrap()).unwrap();
    json["salt"] = edit(json["salt"].as_str().unwrap()).into();
    engine.encode(json.to_string())
}

#[tokio::test]
async fn proof_of_work_made_easy_is_refused() {
    let app = TestApp::spawn().await;
    // The place outlives the challenge's expiry below, whichever tick runs.
    app.create_room(
        "steep",
        json!({"paused": true, "pow_difficulty": 1, "abandon_after_s": 3600}),
    )
    .await;
    let refused_why = |answer: reqwest::Response| async move {
        let status = answer.status();
        let body: Value = answer.json().await.unwrap();
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "pow_invalid", "{body}");
        body["error"]["message"].as_str().unwrap().to_string()
    };

    // Solved while the room asked for 1; the room now asks for 2.
    let easy = solve_challenge(&app, "steep").await;
    app.patch_room("steep", json!({"pow_difficulty": 2})).await;
    let why = refused_why(join_as(&app, "steep", json!({"pow": easy})).await).await;
    assert!(why.contains("easier than the room asks"), "{why}");
    let fair = solve_challenge(&app, "steep").await;
    let joined = join_as(&app, "steep", json!({"pow": fair})).await;
    assert_eq!(joined.status(), 200, "a challenge at the room's difficulty");

    // A second expiry after the real one, without its `&` (which ALTCHA's
    // crate ignores while verifying) or before it (the crate keeps the last).
    let far = "99999999999";
    let overridden = solve_challenge(&app, "steep").await;
    let repeated = with_salt(&overridden, |salt| {
        let (base, query) = salt.split_once('?').unwrap();
        format!("{base}?expires={far}&{query}")
    });
    let why = refused_why(join_as(&app, "steep", json!({"pow": repeated})).await).await;
    assert!(why.contains("repeats a parameter"), "{why}");
    app.step(5 * 60_000 + 1_000).await;
    let extended = with_salt(&overridden, |salt| format!("{salt}expires={far}"));
    refused_why(join_as(&app, "steep", json!({"pow": extended})).await).await;
    // And as it came: expired.
    let why = refused_why(join_as(&app, "steep", json!({"pow": overridden})).await).await;
    assert!(why.contains("expired"), "{why}");

    let room = app
        .admin(Method::GET, "/api/admin/rooms/steep")
        .fetch_json()
        .await;
    assert_eq!(
        room["stats"]["waiting"], 1,
        "only the fair solution made a place"
    );
}

#[tokio::test]
async fn made_up_room_ids_never_reach_the_metrics() {
    let app = TestApp::spawn().await;
    // A real room, so its refusals show the metric is still written.
    app.create_room("real", json!({"pow_difficulty": 1})).await;
    let pass = {
        app.create_room("open", json!({})).await;
        app.pass_for("open").await
    };
    let ticket = app.join_api("open").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    for n in 0..20 {
        let made_up = format!("madeup{n}");
        for path in [
            format!("/rooms/{made_up}"),
            format!("/rooms/{made_up}/sale"),
            format!("/api/rooms/{made_up}/status"),
            format!("/api/rooms/{made_up}/challenge"),
            format!("/api/rooms/{made_up}/draw"),
            format!("/api/rooms/{made_up}/draw/entries"),
            format!("/api/rooms/{made_up}/sale"),
            format!("/api/rooms/{made_up}/ws?ticket={ticket}"),
            format!("/api/verify?room={made_up}"),
        ] {
            // Answered whatever the answer (the sale page is a page even
            // for a room it cannot find).
            app.http
                .get(app.url(&path))
                .bearer_auth(&pass)
                .send()
                .await
                .unwrap();
        }
        let handshake = reqwest::Client::new()
            .get(app.url(&format!("/api/rooms/{made_up}/ws?ticket={ticket}")))
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
            .await
            .unwrap();
        assert!(handshake.status().is_client_error());
        for body in [
            json!({}),
            json!({"pow": "not a solution"}),
            json!({"pow": 7}),
            json!({"user": 7}),
            json!({"user": "not.a.token"}),
        ] {
            let answer = join_as(&app, &made_up, body.clone()).await;
            assert_eq!(answer.status(), 404, "{made_up} {body}");
        }
        let claim = app
            .http
            .post(app.url(&format!("/api/rooms/{made_up}/sale/claims")))
            .bearer_auth(&pass)
            .json(&json!({"quantity": 1}))
            .send()
            .await
            .unwrap();
        assert!(claim.status().is_client_error());
    }
    let refused = join_as(&app, "real", json!({"pow": "not a solution"})).await;
    assert_eq!(refused.status(), 403);
    let metrics = app.get_text("/metrics").await;
    assert!(
        !metrics.contains("madeup"),
        "made-up room ids became labels:\n{}",
        metrics
            .lines()
            .filter(|line| line.contains("madeup"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("waitroom_turned_away_total{")
                && line.contains("room=\"real\"")),
        "a real room's refusals are still counted"
    );
}

#[tokio::test]
async fn queue_methods_and_closes_at_show_in_every_answer() {
    let app = TestApp::spawn().await;
    app.create_room("drop", json!({"paused": true, "queue_method": "random"}))
        .await;
    let waiting = app.join_api("drop").await;
    assert_eq!(waiting["queue_method"], "random");
    assert_eq!(
        waiting["position"],
        Value::Null,
        "a random line has no order"
    );

    let rejecting = app
        .patch_room("drop", json!({"queue_method": "reject"}))
        .await;
    assert_eq!(rejecting.status(), 200);
    let turned = join_as(&app, "drop", json!({})).await;
    assert_eq!(turned.status(), 403);
    let body: Value = turned.json().await.unwrap();
    assert_eq!(body["error"]["code"], "room_not_accepting");

    let closing = app
        .patch_room(
            "drop",
            json!({"queue_method": "fifo", "closes_at": "2026-01-01T09:00:30+09:00"}),
        )
        .await;
    assert_eq!(closing.status(), 200);
    let room: Value = closing.json().await.unwrap();
    assert_eq!(room["closes_at"], "2026-01-01T00:00:30Z", "written in UTC");
    assert_eq!(join_as(&app, "drop", json!({})).await.status(), 200);
    app.clock.advance_ms(30_000);
    assert_eq!(join_as(&app, "drop", json!({})).await.status(), 403);

    for (change, said) in [
        (json!({"closes_at": "tomorrow"}), "not an RFC 3339 time"),
        (json!({"queue_method": "lottery"}), "lottery"),
        (
            json!({"notice": "x".repeat(501)}),
            "notice must be at most 500",
        ),
    ] {
        let refused = app.patch_room("drop", change.clone()).await;
        assert_eq!(refused.status(), 400, "{change}");
        let error: Value = refused.json().await.unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(said), "{change}: {message}");
    }
}

/// A minute after the tests' start: `support::START_MS` is 2026-01-01T00:00:00Z.
const OPENING: &str = "2026-01-01T00:01:00Z";

#[tokio::test]
async fn anyone_can_check_the_draw_from_the_commitment_the_seed_and_the_entries() {
    let app = TestApp::spawn().await;
    let room = app
        .create_room(
            "drop",
            // Paused: the draw happens all the same, and the first status
            // after it is the drawn position itself.
            json!({"opens_at": OPENING, "admit_per_tick": 3, "abandon_after_s": 86400, "paused": true}),
        )
        .await;
    assert_eq!(room["opens_at"], OPENING);
    // Published before anyone joins.
    let before = support::draw::published(&app, "drop").await;
    let commitment = before["commitment"].as_str().unwrap().to_string();
    assert_eq!(commitment.len(), 64);
    assert_eq!(
        (&before["seed"], &before["entrants"], &before["drawn_at"]),
        (&Value::Null, &json!(0), &Value::Null)
    );
    let too_early = app
        .http
        .get(app.url("/api/rooms/drop/draw/entries"))
        .send()
        .await
        .unwrap();
    assert_eq!(too_early.status(), 409);
    assert_eq!(
        too_early.json::<Value>().await.unwrap()["error"]["code"],
        "not_drawn"
    );

    let mut visitors = Vec::new();
    for _ in 0..12 {
        let status = app.join_api("drop").await;
        assert_eq!(
            (
                &status["state"],
                &status["position"],
                &status["eta_seconds"]
            ),
            (&json!("waiting"), &Value::Null, &Value::Null),
            "no order before the opening"
        );
        assert_eq!(status["opens_at"], OPENING);
        let entry = status["entry"].as_str().unwrap().to_string();
        let mut socket = app
            .connect("drop", status["ticket"].as_str().unwrap())
            .await;
        assert_eq!(next_status(&mut socket).await["entry"], entry.as_str());
        visitors.push((entry, socket));
        app.step(2_000).await;
    }
    // Admission is never in the pre-queue, even with tokens to spare.
    let stats = app
        .admin(Method::GET, "/api/admin/rooms/drop")
        .fetch_json()
        .await["stats"]
        .clone();
    assert_eq!(
        (&stats["pre_queue"], &stats["active"]),
        (&json!(12), &json!(0))
    );

    app.step(60_000 - 24_000).await;
    let order = support::draw::checked_order(&app, "drop", &commitment).await;
    assert_eq!(order.len(), 12);
    let mut drawn = Vec::new();
    for (entry, socket) in &mut visitors {
        let status = next_status(socket).await;
        let expected = order.iter().position(|e| e == entry).unwrap() as u64 + 1;
        assert_eq!(status["position"], expected, "entry {entry}");
        assert_eq!(status["entry"], entry.as_str());
        drawn.push(expected);
    }
    let draw = support::draw::published(&app, "drop").await;
    assert_eq!(draw["drawn_at"], OPENING);
    let late = app.join_api("drop").await;
    assert_eq!(late["position"], 13, "behind the drawn, in join order");
    assert_eq!(late["entry"], Value::Null);
    // Admission follows the draw.
    app.patch_room("drop", json!({"paused": false})).await;
    for (_, socket) in &mut visitors {
        assert_eq!(
            next_status(socket).await["paused"],
            false,
            "no second draw status"
        );
    }
    app.step(5_000).await;
    for ((_, socket), drawn) in visitors.iter_mut().zip(drawn) {
        let status = next_status(socket).await;
        match drawn {
            1..=3 => assert_eq!(status["state"], "admitted"),
            _ => assert_eq!(status["position"], drawn - 3),
        }
    }
}

#[tokio::test]
async fn draw_requests_for_rooms_without_one_and_bad_openings_get_clear_errors() {
    let app = TestApp::spawn().await;
    app.create_room("plain", json!({})).await;
    for path in ["/api/rooms/plain/draw", "/api/rooms/plain/draw/entries"] {
        let response = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["code"],
            "no_draw"
        );
    }
    let response = app
        .http
        .get(app.url("/api/rooms/nowhere/draw"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "room_not_found"
    );
    for bad in [
        json!({"opens_at": "tomorrow"}),
        json!({"opens_at": "2026-01-01T00:10:00Z", "closes_at": "2026-01-01T00:05:00Z"}),
    ] {
        let response = app.patch_room("plain", bad.clone()).await;
        assert_eq!(response.status(), 400, "{bad}");
    }
    app.patch_room("plain", json!({"opens_at": OPENING})).await;
    app.join_api("plain").await;
    let response = app.patch_room("plain", json!({"opens_at": null})).await;
    assert_eq!(response.status(), 400, "a pre-queue keeps its opening");
    let message = response.json::<Value>().await.unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("pre-queue"), "{message}");
}

async fn room_stats(app: &TestApp, room: &str) -> Value {
    app.admin(Method::GET, &format!("/api/admin/rooms/{room}"))
        .fetch_json()
        .await["stats"]
        .clone()
}

#[tokio::test]
async fn while_the_store_is_unreachable_verify_goes_by_signature_and_the_grace_waits_for_its_return()
 {
    use std::sync::Arc;
    use waitroom::words::VisitorId;
    use waitroom::words::credentials::Credentials;

    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let (store, stores) = support::unreachable::Unreachable::memory(Arc::new(clock.clone()));
    let app = TestApp::spawn_on(stores, clock).await;
    app.create_room(
        "outage",
        json!({"max_active": 2, "admit_per_tick": 2, "arrival_grace_s": 30, "tick_ms": 1000}),
    )
    .await;
    let arrives = app.pass_for("outage").await;
    let never = app.pass_for("outage").await;
    assert_eq!(app.join_api("outage").await["position"], 1);
    let room = waitroom::words::RoomId::parse("outage").unwrap();
    let ours = Credentials::from_secret("test-secret");
    let now = support::START_MS;
    let expired = ours.issue_pass(&room, VisitorId::random(), now - 60_000, now - 1_000);
    let forged = Credentials::from_secret("someone else").issue_pass(
        &room,
        VisitorId::random(),
        now,
        now + 600_000,
    );

    app.step(10_000).await;
    store.set_down(true);
    assert_eq!(
        app.verify("outage", &arrives).await,
        (204, "signature".into()),
        "an admitted visitor keeps their access"
    );
    assert_eq!(
        app.verify("outage", &forged).await,
        (401, "invalid_pass".into())
    );
    assert_eq!(
        app.verify("outage", &support::tamper(&arrives)).await,
        (401, "invalid_pass".into())
    );
    assert_eq!(
        app.verify("outage", &expired).await,
        (401, "pass_expired".into())
    );
    assert_eq!(
        app.verify("other-room", &arrives).await,
        (401, "invalid_pass".into()),
        "another room's pass"
    );
    let join = app
        .http
        .post(app.url("/api/rooms/outage/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(join.status(), 503);
    assert!(join.headers().contains_key("retry-after"));
    let body: Value = join.json().await.unwrap();
    assert_eq!(body["error"]["code"], "store_unavailable");
    assert_eq!(
        app.http
            .get(app.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        503
    );
    app.step(30_000).await; // 40 s: past the grace; ticks fail meanwhile

    // Back: the grace is counted from now, so neither pass is reclaimed.
    store.set_down(false);
    app.step(0).await;
    let stats = room_stats(&app, "outage").await;
    assert_eq!(
        (stats["no_shows"].as_u64(), stats["active"].as_u64()),
        (Some(0), Some(2))
    );
    assert_eq!(
        app.verify("outage", &arrives).await,
        (204, "fully".into()),
        "seen now, and recorded"
    );
    app.step(29_999).await;
    assert_eq!(room_stats(&app, "outage").await["no_shows"], 0);
    app.step(1).await; // 30 s after the return
    assert_eq!(
        room_stats(&app, "outage").await["no_shows"],
        1,
        "never seen: reclaimed a whole grace after the store's return"
    );
    assert_eq!(
        app.verify("outage", &never).await,
        (401, "pass_revoked".into())
    );
    assert_eq!(app.verify("outage", &arrives).await.0, 204);
}

/// An app on the memory store believing `X-Forwarded-For` from the test's
/// own 127.0.0.1, so that each join can come from an address of its own;
/// the code-guess budget as by default.
async fn app_behind_a_proxy() -> TestApp {
    let mut settings = waitroom_testkit::test_settings();
    settings.trusted_proxies =
        vec![waitroom::http::client_address::parse_trusted_proxy("127.0.0.1").unwrap()];
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    TestApp::spawn_with(settings, stores, clock).await
}

async fn join_with_code_from(app: &TestApp, forwarded_for: &str, code: &str) -> reqwest::Response {
    app.http
        .post(app.url("/api/rooms/presale/join"))
        .header("X-Forwarded-For", forwarded_for)
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap()
}

/// Issue 40, item 3 (security.md, "guessing invite codes"): wrong codes
/// from one address spend its code guesses, 10 a minute by default; the
/// 11th is 429 `rate_limited` with `Retry-After`, and so is the right code
/// until the minute has room, each counted in `turned_away`. Another
/// address guesses on its own budget; a join without a code is untouched.
#[tokio::test]
async fn wrong_codes_past_ten_a_minute_from_one_address_are_429_the_right_one_too() {
    let app = app_behind_a_proxy().await;
    app.create_room("presale", json!({"paused": true})).await;
    let right = "presale-5e0c2b7a9d4f1e83c6a2";
    let added = app
        .admin(Method::POST, "/api/admin/rooms/presale/codes")
        .json(&json!({"group": "fans", "uses": 5, "codes": [right]}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    let guesser = "198.51.100.7";
    for i in 0..10 {
        let wrong = join_with_code_from(&app, guesser, &format!("guess-{i:04}")).await;
        assert_eq!(wrong.status(), 403, "guess {i}");
        let body: Value = wrong.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_code");
    }
    let eleventh = join_with_code_from(&app, guesser, "guess-0010").await;
    assert_eq!(eleventh.status(), 429);
    assert_eq!(
        eleventh.headers()["retry-after"],
        "6",
        "one a minute/10 back"
    );
    let body: Value = eleventh.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    let refused = join_with_code_from(&app, guesser, right).await;
    assert_eq!(refused.status(), 429, "the right code too, while shut out");

    let other = join_with_code_from(&app, "198.51.100.8", right).await;
    assert_eq!(other.status(), 200, "another address has its own guesses");
    let plain = join_from(&app, "presale", guesser).await;
    assert_eq!(
        plain.status(),
        200,
        "a join without a code is not held back"
    );
    let stats = app
        .admin(Method::GET, "/api/admin/rooms/presale")
        .fetch_json()
        .await["stats"]
        .clone();
    assert_eq!(stats["turned_away"], 2, "the two refused past the budget");
    assert_eq!(
        (&stats["waiting"], &stats["priority_waiting"]),
        (&json!(2), &json!(1))
    );

    app.clock.advance_ms(6_000);
    let back = join_with_code_from(&app, guesser, right).await;
    assert_eq!(back.status(), 200, "a guess back after 6 s");
}

/// `--code-guesses-per-ip 0` turns the budget off (an operator whose
/// visitors share one address, and who limits elsewhere).
#[tokio::test]
async fn code_guesses_per_ip_zero_turns_the_budget_off() {
    let mut settings = waitroom_testkit::test_settings();
    settings.code_guesses_per_ip = 0;
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    let app = TestApp::spawn_with(settings, stores, clock).await;
    app.create_room("presale", json!({"paused": true})).await;
    for i in 0..15 {
        let wrong = join_with_code_from(&app, "198.51.100.7", &format!("guess-{i:04}")).await;
        assert_eq!(wrong.status(), 403, "guess {i}");
    }
}

/// Issue 40, item 9: the admin lockout is the store's; while the store
/// cannot be reached, the node counts wrong tokens on its own, so a store
/// failure neither locks the operator out nor lets a guesser run free.
#[tokio::test]
async fn while_the_store_is_unreachable_the_node_counts_wrong_tokens_itself() {
    let mut settings = waitroom_testkit::test_settings();
    settings.trusted_proxies =
        vec![waitroom::http::client_address::parse_trusted_proxy("127.0.0.1").unwrap()];
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let (store, stores) =
        support::unreachable::Unreachable::memory(std::sync::Arc::new(clock.clone()));
    let app = TestApp::spawn_with(settings, stores, clock).await;
    let from = |client: &str, token: &str| {
        app.http
            .get(app.url("/api/admin/rooms"))
            .header("X-Forwarded-For", client)
            .bearer_auth(token)
            .send()
    };
    // Two wrong tokens counted by the store before it goes away.
    for _ in 0..2 {
        assert_eq!(
            from("198.51.100.7", "a-wrong-guess")
                .await
                .unwrap()
                .status(),
            401
        );
    }
    store.set_down(true);
    let mut statuses = Vec::new();
    for _ in 0..11 {
        statuses.push(
            from("198.51.100.7", "a-wrong-guess")
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(
        &statuses[..10],
        [401; 10],
        "the node's own count, from zero"
    );
    assert_eq!(statuses[10], 429, "past 10 wrong tokens on this node");
    let right = from("198.51.100.7", &app.admin_token).await.unwrap();
    assert_eq!(
        right.status(),
        429,
        "the right token too, from that address"
    );
    let operator = from("198.51.100.8", &app.admin_token).await.unwrap();
    assert_eq!(
        operator.status(),
        503,
        "the operator's token is let through to a route that needs the store"
    );
    store.set_down(false);
    let back = from("198.51.100.8", &app.admin_token).await.unwrap();
    assert_eq!(back.status(), 200);
}

// Tickets: from where a socket may be opened with one, where one may
// travel, and how long one lasts (issue 40, items 5 and 6).

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// The app with given settings, on the memory store and its own clock.
async fn app_with(settings: waitroom::startup::config::Settings) -> TestApp {
    let clock = waitroom::words::clock::ManualClock::new(support::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    TestApp::spawn_with(settings, stores, clock).await
}

/// The whole `Set-Cookie` line of the cookie `name`, attributes and all.
fn set_cookie_line(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

/// A ticket's claims, read as any JWT decoder shows them (unchecked).
fn ticket_claims(ticket: &str) -> Value {
    use base64::Engine;
    let claims = ticket.split('.').nth(1).expect("a JWT");
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims)
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}

/// How a socket's handshake went: opened (naming the subprotocol the
/// server chose, if any) and its first status read, or refused with its
/// status and error code.
#[derive(Debug, PartialEq)]
enum Handshake {
    Opened { protocol: Option<String> },
    Refused(u16, String),
}

/// Opens `room`'s socket (`query` after its path) with `headers`.
async fn handshake(
    app: &TestApp,
    room: &str,
    query: &str,
    headers: &[(&'static str, String)],
) -> Handshake {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::{Error, http::HeaderValue};
    let mut request = format!("ws://127.0.0.1:{}/api/rooms/{room}/ws{query}", app.port)
        .into_client_request()
        .unwrap();
    for (name, value) in headers {
        request
            .headers_mut()
            .append(*name, HeaderValue::from_str(value).unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((mut socket, answer)) => {
            assert_eq!(next_status(&mut socket).await["room"], room);
            let _ = socket.close(None).await;
            Handshake::Opened {
                protocol: answer
                    .headers()
                    .get("sec-websocket-protocol")
                    .map(|protocol| protocol.to_str().unwrap().to_string()),
            }
        }
        Err(Error::Http(answer)) => {
            let body: Value = serde_json::from_slice(answer.body().as_deref().unwrap_or_default())
                .expect("a JSON error body");
            Handshake::Refused(
                answer.status().as_u16(),
                body["error"]["code"].as_str().unwrap().to_string(),
            )
        }
        Err(other) => panic!("the handshake failed: {other}"),
    }
}

fn opened() -> Handshake {
    Handshake::Opened { protocol: None }
}

#[tokio::test]
async fn a_socket_opened_with_the_cookie_comes_from_the_rooms_own_origin_or_a_listed_one() {
    let mut settings = support::test_settings();
    settings.cors_origins = vec!["https://shop.example".into()];
    let app = app_with(settings).await;
    app.create_room("gated", json!({"paused": true})).await;
    let ticket = app.join_api("gated").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let cookie = ("cookie", format!("wr_ticket_gated={ticket}"));
    let origin = |origin: &str| ("origin", origin.to_string());
    let own = format!("http://127.0.0.1:{}", app.port);
    let refused = Handshake::Refused(403, "origin_not_allowed".into());

    // A sibling subdomain's page (the browser adds the cookie to its socket
    // too), another port or scheme of our host, a sandboxed page.
    for foreign in [
        "https://evil.example",
        "http://127.0.0.1:1",
        &format!("https://127.0.0.1:{}", app.port),
        "null",
    ] {
        let headers = [cookie.clone(), origin(foreign)];
        assert_eq!(
            handshake(&app, "gated", "", &headers).await,
            refused,
            "{foreign}"
        );
    }
    // The room's own origin, a listed one, no Origin at all (no browser's page).
    for headers in [
        vec![cookie.clone(), origin(&own)],
        vec![cookie.clone(), origin("https://shop.example")],
        vec![cookie.clone()],
    ] {
        assert_eq!(
            handshake(&app, "gated", "", &headers).await,
            opened(),
            "{headers:?}"
        );
    }
    // Behind a proxy that ends TLS, the scheme is the one it names.
    let behind_tls = [
        cookie.clone(),
        origin(&format!("https://127.0.0.1:{}", app.port)),
        ("x-forwarded-proto", "https".into()),
    ];
    assert_eq!(handshake(&app, "gated", "", &behind_tls).await, opened());

    // A ticket given explicitly: the page had it to give, whatever its origin.
    let foreign = origin("https://evil.example");
    let as_bearer = [
        foreign.clone(),
        ("authorization", format!("Bearer {ticket}")),
    ];
    assert_eq!(handshake(&app, "gated", "", &as_bearer).await, opened());
    let as_protocol = [
        foreign.clone(),
        cookie.clone(),
        (
            "sec-websocket-protocol",
            format!("waitroom, waitroom.ticket.{ticket}"),
        ),
    ];
    assert_eq!(
        handshake(&app, "gated", "", &as_protocol).await,
        Handshake::Opened {
            protocol: Some("waitroom".into())
        }
    );
    let in_query = format!("?ticket={ticket}");
    assert_eq!(
        handshake(&app, "gated", &in_query, std::slice::from_ref(&foreign)).await,
        opened()
    );

    // With --public-url, its origin is the room's own, whatever the Host.
    let mut settings = support::test_settings();
    settings.public_url =
        Some(waitroom::words::return_url::PublicUrl::parse("https://wait.example/queue").unwrap());
    let public = app_with(settings).await;
    public.create_room("gated", json!({"paused": true})).await;
    let ticket = public.join_api("gated").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let cookie = ("cookie", format!("wr_ticket_gated={ticket}"));
    assert_eq!(
        handshake(
            &public,
            "gated",
            "",
            &[cookie.clone(), origin("https://wait.example")]
        )
        .await,
        opened()
    );
    let host = format!("http://127.0.0.1:{}", public.port);
    assert_eq!(
        handshake(&public, "gated", "", &[cookie, origin(&host)]).await,
        refused
    );
}

#[tokio::test]
async fn the_socket_takes_its_ticket_as_a_subprotocol_and_answers_ours() {
    let app = TestApp::spawn().await;
    app.create_room("proto", json!({"paused": true})).await;
    let ticket = app.join_api("proto").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    for offered in [
        format!("waitroom, waitroom.ticket.{ticket}"),
        format!("waitroom.ticket.{ticket}, waitroom"),
    ] {
        assert_eq!(
            handshake(&app, "proto", "", &[("sec-websocket-protocol", offered)]).await,
            Handshake::Opened {
                protocol: Some("waitroom".into())
            }
        );
    }
    let forged = support::tamper(&ticket);
    assert_eq!(
        handshake(
            &app,
            "proto",
            "",
            &[(
                "sec-websocket-protocol",
                format!("waitroom, waitroom.ticket.{forged}")
            )]
        )
        .await,
        Handshake::Refused(401, "invalid_ticket".into())
    );
    // `?ticket=` still opens the socket (api.md fixes it).
    assert_eq!(
        handshake(&app, "proto", &format!("?ticket={ticket}"), &[]).await,
        opened()
    );
}

#[tokio::test]
async fn status_and_leave_take_no_ticket_from_the_address() {
    let app = TestApp::spawn().await;
    app.create_room("quiet", json!({"paused": true})).await;
    let ticket = app.join_api("quiet").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let status = app
        .http
        .get(app.url(&format!("/api/rooms/quiet/status?ticket={ticket}")))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(status).await, (401, "missing_ticket".into()));
    let leave = app
        .http
        .post(app.url(&format!("/api/rooms/quiet/leave?ticket={ticket}")))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(leave).await, (401, "missing_ticket".into()));
    // The place is untouched, and the ticket still works where it may go.
    let kept: Value = app.status_api("quiet", &ticket).await.json().await.unwrap();
    assert_eq!(
        (kept["state"].as_str(), kept["position"].as_u64()),
        (Some("waiting"), Some(1))
    );
    let by_cookie = app
        .http
        .post(app.url("/api/rooms/quiet/leave"))
        .header("cookie", format!("wr_ticket_quiet={ticket}"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_cookie.status(), 204);
}

/// Moves the clock on by `ms` in steps of at most half a day, the visitor
/// asking for their status after each (as a page that polls keeps its
/// place while the room's `abandon_after_s`, a day here, would drop it);
/// the last ticket handed out.
async fn wait_asking(app: &TestApp, room: &str, ticket: &str, ms: u64) -> String {
    let mut ticket = ticket.to_string();
    let mut left = ms;
    while left > 0 {
        let step = left.min(DAY_MS / 2);
        app.clock.advance_ms(step);
        left -= step;
        let status: Value = app.status_api(room, &ticket).await.json().await.unwrap();
        assert_eq!(status["state"], "waiting", "{status}");
        ticket = status["ticket"].as_str().unwrap().to_string();
    }
    ticket
}

#[tokio::test]
async fn an_expired_ticket_opens_nothing_and_a_join_with_its_cookie_takes_a_new_place() {
    let app = TestApp::spawn().await;
    app.create_room("week", json!({"paused": true, "abandon_after_s": 86400}))
        .await;
    let first = app.join_api("week").await;
    let ticket = first["ticket"].as_str().unwrap().to_string();
    assert_eq!(
        ticket_claims(&ticket)["exp"],
        (support::START_MS + 7 * DAY_MS) / 1000,
        "a week"
    );
    // Its place is kept by newer tickets; this one is never renewed.
    wait_asking(&app, "week", &ticket, 7 * DAY_MS - 1000).await;
    assert_eq!(app.status_api("week", &ticket).await.status(), 200);
    app.clock.advance_ms(1000);
    assert_eq!(
        error_of(app.status_api("week", &ticket).await).await,
        (401, "invalid_ticket".into())
    );
    let cookie = ("cookie", format!("wr_ticket_week={ticket}"));
    let refused = Handshake::Refused(401, "invalid_ticket".into());
    for (query, headers) in [
        (format!("?ticket={ticket}"), vec![]),
        (String::new(), vec![cookie.clone()]),
        (
            String::new(),
            vec![(
                "sec-websocket-protocol",
                format!("waitroom, waitroom.ticket.{ticket}"),
            )],
        ),
    ] {
        assert_eq!(
            handshake(&app, "week", &query, &headers).await,
            refused,
            "{query} {headers:?}"
        );
    }
    let as_bearer = app
        .http
        .post(app.url("/api/rooms/week/join"))
        .bearer_auth(&ticket)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(as_bearer).await, (401, "invalid_ticket".into()));
    // An expired cookie is replaced, as any invalid one: a new place.
    let by_cookie: Value = app
        .http
        .post(app.url("/api/rooms/week/join"))
        .header(cookie.0, cookie.1)
        .fetch_json()
        .await;
    assert_eq!(by_cookie["position"], 2);
    assert_ne!(
        ticket_claims(by_cookie["ticket"].as_str().unwrap())["sub"],
        ticket_claims(&ticket)["sub"]
    );
}

#[tokio::test]
async fn every_answer_that_sets_the_cookie_hands_out_a_ticket_good_for_longer() {
    let app = TestApp::spawn().await;
    app.create_room("renew", json!({"paused": true, "abandon_after_s": 86400}))
        .await;
    let joined = app
        .http
        .post(app.url("/api/rooms/renew/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        set_cookie_line(&joined, "wr_ticket_renew").map(|c| c.contains("; Max-Age=604800")),
        Some(true),
        "the cookie lasts as long as its ticket"
    );
    let first: Value = joined.json().await.unwrap();
    let first = first["ticket"].as_str().unwrap().to_string();

    // Six days on, a status read with the first ticket.
    wait_asking(&app, "renew", &first, 6 * DAY_MS - DAY_MS / 2).await;
    app.clock.advance_ms(DAY_MS / 2);
    let status = app.status_api("renew", &first).await;
    assert_eq!(
        set_cookie_line(&status, "wr_ticket_renew").map(|c| c.contains("; Max-Age=604800")),
        Some(true)
    );
    let status: Value = status.json().await.unwrap();
    let renewed = status["ticket"].as_str().unwrap().to_string();
    assert_eq!(
        ticket_claims(&renewed)["exp"],
        (support::START_MS + 13 * DAY_MS) / 1000
    );
    assert_eq!(ticket_claims(&renewed)["sub"], ticket_claims(&first)["sub"]);

    app.clock.advance_ms(DAY_MS);
    assert_eq!(
        error_of(app.status_api("renew", &first).await).await,
        (401, "invalid_ticket".into())
    );
    let again: Value = app
        .status_api("renew", &renewed)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (again["state"].as_str(), again["position"].as_u64()),
        (Some("waiting"), Some(1)),
        "the same place, on the renewed ticket"
    );
    // A join renews too.
    let rejoined: Value = app
        .http
        .post(app.url("/api/rooms/renew/join"))
        .bearer_auth(&renewed)
        .fetch_json()
        .await;
    assert_eq!(rejoined["position"], 1);
    assert_eq!(
        ticket_claims(rejoined["ticket"].as_str().unwrap())["exp"],
        (support::START_MS + 14 * DAY_MS) / 1000
    );
}

#[tokio::test]
async fn a_ticket_lasts_until_its_room_closes_if_that_is_later_than_a_week() {
    let app = TestApp::spawn().await;
    let closes_at = support::START_MS + 30 * DAY_MS;
    app.create_room(
        "long",
        json!({"paused": true, "abandon_after_s": 86400,
               "closes_at": waitroom::words::clock::rfc3339(closes_at)}),
    )
    .await;
    let joined = app
        .http
        .post(app.url("/api/rooms/long/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        set_cookie_line(&joined, "wr_ticket_long")
            .map(|c| c.contains(&format!("; Max-Age={}", 30 * DAY_MS / 1000))),
        Some(true)
    );
    let ticket: Value = joined.json().await.unwrap();
    let ticket = ticket["ticket"].as_str().unwrap().to_string();
    assert_eq!(ticket_claims(&ticket)["exp"], closes_at / 1000);
    wait_asking(&app, "long", &ticket, 29 * DAY_MS).await;
    let status: Value = app.status_api("long", &ticket).await.json().await.unwrap();
    assert_eq!(status["position"], 1, "the first ticket, 29 days on");
    // Renewed later than a week before the closing: a week.
    let renewed = status["ticket"].as_str().unwrap();
    assert_eq!(
        ticket_claims(renewed)["exp"],
        (support::START_MS + 36 * DAY_MS) / 1000
    );
}

/// A ticket as the release before signed it: no `exp`.
fn ticket_without_exp(secret: &str, room: &str, visitor: &str, iat_ms: u64) -> String {
    use hmac::Mac;
    let mut key = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    key.update(b"waitroom/v1/ticket");
    let key = key.finalize().into_bytes();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": visitor, "room": room, "iat": iat_ms / 1000}),
        &jsonwebtoken::EncodingKey::from_secret(&key),
    )
    .unwrap()
}

#[tokio::test]
async fn a_ticket_of_the_release_before_is_honoured_until_a_week_after_it_was_issued() {
    let app = TestApp::spawn().await;
    app.create_room("old", json!({"paused": true, "abandon_after_s": 86400}))
        .await;
    let joined = app.join_api("old").await;
    let visitor = ticket_claims(joined["ticket"].as_str().unwrap())["sub"]
        .as_str()
        .unwrap()
        .to_string();
    let old = ticket_without_exp("test-secret", "old", &visitor, support::START_MS);
    assert_eq!(ticket_claims(&old).get("exp"), None);
    // The place kept by the tickets its status reads hand out.
    wait_asking(&app, "old", &old, 7 * DAY_MS - 1000).await;
    let status: Value = app.status_api("old", &old).await.json().await.unwrap();
    assert_eq!(status["position"], 1, "its place");
    assert_eq!(
        ticket_claims(status["ticket"].as_str().unwrap())["exp"],
        (support::START_MS + 14 * DAY_MS - 1000) / 1000,
        "and a ticket with an exp in its stead"
    );
    app.clock.advance_ms(1000);
    assert_eq!(
        error_of(app.status_api("old", &old).await).await,
        (401, "invalid_ticket".into())
    );
}
