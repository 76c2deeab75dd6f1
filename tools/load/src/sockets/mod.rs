//! `sockets` mode: joins N visitors, holds N WebSockets open (spread over the
//! nodes and over local source addresses), and measures, for every tick that
//! runs while they are held, how long each socket waited for its status, and
//! which sockets never got one.
//!
//! With `--floor` it first does the same against a floor server per node
//! (see `floor`): the same number of sockets, source addresses, ticks and
//! hold, measured by the same code, so the two latencies compare as a ratio.

mod barrier;
mod floor_phase;
mod hold;
mod open;
mod ticks;

pub use open::{
    LARGE_RUN, SocketSpec, Visitors, client_config, count_opened, join_visitors, open_counted,
    open_socket, read_statuses, source_address, wait_for_time_waits,
};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use waitroom::words::{RoomConfig, RoomId};

use crate::common::{self, Joins, Node, Scrape, say};
use crate::error::LoadError;
use crate::floor;

use barrier::{Combined, combine};
use floor_phase::{FLOOR_TARGET, FloorFigures, FloorPhase, compare_line, floor_phase};
use hold::{HoldPlan, Phase, open_and_hold};
use ticks::report_ticks;

/// The longest the join phase may take.
const JOIN_PHASE_LIMIT: Duration = Duration::from_secs(120);

/// Descriptors this tool holds besides its sockets (measured: 12).
const OWN_DESCRIPTORS: u64 = 16;

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
    let how = format!("{admit_per_tick} admitted every {tick_ms} ms");
    let (nodes, token) = (run.nodes, run.admin_token);
    common::create_room_on_every_node(&http, nodes, token, room, &room_config, run.json, &how).await
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
    let joins = Joins::tally(run.json, &tickets, errors, joined_at, |joined, seconds| {
        format!(
            "joined {joined} of {requested} visitors in {seconds:.2} s ({} errors)",
            requested - joined
        )
    });
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
    let mut summary = phase.figures(requested);
    let own = json!({
        "mode": "sockets",
        "nodes": run.nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
        "room": run.room,
        "room_created": room_created,
        "requested": requested,
        "joined": joins.joined,
        "join_errors": joins.errors,
        "join_s": joins.seconds,
        "source_ips": run.source_ips,
        "hold_s": run.hold.as_secs(),
        "servers": memory,
        "server_sockets_open": memory_figures.server_sockets_open,
        "memory_per_socket_bytes": memory_figures.per_socket,
        "tool_open_files_limit": run.open_files_limit,
        "tool_open_fds_held": phase.tool_open_fds,
        "floor": floor.as_ref().map(|f| f.summary(requested)),
        "floor_ratio": floor_ratio,
        "floor_target_ratio": floor.as_ref().map(|_| FLOOR_TARGET),
        "combined": combined,
    });
    if let serde_json::Value::Object(own) = own {
        summary.extend(own);
    }
    println!("{}", serde_json::Value::Object(summary));
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
