//! What the admin page shows of a drop (api.md, "Scheduled changes" and
//! "Admission that follows the origin"): a room's schedule as a timeline,
//! each entry's change in words with its time and where it stands, and
//! whether an operator's pause holds it; autotune's effective rate next to
//! `admit_per_tick`, its last decision and its changes, which the chart
//! also marks (`static/admin-chart.js`). The words are the catalogue's
//! (`admin.schedule_…`, `admin.autotune_…`); every value is text the
//! template escapes.

use serde_json::Value;

use crate::http::pages::i18n::Catalogue;
use crate::words::autotune::{AutotuneStats, Change, TuneState};
use crate::words::clock::{Millis, Moment, rfc3339};
use crate::words::config::{Input, field_named};
use crate::words::schedule::{Schedule, ScheduleEntry, WRITE_ONLY};

use super::room_form::value_words;

/// Where a schedule's entry stands (its `data-state` on the page, and what
/// `static/admin-state.js` works out again from the live figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum EntryState {
    Applied,
    Skipped,
    /// The pending entry the stats' `next_change_at` names.
    Next,
    Pending,
}

/// One entry of the timeline.
pub struct TimelineEntry {
    /// RFC 3339, as the API writes it.
    pub at: String,
    /// What it sets: each field's name (`page.headline` for the page's)
    /// and its new value in words.
    pub changes: Vec<(String, String)>,
    pub state: EntryState,
    /// Where it stands, in words: "applied at …", "skipped: …", "next".
    pub said: String,
}

impl TimelineEntry {
    pub fn state_name(&self) -> &'static str {
        self.state.into()
    }
}

/// A room's schedule on the admin page.
pub struct Timeline {
    /// In time order.
    pub entries: Vec<TimelineEntry>,
    /// An operator's pause holds it: entries that fell due wait for the
    /// unpause (the room is paused with a pending entry due by now).
    pub held: bool,
}

/// The timeline of `schedule`; `None` for a room without one.
pub fn timeline(
    t: &'static Catalogue,
    schedule: &Schedule,
    next_change_at: Option<Moment>,
    paused: bool,
    now: Millis,
) -> Option<Timeline> {
    if schedule.is_empty() {
        return None;
    }
    let mut entries: Vec<&ScheduleEntry> = schedule.entries().iter().collect();
    entries.sort_by_key(|e| e.at);
    let next = entries
        .iter()
        .position(|e| e.pending() && Some(e.at) == next_change_at);
    let held = paused && entries.iter().any(|e| e.pending() && e.at.0 <= now);
    let entries = entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let (state, said) = match (entry.applied_at, &entry.error) {
                (Some(applied), _) => (
                    EntryState::Applied,
                    t.fill("admin.schedule_applied", "time", rfc3339(applied.0)),
                ),
                (None, Some(error)) => (
                    EntryState::Skipped,
                    t.fill("admin.schedule_skipped", "error", error),
                ),
                (None, None) if Some(i) == next => {
                    (EntryState::Next, t.text("admin.schedule_next").to_string())
                }
                (None, None) => (
                    EntryState::Pending,
                    t.text("admin.schedule_pending").to_string(),
                ),
            };
            TimelineEntry {
                at: rfc3339(entry.at.0),
                changes: changes_said(t, &entry.set),
                state,
                said,
            }
        })
        .collect();
    Some(Timeline { entries, held })
}

/// What an entry sets, field by field, in words: a page's or autotune's
/// fields one by one (`page.headline`).
fn changes_said(
    t: &'static Catalogue,
    set: &serde_json::Map<String, Value>,
) -> Vec<(String, String)> {
    let mut said = Vec::with_capacity(set.len());
    for (name, value) in set {
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                for (part, value) in inner {
                    said.push((format!("{name}.{part}"), value_said(t, name, value, true)));
                }
            }
            _ => said.push((name.clone(), value_said(t, name, value, false))),
        }
    }
    said
}

/// One value in words: none; a write-only field as set, never its value; a
/// switch or a choice as the room form says it; a text the operator wrote
/// in quotes; a list joined; a number or a time as it is.
fn value_said(t: &'static Catalogue, name: &str, value: &Value, nested: bool) -> String {
    if WRITE_ONLY.contains(&name) && !value.is_null() {
        return t.text("admin.schedule_value_set").to_string();
    }
    if let Some(words) = value_words(t, name, value).filter(|_| !nested) {
        return words.to_string();
    }
    let quoted = nested
        || field_named(name).is_some_and(|f| matches!(f.input, Input::Line(_) | Input::Text(_)));
    match value {
        Value::Null => t.text("admin.schedule_value_none").to_string(),
        Value::String(text) if quoted => format!("“{text}”"),
        Value::String(text) => text.clone(),
        Value::Array(items) if items.is_empty() => t.text("admin.schedule_value_none").to_string(),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map_or_else(|| item.to_string(), String::from))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// Autotune's part of a room on the admin page.
pub struct AutotuneView {
    /// `admit_per_tick`, as configured.
    pub configured: u32,
    /// The rate the ticks admit at.
    pub effective: u32,
    pub dry_run: bool,
    /// The last decision: `cut`, `raised`, `held` or `idle`, and in words.
    pub state: &'static str,
    pub state_said: &'static str,
    pub reason: String,
    /// When it was made (RFC 3339); empty before the first.
    pub decided_at: String,
    /// The changes kept, newest first.
    pub changes: Vec<ChangeView>,
}

/// One change of the effective rate.
pub struct ChangeView {
    /// RFC 3339, as the API writes it.
    pub at: String,
    pub from: u32,
    pub to: u32,
    pub reason: String,
    /// All of it in words: "2026-… 10 → 7: p95 2310 ms > 1000 ms".
    pub said: String,
}

/// Autotune's view of a room with `autotune` on.
pub fn autotune(
    t: &'static Catalogue,
    configured: u32,
    effective: u32,
    dry_run: bool,
    stats: Option<&AutotuneStats>,
) -> AutotuneView {
    let decision = stats.map(|s| &s.decision);
    let state = decision.map(|d| d.state).unwrap_or_default();
    let state_said = match state {
        TuneState::Cut => t.text("admin.autotune_state_cut"),
        TuneState::Raised => t.text("admin.autotune_state_raised"),
        TuneState::Held => t.text("admin.autotune_state_held"),
        TuneState::Idle => t.text("admin.autotune_state_idle"),
    };
    let changes = stats
        .map(|s| s.changes.iter().rev().map(|c| change(t, c)).collect())
        .unwrap_or_default();
    AutotuneView {
        configured,
        effective,
        dry_run,
        state: state.into(),
        state_said,
        reason: decision.map(|d| d.reason.clone()).unwrap_or_default(),
        decided_at: decision
            .and_then(|d| d.at)
            .map(|at| rfc3339(at.0))
            .unwrap_or_default(),
        changes,
    }
}

fn change(t: &'static Catalogue, change: &Change) -> ChangeView {
    let at = rfc3339(change.at.0);
    // The reason last: it is the one value with words of its own.
    let words = t.text("admin.autotune_change");
    let said = words
        .replace("{time}", &at)
        .replace("{from}", &change.from.to_string())
        .replace("{to}", &change.to.to_string())
        .replace("{reason}", &change.reason);
    ChangeView {
        at,
        from: change.from,
        to: change.to,
        reason: change.reason.clone(),
        said,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::i18n::english;
    use serde_json::json;

    const T: Millis = 1_767_225_600_000;

    /// A schedule as the store keeps it: (at, set, applied at, error).
    fn schedule(entries: &[(Millis, Value, Option<Millis>, Option<&str>)]) -> Schedule {
        let stored: Vec<Value> = entries
            .iter()
            .map(|(at, set, applied_at, error)| {
                json!({"at": at, "set": set, "applied_at": applied_at, "error": error})
            })
            .collect();
        Schedule::from_stored(&Value::Array(stored).to_string()).unwrap()
    }

    #[test]
    fn each_entry_says_what_it_changes_and_where_it_stands() {
        let s = schedule(&[
            (T + 3_000, json!({"notice": "Last <sizes>"}), None, None),
            (
                T + 1_000,
                json!({"admit_per_tick": 40, "paused": false, "user_key": "k".repeat(32)}),
                Some(T + 1_001),
                None,
            ),
            (
                T + 2_000,
                json!({"session_idle_s": 300}),
                None,
                Some("session_idle_s must be at most pass_ttl_s"),
            ),
            (
                T + 4_000,
                json!({"page": {"headline": "Open"}, "max_active": null}),
                None,
                None,
            ),
        ]);
        let line = timeline(english(), &s, Some(Moment(T + 3_000)), false, T + 2_500).unwrap();
        assert!(!line.held);
        let states: Vec<_> = line.entries.iter().map(|e| e.state).collect();
        assert_eq!(
            states,
            [
                EntryState::Applied,
                EntryState::Skipped,
                EntryState::Next,
                EntryState::Pending
            ]
        );
        let first = &line.entries[0];
        assert_eq!(first.at, "2026-01-01T00:00:01Z");
        assert_eq!(first.said, "applied at 2026-01-01T00:00:01.001Z");
        let words: Vec<String> = first
            .changes
            .iter()
            .map(|(field, value)| format!("{field} → {value}"))
            .collect();
        assert_eq!(
            words,
            ["admit_per_tick → 40", "paused → running", "user_key → set"]
        );
        assert_eq!(
            line.entries[1].said,
            "skipped: session_idle_s must be at most pass_ttl_s"
        );
        assert_eq!(
            line.entries[2].changes,
            [("notice".to_string(), "“Last <sizes>”".to_string())]
        );
        assert_eq!(
            line.entries[3].changes,
            [
                ("max_active".to_string(), "none".to_string()),
                ("page.headline".to_string(), "“Open”".to_string())
            ]
        );
    }

    #[test]
    fn an_operators_pause_with_an_entry_due_holds_the_schedule() {
        let s = schedule(&[(T + 1_000, json!({"admit_per_tick": 40}), None, None)]);
        let next = Some(Moment(T + 1_000));
        assert!(timeline(english(), &s, next, true, T + 1_000).unwrap().held);
        assert!(!timeline(english(), &s, next, true, T + 999).unwrap().held);
        assert!(
            !timeline(english(), &s, next, false, T + 5_000)
                .unwrap()
                .held
        );
        assert!(timeline(english(), &Schedule::default(), None, true, T).is_none());
    }

    #[test]
    fn autotune_says_its_rate_decision_and_changes_newest_first() {
        let stats = AutotuneStats {
            decision: crate::words::autotune::Decision {
                state: TuneState::Cut,
                reason: "p95 2310 ms > 1000 ms".into(),
                at: Some(Moment(T + 9_000)),
                ..Default::default()
            },
            changes: vec![
                Change {
                    at: Moment(T + 5_000),
                    from: 10,
                    to: 7,
                    reason: "errors 100% > 5% (failed)".into(),
                },
                Change {
                    at: Moment(T + 9_000),
                    from: 7,
                    to: 4,
                    reason: "p95 2310 ms > 1000 ms".into(),
                },
            ],
        };
        let view = autotune(english(), 10, 4, false, Some(&stats));
        assert_eq!((view.state, view.state_said), ("cut", "cut"));
        assert_eq!(view.decided_at, "2026-01-01T00:00:09Z");
        assert_eq!(view.changes[0].to, 4);
        assert_eq!(
            view.changes[1].said,
            "2026-01-01T00:00:05Z: 10 → 7, errors 100% > 5% (failed)"
        );
        let none = autotune(english(), 10, 10, true, None);
        assert_eq!(none.state, "idle");
        assert!(none.changes.is_empty() && none.decided_at.is_empty());
    }
}
