//! What the sockets' statuses say about the ticks: each tick's delay to
//! each socket, the updates a waiting socket missed, the interval between
//! ticks, and the lines that report them.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::{self, Latency, say};

use super::hold::SocketOutcome;

/// Per-tick lines printed at most (the summary covers every tick).
pub(super) const TICK_LINES: usize = 12;

/// The per-tick lines, the latency over every delivery, the hold's CPU and
/// the interval between ticks, for one phase.
pub(super) fn report_ticks(
    json: bool,
    label: &str,
    ticks: &TickAnalysis,
    latency: Option<&Latency>,
    hold_cpu: Option<&common::CpuUse>,
    tick_ms: u64,
) {
    for line in ticks.per_tick.iter().take(TICK_LINES) {
        say(
            json,
            format!(
                "{label}  tick {} on node {}: {} of {} sockets got it, last after {:.1} ms",
                line.tick_at_ms,
                line.node,
                line.received,
                line.expected,
                line.max_us as f64 / 1000.0
            ),
        );
    }
    if ticks.per_tick.len() > TICK_LINES {
        say(
            json,
            format!(
                "{label}  … {} more ticks",
                ticks.per_tick.len() - TICK_LINES
            ),
        );
    }
    say(
        json,
        format!(
            "{label}ticks measured: {}; tick→socket latency over {} deliveries: {}; missed updates: {}",
            ticks.per_tick.len(),
            ticks.delays_us.len(),
            latency.map_or_else(|| "none".into(), |l| l.to_string()),
            ticks.missed
        ),
    );
    if let Some(cpu) = hold_cpu {
        say(json, format!("{label}during the hold, {cpu}"));
    }
    if let Some((min, max)) = ticks.interval_ms {
        say(
            json,
            format!(
                "{label}interval between ticks: min {min} ms, max {max} ms (room tick_ms {tick_ms})"
            ),
        );
    }
}

/// Per-tick delivery figures.
#[derive(Debug, Default)]
pub(super) struct TickAnalysis {
    /// Tick → socket delay of every first delivery of a tick in the window.
    pub(super) delays_us: Vec<u64>,
    /// (socket, tick) pairs where the socket was still waiting, the tick
    /// reached other sockets on its node, and this socket never got it.
    pub(super) missed: u64,
    pub(super) per_tick: Vec<TickLine>,
    /// Smallest and largest gap between consecutive ticks seen on a node.
    pub(super) interval_ms: Option<(u64, u64)>,
}

#[derive(Debug, Default)]
pub(super) struct TickLine {
    pub(super) node: usize,
    pub(super) tick_at_ms: u64,
    pub(super) expected: u64,
    pub(super) received: u64,
    pub(super) max_us: u64,
}

/// Ticks are those stamped within `window` (ms, start inclusive, end
/// exclusive) that at least one socket on a node received. A socket is
/// expected to get every such tick on its node unless it was already
/// admitted (or otherwise settled) by an earlier tick.
pub(super) fn analyze(
    outcomes: &[SocketOutcome],
    nodes: usize,
    window: (u64, u64),
) -> TickAnalysis {
    let in_window = |t: u64| t >= window.0 && t < window.1;
    let mut ticks: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); nodes];
    for outcome in outcomes {
        for status in &outcome.statuses {
            if let Some(t) = status.tick_at_ms.filter(|t| in_window(*t)) {
                ticks[outcome.node].insert(t);
            }
        }
    }
    let mut lines: BTreeMap<(usize, u64), TickLine> = BTreeMap::new();
    for (node, node_ticks) in ticks.iter().enumerate() {
        for &t in node_ticks {
            lines.insert(
                (node, t),
                TickLine {
                    node,
                    tick_at_ms: t,
                    ..TickLine::default()
                },
            );
        }
    }
    let mut analysis = TickAnalysis::default();
    for outcome in outcomes.iter().filter(|o| o.open_error.is_none()) {
        let mut got: BTreeMap<u64, u64> = BTreeMap::new();
        for status in &outcome.statuses {
            if let Some(t) = status.tick_at_ms.filter(|t| in_window(*t)) {
                got.entry(t)
                    .or_insert_with(|| status.at_us.saturating_sub(t * 1000));
            }
        }
        let settled_at = outcome
            .statuses
            .iter()
            .find(|s| !s.waiting)
            .map(|s| s.tick_at_ms.unwrap_or(0));
        for &t in &ticks[outcome.node] {
            if settled_at.is_some_and(|settled| settled < t) {
                continue;
            }
            let line = lines
                .get_mut(&(outcome.node, t))
                .expect("every tick has a line");
            line.expected += 1;
            match got.get(&t) {
                Some(&delay) => {
                    line.received += 1;
                    line.max_us = line.max_us.max(delay);
                    analysis.delays_us.push(delay);
                }
                None => analysis.missed += 1,
            }
        }
    }
    for node_ticks in &ticks {
        let sorted: Vec<u64> = node_ticks.iter().copied().collect();
        for pair in sorted.windows(2) {
            let gap = pair[1] - pair[0];
            analysis.interval_ms = Some(match analysis.interval_ms {
                Some((min, max)) => (min.min(gap), max.max(gap)),
                None => (gap, gap),
            });
        }
    }
    analysis.per_tick = lines.into_values().collect();
    analysis
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockets::hold::Received;

    fn got(tick: u64, after_ms: u64, waiting: bool) -> Received {
        Received {
            tick_at_ms: Some(tick),
            at_us: (tick + after_ms) * 1000,
            waiting,
        }
    }

    #[test]
    fn a_waiting_socket_that_misses_a_tick_counts_and_an_admitted_one_does_not() {
        let outcomes = vec![
            SocketOutcome {
                statuses: vec![got(1000, 2, true), got(2000, 3, true)],
                ..SocketOutcome::default()
            },
            // Missed tick 2000.
            SocketOutcome {
                statuses: vec![got(1000, 5, true)],
                ..SocketOutcome::default()
            },
            // Admitted at tick 1000: tick 2000 is not expected.
            SocketOutcome {
                statuses: vec![got(1000, 1, false)],
                ..SocketOutcome::default()
            },
            // Before the window: ignored.
            SocketOutcome {
                statuses: vec![got(500, 1, true), got(1000, 1, true), got(2000, 1, true)],
                ..SocketOutcome::default()
            },
        ];
        let analysis = analyze(&outcomes, 1, (900, 3000));
        assert_eq!(analysis.missed, 1);
        assert_eq!(analysis.per_tick.len(), 2);
        assert_eq!(analysis.delays_us.len(), 6);
        assert_eq!(analysis.interval_ms, Some((1000, 1000)));
        let max = analysis.per_tick.iter().map(|l| l.max_us).max();
        assert_eq!(max, Some(5000));
    }
}
