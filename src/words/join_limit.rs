//! The per-address join limit (`--join-rate-per-ip`): how many joins that
//! create a new place one client address may make per minute in a room.
//!
//! The rule is GCRA (the generic cell rate algorithm, as in the `governor`
//! crate): each address has a theoretical arrival time (TAT) that every
//! allowed join pushes one emission interval (a minute ÷ the rate) further;
//! a join is allowed while the TAT is less than a minute's worth of burst
//! ahead of now. It is written here by hand because it must run inside the
//! join's own atomic step on the store's clock, in the memory store and in
//! `lua/join.lua` alike (which mirrors this function), so that a refused
//! join changes nothing and limits hold across nodes; a limiter crate keeps
//! its state in the process.

use super::clock::Millis;

const MINUTE_MS: Millis = 60_000;

/// A limit on one join: who the client is and how many new places a minute
/// they may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinLimit {
    /// The client's address, as text (`203.0.113.7`, `2001:db8::1`).
    pub client: String,
    pub per_minute: u32,
}

/// What the limit says about one join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gcra {
    /// Allowed; store `tat` for the address until then.
    Allowed { tat: Millis },
    /// Refused; the next join would be allowed in this many seconds.
    Refused { retry_after_s: u64 },
}

/// Decides a join at `now` for an address whose stored TAT is `tat` (none
/// if it has none, or it has passed).
pub fn decide(tat: Option<Millis>, now: Millis, per_minute: u32) -> Gcra {
    let per_minute = Millis::from(per_minute.max(1));
    let interval = MINUTE_MS.div_ceil(per_minute);
    // A minute's worth at once, then one per interval.
    let burst = interval * (per_minute - 1);
    let tat = tat.unwrap_or(now).max(now);
    if tat - now > burst {
        let wait_ms = tat - now - burst;
        return Gcra::Refused {
            retry_after_s: wait_ms.div_ceil(1000).max(1),
        };
    }
    Gcra::Allowed {
        tat: tat + interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(joins_at: &[Millis], per_minute: u32) -> Vec<Gcra> {
        let mut tat = None;
        joins_at
            .iter()
            .map(|&now| {
                let decision = decide(tat, now, per_minute);
                if let Gcra::Allowed { tat: next } = decision {
                    tat = Some(next);
                }
                decision
            })
            .collect()
    }

    #[test]
    fn a_minutes_worth_at_once_then_one_per_interval() {
        let decisions = run(&[0, 0, 0, 0, 19_999, 20_000, 20_000], 3);
        let allowed: Vec<bool> = decisions
            .iter()
            .map(|d| matches!(d, Gcra::Allowed { .. }))
            .collect();
        assert_eq!(allowed, [true, true, true, false, false, true, false]);
        assert_eq!(decisions[3], Gcra::Refused { retry_after_s: 20 });
        assert_eq!(decisions[4], Gcra::Refused { retry_after_s: 1 });
    }

    #[test]
    fn a_quiet_address_starts_fresh() {
        let decisions = run(&[0, 0, 0, 10 * 60_000, 10 * 60_000, 10 * 60_000], 3);
        assert!(decisions.iter().all(|d| matches!(d, Gcra::Allowed { .. })));
    }

    #[test]
    fn never_more_than_the_rate_in_any_minute_after_the_first_burst() {
        // One attempt every 100 ms for ten minutes at 30 a minute.
        let times: Vec<Millis> = (0..6_000).map(|i| i * 100).collect();
        let decisions = run(&times, 30);
        let allowed: Vec<Millis> = times
            .iter()
            .zip(&decisions)
            .filter(|(_, d)| matches!(d, Gcra::Allowed { .. }))
            .map(|(t, _)| *t)
            .collect();
        for window in allowed.windows(61) {
            assert!(
                window[60] - window[0] >= 60_000,
                "61 joins within a minute: {window:?}"
            );
        }
        assert!(
            (30 + 9 * 30..=30 + 10 * 30).contains(&allowed.len()),
            "{}",
            allowed.len()
        );
    }

    #[test]
    fn a_rate_of_one_allows_one_a_minute() {
        let decisions = run(&[0, 59_999, 60_000], 1);
        assert!(matches!(decisions[0], Gcra::Allowed { .. }));
        assert_eq!(decisions[1], Gcra::Refused { retry_after_s: 1 });
        assert!(matches!(decisions[2], Gcra::Allowed { .. }));
    }
}
