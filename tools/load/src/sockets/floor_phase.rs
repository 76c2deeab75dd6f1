//! The floor phase of `sockets --floor`: a floor server per node, the same
//! sockets held against them, their report, and the comparison line of
//! the nodes' tick→socket latency against the floor's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use waitroom::words::RoomId;

use crate::common::{Latency, Node, say};
use crate::error::LoadError;
use crate::floor::{self, FloorPlan, FloorServer};

use super::barrier::BARRIER_LIMIT;
use super::hold::{COLLECT_LIMIT, HoldPlan, Phase, open_and_hold};
use super::open::{LARGE_RUN, OPEN_PHASE_LIMIT, SocketSpec, source_address, wait_for_time_waits};
use super::ticks::report_ticks;
use super::{SocketsRun, report_open_errors};

/// What the floor phase is run with.
pub(super) struct FloorPhase<'a> {
    pub(super) nodes: &'a [Node],
    pub(super) room: &'a RoomId,
    pub(super) requested: u64,
    pub(super) source_ips: u8,
    pub(super) hold: Duration,
    pub(super) drain: Duration,
    pub(super) admit_per_tick: u32,
    pub(super) tick_ms: u64,
    pub(super) open_concurrency: usize,
    pub(super) barrier: Option<&'a (PathBuf, u32)>,
    pub(super) workers: u16,
    pub(super) json: bool,
}

/// The floor phase's figures.
pub(super) struct FloorFigures {
    pub(super) servers: Vec<SocketAddr>,
    pub(super) workers: u16,
    pub(super) phase: Phase,
    pub(super) reports: Vec<floor::FloorReport>,
}

impl FloorFigures {
    pub(super) fn summary(&self, requested: u64) -> serde_json::Value {
        let mut summary = self.phase.figures(requested);
        summary.extend([
            ("servers".to_string(), json!(self.servers)),
            ("workers".to_string(), json!(self.workers)),
            ("server_reports".to_string(), json!(self.reports)),
        ]);
        summary.into()
    }
}

impl<'a> FloorPhase<'a> {
    /// The floor phase of `run`: the same sockets, ticks and hold.
    pub(super) fn of(run: &'a SocketsRun<'a>, workers: u16) -> Self {
        Self {
            nodes: run.nodes,
            room: run.room,
            requested: run.sockets,
            source_ips: run.source_ips,
            hold: run.hold,
            drain: run.drain,
            admit_per_tick: run.admit_per_tick,
            tick_ms: run.tick_ms,
            open_concurrency: run.open_concurrency,
            barrier: run.barrier.as_ref(),
            workers,
            json: run.json,
        }
    }
}

/// The floor: one floor server per node (on the node's loopback address),
/// the same sockets spread over them and over the same source addresses
/// as the real phase's, held as long, with the same ticks; then the floor
/// servers stop.
pub(super) async fn floor_phase(floor: FloorPhase<'_>) -> Result<FloorFigures, LoadError> {
    let json = floor.json;
    if floor.requested >= LARGE_RUN {
        wait_for_time_waits(json).await;
    }
    let servers = start_floor_servers(&floor).await?;
    let k = servers.len();
    let specs = (0..floor.requested as usize)
        .map(|i| {
            let addr = servers[i % k].addr;
            SocketSpec {
                node: i % k,
                addr,
                source: source_address(addr, (i / k) % floor.source_ips as usize),
                url: format!("ws://{addr}/floor"),
            }
        })
        .collect();
    let pids: Vec<u32> = servers.iter().filter_map(FloorServer::pid).collect();
    let plan = HoldPlan {
        label: FLOOR_LABEL,
        nodes: k,
        open_concurrency: floor.open_concurrency,
        hold: floor.hold,
        drain: floor.drain,
        barrier: floor
            .barrier
            .map(|(dir, parties)| (dir.join("floor"), *parties)),
        server_pids: &pids,
        reset_on_stop: true,
        json,
    };
    let (phase, ()) = open_and_hold(specs, &plan, async {}).await;
    let addrs = servers.iter().map(|s| s.addr).collect();
    let mut reports = Vec::new();
    for server in servers {
        let addr = server.addr;
        match server.stop().await {
            Ok(report) => reports.push(report),
            Err(error) => say(json, format!("{FLOOR_LABEL}warning: {addr}: {error}")),
        }
    }
    report_floor(&floor, &phase, &reports);
    Ok(FloorFigures {
        servers: addrs,
        workers: floor.workers,
        phase,
        reports,
    })
}

/// Prefixes the floor phase's lines.
pub(super) const FLOOR_LABEL: &str = "floor: ";

/// A floor server per node, on the node's loopback address.
pub(super) async fn start_floor_servers(
    floor: &FloorPhase<'_>,
) -> Result<Vec<FloorServer>, LoadError> {
    // Everything the phase may take, and a minute to spare: a floor server
    // left behind by a tool that died stops by itself.
    let lifetime = OPEN_PHASE_LIMIT
        + BARRIER_LIMIT
        + floor.hold
        + floor.drain
        + COLLECT_LIMIT
        + Duration::from_secs(60);
    let mut servers = Vec::new();
    for node in floor.nodes {
        let server = FloorServer::start(&FloorPlan {
            listen: node.addr.ip(),
            room: floor.room,
            tick_ms: floor.tick_ms,
            admit_per_tick: floor.admit_per_tick,
            waiting: floor.requested,
            workers: floor.workers,
            lifetime,
        })
        .await?;
        say(
            floor.json,
            format!(
                "{FLOOR_LABEL}floor server for {} listening at {} (pid {}, {} writer threads, a tick every {} ms)",
                node.base,
                server.addr,
                server.pid().map_or("unknown".into(), |p| p.to_string()),
                floor.workers,
                floor.tick_ms
            ),
        );
        servers.push(server);
    }
    Ok(servers)
}

pub(super) fn report_floor(floor: &FloorPhase<'_>, phase: &Phase, reports: &[floor::FloorReport]) {
    let (json, label) = (floor.json, FLOOR_LABEL);
    say(
        json,
        format!(
            "{label}sockets: {} requested, {} opened, {} failed, {} closed early by the other end; held {:.1} s",
            floor.requested,
            phase.opened,
            floor.requested - phase.opened,
            phase.closed_early.values().sum::<u64>(),
            phase.held_s
        ),
    );
    report_open_errors(json, label, phase);
    for report in reports {
        say(
            json,
            format!(
                "{label}floor server: {} connections ({} handshakes failed), {} ticks, {} frames written, \
                 {} waited for room, {} skipped; one tick written in {} (slowest of {} threads)",
                report.connections,
                report.handshake_failures,
                report.ticks,
                report.written,
                report.waited_for_room,
                report.skipped_busy,
                report
                    .tick_write
                    .map_or_else(|| "none".into(), |l| l.to_string()),
                report.workers,
            ),
        );
    }
    report_ticks(
        json,
        label,
        &phase.ticks,
        phase.latency.as_ref(),
        phase.hold_cpu.as_ref(),
        floor.tick_ms,
    );
}

/// The target for tick→socket p99 over the floor's.
pub(super) const FLOOR_TARGET: f64 = 1.25;

/// `tick→socket p99 X ms, floor p99 Y ms, ratio R`, with p50 and max.
pub(super) fn compare_line(
    label: &str,
    real: &Latency,
    floor: &Latency,
    ratios: Option<floor::Ratios>,
) -> String {
    let ratio = |r: Option<f64>| r.map_or("none".into(), |r| format!("{r:.2}"));
    let verdict = match ratios {
        Some(r) if r.p99 <= FLOOR_TARGET => "met",
        Some(_) => "missed",
        None => "unknown",
    };
    format!(
        "{label}tick→socket p99 {:.2} ms, floor p99 {:.2} ms, ratio {} (target ≤ {FLOOR_TARGET}: {verdict}); \
         p50 {:.2} / {:.2} ms, ratio {}; max {:.2} / {:.2} ms, ratio {}",
        real.p99_ms,
        floor.p99_ms,
        ratio(ratios.map(|r| r.p99)),
        real.p50_ms,
        floor.p50_ms,
        ratio(ratios.map(|r| r.p50)),
        real.max_ms,
        floor.max_ms,
        ratio(ratios.map(|r| r.max)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comparison_names_both_p99s_and_the_verdict() {
        let floor = Latency::from_micros(vec![100_000]).unwrap();
        let real = Latency::from_micros(vec![120_000]).unwrap();
        let line = compare_line("", &real, &floor, floor::ratios(&real, &floor));
        assert!(
            line.starts_with(
                "tick→socket p99 120.00 ms, floor p99 100.00 ms, ratio 1.20 (target ≤ 1.25: met)"
            ),
            "{line}"
        );
        let line = compare_line("x: ", &floor, &real, floor::ratios(&floor, &real));
        assert!(line.contains("ratio 0.83"), "{line}");
        let slow = Latency::from_micros(vec![130_000]).unwrap();
        let line = compare_line("", &slow, &floor, floor::ratios(&slow, &floor));
        assert!(
            line.contains("ratio 1.30 (target ≤ 1.25: missed)"),
            "{line}"
        );
    }
}
