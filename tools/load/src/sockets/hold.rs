//! One phase's sockets (the floor's or the nodes'): opening them all,
//! meeting the other processes at the barrier, holding them while the
//! ticks go out, and what each socket saw.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use waitroom::words::clock::Millis;
use waitroom::words::status::State;

use crate::common::{self, ErrorKinds, Latency, epoch_micros, say};

use super::barrier::meet;
use super::open::{SocketSpec, client_config, count_opened, open_counted, read_statuses};
use super::ticks::{TickAnalysis, analyze};

/// The longest the sockets' tasks may take to stop and hand in what they saw.
pub(super) const COLLECT_LIMIT: Duration = Duration::from_secs(30);

/// What one socket saw.
#[derive(Debug, Default)]
pub(super) struct SocketOutcome {
    pub(super) node: usize,
    /// Why it did not open, if it did not.
    pub(super) open_error: Option<String>,
    /// Connect plus handshake, once it had its turn to open.
    pub(super) open_us: u64,
    pub(super) statuses: Vec<Received>,
    /// Why it ended before the run stopped it, if it did.
    pub(super) ended: Option<String>,
}

/// One Status message, stamped when it arrived.
#[derive(Debug, Clone, Copy)]
pub(super) struct Received {
    pub(super) tick_at_ms: Option<Millis>,
    pub(super) at_us: u64,
    pub(super) waiting: bool,
}

/// How a phase opens and holds its sockets.
pub(super) struct HoldPlan<'a> {
    /// Prefixes the phase's lines (`"floor: "`, or nothing).
    pub(super) label: &'static str,
    pub(super) nodes: usize,
    pub(super) open_concurrency: usize,
    pub(super) hold: Duration,
    pub(super) drain: Duration,
    pub(super) barrier: Option<(PathBuf, u32)>,
    pub(super) server_pids: &'a [u32],
    /// Reset every connection when the phase ends, so that it leaves no
    /// TIME_WAIT behind for the next phase's `bind` to search past.
    pub(super) reset_on_stop: bool,
    pub(super) json: bool,
}

/// What one phase's sockets saw.
pub(super) struct Phase {
    pub(super) opened: u64,
    pub(super) open_s: f64,
    pub(super) held_s: f64,
    pub(super) hold_cpu: Option<common::CpuUse>,
    pub(super) open_errors: ErrorKinds,
    pub(super) closed_early: ErrorKinds,
    pub(super) open_latency: Option<Latency>,
    pub(super) ticks: TickAnalysis,
    pub(super) latency: Option<Latency>,
    pub(super) tool_open_fds: Option<u64>,
}

impl Phase {
    /// The figures both the node's and the floor's summaries give of a
    /// phase that asked for `requested` sockets.
    pub(super) fn figures(&self, requested: u64) -> serde_json::Map<String, serde_json::Value> {
        let figures = serde_json::json!({
            "opened": self.opened,
            "failed": requested - self.opened,
            "open_errors": self.open_errors,
            "open_s": self.open_s,
            "open_latency": self.open_latency,
            "closed_early": self.closed_early.values().sum::<u64>(),
            "closed_early_reasons": self.closed_early,
            "held_s": self.held_s,
            "ticks_measured": self.ticks.per_tick.len(),
            "deliveries": self.ticks.delays_us.len(),
            "missed_updates": self.ticks.missed,
            "tick_latency": self.latency,
            "tick_interval_ms": self.ticks.interval_ms
                .map(|(min, max)| serde_json::json!({"min": min, "max": max})),
            "hold_cpu": self.hold_cpu,
        });
        match figures {
            serde_json::Value::Object(figures) => figures,
            _ => unreachable!("json! of an object"),
        }
    }
}

/// Opens every socket of `specs` (at most `open_concurrency` handshakes at
/// a time), meets the other processes at the barrier if there is one, holds
/// them all for `hold` (running `mid_hold` half-way through), lets the
/// ticks of the hold drain, stops, and analyzes what every socket got.
pub(super) async fn open_and_hold<F: Future>(
    specs: Vec<SocketSpec>,
    plan: &HoldPlan<'_>,
    mid_hold: F,
) -> (Phase, F::Output) {
    let (json, label) = (plan.json, plan.label);
    let (stop_tx, stop_rx) = watch::channel(false);
    let open_started = Instant::now();
    let (tasks, opened, open_failed) = open_all(specs, plan, stop_rx).await;
    let open_s = open_started.elapsed().as_secs_f64();
    say(
        json,
        format!("{label}opened {opened} sockets in {open_s:.2} s ({open_failed} failed)"),
    );
    if let Some((dir, parties)) = &plan.barrier {
        meet_before_hold(json, label, dir, *parties).await;
    }
    let all_open = Instant::now();
    let cpu_start = common::cpu_mark(plan.server_pids);
    let all_open_us = epoch_micros();
    say(
        json,
        format!("{label}holding {opened} sockets {} s", plan.hold.as_secs()),
    );

    tokio::time::sleep_until((all_open + plan.hold / 2).into()).await;
    let tool_open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .ok();
    let mid = mid_hold.await;
    tokio::time::sleep_until((all_open + plan.hold).into()).await;
    let hold_end_us = epoch_micros();
    let held_s = all_open.elapsed().as_secs_f64();
    let hold_cpu = match (cpu_start, common::cpu_mark(plan.server_pids)) {
        (Some(start), Some(end)) => Some(end.since(&start)),
        _ => None,
    };
    // Ticks that ran during the hold may still be on their way: give them
    // `drain` to arrive before stopping.
    tokio::time::sleep(plan.drain).await;
    let _ = stop_tx.send(true);

    let (outcomes, task_errors) = collect_outcomes(tasks).await;
    let window = (all_open_us / 1000 + 1, hold_end_us / 1000);
    let ticks = analyze(&outcomes, plan.nodes, window);
    let latency = Latency::from_micros(ticks.delays_us.clone());
    let (open_errors, closed_early, open_latency) = open_figures(&outcomes, task_errors);
    let phase = Phase {
        opened,
        open_s,
        held_s,
        hold_cpu,
        open_errors,
        closed_early,
        open_latency,
        ticks,
        latency,
        tool_open_fds,
    };
    (phase, mid)
}

/// Spawns a task per socket and waits until each has opened or failed;
/// returns the tasks and how many opened and failed.
pub(super) async fn open_all(
    specs: Vec<SocketSpec>,
    plan: &HoldPlan<'_>,
    stop_rx: watch::Receiver<bool>,
) -> (Vec<JoinHandle<SocketOutcome>>, u64, u64) {
    let (opened_tx, mut opened_rx) = mpsc::unbounded_channel::<bool>();
    let permits = Arc::new(Semaphore::new(plan.open_concurrency));
    let config = client_config();
    let mut tasks = Vec::new();
    for spec in specs {
        tasks.push(tokio::spawn(hold_socket(
            spec,
            config,
            permits.clone(),
            opened_tx.clone(),
            stop_rx.clone(),
            plan.reset_on_stop,
        )));
    }
    drop(opened_tx);
    let (opened, open_failed) = count_opened(&mut opened_rx, tasks.len()).await;
    (tasks, opened, open_failed)
}

/// Waits at the barrier for the other processes, saying how it went.
pub(super) async fn meet_before_hold(json: bool, label: &str, dir: &Path, parties: u32) {
    let waited = Instant::now();
    match meet(dir, parties).await {
        Ok(ready) => say(
            json,
            format!(
                "{label}{ready} of {parties} processes ready at {} after {:.2} s",
                dir.display(),
                waited.elapsed().as_secs_f64()
            ),
        ),
        Err(error) => say(json, format!("{label}warning: barrier: {error}")),
    }
}

/// Every socket's outcome, waiting at most [`COLLECT_LIMIT`]; a task that
/// failed or did not stop is counted among the open errors.
pub(super) async fn collect_outcomes(
    tasks: Vec<JoinHandle<SocketOutcome>>,
) -> (Vec<SocketOutcome>, ErrorKinds) {
    let mut outcomes = Vec::with_capacity(tasks.len());
    let mut open_errors = ErrorKinds::new();
    let collect_deadline = tokio::time::Instant::now() + COLLECT_LIMIT;
    for task in tasks {
        match tokio::time::timeout_at(collect_deadline, task).await {
            Ok(Ok(outcome)) => outcomes.push(outcome),
            Ok(Err(error)) => common::count(&mut open_errors, format!("task failed: {error}")),
            Err(_) => common::count(&mut open_errors, "task did not stop"),
        }
    }
    (outcomes, open_errors)
}

/// Why sockets did not open, why they closed early, and how long opening
/// took those that opened.
pub(super) fn open_figures(
    outcomes: &[SocketOutcome],
    mut open_errors: ErrorKinds,
) -> (ErrorKinds, ErrorKinds, Option<Latency>) {
    let mut closed_early = ErrorKinds::new();
    for outcome in outcomes {
        if let Some(error) = &outcome.open_error {
            common::count(&mut open_errors, error.clone());
        }
        if let Some(why) = &outcome.ended {
            common::count(&mut closed_early, why.clone());
        }
    }
    let open_latency = Latency::from_micros(
        outcomes
            .iter()
            .filter(|o| o.open_error.is_none())
            .map(|o| o.open_us)
            .collect(),
    );
    (open_errors, closed_early, open_latency)
}

/// Opens one socket, reports whether it opened, then records every status
/// until told to stop.
pub(super) async fn hold_socket(
    spec: SocketSpec,
    config: WebSocketConfig,
    permits: Arc<Semaphore>,
    opened: mpsc::UnboundedSender<bool>,
    mut stop: watch::Receiver<bool>,
    reset_on_stop: bool,
) -> SocketOutcome {
    let mut outcome = SocketOutcome {
        node: spec.node,
        ..SocketOutcome::default()
    };
    let (open, open_us) = open_counted(&spec, config, &permits, &opened).await;
    outcome.open_us = open_us;
    let mut ws = match open {
        Ok(ws) => ws,
        Err(error) => {
            outcome.open_error = Some(error.0);
            return outcome;
        }
    };
    drop(spec);
    let statuses = &mut outcome.statuses;
    outcome.ended = read_statuses(&mut ws, &mut stop, reset_on_stop, |status, at_us| {
        statuses.push(Received {
            tick_at_ms: status.tick_at_ms,
            at_us,
            waiting: status.state == State::Waiting,
        })
    })
    .await;
    outcome
}
