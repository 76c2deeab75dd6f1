//! Redis time of one tick, with 10,000 and with 1,000,000 visitors waiting:
//! a tick's work is O(admitted), so the two should be close.
//!
//! `cargo bench --bench redis_tick` starts its own redis-server on a free
//! port, fills a line through the real store (the join script), then runs
//! ticks admitting 100 each and reads Redis's own per-call time from
//! `INFO commandstats` (the server's time, not the network's).

use waitroom_testkit::redis as redis_server;

use std::sync::Arc;
use std::time::Instant;

use futures_util::{StreamExt, stream};
use redis_server::RedisServer;
use waitroom::store::StoreExt;
use waitroom::store::redis::RedisStore;
use waitroom::words::clock::ManualClock;
use waitroom::words::{RoomConfig, RoomId, VisitorId};

const TICKS: u64 = 50;
const ADMIT_PER_TICK: u32 = 100;

/// (calls, microseconds) of EVALSHA so far.
fn evalsha_stats(server: &RedisServer) -> (u64, u64) {
    let client = redis::Client::open(server.url()).unwrap();
    let mut connection = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap_or("");
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|kv| {
                kv.strip_prefix(name)?
                    .strip_prefix('=')?
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

async fn measure(waiting: u64) {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_767_225_600_000);
    let store = RedisStore::connect(&server.url(), Some(Arc::new(clock.clone())))
        .await
        .unwrap();
    let room = RoomId::parse("bench").unwrap();
    let mut config = RoomConfig::new("Bench", "/x");
    config.admit_per_tick = ADMIT_PER_TICK;
    config.abandon_after_s = 86_400;
    config.paused = true;
    store.create_room(room.clone(), config).await.unwrap();

    let filling = Instant::now();
    // One warm-up tick (its first EVALSHA loads the script), then the measured ones.
    let total = waiting + (TICKS + 1) * ADMIT_PER_TICK as u64;
    stream::iter(0..total)
        .for_each_concurrent(256, |_| {
            let (store, room) = (&store, &room);
            async move {
                store.join(room, VisitorId::random()).await.unwrap();
            }
        })
        .await;
    let fill_secs = filling.elapsed().as_secs_f64();
    store
        .configure(&room, serde_json::from_str(r#"{"paused":false}"#).unwrap())
        .await
        .unwrap();
    clock.advance_ms(5_000);
    store
        .tick(&room)
        .await
        .unwrap()
        .ran
        .expect("the warm-up tick");

    let (calls_before, usec_before) = evalsha_stats(&server);
    let started = Instant::now();
    for _ in 0..TICKS {
        clock.advance_ms(5_000);
        let report = store.tick(&room).await.unwrap().ran.expect("a due tick");
        assert_eq!(report.admitted, ADMIT_PER_TICK as u64);
    }
    let wall = started.elapsed();
    let (calls_after, usec_after) = evalsha_stats(&server);
    let calls = calls_after - calls_before;
    assert_eq!(calls, TICKS, "only the ticks ran");
    let per_tick_us = (usec_after - usec_before) as f64 / calls as f64;
    println!(
        "waiting {waiting:>9}: Redis time per tick {per_tick_us:8.1} µs (admitting {ADMIT_PER_TICK}; {TICKS} ticks; \
         round trip {:.1} µs); filled in {fill_secs:.1} s ({:.0} joins/s through the store)",
        wall.as_micros() as f64 / TICKS as f64,
        total as f64 / fill_secs
    );
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` only checks that this builds.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    println!("Redis time of one tick (INFO commandstats, EVALSHA usec per call)");
    for waiting in [10_000, 1_000_000] {
        measure(waiting).await;
    }
}
