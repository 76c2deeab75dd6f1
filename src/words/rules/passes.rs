//! A room's passes: who holds one until when (against the cap, or outside
//! it for a `bypass_networks` client), who has not been seen arriving yet
//! (`arrival_grace_s`), and the counts the room reports; and when a
//! session's renewal moves its end (`renewed_lapse`, mirrored in
//! `lua/arrive.lua`).

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
    /// (pass end, visitor) of every visitor admitted from the line or
    /// straight through, soonest first: these count against the cap. A
    /// pass ends at its expiry, or with sessions on at its session's lapse
    /// if that comes first (`lapse_at`).
    active: BTreeSet<(Millis, VisitorId)>,
    /// (pass end, visitor) of every visitor admitted for their address,
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

    /// The visitor's pass, which ends at `ends_at`, is held no more.
    pub(super) fn take_back(&mut self, visitor: VisitorId, ends_at: Millis, due: Option<Millis>) {
        if !self.active.remove(&(ends_at, visitor)) {
            self.bypassed.remove(&(ends_at, visitor));
        }
        if let Some(due) = due {
            self.arrivals.remove(&(due, visitor));
        }
    }

    /// The next pass to have ended by `now` (of either kind), no longer
    /// held; and whether it was outside the cap.
    pub(super) fn pop_expired(&mut self, now: Millis) -> Option<(VisitorId, bool)> {
        let bypassed = match (self.active.first(), self.bypassed.first()) {
            (Some(held), Some(bypassed)) => bypassed < held,
            (None, Some(_)) => true,
            _ => false,
        };
        let sooner = if bypassed {
            &mut self.bypassed
        } else {
            &mut self.active
        };
        let &(ends_at, visitor) = sooner.first()?;
        (ends_at <= now).then(|| {
            sooner.pop_first();
            (visitor, bypassed)
        })
    }

    /// The visitor's pass ends at `to` rather than `from`, in the set it is in.
    pub(super) fn move_end(&mut self, visitor: VisitorId, from: Millis, to: Millis) {
        if self.active.remove(&(from, visitor)) {
            self.active.insert((to, visitor));
        } else if self.bypassed.remove(&(from, visitor)) {
            self.bypassed.insert((to, visitor));
        }
    }

    /// A pass `pop_expired` gave back, held again until `to`.
    pub(super) fn hold_again(&mut self, visitor: VisitorId, to: Millis, bypassed: bool) {
        if bypassed {
            self.bypassed.insert((to, visitor));
        } else {
            self.active.insert((to, visitor));
        }
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

/// Where a session that ends at `lapse_at` ends once a call accepts its pass
/// at `now`, if that moves it: `idle_ms` from now and a tenth more, so that
/// it never lapses sooner than `idle_ms` after the last call, and a store
/// writes a renewal at most once a tenth of `idle_ms` per pass (a call that
/// finds at least `idle_ms` left moves nothing); never past the pass's
/// expiry. A lapse further off than that (the room's `session_idle_s` was
/// lowered) is brought in.
pub fn renewed_lapse(
    lapse_at: Millis,
    expires_at: Millis,
    idle_ms: Millis,
    now: Millis,
) -> Option<Millis> {
    let latest = now + idle_ms + idle_ms / 10;
    let due = lapse_at < now + idle_ms || lapse_at > latest;
    let to = latest.min(expires_at);
    (due && to != lapse_at).then_some(to)
}

#[cfg(test)]
mod tests {
    use super::renewed_lapse;

    #[test]
    fn a_renewal_moves_the_lapse_once_a_tenth_of_the_idle_time_has_passed() {
        let idle = 60_000;
        let expires = 3_600_000;
        // Admitted at 0: the session lapses at 60 s unless renewed.
        assert_eq!(renewed_lapse(60_000, expires, idle, 1_000), Some(67_000));
        // 5 s later, 62 s are left: at least the idle time, nothing written.
        assert_eq!(renewed_lapse(67_000, expires, idle, 6_000), None);
        assert_eq!(renewed_lapse(67_000, expires, idle, 7_000), None);
        // Past a tenth of it: moved.
        assert_eq!(renewed_lapse(67_000, expires, idle, 7_001), Some(73_001));
        // Never past the expiry, and a lapse at the expiry stays.
        assert_eq!(
            renewed_lapse(3_550_000, expires, idle, 3_545_000),
            Some(expires)
        );
        assert_eq!(renewed_lapse(expires, expires, idle, 3_590_000), None);
        // The idle time lowered from 600 s: brought in at once.
        assert_eq!(renewed_lapse(660_000, expires, idle, 1_000), Some(67_000));
    }
}
