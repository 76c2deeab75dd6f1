//! A room's passes: who holds one until when (against the cap, or outside
//! it for a `bypass_networks` client), who has not been seen arriving yet
//! (`arrival_grace_s`), and the counts the room reports.

use std::collections::BTreeSet;

use crate::words::VisitorId;
use crate::words::clock::Millis;

/// A resumption of arrivals after an outage: when, and the deadline it set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Resumed {
    pub(super) at: Millis,
    pub(super) due: Millis,
}

#[derive(Default)]
pub(super) struct Passes {
    /// (pass expiry, visitor) of every visitor admitted from the line or
    /// straight through, soonest first: these count against the cap.
    active: BTreeSet<(Millis, VisitorId)>,
    /// (pass expiry, visitor) of every visitor admitted for their address,
    /// outside the cap.
    bypassed: BTreeSet<(Millis, VisitorId)>,
    pub(super) bypassed_total: u64,
    /// (arrival due, visitor) of every admitted visitor `/api/verify` has
    /// not seen yet, when the room has an `arrival_grace_s`.
    arrivals: BTreeSet<(Millis, VisitorId)>,
    /// How many times `arrivals` were resumed after an outage.
    pub(super) resumptions: u64,
    /// The last resumption: arrivals of visitors admitted before it are
    /// due at its deadline at the earliest.
    pub(super) resumed: Option<Resumed>,
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

    /// A pass outside the cap, for a client of `bypass_networks`.
    pub(super) fn issue_bypassed(&mut self, visitor: VisitorId, expires_at: Millis) {
        self.bypassed.insert((expires_at, visitor));
        self.bypassed_total += 1;
    }

    /// Passes outside the cap that are valid at `now`.
    pub(super) fn bypassed_valid(&self, now: Millis) -> u64 {
        // Those run out but not swept yet are at most a sweep's backlog.
        let run_out = self.bypassed.range(..(now + 1, VisitorId(0))).count();
        (self.bypassed.len() - run_out) as u64
    }

    pub(super) fn take_back(
        &mut self,
        visitor: VisitorId,
        expires_at: Millis,
        due: Option<Millis>,
    ) {
        if !self.active.remove(&(expires_at, visitor)) {
            self.bypassed.remove(&(expires_at, visitor));
        }
        if let Some(due) = due {
            self.arrivals.remove(&(due, visitor));
        }
    }

    /// The next pass to have run out by `now` (of either kind), no longer
    /// held.
    pub(super) fn pop_expired(&mut self, now: Millis) -> Option<VisitorId> {
        let sooner = match (self.active.first(), self.bypassed.first()) {
            (Some(held), Some(bypassed)) if bypassed < held => &mut self.bypassed,
            (None, Some(_)) => &mut self.bypassed,
            _ => &mut self.active,
        };
        let &(expires_at, visitor) = sooner.first()?;
        (expires_at <= now).then(|| {
            sooner.pop_first();
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

    /// The visitor's arrival is awaited until `due`.
    pub(super) fn await_arrival(&mut self, due: Millis, visitor: VisitorId) {
        self.arrivals.insert((due, visitor));
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.active.is_empty() && self.bypassed.is_empty() && self.arrivals.is_empty()
    }
}
