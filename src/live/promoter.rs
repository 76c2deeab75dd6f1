//! The promoter: ticks the rooms in use and keeps this node's visitors
//! present. It runs on every node; the store decides whether a tick is due,
//! so nodes ticking together admit once and no node is special.
//!
//! Its cost follows the work, not the number of rooms: a room that someone
//! waits in or holds a pass for is asked again when the store says its next
//! tick is due (one call per tick); an empty room only once per
//! [`IDLE_HEARTBEAT`]. A join, a status read, a socket or an operator's
//! change on this node wakes its room at once ([`Wakeups`]), so an empty
//! room that fills is ticked on time without anyone polling it. A config
//! change made on any node reaches every node as the store's `Configured`
//! event, and each asks that room again at once, ticking or not: a shorter
//! `tick_ms` or an opening moved closer is in force by the next tick at the
//! new setting, not after the interval the promoter was sleeping out.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;
use tokio_util::time::DelayQueue;
use tokio_util::time::delay_queue::Key;

use super::callbacks::Callbacks;
use super::history::RoomHistory;
use super::hub::Hub;
use super::outbound::{Outbound, OutboundPolicy, ProbeOutcome};
use super::tasks::Tasks;
use crate::store::SaleStoreExt;
use crate::store::{SaleStore, Store, StoreError, StoreExt, Tick, TickReport};
use crate::words::autotune::{Failure, HealthCheck};
use crate::words::constants::SWEEP_AGAIN_MS;
use crate::words::op::RecordSample;
use crate::words::sale::{SaleError, Stock};
use crate::words::{RoomEvent, RoomId, StoreEvent};

/// The histogram of waits from joining (or the opening) to admission, in
/// the buckets of the rooms' reports (`words::report::WAIT_BOUNDS_S`).
pub const WAIT_SECONDS: &str = "waitroom_wait_seconds";

/// How long an empty room goes unasked, at the least. Nothing depends on it
/// but a room whose visitors reached the store through no node's promoter
/// (none should): it is a safety net, so it is slow.
pub const IDLE_HEARTBEAT: Duration = Duration::from_secs(120);
/// The store calls a second a node spends on empty rooms, on average: with
/// more rooms than this many times the heartbeat, the heartbeat stretches,
/// so ten thousand empty rooms cost what a thousand do. (The first wave after
/// a start, when every room was asked at once, comes at up to 1.5 times it.)
pub const MAX_IDLE_ASKS_PER_S: u32 = 10;
/// How often the set of rooms is read again, to find rooms created or
/// closed on other nodes.
const ROOMS_REFRESH: Duration = Duration::from_secs(30);
/// How long a room whose tick failed waits before it is asked again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);
/// How often this node tells the store its socket holders are still here;
/// well inside the smallest allowed `abandon_after_s` (15 s).
const PRESENCE_EVERY: Duration = Duration::from_secs(5);
/// Visitors marked present per store call. One call is one critical section
/// (one Lua script on Redis) that every other operation on the room (every
/// join) waits behind: a node holding 19,000 sockets of a room once marked
/// them all in one 10–25 ms call every 5 s; 500 keep each call near 1 ms.
pub const PRESENCE_BATCH: usize = 500;

/// Rooms something on this node just used: the HTTP routes and the hub note
/// them here and the promoter ticks them at once if it had them down as idle.
#[derive(Default)]
pub struct Wakeups {
    /// Rooms being ticked at their own cadence: noting one again is free,
    /// which keeps the join path to one read lock.
    ticking: RwLock<HashSet<RoomId>>,
    pending: Mutex<HashSet<RoomId>>,
    notify: Notify,
}

impl Wakeups {
    /// Something happened in `room` on this node (a join, a status read, a
    /// socket): make sure it is being ticked.
    pub fn note(&self, room: &RoomId) {
        if self.ticking.read().contains(room) {
            return;
        }
        if self.pending.lock().insert(room.clone()) {
            self.notify.notify_one();
        }
    }

    fn take(&self) -> Vec<RoomId> {
        self.pending.lock().drain().collect()
    }

    /// The rooms being ticked at their own cadence.
    fn ticking_rooms(&self) -> Vec<RoomId> {
        self.ticking.read().iter().cloned().collect()
    }

    fn set_ticking(&self, room: &RoomId, ticking: bool) {
        if ticking {
            self.ticking.write().insert(room.clone());
        } else {
            self.ticking.write().remove(room);
        }
    }
}

/// When each known room is next asked for its tick.
#[derive(Default)]
struct Schedule {
    queue: DelayQueue<RoomId>,
    keys: HashMap<RoomId, (Key, Instant)>,
    /// When each busy room's next tick is due, as the store last said; kept
    /// through failed asks, so that a tick that runs after an outage shows
    /// how late it is (`waitroom_tick_lag_seconds`).
    due: HashMap<RoomId, Instant>,
}

impl Schedule {
    /// Asks `room` no later than `after` from now (an earlier time stays).
    fn no_later_than(&mut self, room: RoomId, after: Duration) {
        let at = Instant::now() + after;
        match self.keys.get_mut(&room) {
            Some((key, due)) if at < *due => {
                self.queue.reset_at(key, at);
                *due = at;
            }
            Some(_) => {}
            None => {
                let key = self.queue.insert_at(room.clone(), at);
                self.keys.insert(room, (key, at));
            }
        }
    }

    fn forget(&mut self, room: &RoomId) {
        if let Some((key, _)) = self.keys.remove(room) {
            self.queue.remove(&key);
        }
        self.due.remove(room);
    }

    /// What an answer to asking `room` at `asked` says of its ticks: how
    /// late a due tick that ran was (recorded), and when the next is due.
    fn answered(&mut self, room: &RoomId, asked: Instant, tick: &Tick) {
        let due = self.due.remove(room);
        if let (Some(due), Some(_)) = (due, &tick.ran) {
            metrics::histogram!("waitroom_tick_lag_seconds")
                .record(asked.saturating_duration_since(due).as_secs_f64());
        }
        // A tick that did not run here either was not due yet or ran on
        // another node: either way the store's word on the next is news.
        if tick.busy {
            let next = asked + Duration::from_millis(tick.next_due_in_ms);
            self.due.insert(room.clone(), next);
        }
    }

    fn knows(&self, room: &RoomId) -> bool {
        self.keys.contains_key(room)
    }

    fn rooms(&self) -> Vec<RoomId> {
        self.keys.keys().cloned().collect()
    }

    /// The next room due, taken off the schedule until it is put back.
    async fn next_due(&mut self) -> Option<RoomId> {
        let expired = std::future::poll_fn(|cx| self.queue.poll_expired(cx)).await?;
        let room = expired.into_inner();
        self.keys.remove(&room);
        Some(room)
    }
}

/// The store's next event; never, once the store has stopped sending them.
async fn next_event(
    events: &mut Option<broadcast::Receiver<StoreEvent>>,
) -> Result<StoreEvent, RecvError> {
    let Some(receiver) = events else {
        return std::future::pending().await;
    };
    let event = receiver.recv().await;
    if matches!(event, Err(RecvError::Closed)) {
        *events = None;
    }
    event
}

/// When to ask an empty room again, `rooms` being how many this node knows:
/// a moment in the heartbeat's second half, different for every room, so
/// empty rooms are not all asked in the same second, and on average no more
/// than `MAX_IDLE_ASKS_PER_S` of them a second.
fn idle_pause(rooms: usize) -> Duration {
    idle_period(rooms).mul_f64(rand::random_range(0.5..1.0))
}

/// The longest an empty room goes unasked when this node knows `rooms`.
pub fn idle_period(rooms: usize) -> Duration {
    // Pauses average three quarters of the period.
    let spread = Duration::from_secs_f64(rooms as f64 / f64::from(MAX_IDLE_ASKS_PER_S) / 0.75);
    IDLE_HEARTBEAT.max(spread)
}

#[derive(Clone)]
pub struct Promoter {
    store: Arc<dyn Store>,
    sale: Arc<dyn SaleStore>,
    hub: Arc<Hub>,
    wakeups: Arc<Wakeups>,
    /// Each room's recent figures, from every tick answer this node gets.
    history: Arc<RoomHistory>,
    asked: Arc<AtomicU64>,
    /// Rooms whose `waitroom_max_active` gauge this node set, so that a cap
    /// taken off clears it.
    capped: Arc<Mutex<HashSet<RoomId>>>,
    /// What this node last announced of each room's sale, and until when a
    /// room found without a sale is not asked again.
    stock: Arc<Mutex<HashMap<RoomId, StockSeen>>>,
    /// The guarded client for the origins' health checks (autotune).
    outbound: Outbound,
    /// The notifications' sender, told of rooms whose outbox has events.
    callbacks: Option<Arc<Callbacks>>,
}

#[derive(Clone, Copy)]
enum StockSeen {
    Announced(Stock),
    NoSaleUntil(Instant),
}

/// How long a room found without a sale goes unasked (a sale set up later
/// announces itself at once).
const NO_SALE_RECHECK: Duration = Duration::from_secs(10);

impl Promoter {
    /// A promoter whose health checks call public addresses only.
    pub fn new(
        store: Arc<dyn Store>,
        sale: Arc<dyn SaleStore>,
        hub: Arc<Hub>,
        wakeups: Arc<Wakeups>,
        history: Arc<RoomHistory>,
    ) -> Self {
        let outbound = Outbound::new(OutboundPolicy::default());
        Self::with_outbound(store, sale, hub, wakeups, history, outbound)
    }

    /// [`Promoter::new`], calling origins through `outbound` (start-up's,
    /// built from `--outbound-allow-networks`).
    pub fn with_outbound(
        store: Arc<dyn Store>,
        sale: Arc<dyn SaleStore>,
        hub: Arc<Hub>,
        wakeups: Arc<Wakeups>,
        history: Arc<RoomHistory>,
        outbound: Outbound,
    ) -> Self {
        Self {
            store,
            sale,
            hub,
            wakeups,
            history,
            asked: Arc::default(),
            capped: Arc::default(),
            stock: Arc::default(),
            outbound,
            callbacks: None,
        }
    }

    /// Tells `callbacks` of every room a tick answer finds events in the
    /// outbox of (design rule 16).
    #[must_use]
    pub fn with_callbacks(mut self, callbacks: Arc<Callbacks>) -> Self {
        self.callbacks = Some(callbacks);
        self
    }

    /// The client the rooms' health checks go through.
    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }

    /// After a tick ran here: what the room's sale has left, told to its
    /// line when it changed (so at most once per tick, on one node).
    /// Whether the room's last stock read gave back a whole slice of
    /// expired holds: it is read again soon, tick or not, until a read
    /// finds the rest (a mass expiry comes back in seconds, not a slice per
    /// tick, with no sale traffic to sweep it).
    fn stock_sweep_left(&self, room: &RoomId) -> bool {
        matches!(
            self.stock.lock().get(room),
            Some(StockSeen::Announced(stock)) if stock.sweep_left
        )
    }

    async fn follow_stock(&self, room: &RoomId) {
        if let Some(StockSeen::NoSaleUntil(until)) = self.stock.lock().get(room).copied()
            && Instant::now() < until
        {
            return;
        }
        let seen = match self.sale.stock(room).await {
            Ok(stock) => StockSeen::Announced(stock),
            Err(SaleError::NoSale) => StockSeen::NoSaleUntil(Instant::now() + NO_SALE_RECHECK),
            Err(error) => {
                tracing::warn!(%room, %error, "could not read the sale's stock");
                return;
            }
        };
        let before = self.stock.lock().insert(room.clone(), seen);
        if let StockSeen::Announced(stock) = seen
            && !matches!(before, Some(StockSeen::Announced(old)) if old == stock)
            && let Err(error) = self.store.announce_stock(room, stock).await
        {
            tracing::warn!(%room, %error, "could not announce the sale's stock");
            self.stock.lock().remove(room);
        }
    }

    /// Takes the room's health sample that a tick handed this node
    /// (autotune: `TickReport::probe`) and records it in the store, where
    /// every node's next tick decides from it. Through the guarded client
    /// (`super::outbound`): a `health_url` that leads somewhere it may not
    /// is a failed sample, like one that does not answer.
    async fn take_sample(self, room: RoomId, check: HealthCheck) {
        let probe = self
            .outbound
            .probe(&check.url, Duration::from_millis(check.timeout_ms))
            .await;
        let failure = match probe.outcome {
            ProbeOutcome::Status(status) if status < 400 => None,
            ProbeOutcome::Status(status) => Some(Failure::Status(status)),
            ProbeOutcome::Timeout => Some(Failure::Timeout),
            ProbeOutcome::Failed => Some(Failure::Failed),
        };
        let sample = RecordSample {
            room: room.clone(),
            epoch: check.epoch,
            latency_ms: probe.latency_ms,
            failure,
        };
        if let Err(error) = self.store.run(sample).await {
            tracing::warn!(%room, %error, "could not record the origin's health sample");
        }
    }

    /// How many times this node has asked the store for a tick: the cost
    /// the promoter puts on the store.
    pub fn ticks_asked(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }

    /// Asks every room for its tick now, whatever its schedule (tests and
    /// embedders drive a clock and then call this), and takes the health
    /// samples the ticks hand out before it returns.
    pub async fn tick_all(&self) -> Result<Vec<(RoomId, TickReport)>, StoreError> {
        let mut reports = Vec::new();
        for room in self.store.room_ids().await? {
            match self.tick(&room).await {
                Ok(Tick {
                    ran: Some(report), ..
                }) => {
                    if let Some(check) = report.probe.clone() {
                        self.clone().take_sample(room.clone(), check).await;
                    }
                    reports.push((room, report));
                }
                Ok(_) | Err(StoreError::RoomNotFound(_) | StoreError::RoomClosed(_)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(reports)
    }

    /// One room's tick, with its metrics and log line; first, if arrivals
    /// may have gone unrecorded, their grace resumed (see
    /// [`super::arrival_gaps`]).
    async fn tick(&self, room: &RoomId) -> Result<Tick, StoreError> {
        let gaps = self.hub.arrival_gaps();
        if let Some(due) = gaps.due(room) {
            match self.store.resume_arrivals(room, due.seen).await {
                Ok(resumptions) => {
                    gaps.resumed(room, due, resumptions);
                    // By this node or by another, after the same outage.
                    tracing::info!(%room, resumptions, "arrival grace counted from the store's return");
                }
                Err(error) => {
                    if !matches!(
                        error,
                        StoreError::RoomNotFound(_) | StoreError::RoomClosed(_)
                    ) {
                        gaps.failed_in(room);
                    }
                    return Err(error);
                }
            }
        }
        let started = std::time::Instant::now();
        let asked_at = self.history.now_ms();
        self.asked.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("waitroom_ticks_asked_total").increment(1);
        let tick = self.store.tick(room).await.inspect_err(|error| {
            if matches!(error, StoreError::Unavailable(_)) {
                gaps.failed_in(room);
            }
        })?;
        gaps.ticked(room, tick.arrival_resumptions);
        if tick.outbox > 0
            && let Some(callbacks) = &self.callbacks
        {
            callbacks.note(room);
        }
        if tick.ran.is_some() || self.stock_sweep_left(room) {
            self.follow_stock(room).await;
        }
        let labels = [("room", room.to_string())];
        self.show(&labels, room, &tick);
        self.history.record(room, asked_at, &tick.figures);
        if let Some(report) = &tick.ran {
            metrics::histogram!("waitroom_tick_seconds").record(started.elapsed().as_secs_f64());
            metrics::counter!("waitroom_admitted_total", &labels).increment(report.admitted);
            // This node's call admitted them: recorded here only, so a sum
            // over nodes counts each admission once.
            let waits = metrics::histogram!(WAIT_SECONDS, &labels);
            for &wait in &report.waits_ms {
                waits.record(wait as f64 / 1000.0);
            }
            if report.no_shows > 0 {
                metrics::counter!("waitroom_no_shows_total", &labels).increment(report.no_shows);
            }
            // This node's call made the change: counted here only.
            if let Some(direction) = report.tuned {
                metrics::counter!(
                    "waitroom_autotune_changes_total",
                    "room" => room.to_string(),
                    "direction" => direction.name()
                )
                .increment(1);
                tracing::info!(%room, direction = direction.name(), rate = tick.figures.admit_per_tick_effective, "autotune changed the rate");
            }
            if report.admitted > 0 || report.abandoned > 0 {
                tracing::debug!(%room, admitted = report.admitted, abandoned = report.abandoned, waiting = report.waiting, "tick");
            }
        }
        Ok(tick)
    }

    /// The room's figures as this answer found them, whichever node's tick
    /// ran: every node asks for a busy room's ticks, so every node shows
    /// the same (dashboards take the `max` over nodes). `room` is one the
    /// store knows, so its id is a label with a bounded set of values.
    fn show(&self, labels: &[(&'static str, String); 1], room: &RoomId, tick: &Tick) {
        let figures = tick.figures;
        metrics::gauge!("waitroom_waiting", labels).set(figures.waiting as f64);
        metrics::gauge!("waitroom_active", labels).set(figures.active as f64);
        metrics::gauge!("waitroom_admit_per_tick_effective", labels)
            .set(f64::from(figures.admit_per_tick_effective));
        metrics::gauge!("waitroom_room_paused", labels).set(f64::from(u8::from(figures.paused)));
        metrics::gauge!("waitroom_room_opened", labels).set(f64::from(u8::from(figures.opened)));
        // Unknown (paused, or no rate yet) is NaN: a gap, not a wait of 0.
        metrics::gauge!("waitroom_eta_seconds", labels)
            .set(figures.tail_eta_s.map_or(f64::NAN, |eta| eta as f64));
        // On every node, so that summing it over nodes never misses one.
        metrics::counter!("waitroom_admitted_total", labels).increment(0);
        // The room's own count, whichever call swept them (any operation on
        // the room may): every node shows the same, as for the gauges.
        metrics::counter!("waitroom_sessions_lapsed_total", labels)
            .absolute(figures.sessions_lapsed);
        match figures.max_active {
            Some(cap) => {
                self.capped.lock().insert(room.clone());
                metrics::gauge!("waitroom_max_active", labels).set(cap as f64);
            }
            // A cap taken off: its gauge says nothing from then on.
            None if self.capped.lock().remove(room) => {
                metrics::gauge!("waitroom_max_active", labels).set(f64::NAN);
            }
            None => {}
        }
    }

    /// A closed (or lost) room's figures, shown once: nobody waits in it any more.
    /// Its history goes, so a room made again under its id starts afresh.
    fn show_closed(&self, room: &RoomId) {
        let labels = [("room", room.to_string())];
        self.show(&labels, room, &Tick::default());
        self.history.forget(room);
    }

    /// Marks every visitor with a socket on this node present, in batches of
    /// `PRESENCE_BATCH`; those rooms are in use here, so they are kept ticking.
    pub async fn refresh_presence(&self) {
        for (room, visitors) in self.hub.registry().present_visitors() {
            if visitors.is_empty() {
                continue;
            }
            self.wakeups.note(&room);
            for batch in visitors.chunks(PRESENCE_BATCH) {
                match self.store.touch(&room, batch).await {
                    Ok(()) => {}
                    Err(StoreError::RoomNotFound(_)) => {
                        self.hub.room_lost(&room);
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(%room, %error, "could not refresh presence");
                        break;
                    }
                }
            }
        }
    }

    /// Adds the rooms this node has not heard of (all of them, at start) to
    /// be asked now, and forgets the rooms that are gone.
    async fn refresh_rooms(&self, schedule: &mut Schedule) -> Result<(), StoreError> {
        let rooms: HashSet<RoomId> = self.store.room_ids().await?.into_iter().collect();
        for gone in schedule.rooms().into_iter().filter(|r| !rooms.contains(r)) {
            schedule.forget(&gone);
            self.wakeups.set_ticking(&gone, false);
            self.hub.arrival_gaps().forget(&gone);
            self.history.forget(&gone);
        }
        for room in rooms {
            if !schedule.knows(&room) {
                schedule.no_later_than(room, Duration::ZERO);
            }
        }
        Ok(())
    }

    /// What the store's events mean for the schedule: a room whose config
    /// changed (on any node) is asked again at once, whatever it was
    /// sleeping out, and the store then says when its next tick is due at
    /// the new setting. A room closed loses its history. When events may have been missed (this node fell
    /// behind, or the store was away), every ticking room is asked again.
    fn follow(&self, event: Result<StoreEvent, RecvError>, schedule: &mut Schedule) {
        match event {
            Ok(StoreEvent::Room(RoomEvent::Configured { room, .. })) => {
                schedule.no_later_than(room, Duration::ZERO);
            }
            // Closed on any node: a room made again under its id starts
            // with no history of this one, even before a tick finds it closed.
            Ok(StoreEvent::Room(RoomEvent::Closed { room })) => self.history.forget(&room),
            Ok(StoreEvent::Resumed) | Err(RecvError::Lagged(_)) => {
                for room in self.wakeups.ticking_rooms() {
                    schedule.no_later_than(room, Duration::ZERO);
                }
            }
            Ok(_) | Err(RecvError::Closed) => {}
        }
    }

    pub async fn run(self, tasks: Tasks) {
        let shutdown = tasks.shutdown_token();
        let mut events = Some(self.store.subscribe());
        let mut schedule = Schedule::default();
        let mut refresh = tokio::time::interval(ROOMS_REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut presence = tokio::time::interval(PRESENCE_EVERY);
        presence.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // Said once when ticks start failing and once when they recover, not
        // once per room and tick while the store is away.
        let mut failing = false;
        loop {
            tokio::select! {
                Some(room) = schedule.next_due() => {
                    // Not ticking while it is asked: a join that lands meanwhile
                    // wakes it again, so none is missed if the room goes idle.
                    self.wakeups.set_ticking(&room, false);
                    let asked = Instant::now();
                    match self.tick(&room).await {
                        Ok(tick) => {
                            schedule.answered(&room, asked, &tick);
                            // Taken aside: a slow origin never holds up the ticks.
                            if let Some(check) = tick.ran.as_ref().and_then(|ran| ran.probe.clone()) {
                                tasks.spawn_job(self.clone().take_sample(room.clone(), check));
                            }
                            if failing {
                                failing = false;
                                tracing::info!("ticks are running again");
                            }
                            self.wakeups.set_ticking(&room, tick.busy);
                            let pause = if tick.busy {
                                Duration::from_millis(tick.next_due_in_ms)
                            } else {
                                // An idle room is asked again at its
                                // schedule's next entry, if sooner.
                                let change = tick.change_in_ms.map_or(Duration::MAX, Duration::from_millis);
                                idle_pause(schedule.keys.len() + 1).min(change)
                            };
                            if self.stock_sweep_left(&room) {
                                schedule.no_later_than(
                                    room.clone(),
                                    Duration::from_millis(SWEEP_AGAIN_MS),
                                );
                            }
                            schedule.no_later_than(room, pause);
                        }
                        // Gone (a store that lost its data): off the schedule until
                        // a refresh or a wake-up finds it, and its figures no
                        // longer what the store last had.
                        Err(StoreError::RoomNotFound(_)) => {
                            schedule.due.remove(&room);
                            self.show_closed(&room);
                        }
                        Err(StoreError::RoomClosed(_)) => {
                            schedule.due.remove(&room);
                            self.show_closed(&room);
                        }
                        Err(error) => {
                            if !failing {
                                failing = true;
                                tracing::warn!(%error, "ticks are failing; retrying until the store answers");
                            }
                            schedule.no_later_than(room, RETRY_AFTER_FAILURE);
                        }
                    }
                }
                () = self.wakeups.notify.notified() => {
                    for room in self.wakeups.take() {
                        schedule.no_later_than(room, Duration::ZERO);
                    }
                }
                _ = refresh.tick() => {
                    if let Err(error) = self.refresh_rooms(&mut schedule).await {
                        tracing::warn!(%error, "could not read the rooms");
                    }
                }
                event = next_event(&mut events) => self.follow(event, &mut schedule),
                _ = presence.tick() => self.refresh_presence().await,
                () = shutdown.cancelled() => break,
            }
        }
    }
}
