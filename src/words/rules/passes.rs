//! A room's passes: who holds one until when, who has not been seen
//! arriving yet (`arrival_grace_s`), and the counts the room reports.

use std::collections::BTreeSet;

use crate::words::VisitorId;
use crate::words::clock::Millis;

#[derive(Default)]
pub(super) struct Passes {
    /// (pass expiry, visitor) of every admitted visitor, soonest first.
    active: BTreeSet<(Millis, VisitorId)>,
    /// (arrival due, visitor) of every admitted visitor `/api/verify` has
    /// not seen yet, when the room has an `arrival_grace_s`.
    arrivals: BTreeSet<(Millis, VisitorId)>,
    /// How many times `arrivals` were resumed after an outage.
    pub(super) resumptions: u64,
    pub(super) no_shows: u64,
    pub(super) admitted_total: u64,
}

impl Passes {
    /// Passes held now (against `max_active`).
    pub(super) fn held(&self) -> u64 {
        self.active.len() as u64
    }

    pub(super) fn issue(&mut self, visitor: VisitorId, expires_at: Millis, due: Option<Millis>) {
        self.active.insert((expires_at, visitor));
        if let Some(due) = due {
            self.arrivals.insert((due, visitor));
        }
        self.admitted_total += 1;
    }

    pub(super) fn take_back(
        &mut self,
        visitor: VisitorId,
        expires_at: Millis,
        due: Option<Millis>,
    ) {
        self.active.remove(&(expires_at, visitor));
        if let Some(due) = due {
            self.arrivals.remove(&(due, visitor));
        }
    }

    /// The next pass to have run out by `now`, no longer held.
    pub(super) fn pop_expired(&mut self, now: Millis) -> Option<VisitorId> {
        let &(expires_at, visitor) = self.active.first()?;
        (expires_at <= now).then(|| {
            self.active.pop_first();
            visitor
        })
    }

    /// The next arrival due by `now`, no longer awaited.
    pub(super) fn pop_due_arrival(&mut self, now: Millis) -> Option<(Millis, VisitorId)> {
        let &(due, visitor) = self.arrivals.first()?;
        (due <= now).then(|| {
            self.arrivals.pop_first();
            (due, visitor)
        })
    }

    pub(super) fn arrived(&mut self, due: Millis, visitor: VisitorId) {
        self.arrivals.remove(&(due, visitor));
    }

    /// Every arrival due before `due` is due then instead; returns whose.
    pub(super) fn postpone_arrivals_to(&mut self, due: Millis) -> Vec<VisitorId> {
        let earlier: Vec<(Millis, VisitorId)> = self
            .arrivals
            .range(..(due, VisitorId(0)))
            .copied()
            .collect();
        for (was, visitor) in &earlier {
            self.arrivals.remove(&(*was, *visitor));
            self.arrivals.insert((due, *visitor));
        }
        earlier.into_iter().map(|(_, visitor)| visitor).collect()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.active.is_empty() && self.arrivals.is_empty()
    }
}
