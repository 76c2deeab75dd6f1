//! The longest single store command (one Lua script) of each scenario of
//! issue 26, item 1, read from Redis's own `SLOWLOG` (every command logged:
//! `slowlog-log-slower-than 0`), with how many calls each took:
//!
//! - a mass lapse: 300,000 waiting visitors all away at once, swept;
//! - a mass expiry: 300,000 passes running out at once, swept;
//! - a resumption of arrivals over 300,000 unseen passes, then their
//!   reclaim once the new deadline passes;
//! - a room of 1,000,000 waiting: a join, a status, the room's stats, a
//!   tick admitting 100, and closing the room.
//!
//! `cargo bench --bench redis_sweeps` starts its own redis-server on a free
//! port and fills each room through the real store (the join script) on a
//! driven clock, so time is moved, not waited for.

use waitroom_testkit::redis as redis_server;

use std::sync::Arc;

use futures_util::{StreamExt, stream};
use redis_server::RedisServer;
use waitroom::store::Store;
use waitroom::store::redis::RedisStore;
use waitroom::words::clock::ManualClock;
use waitroom::words::constants::SWEEP_AGAIN_MS;
use waitroom::words::{QueueMethod, RoomConfig, RoomId, VisitorId};

const CROWD: u64 = 300_000;
const BIG_ROOM: u64 = 1_000_000;

struct Bench {
    server: RedisServer,
    clock: ManualClock,
    store: RedisStore,
}

impl Bench {
    fn redis(&self) -> redis::Connection {
        redis::Client::open(self.server.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Forgets what the slow log holds: what follows is measured.
    fn start_measuring(&self) {
        let mut redis = self.redis();
        let _: () = redis::cmd("SLOWLOG")
            .arg("RESET")
            .query(&mut redis)
            .unwrap();
    }

    /// The longest EVALSHA since `start_measuring` (µs), and how many ran.
    fn longest(&self) -> (u64, usize) {
        let mut redis = self.redis();
        let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(-1)
            .query(&mut redis)
            .unwrap();
        let mut longest = 0;
        let mut calls = 0;
        for entry in entries {
            let redis::Value::Array(fields) = entry else {
                continue;
            };
            let duration: u64 = redis::from_redis_value(fields[2].clone()).unwrap_or(0);
            let command = match &fields[3] {
                redis::Value::Array(args) => args
                    .first()
                    .and_then(|a| redis::from_redis_value::<String>(a.clone()).ok())
                    .unwrap_or_default(),
                _ => String::new(),
            };
            if command.eq_ignore_ascii_case("evalsha") {
                longest = longest.max(duration);
                calls += 1;
            }
        }
        (longest, calls)
    }

    async fn room(&self, id: &str, config: impl FnOnce(&mut RoomConfig)) -> RoomId {
        let room = RoomId::parse(id).unwrap();
        let mut room_config = RoomConfig::new("Bench", "/x");
        config(&mut room_config);
        self.store
            .create_room(room.clone(), room_config)
            .await
            .unwrap();
        room
    }

    async fn fill(&self, room: &RoomId, count: u64) {
        stream::iter(0..count)
            .for_each_concurrent(256, |_| async move {
                self.store.join(room, VisitorId::random()).await.unwrap();
            })
            .await;
    }

    /// Ticks until no sweep is left; how many calls that took.
    async fn sweep(&self, room: &RoomId) -> u64 {
        let mut calls = 0;
        loop {
            calls += 1;
            let tick = self.store.tick(room).await.unwrap();
            if tick.next_due_in_ms > SWEEP_AGAIN_MS {
                return calls;
            }
        }
    }

    fn report(&self, what: &str) {
        let (longest, calls) = self.longest();
        println!(
            "{what}: longest script {:.2} ms over {calls} script calls",
            longest as f64 / 1000.0
        );
    }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` only checks that this builds.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let server = RedisServer::start_with(&[
        "--slowlog-log-slower-than",
        "0",
        "--slowlog-max-len",
        "100000",
    ]);
    let clock = ManualClock::new(1_767_225_600_000);
    let store = RedisStore::connect(&server.url(), Some(Arc::new(clock.clone())))
        .await
        .unwrap();
    let bench = Bench {
        server,
        clock,
        store,
    };
    println!("The longest EVALSHA of each scenario (Redis SLOWLOG, every command logged)");

    // A mass lapse: everyone waiting goes away at once.
    let lapse = bench
        .room("lapse", |c| {
            c.paused = true;
            c.abandon_after_s = 15;
        })
        .await;
    bench.fill(&lapse, CROWD).await;
    bench.clock.advance_ms(16_000);
    bench.start_measuring();
    let calls = bench.sweep(&lapse).await;
    let waiting = bench.store.room(&lapse).await.unwrap().stats.waiting;
    bench.report(&format!(
        "mass lapse of {CROWD} ({calls} ticks to sweep, {waiting} left waiting)"
    ));

    // A mass expiry: passes admitted together run out together.
    let expiry = bench
        .room("expiry", |c| {
            c.queue_method = QueueMethod::Passthrough;
            c.pass_ttl_s = 60;
            c.abandon_after_s = 86_400;
        })
        .await;
    bench.fill(&expiry, CROWD).await;
    bench.clock.advance_ms(61_000);
    bench.start_measuring();
    let calls = bench.sweep(&expiry).await;
    let active = bench.store.room(&expiry).await.unwrap().stats.active;
    bench.report(&format!(
        "mass expiry of {CROWD} passes ({calls} ticks to sweep, {active} left active)"
    ));

    // Arrivals resumed after an outage over every unseen pass, then reclaimed.
    let arrivals = bench
        .room("arrivals", |c| {
            c.queue_method = QueueMethod::Passthrough;
            c.pass_ttl_s = 3_600;
            c.arrival_grace_s = Some(30);
            c.abandon_after_s = 86_400;
        })
        .await;
    bench.fill(&arrivals, CROWD).await;
    bench.clock.advance_ms(60_000);
    bench.start_measuring();
    bench.store.resume_arrivals(&arrivals, None).await.unwrap();
    bench.report(&format!("resuming arrivals over {CROWD} unseen passes"));
    bench.start_measuring();
    let moved = bench.sweep(&arrivals).await;
    bench.clock.advance_ms(30_000);
    let reclaimed = bench.sweep(&arrivals).await;
    let no_shows = bench.store.room(&arrivals).await.unwrap().stats.no_shows;
    bench.report(&format!(
        "moving them ({moved} ticks), then reclaiming them ({reclaimed} ticks, {no_shows} no-shows)"
    ));

    // A room of a million waiting.
    let big = bench
        .room("million", |c| {
            c.paused = true;
            c.admit_per_tick = 100;
            c.abandon_after_s = 86_400;
        })
        .await;
    bench.fill(&big, BIG_ROOM).await;
    bench.start_measuring();
    let last = VisitorId::random();
    bench.store.join(&big, last).await.unwrap();
    bench.store.status(&big, last).await.unwrap();
    bench.store.room(&big).await.unwrap();
    bench
        .store
        .configure(&big, serde_json::from_str(r#"{"paused": false}"#).unwrap())
        .await
        .unwrap();
    bench.clock.advance_ms(5_000);
    let admitted = bench.store.tick(&big).await.unwrap().ran.unwrap().admitted;
    bench.report(&format!(
        "a room of {BIG_ROOM} waiting: a join, a status, the stats, a change, a tick admitting {admitted}"
    ));
    bench.start_measuring();
    bench.store.close_room(&big).await.unwrap();
    bench.report(&format!("closing the room of {BIG_ROOM}"));
}
