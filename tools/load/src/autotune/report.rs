//! What `autotune` mode says at the end: the window's figures against the
//! origin's capacity and autotune's target, the schedule's entry, the
//! timeline, the shoppers, and the one-line JSON summary (`--json`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::json;

use crate::common::{self, ErrorKinds, Latency, say};

use super::figures::{Figures, WITHIN};
use super::shopper::Ended;
use super::watch::{self, Counted, Entry};
use super::{AutotuneRun, Ran, figures_of};

/// How the shoppers' visits ended, and what they met on the way.
#[derive(Debug, Default, Serialize)]
struct Shoppers {
    arrived: usize,
    admitted: u64,
    checked_out: u64,
    gave_up: BTreeMap<&'static str, u64>,
    failed: BTreeMap<String, u64>,
    finished: BTreeMap<String, u64>,
    checkout_requests_answered: u64,
    /// Arrival → admission, of those admitted.
    waited: Option<Latency>,
    sockets_lost: u64,
    polls: u64,
    errors: ErrorKinds,
}

fn shoppers(ran: &Ran) -> Shoppers {
    let mut s = Shoppers {
        arrived: ran.outcomes.len(),
        ..Shoppers::default()
    };
    let mut waited = Vec::new();
    for o in &ran.outcomes {
        match &o.ended {
            Ended::CheckedOut => s.checked_out += 1,
            Ended::GaveUp(stage) => *s.gave_up.entry(stage).or_default() += 1,
            Ended::Failed(why) => *s.failed.entry(why.clone()).or_default() += 1,
            Ended::Finished(what) => *s.finished.entry(what.clone()).or_default() += 1,
        }
        s.admitted += o.admitted_at.is_some() as u64;
        waited.extend(o.visit.waited_us);
        s.checkout_requests_answered += o.checkouts_answered as u64;
        s.sockets_lost += o.visit.sockets_lost as u64;
        s.polls += o.visit.polls as u64;
        common::merge(&mut s.errors, o.visit.errors.clone());
    }
    common::merge(&mut s.errors, ran.lost_tasks.clone());
    s.waited = Latency::from_micros(waited);
    s
}

/// Autotune's changes: those listed in the window and in the whole run,
/// and the nodes' counters for both.
#[derive(Debug, Serialize)]
struct Changes {
    window: Counted,
    window_counted: Option<Counted>,
    run: Counted,
    run_counted: Counted,
    list: Vec<watch::Change>,
}

fn changes(ran: &Ran, window: &Figures) -> Changes {
    let run = Counted {
        down: ran.watched.changes.iter().filter(|c| c.to < c.from).count() as u64,
        up: ran.watched.changes.iter().filter(|c| c.to > c.from).count() as u64,
    };
    Changes {
        window: Counted {
            down: window.changes_down as u64,
            up: window.changes_up as u64,
        },
        window_counted: ran
            .watched
            .counted_at_window
            .map(|at_window| ran.counted_at_end.since(at_window)),
        run,
        run_counted: ran.counted_at_end,
        list: ran.watched.changes.clone(),
    }
}

pub(super) fn report(run: &AutotuneRun<'_>, ran: &Ran) {
    let json = run.json;
    let (window, timeline) = figures_of(run, ran);
    let changes = changes(ran, &window);
    let entries = ran.room.as_ref().map(watch::entries_of).unwrap_or_default();
    if let Err(why) = &ran.room {
        say(json, format!("the room at the end: unreadable ({why})"));
    }
    let shoppers = shoppers(ran);
    say_window(run, ran, &window, &changes);
    say_schedule(json, &entries);
    say_timeline(json, &timeline);
    say_shoppers(json, &shoppers);
    let samples_taken = window.origin_health_checks > 0;
    if !samples_taken {
        say(
            json,
            "warning: no health check reached the origin in the window: are the nodes allowed to call \
             loopback (--outbound-allow-networks 127.0.0.0/8)?",
        );
    }
    let schedule_applied =
        entries.len() == 1 && entries[0].applied_at.is_some() && entries[0].error.is_none();
    let check = samples_taken
        && schedule_applied
        && shoppers.admitted > 0
        && ran.lost_tasks.is_empty()
        && ran.watched.errors.is_empty();
    if let Some(cpu) = ran.cpu {
        say(json, format!("during the run, {cpu}"));
    }
    say(
        json,
        format!(
            "ran {:.1} s; load average {} → {}; check: {}",
            ran.elapsed_s,
            ran.load_start.as_deref().unwrap_or("?"),
            ran.load_end.as_deref().unwrap_or("?"),
            if check {
                "passed (the schedule's entry applied, the origin's health checked, shoppers admitted, every task reported)"
            } else {
                "FAILED (see above)"
            }
        ),
    );
    if json {
        let summary = json!({
            "mode": "autotune",
            "nodes": run.nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
            "room": run.room,
            "settings": settings(run),
            "origin_capacity_per_s": run.capacity.per_s(),
            "origin_measured_per_s": ran.measured_per_s,
            "window": window,
            "within_target": window.within_target(),
            "p95_within_target": window.checkout_latency.is_some_and(|l| l.p95_ms <= run.latency_target_ms as f64),
            "changes": changes,
            "schedule": entries,
            "schedule_applied": schedule_applied,
            "samples_taken": samples_taken,
            "timeline": timeline,
            "shoppers": shoppers,
            "watch_errors": ran.watched.errors,
            "cpu": ran.cpu,
            "load_average_start": ran.load_start,
            "load_average_end": ran.load_end,
            "elapsed_s": ran.elapsed_s,
            "check_passed": check,
        });
        println!("{summary}");
    }
}

fn settings(run: &AutotuneRun<'_>) -> serde_json::Value {
    json!({
        "arrival_rate_per_s": run.arrival_rate,
        "duration_s": run.duration.as_secs(),
        "window_s": run.window.as_secs(),
        "admit_per_tick": run.admit_per_tick,
        "tick_ms": run.tick_ms,
        "phase_at_s": run.phase.at.as_secs(),
        "phase_admit_per_tick": run.phase.admit_per_tick,
        "phase_notice": run.phase.notice,
        "latency_target_ms": run.latency_target_ms,
        "error_rate_max": run.error_rate_max,
        "min_per_tick": run.min_per_tick,
        "origin": run.capacity,
        "checkouts": run.checkouts,
        "source_ips": run.source_ips,
        "http_concurrency": run.http_concurrency,
    })
}

fn say_window(run: &AutotuneRun<'_>, ran: &Ran, w: &Figures, changes: &Changes) {
    let json = run.json;
    let or_none = |v: Option<f64>| v.map_or("none".into(), |v| format!("{v:.2}/s"));
    say(
        json,
        format!(
            "window: the run's last {} s ({:.0}–{:.0} s)",
            run.window.as_secs(),
            w.from_s,
            w.to_s
        ),
    );
    say(
        json,
        format!(
            "  admitted {:.2} shoppers/s (the room's own count {}; its effective rate averaged {}) × {} requests \
             = {:.1} requests/s asked of the origin",
            w.admitted_per_s,
            or_none(w.room_admitted_per_s),
            or_none(w.effective_per_s),
            run.checkouts,
            w.admitted_requests_per_s
        ),
    );
    say(
        json,
        format!(
            "  the origin takes {:.1} requests/s (measured in this run; {:.1} on paper): admitted ÷ capacity {:.3} \
             (target {:.2}–{:.2}: {})",
            ran.measured_per_s,
            run.capacity.per_s(),
            w.admitted_to_capacity,
            1.0 - WITHIN,
            1.0 + WITHIN,
            if w.within_target() {
                "within"
            } else {
                "MISSED"
            }
        ),
    );
    say(
        json,
        format!(
            "  the origin served {:.1} checkout requests/s ({:.3} of its capacity), its workers busy {:.1}% of the \
             time, {} shed",
            w.origin_served_per_s,
            w.served_to_capacity,
            w.origin_busy_share * 100.0,
            w.origin_shed
        ),
    );
    let text = |l: Option<super::figures::Percentiles>| l.map_or("none".into(), |l| l.to_string());
    say(
        json,
        format!(
            "  checkout latency at the origin (queue and service): {}; the queue alone p95 {}; p95 ÷ target {} ms: {}",
            text(w.checkout_latency),
            w.checkout_wait
                .map_or("none".into(), |l| format!("{:.0} ms", l.p95_ms)),
            run.latency_target_ms,
            w.checkout_latency.map_or("none".into(), |l| format!(
                "{:.2}",
                l.p95_ms / run.latency_target_ms as f64
            ))
        ),
    );
    say(
        json,
        format!("  health checks at the origin: {}", text(w.health_latency)),
    );
    say(
        json,
        format!(
            "  autotune's changes in the window: {} down, {} up (the nodes' counters: {}); in the whole run: {} down, \
             {} up (counters: {} down, {} up)",
            changes.window.down,
            changes.window.up,
            changes
                .window_counted
                .map_or("unread".into(), |c| format!("{} down, {} up", c.down, c.up)),
            changes.run.down,
            changes.run.up,
            changes.run_counted.down,
            changes.run_counted.up
        ),
    );
}

fn say_schedule(json: bool, entries: &[Entry]) {
    if entries.is_empty() {
        say(json, "schedule: unreadable");
    }
    for e in entries {
        say(
            json,
            format!(
                "schedule: the entry at {} applied at {} ({}){}",
                e.at.as_deref().unwrap_or("?"),
                e.applied_at.as_deref().unwrap_or("never"),
                e.applied_after_ms
                    .map_or("-".into(), |ms| format!("{ms:+} ms")),
                e.error
                    .as_ref()
                    .map_or(String::new(), |e| format!("; skipped: {e}"))
            ),
        );
    }
}

fn say_timeline(json: bool, timeline: &[Figures]) {
    say(
        json,
        "timeline: from–to s | admitted/s | effective/s | asked ÷ capacity | served ÷ capacity | checkout p95 ms | changes down/up",
    );
    for f in timeline {
        say(
            json,
            format!(
                "  {:>4.0}–{:<4.0} | {:>6.2} | {:>6.2} | {:.3} | {:.3} | {:>6} | {}/{}",
                f.from_s,
                f.to_s,
                f.admitted_per_s,
                f.effective_per_s.unwrap_or(f64::NAN),
                f.admitted_to_capacity,
                f.served_to_capacity,
                f.checkout_latency
                    .map_or("-".into(), |l| format!("{:.0}", l.p95_ms)),
                f.changes_down,
                f.changes_up
            ),
        );
    }
}

fn say_shoppers(json: bool, s: &Shoppers) {
    let kinds = |m: &BTreeMap<String, u64>| {
        if m.is_empty() {
            "0".into()
        } else {
            m.iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let gave_up = s
        .gave_up
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ");
    say(
        json,
        format!(
            "shoppers: {} arrived, {} admitted, {} checked out ({} checkout requests answered); at the end still {}; \
             failed: {}; sent away: {}",
            s.arrived,
            s.admitted,
            s.checked_out,
            s.checkout_requests_answered,
            if gave_up.is_empty() {
                "none".into()
            } else {
                gave_up
            },
            kinds(&s.failed),
            kinds(&s.finished)
        ),
    );
    say(
        json,
        format!(
            "  arrival → admission: {}; sockets lost {}, polls {}",
            s.waited.map_or("none".into(), |l| l.to_string()),
            s.sockets_lost,
            s.polls
        ),
    );
    for (kind, n) in &s.errors {
        say(json, format!("  error: {n} × {kind}"));
    }
}
