//! The line of a room: who waits and in what order. The draw's entrants
//! (a scheduled room's pre-queue) first, in drawn order, then everyone who
//! joined since, in joining order; each one's position in O(log n), and
//! who was seen least recently, for the abandonment sweep.

use std::collections::{BTreeMap, BTreeSet};

use super::draw_line::DrawLine;
use super::fenwick::LineIndex;
use crate::words::chance::{PickSeed, pick};
use crate::words::clock::Millis;
use crate::words::draw::{DrawKey, DrawSeed, EntryId};
use crate::words::{Order, VisitorId};

/// Where a waiting visitor's place is kept.
#[derive(Debug, Clone, Copy)]
pub(super) enum Spot {
    /// In the line, by join sequence number.
    Joined(u64),
    /// In the draw (joined before the opening).
    Drawn { key: DrawKey, entry: EntryId },
}

impl Spot {
    pub(super) fn order(self) -> Order {
        match self {
            Spot::Joined(seq) => Order::Joined(seq),
            Spot::Drawn { key, entry } => Order::Drawn {
                key: key.prefix(),
                entry,
            },
        }
    }
}

pub(super) struct Line {
    index: LineIndex,
    /// Join sequence number → visitor, head first.
    joined: BTreeMap<u64, VisitorId>,
    /// (last seen, visitor) of everyone waiting, stalest first, so a tick
    /// finds the abandoned without walking the line.
    presence: BTreeSet<(Millis, VisitorId)>,
    /// The draw, from the moment the room has an `opens_at`: its entrants
    /// wait ahead of the line, in drawn order.
    pub(super) draw: Option<DrawLine>,
}

impl Line {
    pub(super) fn new(draw_seed: Option<DrawSeed>) -> Self {
        Self {
            index: LineIndex::new(),
            joined: BTreeMap::new(),
            presence: BTreeSet::new(),
            draw: draw_seed.map(DrawLine::new),
        }
    }

    /// Everyone waiting: the draw's entrants and the line.
    pub(super) fn waiting(&self) -> u64 {
        self.drawn_waiting() + self.joined.len() as u64
    }

    /// The draw's entrants still waiting.
    pub(super) fn drawn_waiting(&self) -> u64 {
        self.draw.as_ref().map_or(0, DrawLine::waiting)
    }

    /// Puts a new arrival in the draw (before the opening) or at the back.
    pub(super) fn enter(
        &mut self,
        visitor: VisitorId,
        opened: bool,
        entry: EntryId,
        now: Millis,
    ) -> Spot {
        let spot = match &mut self.draw {
            Some(draw) if !opened => Spot::Drawn {
                key: draw.enter(visitor, entry),
                entry,
            },
            _ => {
                let seq = self.index.push_waiting();
                self.joined.insert(seq, visitor);
                Spot::Joined(seq)
            }
        };
        self.presence.insert((now, visitor));
        spot
    }

    /// Takes a waiting visitor out of the draw or the line.
    pub(super) fn remove(
        &mut self,
        spot: Spot,
        last_seen: Millis,
        visitor: VisitorId,
        opened: bool,
    ) {
        self.presence.remove(&(last_seen, visitor));
        match spot {
            Spot::Joined(seq) => {
                self.joined.remove(&seq);
                self.index.remove(seq);
            }
            Spot::Drawn { key, .. } => {
                if let Some(draw) = &mut self.draw {
                    draw.remove(&key, !opened);
                }
            }
        }
    }

    /// The visitor was seen at `now` (last seen at `was`).
    pub(super) fn seen(&mut self, visitor: VisitorId, was: Millis, now: Millis) {
        self.presence.remove(&(was, visitor));
        self.presence.insert((now, visitor));
    }

    /// Forgets that the visitor was seen at `was`.
    pub(super) fn unsee(&mut self, visitor: VisitorId, was: Millis) {
        self.presence.remove(&(was, visitor));
    }

    /// The least recently seen visitor, and when that was.
    pub(super) fn stalest(&self) -> Option<(Millis, VisitorId)> {
        self.presence.first().copied()
    }

    /// 1-based: the draw's entrants first, then the line.
    pub(super) fn position(&self, spot: Spot) -> u64 {
        match spot {
            Spot::Drawn { key, .. } => self.draw.as_ref().map_or(1, |draw| draw.rank(&key)),
            Spot::Joined(seq) => self.drawn_waiting() + self.index.rank(seq),
        }
    }

    /// The `nth` random choice of a tick (`random`), each waiting visitor
    /// as likely as any other; in a drawn room, one of the draw's entrants
    /// while any wait. By rank, as `lua/tick.lua` picks.
    pub(super) fn random(&self, seed: PickSeed, nth: u64) -> Option<VisitorId> {
        if let Some(draw) = self.draw.as_ref().filter(|draw| draw.waiting() > 0) {
            let rank = pick(seed, nth, draw.waiting()) + 1;
            return draw.select(rank).map(|(_, visitor)| visitor);
        }
        let waiting = self.joined.len() as u64;
        (waiting > 0).then(|| self.joined[&self.index.select(pick(seed, nth, waiting) + 1)])
    }

    /// The head: the draw's first entrant, else the line's.
    pub(super) fn first(&self) -> Option<VisitorId> {
        if let Some((_, visitor)) = self.draw.as_ref().and_then(|draw| draw.select(1)) {
            return Some(visitor);
        }
        self.joined.first_key_value().map(|(_, visitor)| *visitor)
    }

    /// Nobody waits, and nobody is kept as seen.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.joined.is_empty() && self.presence.is_empty() && self.drawn_waiting() == 0
    }
}
