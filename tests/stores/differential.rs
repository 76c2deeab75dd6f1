//! The stores side by side: seeded random sequences of operations (joins,
//! leaves, ticks, config changes up and down, the queue method switched
//! between `fifo` and `random`, clock steps, arrivals, revocations,
//! presence, scheduled rooms' pre-queues and openings with their draws, the
//! sale's claims, confirms, releases and holds running out, and the room's
//! close) run against the memory store, one Redis and a Redis Cluster on
//! one driven clock and one seeded chance each, and every answer must
//! agree, as must every visitor's place and the room's figures at the end.
//! The memory store is the rules' model (`words::rules`) behind a lock; the
//! Lua scripts are the same rules again, and this test is what holds the
//! two together. Since every store draws its random choices from a chance
//! seeded alike, `random` admits the same visitors everywhere and a draw
//! has the same seed, entries and order.
//!
//! `proptest` makes the sequences (from a fixed seed, so a run repeats) and,
//! when one disagrees, shrinks it to the shortest sequence that still does,
//! which is what the failure prints.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;
use waitroom::store::SaleStoreExt;
use waitroom::store::memory::MemoryStore;
use waitroom::store::redis::RedisStore;
use waitroom::store::{RoomFigures, SaleStore, Store, StoreExt, Tick};
use waitroom::words::chance::SeededChance;
use waitroom::words::clock::{Clock, ManualClock, Moment};
use waitroom::words::sale::{Claim, Inventory, SaleConfig, Want};
use waitroom::words::{ConfigPatch, Place, PlaceState, QueueMethod, RoomConfig, RoomId, VisitorId};
use waitroom_testkit::redis::{RedisCluster, RedisServer};

/// Visitors a sequence draws from: few, so that they meet again.
const VISITORS: usize = 6;
const TICK_MS: u64 = 5_000;
/// What every store's random choices come from.
const CHANCE_SEED: u64 = 25;

#[derive(Debug, Clone)]
enum Op {
    Join(usize),
    Leave(usize),
    Status(usize),
    /// The visitor's pass was seen (`/api/verify`): not a no-show.
    Arrive(usize),
    /// The operator takes the visitor's pass back.
    Revoke(usize),
    /// These visitors hold a socket somewhere.
    Touch(Vec<usize>),
    Tick,
    /// The clock moves on, in ms.
    Wait(u64),
    Configure(Patch),
    /// The visitor claims this many units.
    Claim(usize, u64),
    /// The visitor confirms, or releases, their latest claim.
    Confirm(usize),
    Release(usize),
    /// The visitor's holds go back to stock (their pass was taken back).
    ReleaseHoldsOf(usize),
    /// What is left, and the orders.
    Sale,
    /// The operator closes the room: what follows is refused alike.
    Close,
    /// The draw as anyone sees it, and its entries once drawn.
    Draw,
    DrawEntries,
}

#[derive(Debug, Clone)]
enum Patch {
    AdmitPerTick(u32),
    MaxActive(Option<u64>),
    Paused(bool),
    TickMs(u64),
    PassTtl(u64),
    AbandonAfter(u64),
    QueueMethod(&'static str),
}

impl Patch {
    fn json(&self) -> ConfigPatch {
        let value = match self {
            Patch::AdmitPerTick(n) => json!({ "admit_per_tick": n }),
            Patch::MaxActive(cap) => json!({ "max_active": cap }),
            Patch::Paused(paused) => json!({ "paused": paused }),
            Patch::TickMs(ms) => json!({ "tick_ms": ms }),
            Patch::PassTtl(s) => json!({ "pass_ttl_s": s }),
            Patch::AbandonAfter(s) => json!({ "abandon_after_s": s }),
            Patch::QueueMethod(method) => json!({ "queue_method": method }),
        };
        serde_json::from_value(value).unwrap()
    }
}

fn op() -> impl Strategy<Value = Op> {
    let visitor = 0..VISITORS;
    prop_oneof![
        6 => visitor.clone().prop_map(Op::Join),
        2 => visitor.clone().prop_map(Op::Leave),
        2 => visitor.clone().prop_map(Op::Status),
        2 => visitor.clone().prop_map(Op::Arrive),
        1 => visitor.clone().prop_map(Op::Revoke),
        2 => proptest::collection::vec(visitor.clone(), 0..VISITORS).prop_map(Op::Touch),
        5 => Just(Op::Tick),
        4 => prop_oneof![Just(1_000u64), Just(2_500), Just(5_000), Just(20_000)].prop_map(Op::Wait),
        2 => prop_oneof![
            (1u32..4).prop_map(Patch::AdmitPerTick),
            proptest::option::of(0u64..4).prop_map(Patch::MaxActive),
            any::<bool>().prop_map(Patch::Paused),
            prop_oneof![Just(1_000u64), Just(5_000), Just(20_000)].prop_map(Patch::TickMs),
            prop_oneof![Just(10u64), Just(60), Just(3_600)].prop_map(Patch::PassTtl),
            prop_oneof![Just(15u64), Just(60), Just(3_600)].prop_map(Patch::AbandonAfter),
            prop_oneof![Just("fifo"), Just("random")].prop_map(Patch::QueueMethod),
        ]
        .prop_map(Op::Configure),
        3 => (visitor.clone(), 1u64..4).prop_map(|(v, n)| Op::Claim(v, n)),
        2 => visitor.clone().prop_map(Op::Confirm),
        1 => visitor.clone().prop_map(Op::Release),
        1 => visitor.prop_map(Op::ReleaseHoldsOf),
        1 => Just(Op::Sale),
        1 => Just(Op::Close),
        1 => Just(Op::Draw),
        1 => Just(Op::DrawEntries),
    ]
}

/// What an answer says that every store must say alike. Positions, times
/// and figures; not the stores' own numbering of places (`order`).
#[derive(Debug, PartialEq)]
enum Answer {
    Place(Shown),
    Tick {
        admitted: Option<(u64, u64, u64, u64, u64)>,
        busy: bool,
        next_due_in_ms: u64,
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
    /// Units left, and each order's sequence and units.
    Sale(u64, Vec<(u64, u64)>),
    Released(u64),
    /// The error's kind.
    Refused(String),
    /// Commitment, seed (once revealed), entrants.
    Draw(String, Option<String>, u64),
    /// Each entrant's key and entry id, in drawn order.
    Entries(Vec<String>),
}

#[derive(Debug, PartialEq)]
struct Shown {
    state: State,
    waiting: u64,
    version: u64,
    paused: bool,
    /// Admissions a second over the last minute, in thousandths.
    rate_milli: Option<i64>,
}

#[derive(Debug, PartialEq)]
enum State {
    PreQueue { entry: String },
    Waiting { position: u64 },
    Admitted { admitted_at: u64, expires_at: u64 },
    Expired,
    Away,
    Left,
    Closed,
}

fn shown(place: Place) -> Shown {
    Shown {
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
            PlaceState::Left => State::Left,
            PlaceState::Closed => State::Closed,
        },
        waiting: place.line.waiting,
        version: place.line.version,
        paused: place.line.paused,
        rate_milli: place.line.rate_per_s.map(|r| (r * 1000.0).round() as i64),
    }
}

fn refused(error: impl std::fmt::Debug) -> Answer {
    let kind = format!("{error:?}");
    let kind = kind.split(['(', ' ', '{']).next().unwrap_or_default();
    Answer::Refused(kind.to_owned())
}

fn answer<T, E: std::fmt::Debug>(result: Result<T, E>, show: impl FnOnce(T) -> Answer) -> Answer {
    result.map_or_else(refused, show)
}

fn claim_answer(claim: &Claim) -> Answer {
    Answer::Claim(
        format!("{:?}", claim.state),
        claim.quantity,
        claim.sequence,
        claim.hold_expires_at,
        claim.confirmed_at,
    )
}

fn tick_answer(tick: Tick) -> Answer {
    Answer::Tick {
        admitted: tick
            .ran
            .map(|r| (r.admitted, r.abandoned, r.no_shows, r.waiting, r.active)),
        busy: tick.busy,
        next_due_in_ms: tick.next_due_in_ms,
        figures: RoomFigures {
            tail_eta_s: None,
            ..tick.figures
        },
    }
}

/// One store, and what it told this sequence of the visitors' claims (each
/// store names its claims itself).
struct Under<'a> {
    store: &'a dyn Store,
    sale: &'a dyn SaleStore,
    latest_claim: HashMap<usize, String>,
}

async fn run(under: &mut Under<'_>, room: &RoomId, visitors: &[VisitorId], op: &Op) -> Answer {
    let (store, sale) = (under.store, under.sale);
    let place = |p: Place| Answer::Place(shown(p));
    match op {
        Op::Join(v) => answer(store.join(room, visitors[*v]).await, place),
        Op::Leave(v) => answer(store.leave(room, visitors[*v]).await, |()| Answer::Done),
        Op::Status(v) => answer(store.status(room, visitors[*v]).await, place),
        Op::Arrive(v) => answer(store.arrive(room, visitors[*v]).await, place),
        Op::Revoke(v) => answer(
            store.revoke_pass(room, visitors[*v], None).await,
            Answer::Revoked,
        ),
        Op::Touch(some) => {
            let some: Vec<VisitorId> = some.iter().map(|v| visitors[*v]).collect();
            answer(store.touch(room, &some).await, |()| Answer::Done)
        }
        Op::Tick => answer(store.tick(room).await, tick_answer),
        // The clock is moved for every store at once, before.
        Op::Wait(_) => Answer::Done,
        Op::Configure(patch) => answer(store.configure(room, patch.json()).await, |_| Answer::Done),
        Op::Claim(v, units) => {
            let want = Want::Quantity(*units);
            let claimed = sale.claim(room, visitors[*v], &want, None).await;
            if let Ok(claim) = &claimed {
                under.latest_claim.insert(*v, claim.claim_id.clone());
            }
            answer(claimed, |claim| claim_answer(&claim))
        }
        Op::Confirm(v) => match under.latest_claim.get(v) {
            Some(id) => answer(sale.confirm(room, visitors[*v], id).await, |c| {
                claim_answer(&c)
            }),
            None => Answer::Done,
        },
        Op::Release(v) => match under.latest_claim.get(v) {
            Some(id) => answer(sale.release(room, visitors[*v], id).await, |()| {
                Answer::Done
            }),
            None => Answer::Done,
        },
        Op::ReleaseHoldsOf(v) => answer(
            sale.release_holds_of(room, visitors[*v]).await,
            Answer::Released,
        ),
        Op::Close => answer(store.close_room(room).await, |()| Answer::Done),
        Op::Draw => answer(store.draw(room).await, |draw| {
            Answer::Draw(draw.commitment, draw.seed, draw.entrants)
        }),
        Op::DrawEntries => answer(store.draw_entries(room, None, 100).await, |entries| {
            let entries = entries
                .iter()
                .map(|(key, entry)| format!("{}:{entry}", key.to_hex()))
                .collect();
            Answer::Entries(entries)
        }),
        Op::Sale => {
            let view = match sale.sale(room).await {
                Ok(view) => view,
                Err(error) => return refused(error),
            };
            answer(sale.orders(room).await, |orders| {
                let orders = orders.iter().map(|o| (o.sequence, o.quantity)).collect();
                Answer::Sale(view.stock_left, orders)
            })
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
}

/// Runs `ops` on a fresh room in every store; the first disagreement.
fn disagreement(stores: &Stores, case: u64, start: &Start, ops: &[Op]) -> Result<(), String> {
    let room = RoomId::parse(&format!("diff-{case}")).unwrap();
    let visitors: Vec<VisitorId> = (0..VISITORS).map(|_| VisitorId::random()).collect();
    RUNTIME.block_on(async {
        let mut config = RoomConfig::new("Differential", "/x");
        config.tick_ms = TICK_MS;
        config.admit_per_tick = 2;
        config.max_active = Some(3);
        config.pass_ttl_s = 60;
        config.abandon_after_s = 3_600;
        config.arrival_grace_s = Some(30);
        config.opens_at = start.opens_in.map(|ms| Moment(stores.clock.now_ms() + ms));
        if start.random {
            config.queue_method = QueueMethod::Random;
        }
        let sale = SaleConfig {
            inventory: Inventory::Stock(6),
            per_user_limit: 3,
            hold_ttl_s: 30,
        };
        for (name, store, sales) in &stores.named {
            store
                .create_room(room.clone(), config.clone())
                .await
                .map_err(|e| format!("{name}: create_room: {e}"))?;
            sales
                .configure_sale(&room, sale.clone())
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
                };
                (*name, under)
            })
            .collect();
        let mut all = ops.to_vec();
        // At the end: every visitor's place.
        all.extend((0..VISITORS).map(Op::Status));
        all.push(Op::Sale);
        for (step, op) in all.iter().enumerate() {
            if let Op::Wait(ms) = op {
                stores.clock.advance_ms(*ms);
            }
            let mut answers = Vec::new();
            for (name, under) in &mut unders {
                answers.push((*name, run(under, &room, &visitors, op).await));
            }
            let (reference, expected) = &answers[0];
            for (name, got) in &answers[1..] {
                if got != expected {
                    return Err(format!(
                        "step {step} {op:?}: {reference} answered {expected:?}, {name} {got:?}"
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
    let case = std::sync::atomic::AtomicU64::new(0);
    // A third of the rooms open on a schedule, while the sequence runs; a
    // third start with the `random` method.
    let opens_in = prop_oneof![2 => Just(None), 1 => (1u64..6).prop_map(|s| Some(s * 5_000))];
    let random = prop_oneof![2 => Just(false), 1 => Just(true)];
    let start = (opens_in, random).prop_map(|(opens_in, random)| Start { opens_in, random });
    let cases = (start, proptest::collection::vec(op(), 1..40));
    let result = runner.run(&cases, |(start, ops)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        disagreement(&stores, case, &start, &ops).map_err(TestCaseError::fail)
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
