//! Every visitor's figures, aggregated: how each visit ended, and
//! latencies and counts over the visitors for each step.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::common::{self, ErrorKinds, Latency};

use super::visitor::{Claimed, End, Visit};

/// p50, p99 and max of per-visitor counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(super) struct Counts {
    pub(super) visitors: usize,
    pub(super) total: u64,
    pub(super) p50: u64,
    pub(super) p99: u64,
    pub(super) max: u64,
}

impl Counts {
    pub(super) fn of(mut counts: Vec<u64>) -> Option<Self> {
        if counts.is_empty() {
            return None;
        }
        counts.sort_unstable();
        let rank = |p: f64| {
            let index = ((p * counts.len() as f64).ceil() as usize).max(1) - 1;
            counts[index.min(counts.len() - 1)]
        };
        Some(Self {
            visitors: counts.len(),
            total: counts.iter().sum(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: *counts.last().expect("not empty"),
        })
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {}, p99 {}, max {} ({} in all)",
            self.p50, self.p99, self.max, self.total
        )
    }
}

/// Every visitor's figures, aggregated.
#[derive(Debug, Default, Serialize)]
pub(super) struct Summary {
    pub(super) visitors: usize,
    pub(super) done: u64,
    /// Visitors still busy when the time was up, by the stage they were in.
    pub(super) gave_up: BTreeMap<&'static str, u64>,
    /// Visitors whose verify or claim failed, by stage (and tasks that
    /// handed in no report, as "no report").
    pub(super) failed: BTreeMap<&'static str, u64>,
    /// Visitors the room sent away (`closed: sold_out`, …), by what it said.
    pub(super) finished: BTreeMap<String, u64>,
    pub(super) arrival_lag: Option<Latency>,
    pub(super) joined: u64,
    /// Joins that had to be sent again.
    pub(super) join_retries: u64,
    pub(super) admitted_at_join: u64,
    pub(super) positioned: u64,
    pub(super) first_position: Option<Latency>,
    /// The largest first position any visitor was given.
    pub(super) longest_line: Option<u64>,
    pub(super) position_updates: Option<Counts>,
    pub(super) positions_rose: u64,
    pub(super) admitted: u64,
    pub(super) waited: Option<Latency>,
    /// Arrival → admission of those admitted from the line (not at their
    /// join), in microseconds: what the room's report counts as waits.
    #[serde(skip)]
    pub(super) line_waits_us: Vec<u64>,
    pub(super) tick_to_admission: Option<Latency>,
    pub(super) verified: u64,
    pub(super) verify: Option<Latency>,
    pub(super) claims_answered: u64,
    pub(super) created: u64,
    pub(super) refused: ErrorKinds,
    pub(super) claim: Option<Latency>,
    /// The 201s' sequences are 1..=created, once each.
    pub(super) sequences_once_each: bool,
    pub(super) sockets_opened: u64,
    pub(super) sockets_lost: u64,
    pub(super) visitors_that_polled: u64,
    pub(super) polls: u64,
    pub(super) error_kinds: ErrorKinds,
}

pub(super) fn summarize(visits: &[Visit]) -> Summary {
    let mut s = Summary {
        visitors: visits.len(),
        ..Summary::default()
    };
    let mut lags = Vec::new();
    let mut first = Vec::new();
    let mut updates = Vec::new();
    let mut waited = Vec::new();
    let mut ticks = Vec::new();
    let mut verify = Vec::new();
    let mut claim = Vec::new();
    let mut sequences = Vec::new();
    for v in visits {
        match &v.end {
            Some(End::Done) => s.done += 1,
            Some(End::GaveUp(stage)) => *s.gave_up.entry(stage.name()).or_default() += 1,
            Some(End::Failed(stage)) => *s.failed.entry(stage.name()).or_default() += 1,
            Some(End::Finished(what)) => *s.finished.entry(what.clone()).or_default() += 1,
            None => *s.failed.entry("no report").or_default() += 1,
        }
        lags.push(v.lag_us);
        s.join_retries += v.join_attempts.saturating_sub(1) as u64;
        if v.first_position.is_some() || v.admitted_at_join || v.waited_us.is_some() {
            s.joined += 1;
        }
        s.admitted_at_join += v.admitted_at_join as u64;
        if let Some((us, position)) = v.first_position {
            s.positioned += 1;
            first.push(us);
            s.longest_line = s.longest_line.max(Some(position));
            updates.push(v.position_updates as u64);
        }
        s.positions_rose += v.positions_rose as u64;
        if let Some(us) = v.waited_us {
            s.admitted += 1;
            waited.push(us);
            if !v.admitted_at_join {
                s.line_waits_us.push(us);
            }
        }
        ticks.extend(v.tick_to_admission_us);
        if let Some(us) = v.verified_us {
            s.verified += 1;
            verify.push(us);
        }
        match &v.claimed {
            Some(Claimed::Created { sequence }) => {
                s.created += 1;
                sequences.push(*sequence);
            }
            Some(Claimed::Refused(code)) => common::count(&mut s.refused, code.clone()),
            None => {}
        }
        if v.claimed.is_some() {
            s.claims_answered += 1;
            claim.extend(v.claim_us);
        }
        s.sockets_opened += v.sockets_opened as u64;
        s.sockets_lost += v.sockets_lost as u64;
        s.visitors_that_polled += (v.polls > 0) as u64;
        s.polls += v.polls as u64;
        for (kind, n) in &v.errors {
            *s.error_kinds.entry(kind.clone()).or_default() += n;
        }
    }
    sequences.sort_unstable();
    s.sequences_once_each = sequences.iter().copied().eq(1..=s.created);
    s.arrival_lag = Latency::from_micros(lags);
    s.first_position = Latency::from_micros(first);
    s.position_updates = Counts::of(updates);
    s.waited = Latency::from_micros(waited);
    s.tick_to_admission = Latency::from_micros(ticks);
    s.verify = Latency::from_micros(verify);
    s.claim = Latency::from_micros(claim);
    s
}

pub(super) fn by_kind<K: std::fmt::Display>(counts: &BTreeMap<K, u64>) -> String {
    counts
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn latency_text(latency: Option<Latency>) -> String {
    latency.map_or_else(|| "none".into(), |l| l.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drop::visitor::Stage;

    #[test]
    fn counts_are_nearest_rank() {
        let c = Counts::of((1..=100).collect()).unwrap();
        assert_eq!((c.p50, c.p99, c.max, c.total), (50, 99, 100, 5050));
        assert!(Counts::of(vec![]).is_none());
    }

    #[test]
    fn the_summary_counts_each_visitor_once_by_how_it_ended() {
        let done = |sequence: Option<u64>| Visit {
            join_attempts: 1,
            first_position: Some((1_000, 5)),
            position_updates: 2,
            waited_us: Some(10_000),
            verified_us: Some(2_000),
            claimed: Some(match sequence {
                Some(sequence) => Claimed::Created { sequence },
                None => Claimed::Refused("sold_out".into()),
            }),
            claim_us: Some(500),
            sockets_opened: 1,
            end: Some(End::Done),
            ..Visit::default()
        };
        let mut lost = Visit {
            join_attempts: 3,
            end: Some(End::GaveUp(Stage::Joining)),
            ..Visit::default()
        };
        lost.error("join: HTTP 503 store_unavailable");
        lost.error("join: HTTP 503 store_unavailable");
        let visits = vec![
            done(Some(2)),
            done(Some(1)),
            done(None),
            lost,
            Visit {
                admitted_at_join: true,
                waited_us: Some(3_000),
                end: Some(End::Failed(Stage::Verifying)),
                ..Visit::default()
            },
            Visit {
                end: Some(End::Finished("closed: sold_out".into())),
                ..Visit::default()
            },
        ];
        let s = summarize(&visits);
        assert_eq!(s.visitors, 6);
        assert_eq!(s.done, 3);
        assert_eq!(s.gave_up.get("joining"), Some(&1));
        assert_eq!(s.failed.get("verifying"), Some(&1));
        assert_eq!(s.finished.get("closed: sold_out"), Some(&1));
        assert_eq!(s.joined, 4);
        assert_eq!(s.join_retries, 2);
        assert_eq!(s.admitted_at_join, 1);
        assert_eq!(s.positioned, 3);
        assert_eq!(s.longest_line, Some(5));
        assert_eq!(s.position_updates.unwrap().total, 6);
        assert_eq!(s.admitted, 4);
        assert_eq!(s.verified, 3);
        assert_eq!(s.claims_answered, 3);
        assert_eq!(s.created, 2);
        assert!(s.sequences_once_each);
        assert_eq!(s.refused.get("sold_out"), Some(&1));
        assert_eq!(
            s.error_kinds.get("join: HTTP 503 store_unavailable"),
            Some(&2)
        );
        assert_eq!(s.sockets_opened, 3);
    }
}
