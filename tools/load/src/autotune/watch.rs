//! The room as the operator sees it while `autotune` mode runs: its stats
//! read every couple of seconds (`GET /api/admin/rooms/{room}`), every
//! change autotune made (the stats list the last 20; read this often, none
//! is missed), the schedule's entries, and autotune's counters on each
//! node's `/metrics`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use waitroom::words::clock::Moment;

use crate::common::{self, ErrorKinds, Node};

/// How often the room is read.
pub(super) const POLL_EVERY: Duration = Duration::from_secs(2);

/// One read of the room's stats.
#[derive(Debug, Clone)]
pub(super) struct Poll {
    pub(super) at: Instant,
    pub(super) admitted_total: u64,
    pub(super) waiting: u64,
    pub(super) effective: u64,
    /// Autotune's last decision: state, and reason in words.
    pub(super) state: String,
    pub(super) reason: String,
}

/// A change of the effective rate, as the stats list it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(super) struct Change {
    pub(super) at_ms: u64,
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) reason: String,
}

/// A schedule entry, as the room shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Entry {
    pub(super) at: Option<String>,
    pub(super) applied_at: Option<String>,
    /// From `at` to `applied_at`.
    pub(super) applied_after_ms: Option<i64>,
    pub(super) error: Option<String>,
}

/// Autotune's changes counted on the nodes' `/metrics`, summed over them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(super) struct Counted {
    pub(super) down: u64,
    pub(super) up: u64,
}

impl Counted {
    pub(super) fn since(self, before: Counted) -> Counted {
        Counted {
            down: self.down.saturating_sub(before.down),
            up: self.up.saturating_sub(before.up),
        }
    }
}

/// What the watch saw.
#[derive(Debug, Default)]
pub(super) struct Watched {
    pub(super) polls: Vec<Poll>,
    pub(super) changes: Vec<Change>,
    /// The counters when the window opened.
    pub(super) counted_at_window: Option<Counted>,
    pub(super) errors: ErrorKinds,
}

/// The room's admin view, if it answered.
pub(super) async fn read_room(
    http: &reqwest::Client,
    node: &Node,
    admin_token: &str,
    room: &str,
) -> Result<Value, String> {
    let answer = http
        .get(format!("{}/api/admin/rooms/{room}", node.base))
        .bearer_auth(admin_token)
        .send()
        .await
        .map_err(|e| common::error_kind(&e))?;
    match answer.status().as_u16() {
        200 => answer.json().await.map_err(|e| common::error_kind(&e)),
        status => Err(format!("HTTP {status}")),
    }
}

/// Milliseconds since the epoch of an RFC 3339 time in the room's JSON.
pub(super) fn epoch_ms(value: &Value) -> Option<u64> {
    serde_json::from_value::<Moment>(value.clone())
        .ok()
        .map(|m| m.0)
}

/// The stats' figures of one read.
pub(super) fn poll_of(room: &Value, at: Instant) -> Poll {
    let stats = &room["stats"];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Poll {
        at,
        admitted_total: n(&stats["admitted_total"]),
        waiting: n(&stats["waiting"]),
        effective: n(&stats["admit_per_tick_effective"]),
        state: text(&stats["autotune"]["state"]),
        reason: text(&stats["autotune"]["reason"]),
    }
}

/// The changes the stats list.
pub(super) fn changes_of(room: &Value) -> Vec<Change> {
    let Some(list) = room["stats"]["autotune"]["changes"].as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|c| {
            Some(Change {
                at_ms: epoch_ms(&c["at"])?,
                from: c["from"].as_u64()?,
                to: c["to"].as_u64()?,
                reason: c["reason"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect()
}

/// The schedule's entries as the room shows them.
pub(super) fn entries_of(room: &Value) -> Vec<Entry> {
    let Some(list) = room["schedule"].as_array() else {
        return Vec::new();
    };
    list.iter()
        .map(|e| Entry {
            at: e["at"].as_str().map(str::to_string),
            applied_at: e["applied_at"].as_str().map(str::to_string),
            applied_after_ms: epoch_ms(&e["applied_at"])
                .zip(epoch_ms(&e["at"]))
                .map(|(applied, at)| applied as i64 - at as i64),
            error: e["error"].as_str().map(str::to_string),
        })
        .collect()
}

/// `waitroom_autotune_changes_total{room,direction}` in a node's metrics.
pub(super) fn counted_in(metrics: &str, room: &str) -> Counted {
    let mut counted = Counted::default();
    let room_label = format!("room=\"{room}\"");
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("waitroom_autotune_changes_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        if !labels.split(',').any(|l| l == room_label) {
            continue;
        }
        let n = value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        if labels.contains("direction=\"down\"") {
            counted.down += n;
        } else if labels.contains("direction=\"up\"") {
            counted.up += n;
        }
    }
    counted
}

/// The counters summed over every node (a node that does not answer counts nothing).
pub(super) async fn counted(nodes: &[Node], room: &str) -> Counted {
    let mut sum = Counted::default();
    for node in nodes {
        if let Ok(text) = common::metrics_text(node).await {
            let c = counted_in(&text, room);
            sum.down += c.down;
            sum.up += c.up;
        }
    }
    sum
}

/// Adds the changes of one read to those seen (each once).
pub(super) fn merge_changes(seen: &mut Vec<Change>, read: Vec<Change>) {
    let mut all: BTreeMap<(u64, u64, u64), Change> = seen
        .drain(..)
        .map(|c| ((c.at_ms, c.from, c.to), c))
        .collect();
    for change in read {
        all.entry((change.at_ms, change.from, change.to))
            .or_insert(change);
    }
    seen.extend(all.into_values());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rooms_stats_changes_and_schedule_are_read() {
        let room = json!({
            "schedule": [{"at": "2026-01-01T00:01:00Z", "set": {"notice": "n"},
                          "applied_at": "2026-01-01T00:01:00.250Z", "error": null}],
            "stats": {"admitted_total": 40, "waiting": 7, "admit_per_tick_effective": 4,
                      "autotune": {"state": "cut", "reason": "p95 410 ms > 300 ms",
                                   "changes": [{"at": "2026-01-01T00:00:10Z", "from": 6, "to": 4,
                                                "reason": "p95 410 ms > 300 ms"}]}}
        });
        let poll = poll_of(&room, Instant::now());
        assert_eq!(
            (poll.admitted_total, poll.waiting, poll.effective),
            (40, 7, 4)
        );
        assert_eq!(poll.state, "cut");
        let changes = changes_of(&room);
        assert_eq!(changes.len(), 1);
        assert_eq!((changes[0].from, changes[0].to), (6, 4));
        assert_eq!(changes[0].at_ms, 1_767_225_610_000);
        let entries = entries_of(&room);
        assert_eq!(entries[0].applied_after_ms, Some(250));
        assert_eq!(entries[0].error, None);
        let pending =
            entries_of(&json!({"schedule": [{"at": "2026-01-01T00:01:00Z", "applied_at": null}]}));
        assert_eq!(pending[0].applied_after_ms, None);
    }

    #[test]
    fn changes_seen_twice_are_kept_once_in_time_order() {
        let change = |at_ms, from, to| Change {
            at_ms,
            from,
            to,
            reason: String::new(),
        };
        let mut seen = vec![change(10, 6, 4), change(20, 4, 5)];
        merge_changes(
            &mut seen,
            vec![change(20, 4, 5), change(15, 4, 3), change(30, 5, 3)],
        );
        let at: Vec<u64> = seen.iter().map(|c| c.at_ms).collect();
        assert_eq!(at, vec![10, 15, 20, 30]);
    }

    #[test]
    fn autotunes_counters_are_read_for_the_room_only() {
        let text = "# TYPE waitroom_autotune_changes_total counter\n\
            waitroom_autotune_changes_total{direction=\"down\",room=\"shop\"} 7\n\
            waitroom_autotune_changes_total{direction=\"up\",room=\"shop\"} 5\n\
            waitroom_autotune_changes_total{direction=\"up\",room=\"shop-2\"} 9\n";
        assert_eq!(counted_in(text, "shop"), Counted { down: 7, up: 5 });
        assert_eq!(counted_in(text, "other"), Counted::default());
        let later = Counted { down: 9, up: 6 };
        assert_eq!(
            later.since(Counted { down: 7, up: 5 }),
            Counted { down: 2, up: 1 }
        );
    }
}
