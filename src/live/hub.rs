//! The hub: keeps this node's sockets up to date from the store's events.
//! For each event it decides, under the registry's lock, which sockets hear
//! what (positions come from [`super::positions`]); the fan-out then encodes
//! and sends outside the lock. After lost events it reads every socket's
//! place again, in the background, while it goes on applying new events.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::arrival_gaps::ArrivalGaps;
use super::fanout::{Batch, Pending, broadcast as tell};
use super::outlet::{Outlet, SERVICE_RESTART, close_reason};
use super::positions::{Entering, Movement, View};
use super::registry::{Registration, Registry, RoomSockets, SocketId};
use super::tasks::Tasks;
use crate::store::{Store, StoreError, StoreExt};
use crate::words::credentials::Credentials;
use crate::words::{LineSummary, Place, PlaceState, RoomEvent, RoomId, StoreEvent, VisitorId};
use actix_ws::CloseCode;

/// What sockets hear while the store is unreachable: their place is kept,
/// and a fresh status follows once it is back.
const STORE_DOWN: &str = r#"{"type":"error","code":"store_unavailable","message":"The waiting room is reconnecting to its store; your place is kept. Updates resume shortly."}"#;

/// What a room's sockets hear when the store no longer has the room (a
/// Redis restarted without persistence), before `closed`.
const ROOM_GONE: &str = r#"{"type":"error","code":"room_gone","message":"This waiting room no longer exists on the server; it may be set up again shortly."}"#;

/// Sockets whose places one store call reads when a node reads them all:
/// one Lua script on Redis reads the room once for all of them (a read per
/// socket cost Redis most of a second at a 19,000-socket opening), and 50
/// keep each script near 1 ms (100 took 2–3 ms).
const PLACES_BATCH: usize = 50;
/// Batches in flight at once while resyncing every socket.
const RESYNC_CONCURRENCY: usize = 1;
/// Batches in flight at once while the pre-queue learns its positions:
/// more, since every entrant is waiting for exactly this.
const DRAW_CONCURRENCY: usize = 4;

pub struct Hub {
    registry: Arc<Registry>,
    credentials: Arc<Credentials>,
    store: Arc<dyn Store>,
    /// Cancels the resync under way, when a newer one starts.
    resync: Mutex<CancellationToken>,
    /// Told when the store is lost, so that arrivals are resumed after.
    arrival_gaps: Arc<ArrivalGaps>,
}

impl Hub {
    pub fn new(store: Arc<dyn Store>, credentials: Arc<Credentials>) -> Self {
        Self {
            registry: Arc::new(Registry::default()),
            credentials,
            store,
            resync: Mutex::new(CancellationToken::new()),
            arrival_gaps: Arc::default(),
        }
    }

    /// The arrivals this node could not record (the promoter resumes them).
    pub fn arrival_gaps(&self) -> &Arc<ArrivalGaps> {
        &self.arrival_gaps
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Registers a socket and sends it its place: read from the store after
    /// the registration, so that no event between them is missed.
    pub async fn connect(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        ticket: Arc<str>,
        outlet: Arc<Outlet>,
    ) -> Result<Registration, StoreError> {
        self.store.watch(room).await?;
        let registration = self.registry.register(room, visitor, ticket, outlet);
        self.load(room, registration.id, visitor).await?;
        Ok(registration)
    }

    /// Reads one registered socket's place and syncs it, again if events
    /// raced past the replay window meanwhile.
    async fn load(
        &self,
        room: &RoomId,
        id: SocketId,
        visitor: VisitorId,
    ) -> Result<(), StoreError> {
        loop {
            let place = self.store.status(room, visitor).await?;
            if self.sync(room, id, &place) != Synced::Stale {
                return Ok(());
            }
        }
    }

    /// Reads a batch of one room's sockets' places in one store call and
    /// syncs each; one that events raced past is read again on its own.
    async fn load_batch(
        &self,
        room: &RoomId,
        sockets: &[(SocketId, VisitorId)],
    ) -> Result<(), StoreError> {
        let visitors: Vec<VisitorId> = sockets.iter().map(|(_, visitor)| *visitor).collect();
        let places = self.store.places(room, &visitors).await?;
        for (&(id, visitor), place) in sockets.iter().zip(&places) {
            if self.sync(room, id, place) == Synced::Stale {
                self.load(room, id, visitor).await?;
            }
        }
        Ok(())
    }

    /// Sets a socket's view from a store read, caught up with what happened
    /// since, and sends it its status.
    pub fn sync(&self, room: &RoomId, id: SocketId, place: &Place) -> Synced {
        let batch = self.registry.with_room(room, |sockets| {
            if place.line.version >= sockets.line.version {
                sockets.line = place.line;
                sockets.facts = place.facts.clone();
            }
            let Ok((view, state)) = sockets.recent.catch_up(place) else {
                return Err(Synced::Stale);
            };
            let sequence = sockets.next_sequence();
            let mut batch = Batch::new(room.clone(), sockets.line, sockets.facts.clone());
            let Some(socket) = sockets.sockets.get_mut(&id) else {
                return Err(Synced::Gone);
            };
            socket.view = view;
            socket.priority = place.priority.clone();
            batch.statuses.push(Pending {
                id,
                outlet: socket.outlet.clone(),
                sequence,
                ticket: socket.ticket.clone(),
                visitor: socket.visitor,
                state,
                priority: socket.priority.clone(),
            });
            if matches!(state, PlaceState::Closed) {
                batch.close_after = Some(close_reason(CloseCode::Normal, "room closed"));
            }
            Ok(batch)
        });
        match batch {
            None => Synced::Gone,
            Some(Err(synced)) => synced,
            Some(Ok(batch)) => {
                self.deliver(batch);
                Synced::Yes
            }
        }
    }

    /// Applies one store event to this node's sockets.
    pub fn apply(&self, event: RoomEvent) {
        let room = event.room().clone();
        if let Some(batch) = self
            .registry
            .with_room(&room, |sockets| prepare(&room, sockets, event))
        {
            self.deliver(batch);
        }
    }

    fn deliver(&self, batch: Batch) {
        batch.deliver(&self.credentials, &self.registry);
    }

    /// Tells a room's sockets that the store lost the room, then closes them.
    pub fn room_lost(&self, room: &RoomId) {
        let Some((outlets, batch)) = self.registry.with_room(room, |sockets| {
            (sockets.outlets(), close_all(room, sockets))
        }) else {
            return;
        };
        tracing::warn!(%room, sockets = outlets.len(), "the store lost a room its sockets were in");
        let refused = tell(ROOM_GONE, &outlets);
        self.registry.forget(room, refused);
        self.deliver(batch);
    }

    /// Closes every socket with 1012 "service restart": the node is going
    /// away, and the client should reconnect (to another node) and carry on
    /// with its ticket.
    pub fn close_every_socket_for_restart(&self) {
        let rooms = self.registry.each_room(|_, sockets| sockets.outlets());
        let reason = close_reason(CloseCode::Restart, SERVICE_RESTART);
        for (_, outlet) in rooms.into_iter().flatten() {
            outlet.close(reason.clone());
        }
    }

    /// Sends every socket the same message.
    fn tell_everyone(&self, text: &str) {
        let rooms = self
            .registry
            .each_room(|room, sockets| (room.clone(), sockets.outlets()));
        for (room, outlets) in rooms {
            let refused = tell(text, &outlets);
            self.registry.forget(&room, refused);
        }
    }

    /// Applies the store's events until shutdown. An event's statuses are
    /// decided on a blocking thread (a room may have thousands of sockets),
    /// one event at a time, so that every socket hears a room's events in
    /// order; they are then sent from the sockets' homes.
    pub async fn run(self: Arc<Self>, tasks: Tasks) {
        let mut events = self.store.subscribe();
        let shutdown = tasks.shutdown_token();
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = shutdown.cancelled() => break,
            };
            match event {
                Ok(StoreEvent::Room(RoomEvent::Drawn { room, .. })) => {
                    self.read_drawn(&room, &tasks)
                }
                Ok(StoreEvent::Room(event)) => {
                    let missed = self.missed_before(&event);
                    self.off_the_workers(move |hub| hub.apply(event)).await;
                    if !missed.is_empty() {
                        self.read_again(missed, RESYNC_CONCURRENCY, cancel_with(&tasks), &tasks);
                    }
                }
                Ok(StoreEvent::Interrupted) => {
                    // Noted before the sockets are told, so that whoever
                    // heard of the loss from a socket can count on it.
                    self.arrival_gaps.store_lost();
                    self.off_the_workers(|hub| hub.tell_everyone(STORE_DOWN))
                        .await
                }
                Ok(StoreEvent::Resumed) => {
                    tracing::info!("store is back");
                    self.start_resync(&tasks);
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "hub fell behind the store's events");
                    self.start_resync(&tasks);
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }

    async fn off_the_workers(self: &Arc<Self>, fan_out: impl FnOnce(&Hub) + Send + 'static) {
        let hub = self.clone();
        // A fan-out cancelled by the runtime shutting down is no error.
        if let Err(error) = tokio::task::spawn_blocking(move || fan_out(&hub)).await
            && error.is_panic()
        {
            tracing::error!(%error, "a fan-out panicked");
        }
    }

    /// Reads every socket's place again, in a task of its own (so events
    /// keep being applied meanwhile), with a bounded number of reads in
    /// flight. A newer resync replaces one still under way.
    fn start_resync(self: &Arc<Self>, tasks: &Tasks) {
        let cancel = tasks.shutdown_token().child_token();
        std::mem::replace(&mut *self.resync.lock(), cancel.clone()).cancel();
        self.forget_history();
        let all: Vec<(RoomId, SocketId, VisitorId)> = self
            .registry
            .each_room(|room, sockets| to_read_again(room, sockets, |_| true))
            .into_iter()
            .flatten()
            .collect();
        tracing::warn!(sockets = all.len(), "resyncing every socket from the store");
        self.read_again(all, RESYNC_CONCURRENCY, cancel, tasks);
    }

    /// Forgets what this node knows of each room's history: the version
    /// its sockets last heard and the movements kept for replay. After a
    /// failover the store may be behind them (the promoted replica lacked
    /// the last writes, and their events were heard here), and the events
    /// that follow carry versions this node has seen already: kept, they
    /// would replay lost movements onto the places read now and ignore the
    /// real ones after. Forgotten, each read is taken as the store gives it
    /// and every event after it applies.
    fn forget_history(&self) {
        self.registry.each_room(|_, sockets| {
            sockets.recent.clear();
            sockets.line.version = 0;
        });
    }

    /// The waiting sockets of `event`'s room, to be read again, when this
    /// node missed an event of the room before it (its version skips one:
    /// a write whose replicas never confirmed it published nothing, see
    /// `--redis-wait-replicas`). They are marked syncing first, so `event`
    /// does not move them from a view it does not follow.
    fn missed_before(&self, event: &RoomEvent) -> Vec<(RoomId, SocketId, VisitorId)> {
        let version = match event {
            RoomEvent::Tick { line, .. }
            | RoomEvent::Left { line, .. }
            | RoomEvent::Entered { line, .. }
            | RoomEvent::Drawn { line, .. } => line.version,
            RoomEvent::Configured { .. } | RoomEvent::Closed { .. } => return Vec::new(),
        };
        let room = event.room();
        self.registry
            .with_room(room, |sockets| {
                let known = sockets.line.version;
                if matches!(event, RoomEvent::Drawn { .. }) {
                    sockets.line.version = known.max(version);
                }
                if known == 0 || version <= known + 1 {
                    return Vec::new();
                }
                tracing::info!(%room, known, version, "missed a room event; reading its sockets again");
                to_read_again(room, sockets, |view| matches!(view, View::Waiting { .. }))
            })
            .unwrap_or_default()
    }

    /// The room opened: its pre-queue sockets learn their drawn positions,
    /// read from the store (which fixed the order when they joined).
    fn read_drawn(self: &Arc<Self>, room: &RoomId, tasks: &Tasks) {
        let Some(drawn) = self.registry.with_room(room, |sockets| {
            to_read_again(room, sockets, |view| matches!(view, View::PreQueue { .. }))
        }) else {
            return;
        };
        tracing::info!(%room, sockets = drawn.len(), "drawn: reading the pre-queue's positions");
        self.read_again(drawn, DRAW_CONCURRENCY, cancel_with(tasks), tasks);
    }

    /// Reads sockets' places again in a task of its own, in batches of
    /// `PLACES_BATCH` per room, `concurrency` batches at a time.
    fn read_again(
        self: &Arc<Self>,
        all: Vec<(RoomId, SocketId, VisitorId)>,
        concurrency: usize,
        cancel: CancellationToken,
        tasks: &Tasks,
    ) {
        let hub = self.clone();
        tasks.spawn_job(async move {
            let reads = futures_util::stream::iter(in_batches(all))
                .map(|(room, sockets)| {
                    let hub = hub.clone();
                    async move {
                        match hub.load_batch(&room, &sockets).await {
                            Ok(()) => {}
                            Err(StoreError::RoomNotFound(_)) => hub.room_lost(&room),
                            Err(error) => tracing::warn!(%room, %error, "resync failed"),
                        }
                    }
                })
                .buffer_unordered(concurrency)
                .for_each(|()| async {});
            tokio::select! {
                () = reads => {}
                () = cancel.cancelled() => {}
            }
        });
    }
}

/// Sockets to read, grouped by room into batches of at most `PLACES_BATCH`.
fn in_batches(
    all: Vec<(RoomId, SocketId, VisitorId)>,
) -> Vec<(RoomId, Vec<(SocketId, VisitorId)>)> {
    let mut by_room: HashMap<RoomId, Vec<(SocketId, VisitorId)>> = HashMap::new();
    for (room, id, visitor) in all {
        by_room.entry(room).or_default().push((id, visitor));
    }
    by_room
        .into_iter()
        .flat_map(|(room, sockets)| {
            sockets
                .chunks(PLACES_BATCH)
                .map(|batch| (room.clone(), batch.to_vec()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Marks the sockets `which` picks as syncing; returns what to read for them.
/// A job's cancellation, with the application's shutdown.
fn cancel_with(tasks: &Tasks) -> CancellationToken {
    tasks.shutdown_token().child_token()
}

fn to_read_again(
    room: &RoomId,
    sockets: &mut RoomSockets,
    which: impl Fn(View) -> bool,
) -> Vec<(RoomId, SocketId, VisitorId)> {
    sockets
        .sockets
        .iter_mut()
        .filter(|(_, socket)| which(socket.view))
        .map(|(id, socket)| {
            socket.view = View::Syncing;
            (room.clone(), *id, socket.visitor)
        })
        .collect()
}

/// Whether a sync took, or the replay window had moved past the read.
#[derive(Debug, PartialEq, Eq)]
pub enum Synced {
    Yes,
    Stale,
    Gone,
}

/// Decides, under the lock, what one event means for each of a room's
/// sockets: their new views, and the statuses to send.
fn prepare(room: &RoomId, sockets: &mut RoomSockets, event: RoomEvent) -> Batch {
    let (movement, notify) = match event {
        RoomEvent::Tick {
            admitted,
            departed,
            line,
            ..
        } => {
            // Events published after `WAIT` (--redis-wait-replicas) can
            // arrive out of order: a late one never moves the line back.
            if line.version >= sockets.line.version {
                sockets.line = line;
            }
            (Movement::tick(line.version, admitted, &departed), true)
        }
        RoomEvent::Left { order, line, .. } => {
            if line.version >= sockets.line.version {
                sockets.line.version = line.version;
                sockets.line.waiting = line.waiting;
            }
            // Positions move now; visitors see it with the next tick.
            (Movement::leaving(line.version, order), false)
        }
        RoomEvent::Entered {
            visitor,
            order,
            from,
            group,
            position,
            line,
            ..
        } => {
            if line.version >= sockets.line.version {
                sockets.line.version = line.version;
                sockets.line.waiting = line.waiting;
            }
            let entering = Entering {
                visitor,
                order,
                from,
                group,
                position,
            };
            (Movement::entering(line.version, entering), false)
        }
        // The pre-queue's sockets are read again (`Hub::read_drawn`); the
        // rest of the room hears of it with the next tick.
        RoomEvent::Drawn { .. } => {
            return Batch::new(room.clone(), sockets.line, sockets.facts.clone());
        }
        RoomEvent::Configured { line, facts, .. } => {
            sockets.line.rate_per_s = line.rate_per_s;
            sockets.line.paused = line.paused;
            sockets.facts = facts;
            if sockets.facts.sold_out {
                return close_waiting(room, sockets);
            }
            return tell_waiting(room, sockets);
        }
        RoomEvent::Closed { .. } => return close_all(room, sockets),
    };
    let movement = sockets.recent.remember(movement).clone();
    let sequence = sockets.next_sequence();
    let mut batch = Batch::new(room.clone(), sockets.line, sockets.facts.clone());
    for (id, socket) in &mut sockets.sockets {
        let Some((view, state)) = super::positions::advance(socket.view, socket.visitor, &movement)
        else {
            continue;
        };
        socket.view = view;
        let moved = movement.moved(socket.visitor);
        if let Some(group) = moved {
            socket.priority = Some(group.clone());
        }
        if notify || matches!(view, View::Settled) || moved.is_some() {
            batch.statuses.push(pending(*id, socket, sequence, state));
        }
    }
    batch
}

/// A status for every waiting socket, as it stands (the rate changed).
fn tell_waiting(room: &RoomId, sockets: &mut RoomSockets) -> Batch {
    let sequence = sockets.next_sequence();
    let mut batch = Batch::new(room.clone(), sockets.line, sockets.facts.clone());
    for (id, socket) in &sockets.sockets {
        let state = match socket.view {
            View::Waiting {
                order, position, ..
            } => PlaceState::Waiting { order, position },
            View::PreQueue { entry } => PlaceState::PreQueue { entry },
            View::Syncing | View::Settled => continue,
        };
        batch.statuses.push(pending(*id, socket, sequence, state));
    }
    batch
}

/// `closed` (`sold_out`) to every waiting socket, then a close; those
/// admitted keep theirs.
fn close_waiting(room: &RoomId, sockets: &mut RoomSockets) -> Batch {
    let batch = Batch::new(room.clone(), sockets.line, sockets.facts.clone());
    close(batch, sockets, "sold out", |view| {
        matches!(view, View::Waiting { .. } | View::PreQueue { .. })
    })
}

/// `closed` to every socket, then a close.
fn close_all(room: &RoomId, sockets: &mut RoomSockets) -> Batch {
    let batch = Batch::new(room.clone(), LineSummary::default(), Arc::default());
    let batch = close(batch, sockets, "room closed", |_| true);
    sockets.recent.clear();
    batch
}

/// `closed`, then a close, to the sockets whose view `which` picks.
fn close(
    mut batch: Batch,
    sockets: &mut RoomSockets,
    why: &str,
    which: impl Fn(&View) -> bool,
) -> Batch {
    let sequence = sockets.next_sequence();
    for (id, socket) in &mut sockets.sockets {
        if which(&socket.view) {
            socket.view = View::Settled;
            batch
                .statuses
                .push(pending(*id, socket, sequence, PlaceState::Closed));
        }
    }
    batch.close_after = Some(close_reason(CloseCode::Normal, why));
    batch
}

fn pending(
    id: SocketId,
    socket: &super::registry::Socket,
    sequence: u64,
    state: PlaceState,
) -> Pending {
    Pending {
        id,
        outlet: socket.outlet.clone(),
        sequence,
        ticket: socket.ticket.clone(),
        visitor: socket.visitor,
        state,
        priority: socket.priority.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::positions::fixtures::waiting;
    use crate::store::memory::MemoryStore;
    use crate::words::clock::ManualClock;
    use crate::words::{Admission, LineSummary};

    fn hub() -> Hub {
        let store = Arc::new(MemoryStore::new(Arc::new(ManualClock::new(0))));
        Hub::new(store, Arc::new(Credentials::from_secret("s")))
    }

    fn room() -> RoomId {
        RoomId::parse("r").unwrap()
    }

    /// A hub with one socket registered (not yet synced), whose outlet
    /// keeps up to `capacity` messages; the registration keeps it there.
    fn one_socket(capacity: usize) -> (Hub, VisitorId, Arc<Outlet>, Registration) {
        let hub = hub();
        let me = VisitorId::random();
        let outlet = Arc::new(Outlet::recording(capacity));
        let registration = hub
            .registry
            .register(&room(), me, "ticket".into(), outlet.clone());
        (hub, me, outlet, registration)
    }

    fn tick(version: u64, admitted: &[(u64, VisitorId)]) -> RoomEvent {
        RoomEvent::Tick {
            room: room(),
            admitted: admitted
                .iter()
                .map(|(seq, visitor)| Admission {
                    visitor: *visitor,
                    order: crate::words::Order::Joined(*seq),
                    admitted_at: 0,
                    expires_at: 60_000,
                })
                .collect(),
            departed: Arc::new([]),
            line: LineSummary {
                version,
                ..LineSummary::default()
            },
        }
    }

    fn positions(outlet: &Outlet) -> Vec<Option<u64>> {
        outlet
            .recorded()
            .0
            .iter()
            .map(|text| {
                serde_json::from_str::<serde_json::Value>(text).unwrap()["position"].as_u64()
            })
            .collect()
    }

    #[test]
    fn reads_go_by_room_in_batches_of_at_most_the_batch_size() {
        let other = RoomId::parse("other").unwrap();
        let mut all: Vec<(RoomId, SocketId, VisitorId)> = (0..PLACES_BATCH as u64 * 2 + 7)
            .map(|id| (room(), id, VisitorId::random()))
            .collect();
        all.extend((0..3).map(|id| (other.clone(), 1_000 + id, VisitorId::random())));
        let batches = in_batches(all.clone());
        let mut sizes: Vec<(String, usize)> = batches
            .iter()
            .map(|(room, sockets)| (room.to_string(), sockets.len()))
            .collect();
        sizes.sort();
        assert_eq!(
            sizes,
            vec![
                ("other".to_string(), 3),
                ("r".to_string(), 7),
                ("r".to_string(), PLACES_BATCH),
                ("r".to_string(), PLACES_BATCH),
            ]
        );
        let mut read: Vec<SocketId> = batches
            .iter()
            .flat_map(|(_, sockets)| sockets.iter().map(|(id, _)| *id))
            .collect();
        read.sort();
        let mut asked: Vec<SocketId> = all.iter().map(|(_, id, _)| *id).collect();
        asked.sort();
        assert_eq!(read, asked, "every socket once");
    }

    #[test]
    fn a_socket_hears_its_place_then_every_tick_once() {
        let (hub, me, outlet, registration) = one_socket(100);
        // A tick between the read (version 1) and the sync is replayed.
        hub.apply(tick(2, &[(1, VisitorId::random())]));
        assert_eq!(
            hub.sync(&room(), registration.id, &waiting(me, 10, 8, 1)),
            Synced::Yes
        );
        assert_eq!(positions(&outlet), [Some(7)]);
        hub.apply(tick(3, &[(2, VisitorId::random())]));
        hub.apply(tick(3, &[(2, VisitorId::random())]));
        assert_eq!(
            positions(&outlet),
            [Some(7), Some(6)],
            "an event applies once"
        );
        hub.apply(tick(4, &[(10, me)]));
        let (sent, _) = outlet.recorded();
        let last: serde_json::Value = serde_json::from_str(sent.last().unwrap()).unwrap();
        assert_eq!(last["state"], "admitted");
        assert!(
            last["pass"]
                .as_str()
                .is_some_and(|p| p.split('.').count() == 3)
        );
    }

    /// A failover lost the store's last writes: this node heard versions
    /// 2 to 5 of the room, and the store is back at 2. Read again from it,
    /// the socket follows the events the store publishes next (3 admits
    /// it), not the ones it heard of the lost writes.
    #[test]
    fn after_the_store_lost_writes_a_socket_read_again_hears_what_comes_next() {
        let (hub, me, outlet, registration) = one_socket(100);
        hub.sync(&room(), registration.id, &waiting(me, 10, 8, 1));
        for version in 2..=5 {
            hub.apply(tick(version, &[(version - 1, VisitorId::random())]));
        }
        assert_eq!(positions(&outlet).last(), Some(&Some(4)));
        // The store's place after the promotion: one ahead gone, at version 2.
        hub.forget_history();
        let read = waiting(me, 10, 7, 2);
        assert_eq!(hub.sync(&room(), registration.id, &read), Synced::Yes);
        assert_eq!(
            positions(&outlet).last(),
            Some(&Some(7)),
            "the store's word"
        );
        hub.apply(tick(3, &[(10, me)]));
        let (sent, _) = outlet.recorded();
        let last: serde_json::Value = serde_json::from_str(sent.last().unwrap()).unwrap();
        assert_eq!(last["state"], "admitted", "{sent:?}");
    }

    #[test]
    fn a_room_event_that_skips_a_version_has_the_rooms_waiting_sockets_read_again() {
        let (hub, me, outlet, registration) = one_socket(100);
        hub.sync(&room(), registration.id, &waiting(me, 10, 8, 1));
        let next = tick(2, &[(1, VisitorId::random())]);
        assert!(hub.missed_before(&next).is_empty(), "version 2 follows 1");
        hub.apply(next);
        assert_eq!(positions(&outlet), [Some(8), Some(7)]);
        // Version 3's event never came (its write was not confirmed).
        let after_a_gap = tick(4, &[(2, VisitorId::random())]);
        assert_eq!(
            hub.missed_before(&after_a_gap),
            [(room(), registration.id, me)]
        );
        hub.apply(after_a_gap);
        assert_eq!(
            positions(&outlet),
            [Some(8), Some(7)],
            "no position from an event it cannot follow; the read tells it"
        );
    }

    #[test]
    fn a_late_event_neither_moves_the_line_back_nor_makes_the_next_look_like_a_gap() {
        let (hub, me, _outlet, registration) = one_socket(100);
        hub.sync(&room(), registration.id, &waiting(me, 10, 8, 1));
        // Version 3 overtakes version 2 (published after WAIT, apart).
        let third = tick(3, &[(1, VisitorId::random())]);
        assert_eq!(hub.missed_before(&third).len(), 1, "3 after 1 is a gap");
        hub.apply(third);
        let second = tick(2, &[(2, VisitorId::random())]);
        assert!(
            hub.missed_before(&second).is_empty(),
            "a late event is no gap"
        );
        hub.apply(second);
        let version = hub.registry.with_room(&room(), |s| s.line.version);
        assert_eq!(version, Some(3), "the line stays at the newest version");
        let fourth = tick(4, &[(3, VisitorId::random())]);
        assert!(
            hub.missed_before(&fourth).is_empty(),
            "4 follows 3: no second read"
        );
    }

    #[test]
    fn a_slow_socket_is_dropped_not_buffered() {
        let (hub, me, outlet, registration) = one_socket(3);
        hub.sync(&room(), registration.id, &waiting(me, 1_000, 1_000, 0));
        for version in 1..=10 {
            hub.apply(tick(version, &[]));
        }
        let (sent, closing) = outlet.recorded();
        assert_eq!(sent.len(), 3, "it took what fit");
        let closing = closing.expect("the socket is asked to close");
        assert_eq!(
            closing.code,
            CloseCode::Again,
            "1013, so the client reconnects"
        );
        assert_eq!(
            hub.registry.open_sockets(),
            0,
            "the slow socket is forgotten"
        );
        assert!(
            hub.registry
                .present_visitors()
                .iter()
                .all(|(_, v)| v.is_empty())
        );
    }

    #[test]
    fn closing_a_room_tells_then_closes_every_socket() {
        let hub = hub();
        let outlets: Vec<_> = (0..3).map(|_| Arc::new(Outlet::recording(10))).collect();
        let _registrations: Vec<_> = outlets
            .iter()
            .enumerate()
            .map(|(i, outlet)| {
                let me = VisitorId::random();
                let r = hub
                    .registry
                    .register(&room(), me, "t".into(), outlet.clone());
                hub.sync(&room(), r.id, &waiting(me, i as u64 + 1, i as u64 + 1, 0));
                r
            })
            .collect();
        hub.apply(RoomEvent::Closed { room: room() });
        for outlet in &outlets {
            let (sent, closing) = outlet.recorded();
            let last: serde_json::Value = serde_json::from_str(sent.last().unwrap()).unwrap();
            assert_eq!(last["state"], "closed");
            assert_eq!(closing.unwrap().code, CloseCode::Normal);
        }
    }

    #[test]
    fn a_status_overtaken_on_the_way_is_dropped() {
        let outlet = Outlet::recording(10);
        outlet.send_status(2, "newer".into()).unwrap();
        outlet.send_status(1, "older".into()).unwrap();
        assert_eq!(outlet.recorded().0, ["newer"]);
    }
}
