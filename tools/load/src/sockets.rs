//! `sockets` mode: joins N visitors, holds N WebSockets open (spread over the
//! nodes and over local source addresses), and measures, for every tick that
//! runs while they are held, how long each socket waited for its status, and
//! which sockets never got one.
//!
//! With `--floor` it first does the same against a floor server per node
//! (see `floor`): the same number of sockets, source addresses, ticks and
//! hold, measured by the same code, so the two latencies compare as a ratio.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::json;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use waitroom::words::clock::Millis;
use waitroom::words::status::Status;
use waitroom::words::{RoomConfig, RoomId};

use super::common::{self, ErrorKinds, Latency, Node, Scrape, create_room, epoch_micros, say};
use super::error::{Failure, LoadError};
use super::floor::{self, FloorPlan, FloorServer};

/// The longest the join phase may take.
const JOIN_PHASE_LIMIT: Duration = Duration::from_secs(120);
/// The longest the opening phase may take.
const OPEN_PHASE_LIMIT: Duration = Duration::from_secs(120);
/// The longest one socket may take to connect and finish its handshake.
const OPEN_TIMEOUT: Duration = Duration::from_secs(20);
/// Descriptors this tool holds besides its sockets (measured: 12).
const OWN_DESCRIPTORS: u64 = 16;
/// The longest a process waits at `--barrier-dir` for the others.
const BARRIER_LIMIT: Duration = Duration::from_secs(300);
/// The longest the sockets' tasks may take to stop and hand in what they saw.
const COLLECT_LIMIT: Duration = Duration::from_secs(30);
/// Per-tick lines printed at most (the summary covers every tick).
const TICK_LINES: usize = 12;

pub struct SocketsRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a RoomId,
    pub admin_token: &'a str,
    pub sockets: u64,
    pub source_ips: u8,
    pub hold: Duration,
    pub drain: Duration,
    pub admit_per_tick: u32,
    pub tick_ms: u64,
    pub join_concurrency: usize,
    pub open_concurrency: usize,
    pub open_files_limit: u64,
    /// Server processes whose CPU time the hold reports (same machine).
    pub server_pids: &'a [u32],
    /// A directory and a number of processes: the hold starts once that
    /// many processes have their sockets open.
    pub barrier: Option<(PathBuf, u32)>,
    /// Measure the floor first (see `floor`), with this many writer
    /// threads in each floor server.
    pub floor_workers: Option<u16>,
    pub json: bool,
}

/// What one socket saw.
#[derive(Debug, Default)]
struct SocketOutcome {
    node: usize,
    /// Why it did not open, if it did not.
    open_error: Option<String>,
    /// Connect plus handshake, once it had its turn to open.
    open_us: u64,
    statuses: Vec<Received>,
    /// Why it ended before the run stopped it, if it did.
    ended: Option<String>,
}

/// One Status message, stamped when it arrived.
#[derive(Debug, Clone, Copy)]
struct Received {
    tick_at_ms: Option<Millis>,
    at_us: u64,
    waiting: bool,
}

#[derive(Debug, Serialize)]
struct NodeMemory {
    url: String,
    before: Option<Scrape>,
    held: Option<Scrape>,
}

pub async fn run(run: SocketsRun<'_>) -> Result<(), LoadError> {
    warn_about_descriptors(&run);
    let room_created = create_room_everywhere(&run).await?;
    // The floor first, with the same sockets, ticks and hold, before any
    // visitor joins (the nodes are idle meanwhile).
    let floor = match run.floor_workers {
        Some(workers) => Some(floor_phase(FloorPhase::of(&run, workers)).await?),
        None => None,
    };
    let (tickets, joins) = join_phase(&run).await;
    let mut memory = scrape_before(&run).await;
    if run.sockets >= LARGE_RUN {
        wait_for_time_waits(run.json).await;
    }
    let specs = socket_specs(&run, tickets);
    let phase = hold_phase(&run, specs, &mut memory).await;
    let memory_figures = MemoryFigures::of(&memory, phase.opened);
    report_phase(&run, &phase, &memory, &memory_figures);
    let floor_ratio = compare_to_floor(run.json, &phase, floor.as_ref());
    // Several processes at one barrier: every one of them reports the
    // figures over all of their sockets.
    let combined = match (&floor, &run.barrier) {
        (Some(floor), Some((dir, parties))) => {
            combine(
                dir,
                *parties,
                &floor.phase.ticks.delays_us,
                &phase.ticks.delays_us,
                run.json,
            )
            .await
        }
        _ => None,
    };
    if run.json {
        let summary = Summary {
            room_created,
            joins,
            phase,
            memory,
            memory_figures,
            floor,
            floor_ratio,
            combined,
        };
        print_summary(&run, &summary);
    }
    Ok(())
}

/// One descriptor per socket, plus about a dozen of the tool's own.
fn warn_about_descriptors(run: &SocketsRun<'_>) {
    let (requested, open_files_limit) = (run.sockets, run.open_files_limit);
    if requested + OWN_DESCRIPTORS > open_files_limit {
        say(
            run.json,
            format!(
                "warning: {requested} sockets need about {} descriptors here, the limit is {open_files_limit}: \
                 expect 'Too many open files'",
                requested + OWN_DESCRIPTORS
            ),
        );
    }
}

/// Creates the room on every node; whether each created it.
async fn create_room_everywhere(run: &SocketsRun<'_>) -> Result<Vec<bool>, LoadError> {
    let SocketsRun {
        room,
        admit_per_tick,
        tick_ms,
        ..
    } = *run;
    let http = common::http_client(1);
    let room_config = RoomConfig {
        admit_per_tick,
        tick_ms,
        max_active: None,
        pass_ttl_s: 600,
        abandon_after_s: 86_400,
        paused: false,
        ..common::room_config(room)
    };
    let mut room_created = Vec::new();
    for node in run.nodes {
        let created = create_room(&http, node, run.admin_token, room, &room_config).await?;
        say(
            run.json,
            format!(
                "{}: room {room} {}",
                node.base,
                if created {
                    format!("created ({admit_per_tick} admitted every {tick_ms} ms)")
                } else {
                    "already exists: using it as it is".into()
                }
            ),
        );
        room_created.push(created);
    }
    Ok(room_created)
}

/// How the joins went.
struct Joins {
    joined: u64,
    errors: ErrorKinds,
    seconds: f64,
}

/// Joins a visitor for every socket; their tickets.
async fn join_phase(run: &SocketsRun<'_>) -> (Vec<Option<String>>, Joins) {
    let requested = run.sockets;
    let joined_at = Instant::now();
    let (tickets, errors) = join_visitors(
        run.nodes,
        run.room,
        Visitors {
            count: requested,
            keep: requested,
            concurrency: run.join_concurrency,
            limit: JOIN_PHASE_LIMIT,
        },
    )
    .await;
    let seconds = joined_at.elapsed().as_secs_f64();
    let joined = tickets.iter().filter(|t| t.is_some()).count() as u64;
    say(
        run.json,
        format!(
            "joined {joined} of {requested} visitors in {seconds:.2} s ({} errors)",
            requested - joined
        ),
    );
    for (kind, n) in &errors {
        say(run.json, format!("  {n} × {kind}"));
    }
    let joins = Joins {
        joined,
        errors,
        seconds,
    };
    (tickets, joins)
}

/// Each node's memory before any socket opens.
async fn scrape_before(run: &SocketsRun<'_>) -> Vec<NodeMemory> {
    let mut memory = Vec::new();
    for node in run.nodes {
        let before = report_scrape(run.json, node, common::scrape(node).await);
        memory.push(NodeMemory {
            url: node.base.clone(),
            before,
            held: None,
        });
    }
    memory
}

/// A socket for every ticket: visitor i on node i mod n, spread over the
/// source addresses.
fn socket_specs(run: &SocketsRun<'_>, tickets: Vec<Option<String>>) -> Vec<SocketSpec> {
    let (nodes, room) = (run.nodes, run.room);
    let mut specs = Vec::new();
    for (i, ticket) in tickets.into_iter().enumerate() {
        let Some(ticket) = ticket else { continue };
        let node_index = i % nodes.len();
        let node = &nodes[node_index];
        specs.push(SocketSpec {
            node: node_index,
            addr: node.addr,
            source: source_address(node.addr, (i / nodes.len()) % run.source_ips as usize),
            url: format!(
                "ws://{}/api/rooms/{room}/ws?ticket={}",
                node.authority,
                common::query_escape(&ticket)
            ),
        });
    }
    specs
}

/// Opens and holds the visitors' sockets, reading each node's memory
/// half-way through the hold.
async fn hold_phase(
    run: &SocketsRun<'_>,
    specs: Vec<SocketSpec>,
    memory: &mut [NodeMemory],
) -> Phase {
    let json = run.json;
    let plan = HoldPlan {
        label: "",
        nodes: run.nodes.len(),
        open_concurrency: run.open_concurrency,
        hold: run.hold,
        drain: run.drain,
        barrier: run.barrier.clone(),
        server_pids: run.server_pids,
        reset_on_stop: false,
        json,
    };
    // Memory while every socket is held: half-way through the hold, so a
    // few ticks have gone out and the figure includes their buffers.
    let scrape_all = async {
        let mut held = Vec::new();
        for node in run.nodes {
            held.push(report_scrape(json, node, common::scrape(node).await));
        }
        held
    };
    let (phase, held) = open_and_hold(specs, &plan, scrape_all).await;
    for (slot, held) in memory.iter_mut().zip(held) {
        slot.held = held;
    }
    phase
}

/// The nodes' memory and sockets while held, over all of them.
struct MemoryFigures {
    /// Resident memory held minus before, summed over the nodes.
    delta: i128,
    per_socket: Option<f64>,
    server_sockets_open: Option<u64>,
}

impl MemoryFigures {
    fn of(memory: &[NodeMemory], opened: u64) -> Self {
        let delta: i128 = memory
            .iter()
            .filter_map(|m| {
                Some(
                    m.held?.resident_memory_bytes? as i128
                        - m.before?.resident_memory_bytes? as i128,
                )
            })
            .sum();
        let complete = memory.iter().all(|m| {
            m.before.and_then(|s| s.resident_memory_bytes).is_some()
                && m.held.and_then(|s| s.resident_memory_bytes).is_some()
        });
        Self {
            delta,
            per_socket: (complete && opened > 0).then(|| delta as f64 / opened as f64),
            server_sockets_open: memory
                .iter()
                .map(|m| m.held.and_then(|s| s.sockets_open))
                .sum(),
        }
    }
}

/// The real phase's lines: sockets, memory, descriptors, ticks.
fn report_phase(
    run: &SocketsRun<'_>,
    phase: &Phase,
    memory: &[NodeMemory],
    figures: &MemoryFigures,
) {
    let (json, requested, opened) = (run.json, run.sockets, phase.opened);
    // Not opened within the open phase, for whatever reason (joins included).
    let failed = requested - opened;
    say(
        json,
        format!(
            "sockets: {} requested, {opened} opened, {failed} failed, {} closed early by the other end; held {:.1} s",
            requested,
            phase.closed_early.values().sum::<u64>(),
            phase.held_s
        ),
    );
    report_open_errors(json, "", phase);
    match figures.server_sockets_open {
        Some(n) => say(
            json,
            format!("server reports waitroom_sockets_open = {n} while held"),
        ),
        None => say(json, "server reports no waitroom_sockets_open"),
    }
    report_memory(json, memory);
    if let Some(per) = figures.per_socket {
        say(
            json,
            format!(
                "memory per socket: {:.1} KiB (resident delta {:.1} MiB ÷ {opened} sockets)",
                per / 1024.0,
                figures.delta as f64 / 1048576.0
            ),
        );
    }
    if let Some(fds) = phase.tool_open_fds {
        say(
            json,
            format!(
                "this tool held {fds} descriptors (limit {})",
                run.open_files_limit
            ),
        );
    }
    report_ticks(
        json,
        "",
        &phase.ticks,
        phase.latency.as_ref(),
        phase.hold_cpu.as_ref(),
        run.tick_ms,
    );
}

/// A phase's open latency, and why sockets did not open or closed early.
fn report_open_errors(json: bool, label: &str, phase: &Phase) {
    if let Some(open_latency) = phase.open_latency {
        say(
            json,
            format!("{label}  connect + handshake per socket: {open_latency}"),
        );
    }
    for (kind, n) in &phase.open_errors {
        say(json, format!("{label}  not opened: {n} × {kind}"));
    }
    for (kind, n) in &phase.closed_early {
        say(json, format!("{label}  closed early: {n} × {kind}"));
    }
}

fn report_memory(json: bool, memory: &[NodeMemory]) {
    for m in memory {
        if let (Some(before), Some(held)) = (
            m.before.and_then(|s| s.resident_memory_bytes),
            m.held.and_then(|s| s.resident_memory_bytes),
        ) {
            say(
                json,
                format!(
                    "{}: resident memory {:.1} MiB before opening, {:.1} MiB held; open descriptors {} held",
                    m.url,
                    before as f64 / 1048576.0,
                    held as f64 / 1048576.0,
                    m.held
                        .and_then(|s| s.open_fds)
                        .map_or("unknown".into(), |n| n.to_string())
                ),
            );
        }
    }
}

/// The tick→socket latency as a ratio to the floor's, if both were measured.
fn compare_to_floor(
    json: bool,
    phase: &Phase,
    floor: Option<&FloorFigures>,
) -> Option<floor::Ratios> {
    let latency = phase.latency.as_ref();
    let floor_ratio = floor.and_then(|floor| {
        let ratios = floor::ratios(latency?, floor.phase.latency.as_ref()?);
        say(
            json,
            compare_line("", latency?, floor.phase.latency.as_ref()?, ratios),
        );
        ratios
    });
    if floor.is_some() && floor_ratio.is_none() {
        say(
            json,
            "no ratio to the floor: a phase measured no tick (or the floor's p99 was 0)",
        );
    }
    floor_ratio
}

/// What the JSON summary reports besides the run's own arguments.
struct Summary {
    room_created: Vec<bool>,
    joins: Joins,
    phase: Phase,
    memory: Vec<NodeMemory>,
    memory_figures: MemoryFigures,
    floor: Option<FloorFigures>,
    floor_ratio: Option<floor::Ratios>,
    combined: Option<Combined>,
}

/// The one-line JSON summary (`--json`).
fn print_summary(run: &SocketsRun<'_>, summary: &Summary) {
    let Summary {
        room_created,
        joins,
        phase,
        memory,
        memory_figures,
        floor,
        floor_ratio,
        combined,
    } = summary;
    let requested = run.sockets;
    let summary = json!({
        "mode": "sockets",
        "nodes": run.nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
        "room": run.room,
        "room_created": room_created,
        "requested": requested,
        "joined": joins.joined,
        "join_errors": joins.errors,
        "join_s": joins.seconds,
        "source_ips": run.source_ips,
        "opened": phase.opened,
        "failed": requested - phase.opened,
        "open_errors": phase.open_errors,
        "open_s": phase.open_s,
        "open_latency": phase.open_latency,
        "closed_early": phase.closed_early.values().sum::<u64>(),
        "closed_early_reasons": phase.closed_early,
        "hold_s": run.hold.as_secs(),
        "held_s": phase.held_s,
        "ticks_measured": phase.ticks.per_tick.len(),
        "deliveries": phase.ticks.delays_us.len(),
        "missed_updates": phase.ticks.missed,
        "tick_latency": phase.latency,
        "tick_interval_ms": phase.ticks.interval_ms.map(|(min, max)| json!({"min": min, "max": max})),
        "servers": memory,
        "server_sockets_open": memory_figures.server_sockets_open,
        "memory_per_socket_bytes": memory_figures.per_socket,
        "tool_open_files_limit": run.open_files_limit,
        "tool_open_fds_held": phase.tool_open_fds,
        "hold_cpu": phase.hold_cpu,
        "floor": floor.as_ref().map(|f| f.summary(requested)),
        "floor_ratio": floor_ratio,
        "floor_target_ratio": floor.as_ref().map(|_| FLOOR_TARGET),
        "combined": combined,
    });
    println!("{summary}");
}

/// The target for tick→socket p99 over the floor's.
const FLOOR_TARGET: f64 = 1.25;

/// `tick→socket p99 X ms, floor p99 Y ms, ratio R`, with p50 and max.
fn compare_line(
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

/// The per-tick lines, the latency over every delivery, the hold's CPU and
/// the interval between ticks, for one phase.
fn report_ticks(
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

/// How a phase opens and holds its sockets.
struct HoldPlan<'a> {
    /// Prefixes the phase's lines (`"floor: "`, or nothing).
    label: &'static str,
    nodes: usize,
    open_concurrency: usize,
    hold: Duration,
    drain: Duration,
    barrier: Option<(PathBuf, u32)>,
    server_pids: &'a [u32],
    /// Reset every connection when the phase ends, so that it leaves no
    /// TIME_WAIT behind for the next phase's `bind` to search past.
    reset_on_stop: bool,
    json: bool,
}

/// What one phase's sockets saw.
struct Phase {
    opened: u64,
    open_s: f64,
    held_s: f64,
    hold_cpu: Option<common::CpuUse>,
    open_errors: ErrorKinds,
    closed_early: ErrorKinds,
    open_latency: Option<Latency>,
    ticks: TickAnalysis,
    latency: Option<Latency>,
    tool_open_fds: Option<u64>,
}

/// Counts the sockets that opened and those that failed, as their tasks
/// report, until all `sockets` have or [`OPEN_PHASE_LIMIT`] is up.
pub async fn count_opened(
    reports: &mut mpsc::UnboundedReceiver<bool>,
    sockets: usize,
) -> (u64, u64) {
    let (mut opened, mut failed) = (0u64, 0u64);
    let deadline = tokio::time::Instant::now() + OPEN_PHASE_LIMIT;
    while opened + failed < sockets as u64 {
        match tokio::time::timeout_at(deadline, reports.recv()).await {
            Ok(Some(true)) => opened += 1,
            Ok(Some(false)) => failed += 1,
            Ok(None) | Err(_) => break,
        }
    }
    (opened, failed)
}

/// Opens every socket of `specs` (at most `open_concurrency` handshakes at
/// a time), meets the other processes at the barrier if there is one, holds
/// them all for `hold` (running `mid_hold` half-way through), lets the
/// ticks of the hold drain, stops, and analyzes what every socket got.
async fn open_and_hold<F: Future>(
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
async fn open_all(
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
async fn meet_before_hold(json: bool, label: &str, dir: &Path, parties: u32) {
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
async fn collect_outcomes(
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
fn open_figures(
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

/// What the floor phase is run with.
struct FloorPhase<'a> {
    nodes: &'a [Node],
    room: &'a RoomId,
    requested: u64,
    source_ips: u8,
    hold: Duration,
    drain: Duration,
    admit_per_tick: u32,
    tick_ms: u64,
    open_concurrency: usize,
    barrier: Option<&'a (PathBuf, u32)>,
    workers: u16,
    json: bool,
}

/// The floor phase's figures.
struct FloorFigures {
    servers: Vec<SocketAddr>,
    workers: u16,
    phase: Phase,
    reports: Vec<floor::FloorReport>,
}

impl FloorFigures {
    fn summary(&self, requested: u64) -> serde_json::Value {
        let phase = &self.phase;
        json!({
            "servers": self.servers,
            "workers": self.workers,
            "opened": phase.opened,
            "failed": requested - phase.opened,
            "open_errors": phase.open_errors,
            "open_s": phase.open_s,
            "open_latency": phase.open_latency,
            "closed_early": phase.closed_early.values().sum::<u64>(),
            "closed_early_reasons": phase.closed_early,
            "held_s": phase.held_s,
            "ticks_measured": phase.ticks.per_tick.len(),
            "deliveries": phase.ticks.delays_us.len(),
            "missed_updates": phase.ticks.missed,
            "tick_latency": phase.latency,
            "tick_interval_ms": phase.ticks.interval_ms.map(|(min, max)| json!({"min": min, "max": max})),
            "hold_cpu": phase.hold_cpu,
            "server_reports": self.reports,
        })
    }
}

impl<'a> FloorPhase<'a> {
    /// The floor phase of `run`: the same sockets, ticks and hold.
    fn of(run: &'a SocketsRun<'a>, workers: u16) -> Self {
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
async fn floor_phase(floor: FloorPhase<'_>) -> Result<FloorFigures, LoadError> {
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
const FLOOR_LABEL: &str = "floor: ";

/// A floor server per node, on the node's loopback address.
async fn start_floor_servers(floor: &FloorPhase<'_>) -> Result<Vec<FloorServer>, LoadError> {
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

fn report_floor(floor: &FloorPhase<'_>, phase: &Phase, reports: &[floor::FloorReport]) {
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

/// The figures over every process that met at one barrier.
#[derive(Debug, Serialize)]
struct Combined {
    processes: usize,
    tick_latency: Option<Latency>,
    floor_tick_latency: Option<Latency>,
    ratio: Option<floor::Ratios>,
}

/// Writes this process's deliveries of both phases into the barrier's
/// directory, waits for the other processes to do the same, and reports
/// the latency over all of them.
async fn combine(
    dir: &Path,
    parties: u32,
    floor_us: &[u64],
    real_us: &[u64],
    json: bool,
) -> Option<Combined> {
    let pid = std::process::id();
    for (phase, delays) in [("floor", floor_us), ("real", real_us)] {
        let path = dir.join(format!("delays-{phase}-{pid}"));
        if let Err(error) = std::fs::write(&path, encode_delays(delays)) {
            say(json, format!("warning: {}: {error}", path.display()));
            return None;
        }
    }
    if let Err(error) = meet(&dir.join("done"), parties).await {
        say(json, format!("warning: barrier: {error}"));
    }
    let read = |phase: &str| -> (usize, Vec<u64>) {
        let prefix = format!("delays-{phase}-");
        let mut files = 0;
        let mut all = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix)
                && let Ok(bytes) = std::fs::read(entry.path())
            {
                files += 1;
                all.extend(decode_delays(&bytes));
            }
        }
        (files, all)
    };
    let (processes, real) = read("real");
    let (_, floor) = read("floor");
    let tick_latency = Latency::from_micros(real);
    let floor_tick_latency = Latency::from_micros(floor);
    let ratio = floor::ratios(tick_latency.as_ref()?, floor_tick_latency.as_ref()?);
    let label = format!("all {processes} processes: ");
    say(
        json,
        compare_line(
            &label,
            tick_latency.as_ref()?,
            floor_tick_latency.as_ref()?,
            ratio,
        ),
    );
    Some(Combined {
        processes,
        tick_latency,
        floor_tick_latency,
        ratio,
    })
}

/// Delays as little-endian u32 microseconds (at most about 71 minutes).
fn encode_delays(delays: &[u64]) -> Vec<u8> {
    delays
        .iter()
        .flat_map(|&d| (d.min(u32::MAX as u64) as u32).to_le_bytes())
        .collect()
}

fn decode_delays(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64)
}

/// Marks this process ready in `dir` and waits until `parties` processes
/// are (or `BARRIER_LIMIT` passes); returns how many were ready.
async fn meet(dir: &std::path::Path, parties: u32) -> Result<u32, LoadError> {
    std::fs::create_dir_all(dir).map_err(LoadError::io(dir.display().to_string()))?;
    let mark = dir.join(format!("ready-{}", std::process::id()));
    std::fs::write(&mark, b"").map_err(LoadError::io(mark.display().to_string()))?;
    let deadline = Instant::now() + BARRIER_LIMIT;
    loop {
        let ready = std::fs::read_dir(dir)
            .map_err(LoadError::io(dir.display().to_string()))?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("ready-"))
            .count() as u32;
        if ready >= parties {
            return Ok(ready);
        }
        if Instant::now() >= deadline {
            return Err(LoadError::Setup(format!(
                "only {ready} of {parties} processes ready after {} s; holding anyway",
                BARRIER_LIMIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn report_scrape(json: bool, node: &Node, scrape: Result<Scrape, LoadError>) -> Option<Scrape> {
    match scrape {
        Ok(scrape) => Some(scrape),
        Err(error) => {
            say(json, format!("warning: {}: {error}", node.base));
            None
        }
    }
}

/// The `k`th local source address: 127.0.0.(k+1), or ::1 for an IPv6 node.
pub fn source_address(destination: SocketAddr, k: usize) -> IpAddr {
    match destination {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(127, 0, 0, (k + 1) as u8)),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

/// Which visitors `join_visitors` joins, and how.
pub struct Visitors {
    /// New visitors to join (visitor i on node i mod nodes).
    pub count: u64,
    /// Tickets kept: those of the first `keep` visitors (a million tickets
    /// would cost the tool hundreds of MiB).
    pub keep: u64,
    /// Keep-alive workers joining at once.
    pub concurrency: usize,
    /// The longest the joins may take; the rest count as not sent.
    pub limit: Duration,
}

/// Joins new visitors from keep-alive workers; returns the first
/// `keep` visitors' tickets and the errors of all of them.
pub async fn join_visitors(
    nodes: &[Node],
    room: &RoomId,
    visitors: Visitors,
) -> (Vec<Option<String>>, ErrorKinds) {
    let Visitors {
        count: n,
        keep,
        concurrency,
        limit,
    } = visitors;
    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + limit;
    let urls: Arc<[String]> = nodes
        .iter()
        .map(|node| format!("{}/api/rooms/{room}/join", node.base))
        .collect();
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(n as usize).max(1) {
        let next = next.clone();
        let urls = urls.clone();
        workers.push(tokio::spawn(async move {
            let http = common::http_client(1);
            let mut tickets = Vec::new();
            let mut errors = ErrorKinds::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= n {
                    break;
                }
                if Instant::now() >= deadline {
                    common::count(&mut errors, "not sent: join phase time limit");
                    continue;
                }
                let url = &urls[index as usize % urls.len()];
                let outcome = common::join_ticket(http.post(url)).await;
                match outcome {
                    Ok(ticket) if index < keep => tickets.push((index as usize, ticket)),
                    Ok(_) => {}
                    Err(kind) => common::count(&mut errors, kind),
                }
            }
            (tickets, errors)
        }));
    }
    common::gather_indexed(workers, keep as usize).await
}

/// A small client socket: a status is a few hundred bytes.
pub fn client_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(64 * 1024))
        .max_frame_size(Some(64 * 1024))
}

/// Where one socket connects, from where, with which ticket.
pub struct SocketSpec {
    pub node: usize,
    pub addr: SocketAddr,
    pub source: IpAddr,
    pub url: String,
}

/// Loopback connections in TIME_WAIT (an earlier run's) above which a
/// large run waits for them to expire before opening. Each holds its local
/// port, and `bind` searches past them all: a large run started within a
/// minute of another spends its CPU in the kernel's port search, its
/// handshakes reach the server late, and the server answers 408 (seen
/// here: 45% of the machine in `inet_bhash2_conflict` and its callers,
/// 2–5% of handshakes failed). Small runs (the test suite's) do not wait.
const TIME_WAIT_PATIENCE: usize = 5_000;
/// Sockets from which a run counts as large.
pub const LARGE_RUN: u64 = 5_000;
/// TIME_WAIT lasts 60 s on Linux.
const TIME_WAIT_LONGEST_WAIT: Duration = Duration::from_secs(70);

pub async fn wait_for_time_waits(json: bool) {
    let started = Instant::now();
    let mut told = false;
    while let Some(waiting) = loopback_time_waits().filter(|n| *n > TIME_WAIT_PATIENCE) {
        if started.elapsed() > TIME_WAIT_LONGEST_WAIT {
            say(
                json,
                format!(
                    "warning: still {waiting} loopback connections in TIME_WAIT; opening anyway"
                ),
            );
            return;
        }
        if !told {
            say(
                json,
                format!(
                    "waiting for {waiting} loopback connections in TIME_WAIT (an earlier run's) to expire, at most {} s",
                    TIME_WAIT_LONGEST_WAIT.as_secs()
                ),
            );
            told = true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if told {
        say(
            json,
            format!(
                "TIME_WAIT cleared after {:.0} s",
                started.elapsed().as_secs_f64()
            ),
        );
    }
}

/// IPv4 connections from 127.x.x.x in TIME_WAIT, read from `/proc/net/tcp`
/// (Linux; `None` where there is no such file).
fn loopback_time_waits() -> Option<usize> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let count = table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            // "sl local_address rem_address st …"; the address is the
            // in-memory word in hex, so on little-endian machines 127.0.0.1
            // reads "0100007F".
            let local = fields.nth(1).unwrap_or_default();
            let state = fields.nth(1).unwrap_or_default();
            state == "06" && local.get(6..8) == Some("7F")
        })
        .count();
    Some(count)
}

pub async fn open_socket(
    spec: &SocketSpec,
    config: WebSocketConfig,
) -> Result<WebSocketStream<TcpStream>, Failure> {
    let failed = |step: &str| {
        let step = step.to_string();
        move |e: std::io::Error| Failure(format!("{step}: {e}"))
    };
    let socket = match spec.addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(failed("socket"))?;
    // One source/destination pair has ~28k ephemeral ports; binding the
    // source spreads the sockets over several pairs.
    socket
        .bind(SocketAddr::new(spec.source, 0))
        .map_err(failed("bind"))?;
    let stream = socket.connect(spec.addr).await.map_err(failed("connect"))?;
    let _ = stream.set_nodelay(true);
    let (ws, _) =
        tokio_tungstenite::client_async_with_config(spec.url.as_str(), stream, Some(config))
            .await
            .map_err(|e| Failure(format!("handshake: {e}")))?;
    Ok(ws)
}

/// Opens one socket once a permit allows, within `OPEN_TIMEOUT`, and says
/// on `opened` whether it opened; how long opening took once permitted.
pub async fn open_counted(
    spec: &SocketSpec,
    config: WebSocketConfig,
    permits: &Semaphore,
    opened: &mpsc::UnboundedSender<bool>,
) -> (Result<WebSocketStream<TcpStream>, Failure>, u64) {
    let permit = permits.acquire().await;
    let started = Instant::now();
    let open = tokio::time::timeout(OPEN_TIMEOUT, open_socket(spec, config)).await;
    let open_us = started.elapsed().as_micros() as u64;
    drop(permit);
    let ws = match open {
        Ok(result) => result,
        Err(_) => Err(Failure(format!(
            "timed out after {} s",
            OPEN_TIMEOUT.as_secs()
        ))),
    };
    let _ = opened.send(ws.is_ok());
    (ws, open_us)
}

/// Hands every Status the socket receives to `on_status` with when it
/// arrived (epoch µs), until told to stop (`None`; with `reset_on_stop` the
/// connection is then dropped with a reset) or the socket ends (why).
pub async fn read_statuses(
    ws: &mut WebSocketStream<TcpStream>,
    stop: &mut watch::Receiver<bool>,
    reset_on_stop: bool,
    mut on_status: impl FnMut(Status<'_>, u64),
) -> Option<String> {
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => {
                if reset_on_stop {
                    let _ = ws.get_ref().set_zero_linger();
                }
                return None;
            }
            message = ws.next() => {
                let at_us = epoch_micros();
                match message {
                    Some(Ok(Message::Text(text))) => {
                        // Other messages (a pong, an error) do not read as a Status.
                        if let Ok(status) = serde_json::from_str::<Status>(&text) {
                            on_status(status, at_us);
                        }
                    }
                    Some(Ok(Message::Close(frame))) => {
                        return Some(match frame {
                            Some(frame) => format!("close {} {}", u16::from(frame.code), frame.reason),
                            None => "close without a code".into(),
                        });
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return Some(format!("error: {error}")),
                    None => return Some("connection ended".into()),
                }
            }
        }
    }
}

/// Opens one socket, reports whether it opened, then records every status
/// until told to stop.
async fn hold_socket(
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
            waiting: status.state == "waiting",
        })
    })
    .await;
    outcome
}

/// Per-tick delivery figures.
#[derive(Debug, Default)]
struct TickAnalysis {
    /// Tick → socket delay of every first delivery of a tick in the window.
    delays_us: Vec<u64>,
    /// (socket, tick) pairs where the socket was still waiting, the tick
    /// reached other sockets on its node, and this socket never got it.
    missed: u64,
    per_tick: Vec<TickLine>,
    /// Smallest and largest gap between consecutive ticks seen on a node.
    interval_ms: Option<(u64, u64)>,
}

#[derive(Debug, Default)]
struct TickLine {
    node: usize,
    tick_at_ms: u64,
    expected: u64,
    received: u64,
    max_us: u64,
}

/// Ticks are those stamped within `window` (ms, start inclusive, end
/// exclusive) that at least one socket on a node received. A socket is
/// expected to get every such tick on its node unless it was already
/// admitted (or otherwise settled) by an earlier tick.
fn analyze(outcomes: &[SocketOutcome], nodes: usize, window: (u64, u64)) -> TickAnalysis {
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

    #[test]
    fn delays_survive_the_file_between_processes() {
        let delays = [0, 1, 250_000, u32::MAX as u64, u32::MAX as u64 + 5];
        let back: Vec<u64> = decode_delays(&encode_delays(&delays)).collect();
        assert_eq!(back, [0, 1, 250_000, u32::MAX as u64, u32::MAX as u64]);
    }

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
