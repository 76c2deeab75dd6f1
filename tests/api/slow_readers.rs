//! Slow readers cost a node a bounded amount (issue 24, item 17): an
//! answer its client stops reading is cut off after `--write-timeout-ms`,
//! and the public sale view is read from the store at most once a second
//! per room, however many ask.

use waitroom_testkit as support;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};
use support::{FetchJson, TestApp, test_settings};
use waitroom::startup::Stores;
use waitroom::store::memory::MemoryStore;
use waitroom::store::{SaleStore, StoreExt};
use waitroom::words::clock::ManualClock;
use waitroom::words::op::{SaleAnswer, SaleOp};
use waitroom::words::sale::SaleError;
use waitroom::words::{RoomId, VisitorId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_the_draw_is_cut_off() {
    let clock = ManualClock::new(support::START_MS);
    let mut settings = test_settings();
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
    let listed = app.get_text("/api/rooms/drop/draw/entries").await;
    assert_eq!(listed.lines().count(), 200_000);
}

/// The memory store's sale, counting the reads of the whole sale view.
struct CountingSale {
    inner: Arc<dyn SaleStore>,
    views: AtomicU64,
}

#[async_trait]
impl SaleStore for CountingSale {
    async fn apply(&self, op: SaleOp) -> Result<SaleAnswer, SaleError> {
        if let SaleOp::ReadSale(_) = op {
            self.views.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.apply(op).await
    }
}

#[tokio::test]
async fn the_public_sale_view_is_read_once_a_second_however_many_ask() {
    let clock = ManualClock::new(support::START_MS);
    let store = MemoryStore::new(Arc::new(clock.clone()));
    let sale = Arc::new(CountingSale {
        inner: Arc::new(store.sale()),
        views: AtomicU64::new(0),
    });
    let stores = Stores {
        admission: Arc::new(store),
        sale: sale.clone(),
    };
    let app = TestApp::spawn_on(stores, clock).await;
    app.create_room("shop", json!({"admit_per_tick": 100}))
        .await;
    let put = app
        .admin(Method::PUT, "/api/admin/rooms/shop/sale")
        .json(&json!({"seats": ["A1", "A2", "A3"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let view = || app.http.get(app.url("/api/rooms/shop/sale")).fetch_json();

    let before = sale.views.load(Ordering::SeqCst);
    let first: Value = view().await;
    let asks: Vec<Value> = futures_util::future::join_all((0..50).map(|_| view())).await;
    assert_eq!(
        sale.views.load(Ordering::SeqCst) - before,
        1,
        "51 reads within a second, one store read"
    );
    assert!(asks.iter().all(|asked| asked["seats"] == first["seats"]));
    assert_eq!(first["seats"]["A1"], "free");

    // A claim: its claimer sees it at once; everyone else within a second.
    let pass = app.pass_for("shop").await;
    let claimed = app
        .http
        .post(app.url("/api/rooms/shop/sale/claims"))
        .bearer_auth(&pass)
        .json(&json!({"seats": ["A1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(claimed.status(), 201);
    let own: Value = app
        .http
        .get(app.url("/api/rooms/shop/sale"))
        .bearer_auth(&pass)
        .fetch_json()
        .await;
    assert_eq!(
        own["seats"]["A1"], "held",
        "the claimer's own claims are current"
    );
    assert_eq!(view().await["seats"]["A1"], "free", "a second old at most");
    app.clock.advance_ms(999);
    assert_eq!(view().await["seats"]["A1"], "free");
    app.clock.advance_ms(1);
    let fresh: Value = view().await;
    assert_eq!(
        fresh["seats"]["A1"], "held",
        "after a second, the claim shows"
    );
    assert_eq!(fresh["stock_left"], 2);
    assert_eq!(sale.views.load(Ordering::SeqCst) - before, 2);

    // The same shape as ever, and a room without a sale still says so.
    let keys: Vec<&String> = fresh.as_object().unwrap().keys().collect();
    for field in [
        "kind",
        "stock_left",
        "seats",
        "per_user_limit",
        "hold_ttl_s",
        "mine",
    ] {
        assert!(keys.iter().any(|k| *k == field), "{field} in {keys:?}");
    }
    app.create_room("bare", json!({})).await;
    let bare = app
        .http
        .get(app.url("/api/rooms/bare/sale"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 404);
}
