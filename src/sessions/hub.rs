//! This node's sockets, by room. The hub turns each store event into a status
//! for every socket it concerns, deriving positions from the event alone: a
//! socket's position is read from the store once, when it connects, and after
//! that only ever lowered by the admissions and departures ahead of it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use actix_ws::CloseCode;
use parking_lot::Mutex;
use tokio::sync::{broadcast, mpsc, watch};

use crate::admission::model::{
    Admission, LineSummary, Place, PlaceState, RoomEvent, RoomId, StoreEvent, VisitorId,
};
use crate::admission::store::Store;
use crate::credentials::Credentials;
use crate::visitor::status::{Status, StatusInput};

/// Messages queued per socket before the client counts as too slow to read.
pub const OUTBOUND_QUEUE: usize = 16;
/// Position-moving events kept per room, to replay to a socket whose initial
/// read raced with them.
const REPLAY_EVENTS: usize = 64;

/// What the hub asks a socket's session loop to send.
#[derive(Debug)]
pub enum Outbound {
    Text(String),
    Close(CloseCode, &'static str),
}

pub type SocketId = u64;

/// What sockets hear while the store is unreachable: their place is kept,
/// and a fresh status follows once it is back.
const STORE_DOWN: &str = r#"{"type":"error","code":"store_unavailable","message":"The waiting room is reconnecting to its store; your place is kept. Updates resume shortly."}"#;

pub struct Hub {
    rooms: Mutex<HashMap<RoomId, RoomSockets>>,
    credentials: Arc<Credentials>,
    next_id: AtomicU64,
    /// Sockets registered now, on this node.
    open: AtomicUsize,
}

#[derive(Default)]
struct RoomSockets {
    sockets: HashMap<SocketId, Socket>,
    target_url: Arc<str>,
    line: LineSummary,
    recent: VecDeque<Movement>,
}

/// One position-moving event: who left the head (admitted) and which
/// sequence numbers left from anywhere else (sorted).
struct Movement {
    version: u64,
    admitted: Arc<[Admission]>,
    departed: Arc<[u64]>,
    /// Whether `departed` gave up their places (`left`) or were dropped as absent.
    by_leaving: bool,
}

impl Movement {
    fn ahead_of(&self, seq: u64) -> u64 {
        self.admitted.len() as u64 + self.departed.partition_point(|d| *d < seq) as u64
    }
}

struct Socket {
    visitor: VisitorId,
    ticket: Arc<str>,
    view: View,
    tx: mpsc::Sender<Outbound>,
}

#[derive(Debug, Clone, Copy)]
enum View {
    /// Registered; its place is being read from the store.
    Syncing,
    /// Waiting at `position`, correct as of room version `version`.
    Waiting {
        seq: u64,
        position: u64,
        version: u64,
    },
    /// Admitted, expired or left: nothing more to derive.
    Settled,
}

/// Whether a sync took, or the replay window had moved past the read.
#[derive(Debug, PartialEq, Eq)]
pub enum Synced {
    Yes,
    Stale,
    Gone,
}

impl Hub {
    pub fn new(credentials: Arc<Credentials>) -> Self {
        Self {
            rooms: Mutex::new(HashMap::new()),
            credentials,
            next_id: AtomicU64::new(1),
            open: AtomicUsize::new(0),
        }
    }

    /// Registers a socket before its place is read, so no event can slip
    /// between the read and the registration.
    pub fn register(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        ticket: Arc<str>,
    ) -> (SocketId, mpsc::Receiver<Outbound>) {
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let socket = Socket {
            visitor,
            ticket,
            view: View::Syncing,
            tx,
        };
        self.rooms
            .lock()
            .entry(room.clone())
            .or_default()
            .sockets
            .insert(id, socket);
        self.opened(1);
        (id, rx)
    }

    pub fn unregister(&self, room: &RoomId, id: SocketId) {
        let mut rooms = self.rooms.lock();
        if let Some(sockets) = rooms.get_mut(room)
            && sockets.sockets.remove(&id).is_some()
        {
            self.opened(-1);
            if sockets.sockets.is_empty() {
                rooms.remove(room);
            }
        }
    }

    /// Sockets registered on this node now.
    pub fn open_sockets(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    fn opened(&self, change: isize) {
        let now = if change >= 0 {
            self.open
                .fetch_add(change.unsigned_abs(), Ordering::Relaxed)
                + change.unsigned_abs()
        } else {
            self.open
                .fetch_sub(change.unsigned_abs(), Ordering::Relaxed)
                - change.unsigned_abs()
        };
        metrics::gauge!("waitroom_sockets_open").set(now as f64);
    }

    /// Sets a socket's place from a store read, replays what happened since
    /// that read, and sends the socket its status.
    pub fn sync(&self, room: &RoomId, id: SocketId, place: &Place) -> Synced {
        let mut rooms = self.rooms.lock();
        let Some(sockets) = rooms.get_mut(room) else {
            return Synced::Gone;
        };
        if place.line.version >= sockets.line.version {
            sockets.line = place.line;
            sockets.target_url = place.target_url.clone();
        }
        let read_version = place.line.version;
        let replay: Vec<&Movement> = sockets
            .recent
            .iter()
            .filter(|m| m.version > read_version)
            .collect();
        if replay
            .first()
            .is_some_and(|m| m.version != read_version + 1)
        {
            return Synced::Stale;
        }
        let mut state = place.state;
        let mut view = match place.state {
            PlaceState::Waiting { seq, position } => View::Waiting {
                seq,
                position,
                version: read_version,
            },
            _ => View::Settled,
        };
        for movement in replay {
            if let View::Waiting { seq, position, .. } = view {
                view = advance(seq, position, movement, &mut state, place.visitor);
            }
        }
        let RoomSockets {
            sockets: map,
            target_url,
            line,
            ..
        } = sockets;
        let Some(socket) = map.get_mut(&id) else {
            return Synced::Gone;
        };
        socket.view = view;
        let status = self.status(room, socket, state, line, target_url);
        let _ = socket.tx.try_send(Outbound::Text(status));
        if matches!(place.state, PlaceState::Closed) {
            let _ = socket
                .tx
                .try_send(Outbound::Close(CloseCode::Normal, "room closed"));
        }
        Synced::Yes
    }

    fn status(
        &self,
        room: &RoomId,
        socket: &Socket,
        state: PlaceState,
        line: &LineSummary,
        target_url: &str,
    ) -> String {
        Status::build(
            StatusInput {
                room,
                ticket: &socket.ticket,
                visitor: socket.visitor,
                state,
                line,
                target_url,
            },
            &self.credentials,
        )
        .to_json()
    }

    /// Applies one store event to this node's sockets.
    pub fn apply(&self, event: RoomEvent) {
        let mut rooms = self.rooms.lock();
        let Some(sockets) = rooms.get_mut(event.room()) else {
            return;
        };
        let room = event.room().clone();
        match event {
            RoomEvent::Tick {
                admitted,
                departed,
                line,
                ..
            } => {
                let mut departed = departed.to_vec();
                departed.sort_unstable();
                sockets.line = line;
                let movement = sockets.remember(Movement {
                    version: line.version,
                    admitted,
                    departed: departed.into(),
                    by_leaving: false,
                });
                self.fan_out(&room, sockets, movement, true);
            }
            RoomEvent::Left { seq, line, .. } => {
                sockets.line.version = line.version;
                sockets.line.waiting = line.waiting;
                let movement = sockets.remember(Movement {
                    version: line.version,
                    admitted: Arc::new([]),
                    departed: Arc::new([seq]),
                    by_leaving: true,
                });
                // Positions move now; visitors see it with the next tick.
                self.fan_out(&room, sockets, movement, false);
            }
            RoomEvent::Configured {
                line, target_url, ..
            } => {
                sockets.line.rate_per_s = line.rate_per_s;
                sockets.line.paused = line.paused;
                sockets.target_url = target_url;
                let line = sockets.line;
                let target_url = sockets.target_url.clone();
                let dropped = sockets.send_each(|socket| match socket.view {
                    View::Waiting { seq, position, .. } => Some(self.status(
                        &room,
                        socket,
                        PlaceState::Waiting { seq, position },
                        &line,
                        &target_url,
                    )),
                    _ => None,
                });
                self.opened(-(dropped as isize));
            }
            RoomEvent::Closed { .. } => {
                let line = LineSummary::default();
                for socket in sockets.sockets.values() {
                    let status = self.status(&room, socket, PlaceState::Closed, &line, "");
                    let _ = socket.tx.try_send(Outbound::Text(status));
                    let _ = socket
                        .tx
                        .try_send(Outbound::Close(CloseCode::Normal, "room closed"));
                }
                sockets
                    .sockets
                    .values_mut()
                    .for_each(|s| s.view = View::Settled);
                sockets.recent.clear();
            }
        }
    }

    fn fan_out(&self, room: &RoomId, sockets: &mut RoomSockets, movement: usize, notify: bool) {
        let movement = &sockets.recent[movement];
        let line = sockets.line;
        let target_url = sockets.target_url.clone();
        let mut slow = Vec::new();
        for (id, socket) in sockets.sockets.iter_mut() {
            let View::Waiting {
                seq,
                position,
                version,
            } = socket.view
            else {
                continue;
            };
            if version >= movement.version {
                continue;
            }
            let mut state = PlaceState::Waiting { seq, position };
            socket.view = advance(seq, position, movement, &mut state, socket.visitor);
            let settled = matches!(socket.view, View::Settled);
            if notify || settled {
                let status = self.status(room, socket, state, &line, &target_url);
                if socket.tx.try_send(Outbound::Text(status)).is_err() {
                    slow.push(*id);
                }
            }
        }
        let dropped = sockets.drop_slow(slow);
        self.opened(-(dropped as isize));
    }

    /// Every visitor with a waiting socket here, by room, for presence.
    pub fn present_visitors(&self) -> Vec<(RoomId, Vec<VisitorId>)> {
        self.rooms
            .lock()
            .iter()
            .map(|(room, sockets)| {
                let visitors = sockets
                    .sockets
                    .values()
                    .filter(|s| !matches!(s.view, View::Settled))
                    .map(|s| s.visitor)
                    .collect();
                (room.clone(), visitors)
            })
            .collect()
    }

    /// Reads the place of one registered socket from the store and syncs it,
    /// retrying if events raced past the replay window.
    pub async fn load(
        &self,
        store: &dyn Store,
        room: &RoomId,
        id: SocketId,
        visitor: VisitorId,
    ) -> Result<(), crate::admission::store::StoreError> {
        loop {
            let place = store.status(room, visitor).await?;
            if self.sync(room, id, &place) != Synced::Stale {
                return Ok(());
            }
        }
    }

    /// Re-reads every socket's place: after missed events.
    async fn resync_all(&self, store: &dyn Store) {
        let all: Vec<(RoomId, SocketId, VisitorId)> = {
            let mut rooms = self.rooms.lock();
            rooms
                .iter_mut()
                .flat_map(|(room, sockets)| {
                    sockets.sockets.iter_mut().map(move |(id, socket)| {
                        socket.view = View::Syncing;
                        (room.clone(), *id, socket.visitor)
                    })
                })
                .collect()
        };
        tracing::warn!(sockets = all.len(), "resyncing every socket from the store");
        for (room, id, visitor) in all {
            if let Err(error) = self.load(store, &room, id, visitor).await {
                tracing::warn!(%room, %error, "resync failed");
            }
        }
    }

    /// Sends every socket the same message (dropping those too slow for it).
    fn tell_everyone(&self, text: &str) {
        for sockets in self.rooms.lock().values_mut() {
            let dropped = sockets.send_each(|_| Some(text.to_string()));
            self.opened(-(dropped as isize));
        }
    }

    /// Applies the store's events until shutdown.
    pub async fn run(self: Arc<Self>, store: Arc<dyn Store>, mut shutdown: watch::Receiver<bool>) {
        let mut events = store.subscribe();
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(StoreEvent::Room(event)) => self.apply(event),
                    Ok(StoreEvent::Interrupted) => self.tell_everyone(STORE_DOWN),
                    Ok(StoreEvent::Resumed) => {
                        tracing::info!("store is back");
                        self.resync_all(store.as_ref()).await;
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "hub fell behind the store's events");
                        self.resync_all(store.as_ref()).await;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = shutdown.changed() => break,
            }
        }
    }
}

impl RoomSockets {
    /// Keeps a movement for replay; returns its index in `recent`.
    fn remember(&mut self, movement: Movement) -> usize {
        if self.recent.len() == REPLAY_EVENTS {
            self.recent.pop_front();
        }
        self.recent.push_back(movement);
        self.recent.len() - 1
    }

    /// Returns how many sockets were too slow for it (and are forgotten).
    #[must_use]
    fn send_each(&mut self, mut message: impl FnMut(&Socket) -> Option<String>) -> usize {
        let mut slow = Vec::new();
        for (id, socket) in &self.sockets {
            if let Some(text) = message(socket)
                && socket.tx.try_send(Outbound::Text(text)).is_err()
            {
                slow.push(*id);
            }
        }
        self.drop_slow(slow)
    }

    /// Forgets sockets whose queue is full: dropping the sender ends their
    /// session loop, which closes the socket so the client reconnects.
    /// Returns how many it forgot.
    #[must_use]
    fn drop_slow(&mut self, slow: Vec<SocketId>) -> usize {
        let mut dropped = 0;
        for id in slow {
            if self.sockets.remove(&id).is_some() {
                metrics::counter!("waitroom_sockets_dropped_slow_total").increment(1);
                dropped += 1;
            }
        }
        dropped
    }
}

/// Moves a waiting visitor past one event.
fn advance(
    seq: u64,
    position: u64,
    movement: &Movement,
    state: &mut PlaceState,
    visitor: VisitorId,
) -> View {
    let admitted = movement.admitted.binary_search_by_key(&seq, |a| a.seq).ok();
    if let Some(admission) = admitted
        .map(|i| &movement.admitted[i])
        .filter(|a| a.visitor == visitor)
    {
        *state = PlaceState::Admitted {
            admitted_at: admission.admitted_at,
            expires_at: admission.expires_at,
        };
        return View::Settled;
    }
    if movement.departed.binary_search(&seq).is_ok() {
        *state = if movement.by_leaving {
            PlaceState::Left
        } else {
            PlaceState::Expired
        };
        return View::Settled;
    }
    let position = position.saturating_sub(movement.ahead_of(seq)).max(1);
    *state = PlaceState::Waiting { seq, position };
    View::Waiting {
        seq,
        position,
        version: movement.version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::model::LineSummary;

    fn room() -> RoomId {
        RoomId::parse("r").unwrap()
    }

    fn tick(version: u64, admitted: &[(u64, VisitorId)], departed: &[u64]) -> RoomEvent {
        RoomEvent::Tick {
            room: room(),
            admitted: admitted
                .iter()
                .map(|(seq, visitor)| Admission {
                    visitor: *visitor,
                    seq: *seq,
                    admitted_at: 0,
                    expires_at: 60_000,
                })
                .collect(),
            departed: departed.into(),
            line: LineSummary {
                version,
                ..LineSummary::default()
            },
        }
    }

    fn place(visitor: VisitorId, seq: u64, position: u64, version: u64) -> Place {
        Place {
            visitor,
            state: PlaceState::Waiting { seq, position },
            line: LineSummary {
                version,
                ..LineSummary::default()
            },
            target_url: "/t".into(),
        }
    }

    fn position_in(message: Outbound) -> Option<u64> {
        let Outbound::Text(text) = message else {
            panic!("expected a status")
        };
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["position"].as_u64()
    }

    #[test]
    fn events_between_the_read_and_the_sync_are_replayed() {
        let hub = Hub::new(Arc::new(Credentials::from_secret("s")));
        let me = VisitorId::random();
        let (id, mut rx) = hub.register(&room(), me, "ticket".into());
        // Read at version 1: seq 10 at position 8. Then, before the sync,
        // version 2 admits two and version 3 drops seq 7 (ahead) and 12 (behind).
        hub.apply(tick(
            2,
            &[(1, VisitorId::random()), (2, VisitorId::random())],
            &[],
        ));
        hub.apply(tick(3, &[], &[12, 7]));
        assert_eq!(hub.sync(&room(), id, &place(me, 10, 8, 1)), Synced::Yes);
        assert_eq!(position_in(rx.try_recv().unwrap()), Some(5));
        // Later events apply once; older ones are ignored.
        hub.apply(tick(4, &[(3, VisitorId::random())], &[]));
        assert_eq!(position_in(rx.try_recv().unwrap()), Some(4));
    }

    #[test]
    fn a_read_older_than_the_replay_window_asks_for_another() {
        let hub = Hub::new(Arc::new(Credentials::from_secret("s")));
        let me = VisitorId::random();
        let (id, _rx) = hub.register(&room(), me, "ticket".into());
        for version in 2..(REPLAY_EVENTS as u64 + 10) {
            hub.apply(tick(version, &[], &[]));
        }
        assert_eq!(hub.sync(&room(), id, &place(me, 10, 8, 1)), Synced::Stale);
    }

    #[test]
    fn a_slow_socket_is_dropped_not_buffered() {
        let hub = Hub::new(Arc::new(Credentials::from_secret("s")));
        let me = VisitorId::random();
        let (id, mut rx) = hub.register(&room(), me, "ticket".into());
        hub.sync(&room(), id, &place(me, 1_000, 1_000, 0));
        for version in 1..=(OUTBOUND_QUEUE as u64 + 5) {
            hub.apply(tick(version, &[], &[]));
        }
        let mut received = 0;
        while let Ok(message) = rx.try_recv() {
            assert!(matches!(message, Outbound::Text(_)));
            received += 1;
        }
        assert_eq!(received, OUTBOUND_QUEUE, "the queue is bounded");
        assert!(rx.is_closed() || rx.try_recv().is_err());
        assert!(
            hub.present_visitors().iter().all(|(_, v)| v.is_empty()),
            "the slow socket is gone"
        );
    }
}
