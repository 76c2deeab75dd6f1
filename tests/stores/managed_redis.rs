//! Issue 24, item 10: a managed Redis, as the clouds sell it. TLS
//! (`rediss://`, trusting a CA file: the certificates are made by the test)
//! and credentials (a password, an ACL user, the Sentinels' own password),
//! on one server, a Cluster and Sentinel; and a wrong password, an
//! untrusted certificate or a plain port named `rediss://` is a clear
//! error at start, not a hang.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use waitroom::store::redis::{RedisOptions, RedisStore};
use waitroom::store::{Store, StoreExt};
use waitroom::words::clock::ManualClock;
use waitroom::words::{PlaceState, RoomConfig, RoomEvent, RoomId, StoreEvent, VisitorId};
use waitroom_testkit::node::{ADMIN_TOKEN, Node};
use waitroom_testkit::redis::{RedisCluster, RedisSentinels, RedisServer};
use waitroom_testkit::tls::{Secured, TestCertificates};

const PASSWORD: &str = "a-managed-redis-password";

fn with_tls(certificates: &Arc<TestCertificates>) -> Secured {
    Secured {
        tls: Some(certificates.clone()),
        password: Some(PASSWORD.to_owned()),
        user: None,
    }
}

fn trusting(certificates: &TestCertificates) -> RedisOptions {
    RedisOptions {
        ca_file: Some(certificates.ca_file.clone()),
        ..RedisOptions::default()
    }
}

/// Two nodes' stores on `url`: a room made on one, a join that waits, a
/// tick on the one that admits it, and the tick's event heard on the
/// other (pub/sub over the same secured link).
async fn two_nodes_admit_over(url: &str, options: &RedisOptions) {
    let clock = ManualClock::new(1_767_225_600_000);
    let connect = || RedisStore::connect_with(url, options, Some(Arc::new(clock.clone())));
    let node_a = connect().await.expect("node A connects");
    let node_b = connect().await.expect("node B connects");
    let room = RoomId::parse("managed").unwrap();
    let mut one_per_tick = RoomConfig::new("Managed", "/x");
    one_per_tick.admit_per_tick = 1;
    let tick_ms = one_per_tick.tick_ms;
    node_a
        .create_room(room.clone(), one_per_tick)
        .await
        .unwrap();
    node_b.watch(&room).await.unwrap();
    let mut events = node_b.subscribe();
    node_a.join(&room, VisitorId::random()).await.unwrap();
    let waiting = VisitorId::random();
    let place = node_a.join(&room, waiting).await.unwrap();
    assert!(matches!(place.state, PlaceState::Waiting { .. }));
    clock.advance_ms(tick_ms);
    let ran = node_a
        .tick(&room)
        .await
        .unwrap()
        .ran
        .expect("a tick is due");
    assert_eq!(ran.admitted, 1);
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the tick's event reaches node B")
            .unwrap();
        if let StoreEvent::Room(RoomEvent::Tick { admitted, .. }) = event {
            assert_eq!(admitted.len(), 1);
            break;
        }
    }
    assert!(matches!(
        node_b.status(&room, waiting).await.unwrap().state,
        PlaceState::Admitted { .. }
    ));
}

#[tokio::test]
async fn one_server_over_tls_with_a_password() {
    let certificates = Arc::new(TestCertificates::make());
    let server = RedisServer::start_secured(&with_tls(&certificates));
    assert!(server.tls_url().starts_with("rediss://:"));
    two_nodes_admit_over(&server.tls_url(), &trusting(&certificates)).await;
}

#[tokio::test]
async fn one_server_with_an_acl_user() {
    let server = RedisServer::start_secured(&Secured {
        tls: None,
        password: Some(PASSWORD.to_owned()),
        user: Some(("waitroom".to_owned(), "the-users-own-password".to_owned())),
    });
    let port = server.port;
    two_nodes_admit_over(
        &format!("redis://waitroom:the-users-own-password@127.0.0.1:{port}/"),
        &RedisOptions::default(),
    )
    .await;
}

#[tokio::test]
async fn a_cluster_over_tls_with_a_password() {
    let certificates = Arc::new(TestCertificates::make());
    let secured = with_tls(&certificates);
    let cluster = tokio::task::spawn_blocking(move || RedisCluster::start_secured(0, &secured))
        .await
        .unwrap();
    assert!(cluster.url().starts_with("rediss+cluster://:"));
    two_nodes_admit_over(&cluster.url(), &trusting(&certificates)).await;
}

#[tokio::test]
async fn sentinels_over_tls_with_their_own_password() {
    let certificates = Arc::new(TestCertificates::make());
    let secured = with_tls(&certificates);
    let sentinels = tokio::task::spawn_blocking(move || {
        RedisSentinels::start_secured(&secured, Some("the-sentinels-password"))
    })
    .await
    .unwrap();
    let url = sentinels.url();
    assert!(url.starts_with("rediss+sentinel://:"));
    assert!(url.ends_with("?sentinel_password=the-sentinels-password"));
    two_nodes_admit_over(&url, &trusting(&certificates)).await;
}

/// Connecting as `url` fails, quickly, saying `what`.
async fn refused(url: &str, options: &RedisOptions, what: &str) {
    let started = std::time::Instant::now();
    let Err(error) = RedisStore::connect_with(url, options, None).await else {
        panic!("{url} connected");
    };
    let error = error.to_string();
    assert!(
        error.to_lowercase().contains(what),
        "{url}: {error:?} does not say {what:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{url}: the refusal took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_wrong_password_an_untrusted_certificate_or_a_plain_port_is_a_clear_error() {
    let certificates = Arc::new(TestCertificates::make());
    let server = RedisServer::start_secured(&with_tls(&certificates));
    let tls_port = server.tls_port.unwrap();
    let trusted = trusting(&certificates);
    refused(
        &format!("rediss://:not-the-password@localhost:{tls_port}/"),
        &trusted,
        "wrongpass",
    )
    .await;
    refused(
        &format!("rediss://localhost:{tls_port}/"),
        &trusted,
        "noauth",
    )
    .await;
    // The system's roots do not know the test's authority.
    refused(&server.tls_url(), &RedisOptions::default(), "certificate").await;
    refused(
        &format!("rediss://:{PASSWORD}@localhost:{}/", server.port),
        &trusted,
        // A plain server waits for a command while the client waits for
        // its TLS handshake: the connection's timeout ends it.
        "timed out",
    )
    .await;
}

/// The flags as an operator gives them: `--redis-url rediss://…` and
/// `--redis-ca-file`; a visitor joins through the node.
#[tokio::test]
async fn the_node_takes_a_tls_url_and_a_ca_file() {
    let certificates = Arc::new(TestCertificates::make());
    let server = RedisServer::start_secured(&with_tls(&certificates));
    let ca_file = certificates.ca_file.display().to_string();
    let mut node = Node::start(
        env!("CARGO_BIN_EXE_waitroom"),
        &[
            "--redis-url",
            &server.tls_url(),
            "--redis-ca-file",
            &ca_file,
        ],
    );
    node.wait_until("/readyz").await;
    let http = reqwest::Client::new();
    let created = http
        .post(node.url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": "tls", "name": "Over TLS", "target_url": "/x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let joined = http
        .post(node.url("/api/rooms/tls/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), 200);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("wr:{tls}:*")
        .query(
            &mut redis::Client::open(server.url())
                .unwrap()
                .get_connection()
                .unwrap(),
        )
        .unwrap();
    assert!(!keys.is_empty(), "the room is kept in the TLS server");
}

/// A node given a wrong password stops at start, saying why, and shows
/// no password (neither the wrong one nor the Sentinels').
#[tokio::test]
async fn a_node_given_a_wrong_password_stops_at_start_without_showing_it() {
    let certificates = Arc::new(TestCertificates::make());
    let server = RedisServer::start_secured(&with_tls(&certificates));
    let url = format!(
        "rediss://:a-wrong-password@localhost:{}/?sentinel_password=unused",
        server.tls_port.unwrap()
    );
    let port = waitroom_testkit::free_port().to_string();
    let ca_file = certificates.ca_file.display().to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_waitroom"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-token", ADMIN_TOKEN, "--secret", "s"])
            .args(["--redis-url", &url, "--redis-ca-file", &ca_file])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!output.status.success(), "the node stopped with an error");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("WRONGPASS"), "the reason is given: {said}");
    assert!(
        said.contains(":***@localhost"),
        "the URL is shown, redacted: {said}"
    );
    assert!(
        !said.contains("a-wrong-password") && !said.contains("unused"),
        "no password is shown: {said}"
    );
}
