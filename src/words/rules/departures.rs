//! Visitors who gave up their place or pass (or had it taken back): until
//! when each is told `left`, forgotten then, a bounded number per
//! operation, soonest first.

use std::collections::{BTreeSet, HashMap};

use crate::words::VisitorId;
use crate::words::clock::Millis;

#[derive(Default)]
pub(super) struct Departures {
    until: HashMap<VisitorId, Millis>,
    soonest: BTreeSet<(Millis, VisitorId)>,
}

impl Departures {
    pub(super) fn depart(&mut self, visitor: VisitorId, until: Millis) {
        self.until.insert(visitor, until);
        self.soonest.insert((until, visitor));
    }

    /// Is the visitor told `left` at `now`?
    pub(super) fn left(&self, visitor: VisitorId, now: Millis) -> bool {
        self.until.get(&visitor).is_some_and(|until| *until > now)
    }

    /// Forgets up to `at_most` of those no longer told `left` at `now`.
    pub(super) fn forget(&mut self, now: Millis, at_most: usize) {
        for _ in 0..at_most {
            match self.soonest.first() {
                Some(&(until, visitor)) if until <= now => {
                    self.soonest.pop_first();
                    if self.until.get(&visitor) == Some(&until) {
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
