//! Positions from events alone. A waiting socket's place is read from the
//! store once, when it connects; after that it only moves past the
//! admissions and departures that the room's events report, so a tick costs
//! the store nothing per waiting visitor. Pure functions: no locks, no I/O.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::words::draw::EntryId;
use crate::words::{Admission, Order, Place, PlaceState, VisitorId};

/// Position-moving events kept per room, to replay to a socket whose first
/// read raced with them.
pub const REPLAY_EVENTS: usize = 64;

/// One position-moving event: who left the head (admitted, in line order)
/// and which places in the order left from anywhere else (sorted), or who
/// entered the priority line (ahead of everyone after them).
#[derive(Debug, Clone)]
pub struct Movement {
    pub version: u64,
    pub admitted: Arc<[Admission]>,
    pub departed: Arc<[Order]>,
    /// Whether `departed` gave up their places (`left`) or were dropped as absent.
    pub by_leaving: bool,
    pub entered: Option<Arc<Entering>>,
}

/// A visitor who took a place in the priority line: new, or moved there
/// from `from` in the general line.
#[derive(Debug, Clone)]
pub struct Entering {
    pub visitor: VisitorId,
    pub order: Order,
    pub from: Option<Order>,
    pub group: Arc<str>,
    /// Their position once entered, as the store counted it.
    pub position: u64,
}

impl Movement {
    /// A tick's movement; `departed` need not be sorted.
    pub fn tick(version: u64, admitted: Arc<[Admission]>, departed: &[Order]) -> Self {
        let mut departed = departed.to_vec();
        departed.sort_unstable();
        Self {
            version,
            admitted,
            departed: departed.into(),
            by_leaving: false,
            entered: None,
        }
    }

    /// A visitor entering the priority line.
    pub fn entering(version: u64, entering: Entering) -> Self {
        Self {
            version,
            admitted: Arc::new([]),
            departed: Arc::new([]),
            by_leaving: false,
            entered: Some(Arc::new(entering)),
        }
    }

    /// The group `visitor` moved into, if this movement moved them.
    pub fn moved(&self, visitor: VisitorId) -> Option<&Arc<str>> {
        self.entered
            .as_ref()
            .filter(|e| e.visitor == visitor)
            .map(|e| &e.group)
    }

    /// One waiting visitor giving up the place.
    pub fn leaving(version: u64, order: Order) -> Self {
        Self {
            version,
            admitted: Arc::new([]),
            departed: Arc::new([order]),
            by_leaving: true,
            entered: None,
        }
    }

    /// How many of those who moved were ahead of `order` and are gone.
    fn ahead_of(&self, order: Order) -> u64 {
        let moved_away = self
            .entered
            .as_ref()
            .and_then(|e| e.from)
            .is_some_and(|from| from < order);
        self.admitted.len() as u64
            + self.departed.partition_point(|d| *d < order) as u64
            + u64::from(moved_away)
    }

    /// How many took a place ahead of `order`.
    fn came_ahead_of(&self, order: Order) -> u64 {
        u64::from(self.entered.as_ref().is_some_and(|e| e.order < order))
    }
}

/// What a node knows of one socket's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Registered; its place is being read from the store.
    Syncing,
    /// In the pre-queue: no position moves until the draw, after which the
    /// place is read again.
    PreQueue { entry: EntryId },
    /// Waiting at `position`, correct as of room version `version`.
    Waiting {
        order: Order,
        position: u64,
        version: u64,
    },
    /// Admitted, expired, left or closed: nothing more to derive.
    Settled,
}

impl View {
    /// The view a place read from the store starts from.
    pub fn of(place: &Place) -> Self {
        match place.state {
            PlaceState::Waiting { order, position } => View::Waiting {
                order,
                position,
                version: place.line.version,
            },
            PlaceState::PreQueue { entry } => View::PreQueue { entry },
            _ => View::Settled,
        }
    }
}

/// Moves a view past one movement. A view already at or past the
/// movement's version, or not waiting, is returned as it was (`None`).
pub fn advance(view: View, visitor: VisitorId, movement: &Movement) -> Option<(View, PlaceState)> {
    let View::Waiting {
        order,
        position,
        version,
    } = view
    else {
        return None;
    };
    if version >= movement.version {
        return None;
    }
    if let Some(entering) = movement
        .entered
        .as_ref()
        .filter(|e| e.visitor == visitor && e.from == Some(order))
    {
        let view = View::Waiting {
            order: entering.order,
            position: entering.position,
            version: movement.version,
        };
        let state = PlaceState::Waiting {
            order: entering.order,
            position: entering.position,
        };
        return Some((view, state));
    }
    let admitted = movement
        .admitted
        .binary_search_by_key(&order, |a| a.order)
        .ok()
        .map(|i| &movement.admitted[i])
        .filter(|a| a.visitor == visitor);
    if let Some(admission) = admitted {
        let state = PlaceState::Admitted {
            admitted_at: admission.admitted_at,
            expires_at: admission.expires_at,
        };
        return Some((View::Settled, state));
    }
    if movement.departed.binary_search(&order).is_ok() {
        let state = if movement.by_leaving {
            PlaceState::Left
        } else {
            // A tick's departures who did not leave were swept as away.
            PlaceState::Away
        };
        return Some((View::Settled, state));
    }
    // Never below 1; up only for someone entering the priority line ahead.
    let position = (position + movement.came_ahead_of(order))
        .saturating_sub(movement.ahead_of(order))
        .max(1);
    let view = View::Waiting {
        order,
        position,
        version: movement.version,
    };
    Some((view, PlaceState::Waiting { order, position }))
}

/// A read older than the replay window: read the place again.
#[derive(Debug, PartialEq, Eq)]
pub struct Stale;

/// A room's recent movements, oldest first.
#[derive(Debug, Default)]
pub struct Recent(VecDeque<Movement>);

impl Recent {
    /// Keeps a movement for replay, forgetting the oldest past [`REPLAY_EVENTS`].
    pub fn remember(&mut self, movement: Movement) -> &Movement {
        if self.0.len() == REPLAY_EVENTS {
            self.0.pop_front();
        }
        self.0.push_back(movement);
        self.0.back().expect("just pushed")
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Where a place read from the store stands now, after the movements
    /// that happened since the read; [`Stale`] if some of them are no longer
    /// kept.
    pub fn catch_up(&self, place: &Place) -> Result<(View, PlaceState), Stale> {
        let read_version = place.line.version;
        let mut replay = self
            .0
            .iter()
            .filter(|m| m.version > read_version)
            .peekable();
        if replay
            .peek()
            .is_some_and(|first| first.version != read_version + 1)
        {
            return Err(Stale);
        }
        let mut now = (View::of(place), place.state);
        for movement in replay {
            if let Some(next) = advance(now.0, place.visitor, movement) {
                now = next;
            }
        }
        Ok(now)
    }
}

/// Places for the tests of this layer.
#[cfg(test)]
pub mod fixtures {
    use crate::words::{LineSummary, Order, Place, PlaceState, VisitorId};

    /// A waiting place read at room version `version`.
    pub fn waiting(visitor: VisitorId, seq: u64, position: u64, version: u64) -> Place {
        Place {
            visitor,
            state: PlaceState::Waiting {
                order: Order::Joined(seq),
                position,
            },
            line: LineSummary {
                version,
                ..LineSummary::default()
            },
            facts: Default::default(),
            priority: None,
            notify: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::waiting as place;
    use super::*;

    fn admitted(pairs: &[(u64, VisitorId)]) -> Arc<[Admission]> {
        pairs
            .iter()
            .map(|(seq, visitor)| Admission {
                visitor: *visitor,
                order: Order::Joined(*seq),
                admitted_at: 0,
                expires_at: 60_000,
            })
            .collect()
    }

    fn joined(seqs: &[u64]) -> Vec<Order> {
        seqs.iter().map(|seq| Order::Joined(*seq)).collect()
    }

    fn position(state: PlaceState) -> Option<u64> {
        match state {
            PlaceState::Waiting { position, .. } => Some(position),
            _ => None,
        }
    }

    #[test]
    fn movements_after_the_read_are_replayed_in_order() {
        let me = VisitorId(7);
        let mut recent = Recent::default();
        // Read at version 1: seq 10 at position 8. Version 2 admits two,
        // version 3 drops seq 7 (ahead) and 12 (behind).
        recent.remember(Movement::tick(
            2,
            admitted(&[(1, VisitorId(1)), (2, VisitorId(2))]),
            &[],
        ));
        recent.remember(Movement::tick(3, Arc::new([]), &joined(&[12, 7])));
        let (view, state) = recent.catch_up(&place(me, 10, 8, 1)).unwrap();
        assert_eq!(position(state), Some(5));
        assert_eq!(
            view,
            View::Waiting {
                order: Order::Joined(10),
                position: 5,
                version: 3
            }
        );
        // A read at version 2 replays only version 3.
        let (_, state) = recent.catch_up(&place(me, 10, 6, 2)).unwrap();
        assert_eq!(position(state), Some(5));
    }

    #[test]
    fn a_read_older_than_the_window_is_stale() {
        let mut recent = Recent::default();
        for version in 2..(REPLAY_EVENTS as u64 + 10) {
            recent.remember(Movement::tick(version, Arc::new([]), &[]));
        }
        assert_eq!(recent.catch_up(&place(VisitorId(1), 10, 8, 1)), Err(Stale));
    }

    #[test]
    fn a_movement_is_applied_once() {
        let me = VisitorId(3);
        let view = View::Waiting {
            order: Order::Joined(5),
            position: 5,
            version: 1,
        };
        let movement = Movement::tick(2, admitted(&[(1, VisitorId(1))]), &[]);
        let (view, _) = advance(view, me, &movement).unwrap();
        assert_eq!(advance(view, me, &movement), None, "already applied");
    }

    #[test]
    fn the_visitor_at_the_head_is_admitted_or_dropped() {
        let me = VisitorId(3);
        let view = View::Waiting {
            order: Order::Joined(1),
            position: 1,
            version: 0,
        };
        let (view, state) =
            advance(view, me, &Movement::tick(1, admitted(&[(1, me)]), &[])).unwrap();
        assert_eq!(view, View::Settled);
        assert!(matches!(state, PlaceState::Admitted { .. }));
        let waiting = View::Waiting {
            order: Order::Joined(4),
            position: 2,
            version: 0,
        };
        let (_, state) = advance(waiting, me, &Movement::leaving(1, Order::Joined(4))).unwrap();
        assert_eq!(state, PlaceState::Left);
        let (_, state) =
            advance(waiting, me, &Movement::tick(1, Arc::new([]), &joined(&[4]))).unwrap();
        assert_eq!(state, PlaceState::Away);
    }

    #[test]
    fn a_code_holder_entering_ahead_moves_those_behind_back_and_the_mover_ahead() {
        let priority = Order::Priority {
            priority: 1,
            seq: 1,
            key: 0,
        };
        let mover = VisitorId(9);
        let entering = |from| {
            Movement::entering(
                2,
                Entering {
                    visitor: mover,
                    order: priority,
                    from,
                    group: "fans".into(),
                    position: 1,
                },
            )
        };
        let at = |seq, position| View::Waiting {
            order: Order::Joined(seq),
            position,
            version: 1,
        };
        // A new code holder: everyone in the general line moves back one.
        let (_, state) = advance(at(3, 2), VisitorId(1), &entering(None)).unwrap();
        assert_eq!(position(state), Some(3));
        // One moved from seq 2: those behind them keep their number, those
        // ahead move back one, and the mover is at the front.
        let moved = entering(Some(Order::Joined(2)));
        let (_, state) = advance(at(3, 3), VisitorId(1), &moved).unwrap();
        assert_eq!(position(state), Some(3));
        let (_, state) = advance(at(1, 1), VisitorId(2), &moved).unwrap();
        assert_eq!(position(state), Some(2));
        let (view, state) = advance(at(2, 2), mover, &moved).unwrap();
        assert_eq!(position(state), Some(1));
        assert!(matches!(view, View::Waiting { order, .. } if order == priority));
        assert_eq!(moved.moved(mover).map(|g| &**g), Some("fans"));
    }

    #[test]
    fn positions_never_rise_and_never_reach_zero() {
        // A visitor whose read position undercounts what moved ahead stays at 1.
        let view = View::Waiting {
            order: Order::Joined(50),
            position: 2,
            version: 0,
        };
        let many: Vec<(u64, VisitorId)> = (1..=5).map(|s| (s, VisitorId(100 + s))).collect();
        let (_, state) = advance(
            view,
            VisitorId(1),
            &Movement::tick(1, admitted(&many), &joined(&[1, 2])),
        )
        .unwrap();
        assert_eq!(position(state), Some(1));
        // Movements behind the visitor change nothing.
        let view = View::Waiting {
            order: Order::Joined(5),
            position: 5,
            version: 0,
        };
        let (_, state) = advance(
            view,
            VisitorId(1),
            &Movement::tick(1, Arc::new([]), &joined(&[6, 9])),
        )
        .unwrap();
        assert_eq!(position(state), Some(5));
    }
}
