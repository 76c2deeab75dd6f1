//! The longest single store command (one Lua script) of each scenario of
//! issue 26, item 1, read from Redis's own `SLOWLOG` (every command of
//! 1 ms or more) and its latency monitor, with how many calls each took:
//!
//! - a mass lapse: 300,000 waiting visitors all away at once, swept; once
//!   for visitors never seen after joining (the tick's walk of the line),
//!   once for visitors each seen once (the presence set's sweep);
//! - a mass expiry: 300,000 passes running out at once, swept;
//! - a mass lapse of sessions (issue 44): 100,000 passes each renewed once
//!   by a verify's call, then all lapsing at once for want of use long
//!   before their expiry, swept by ticks with a verify and a status of
//!   lapsed visitors between them;
//! - a resumption of arrivals over 300,000 unseen passes, then their
//!   reclaim once the new deadline passes;
//! - a room of 1,000,000 waiting: a join, a status, the room's stats, a
//!   tick admitting 100, and closing the room;
//! - a sale: 100,000 holds running out at once, given back; the view and
//!   the stock of a sale of 10,000 seats (the most a sale may list).
//!
//! `cargo bench --bench redis_sweeps` starts its own redis-server on a free
//! port and fills each room through the real store (the join script) on a
//! driven clock, so time is moved, not waited for.

use waitroom_testkit::redis as redis_server;

use std::sync::Arc;

use futures_util::{StreamExt, stream};
use redis_server::RedisServer;
use waitroom::live::promoter::PRESENCE_BATCH;
use waitroom::store::redis::RedisStore;
use waitroom::store::{SaleStoreExt, StoreExt};
use waitroom::words::clock::{Clock, ManualClock};
use waitroom::words::constants::SWEEP_AGAIN_MS;
use waitroom::words::sale::{SaleRequest, Want};
use waitroom::words::{PlaceState, QueueMethod, RoomConfig, RoomId, VisitorId};

const CROWD: u64 = 300_000;
const BIG_ROOM: u64 = 1_000_000;
const HOLDS: u64 = 100_000;
const SESSIONS: u64 = 100_000;
const SEATS: u64 = 10_000;

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

    /// Forgets what the slow log and the latency monitor hold: what
    /// follows is measured.
    fn start_measuring(&self) {
        let mut redis = self.redis();
        let _: () = redis::cmd("SLOWLOG")
            .arg("RESET")
            .query(&mut redis)
            .unwrap();
        let _: () = redis::cmd("LATENCY")
            .arg("RESET")
            .query(&mut redis)
            .unwrap();
    }

    /// The latency monitor's longest command since `start_measuring`, in
    /// whole ms (it sees every command of 1 ms or more, however many run;
    /// the slow log keeps the last 100,000 commands of any length).
    fn longest_by_latency_monitor(&self) -> u64 {
        let mut redis = self.redis();
        let events: Vec<(String, u64, u64, u64)> = redis::cmd("LATENCY")
            .arg("LATEST")
            .query(&mut redis)
            .unwrap();
        events
            .into_iter()
            .filter(|(event, ..)| event == "command")
            .map(|(.., max)| max)
            .max()
            .unwrap_or(0)
    }

    /// Every entry of the slow log: its duration (µs) and command name.
    fn slow_log(&self) -> Vec<(u64, String)> {
        let mut redis = self.redis();
        let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(-1)
            .query(&mut redis)
            .unwrap();
        entries
            .into_iter()
            .filter_map(|entry| {
                let redis::Value::Array(fields) = entry else {
                    return None;
                };
                let duration: u64 = redis::from_redis_value(fields[2].clone()).unwrap_or(0);
                let redis::Value::Array(args) = &fields[3] else {
                    return None;
                };
                let name: String =
                    redis::from_redis_value(args.first()?.clone()).unwrap_or_default();
                Some((duration, name.to_lowercase()))
            })
            .collect()
    }

    /// How many commands of each name the slow log holds (the busiest five).
    fn commands_seen(log: &[(u64, String)]) -> String {
        let mut counts = std::collections::BTreeMap::<&str, usize>::new();
        for (_, name) in log {
            *counts.entry(name).or_default() += 1;
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        counts
            .iter()
            .take(5)
            .map(|(name, n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The longest EVALSHA of the slow log (µs), and how many it holds.
    fn longest(log: &[(u64, String)]) -> (u64, usize) {
        let scripts: Vec<u64> = log
            .iter()
            .filter(|(_, name)| name == "evalsha")
            .map(|(duration, _)| *duration)
            .collect();
        (scripts.iter().copied().max().unwrap_or(0), scripts.len())
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

    async fn fill(&self, room: &RoomId, count: u64) -> Vec<VisitorId> {
        let visitors: Vec<VisitorId> = (0..count).map(|_| VisitorId::random()).collect();
        stream::iter(&visitors)
            .for_each_concurrent(256, |visitor| async move {
                self.store.join(room, *visitor).await.unwrap();
            })
            .await;
        visitors
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
        // The latency monitor first: reading a long slow log is a slow command.
        let monitored = self.longest_by_latency_monitor();
        let log = self.slow_log();
        let (longest, calls) = Self::longest(&log);
        println!(
            "{what}: longest script {:.2} ms ({calls} scripts of 1 ms or more in the slow log); \
             longest command {} ms (latency monitor, whole ms; 0: none took 1 ms); the slow log holds: {}",
            longest as f64 / 1000.0,
            monitored,
            Self::commands_seen(&log)
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
        // Commands of 1 ms or more: every script that matters for the
        // longest, without the commands inside the short ones (Redis logs
        // those too) pushing the scripts out of the log.
        "--slowlog-log-slower-than",
        "1000",
        "--slowlog-max-len",
        "100000",
        "--latency-monitor-threshold",
        "1",
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
    println!(
        "The longest EVALSHA of each scenario (Redis SLOWLOG of commands of 1 ms or more, and LATENCY)"
    );

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
        "mass lapse of {CROWD} never seen after joining ({calls} ticks to sweep, {waiting} left waiting)"
    ));

    // The same, each visitor seen once after joining, as a node's sockets
    // are (a touch per `PRESENCE_BATCH`): swept from the presence set.
    let seen_lapse = bench
        .room("seen-lapse", |c| {
            c.paused = true;
            c.abandon_after_s = 15;
        })
        .await;
    let visitors = bench.fill(&seen_lapse, CROWD).await;
    for batch in visitors.chunks(PRESENCE_BATCH) {
        bench.store.touch(&seen_lapse, batch).await.unwrap();
    }
    bench.clock.advance_ms(16_000);
    bench.start_measuring();
    let calls = bench.sweep(&seen_lapse).await;
    let waiting = bench.store.room(&seen_lapse).await.unwrap().stats.waiting;
    bench.report(&format!(
        "mass lapse of {CROWD} each seen once ({calls} ticks to sweep, {waiting} left waiting)"
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

    // Sessions admitted together, each renewed once, lapsing together.
    let sessions = bench
        .room("sessions", |c| {
            c.queue_method = QueueMethod::Passthrough;
            c.pass_ttl_s = 3_600;
            c.session_idle_s = Some(60);
            c.abandon_after_s = 86_400;
        })
        .await;
    let pass_exp_s = (bench.clock.now_ms() + 3_600_000) / 1000;
    let visitors = bench.fill(&sessions, SESSIONS).await;
    bench.clock.advance_ms(30_000);
    bench.start_measuring();
    let store = &bench.store;
    stream::iter(&visitors)
        .for_each_concurrent(256, |visitor| {
            let sessions = &sessions;
            async move {
                let place = store.arrive(sessions, *visitor, pass_exp_s).await.unwrap();
                assert!(matches!(place.state, PlaceState::Admitted { .. }));
            }
        })
        .await;
    bench.report(&format!(
        "{SESSIONS} sessions renewed, one verify's call each (their lapse moved from 60 s to 96 s)"
    ));
    // Every one lapses at 96 s; from then on the sweep frees them, a
    // slice a call, whichever call comes: here a tick, then a verify's
    // and a status's of a lapsed visitor, until the tick says none is left.
    bench.clock.advance_ms(66_000);
    bench.start_measuring();
    let mut calls = 0;
    for visitor in visitors.iter().cycle() {
        calls += 1;
        let tick = bench.store.tick(&sessions).await.unwrap();
        if tick.next_due_in_ms > SWEEP_AGAIN_MS {
            break;
        }
        let place = bench.store.arrive(&sessions, *visitor, pass_exp_s).await;
        assert!(matches!(place.unwrap().state, PlaceState::Lapsed { .. }));
        bench.store.status(&sessions, *visitor).await.unwrap();
    }
    let stats = bench.store.room(&sessions).await.unwrap().stats;
    bench.report(&format!(
        "a lapse of {SESSIONS} sessions at once ({calls} ticks, a verify and a status after each but the last; \
         {} lapses counted, {} left active)",
        stats.sessions_lapsed, stats.active
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

    // A sale's holds, all made at once, all running out at once.
    let shop = RoomId::parse("shop").unwrap();
    let sale = |json: serde_json::Value| {
        serde_json::from_value::<SaleRequest>(json)
            .unwrap()
            .into_config()
            .unwrap()
    };
    bench
        .store
        .configure_sale(
            &shop,
            sale(serde_json::json!({"stock": HOLDS, "hold_ttl_s": 60})),
        )
        .await
        .unwrap();
    let store = &bench.store;
    stream::iter(0..HOLDS)
        .for_each_concurrent(256, |_| {
            let shop = &shop;
            async move {
                let visitor = VisitorId::random();
                let claim = store.claim(shop, visitor, &Want::Quantity(1), None).await;
                claim.unwrap();
            }
        })
        .await;
    bench.clock.advance_ms(61_000);
    bench.start_measuring();
    let mut calls = 0;
    while bench.store.stock(&shop).await.unwrap().held > 0 {
        calls += 1;
    }
    bench.report(&format!(
        "{HOLDS} holds running out at once ({} calls to give them back)",
        calls + 1
    ));

    let seats: Vec<String> = (0..SEATS).map(|i| format!("S{i}")).collect();
    bench
        .store
        .configure_sale(&shop, sale(serde_json::json!({"seats": seats})))
        .await
        .unwrap();
    bench.start_measuring();
    bench.store.sale(&shop).await.unwrap();
    bench.store.stock(&shop).await.unwrap();
    bench.report(&format!(
        "the view and the stock of a sale of {SEATS} seats"
    ));
}
