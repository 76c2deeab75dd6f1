//! Web push, end to end where it can be without a browser: the VAPID key
//! nodes publish (`GET /api/push/key`) follows `--secret`, the token a
//! push carries verifies with it, and a push's body is read by a
//! decrypter that is not ours (Python's http_ece, as a browser would).

use waitroom_testkit as support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use p256::SecretKey;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use serde_json::{Value, json};
use support::{TestApp, repo, test_settings};
use waitroom::startup::Stores;
use waitroom::words::clock::ManualClock;
use waitroom::words::credentials::Credentials;
use waitroom::words::notify::{PushKeys, PushSubscription};
use waitroom::words::push::{PushHosts, PushRequest, parse_push_host, push_request};

async fn node_with_secret(secret: &str) -> TestApp {
    let mut settings = test_settings();
    settings.secret = Some(secret.into());
    let clock = ManualClock::new(support::START_MS);
    TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await
}

/// `GET /api/push/key`'s key, checked for its form and caching.
async fn push_key(app: &TestApp) -> String {
    let response = app.http.get(app.url("/api/push/key")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "public, max-age=300");
    let body: Value = response.json().await.unwrap();
    let key = body["public_key"].as_str().unwrap().to_owned();
    let point = URL_SAFE_NO_PAD.decode(&key).expect("unpadded base64url");
    assert_eq!(
        (point.len(), point[0]),
        (65, 4),
        "an uncompressed P-256 point"
    );
    assert!(p256::PublicKey::from_sec1_bytes(&point).is_ok());
    key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_of_one_secret_publish_one_push_key_and_another_secret_another() {
    let one = node_with_secret("a-secret").await;
    let two = node_with_secret("a-secret").await;
    let other = node_with_secret("another-secret").await;
    let key = push_key(&one).await;
    assert_eq!(push_key(&two).await, key);
    assert_ne!(push_key(&other).await, key);
    assert_eq!(
        key,
        Credentials::from_secret("a-secret")
            .vapid_key()
            .public_key(),
        "the key the sender signs with"
    );
}

/// A browser's subscription: its key pair and auth secret, as the Push
/// API makes them.
struct Browser {
    private: SecretKey,
    auth: [u8; 16],
}

impl Browser {
    fn new() -> Self {
        Self {
            // Out of range once in 2^32: then another.
            private: std::iter::repeat_with(rand::random::<[u8; 32]>)
                .find_map(|bytes| SecretKey::from_slice(&bytes).ok())
                .unwrap(),
            auth: rand::random(),
        }
    }

    fn subscription(&self, endpoint: &str) -> PushSubscription {
        let public = self.private.public_key().to_encoded_point(false);
        PushSubscription {
            endpoint: endpoint.into(),
            keys: PushKeys {
                p256dh: URL_SAFE_NO_PAD.encode(public.as_bytes()),
                auth: URL_SAFE_NO_PAD.encode(self.auth),
            },
        }
    }
}

fn request_for(
    credentials: &Credentials,
    subscription: &PushSubscription,
    payload: &[u8],
) -> PushRequest {
    push_request(
        subscription,
        &PushHosts::default(),
        credentials.vapid_key(),
        "https://queue.example",
        payload,
        support::START_MS,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushs_token_verifies_with_the_published_key_for_the_endpoints_origin() {
    let app = node_with_secret("a-secret").await;
    let key = URL_SAFE_NO_PAD.decode(push_key(&app).await).unwrap();
    let subscription =
        Browser::new().subscription("https://updates.push.services.mozilla.com/wpush/v2/gAAAA");
    let request = request_for(&Credentials::from_secret("a-secret"), &subscription, b"{}");
    let authorization = &request
        .headers
        .iter()
        .find(|(name, _)| *name == "Authorization")
        .unwrap()
        .1;
    let (token, k) = authorization
        .strip_prefix("vapid t=")
        .and_then(|rest| rest.split_once(", k="))
        .expect("vapid t=<jwt>, k=<key>");
    assert_eq!(URL_SAFE_NO_PAD.decode(k).unwrap(), key);
    let decoding = DecodingKey::from_ec_components(
        &URL_SAFE_NO_PAD.encode(&key[1..33]),
        &URL_SAFE_NO_PAD.encode(&key[33..]),
    )
    .unwrap();
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_audience(&["https://updates.push.services.mozilla.com"]);
    // The token is dated by the node's clock (2026-01-01), not this machine's.
    validation.validate_exp = false;
    let claims = jsonwebtoken::decode::<Value>(token, &decoding, &validation)
        .expect("ES256 under the published key, for the endpoint's origin")
        .claims;
    let exp = claims["exp"].as_u64().unwrap();
    assert!(exp > support::START_MS / 1000 && exp <= support::START_MS / 1000 + 24 * 3600);
    assert_eq!(claims["sub"], "https://queue.example");
}

/// The plaintext of `body` as http_ece reads it with the browser's keys.
fn decrypt_in_python(browser: &Browser, body: &[u8]) -> Vec<u8> {
    let python = repo("target/integrations/push-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/integrations-setup (a venv with tests/push/requirements.txt)",
        python.display()
    );
    let mut child = Command::new(&python)
        .arg(repo("tests/push/decrypt.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    let input = json!({
        "private_key": URL_SAFE_NO_PAD.encode(browser.private.to_bytes()),
        "auth": URL_SAFE_NO_PAD.encode(browser.auth),
        "body": URL_SAFE_NO_PAD.encode(body),
    });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "http_ece could not decrypt: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[test]
fn a_pushs_body_decrypts_with_http_ece_as_a_browser_would() {
    let credentials = Credentials::from_secret("a-secret");
    let browser = Browser::new();
    let subscription = browser.subscription("https://fcm.googleapis.com/fcm/send/abc");
    for payload in [
        json!({"id": "1-0", "type": "near", "room": "drop", "position": 12})
            .to_string()
            .into_bytes(),
        "é".repeat(1500).into_bytes(),
        Vec::new(),
    ] {
        let request = request_for(&credentials, &subscription, &payload);
        assert_eq!(decrypt_in_python(&browser, &request.body), payload);
    }
    // A loopback stand-in for a push service, named in --push-hosts.
    let test_hosts = PushHosts::new(vec![parse_push_host("127.0.0.1").unwrap()]);
    let local = browser.subscription("http://127.0.0.1:9/push");
    let request = push_request(
        &local,
        &test_hosts,
        credentials.vapid_key(),
        "mailto:ops@example.com",
        b"hi",
        0,
    )
    .unwrap();
    assert_eq!(decrypt_in_python(&browser, &request.body), b"hi");
}

/// A node that may push to a loopback push service (`--push-hosts
/// 127.0.0.1`, `--outbound-allow-networks 127.0.0.0/8`), and a paused room
/// of one a tick whose single waiting visitor subscribed at `endpoint`.
async fn a_visitor_subscribed_at(endpoint: &str, browser: &Browser) -> (TestApp, String) {
    let mut settings = test_settings();
    settings.push_hosts = vec![parse_push_host("127.0.0.1").unwrap()];
    settings.outbound_allow_networks = vec!["127.0.0.0/8".parse().unwrap()];
    settings.public_url =
        Some(waitroom::words::return_url::PublicUrl::parse("https://queue.example").unwrap());
    let clock = ManualClock::new(support::START_MS);
    let app = TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await;
    app.create_room(
        "drop",
        json!({"admit_per_tick": 1, "paused": true, "tick_ms": 1000}),
    )
    .await;
    let ticket = app.join_api("drop").await["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    let asked = app
        .http
        .post(app.url("/api/rooms/drop/notify"))
        .bearer_auth(&ticket)
        .json(&json!({ "push": browser.subscription(endpoint) }))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 204, "{:?}", asked.text().await);
    app.patch_room("drop", json!({"paused": false})).await;
    (app, ticket)
}

/// Item 6: the node's own sender pushes the `admitted` event to the
/// browser's push service; what arrives decrypts with the browser's keys
/// (http_ece, not our code) to the event, with no contact in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_pushes_the_event_and_only_the_browser_reads_it() {
    let service = waitroom_testkit::health_origin::HealthOrigin::start().await;
    service.set_status(201);
    let browser = Browser::new();
    let (app, _) = a_visitor_subscribed_at(&service.url_for("/push/abc"), &browser).await;
    app.step(1000).await;
    let pushed = support::eventually("the push", support::PATIENCE, || async {
        service.received().into_iter().next()
    })
    .await;
    assert_eq!(
        (pushed.method.as_str(), pushed.target.as_str()),
        ("POST", "/push/abc")
    );
    let event: Value = serde_json::from_slice(&decrypt_in_python(&browser, &pushed.body)).unwrap();
    assert_eq!(event["type"], "admitted");
    assert_eq!(event["room"], "drop");
    assert!(
        event.get("contact").is_none(),
        "a push never carries a contact: {event}"
    );
    let resume = event["resume_url"].as_str().unwrap();
    assert!(
        resume.starts_with("https://queue.example/rooms/drop/resume?code="),
        "{resume}"
    );
    assert_eq!(
        event["id"].as_str().unwrap(),
        format!("{}-admitted", event["visitor"].as_str().unwrap())
    );
}

/// A subscription the push service no longer knows (410) is dropped: the
/// request holds no other way to reach the visitor, so it goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_the_push_service_forgot_is_dropped() {
    let service = waitroom_testkit::health_origin::HealthOrigin::start().await;
    service.set_status(410);
    let browser = Browser::new();
    let (app, ticket) = a_visitor_subscribed_at(&service.url_for("/push/gone"), &browser).await;
    app.step(1000).await;
    support::eventually("the request dropped", support::PATIENCE, || async {
        let status: Value = app.status_api("drop", &ticket).await.json().await.unwrap();
        (status["state"] == "admitted" && status["notify"] == false).then_some(())
    })
    .await;
    assert_eq!(service.received().len(), 1, "asked once, never again");
}
