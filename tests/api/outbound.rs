//! The outbound probe (design rule 17) against an origin the test
//! controls (`HealthOrigin`, on 127.0.0.1): what a health check records
//! for an origin that answers, fails, is slow, is gone or redirects; that
//! the body is never waited for; and that private addresses are called
//! only when allowed, from the probe itself and from a node's settings.
//! And what `send` (the probe's own path, with any method and body) tells
//! apart when there is no answer. The webhook's tests (`webhook.rs`) call
//! `send` with a body.

use std::time::Duration;

use waitroom::live::outbound::{Call, CallFailure, Outbound, OutboundPolicy, Probe, ProbeOutcome};
use waitroom::words::health_url;
use waitroom_testkit::health_origin::HealthOrigin;
use waitroom_testkit::{TestApp, test_settings};

/// Long enough never to be reached by an origin that answers at once.
const PATIENT: Duration = Duration::from_secs(10);

fn allowing(networks: &[&str]) -> Outbound {
    Outbound::new(OutboundPolicy {
        allow_networks: networks.iter().map(|n| n.parse().unwrap()).collect(),
    })
}

/// A probe allowed to call loopback, where the test's origins are.
fn loopback() -> Outbound {
    allowing(&["127.0.0.0/8", "::1/128"])
}

#[tokio::test]
async fn an_origin_that_answers_200_is_recorded_with_its_latency() {
    let origin = HealthOrigin::start().await;
    origin.set_delay(Duration::from_millis(100));
    let Probe {
        latency_ms,
        outcome,
    } = loopback().probe(&origin.url(), PATIENT).await;
    assert_eq!(outcome, ProbeOutcome::Status(200));
    assert!(latency_ms >= 100, "{latency_ms} ms");
    assert_eq!(origin.requests().len(), 1);
}

#[tokio::test]
async fn an_error_status_is_recorded_as_that_status() {
    let origin = HealthOrigin::start().await;
    origin.set_status(503);
    let probe = loopback().probe(&origin.url(), PATIENT).await;
    assert_eq!(probe.outcome, ProbeOutcome::Status(503));
}

#[tokio::test]
async fn an_origin_slower_than_the_timeout_is_a_timeout() {
    let origin = HealthOrigin::start().await;
    origin.set_delay(Duration::from_secs(2));
    let probe = loopback()
        .probe(&origin.url(), Duration::from_millis(200))
        .await;
    assert_eq!(probe.outcome, ProbeOutcome::Timeout);
}

#[tokio::test]
async fn an_origin_that_refuses_connections_is_a_failure_until_it_accepts_again() {
    let origin = HealthOrigin::start().await;
    let outbound = loopback();
    origin.refuse().await;
    let probe = outbound.probe(&origin.url(), PATIENT).await;
    assert_eq!(probe.outcome, ProbeOutcome::Failed);
    origin.accept_again().await;
    let probe = outbound.probe(&origin.url(), PATIENT).await;
    assert_eq!(probe.outcome, ProbeOutcome::Status(200));
}

#[tokio::test]
async fn a_redirect_is_its_status_and_is_not_followed() {
    let recorder = HealthOrigin::start().await;
    let origin = HealthOrigin::start().await;
    origin.set_location(Some(&recorder.url()));
    let outbound = loopback();
    for status in [301, 302, 303, 307, 308] {
        origin.set_status(status);
        let probe = outbound.probe(&origin.url(), PATIENT).await;
        assert_eq!(probe.outcome, ProbeOutcome::Status(status));
    }
    assert_eq!(origin.requests().len(), 5);
    assert!(recorder.requests().is_empty(), "the redirect was followed");
}

#[tokio::test]
async fn the_body_is_never_waited_for() {
    let origin = HealthOrigin::start().await;
    origin.set_stall_body(true);
    let probe = loopback().probe(&origin.url(), PATIENT).await;
    assert_eq!(probe.outcome, ProbeOutcome::Status(200));
}

#[tokio::test]
async fn private_addresses_are_refused_unless_allowed() {
    let origin = HealthOrigin::start().await;
    let port = origin.port();
    let refused = [
        origin.url(),
        format!("http://localhost:{port}/health"),
        format!("http://127.0.0.2:{port}/health"),
        format!("http://[::ffff:127.0.0.1]:{port}/health"),
        format!("http://[::1]:{port}/health"),
        format!("http://10.0.0.1:{port}/health"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ];
    let public_only = Outbound::new(OutboundPolicy::default());
    for url in &refused {
        let probe = public_only.probe(url, PATIENT).await;
        assert_eq!(probe.outcome, ProbeOutcome::Failed, "{url}");
    }
    assert!(origin.requests().is_empty());

    let outbound = loopback();
    for url in [
        origin.url(),
        format!("http://localhost:{port}/health"),
        format!("http://[::ffff:127.0.0.1]:{port}/health"),
    ] {
        let probe = outbound.probe(&url, PATIENT).await;
        assert_eq!(probe.outcome, ProbeOutcome::Status(200), "{url}");
    }
    assert_eq!(origin.requests().len(), 3);
    // Only what is allowed: loopback, not the rest of the private ranges.
    let probe = allowing(&["10.0.0.0/8"])
        .probe(&origin.url(), PATIENT)
        .await;
    assert_eq!(probe.outcome, ProbeOutcome::Failed);
    assert_eq!(origin.requests().len(), 3);
}

#[tokio::test]
async fn ipv6_loopback_is_refused_unless_allowed() {
    let Ok(origin) = HealthOrigin::start_on("[::1]:0").await else {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    };
    let refused = Outbound::new(OutboundPolicy::default())
        .probe(&origin.url(), PATIENT)
        .await;
    assert_eq!(refused.outcome, ProbeOutcome::Failed);
    assert!(origin.requests().is_empty());
    let allowed = allowing(&["::1/128"]).probe(&origin.url(), PATIENT).await;
    assert_eq!(allowed.outcome, ProbeOutcome::Status(200));
}

#[tokio::test]
async fn a_url_with_user_info_is_no_health_url_and_is_not_called() {
    let origin = HealthOrigin::start().await;
    let url = format!("http://user:secret@{}/health", origin.address());
    let error = health_url::check(&url).unwrap_err();
    assert!(error.contains("user or password"), "{error}");
    let probe = loopback().probe(&url, PATIENT).await;
    assert_eq!(probe.outcome, ProbeOutcome::Failed);
    assert!(origin.requests().is_empty());
}

#[tokio::test]
async fn a_node_calls_the_networks_its_settings_allow() {
    let origin = HealthOrigin::start().await;
    let node = TestApp::spawn().await;
    let probe = node
        .handle
        .promoter
        .outbound()
        .probe(&origin.url(), PATIENT)
        .await;
    assert_eq!(probe.outcome, ProbeOutcome::Failed);

    let mut settings = test_settings();
    settings.outbound_allow_networks = vec!["127.0.0.0/8".parse().unwrap()];
    let clock = waitroom::words::clock::ManualClock::new(waitroom_testkit::START_MS);
    let stores = waitroom::startup::Stores::memory(std::sync::Arc::new(clock.clone()));
    let allowed = TestApp::spawn_with(settings, stores, clock).await;
    let probe = allowed
        .handle
        .promoter
        .outbound()
        .probe(&origin.url(), PATIENT)
        .await;
    assert_eq!(probe.outcome, ProbeOutcome::Status(200));
    assert_eq!(origin.requests().len(), 1);
}

#[tokio::test]
async fn send_tells_a_refused_connection_bad_tls_and_a_timeout_apart() {
    let origin = HealthOrigin::start().await;
    let outbound = loopback();
    let sent = outbound.send(Call::get(&origin.url(), &[]), PATIENT).await;
    assert_eq!(sent.outcome, Ok(200));

    // https to a server that answers in plain HTTP at once.
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let https = format!("https://{}/health", plain.local_addr().unwrap());
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let (mut stream, _) = plain.accept().await.unwrap();
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
    });
    let sent = outbound.send(Call::get(&https, &[]), PATIENT).await;
    assert!(
        matches!(sent.outcome, Err(CallFailure::Tls(_))),
        "{:?}",
        sent.outcome
    );

    origin.set_delay(Duration::from_secs(2));
    let sent = outbound
        .send(Call::get(&origin.url(), &[]), Duration::from_millis(200))
        .await;
    assert_eq!(sent.outcome, Err(CallFailure::Timeout));
    assert!((200..1_000).contains(&sent.latency_ms), "{sent:?}");

    origin.refuse().await;
    let sent = outbound.send(Call::get(&origin.url(), &[]), PATIENT).await;
    assert!(
        matches!(sent.outcome, Err(CallFailure::Connect(_))),
        "{:?}",
        sent.outcome
    );
}
