//! The promoter's cost follows the work, not the number of rooms. On
//! tokio's paused clock its schedule is exact, so these tests count the
//! tick calls it makes to a memory store on a driven clock.

use std::sync::Arc;
use std::time::Duration;

use waitroom::live::hub::Hub;
use waitroom::live::promoter::{
    IDLE_HEARTBEAT, MAX_IDLE_ASKS_PER_S, Promoter, Wakeups, idle_period,
};
use waitroom::live::tasks::Tasks;
use waitroom::store::Store;
use waitroom::store::memory::MemoryStore;
use waitroom::words::clock::ManualClock;
use waitroom::words::credentials::Credentials;
use waitroom::words::{RoomConfig, RoomId, VisitorId};

const TICK_MS: u64 = 1_000;
const MS: Duration = Duration::from_millis(1);

struct Node {
    store: Arc<dyn Store>,
    clock: ManualClock,
    wakeups: Arc<Wakeups>,
    promoter: Promoter,
    tasks: Tasks,
}

impl Node {
    fn new() -> Self {
        let clock = ManualClock::new(1_700_000_000_000);
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(Arc::new(clock.clone())));
        let hub = Arc::new(Hub::new(
            store.clone(),
            Arc::new(Credentials::from_secret("s")),
        ));
        let wakeups = Arc::new(Wakeups::default());
        let sale = Arc::new(MemoryStore::new(Arc::new(clock.clone())).sale());
        let promoter = Promoter::new(store.clone(), sale, hub, wakeups.clone());
        Self {
            store,
            clock,
            wakeups,
            promoter,
            tasks: Tasks::new(),
        }
    }

    async fn room(&self, id: &str) -> RoomId {
        let id = RoomId::parse(id).unwrap();
        let mut config = RoomConfig::new("Room", "/buy");
        config.admit_per_tick = 1;
        config.tick_ms = TICK_MS;
        self.store.create_room(id.clone(), config).await.unwrap();
        id
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
