//! This node's sockets, by room. The hub turns each store event into a status
//! for every socket it concerns, deriving positions from the event alone: a
//! socket's position is read from the store once, when it connects, and after
//! that only ever lowered by the admissions and departures ahead of it.
//! The hub also writes those statuses itself, to each socket's connection,
//! outside its lock and over all cores: a tick costs one `write` per socket.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use actix_http::ws::{CloseCode, CloseReason, OpCode, Parser};
use actix_web::web::BytesMut;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use super::connection::{Connection, Refused, reason};

use crate::store::Store;
use crate::words::credentials::Credentials;
use crate::words::status::{Status, StatusInput};
use crate::words::{
    Admission, LineSummary, Place, PlaceState, RoomEvent, RoomId, StoreEvent, VisitorId,
};

/// Position-moving events kept per room, to replay to a socket whose initial
/// read raced with them.
const REPLAY_EVENTS: usize = 64;

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
    connection: Arc<Connection>,
}

/// The messages of one fan-out: encoded under the hub's lock into one
/// buffer (no allocation per socket), written after it.
#[derive(Default)]
struct Outbox {
    frames: BytesMut,
    json: Vec<u8>,
    sends: Vec<(SocketId, Arc<Connection>, Range<usize>)>,
    /// Closes every socket once its message is written.
    close_after: Option<CloseReason>,
}

impl Outbox {
    /// Queues a status for one socket.
    fn status(&mut self, id: SocketId, socket: &Socket, status: &Status) {
        self.json.clear();
        serde_json::to_writer(&mut self.json, status).expect("a Status always serializes");
        let frame = encode(&mut self.frames, &self.json);
        self.send(id, socket, frame);
    }

    /// Encodes a text message once, for [`Outbox::send`] to as many sockets as it goes to.
    fn text(&mut self, text: &[u8]) -> Range<usize> {
        encode(&mut self.frames, text)
    }

    fn send(&mut self, id: SocketId, socket: &Socket, frame: Range<usize>) {
        self.sends.push((id, socket.connection.clone(), frame));
    }

    /// Writes every message, spread over the machine's cores when there
    /// are many (each is about one `write` to the kernel). Returns the
    /// sockets that refused theirs, and why.
    fn deliver(self) -> Vec<(SocketId, Refused)> {
        let Outbox {
            frames,
            sends,
            close_after,
            ..
        } = self;
        let write = |part: &[(SocketId, Arc<Connection>, Range<usize>)]| {
            let mut refused = Vec::new();
            for (id, connection, frame) in part {
                if let Err(why) = connection.send_frame(&frames[frame.clone()]) {
                    refused.push((*id, why));
                }
                if let Some(close) = &close_after {
                    connection.close(close.clone());
                }
            }
            refused
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |cores| cores.get())
            .min(sends.len() / SOCKETS_PER_THREAD);
        if threads <= 1 {
            return write(&sends);
        }
        let write = &write;
        std::thread::scope(|scope| {
            let parts: Vec<_> = sends
                .chunks(sends.len().div_ceil(threads))
                .map(|part| scope.spawn(move || write(part)))
                .collect();
            parts
                .into_iter()
                .flat_map(|part| part.join().expect("a fan-out thread panicked"))
                .collect()
        })
    }
}

/// Appends one text frame to `frames`; returns where it lies.
fn encode(frames: &mut BytesMut, text: &[u8]) -> Range<usize> {
    let start = frames.len();
    Parser::write_message(frames, text, OpCode::Text, true, false);
    start..frames.len()
}

/// Fewest sockets worth a fan-out thread of their own.
const SOCKETS_PER_THREAD: usize = 2048;

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
    ) -> (SocketId, Arc<Connection>) {
        let connection = Arc::new(Connection::new());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let socket = Socket {
            visitor,
            ticket,
            view: View::Syncing,
            connection: connection.clone(),
        };
        self.rooms
            .lock()
            .entry(room.clone())
            .or_default()
            .sockets
            .insert(id, socket);
        self.opened(1);
        (id, connection)
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
        let _ = socket
            .connection
            .send(OpCode::Text, status.to_json().as_bytes());
        if matches!(place.state, PlaceState::Closed) {
            socket
                .connection
                .close(reason(CloseCode::Normal, "room closed"));
        }
        Synced::Yes
    }

    fn status<'a>(
        &self,
        room: &'a RoomId,
        socket: &'a Socket,
        state: PlaceState,
        line: &'a LineSummary,
        target_url: &'a str,
    ) -> Status<'a> {
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
    }

    /// Applies one store event to this node's sockets: their views and
    /// messages are worked out under the hub's lock, and written after it,
    /// so that sockets connecting meanwhile do not wait on the writes.
    pub fn apply(&self, event: RoomEvent) {
        let room = event.room().clone();
        let outbox = {
            let mut rooms = self.rooms.lock();
            let Some(sockets) = rooms.get_mut(&room) else {
                return;
            };
            self.prepare(&room, sockets, event)
        };
        let refused = outbox.deliver();
        self.forget(&room, refused);
    }

    fn prepare(&self, room: &RoomId, sockets: &mut RoomSockets, event: RoomEvent) -> Outbox {
        let mut outbox = Outbox::default();
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
                self.move_places(room, sockets, movement, true, &mut outbox);
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
                self.move_places(room, sockets, movement, false, &mut outbox);
            }
            RoomEvent::Configured {
                line, target_url, ..
            } => {
                sockets.line.rate_per_s = line.rate_per_s;
                sockets.line.paused = line.paused;
                sockets.target_url = target_url;
                for (id, socket) in &sockets.sockets {
                    if let View::Waiting { seq, position, .. } = socket.view {
                        let state = PlaceState::Waiting { seq, position };
                        let status =
                            self.status(room, socket, state, &sockets.line, &sockets.target_url);
                        outbox.status(*id, socket, &status);
                    }
                }
            }
            RoomEvent::Closed { .. } => {
                let line = LineSummary::default();
                for (id, socket) in &mut sockets.sockets {
                    let status = self.status(room, socket, PlaceState::Closed, &line, "");
                    outbox.status(*id, socket, &status);
                    socket.view = View::Settled;
                }
                outbox.close_after = Some(reason(CloseCode::Normal, "room closed"));
                sockets.recent.clear();
            }
        }
        outbox
    }

    /// Moves every waiting socket past one movement, and queues a status
    /// for those that should hear of it.
    fn move_places(
        &self,
        room: &RoomId,
        sockets: &mut RoomSockets,
        movement: usize,
        notify: bool,
        outbox: &mut Outbox,
    ) {
        let movement = &sockets.recent[movement];
        for (id, socket) in &mut sockets.sockets {
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
            if notify || matches!(socket.view, View::Settled) {
                let status = self.status(room, socket, state, &sockets.line, &sockets.target_url);
                outbox.status(*id, socket, &status);
            }
        }
    }

    /// Forgets the sockets that refused a message: too slow to read (their
    /// connection then closes itself with 1013, so the client reconnects)
    /// or already closing.
    fn forget(&self, room: &RoomId, refused: Vec<(SocketId, Refused)>) {
        if refused.is_empty() {
            return;
        }
        let mut rooms = self.rooms.lock();
        let Some(sockets) = rooms.get_mut(room) else {
            return;
        };
        let mut forgotten = 0;
        for (id, why) in refused {
            if sockets.sockets.remove(&id).is_some() {
                forgotten += 1;
            }
            if why == Refused::TooSlow {
                metrics::counter!("waitroom_sockets_dropped_slow_total").increment(1);
            }
        }
        self.opened(-(forgotten as isize));
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
    ) -> Result<(), crate::store::StoreError> {
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
        let outboxes: Vec<(RoomId, Outbox)> = self
            .rooms
            .lock()
            .iter()
            .map(|(room, sockets)| {
                let mut outbox = Outbox::default();
                let frame = outbox.text(text.as_bytes());
                for (id, socket) in &sockets.sockets {
                    outbox.send(*id, socket, frame.clone());
                }
                (room.clone(), outbox)
            })
            .collect();
        for (room, outbox) in outboxes {
            let refused = outbox.deliver();
            self.forget(&room, refused);
        }
    }

    /// Runs a fan-out (a `write` to every socket) on a blocking thread, not
    /// on the async workers it would hold up.
    async fn off_the_workers(self: &Arc<Self>, fan_out: impl FnOnce(&Hub) + Send + 'static) {
        let hub = self.clone();
        // A fan-out cancelled by the runtime shutting down is no error.
        if let Err(error) = tokio::task::spawn_blocking(move || fan_out(&hub)).await
            && error.is_panic()
        {
            tracing::error!(%error, "a fan-out panicked");
        }
    }

    /// Applies the store's events until shutdown.
    pub async fn run(self: Arc<Self>, store: Arc<dyn Store>, mut shutdown: watch::Receiver<bool>) {
        let mut events = store.subscribe();
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(StoreEvent::Room(event)) => self.off_the_workers(move |hub| hub.apply(event)).await,
                    Ok(StoreEvent::Interrupted) => self.off_the_workers(|hub| hub.tell_everyone(STORE_DOWN)).await,
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
    use crate::live::connection::{Ending, MAX_PENDING_BYTES};
    use crate::words::LineSummary;

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

    /// The text messages a connection without a socket has queued, oldest first.
    fn messages(connection: &Connection) -> Vec<serde_json::Value> {
        use actix_codec::Decoder;
        use actix_http::ws::{Codec, Frame};
        let mut bytes = BytesMut::from(&connection.queued().0[..]);
        let mut codec = Codec::new().client_mode();
        let mut messages = Vec::new();
        while let Some(frame) = codec.decode(&mut bytes).expect("valid frames") {
            let Frame::Text(text) = frame else {
                panic!("expected a text frame, got {frame:?}")
            };
            messages.push(serde_json::from_slice(&text).expect("JSON"));
        }
        messages
    }

    fn positions(connection: &Connection) -> Vec<Option<u64>> {
        messages(connection)
            .iter()
            .map(|message| message["position"].as_u64())
            .collect()
    }

    #[test]
    fn events_between_the_read_and_the_sync_are_replayed() {
        let hub = Hub::new(Arc::new(Credentials::from_secret("s")));
        let me = VisitorId::random();
        let (id, connection) = hub.register(&room(), me, "ticket".into());
        // Read at version 1: seq 10 at position 8. Then, before the sync,
        // version 2 admits two and version 3 drops seq 7 (ahead) and 12 (behind).
        hub.apply(tick(
            2,
            &[(1, VisitorId::random()), (2, VisitorId::random())],
            &[],
        ));
        hub.apply(tick(3, &[], &[12, 7]));
        assert_eq!(hub.sync(&room(), id, &place(me, 10, 8, 1)), Synced::Yes);
        assert_eq!(positions(&connection), [Some(5)]);
        // Later events apply once; older ones are ignored.
        hub.apply(tick(4, &[(3, VisitorId::random())], &[]));
        assert_eq!(positions(&connection), [Some(5), Some(4)]);
    }

    #[test]
    fn a_read_older_than_the_replay_window_asks_for_another() {
        let hub = Hub::new(Arc::new(Credentials::from_secret("s")));
        let me = VisitorId::random();
        let (id, _connection) = hub.register(&room(), me, "ticket".into());
        for version in 2..(REPLAY_EVENTS as u64 + 10) {
            hub.apply(tick(version, &[], &[]));
        }
        assert_eq!(hub.sync(&room(), id, &place(me, 10, 8, 1)), Synced::Stale);
    }

    #[test]
    fn a_slow_socket_is_dropped_not_buffered() {
        let hub = Hub::new(Arc::new(Credentials::from_secret("s")));
        let me = VisitorId::random();
        // No socket attached: nothing is written, everything queues.
        let (id, connection) = hub.register(&room(), me, "ticket".into());
        hub.sync(&room(), id, &place(me, 1_000, 1_000, 0));
        let status_bytes = connection.queued().0.len();
        let fits = MAX_PENDING_BYTES / status_bytes;
        for version in 1..=(fits as u64 + 5) {
            hub.apply(tick(version, &[], &[]));
        }
        let (queued, ending) = connection.queued();
        assert!(queued.len() <= MAX_PENDING_BYTES, "the queue is bounded");
        assert_eq!(messages(&connection).len(), fits, "it took what fit");
        assert_eq!(
            ending,
            Some(Ending::Close(Some(reason(
                CloseCode::Again,
                "too slow to read; reconnect"
            )))),
            "the socket closes with 1013 so the client reconnects"
        );
        assert_eq!(hub.open_sockets(), 0);
        assert!(
            hub.present_visitors().iter().all(|(_, v)| v.is_empty()),
            "the slow socket is gone"
        );
    }
}
