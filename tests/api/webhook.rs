//! A room's webhook (`waitroom::live::webhook`), delivered to a receiver
//! the test controls (`HealthOrigin`, on 127.0.0.1): the POST as api.md
//! describes it (the body as given, its signature checked here with HMAC
//! apart from the signer), which answers deliver (2xx only), that no
//! redirect is followed, that a slow receiver is cut at 5 s, that private
//! addresses are refused without connecting, that a huge answer is not
//! read, and that the logs hold neither the contact, the secret nor the
//! URL's token.

use std::time::{Duration, Instant};

use waitroom::live::outbound::{CallFailure, Outbound, OutboundPolicy};
use waitroom::live::webhook::{Delivery, Undelivered, deliver};
use waitroom_testkit::health_origin::{HUGE_BODY_BYTES, HealthOrigin};
use waitroom_testkit::{eventually, logs};

const SECRET: &str = "whsec-a-room-secret-of-at-least-32-chars";
/// 2026-01-01T00:00:00Z.
const NOW_S: u64 = 1_767_225_600;

fn event(contact: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": "1767225600000-0",
        "type": "near",
        "room": "spring-sale",
        "visitor": "42",
        "position": 17,
        "resume_url": "https://queue.example/r/spring-sale?code=abc",
        "at": "2026-01-01T00:00:00Z",
        "contact": contact,
    }))
    .unwrap()
}

fn loopback() -> Outbound {
    Outbound::new(OutboundPolicy {
        allow_networks: vec!["127.0.0.0/8".parse().unwrap()],
    })
}

fn retried_for(delivery: &Delivery) -> &Undelivered {
    match delivery {
        Delivery::Retry { why, .. } => why,
        Delivery::Delivered { .. } => panic!("delivered: {delivery:?}"),
    }
}

#[tokio::test]
async fn an_event_is_posted_signed_as_api_md_says() {
    logs::init();
    let receiver = HealthOrigin::start().await;
    let url = receiver.url_for("/hooks/waitroom?source=queue");
    let body = event("+15550100");
    let delivery = deliver(&loopback(), &url, SECRET, &body, NOW_S).await;
    assert!(
        matches!(delivery, Delivery::Delivered { status: 200, .. }),
        "{delivery:?}"
    );

    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.target, "/hooks/waitroom?source=queue");
    assert_eq!(request.body, body);
    let host = format!("127.0.0.1:{}", receiver.port());
    assert_eq!(request.header("host"), Some(host.as_str()));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert!(
        request
            .header("user-agent")
            .unwrap()
            .starts_with("waitroom/")
    );
    // The signature, checked as a receiver would, apart from the signer.
    assert_eq!(request.assert_signed(SECRET), NOW_S);
}

#[tokio::test]
async fn only_a_2xx_answer_delivers() {
    let receiver = HealthOrigin::start().await;
    let outbound = loopback();
    for status in [200, 201, 202, 204] {
        receiver.set_status(status);
        let delivery = deliver(&outbound, &receiver.url(), SECRET, &event("a"), NOW_S).await;
        assert!(delivery.delivered(), "{status}: {delivery:?}");
    }
    for status in [400, 401, 404, 410, 429, 500, 503] {
        receiver.set_status(status);
        let delivery = deliver(&outbound, &receiver.url(), SECRET, &event("a"), NOW_S).await;
        assert_eq!(retried_for(&delivery), &Undelivered::Status(status));
    }
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let elsewhere = HealthOrigin::start().await;
    let receiver = HealthOrigin::start().await;
    receiver.set_location(Some(&elsewhere.url_for("/collect")));
    let outbound = loopback();
    for status in [301, 302, 303, 307, 308] {
        receiver.set_status(status);
        let delivery = deliver(&outbound, &receiver.url(), SECRET, &event("a"), NOW_S).await;
        assert_eq!(retried_for(&delivery), &Undelivered::Status(status));
    }
    assert_eq!(receiver.received().len(), 5);
    assert_eq!(elsewhere.connections(), 0, "the redirect was followed");
}

#[tokio::test]
async fn a_receiver_slower_than_5_s_is_retried_and_the_call_ends_at_5_s() {
    let receiver = HealthOrigin::start().await;
    receiver.set_delay(Duration::from_secs(30));
    let started = Instant::now();
    let delivery = deliver(&loopback(), &receiver.url(), SECRET, &event("a"), NOW_S).await;
    let took = started.elapsed();
    let Delivery::Retry { why, latency_ms } = &delivery else {
        panic!("{delivery:?}");
    };
    assert_eq!(why, &Undelivered::Failed(CallFailure::Timeout));
    assert!((5_000..6_000).contains(latency_ms), "{latency_ms} ms");
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert_eq!(receiver.received().len(), 1, "the request was sent whole");
}

#[tokio::test]
async fn private_addresses_are_refused_without_connecting_unless_allowed() {
    let receiver = HealthOrigin::start().await;
    let port = receiver.port();
    let public_only = Outbound::new(OutboundPolicy::default());
    for url in [
        receiver.url(),
        format!("http://localhost:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        "http://10.0.0.1/hook".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "https://192.168.1.1/hook".to_string(),
    ] {
        let delivery = deliver(&public_only, &url, SECRET, &event("a"), NOW_S).await;
        let Delivery::Retry { why, latency_ms } = &delivery else {
            panic!("{url}: {delivery:?}");
        };
        assert!(
            matches!(why, Undelivered::Failed(CallFailure::Refused(_))),
            "{url}: {why}"
        );
        assert!(*latency_ms < 1_000, "{url}: {latency_ms} ms");
    }
    assert_eq!(receiver.connections(), 0);
    let delivery = deliver(&loopback(), &receiver.url(), SECRET, &event("a"), NOW_S).await;
    assert!(delivery.delivered(), "{delivery:?}");
}

#[tokio::test]
async fn a_huge_answer_is_not_read() {
    let receiver = HealthOrigin::start().await;
    receiver.set_huge_body(true);
    let delivery = deliver(&loopback(), &receiver.url(), SECRET, &event("a"), NOW_S).await;
    let Delivery::Delivered { status, latency_ms } = delivery else {
        panic!("{delivery:?}");
    };
    assert_eq!(status, 200);
    assert!(latency_ms < 2_000, "{latency_ms} ms");
    // The connection is closed, so the receiver's writes fail soon after
    // what the sockets' buffers hold, far short of the body.
    eventually("the huge body cut", Duration::from_secs(5), || async {
        (receiver.huge_bodies_cut() == 1).then_some(())
    })
    .await;
    let sent = receiver.huge_bytes_sent();
    assert!(
        sent < 32 << 20,
        "{sent} of {HUGE_BODY_BYTES} bytes sent: the body was read"
    );
}

#[tokio::test]
async fn the_logs_name_the_host_and_never_the_contact_the_secret_or_the_path() {
    logs::init();
    let receiver = HealthOrigin::start().await;
    receiver.set_status(503);
    let url = receiver.url_for("/hooks/tok-8d1f0e2b9c?key=tok-8d1f0e2b9c");
    let contact = "contact-4417@example.com";
    let delivery = deliver(&loopback(), &url, SECRET, &event(contact), NOW_S).await;
    assert_eq!(retried_for(&delivery), &Undelivered::Status(503));
    let refused = "http://10.0.0.1/hooks/tok-8d1f0e2b9c";
    let public_only = Outbound::new(OutboundPolicy::default());
    deliver(&public_only, refused, SECRET, &event(contact), NOW_S).await;

    let logged = logs::captured();
    assert!(logged.contains("webhook not delivered"), "{logged}");
    assert!(logged.contains("answered 503"), "{logged}");
    assert!(
        logged.contains("10.0.0.1 is not a public address"),
        "{logged}"
    );
    for secret in [contact, SECRET, "tok-8d1f0e2b9c", "15550100"] {
        assert!(!logged.contains(secret), "{secret} logged:\n{logged}");
    }
}
