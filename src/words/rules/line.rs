//! The line of a room: who waits and in what order. The priority line
//! first (code holders: lower priority first, joining order within), then
//! the draw's entrants (a scheduled room's pre-queue), in drawn order, then
//! everyone who joined since, in joining order; each one's position in
//! O(log n) (plus one step per priority level in use), and
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
    /// In the priority line, by priority, then by the level's own join
    /// sequence number.
    Priority { priority: u32, seq: u64 },
    /// In the priority line's draw (a code holder who joined before the
    /// opening): by priority, then drawn order, ahead of the level's joins.
    PriorityDrawn {
        priority: u32,
        key: DrawKey,
        entry: EntryId,
    },
    /// In the line, by join sequence number.
    Joined(u64),
    /// In the draw (joined before the opening).
    Drawn { key: DrawKey, entry: EntryId },
}

impl Spot {
    pub(super) fn order(self) -> Order {
        match self {
            Spot::Joined(seq) => Order::Joined(seq),
            Spot::Priority { priority, seq } => Order::Priority {
                priority,
                seq,
                key: 0,
            },
            Spot::PriorityDrawn { priority, key, .. } => Order::Priority {
                priority,
                seq: 0,
                key: key.prefix(),
            },
            Spot::Drawn { key, entry } => Order::Drawn {
                key: key.prefix(),
                entry,
            },
        }
    }
}

/// The visitors of one priority in the priority line: those drawn at the
/// opening (code holders who joined before it) first, then those who
/// joined since.
struct Level {
    index: LineIndex,
    joined: BTreeMap<u64, VisitorId>,
    draw: Option<DrawLine>,
}

impl Level {
    fn waiting(&self) -> u64 {
        self.joined.len() as u64 + self.drawn_waiting()
    }

    fn drawn_waiting(&self) -> u64 {
        self.draw.as_ref().map_or(0, DrawLine::waiting)
    }

    /// The visitor at 1-based `rank` in this level.
    fn select(&self, rank: u64) -> Option<VisitorId> {
        let drawn = self.drawn_waiting();
        if rank <= drawn {
            return self.draw.as_ref()?.select(rank).map(|(_, v)| v);
        }
        let rank = rank - drawn;
        (rank as usize <= self.joined.len()).then(|| self.joined[&self.index.select(rank)])
    }
}

pub(super) struct Line {
    /// The priority line, by priority: levels stay once made (a few per
    /// room), so each level's sequence numbers never start again.
    levels: BTreeMap<u32, Level>,
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
            levels: BTreeMap::new(),
            index: LineIndex::new(),
            joined: BTreeMap::new(),
            presence: BTreeSet::new(),
            draw: draw_seed.map(DrawLine::new),
        }
    }

    /// Everyone waiting: the priority line, the draw's entrants and the line.
    pub(super) fn waiting(&self) -> u64 {
        self.priority_waiting() + self.drawn_waiting() + self.joined.len() as u64
    }

    /// Those waiting in the priority line.
    pub(super) fn priority_waiting(&self) -> u64 {
        self.levels.values().map(Level::waiting).sum()
    }

    /// How many code holders were drawn (or wait to be).
    pub(super) fn priority_entrants(&self) -> u64 {
        self.levels
            .values()
            .filter_map(|l| l.draw.as_ref())
            .map(|d| d.entries.len() as u64)
            .sum()
    }

    /// Every code holder drawn, in drawn order (lower priority first).
    pub(super) fn priority_entries(&self) -> impl Iterator<Item = (DrawKey, EntryId)> + '_ {
        self.levels
            .values()
            .filter_map(|l| l.draw.as_ref())
            .flat_map(|d| d.entries.iter().map(|(k, e)| (*k, *e)))
    }

    /// Puts a code holder in their priority's draw (before the opening of
    /// a room with a draw) or at the back of their priority's level.
    pub(super) fn enter_priority(
        &mut self,
        visitor: VisitorId,
        priority: u32,
        opened: bool,
        entry: EntryId,
        now: Millis,
    ) -> Spot {
        let seed = self.draw.as_ref().map(|d| d.seed.clone());
        let level = self.levels.entry(priority).or_insert_with(|| Level {
            index: LineIndex::new(),
            joined: BTreeMap::new(),
            draw: None,
        });
        self.presence.insert((now, visitor));
        if let Some(seed) = seed.filter(|_| !opened) {
            let draw = level.draw.get_or_insert_with(|| DrawLine::new(seed));
            let key = draw.enter(visitor, entry);
            return Spot::PriorityDrawn {
                priority,
                key,
                entry,
            };
        }
        let seq = level.index.push_waiting();
        level.joined.insert(seq, visitor);
        Spot::Priority { priority, seq }
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
            Spot::Priority { priority, seq } => {
                if let Some(level) = self.levels.get_mut(&priority)
                    && level.joined.remove(&seq).is_some()
                {
                    level.index.remove(seq);
                }
            }
            Spot::PriorityDrawn { priority, key, .. } => {
                if let Some(draw) = self.levels.get_mut(&priority).and_then(|l| l.draw.as_mut()) {
                    draw.remove(&key, !opened);
                }
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

    /// Everyone waiting at the priority levels admitted before `priority`.
    fn waiting_above(&self, priority: u32) -> u64 {
        self.levels
            .range(..priority)
            .map(|(_, level)| level.waiting())
            .sum()
    }

    /// 1-based: the priority line first, then the draw's entrants, then the line.
    pub(super) fn position(&self, spot: Spot) -> u64 {
        match spot {
            Spot::Priority { priority, seq } => {
                self.waiting_above(priority)
                    + self
                        .levels
                        .get(&priority)
                        .map_or(1, |l| l.drawn_waiting() + l.index.rank(seq))
            }
            Spot::PriorityDrawn { priority, key, .. } => {
                self.waiting_above(priority)
                    + self
                        .levels
                        .get(&priority)
                        .and_then(|l| l.draw.as_ref())
                        .map_or(1, |d| d.rank(&key))
            }
            Spot::Drawn { key, .. } => {
                self.priority_waiting() + self.draw.as_ref().map_or(1, |draw| draw.rank(&key))
            }
            Spot::Joined(seq) => {
                self.priority_waiting() + self.drawn_waiting() + self.index.rank(seq)
            }
        }
    }

    /// The first level of the priority line with anyone in it.
    fn first_level(&self) -> Option<&Level> {
        self.levels.values().find(|l| l.waiting() > 0)
    }

    /// The `nth` random choice of a tick (`random`), each waiting visitor
    /// as likely as any other; in a drawn room, one of the draw's entrants
    /// while any wait. By rank, as `lua/tick.lua` picks.
    pub(super) fn random(&self, seed: PickSeed, nth: u64) -> Option<VisitorId> {
        // The priority line first: its first level, like the draw.
        if let Some(level) = self.first_level() {
            return level.select(pick(seed, nth, level.waiting()) + 1);
        }
        if let Some(draw) = self.draw.as_ref().filter(|draw| draw.waiting() > 0) {
            let rank = pick(seed, nth, draw.waiting()) + 1;
            return draw.select(rank).map(|(_, visitor)| visitor);
        }
        let waiting = self.joined.len() as u64;
        (waiting > 0).then(|| self.joined[&self.index.select(pick(seed, nth, waiting) + 1)])
    }

    /// The head: the priority line's first, else the draw's first entrant,
    /// else the line's.
    pub(super) fn first(&self) -> Option<VisitorId> {
        if let Some(level) = self.first_level() {
            return level.select(1);
        }
        if let Some((_, visitor)) = self.draw.as_ref().and_then(|draw| draw.select(1)) {
            return Some(visitor);
        }
        self.joined.first_key_value().map(|(_, visitor)| *visitor)
    }

    /// Nobody waits, and nobody is kept as seen.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.joined.is_empty()
            && self.presence.is_empty()
            && self.drawn_waiting() == 0
            && self.priority_waiting() == 0
    }
}
