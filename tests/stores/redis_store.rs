//! The conformance suite on the Redis store: each scenario on its own
//! `redis-server`, time driven by hand.

use crate::conformance;
use waitroom_testkit::redis as redis_server;

use std::sync::Arc;

use redis_server::RedisServer;
use waitroom::store::redis::{RedisOptions, RedisStore};
use waitroom::words::clock::ManualClock;

/// A harness on the Redis at `url`, which `backing` keeps running.
async fn harness_on(
    url: &str,
    options: &RedisOptions,
    backing: Box<dyn std::any::Any + Send>,
) -> conformance::Harness {
    let clock = ManualClock::new(1_767_225_600_000);
    let store = Arc::new(
        RedisStore::connect_with(url, options, Some(Arc::new(clock.clone())))
            .await
            .expect("the store connects"),
    );
    conformance::Harness {
        store: store.clone(),
        sale: store,
        clock,
        _backing: Some(backing),
    }
}

async fn redis_harness() -> conformance::Harness {
    let server = RedisServer::start();
    harness_on(&server.url(), &RedisOptions::default(), Box::new(server)).await
}

conformance_suite!(redis_harness);

/// The same scenarios with `--redis-wait-replicas 1` on a master with one
/// replica: every write is answered after `WAIT`, and a room script's events
/// are returned to the node and published by it (lua/lib.lua's deferred
/// `publish`) rather than from inside the script.
mod waiting_for_a_replica {
    use super::*;

    async fn replicated_harness() -> conformance::Harness {
        let master = RedisServer::start();
        let replica = RedisServer::start_replica_of(&master);
        let options = RedisOptions {
            wait_replicas: 1,
            ..RedisOptions::default()
        };
        harness_on(&master.url(), &options, Box::new((master, replica))).await
    }

    conformance_suite!(replicated_harness);

    /// A write the replica does not confirm within a second is an error,
    /// and its events are never published: the first event a node hears
    /// afterwards is the next confirmed write's.
    #[tokio::test]
    async fn a_write_no_replica_confirms_is_refused_and_publishes_nothing() {
        use std::time::Duration;
        use waitroom::store::{Store, StoreError, StoreExt};
        use waitroom::words::{RoomConfig, RoomEvent, RoomId, StoreEvent, VisitorId};

        let master = RedisServer::start();
        let replica = RedisServer::start_replica_of(&master);
        let options = RedisOptions {
            wait_replicas: 1,
            ..RedisOptions::default()
        };
        let clock = ManualClock::new(1_767_225_600_000);
        let store =
            RedisStore::connect_with(&master.url(), &options, Some(Arc::new(clock.clone())))
                .await
                .unwrap();
        let room = RoomId::parse("durable").unwrap();
        let mut one_per_tick = RoomConfig::new("Durable", "/x");
        one_per_tick.admit_per_tick = 1;
        let tick_ms = one_per_tick.tick_ms;
        store.create_room(room.clone(), one_per_tick).await.unwrap();
        let mut events = store.subscribe();
        store.join(&room, VisitorId::random()).await.unwrap();
        let (second, third) = (VisitorId::random(), VisitorId::random());
        store.join(&room, second).await.unwrap();
        store.join(&room, third).await.unwrap();

        let signal = |what: &str| {
            let pid = replica.pid().unwrap().to_string();
            assert!(
                std::process::Command::new("kill")
                    .args([what, &pid])
                    .status()
                    .unwrap()
                    .success()
            );
        };
        signal("-STOP");
        clock.advance_ms(tick_ms);
        let refused = store.tick(&room).await;
        assert!(
            matches!(refused, Err(StoreError::Unavailable(ref reason)) if reason.contains("replicas did not confirm")),
            "{refused:?}"
        );
        signal("-CONT");
        store.leave(&room, third).await.unwrap();
        let first_heard = loop {
            let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
                .await
                .expect("the leave's event comes")
                .unwrap();
            if let StoreEvent::Room(event) = event {
                break event;
            }
        };
        assert!(
            matches!(first_heard, RoomEvent::Left { .. }),
            "the unconfirmed tick published nothing: {first_heard:?}"
        );
    }
}

/// Issue 24, item 18: a visitor who left, was abandoned, ran out or was
/// reclaimed leaves nothing behind in Redis: given up, their record goes at
/// once and a key that says `left` expires by itself; the rest goes with
/// the ticks.
#[tokio::test]
async fn nothing_of_a_visitor_stays_once_they_are_gone() {
    use waitroom::store::{JoinOptions, StoreExt};
    use waitroom::words::{RoomConfig, RoomId, VisitorId};

    let clock = ManualClock::new(1_767_225_600_000);
    let (_server, store, mut redis) = store_on_its_server(&clock).await;
    let id = RoomId::parse("r").unwrap();
    let mut config = RoomConfig::new("R", "/x");
    config.admit_per_tick = 2;
    config.abandon_after_s = 20;
    config.pass_ttl_s = 60;
    config.arrival_grace_s = Some(5);
    store.create_room(id.clone(), config).await.unwrap();
    let visitors: Vec<VisitorId> = (0..6).map(|_| VisitorId::random()).collect();
    for (n, visitor) in visitors.iter().enumerate() {
        let user = JoinOptions {
            user: Some(format!("user-{n}")),
            ..JoinOptions::default()
        };
        store.join_with(&id, *visitor, &user).await.unwrap();
    }
    store.leave(&id, visitors[2]).await.unwrap(); // waiting
    store.leave(&id, visitors[0]).await.unwrap(); // admitted
    // A visitor's keys are named under the room's life (`life_key` in lua/lib.lua).
    let life: u64 = redis::cmd("HGET")
        .arg("wr:{r}:room")
        .arg("life")
        .query_async(&mut redis)
        .await
        .unwrap();
    for (gone, told_left_ms) in [(visitors[2], 20_000), (visitors[0], 60_000)] {
        let kept: bool = redis::cmd("HEXISTS")
            .arg("wr:{r}:visitors")
            .arg(gone.to_string())
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(!kept, "gone from the room at once");
        let ttl: i64 = redis::cmd("PTTL")
            .arg(format!("wr:{{r}}:left:{life}:{gone}"))
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(
            (1..=told_left_ms).contains(&ttl),
            "`left` is told for a while, then Redis drops it: {ttl}"
        );
    }
    // 20 s on: #1's pass is reclaimed unseen, #3 is abandoned, #4 and #5
    // (still polling) are admitted; their sockets stay open a while, and
    // 60 s later every pass has run out; 20 s more, the room is idle.
    clock.advance_ms(15_000);
    store.touch(&id, &visitors[4..]).await.unwrap();
    clock.advance_ms(5_000);
    store.tick(&id).await.unwrap();
    clock.advance_ms(50_000);
    store.touch(&id, &visitors[4..]).await.unwrap();
    clock.advance_ms(10_000);
    store.tick(&id).await.unwrap();
    clock.advance_ms(20_000);
    store.tick(&id).await.unwrap();
    for key in [
        "visitors", "users", "user-of", "seen", "active", "arrivals", "line",
    ] {
        let exists: bool = redis::cmd("EXISTS")
            .arg(format!("wr:{{r}}:{key}"))
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(!exists, "wr:{{r}}:{key} still holds someone");
    }
}

/// Issue 41: a room whose record holds its config a field each, as the
/// releases before wrote it, is moved into the one `config` value by the
/// next node to start, and then serves as before.
#[tokio::test]
async fn a_room_of_the_release_before_is_migrated_when_a_node_starts() {
    use waitroom::store::StoreExt;
    use waitroom::words::{ConfigPatch, RoomConfig, RoomId, VisitorId};

    let server = RedisServer::start();
    let clock = ManualClock::new(1_767_225_600_000);
    let url = server.url();
    let connect = || RedisStore::connect(&url, Some(Arc::new(clock.clone())));
    let store = connect().await.unwrap();
    let id = RoomId::parse("old").unwrap();
    let mut config = RoomConfig::new("Old room", "https://shop.example/");
    config.admit_per_tick = 3;
    config.max_active = Some(40);
    config.paused = true;
    store.create_room(id.clone(), config.clone()).await.unwrap();
    // The record as the release before wrote it: the config a field each.
    let mut redis = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("HDEL")
        .arg("wr:{old}:room")
        .arg("config")
        .query_async(&mut redis)
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("wr:{old}:room")
        .arg(&[
            ("name", "Old room"),
            ("target_url", "https://shop.example/"),
            ("admit_per_tick", "3"),
            ("tick_ms", "5000"),
            ("max_active", "40"),
            ("pass_ttl_s", "600"),
            ("abandon_after_s", "300"),
            ("paused", "1"),
            ("arrival_grace_s", ""),
            ("user_key", ""),
            ("user_required", "0"),
            ("code_required", "0"),
            ("pow_difficulty", "0"),
            ("notice", ""),
            ("queue_method", "fifo"),
            ("language", "en"),
            ("close_when_sold_out", "1"),
            ("closes_at", ""),
            ("opens_at", ""),
            ("bypass_networks", "[]"),
            ("bypass_match", ""),
            ("page", ""),
        ])
        .query_async(&mut redis)
        .await
        .unwrap();
    drop(store);

    let store = connect().await.unwrap();
    assert_eq!(store.room(&id).await.unwrap().config, config);
    let waiting = store.join(&id, VisitorId::random()).await.unwrap();
    assert!(
        matches!(waiting.state, waitroom::words::PlaceState::Waiting { .. }),
        "paused, as it was: {:?}",
        waiting.state
    );
    let change: ConfigPatch = serde_json::from_str(r#"{"paused": false}"#).unwrap();
    assert!(!store.configure(&id, change).await.unwrap().config.paused);
}

/// A Redis that stops answering (SIGSTOP: it holds its connections and
/// answers nothing, as a frozen host does) fails joins in time, again and
/// again, rather than holding them (a room's joins wait on the call before
/// theirs, and a failed call makes its thread's connection again, to the
/// same silent server); once it answers again, joins succeed.
#[tokio::test]
async fn a_stalled_redis_fails_joins_in_time_and_they_succeed_once_it_answers() {
    use std::time::Duration;
    use waitroom::store::StoreExt;
    use waitroom::words::{RoomConfig, RoomId, VisitorId};

    let server = RedisServer::start();
    let clock = ManualClock::new(1_767_225_600_000);
    let store = RedisStore::connect(&server.url(), Some(Arc::new(clock.clone())))
        .await
        .unwrap();
    let id = RoomId::parse("r").unwrap();
    let mut config = RoomConfig::new("R", "/x");
    config.paused = true;
    store.create_room(id.clone(), config).await.unwrap();
    store.join(&id, VisitorId::random()).await.unwrap();

    let pid = server.pid().expect("the server runs").to_string();
    let signal = |which: &str| {
        let sent = std::process::Command::new("kill")
            .args([which, &pid])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    signal("-STOP");
    for attempt in 0..3 {
        let joined = tokio::time::timeout(
            Duration::from_secs(30),
            store.join(&id, VisitorId::random()),
        )
        .await;
        let joined = joined.unwrap_or_else(|_| panic!("join {attempt} was held past 30 s"));
        assert!(joined.is_err(), "join {attempt}: a stopped Redis answered");
    }
    signal("-CONT");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.join(&id, VisitorId::random()).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "joins still fail 30 s after Redis answers again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A claim an older release kept, before a claim named its buyer (seven
/// fields, not eight), is read as its visitor's: it shows in their claims,
/// counts against their limit, and confirms.
#[tokio::test]
async fn a_claim_kept_without_its_buyer_is_its_visitors() {
    use waitroom::store::{SaleStoreExt, StoreExt};
    use waitroom::words::sale::{ClaimState, Inventory, SaleConfig, SaleError, Want};
    use waitroom::words::{RoomConfig, RoomId, VisitorId};

    let clock = ManualClock::new(1_767_225_600_000);
    let (_server, store, mut redis) = store_on_its_server(&clock).await;
    let id = RoomId::parse("old").unwrap();
    store
        .create_room(id.clone(), RoomConfig::new("Old", "/x"))
        .await
        .unwrap();
    let sale = SaleConfig {
        inventory: Inventory::Stock(10),
        per_user_limit: 2,
        hold_ttl_s: 600,
    };
    store.configure_sale(&id, sale).await.unwrap();
    let visitor = VisitorId::random();
    // A claim of 2 units as the release before wrote it, its units counted
    // as the release before counted them (by visitor).
    let expires = 1_767_225_600_000_u64 + 600_000;
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg("wr:{old}:claims")
        .arg("old-claim")
        .arg(format!("{visitor}|held|2||1|{expires}|"))
        .cmd("HINCRBY")
        .arg("wr:{old}:units")
        .arg(visitor.to_string())
        .arg(2)
        .cmd("HSET")
        .arg("wr:{old}:mine")
        .arg(visitor.to_string())
        .arg("old-claim")
        .cmd("HINCRBY")
        .arg("wr:{old}:sale")
        .arg("stock_left")
        .arg(-2)
        .query_async(&mut redis)
        .await
        .unwrap();
    let mine = store.claims_of(&id, visitor).await.unwrap();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!((mine[0].quantity, mine[0].state), (2, ClaimState::Held));
    assert!(matches!(
        store.claim(&id, visitor, &Want::Quantity(1), None).await,
        Err(SaleError::LimitReached(2))
    ));
    let confirmed = store.confirm(&id, visitor, "old-claim").await.unwrap();
    assert_eq!(confirmed.state, ClaimState::Confirmed);
}

/// A Redis of the test's own, the store on it at `clock`'s time, and a
/// connection of the test's to read and write Redis itself.
async fn store_on_its_server(
    clock: &ManualClock,
) -> (RedisServer, RedisStore, redis::aio::MultiplexedConnection) {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), Some(Arc::new(clock.clone())))
        .await
        .unwrap();
    let redis = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (server, store, redis)
}

/// A closed room's report is kept `--report-keep-days` (Redis drops its
/// ledger and rows by their expiry, in Redis's own time), and a room made
/// again under the id keeps its own while the earlier one stays.
#[tokio::test]
async fn a_closed_rooms_ledger_expires_after_the_days_it_is_kept() {
    use waitroom::store::StoreExt;
    use waitroom::words::op::ListReports;
    use waitroom::words::{RoomConfig, RoomId, VisitorId};

    let clock = ManualClock::new(1_767_225_600_000);
    let server = RedisServer::start();
    let options = RedisOptions {
        report_keep_days: 2,
        ..RedisOptions::default()
    };
    let store = RedisStore::connect_with(&server.url(), &options, Some(Arc::new(clock.clone())))
        .await
        .unwrap();
    let mut redis = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let id = RoomId::parse("r").unwrap();
    let mut config = RoomConfig::new("R", "/x");
    config.paused = true;
    store.create_room(id.clone(), config.clone()).await.unwrap();
    store.join(&id, VisitorId::random()).await.unwrap();
    // Two ticks a minute apart: the first minute's row is written.
    for ms in [5_000, 60_000] {
        clock.advance_ms(ms);
        store.tick(&id).await.unwrap();
    }
    store.close_room(&id).await.unwrap();
    let keep_ms = 2 * 24 * 3_600_000;
    for key in ["wr:{r}:ledger:1", "wr:{r}:minutes:1"] {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!((keep_ms - 60_000..=keep_ms).contains(&ttl), "{key}: {ttl}");
    }
    store.create_room(id.clone(), config).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg("wr:{r}:ledger:2")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(ttl, -1, "an open room's ledger is kept while it is open");
    assert_eq!(store.run(ListReports {}).await.unwrap().len(), 2);
    // Redis dropped the first ledger: the list forgets it.
    let _: () = redis::cmd("DEL")
        .arg("wr:{r}:ledger:1")
        .query_async(&mut redis)
        .await
        .unwrap();
    let listed = store.run(ListReports {}).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].closed_at, None);
}

/// A room made before rooms kept ledgers (no `life`, no ledger hash) still
/// has a report while open: its own hash's counts, from its making.
#[tokio::test]
async fn a_room_made_before_ledgers_reports_its_own_counts() {
    use waitroom::store::StoreExt;
    use waitroom::words::clock::Moment;
    use waitroom::words::op::ReadReport;
    use waitroom::words::{RoomConfig, RoomId, VisitorId};

    let clock = ManualClock::new(1_767_225_600_000);
    let (_server, store, mut redis) = store_on_its_server(&clock).await;
    let id = RoomId::parse("r").unwrap();
    store
        .create_room(id.clone(), RoomConfig::new("R", "/x"))
        .await
        .unwrap();
    // As an older release made it: no life, no ledger.
    let _: () = redis::cmd("HDEL")
        .arg("wr:{r}:room")
        .arg("life")
        .query_async(&mut redis)
        .await
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg("wr:{r}:ledger:1")
        .query_async(&mut redis)
        .await
        .unwrap();
    for _ in 0..3 {
        store.join(&id, VisitorId::random()).await.unwrap();
    }
    let report = store
        .run(ReadReport {
            room: id.clone(),
            created_at: None,
        })
        .await
        .unwrap();
    assert_eq!(report.created_at, Moment(1_767_225_600_000));
    assert_eq!(
        (report.counts.arrivals, report.counts.passed_through),
        (3, 3)
    );
}

/// Issue 44, item 2: under constant use a session is written at most once
/// a tenth of its idle time. A pass verified every 250 ms for a minute of
/// driven time, its idle time 60 s: its lapse is moved (a `ZADD`, as
/// Redis's own commandstats count them) by the calls at 0.25, 6.5, 12.75
/// … 56.5 s, each the first to find less than the idle time left: 10
/// writes for 240 calls.
#[tokio::test]
async fn a_session_in_constant_use_is_written_once_a_tenth_of_its_idle_time() {
    use waitroom::store::StoreExt;
    use waitroom::words::{PlaceState, QueueMethod, RoomConfig, RoomId, VisitorId};

    async fn zadds(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(redis)
            .await
            .unwrap();
        stats
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_zadd:calls="))
            .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
    }

    let clock = ManualClock::new(1_767_225_600_000);
    let (_server, store, mut redis) = store_on_its_server(&clock).await;
    let id = RoomId::parse("r").unwrap();
    let mut config = RoomConfig::new("R", "/x");
    config.queue_method = QueueMethod::Passthrough;
    config.pass_ttl_s = 3_600;
    config.session_idle_s = Some(60);
    store.create_room(id.clone(), config).await.unwrap();
    let visitor = VisitorId::random();
    let PlaceState::Admitted { expires_at, .. } = store.join(&id, visitor).await.unwrap().state
    else {
        panic!("a passthrough room admits at once");
    };
    let before = zadds(&mut redis).await;
    for _ in 0..240 {
        clock.advance_ms(250);
        let place = store.arrive(&id, visitor, expires_at / 1000).await.unwrap();
        assert!(matches!(place.state, PlaceState::Admitted { .. }));
    }
    assert_eq!(zadds(&mut redis).await - before, 10);
}

/// Issue 46, item 8: what a visitor left to be reached by (a contact, a
/// push subscription) is kept with the place and nowhere else, and is gone
/// from Redis, every key read whole, once the place ends: given up while
/// waiting, swept while away after `near`, or admitted and the pass run
/// out.
#[tokio::test]
async fn a_visitors_contact_goes_with_the_place() {
    use waitroom::store::StoreExt;
    use waitroom::words::notify::{Ask, NotifyRequest, PushKeys, PushSubscription};
    use waitroom::words::op::{ClaimEvents, Notify};
    use waitroom::words::{RoomConfig, RoomId, VisitorId};

    let clock = ManualClock::new(1_767_225_600_000);
    let (_server, store, mut redis) = store_on_its_server(&clock).await;
    let id = RoomId::parse("r").unwrap();
    let mut config = RoomConfig::new("R", "/x");
    config.admit_per_tick = 1;
    config.abandon_after_s = 60;
    config.pass_ttl_s = 60;
    config.notify_return_s = 60;
    config.paused = true;
    store.create_room(id.clone(), config).await.unwrap();
    let visitors: Vec<VisitorId> = (0..3).map(|_| VisitorId::random()).collect();
    for (n, visitor) in visitors.iter().enumerate() {
        store.join(&id, *visitor).await.unwrap();
        let ask = Ask {
            request: NotifyRequest {
                contact: Some(format!("contact-{n}-secret")),
                push: Some(PushSubscription {
                    endpoint: format!("https://fcm.googleapis.com/fcm/send/endpoint-{n}-secret"),
                    keys: PushKeys {
                        p256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA".into(),
                        auth: "tBHItJI5svbpez7KI4CCXg".into(),
                    },
                }),
                ahead: 1,
            },
            client: "203.0.113.7/32".into(),
            per_client: 5,
            join_limit: None,
        };
        let place = store
            .run(Notify {
                room: id.clone(),
                visitor: *visitor,
                ask: Some(Box::new(ask)),
            })
            .await
            .unwrap();
        assert!(place.notify);
    }
    // Everything Redis holds, as text, key by key.
    async fn everything(redis: &mut redis::aio::MultiplexedConnection) -> String {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(redis)
            .await
            .unwrap();
        let mut all = String::new();
        for key in keys {
            let kind: String = redis::cmd("TYPE")
                .arg(&key)
                .query_async(redis)
                .await
                .unwrap();
            let read = match kind.as_str() {
                "string" => redis::cmd("GET").arg(&key).clone(),
                "hash" => redis::cmd("HGETALL").arg(&key).clone(),
                "set" => redis::cmd("SMEMBERS").arg(&key).clone(),
                "zset" => redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).clone(),
                "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).clone(),
                "stream" => redis::cmd("XRANGE").arg(&key).arg("-").arg("+").clone(),
                other => panic!("{key} is a {other}"),
            };
            let value: redis::Value = read.query_async(redis).await.unwrap();
            all.push_str(&format!("{key} {value:?}\n"));
        }
        all
    }
    let held = everything(&mut redis).await;
    for n in 0..3 {
        assert!(
            held.contains(&format!("contact-{n}-secret")),
            "kept while waiting"
        );
    }
    // #0 gives the place up.
    store.leave(&id, visitors[0]).await.unwrap();
    // #1 is near (first in line), sent, and never comes back: swept after
    // notify_return_s. Its event is handed out, with the contact read then.
    clock.advance_ms(5_000);
    store.tick(&id).await.unwrap();
    let events = store
        .run(ClaimEvents {
            room: id.clone(),
            consumer: "n".into(),
            takeover_ms: 60_000,
            limit: 10,
        })
        .await
        .unwrap();
    assert!(
        events.iter().any(|e| e.visitor == visitors[1]),
        "{events:?}"
    );
    assert!(
        !everything(&mut redis).await.contains("contact-0-secret"),
        "gone with the place given up"
    );
    // #2 is admitted and its pass runs out; #1's return time runs out.
    store
        .configure(&id, serde_json::from_str(r#"{"paused": false}"#).unwrap())
        .await
        .unwrap();
    for _ in 0..3 {
        clock.advance_ms(5_000);
        store.tick(&id).await.unwrap();
    }
    clock.advance_ms(61_000);
    store.tick(&id).await.unwrap();
    clock.advance_ms(5_000);
    store.tick(&id).await.unwrap();
    let left = everything(&mut redis).await;
    for n in 0..3 {
        assert!(
            !left.contains(&format!("-{n}-secret")),
            "#{n}'s contact or endpoint stayed:\n{left}"
        );
    }
}
