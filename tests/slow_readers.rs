//! Slow readers cost a node a bounded amount (issue 24, item 17): an
//! answer its client stops reading is cut off after `--write-timeout-ms`.

use waitroom_testkit as support;

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::TestApp;
use waitroom::startup::Stores;
use waitroom::startup::config::Settings;
use waitroom::words::clock::ManualClock;
use waitroom::words::{RoomId, VisitorId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_the_draw_is_cut_off() {
    let clock = ManualClock::new(support::START_MS);
    let mut settings = Settings::for_tests();
    settings.write_timeout_ms = 500;
    let app = TestApp::spawn_with(settings, Stores::memory(Arc::new(clock.clone())), clock).await;
    app.create_room(
        "drop",
        json!({"opens_at": "2026-01-01T00:10:00Z", "abandon_after_s": 86_400}),
    )
    .await;
    // Entries enough (5 MB) to fill what the kernel buffers on both sides.
    let room = RoomId::parse("drop").unwrap();
    for _ in 0..200_000 {
        app.handle
            .store
            .join(&room, VisitorId::random())
            .await
            .unwrap();
    }
    app.clock.advance_ms(600_000);

    // A client that reads nothing, with a small window.
    let client = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    client.set_recv_buffer_size(4096).unwrap();
    let address: std::net::SocketAddr = format!("127.0.0.1:{}", app.port).parse().unwrap();
    client.connect(&address.into()).unwrap();
    let mut client: std::net::TcpStream = client.into();
    client
        .write_all(b"GET /api/rooms/drop/draw/entries HTTP/1.1\r\nHost: waitroom\r\n\r\n")
        .unwrap();

    let deadline = Instant::now() + support::PATIENCE;
    let error = loop {
        if let Some(error) = client.take_error().unwrap() {
            break error;
        }
        assert!(
            Instant::now() < deadline,
            "the server kept a client that read nothing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset);
    let mut received = Vec::new();
    let _ = client.read_to_end(&mut received);
    assert!(
        received.starts_with(b"HTTP/1.1 200"),
        "it was answered, then cut off"
    );
    assert!(
        !received.ends_with(b"\r\n0\r\n\r\n"),
        "the answer did not end: {} bytes of it",
        received.len()
    );

    // A client that reads gets the whole list.
    let listed = app
        .http
        .get(app.url("/api/rooms/drop/draw/entries"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(listed.lines().count(), 200_000);
}
