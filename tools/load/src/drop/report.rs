//! The room's own report at the end of a drop (`GET
//! /api/admin/rooms/{room}/report`), beside what the visitors measured:
//! the counts must be equal exactly, and each wait percentile the room
//! gives must lie within its bucket's width of the visitors' own, once
//! what the visitors measure beyond the store's wait is allowed for (the
//! join's answer, and the admission reaching the visitor).

use serde::Serialize;
use serde_json::Value;
use waitroom::words::report::WAIT_BOUNDS_S;

use crate::common::say;

use super::DropRun;
use super::summary::Summary;

/// The room's counts and waits against the visitors'.
#[derive(Debug, Default, Serialize)]
pub(super) struct RoomReport {
    /// Whether the report was read at all.
    pub(super) read: bool,
    /// `arrivals`, `passed_through`, `admitted` (from the line): the
    /// room's, then the visitors'.
    pub(super) counts: Vec<(&'static str, u64, u64)>,
    pub(super) counts_equal: bool,
    /// p50 and p90 of the waits in line (s): the room's, the visitors',
    /// and how far apart they may be.
    pub(super) waits: Vec<(&'static str, f64, f64, f64)>,
    pub(super) waits_within: bool,
}

/// The width (s) of the report's bucket that holds `seconds`.
fn bucket_width(seconds: f64) -> f64 {
    let mut low = 0.0;
    for bound in WAIT_BOUNDS_S {
        let high = bound as f64;
        if seconds <= high {
            return high - low;
        }
        low = high;
    }
    // The +Inf bucket ends at the longest wait: its percentiles are exact
    // only to the bucket, from the last bound up.
    seconds - low
}

/// The `q` quantile (nearest rank) of waits in microseconds, in seconds.
fn quantile_s(sorted_us: &[u64], q: f64) -> f64 {
    let index = ((q * sorted_us.len() as f64).ceil() as usize).max(1) - 1;
    sorted_us[index.min(sorted_us.len() - 1)] as f64 / 1e6
}

impl RoomReport {
    pub(super) async fn read(http: &reqwest::Client, run: &DropRun<'_>, s: &Summary) -> Self {
        let url = format!("{}/api/admin/rooms/{}/report", run.nodes[0].base, run.room);
        let report: Option<Value> = match http.get(url).bearer_auth(run.admin_token).send().await {
            Ok(response) if response.status() == 200 => response.json().await.ok(),
            _ => None,
        };
        let Some(report) = report else {
            return Self::default();
        };
        let n = |field: &str| report[field].as_u64().unwrap_or(u64::MAX);
        let counts = vec![
            ("arrivals", n("arrivals"), s.joined),
            ("passed_through", n("passed_through"), s.admitted_at_join),
            (
                "admitted",
                n("admitted"),
                s.admitted.saturating_sub(s.admitted_at_join),
            ),
        ];
        let counts_equal = counts.iter().all(|(_, room, tool)| room == tool);
        // What the visitors measure beyond the store's wait: their join's
        // answer, and the admission's way to them (p99 of each).
        let slack = [&s.first_position, &s.tick_to_admission]
            .iter()
            .map(|l| l.map_or(0.0, |l| l.p99_ms / 1000.0))
            .sum::<f64>();
        let mut waits = Vec::new();
        let mut line = s.line_waits_us.clone();
        line.sort_unstable();
        for (name, q) in [("p50", 0.5), ("p90", 0.9)] {
            if let (Some(room), false) = (report["wait_seconds"][name].as_f64(), line.is_empty()) {
                waits.push((name, room, quantile_s(&line, q), bucket_width(room) + slack));
            }
        }
        let waits_within = !waits.is_empty()
            && waits
                .iter()
                .all(|(_, room, tool, allowed)| (room - tool).abs() <= *allowed);
        Self {
            read: true,
            counts,
            counts_equal,
            waits,
            waits_within,
        }
    }

    /// Whether the room's report agrees with the visitors (nobody waited
    /// in line: nothing to compare the waits with).
    pub(super) fn agrees(&self) -> bool {
        self.read && self.counts_equal && (self.waits_within || self.waits.is_empty())
    }

    pub(super) fn say(&self, json: bool) {
        if !self.read {
            say(json, "the room's report: unreadable");
            return;
        }
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(name, room, tool)| format!("{name} {room} (visitors: {tool})"))
            .collect();
        say(
            json,
            format!(
                "the room's report: {}: {}",
                counts.join(", "),
                if self.counts_equal {
                    "equal"
                } else {
                    "NOT EQUAL"
                }
            ),
        );
        for (name, room, tool, allowed) in &self.waits {
            say(
                json,
                format!(
                    "  wait in line {name}: the room {room:.3} s, the visitors {tool:.3} s; apart by at most \
                     {allowed:.3} s (its bucket's width and the visitors' own latency): {}",
                    if (room - tool).abs() <= *allowed {
                        "within"
                    } else {
                        "OUTSIDE"
                    }
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_allowed_its_buckets_width() {
        assert_eq!(bucket_width(0.4), 1.0);
        assert_eq!(bucket_width(3.0), 3.0);
        assert_eq!(bucket_width(45.0), 30.0);
        assert_eq!(bucket_width(8_000.0), 800.0);
    }

    #[test]
    fn quantiles_are_nearest_rank_in_seconds() {
        let waits: Vec<u64> = (1..=10).map(|s| s * 1_000_000).collect();
        assert_eq!(quantile_s(&waits, 0.5), 5.0);
        assert_eq!(quantile_s(&waits, 0.9), 9.0);
    }
}
