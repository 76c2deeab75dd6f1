//! Visitors who gave up their place or pass (or had it taken back), those
//! whose place was swept because they were away, and those whose session
//! lapsed: until when each is told so (`left`, or `expired` for being away
//! or idle), forgotten then, a bounded number per operation, soonest first.

use std::collections::{BTreeSet, HashMap};

use crate::words::VisitorId;
use crate::words::clock::Millis;

/// Why a visitor is remembered after their place is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Departure {
    /// They gave it up, or it was taken back.
    Left,
    /// It was swept: nobody saw them for `abandon_after_s`.
    Away,
    /// Their session lapsed (`session_idle_s`) before their pass, which
    /// expires at `expires_at`, ran out.
    Lapsed { expires_at: Millis },
}

#[derive(Default)]
pub(super) struct Departures {
    until: HashMap<VisitorId, (Millis, Departure)>,
    soonest: BTreeSet<(Millis, VisitorId)>,
}

impl Departures {
    pub(super) fn depart(&mut self, visitor: VisitorId, until: Millis, why: Departure) {
        self.until.insert(visitor, (until, why));
        self.soonest.insert((until, visitor));
    }

    /// Why the visitor's place is gone, if they are still told at `now`.
    pub(super) fn departure(&self, visitor: VisitorId, now: Millis) -> Option<Departure> {
        self.until
            .get(&visitor)
            .filter(|(until, _)| *until > now)
            .map(|(_, why)| *why)
    }

    /// Forgets up to `at_most` of those no longer told `left` at `now`.
    pub(super) fn forget(&mut self, now: Millis, at_most: usize) {
        for _ in 0..at_most {
            match self.soonest.first() {
                Some(&(until, visitor)) if until <= now => {
                    self.soonest.pop_first();
                    if self.until.get(&visitor).map(|(at, _)| *at) == Some(until) {
                        self.until.remove(&visitor);
                    }
                }
                _ => break,
            }
        }
    }

    /// How many are remembered (for the tests of forgetting).
    #[cfg(test)]
    pub(super) fn remembered(&self) -> usize {
        self.until.len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.until.is_empty() && self.soonest.is_empty()
    }
}
