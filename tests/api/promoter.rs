//! The promoter's cost follows the work, not the number of rooms. On
//! tokio's paused clock its schedule is exact, so these tests count the
//! tick calls it makes to a memory store on a driven clock. And a room the
//! store lost stops showing its line in the gauges.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use waitroom::live::history::RoomHistory;
use waitroom::live::hub::Hub;
use waitroom::live::promoter::{
    IDLE_HEARTBEAT, MAX_IDLE_ASKS_PER_S, Promoter, Wakeups, idle_period,
};
use waitroom::live::tasks::Tasks;
use waitroom::store::SaleStoreExt;
use waitroom::store::memory::MemoryStore;
use waitroom::store::{SaleStore, Store, StoreError, StoreExt};
use waitroom::words::clock::{Clock, ManualClock, Moment, rfc3339};
use waitroom::words::credentials::Credentials;
use waitroom::words::op::{self, Answer, Op};
use waitroom::words::{ConfigPatch, RoomConfig, RoomEvent, RoomId, StoreEvent, VisitorId};

const TICK_MS: u64 = 1_000;
const MS: Duration = Duration::from_millis(1);

struct Node {
    store: Arc<dyn Store>,
    sale: Arc<dyn SaleStore>,
    clock: ManualClock,
    wakeups: Arc<Wakeups>,
    promoter: Promoter,
    tasks: Tasks,
}

impl Node {
    fn new() -> Self {
        Self::on(|store| store)
    }

    /// A node whose promoter and hub use the memory store as `wrap` makes it.
    fn on(wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>) -> Self {
        let clock = ManualClock::new(1_700_000_000_000);
        let store = wrap(Arc::new(MemoryStore::new(Arc::new(clock.clone()))));
        let hub = Arc::new(Hub::new(
            store.clone(),
            Arc::new(Credentials::from_secret("s")),
        ));
        let wakeups = Arc::new(Wakeups::default());
        let sale: Arc<dyn SaleStore> = Arc::new(MemoryStore::new(Arc::new(clock.clone())).sale());
        let history = Arc::new(RoomHistory::new(Arc::new(clock.clone())));
        let promoter = Promoter::new(store.clone(), sale.clone(), hub, wakeups.clone(), history);
        Self {
            store,
            sale,
            clock,
            wakeups,
            promoter,
            tasks: Tasks::new(),
        }
    }

    async fn room(&self, id: &str) -> RoomId {
        self.room_with(id, |_| {}).await
    }

    /// A room admitting one per `TICK_MS`, with `change` made to its config.
    async fn room_with(&self, id: &str, change: impl FnOnce(&mut RoomConfig)) -> RoomId {
        let id = RoomId::parse(id).unwrap();
        let mut config = RoomConfig::new("Room", "/buy");
        config.admit_per_tick = 1;
        config.tick_ms = TICK_MS;
        change(&mut config);
        self.store.create_room(id.clone(), config).await.unwrap();
        id
    }

    /// An operator's change, as `PATCH` makes it.
    async fn configure(&self, room: &RoomId, patch: serde_json::Value) {
        let patch: ConfigPatch = serde_json::from_value(patch).unwrap();
        self.store.configure(room, patch).await.unwrap();
    }

    async fn admitted(&self, room: &RoomId) -> u64 {
        self.store.room(room).await.unwrap().stats.admitted_total
    }

    fn start(&self) {
        self.tasks
            .spawn_service("promoter", self.promoter.clone().run(self.tasks.clone()));
    }

    async fn join(&self, room: &RoomId) {
        self.store.join(room, VisitorId::random()).await.unwrap();
        self.wakeups.note(room);
    }

    /// Moves the store's clock and then tokio's by `ms`; the promoter does
    /// everything that falls due meanwhile before this returns (tokio only
    /// moves its paused clock when every task is idle).
    async fn pass(&self, ms: u64) {
        self.clock.advance_ms(ms);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn empty_rooms_are_asked_once_per_heartbeat_not_polled() {
    let node = Node::new();
    for n in 0..200 {
        node.room(&format!("empty-{n}")).await;
    }
    node.start();
    tokio::time::sleep(MS).await;
    assert_eq!(node.promoter.ticks_asked(), 200, "every room once at start");

    let period = idle_period(200);
    assert_eq!(period, IDLE_HEARTBEAT, "few rooms: the plain heartbeat");
    tokio::time::sleep(period / 2 - 2 * MS).await;
    assert_eq!(
        node.promoter.ticks_asked(),
        200,
        "no empty room is asked again within half a heartbeat (a 50 ms poll asked 240,000 times)"
    );
    tokio::time::sleep(period / 2 + 2 * MS).await;
    assert_eq!(
        node.promoter.ticks_asked(),
        400,
        "each empty room once more by the heartbeat, none twice"
    );
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_empty_rooms_cost_no_more_asks_a_second_than_the_cap() {
    let node = Node::new();
    for n in 0..10_000 {
        node.room(&format!("empty-{n}")).await;
    }
    node.start();
    tokio::time::sleep(MS).await;
    assert_eq!(node.promoter.ticks_asked(), 10_000);
    let period = idle_period(10_000);
    assert!(
        period > IDLE_HEARTBEAT,
        "the heartbeat stretches: {period:?}"
    );
    tokio::time::sleep(period).await;
    let asked = node.promoter.ticks_asked() - 10_000;
    assert_eq!(asked, 10_000, "each once in a period");
    let per_s = asked as f64 / period.as_secs_f64();
    assert!(
        per_s <= f64::from(MAX_IDLE_ASKS_PER_S),
        "{per_s:.1} asks a second for 10,000 empty rooms"
    );
}

#[tokio::test(start_paused = true)]
async fn a_join_wakes_an_empty_room_which_is_then_asked_once_per_tick() {
    let node = Node::new();
    let room = node.room("drop").await;
    node.room("quiet").await; // never used: never asked again in this test
    node.start();
    tokio::time::sleep(MS).await;
    assert_eq!(node.promoter.ticks_asked(), 2);

    node.pass(10_000).await;
    assert_eq!(
        node.promoter.ticks_asked(),
        2,
        "empty rooms wait for the heartbeat"
    );
    for _ in 0..6 {
        node.join(&room).await; // one passes straight through, five wait
    }
    tokio::time::sleep(MS).await;
    assert_eq!(
        node.promoter.ticks_asked(),
        3,
        "the first join woke the room; the others found it ticking"
    );

    let before = node.promoter.ticks_asked();
    for _ in 0..5 {
        node.pass(TICK_MS).await;
    }
    let asked = node.promoter.ticks_asked() - before;
    assert!(
        (5..=10).contains(&asked),
        "about one call per tick while someone waits, not a poll: {asked} calls for 5 ticks"
    );
    let drop = node.store.room(&room).await.unwrap();
    assert_eq!(
        drop.stats.waiting, 0,
        "the five waiting were admitted, one a tick"
    );
    node.tasks.shut_down(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_shorter_tick_is_in_force_by_the_next_tick_at_the_new_setting() {
    let node = Node::new();
    let room = node
        .room_with("slow", |config| {
            config.tick_ms = 300_000;
            config.abandon_after_s = 86_400; // nobody here polls
        })
        .await;
    node.start();
    for _ in 0..4 {
        node.join(&room).await; // one passes straight through, three wait
    }
    node.pass(1_000).await;
    assert_eq!(node.admitted(&room).await, 1);

    node.configure(&room, serde_json::json!({"tick_ms": 200}))
        .await;
    node.pass(200).await;
    assert_eq!(
        node.admitted(&room).await,
        2,
        "admitted 200 ms after the change, not after the 300 s the promoter was sleeping out"
    );
    node.pass(200).await;
    assert_eq!(
        node.admitted(&room).await,
        3,
        "and every 200 ms from then on"
    );

    node.configure(&room, serde_json::json!({"tick_ms": 300_000}))
        .await;
    node.pass(10_000).await;
    assert_eq!(
        node.admitted(&room).await,
        3,
        "a longer tick: nobody until its new interval has passed"
    );
    node.pass(300_000).await;
    assert_eq!(node.admitted(&room).await, 4);
    node.tasks.shut_down(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn an_opening_moved_closer_draws_at_the_new_time() {
    let node = Node::new();
    let opens_at = node.clock.now_ms() + 3_600_000;
    let room = node
        .room_with("drop", |config| {
            config.tick_ms = 300_000;
            config.opens_at = Some(Moment(opens_at));
        })
        .await;
    let mut events = node.store.subscribe();
    node.start();
    for _ in 0..3 {
        node.join(&room).await;
    }
    node.pass(1_000).await;
    let soon = node.clock.now_ms() + 2_000;
    node.configure(&room, serde_json::json!({"opens_at": rfc3339(soon)}))
        .await;
    node.pass(2_000).await;
    let drawn = std::iter::from_fn(|| events.try_recv().ok())
        .any(|event| matches!(event, StoreEvent::Room(RoomEvent::Drawn { .. })));
    assert!(
        drawn,
        "the pre-queue is drawn at the new opening, not when the old tick interval ends"
    );

    // Moved further away: nothing happens at the time it had before.
    let later = node
        .room_with("later", |config| {
            config.opens_at = Some(Moment(node.clock.now_ms() + 2_000));
        })
        .await;
    node.join(&later).await;
    let far = node.clock.now_ms() + 3_600_000;
    node.configure(&later, serde_json::json!({"opens_at": rfc3339(far)}))
        .await;
    node.pass(5_000).await;
    assert_eq!(node.store.room(&later).await.unwrap().stats.pre_queue, 1);
    assert!(
        !std::iter::from_fn(|| events.try_recv().ok())
            .any(|event| matches!(event, StoreEvent::Room(RoomEvent::Drawn { room, .. }) if room == later)),
        "not drawn at the opening it had before"
    );
    node.tasks.shut_down(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn every_change_is_in_force_by_the_next_tick_up_and_down() {
    let node = Node::new();
    let room = node.room("live").await;
    node.start();
    for _ in 0..30 {
        node.join(&room).await; // one passes straight through, the rest wait
    }
    tokio::time::sleep(MS).await;
    let mut admitted = node.admitted(&room).await;
    // (the change, joins made after it, admitted by the next tick, what)
    let steps: [(serde_json::Value, usize, u64, &str); 9] = [
        (
            serde_json::json!({"admit_per_tick": 3}),
            0,
            3,
            "admit_per_tick up",
        ),
        (
            serde_json::json!({"admit_per_tick": 2}),
            0,
            2,
            "admit_per_tick down",
        ),
        (
            serde_json::json!({"max_active": 7}),
            0,
            1,
            "max_active down to one above those active",
        ),
        (serde_json::json!({"max_active": 20}), 0, 2, "max_active up"),
        (serde_json::json!({"paused": true}), 0, 0, "paused"),
        (serde_json::json!({"paused": false}), 0, 2, "unpaused"),
        (
            serde_json::json!({"max_active": null, "queue_method": "passthrough"}),
            0,
            19,
            "passthrough: the whole line",
        ),
        (
            serde_json::json!({"queue_method": "fifo"}),
            5,
            2,
            "fifo again: the bucket's rate",
        ),
        (
            serde_json::json!({"queue_method": "reject"}),
            0,
            2,
            "reject: those waiting keep their places",
        ),
    ];
    for (patch, joins, expected, what) in steps {
        node.configure(&room, patch).await;
        for _ in 0..joins {
            node.join(&room).await;
        }
        node.pass(TICK_MS).await;
        let now = node.admitted(&room).await;
        assert_eq!(now - admitted, expected, "{what}: the next tick follows it");
        admitted = now;
    }
    node.tasks.shut_down(Duration::from_secs(1)).await;
}

/// A mass expiry of holds with no sale traffic comes back a slice every
/// `SWEEP_AGAIN_MS`, not a slice per tick: the promoter reads the stock
/// again soon while a read gives back a whole slice.
#[tokio::test(start_paused = true)]
async fn expired_holds_come_back_in_slices_soon_after_one_another_not_one_a_tick() {
    use waitroom::words::constants::SWEEP_SLICE;
    use waitroom::words::sale::{SaleRequest, Want};
    let node = Node::new();
    let room = node.room("shop").await;
    let count = 3 * SWEEP_SLICE + 10;
    let request: SaleRequest =
        serde_json::from_value(serde_json::json!({"stock": count, "hold_ttl_s": 10})).unwrap();
    node.sale
        .configure_sale(&room, request.into_config().unwrap())
        .await
        .unwrap();
    for _ in 0..count {
        let claim = node
            .sale
            .claim(&room, VisitorId::random(), &Want::Quantity(1), None);
        claim.await.unwrap();
    }
    // Twenty waiting keep the room's ticks running, one a second.
    for _ in 0..20 {
        node.join(&room).await;
    }
    node.start();
    node.pass(9_999).await;
    // The holds run out; within the next 1.2 s at most two ticks run, and
    // this read gives back at most one slice more: fewer than all of them
    // unless the promoter read again soon after a full slice.
    node.pass(1_201).await;
    let stock = node.sale.stock(&room).await.unwrap();
    assert_eq!((stock.left, stock.held), (count, 0), "all given back");
    node.tasks.shut_down(Duration::from_secs(1)).await;
}

/// The memory store, until `lost` is set: then it knows no room any more,
/// as a Redis restarted without persistence.
struct Forgetful {
    store: Arc<dyn Store>,
    lost: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl Store for Forgetful {
    async fn apply(&self, op: Op) -> Result<Answer, StoreError> {
        if !self.lost.load(Ordering::SeqCst) {
            return self.store.apply(op).await;
        }
        match op {
            Op::RoomIds(_) => Ok(Answer::RoomIds(Vec::new())),
            Op::TickIfDue(op::TickIfDue { room }) => Err(StoreError::RoomNotFound(room)),
            other => self.store.apply(other).await,
        }
    }
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<StoreEvent> {
        self.store.subscribe()
    }
}

/// The figure a gauge of `room` shows in the process's metrics.
fn gauge(name: &str, room: &RoomId) -> Option<f64> {
    let text = waitroom::http::ops::metrics_handle().render();
    let series = format!("{name}{{room=\"{room}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series)?.parse().ok())
}

/// A room the store lost (Redis restarted without persistence) no longer
/// shows the figures the store last had: its gauges read as a closed
/// room's, not the line it had for good.
#[tokio::test(start_paused = true)]
async fn a_room_the_store_lost_shows_no_line_in_its_gauges() {
    // The process's recorder, before anything is recorded.
    waitroom::http::ops::metrics_handle();
    let lost = Arc::new(AtomicBool::new(false));
    let node = Node::on(|store| {
        Arc::new(Forgetful {
            store,
            lost: lost.clone(),
        })
    });
    let room = node
        .room_with("forgotten", |config| config.paused = true)
        .await;
    for _ in 0..3 {
        node.join(&room).await;
    }
    node.start();
    node.pass(TICK_MS).await;
    assert_eq!(gauge("waitroom_waiting", &room), Some(3.0));
    lost.store(true, Ordering::SeqCst);
    node.pass(2 * TICK_MS).await;
    assert_eq!(gauge("waitroom_waiting", &room), Some(0.0));
    node.tasks.shut_down(Duration::from_secs(1)).await;
}
