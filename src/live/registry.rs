//! This node's sockets, by room: who each one is, what the node knows of
//! its place, and its outlet. HTTP workers register and unregister sockets
//! here; the hub reads and updates the views. The lock is held only to read
//! or change views: nothing is encoded, signed or sent under it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use actix_ws::CloseCode;

use super::outlet::{Outlet, Refused, close_reason};
use super::positions::{Recent, View};
use crate::words::{LineSummary, RoomFacts, RoomId, VisitorId};

pub type SocketId = u64;

/// Sockets one ticket may hold at once on a node (tabs and devices of one
/// visitor): a newer one replaces the oldest, so one ticket can never fill
/// a node's sockets.
pub const SOCKETS_PER_TICKET: usize = 4;

#[derive(Default)]
pub struct Registry {
    rooms: Mutex<HashMap<RoomId, RoomSockets>>,
    next_id: AtomicU64,
    /// Sockets registered now, on this node.
    open: AtomicUsize,
}

/// One room's sockets on this node, and what the node knows of the room.
#[derive(Default)]
pub struct RoomSockets {
    pub sockets: HashMap<SocketId, Socket>,
    pub facts: Arc<RoomFacts>,
    pub line: LineSummary,
    pub recent: Recent,
    /// Each visitor's sockets here, oldest first.
    by_visitor: HashMap<VisitorId, Vec<SocketId>>,
    /// Numbers every status prepared for this room's sockets, so that an
    /// outlet can drop one that was overtaken on the way (see `Outlet`).
    last_sequence: u64,
}

impl RoomSockets {
    pub fn next_sequence(&mut self) -> u64 {
        self.last_sequence += 1;
        self.last_sequence
    }

    /// Every socket's outlet, for a message to all of them.
    pub fn outlets(&self) -> Vec<(SocketId, Arc<Outlet>)> {
        self.sockets
            .iter()
            .map(|(id, socket)| (*id, socket.outlet.clone()))
            .collect()
    }

    fn insert(&mut self, id: SocketId, socket: Socket) -> Option<Socket> {
        let mine = self.by_visitor.entry(socket.visitor).or_default();
        mine.push(id);
        let replaced = (mine.len() > SOCKETS_PER_TICKET).then(|| mine.remove(0));
        self.sockets.insert(id, socket);
        replaced.and_then(|oldest| self.remove(oldest))
    }

    fn remove(&mut self, id: SocketId) -> Option<Socket> {
        let socket = self.sockets.remove(&id)?;
        if let Some(mine) = self.by_visitor.get_mut(&socket.visitor) {
            mine.retain(|other| *other != id);
            if mine.is_empty() {
                self.by_visitor.remove(&socket.visitor);
            }
        }
        Some(socket)
    }
}

pub struct Socket {
    pub visitor: VisitorId,
    pub ticket: Arc<str>,
    pub view: View,
    pub outlet: Arc<Outlet>,
    /// The code group whose line the visitor waits in, as last read or moved.
    pub priority: Option<Arc<str>>,
}

impl Registry {
    /// Registers a socket before its place is read, so no event can slip
    /// between the read and the registration.
    pub fn register(
        self: &Arc<Self>,
        room: &RoomId,
        visitor: VisitorId,
        ticket: Arc<str>,
        outlet: Arc<Outlet>,
    ) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let socket = Socket {
            visitor,
            ticket,
            view: View::Syncing,
            outlet,
            priority: None,
        };
        let replaced = self
            .rooms
            .lock()
            .entry(room.clone())
            .or_default()
            .insert(id, socket);
        match replaced {
            Some(oldest) => {
                oldest.outlet.close(close_reason(
                    CloseCode::Policy,
                    "replaced by a newer connection with the same ticket",
                ));
                metrics::counter!("waitroom_sockets_replaced_total").increment(1);
            }
            None => self.opened(1),
        }
        Registration {
            registry: self.clone(),
            room: room.clone(),
            id,
        }
    }

    /// Removes sockets (gone, or too slow to keep); says how many were here.
    pub fn remove(&self, room: &RoomId, ids: &[SocketId]) -> usize {
        let mut rooms = self.rooms.lock();
        let Some(sockets) = rooms.get_mut(room) else {
            return 0;
        };
        let removed = ids
            .iter()
            .filter(|id| sockets.remove(**id).is_some())
            .count();
        if sockets.sockets.is_empty() {
            rooms.remove(room);
        }
        drop(rooms);
        self.opened(-(removed as isize));
        removed
    }

    /// Forgets the sockets that refused a message: too slow to read (their
    /// loop then closes them with 1013, so the client reconnects) or closing.
    pub fn forget(&self, room: &RoomId, refused: Vec<(SocketId, Refused)>) {
        if refused.is_empty() {
            return;
        }
        let slow = refused
            .iter()
            .filter(|(_, why)| *why == Refused::TooSlow)
            .count();
        metrics::counter!("waitroom_sockets_dropped_slow_total").increment(slow as u64);
        let ids: Vec<SocketId> = refused.into_iter().map(|(id, _)| id).collect();
        self.remove(room, &ids);
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

    /// Runs `f` on one room's sockets, if the room has any here.
    pub fn with_room<R>(&self, room: &RoomId, f: impl FnOnce(&mut RoomSockets) -> R) -> Option<R> {
        self.rooms.lock().get_mut(room).map(f)
    }

    /// Runs `f` on every room's sockets.
    pub fn each_room<R>(&self, mut f: impl FnMut(&RoomId, &mut RoomSockets) -> R) -> Vec<R> {
        self.rooms
            .lock()
            .iter_mut()
            .map(|(room, sockets)| f(room, sockets))
            .collect()
    }

    /// Every visitor with a socket here whose place is still moving, by
    /// room, for presence.
    pub fn present_visitors(&self) -> Vec<(RoomId, Vec<VisitorId>)> {
        self.each_room(|room, sockets| {
            let visitors = sockets
                .sockets
                .values()
                .filter(|s| !matches!(s.view, View::Settled))
                .map(|s| s.visitor)
                .collect();
            (room.clone(), visitors)
        })
    }
}

/// A socket's place in the registry, given up when dropped, however the
/// socket ends.
pub struct Registration {
    registry: Arc<Registry>,
    pub room: RoomId,
    pub id: SocketId,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.remove(&self.room, &[self.id]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_holds_a_bounded_number_of_sockets_newest_first() {
        let registry = Arc::new(Registry::default());
        let room = RoomId::parse("r").unwrap();
        let me = VisitorId(1);
        let outlets: Vec<_> = (0..SOCKETS_PER_TICKET + 2)
            .map(|_| Arc::new(Outlet::recording(10)))
            .collect();
        let registrations: Vec<_> = outlets
            .iter()
            .map(|outlet| registry.register(&room, me, "t".into(), outlet.clone()))
            .collect();
        assert_eq!(registry.open_sockets(), SOCKETS_PER_TICKET);
        for (i, outlet) in outlets.iter().enumerate() {
            let closing = outlet.recorded().1;
            if i < 2 {
                assert_eq!(closing.expect("replaced").code, CloseCode::Policy);
            } else {
                assert!(closing.is_none(), "socket {i} is kept");
            }
        }
        // Another visitor is not affected, and a replaced socket's own
        // ending changes no count.
        let _other = registry.register(
            &room,
            VisitorId(2),
            "u".into(),
            Arc::new(Outlet::recording(1)),
        );
        drop(registrations);
        assert_eq!(registry.open_sockets(), 1);
    }
}
