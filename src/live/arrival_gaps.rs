//! Arrivals this node could not record. While the store is unreachable,
//! `/api/verify` lets passes through on their signature alone, so the store
//! never hears that their visitors arrived (`arrival_grace_s`). Before a
//! room's first tick after that, the promoter has the store give every
//! pass not seen yet its whole grace again, counted from the store's
//! return (`op::ResumeArrivals`), so nobody who arrived meanwhile is
//! reclaimed as a no-show.
//!
//! A room is due for that when this node failed to reach the store for it
//! (an arrival or a tick), or when this node lost the store altogether
//! (its events stopped) since the room's last resumption here: then any
//! node may have let passes through, so every node asks before its first
//! tick of each room, and whichever asks first after the return resumes.
//! The others' asking changes nothing: each tick tells the room's count of
//! resumptions, and a node asks with the count it last saw, so the store
//! knows a resumption made since then answered the same outage.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::words::RoomId;

#[derive(Default)]
pub struct ArrivalGaps {
    /// How many times this node lost the store.
    losses: AtomicU64,
    rooms: Mutex<Rooms>,
}

#[derive(Default)]
struct Rooms {
    /// Rooms where a call for an arrival or a tick failed since their last
    /// resumption.
    failed: HashSet<RoomId>,
    /// Per room: `losses` as of its last resumption (none: 0).
    resumed_after: HashMap<RoomId, u64>,
    /// Per room: its count of resumptions, as its last tick here said.
    seen: HashMap<RoomId, u64>,
}

/// A room's arrivals to resume before its tick: hand it back to
/// [`ArrivalGaps::resumed`] once the store has answered.
#[must_use]
pub struct Due {
    losses: u64,
    /// The room's count of resumptions this node last saw, if any.
    pub seen: Option<u64>,
}

impl ArrivalGaps {
    /// This node lost the store (its events stopped).
    pub fn store_lost(&self) {
        self.losses.fetch_add(1, Ordering::Relaxed);
    }

    /// The store could not be reached for `room`: an arrival went
    /// unrecorded, or a tick failed.
    pub fn failed_in(&self, room: &RoomId) {
        self.rooms.lock().failed.insert(room.clone());
    }

    /// A tick of `room` answered, with the room's count of resumptions.
    pub fn ticked(&self, room: &RoomId, resumptions: u64) {
        let mut rooms = self.rooms.lock();
        if rooms.seen.get(room) != Some(&resumptions) {
            rooms.seen.insert(room.clone(), resumptions);
        }
    }

    /// Whether `room`'s arrivals are to be resumed before its next tick.
    /// Taken: if resuming fails, say [`ArrivalGaps::failed_in`].
    pub fn due(&self, room: &RoomId) -> Option<Due> {
        let losses = self.losses.load(Ordering::Relaxed);
        let mut rooms = self.rooms.lock();
        let failed = rooms.failed.remove(room);
        let lost_since = rooms.resumed_after.get(room).copied().unwrap_or(0) < losses;
        (failed || lost_since).then(|| Due {
            losses,
            seen: rooms.seen.get(room).copied(),
        })
    }

    /// The store answered `due` with the room's count of resumptions.
    pub fn resumed(&self, room: &RoomId, due: Due, resumptions: u64) {
        let mut rooms = self.rooms.lock();
        let after = rooms.resumed_after.entry(room.clone()).or_default();
        *after = (*after).max(due.losses);
        rooms.seen.insert(room.clone(), resumptions);
    }

    /// `room` is gone: nothing to remember for it.
    pub fn forget(&self, room: &RoomId) {
        let mut rooms = self.rooms.lock();
        rooms.failed.remove(room);
        rooms.resumed_after.remove(room);
        rooms.seen.remove(room);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(id: &str) -> RoomId {
        RoomId::parse(id).unwrap()
    }

    #[test]
    fn nothing_is_due_until_the_store_fails_for_a_room_or_is_lost() {
        let gaps = ArrivalGaps::default();
        assert!(gaps.due(&room("a")).is_none());

        gaps.ticked(&room("a"), 0);
        gaps.failed_in(&room("a"));
        let due = gaps.due(&room("a")).expect("an arrival failed there");
        assert_eq!(due.seen, Some(0), "what its last tick said");
        assert!(gaps.due(&room("b")).is_none(), "only in that room");
        gaps.resumed(&room("a"), due, 1);
        assert!(gaps.due(&room("a")).is_none(), "once");

        gaps.store_lost();
        for id in ["a", "b"] {
            let due = gaps.due(&room(id)).expect("every room, once");
            assert_eq!(due.seen, (id == "a").then_some(1));
            gaps.resumed(&room(id), due, 2);
            assert!(gaps.due(&room(id)).is_none());
        }
    }

    #[test]
    fn a_resumption_that_failed_is_due_again() {
        let gaps = ArrivalGaps::default();
        gaps.failed_in(&room("a"));
        let _taken = gaps.due(&room("a")).unwrap();
        gaps.failed_in(&room("a"));
        assert!(gaps.due(&room("a")).is_some());

        gaps.store_lost();
        let taken = gaps.due(&room("b")).unwrap();
        gaps.store_lost(); // lost again while resuming
        gaps.resumed(&room("b"), taken, 1);
        assert!(gaps.due(&room("b")).is_some(), "the second loss counts");
    }
}
