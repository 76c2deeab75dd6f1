//! The stores side by side: seeded random sequences of store operations
//! (joins, leaves, ticks, config changes up and down, the queue method
//! switched between `fifo` and `random`, clock steps, arrivals,
//! revocations, presence, scheduled rooms' pre-queues and openings with
//! their draws, the sale's claims, confirms, releases and holds running
//! out, requests to be notified with the outbox's events and resume codes,
//! and the room's close) run against the memory store, one Redis and
//! a Redis Cluster on one driven clock and one seeded chance each, and
//! every answer must agree, as must every visitor's place and the room's
//! figures at the end. The memory store is the rules' model
//! (`words::rules`) behind a lock; the Lua scripts are the same rules
//! again, and this test is what holds the two together. Since every store
//! draws its random choices from a chance seeded alike, `random` admits
//! the same visitors everywhere and a draw has the same seed, entries and
//! order.
//!
//! The sequences are of the operations themselves (`words::op`), each run
//! through the store's one `apply`, as every caller's operation is: a new
//! operation is generated here by adding its strategy and what of its
//! answer the stores must agree on. Every sequence runs on the same room
//! and visitors, the room closed and made again first, so each sequence
//! also checks that nothing of a room's predecessor survives in any store.
//!
//! `proptest` makes the sequences (from a fixed seed, so a run repeats) and,
//! when one disagrees, shrinks it to the shortest sequence that still does,
//! which is what the failure prints.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;
use waitroom::store::memory::MemoryStore;
use waitroom::store::redis::RedisStore;
use waitroom::store::{PassTakenBack, RoomFigures, SaleStore, SaleStoreExt, Store, StoreExt, Tick};
use waitroom::words::autotune::{Autotune, Failure};
use waitroom::words::chance::SeededChance;
use waitroom::words::clock::{Clock, ManualClock, Moment, rfc3339_ms};
use waitroom::words::notify::{Ask, EventKind, NotifyRequest};
use waitroom::words::op::{self, Answer, Op, SaleAnswer, SaleOp};
use waitroom::words::operations::JoinOptions;
use waitroom::words::sale::{Claim, Inventory, SaleConfig, Want};
use waitroom::words::{
    ConfigPatch, Place, PlaceState, QueueMethod, RoomConfig, RoomId, RoomStats, VisitorId,
};
use waitroom_testkit::redis::{RedisCluster, RedisServer};

/// Visitors a sequence draws from: few, so that they meet again. The same
/// for every sequence, as is the room.
static VISITORS: LazyLock<[VisitorId; 6]> =
    LazyLock::new(|| std::array::from_fn(|v| VisitorId(0x5eed_0000 + v as u64)));
static ROOM: LazyLock<RoomId> = LazyLock::new(|| RoomId::parse("differential").unwrap());
const TICK_MS: u64 = 5_000;
/// What every store's random choices come from.
const CHANCE_SEED: u64 = 25;
/// Stands for the claim id the store gave the visitor's latest claim, in a
/// generated confirm or release: each store names its claims itself.
const LATEST_CLAIM: &str = "latest";
/// Stands for the `exp` of the pass the visitor was last told of, which
/// each store reports on its own (they agree on it, or the test fails).
const HELD_PASS: u64 = u64::MAX;

/// Stands for the entries of the events this store handed out last, in
/// a generated settle: each store names its outbox's entries itself.
const LAST_CLAIMED: &str = "last-claimed";

/// Stands for the epoch of the last health probe the store handed out
/// (each store reports its own; they agree on it, or the test fails).
const HELD_EPOCH: u64 = u64::MAX;

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    /// An operation on the room, run by every store.
    Room(Op),
    /// An operation on the room's sale, run by every store.
    Sale(SaleOp),
    /// The clock moves on, in ms, for every store at once.
    Wait(u64),
    /// The operator sets a schedule: each entry this many ms from now
    /// (made absolute as the step runs), with the fields it sets.
    Schedule(Vec<(u64, serde_json::Value)>),
}

fn room() -> RoomId {
    ROOM.clone()
}

fn configure(patch: serde_json::Value) -> Op {
    let patch: ConfigPatch = serde_json::from_value(patch).unwrap();
    op::Configure {
        room: room(),
        patch,
    }
    .into()
}

fn step() -> impl Strategy<Value = Step> {
    let visitor = (0..VISITORS.len()).prop_map(|v| VISITORS[v]);
    let room_op = |op: fn(VisitorId) -> Op| visitor.clone().prop_map(move |v| Step::Room(op(v)));
    let sale_op =
        |op: fn(VisitorId) -> SaleOp| visitor.clone().prop_map(move |v| Step::Sale(op(v)));
    let patch = prop_oneof![
        (1u32..4).prop_map(|n| json!({ "admit_per_tick": n })),
        proptest::option::of(0u64..4).prop_map(|cap| json!({ "max_active": cap })),
        any::<bool>().prop_map(|paused| json!({ "paused": paused })),
        prop_oneof![Just(1_000u64), Just(5_000), Just(20_000)]
            .prop_map(|ms| json!({ "tick_ms": ms })),
        prop_oneof![Just(10u64), Just(60), Just(3_600)].prop_map(|s| json!({ "pass_ttl_s": s })),
        prop_oneof![Just(15u64), Just(60), Just(3_600)]
            .prop_map(|s| json!({ "abandon_after_s": s })),
        prop_oneof![Just("fifo"), Just("random")].prop_map(|m| json!({ "queue_method": m })),
        proptest::option::of(prop_oneof![Just(5u64), Just(10), Just(60)])
            .prop_map(|idle| json!({ "session_idle_s": idle })),
        (any::<bool>(), 1u32..3, proptest::option::of(2u32..5)).prop_map(|(dry_run, min, max)| {
            json!({ "autotune": {
                "health_url": "https://shop.example/health", "latency_target_ms": 1000,
                "min_per_tick": min, "max_per_tick": max, "dry_run": dry_run,
            }})
        }),
        Just(json!({ "autotune": null })),
    ];
    // A schedule entry's change: any of the patches but one that would
    // break a rule where the entry applies (skipped with its error, alike).
    let entry = (
        prop_oneof![Just(0u64), Just(1), Just(3_000), Just(10_000)],
        patch.clone(),
    );
    let failure = prop_oneof![
        3 => Just(None),
        1 => Just(Some(Failure::Failed)),
        1 => Just(Some(Failure::Timeout)),
        1 => Just(Some(Failure::Status(503))),
    ];
    prop_oneof![
        6 => room_op(|visitor| op::Join { room: room(), visitor, options: JoinOptions::default() }.into()),
        2 => room_op(|visitor| op::Leave { room: room(), visitor }.into()),
        2 => room_op(|visitor| op::Status { room: room(), visitor }.into()),
        // The visitor's pass was seen (`/api/verify`): not a no-show, and
        // its session lasts on; or a stale pass of theirs was.
        3 => room_op(|visitor| op::Arrive { room: room(), visitor, pass_exp_s: HELD_PASS }.into()),
        1 => room_op(|visitor| op::Arrive { room: room(), visitor, pass_exp_s: 1 }.into()),
        // The operator takes the visitor's pass back.
        1 => room_op(|visitor| op::RevokePass { room: room(), visitor, pass_exp_s: None, why: PassTakenBack::Revoked }.into()),
        // The holder gives their pass up (`leave` with it).
        1 => room_op(|visitor| op::RevokePass { room: room(), visitor, pass_exp_s: None, why: PassTakenBack::GivenUp }.into()),
        // These visitors hold a socket somewhere.
        2 => proptest::collection::vec(visitor.clone(), 0..VISITORS.len())
            .prop_map(|visitors| Step::Room(op::Touch { room: room(), visitors }.into())),
        5 => Just(Step::Room(op::TickIfDue { room: room() }.into())),
        4 => prop_oneof![Just(1_000u64), Just(2_500), Just(5_000), Just(20_000)].prop_map(Step::Wait),
        2 => patch.prop_map(|patch| Step::Room(configure(patch))),
        1 => proptest::collection::vec(entry, 0..4).prop_map(Step::Schedule),
        // A health sample a node took (autotune), slow or not.
        2 => (prop_oneof![Just(20u64), Just(999), Just(1_001), Just(5_000)], failure).prop_map(
            |(latency_ms, failure)| Step::Room(op::RecordSample { room: room(), epoch: HELD_EPOCH, latency_ms, failure }.into())
        ),
        3 => (visitor.clone(), 1u64..4).prop_map(|(visitor, units)| {
            let want = Want::Quantity(units);
            Step::Sale(op::MakeClaim { room: room(), visitor, user: None, want, idempotency_key: None }.into())
        }),
        2 => sale_op(|visitor| op::ConfirmClaim { room: room(), visitor, claim_id: LATEST_CLAIM.into() }.into()),
        1 => sale_op(|visitor| op::ReleaseClaim { room: room(), visitor, claim_id: LATEST_CLAIM.into() }.into()),
        // The visitor's holds go back to stock (their pass was taken back).
        1 => sale_op(|visitor| op::ReleaseHoldsOf { room: room(), visitor }.into()),
        1 => Just(Step::Sale(op::ReadSale { room: room() }.into())),
        1 => Just(Step::Sale(op::Orders { room: room() }.into())),
        // The operator closes the room: what follows is refused alike.
        1 => Just(Step::Room(op::CloseRoom { room: room(), sale: Some(r#"{"kind":"stock","orders":1,"sold":2,"left":3}"#.into()) }.into())),
        // The draw as anyone sees it, and its entries once drawn.
        1 => Just(Step::Room(op::ReadRoom { room: room() }.into())),
        1 => Just(Step::Room(op::DrawEntries { room: room(), after: None, limit: 100 }.into())),
        // The room's report, and the reports kept (closed rooms' too).
        1 => Just(Step::Room(op::ReadReport { room: room(), created_at: None }.into())),
        1 => Just(Step::Room(op::ListReports {}.into())),
        // A visitor asks to be notified (from one of two addresses, two
        // places each at most), or no longer; their link is followed.
        5 => (visitor.clone(), 0u32..8, any::<bool>()).prop_map(|(visitor, ahead, other)| {
            let ask = Ask {
                request: NotifyRequest { contact: Some("c".into()), push: None, ahead },
                client: if other { "block-b" } else { "block-a" }.into(),
                per_client: 2,
                join_limit: None,
            };
            Step::Room(op::Notify { room: room(), visitor, ask: Some(Box::new(ask)) }.into())
        }),
        1 => room_op(|visitor| op::Notify { room: room(), visitor, ask: None }.into()),
        1 => (visitor.clone(), any::<bool>()).prop_map(|(visitor, near)| {
            let kind = if near { EventKind::Near } else { EventKind::Admitted };
            Step::Room(op::Resume { room: room(), visitor, kind }.into())
        }),
        // A node takes the outbox's events (another's at once: no takeover
        // time), and settles those it took last.
        4 => Just(Step::Room(op::ClaimEvents { room: room(), consumer: "d".into(), takeover_ms: 0, limit: 3 }.into())),
        1 => Just(Step::Room(op::SettleEvents { room: room(), entries: vec![LAST_CLAIMED.into()], push_gone: Vec::new() }.into())),
    ]
}

/// What an answer says that every store must say alike. Positions, times
/// and figures; not the stores' own numbering of places (`order`).
#[derive(Debug, PartialEq)]
enum Compared {
    Place(Shown),
    Tick {
        /// Admitted, waits, abandoned, no-shows, waiting, active, whether
        /// the node takes a health sample, and autotune's change.
        #[allow(clippy::type_complexity)]
        admitted: Option<(u64, Vec<u64>, u64, u64, u64, u64, bool, Option<String>)>,
        busy: bool,
        next_due_in_ms: u64,
        change_in_ms: Option<u64>,
        outbox: u64,
        /// What every node's metrics show of the room (`Tick::figures`),
        /// but the ETA: Lua keeps the rate to 14 significant digits, so an
        /// ETA that is a whole number of seconds in Rust (1 / (2/6)) can be
        /// a second more there; the rate itself is compared in `Shown`.
        figures: RoomFigures,
    },
    Done,
    Revoked(bool),
    /// A claim: its state, units, sequence, hold expiry and confirmation time.
    Claim(String, u64, u64, u64, Option<u64>),
    /// Units left.
    Sale(u64),
    /// Each order's sequence and units.
    Orders(Vec<(u64, u64)>),
    Released(u64),
    /// The error's kind.
    Refused(String),
    /// The room: its draw (commitment, seed once revealed, entrants;
    /// `None` without one), its schedule as shown and its stats but the
    /// oldest wait, as JSON.
    Room(Option<(String, Option<String>, u64)>, String, String),
    /// Each entrant's key and entry id, in drawn order.
    Entries(Vec<String>),
    /// Events handed out: id, kind, position, time and how to reach them.
    Events(Vec<(String, String, Option<u64>, u64, String)>),
    /// A report, whole, as JSON; or the list of reports.
    Report(String),
}

#[derive(Debug, PartialEq)]
struct Shown {
    state: State,
    waiting: u64,
    version: u64,
    paused: bool,
    /// Admissions a second over the last minute, in thousandths.
    rate_milli: Option<i64>,
    notify: bool,
}

#[derive(Debug, PartialEq)]
enum State {
    PreQueue { entry: String },
    Waiting { position: u64 },
    Admitted { admitted_at: u64, expires_at: u64 },
    Expired,
    Away,
    Lapsed { expires_at: u64 },
    Left,
    Closed,
}

fn shown(place: Place) -> Compared {
    Compared::Place(Shown {
        state: match place.state {
            PlaceState::PreQueue { entry } => State::PreQueue {
                entry: entry.to_string(),
            },
            PlaceState::Waiting { position, .. } => State::Waiting { position },
            PlaceState::Admitted {
                admitted_at,
                expires_at,
            } => State::Admitted {
                admitted_at,
                expires_at,
            },
            PlaceState::Expired => State::Expired,
            PlaceState::Away => State::Away,
            PlaceState::Lapsed { expires_at } => State::Lapsed { expires_at },
            PlaceState::Left => State::Left,
            PlaceState::Closed => State::Closed,
        },
        waiting: place.line.waiting,
        version: place.line.version,
        paused: place.line.paused,
        rate_milli: place.line.rate_per_s.map(|r| (r * 1000.0).round() as i64),
        notify: place.notify,
    })
}

/// The error's kind: its variant's name.
fn refused(error: impl std::fmt::Debug) -> Compared {
    let kind = format!("{error:?}");
    let kind = kind.split(['(', ' ', '{']).next().unwrap_or_default();
    Compared::Refused(kind.to_owned())
}

fn claim(claim: &Claim) -> Compared {
    Compared::Claim(
        format!("{:?}", claim.state),
        claim.quantity,
        claim.sequence,
        claim.hold_expires_at,
        claim.confirmed_at,
    )
}

fn tick(tick: Tick) -> Compared {
    Compared::Tick {
        admitted: tick.ran.map(|r| {
            (
                r.admitted,
                r.waits_ms,
                r.abandoned,
                r.no_shows,
                r.waiting,
                r.active,
                r.probe.is_some(),
                r.tuned.map(|d| d.name().to_string()),
            )
        }),
        busy: tick.busy,
        next_due_in_ms: tick.next_due_in_ms,
        change_in_ms: tick.change_in_ms,
        outbox: tick.outbox,
        figures: RoomFigures {
            tail_eta_s: None,
            ..tick.figures
        },
    }
}

/// What of a room operation's answer the stores must agree on.
fn compared(answer: Answer) -> Compared {
    match answer {
        Answer::Join(place)
        | Answer::Status(place)
        | Answer::Arrive(place)
        | Answer::Notify(place)
        | Answer::Resume(place) => shown(place),
        Answer::ClaimEvents(events) => Compared::Events(
            events
                .into_iter()
                .map(|e| {
                    let reach = serde_json::to_string(&e.reach).unwrap();
                    (e.id, e.kind.to_string(), e.position, e.at, reach)
                })
                .collect(),
        ),
        Answer::SettleEvents(()) => Compared::Done,
        Answer::Leave(())
        | Answer::Touch(())
        | Answer::CloseRoom(())
        | Answer::RecordSample(()) => Compared::Done,
        // Its stats are the tick's figures, compared there.
        Answer::Configure(_) => Compared::Done,
        Answer::RevokePass(taken) => Compared::Revoked(taken),
        Answer::TickIfDue(ran) => tick(ran),
        Answer::ReadRoom(info) => Compared::Room(
            info.draw
                .map(|draw| (draw.commitment, draw.seed, draw.entrants)),
            serde_json::to_string(&info.config.schedule).unwrap(),
            serde_json::to_string(&RoomStats {
                oldest_wait_seconds: 0,
                ..info.stats
            })
            .unwrap(),
        ),
        Answer::ReadReport(report) => Compared::Report(serde_json::to_string(&report).unwrap()),
        Answer::ListReports(reports) => Compared::Report(serde_json::to_string(&reports).unwrap()),
        Answer::DrawEntries(entries) => Compared::Entries(
            entries
                .iter()
                .map(|(key, entry)| format!("{}:{entry}", key.to_hex()))
                .collect(),
        ),
        other => unreachable!("an answer to an operation `step` does not make: {other:?}"),
    }
}

/// What of a sale operation's answer the stores must agree on.
fn compared_sale(answer: SaleAnswer) -> Compared {
    match answer {
        SaleAnswer::MakeClaim(made) | SaleAnswer::ConfirmClaim(made) => claim(&made),
        SaleAnswer::ReleaseClaim(()) => Compared::Done,
        SaleAnswer::ReleaseHoldsOf(released) => Compared::Released(released),
        SaleAnswer::ReadSale(view) => Compared::Sale(view.stock_left),
        SaleAnswer::Orders(orders) => {
            Compared::Orders(orders.iter().map(|o| (o.sequence, o.quantity)).collect())
        }
        other => unreachable!("an answer to an operation `step` does not make: {other:?}"),
    }
}

/// One store, and what it told this sequence of the visitors' claims.
struct Under<'a> {
    store: &'a dyn Store,
    sale: &'a dyn SaleStore,
    latest_claim: HashMap<VisitorId, String>,
    /// The `exp` of each visitor's pass, as this store last told it.
    held_pass: HashMap<VisitorId, u64>,
    /// The epoch of the last health probe this store handed out.
    probed: u64,
    /// The entries of the events this store handed out last.
    claimed: Vec<String>,
}

impl Under<'_> {
    async fn run(&mut self, step: &Step) -> Compared {
        match step.clone() {
            Step::Room(mut op) => {
                if let Op::Arrive(arrive) = &mut op
                    && arrive.pass_exp_s == HELD_PASS
                {
                    arrive.pass_exp_s = self.held_pass.get(&arrive.visitor).copied().unwrap_or(0);
                }
                if let Op::RecordSample(sample) = &mut op
                    && sample.epoch == HELD_EPOCH
                {
                    sample.epoch = self.probed;
                }
                if let Op::SettleEvents(settle) = &mut op
                    && settle.entries == [LAST_CLAIMED]
                {
                    settle.entries = std::mem::take(&mut self.claimed);
                }
                let answer = self.store.apply(op).await;
                if let Ok(Answer::ClaimEvents(events)) = &answer {
                    self.claimed = events.iter().map(|e| e.entry.clone()).collect();
                }
                if let Ok(Answer::TickIfDue(Tick { ran: Some(ran), .. })) = &answer
                    && let Some(check) = &ran.probe
                {
                    self.probed = check.epoch;
                }
                if let Ok(Answer::Join(place) | Answer::Status(place) | Answer::Arrive(place)) =
                    &answer
                    && let PlaceState::Admitted { expires_at, .. } = place.state
                {
                    self.held_pass.insert(place.visitor, expires_at / 1000);
                }
                answer.map_or_else(refused, compared)
            }
            Step::Sale(mut op) => {
                if let SaleOp::ConfirmClaim(op::ConfirmClaim {
                    visitor, claim_id, ..
                })
                | SaleOp::ReleaseClaim(op::ReleaseClaim {
                    visitor, claim_id, ..
                }) = &mut op
                {
                    match self.latest_claim.get(visitor) {
                        Some(latest) => latest.clone_into(claim_id),
                        None => return Compared::Done,
                    }
                }
                let answer = self.sale.apply(op).await;
                if let Ok(SaleAnswer::MakeClaim(made)) = &answer {
                    let id = made.claim_id.clone();
                    self.latest_claim.insert(made.visitor, id);
                }
                answer.map_or_else(refused, compared_sale)
            }
            // The clock is moved for every store at once, before; a
            // schedule is made absolute before.
            Step::Wait(_) | Step::Schedule(_) => Compared::Done,
        }
    }
}

/// A store by name, as the admission and the sale see it.
type Named = (&'static str, Arc<dyn Store>, Arc<dyn SaleStore>);

/// The three stores on one clock, made once for the whole test and
/// dropped at its end: its servers stop with it, where a static's would
/// outlive the test binary (nothing drops a static).
struct Stores {
    clock: ManualClock,
    named: Vec<Named>,
    _redis: RedisServer,
    _cluster: RedisCluster,
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

impl Stores {
    fn start() -> Self {
        let redis = RedisServer::start();
        let cluster = RedisCluster::start();
        let clock = ManualClock::new(1_767_225_600_000);
        let named = RUNTIME.block_on(async {
            let shared = || Some(Arc::new(clock.clone()) as _);
            // Every store its own chance, seeded alike.
            let chance = || Arc::new(SeededChance::new(CHANCE_SEED));
            let memory = Arc::new(MemoryStore::with_chance(Arc::new(clock.clone()), chance()));
            let memory_sale: Arc<dyn SaleStore> = Arc::new(memory.sale());
            let redis_store = |url: String| async move {
                let store = RedisStore::connect(&url, shared()).await.unwrap();
                Arc::new(store.with_chance(chance()))
            };
            let one = redis_store(redis.url()).await;
            let many = redis_store(cluster.url()).await;
            vec![
                ("memory", memory as Arc<dyn Store>, memory_sale),
                (
                    "redis",
                    one.clone() as Arc<dyn Store>,
                    one as Arc<dyn SaleStore>,
                ),
                (
                    "cluster",
                    many.clone() as Arc<dyn Store>,
                    many as Arc<dyn SaleStore>,
                ),
            ]
        });
        Stores {
            clock,
            named,
            _redis: redis,
            _cluster: cluster,
        }
    }
}

/// How a sequence's room starts.
#[derive(Debug, Clone)]
struct Start {
    /// Opens this many ms from now (a scheduled room, with a draw).
    opens_in: Option<u64>,
    random: bool,
    /// Its sessions' idle time (`session_idle_s`), if it has sessions.
    session_idle_s: Option<u64>,
    /// It admits 10 a tick, following the origin (`autotune`).
    tuned: bool,
}

/// Runs `steps` on the room made again in every store; the first
/// disagreement.
fn disagreement(stores: &Stores, start: &Start, steps: &[Step]) -> Result<(), String> {
    RUNTIME.block_on(async {
        let mut config = RoomConfig::new("Differential", "/x");
        config.tick_ms = TICK_MS;
        config.admit_per_tick = 2;
        config.max_active = Some(3);
        config.pass_ttl_s = 60;
        config.abandon_after_s = 3_600;
        config.arrival_grace_s = Some(30);
        config.session_idle_s = start.session_idle_s;
        config.opens_at = start.opens_in.map(|ms| Moment(stores.clock.now_ms() + ms));
        if start.random {
            config.queue_method = QueueMethod::Random;
        }
        if start.tuned {
            // 10 a tick: a cut to 70% (7) and a raise by a tenth (1) each
            // show in every tick's figures.
            config.admit_per_tick = 10;
            config.autotune = Some(Autotune {
                health_url: "https://shop.example/health".into(),
                latency_target_ms: 1_000,
                error_rate_max: 0.05,
                min_per_tick: 1,
                max_per_tick: None,
                dry_run: false,
            });
        }
        let sale = SaleConfig {
            inventory: Inventory::Stock(6),
            per_user_limit: 3,
            hold_ttl_s: 30,
        };
        for (name, store, sales) in &stores.named {
            // The last sequence's room, if it is still open.
            let _ = store.close_room(&room()).await;
            store
                .create_room(room(), config.clone())
                .await
                .map_err(|e| format!("{name}: create_room: {e}"))?;
            sales
                .configure_sale(&room(), sale.clone())
                .await
                .map_err(|e| format!("{name}: configure_sale: {e:?}"))?;
        }
        let mut unders: Vec<(&str, Under)> = stores
            .named
            .iter()
            .map(|(name, store, sale)| {
                let under = Under {
                    store: store.as_ref(),
                    sale: sale.as_ref(),
                    latest_claim: HashMap::new(),
                    held_pass: HashMap::new(),
                    probed: 0,
                    claimed: Vec::new(),
                };
                (*name, under)
            })
            .collect();
        let mut all = steps.to_vec();
        // At the end: a due tick (which calls back whoever asked and is
        // near or admitted), every visitor's place, and the sale.
        all.push(Step::Wait(TICK_MS));
        all.push(Step::Room(op::TickIfDue { room: room() }.into()));
        all.extend(VISITORS.iter().map(|&visitor| {
            Step::Room(
                op::Status {
                    room: room(),
                    visitor,
                }
                .into(),
            )
        }));
        all.push(Step::Sale(op::ReadSale { room: room() }.into()));
        all.push(Step::Sale(op::Orders { room: room() }.into()));
        // And every event the outbox holds.
        all.push(Step::Room(
            op::ClaimEvents {
                room: room(),
                consumer: "end".into(),
                takeover_ms: 0,
                limit: VISITORS.len() * 2,
            }
            .into(),
        ));
        all.push(Step::Room(
            op::ReadReport {
                room: room(),
                created_at: None,
            }
            .into(),
        ));
        for (at, step) in all.iter().enumerate() {
            if let Step::Wait(ms) = step {
                stores.clock.advance_ms(*ms);
            }
            let absolute;
            let step = match step {
                Step::Schedule(entries) => {
                    let now = stores.clock.now_ms();
                    let entries: Vec<_> = entries
                        .iter()
                        .map(|(in_ms, set)| json!({"at": rfc3339_ms(now + in_ms), "set": set}))
                        .collect();
                    absolute = Step::Room(configure(json!({ "schedule": entries })));
                    &absolute
                }
                other => other,
            };
            let mut answers = Vec::new();
            for (name, under) in &mut unders {
                answers.push((*name, under.run(step).await));
            }
            let (reference, expected) = &answers[0];
            for (name, got) in &answers[1..] {
                if got != expected {
                    return Err(format!(
                        "step {at} {step:?}: {reference} answered {expected:?}, {name} {got:?}"
                    ));
                }
            }
        }
        Ok(())
    })
}

#[test]
fn every_store_answers_every_sequence_alike() {
    let config = Config {
        cases: 500,
        failure_persistence: None,
        ..Config::default()
    };
    // A fixed seed: the same sequences on every run (a failure repeats).
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let stores = Stores::start();
    // A third of the rooms open on a schedule, while the sequence runs; a
    // third start with the `random` method.
    let opens_in = prop_oneof![2 => Just(None), 1 => (1u64..6).prop_map(|s| Some(s * 5_000))];
    let random = prop_oneof![2 => Just(false), 1 => Just(true)];
    // And every other start with sessions, short enough to lapse.
    let idle = prop_oneof![Just(None), Just(Some(5)), Just(Some(20))];
    // And a third with autotune.
    let tuned = prop_oneof![2 => Just(false), 1 => Just(true)];
    let start =
        (opens_in, random, idle, tuned).prop_map(|(opens_in, random, session_idle_s, tuned)| {
            Start {
                opens_in,
                random,
                session_idle_s,
                tuned,
            }
        });
    let cases = (start, proptest::collection::vec(step(), 1..40));
    let result = runner.run(&cases, |(start, steps)| {
        disagreement(&stores, &start, &steps).map_err(TestCaseError::fail)
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
