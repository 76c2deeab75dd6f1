//! What `autotune` mode reports of a stretch of the run (the window, and
//! each step of the timeline): the rate the room admitted at against what
//! the origin can take, the origin's latency against the target, and
//! autotune's changes.

use std::time::Duration;

use serde::Serialize;

use super::origin::{Kind, Record};
use super::watch::{Change, Poll};

/// The share of the origin's capacity the admitted rate should be within.
pub(super) const WITHIN: f64 = 0.2;

/// A stretch of the run, from its start (the first arrival).
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) from: Duration,
    pub(super) to: Duration,
}

impl Span {
    fn seconds(&self) -> f64 {
        (self.to - self.from).as_secs_f64().max(1e-9)
    }

    fn holds(&self, at: Duration) -> bool {
        at >= self.from && at < self.to
    }
}

/// Nearest-rank percentiles of latencies, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(super) struct Percentiles {
    pub(super) count: usize,
    pub(super) p50_ms: f64,
    pub(super) p95_ms: f64,
    pub(super) p99_ms: f64,
    pub(super) max_ms: f64,
}

impl Percentiles {
    pub(super) fn of(mut latencies: Vec<Duration>) -> Option<Self> {
        if latencies.is_empty() {
            return None;
        }
        latencies.sort_unstable();
        let rank = |p: f64| {
            let index = ((p * latencies.len() as f64).ceil() as usize).max(1) - 1;
            latencies[index.min(latencies.len() - 1)].as_secs_f64() * 1000.0
        };
        Some(Self {
            count: latencies.len(),
            p50_ms: rank(0.50),
            p95_ms: rank(0.95),
            p99_ms: rank(0.99),
            max_ms: rank(1.0),
        })
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({})",
            self.p50_ms, self.p95_ms, self.p99_ms, self.max_ms, self.count
        )
    }
}

/// What went into a span's figures, each on the run's clock (from the first arrival).
pub(super) struct Inputs<'a> {
    /// When each admitted shopper had its admission.
    pub(super) admissions: &'a [Duration],
    /// The origin's records, moved onto the run's clock.
    pub(super) records: &'a [Record],
    pub(super) polls: &'a [(Duration, Poll)],
    /// Autotune's changes, on the run's clock.
    pub(super) changes: &'a [(Duration, Change)],
    pub(super) checkouts: u32,
    pub(super) tick_ms: u64,
    pub(super) service: Duration,
    pub(super) workers: u32,
    /// Requests a second the origin served when kept busy, measured in this run.
    pub(super) capacity_per_s: f64,
}

/// A span's figures.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Figures {
    pub(super) from_s: f64,
    pub(super) to_s: f64,
    /// Shoppers whose admission reached them in the span, a second.
    pub(super) admitted_per_s: f64,
    /// The same from the room's own `admitted_total` (between the reads
    /// nearest the span's ends).
    pub(super) room_admitted_per_s: Option<f64>,
    /// The effective rate the room's reads showed, on average, a second.
    pub(super) effective_per_s: Option<f64>,
    /// What the admitted shoppers ask of the origin: admitted/s × checkouts.
    pub(super) admitted_requests_per_s: f64,
    /// Checkout requests the origin answered 200 in the span, a second.
    pub(super) origin_served_per_s: f64,
    pub(super) origin_health_checks: usize,
    pub(super) origin_shed: usize,
    /// The share of the workers' time spent serving (any request).
    pub(super) origin_busy_share: f64,
    /// admitted_requests_per_s ÷ the measured capacity.
    pub(super) admitted_to_capacity: f64,
    /// origin_served_per_s ÷ the measured capacity.
    pub(super) served_to_capacity: f64,
    /// Of checkout requests arriving at the origin in the span (wait and service).
    pub(super) checkout_latency: Option<Percentiles>,
    /// The same requests' wait in the origin's queue alone.
    pub(super) checkout_wait: Option<Percentiles>,
    /// Of the health checks arriving in the span, as the origin timed them.
    pub(super) health_latency: Option<Percentiles>,
    pub(super) changes_down: usize,
    pub(super) changes_up: usize,
}

impl Figures {
    pub(super) fn of(span: Span, inputs: &Inputs<'_>) -> Self {
        let seconds = span.seconds();
        let admitted = inputs.admissions.iter().filter(|a| span.holds(**a)).count();
        let admitted_per_s = admitted as f64 / seconds;
        let served = |kind: Kind| {
            inputs
                .records
                .iter()
                .filter(move |r| !r.shed && r.kind == kind && span.holds(r.answered()))
        };
        let origin_served_per_s = served(Kind::Checkout).count() as f64 / seconds;
        let busy = (served(Kind::Checkout).count() + served(Kind::Health).count()) as f64
            * inputs.service.as_secs_f64();
        let arrived = |kind: Kind, time: fn(&Record) -> Duration| {
            inputs
                .records
                .iter()
                .filter(|r| !r.shed && r.kind == kind && span.holds(r.arrived))
                .map(time)
                .collect::<Vec<_>>()
        };
        let latency = |r: &Record| r.latency;
        let changes: Vec<&Change> = inputs
            .changes
            .iter()
            .filter(|(at, _)| span.holds(*at))
            .map(|(_, c)| c)
            .collect();
        let admitted_requests_per_s = admitted_per_s * inputs.checkouts as f64;
        let capacity = inputs.capacity_per_s.max(1e-9);
        Self {
            from_s: span.from.as_secs_f64(),
            to_s: span.to.as_secs_f64(),
            admitted_per_s,
            room_admitted_per_s: room_rate(inputs.polls, span),
            effective_per_s: effective_rate(inputs.polls, span, inputs.tick_ms),
            admitted_requests_per_s,
            origin_served_per_s,
            origin_health_checks: arrived(Kind::Health, latency).len(),
            origin_shed: inputs
                .records
                .iter()
                .filter(|r| r.shed && span.holds(r.arrived))
                .count(),
            origin_busy_share: busy / (inputs.workers.max(1) as f64 * seconds),
            admitted_to_capacity: admitted_requests_per_s / capacity,
            served_to_capacity: origin_served_per_s / capacity,
            checkout_latency: Percentiles::of(arrived(Kind::Checkout, latency)),
            checkout_wait: Percentiles::of(arrived(Kind::Checkout, |r| r.waited)),
            health_latency: Percentiles::of(arrived(Kind::Health, latency)),
            changes_down: changes.iter().filter(|c| c.to < c.from).count(),
            changes_up: changes.iter().filter(|c| c.to > c.from).count(),
        }
    }

    /// Whether the admitted rate is within ±20% of what the origin takes.
    pub(super) fn within_target(&self) -> bool {
        (self.admitted_to_capacity - 1.0).abs() <= WITHIN
    }
}

/// Admissions a second by the room's own count, between the first read in
/// the span and the last.
fn room_rate(polls: &[(Duration, Poll)], span: Span) -> Option<f64> {
    let inside: Vec<&(Duration, Poll)> = polls.iter().filter(|(at, _)| span.holds(*at)).collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let seconds = (last.0 - first.0).as_secs_f64();
    (seconds > 0.0).then(|| (last.1.admitted_total - first.1.admitted_total) as f64 / seconds)
}

/// The effective rate the reads in the span showed, on average, a second.
fn effective_rate(polls: &[(Duration, Poll)], span: Span, tick_ms: u64) -> Option<f64> {
    let inside: Vec<u64> = polls
        .iter()
        .filter(|(at, _)| span.holds(*at))
        .map(|(_, p)| p.effective)
        .collect();
    if inside.is_empty() {
        return None;
    }
    let per_tick = inside.iter().sum::<u64>() as f64 / inside.len() as f64;
    Some(per_tick * 1000.0 / tick_ms.max(1) as f64)
}

/// The run cut into steps of `step` (the last one shorter), each's figures.
pub(super) fn timeline(run: Duration, step: Duration, inputs: &Inputs<'_>) -> Vec<Figures> {
    let mut steps = Vec::new();
    let mut from = Duration::ZERO;
    while from < run {
        let to = (from + step).min(run);
        steps.push(Figures::of(Span { from, to }, inputs));
        from = to;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds)
    }

    fn checkout(arrived: f64, latency_ms: u64) -> Record {
        Record {
            kind: Kind::Checkout,
            arrived: s(arrived),
            waited: Duration::from_millis(latency_ms.saturating_sub(100)),
            latency: Duration::from_millis(latency_ms),
            shed: false,
        }
    }

    fn poll(admitted_total: u64, effective: u64) -> Poll {
        Poll {
            at: std::time::Instant::now(),
            admitted_total,
            waiting: 0,
            effective,
            state: String::new(),
            reason: String::new(),
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let p = Percentiles::of((1..=100).map(Duration::from_millis).collect()).unwrap();
        assert_eq!(
            (p.p50_ms, p.p95_ms, p.p99_ms, p.max_ms),
            (50.0, 95.0, 99.0, 100.0)
        );
        assert!(Percentiles::of(vec![]).is_none());
    }

    #[test]
    fn a_span_counts_what_fell_in_it_against_the_capacity() {
        // 10 s: 80 admitted (8/s), 4 checkouts each = 32 requests/s asked of
        // an origin that takes 40/s.
        let admissions: Vec<Duration> = (0..100).map(|i| s(i as f64 * 0.125)).collect();
        let mut records: Vec<Record> = (0..300)
            .map(|i| checkout(i as f64 * 0.04 + 0.01, 130))
            .collect();
        records.push(Record {
            kind: Kind::Health,
            ..checkout(5.0, 400)
        });
        records.push(Record {
            shed: true,
            ..checkout(6.0, 0)
        });
        let polls = vec![
            (s(0.5), poll(100, 4)),
            (s(5.5), poll(140, 4)),
            (s(9.5), poll(172, 5)),
        ];
        let change = |to| Change {
            at_ms: 0,
            from: 4,
            to,
            reason: String::new(),
        };
        let changes = vec![
            (s(3.0), change(5)),
            (s(7.0), change(3)),
            (s(12.0), change(2)),
        ];
        let inputs = Inputs {
            admissions: &admissions,
            records: &records,
            polls: &polls,
            changes: &changes,
            checkouts: 4,
            tick_ms: 500,
            service: Duration::from_millis(100),
            workers: 4,
            capacity_per_s: 40.0,
        };
        let f = Figures::of(
            Span {
                from: s(0.0),
                to: s(10.0),
            },
            &inputs,
        );
        assert_eq!(f.admitted_per_s, 8.0);
        assert_eq!(f.admitted_requests_per_s, 32.0);
        assert_eq!(f.admitted_to_capacity, 0.8);
        assert!(f.within_target());
        // 250 checkouts arrived before 10 s; answered 130 ms later, 247 of
        // them were answered before it.
        assert!((f.origin_served_per_s - 24.7).abs() < 1e-9);
        assert_eq!(f.checkout_latency.unwrap().count, 250);
        assert_eq!(f.health_latency.unwrap().p95_ms, 400.0);
        assert_eq!(f.origin_shed, 1);
        assert!((f.origin_busy_share - 248.0 * 0.1 / 40.0).abs() < 1e-9);
        assert_eq!(f.room_admitted_per_s, Some(72.0 / 9.0));
        assert!((f.effective_per_s.unwrap() - 26.0 / 3.0).abs() < 1e-9);
        assert_eq!((f.changes_down, f.changes_up), (1, 1));
        let steps = timeline(s(10.0), s(4.0), &inputs);
        let bounds: Vec<(f64, f64)> = steps.iter().map(|f| (f.from_s, f.to_s)).collect();
        assert_eq!(bounds, vec![(0.0, 4.0), (4.0, 8.0), (8.0, 10.0)]);
    }

    #[test]
    fn a_rate_off_by_more_than_a_fifth_misses_the_target() {
        let inputs = Inputs {
            admissions: &[],
            records: &[],
            polls: &[],
            changes: &[],
            checkouts: 4,
            tick_ms: 500,
            service: Duration::from_millis(100),
            workers: 4,
            capacity_per_s: 40.0,
        };
        let f = Figures::of(
            Span {
                from: s(0.0),
                to: s(1.0),
            },
            &inputs,
        );
        assert!(!f.within_target());
        assert_eq!(f.checkout_latency, None);
        assert_eq!(f.room_admitted_per_s, None);
    }
}
