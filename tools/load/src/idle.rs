//! `idle` mode: what many rooms cost when (nearly) nobody is in them.
//!
//! Creates `--rooms` rooms over the nodes, makes `--busy` of them busy (a
//! few visitors each, kept waiting and kept present by a WebSocket each),
//! waits out the start-up burst (`--warmup`), then measures over
//! `--window`: Redis commands per second and Redis CPU (from `INFO`), each
//! node's CPU (from `/proc/PID/stat`) and each node's ticks asked (from its
//! `/metrics`, where it has them). With `--ceiling-requests`, it then runs
//! `redis-benchmark -t set` against the same Redis, so commands per second
//! can be read as a share of what that Redis answers on this machine now.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use waitroom::words::status::Status;
use waitroom::words::{RoomConfig, RoomId};

use super::common::{self, CpuUse, ErrorKinds, Node, create_room, loopback_redis, say};
use super::error::LoadError;

/// The longest creating the rooms may take.
const CREATE_PHASE_LIMIT: Duration = Duration::from_secs(300);
/// The longest joining the busy rooms' visitors and opening their sockets may take.
const BUSY_PHASE_LIMIT: Duration = Duration::from_secs(120);
/// The longest `redis-benchmark` may run.
const CEILING_LIMIT: Duration = Duration::from_secs(120);
/// Commands listed by name in the human lines (the JSON has all).
const TOP_COMMANDS: usize = 6;

pub struct IdleRun<'a> {
    pub nodes: &'a [Node],
    pub admin_token: &'a str,
    pub prefix: &'a str,
    pub rooms: u64,
    pub busy: u64,
    pub visitors_per_busy: u64,
    pub create_concurrency: usize,
    pub redis_url: Option<&'a str>,
    pub server_pids: &'a [u32],
    pub warmup: Duration,
    pub window: Duration,
    /// SET requests for `redis-benchmark` after the window; 0: none.
    pub ceiling_requests: u64,
    pub json: bool,
}

/// What Redis's `INFO` says at one moment.
#[derive(Debug, Clone, Default)]
struct RedisMark {
    commands: u64,
    cpu_s: f64,
    calls: BTreeMap<String, u64>,
}

fn parse_info(text: &str) -> RedisMark {
    let mut mark = RedisMark::default();
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        match key {
            "total_commands_processed" => mark.commands = value.parse().unwrap_or(0),
            "used_cpu_sys" | "used_cpu_user" => mark.cpu_s += value.parse().unwrap_or(0.0),
            _ => {
                if let Some(command) = key.strip_prefix("cmdstat_") {
                    let calls = value
                        .split(',')
                        .find_map(|field| field.strip_prefix("calls="))
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    mark.calls.insert(command.to_string(), calls);
                }
            }
        }
    }
    mark
}

async fn redis_mark(
    connection: &mut redis::aio::MultiplexedConnection,
) -> Result<RedisMark, LoadError> {
    let mut text = String::new();
    for section in ["stats", "cpu", "commandstats"] {
        let part: String = redis::cmd("INFO")
            .arg(section)
            .query_async(connection)
            .await
            .map_err(LoadError::redis(format!("redis INFO {section}")))?;
        text.push_str(&part);
        text.push('\n');
    }
    Ok(parse_info(&text))
}

/// One node's figures over the window.
#[derive(Debug, Serialize)]
struct NodeFigures {
    url: String,
    pid: Option<u32>,
    /// utime + stime over the window ÷ the window: a fraction of one core.
    cpu_cores: Option<f64>,
    /// `waitroom_ticks_asked_total` over the window, per second (builds
    /// without that metric: null).
    ticks_asked_per_s: Option<f64>,
}

/// What one busy visitor's socket saw.
#[derive(Debug, Default)]
struct Held {
    opened: bool,
    error: Option<String>,
    closed_early: bool,
    statuses: u64,
    /// The room's `waiting` figure in the last status received.
    last_waiting: Option<u64>,
}

pub async fn run(run: IdleRun<'_>) -> Result<(), LoadError> {
    let Checked {
        redis_target,
        room_ids,
    } = check(&run)?;
    let mut connection = common::connect_redis(run.redis_url).await?;
    let (created, existed) = create_phase(&run, &room_ids).await?;
    let busy = start_busy(&run, &room_ids).await;
    let window = measure_window(&run, connection.as_mut()).await?;
    let held = collect_held(busy).await;
    report_window(run.json, &window);
    report_busy(&run, &held);
    let ceiling = match (&redis_target, run.ceiling_requests) {
        (Some((host, port)), requests) if requests > 0 => {
            Some(measure_ceiling(run.json, host, *port, requests, &window).await?)
        }
        _ => None,
    };
    if run.json {
        print_summary(&run, (created, existed), &held, &window, ceiling);
    }
    Ok(())
}

/// What the run's arguments come to, once checked.
struct Checked {
    /// The Redis's host and port, if `--redis-url` is given.
    redis_target: Option<(String, u16)>,
    room_ids: Vec<RoomId>,
}

/// Checks what clap cannot.
fn check(run: &IdleRun<'_>) -> Result<Checked, LoadError> {
    let IdleRun {
        nodes,
        prefix,
        rooms,
        busy,
        server_pids,
        ..
    } = *run;
    if busy > rooms {
        return Err(LoadError::Usage(format!(
            "--busy {busy} is more than --rooms {rooms}"
        )));
    }
    if !server_pids.is_empty() && server_pids.len() != nodes.len() {
        return Err(LoadError::Usage(format!(
            "--server-pid names {} process(es) for {} node(s): give one per node, in --url's order",
            server_pids.len(),
            nodes.len()
        )));
    }
    let redis_target = run.redis_url.map(loopback_redis).transpose()?;
    let room_ids: Vec<RoomId> = (0..rooms)
        .map(|i| {
            RoomId::parse(&format!("{prefix}-{i}")).ok_or_else(|| {
                LoadError::Usage(format!("--room-prefix {prefix:?} makes no valid room id"))
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Checked {
        redis_target,
        room_ids,
    })
}

/// Step 1: the rooms: the first `busy` admit one visitor a second and let one
/// hold a pass at a time, so the rest keep waiting; the others are the
/// server's defaults. Returns how many were created and how many existed.
async fn create_phase(run: &IdleRun<'_>, room_ids: &[RoomId]) -> Result<(u64, u64), LoadError> {
    let (prefix, json) = (run.prefix, run.json);
    let started = Instant::now();
    let (created, existed, create_errors) = create_rooms(
        run.nodes,
        run.admin_token,
        room_ids,
        run.busy,
        run.create_concurrency,
    )
    .await;
    say(
        json,
        format!(
            "rooms {prefix}-0 … {prefix}-{}: {created} created, {existed} existed, {} errors, in {:.1} s \
             over {} node(s)",
            run.rooms.saturating_sub(1),
            create_errors.values().sum::<u64>(),
            started.elapsed().as_secs_f64(),
            run.nodes.len()
        ),
    );
    for (kind, n) in &create_errors {
        say(json, format!("  {n} × {kind}"));
    }
    if !create_errors.is_empty() {
        return Err(LoadError::Setup("some rooms could not be created".into()));
    }
    Ok((created, existed))
}

/// The busy rooms' sockets, and what stops them.
struct Busy {
    holders: Vec<JoinHandle<Held>>,
    stop: watch::Sender<bool>,
}

/// Step 2: the busy rooms' visitors: each joins and holds a WebSocket, visitor
/// j of busy room r on node (r × visitors + j) mod n.
async fn start_busy(run: &IdleRun<'_>, room_ids: &[RoomId]) -> Busy {
    let (nodes, busy, visitors_per_busy, json) =
        (run.nodes, run.busy, run.visitors_per_busy, run.json);
    let (stop, stop_rx) = watch::channel(false);
    let (tickets, join_errors) =
        join_busy(nodes, &room_ids[..busy as usize], visitors_per_busy).await;
    let mut holders = Vec::new();
    for (index, room, ticket) in tickets {
        let node = &nodes[index % nodes.len()];
        let url = format!(
            "ws://{}/api/rooms/{room}/ws?ticket={}",
            node.authority,
            common::query_escape(&ticket)
        );
        holders.push(tokio::spawn(hold(url, stop_rx.clone())));
    }
    if busy * visitors_per_busy > 0 {
        say(
            json,
            format!(
                "busy rooms: {busy} × {visitors_per_busy} visitors: {} joined, {} join errors; \
                 holding a WebSocket each",
                holders.len(),
                join_errors.values().sum::<u64>()
            ),
        );
        for (kind, n) in &join_errors {
            say(json, format!("  {n} × {kind}"));
        }
    }
    Busy { holders, stop }
}

/// What is read at each end of the window (besides the machine's load and CPU).
struct Marks {
    redis: Option<RedisMark>,
    ticks: Vec<Option<u64>>,
    node_cpu: Vec<Option<f64>>,
}

impl Marks {
    /// The nodes' CPU is read last at the start and first at the end, so
    /// the other reads (Redis's INFO, the nodes' /metrics) fall outside it.
    async fn at_start(
        nodes: &[Node],
        server_pids: &[u32],
        connection: Option<&mut redis::aio::MultiplexedConnection>,
    ) -> Result<Self, LoadError> {
        let redis = redis_mark_of(connection).await?;
        let ticks = ticks_asked(nodes).await;
        let node_cpu = server_pids.iter().map(|p| common::pid_cpu_s(*p)).collect();
        Ok(Self {
            redis,
            ticks,
            node_cpu,
        })
    }

    async fn at_end(
        nodes: &[Node],
        server_pids: &[u32],
        connection: Option<&mut redis::aio::MultiplexedConnection>,
    ) -> Result<Self, LoadError> {
        let node_cpu = server_pids.iter().map(|p| common::pid_cpu_s(*p)).collect();
        let ticks = ticks_asked(nodes).await;
        let redis = redis_mark_of(connection).await?;
        Ok(Self {
            redis,
            ticks,
            node_cpu,
        })
    }
}

async fn redis_mark_of(
    connection: Option<&mut redis::aio::MultiplexedConnection>,
) -> Result<Option<RedisMark>, LoadError> {
    match connection {
        Some(c) => Ok(Some(redis_mark(c).await?)),
        None => Ok(None),
    }
}

/// Redis over the window: commands/s, cores, and commands/s by name
/// (busiest first).
type RedisFigures = (f64, f64, Vec<(String, f64)>);

/// What the window measured.
struct Window {
    started_utc: String,
    elapsed: f64,
    load_start: Option<String>,
    load_end: Option<String>,
    cpu: Option<CpuUse>,
    nodes: Vec<NodeFigures>,
    redis: Option<RedisFigures>,
}

/// Step 3: the start-up burst passes, then the window.
async fn measure_window(
    run: &IdleRun<'_>,
    mut connection: Option<&mut redis::aio::MultiplexedConnection>,
) -> Result<Window, LoadError> {
    let (nodes, server_pids) = (run.nodes, run.server_pids);
    say(
        run.json,
        format!(
            "warm-up {} s, then a {} s window",
            run.warmup.as_secs(),
            run.window.as_secs()
        ),
    );
    tokio::time::sleep(run.warmup).await;
    let load_start = common::loadavg();
    let started_utc = common::utc_now();
    let start = Marks::at_start(nodes, server_pids, connection.as_deref_mut()).await?;
    let cpu_start = common::cpu_mark(server_pids);
    let at = Instant::now();
    tokio::time::sleep(run.window).await;
    let elapsed = at.elapsed().as_secs_f64();
    let cpu = cpu_start
        .zip(common::cpu_mark(server_pids))
        .map(|(s, e)| e.since(&s));
    let end = Marks::at_end(nodes, server_pids, connection).await?;
    let load_end = common::loadavg();
    let node_figures = (0..nodes.len())
        .map(|i| NodeFigures {
            url: nodes[i].base.clone(),
            pid: server_pids.get(i).copied(),
            cpu_cores: start
                .node_cpu
                .get(i)
                .copied()
                .flatten()
                .zip(end.node_cpu.get(i).copied().flatten())
                .map(|(s, e)| (e - s) / elapsed),
            ticks_asked_per_s: start.ticks[i]
                .zip(end.ticks[i])
                .map(|(s, e)| e.saturating_sub(s) as f64 / elapsed),
        })
        .collect();
    let redis = start
        .redis
        .zip(end.redis)
        .map(|(s, e)| redis_figures(&s, &e, elapsed));
    Ok(Window {
        started_utc,
        elapsed,
        load_start,
        load_end,
        cpu,
        nodes: node_figures,
        redis,
    })
}

fn redis_figures(start: &RedisMark, end: &RedisMark, elapsed: f64) -> RedisFigures {
    let mut per_command: Vec<(String, f64)> = end
        .calls
        .iter()
        .map(|(name, calls)| {
            let before = start.calls.get(name).copied().unwrap_or(0);
            (name.clone(), calls.saturating_sub(before) as f64 / elapsed)
        })
        .filter(|(_, per_s)| *per_s > 0.0)
        .collect();
    per_command.sort_by(|a, b| b.1.total_cmp(&a.1));
    (
        end.commands.saturating_sub(start.commands) as f64 / elapsed,
        (end.cpu_s - start.cpu_s) / elapsed,
        per_command,
    )
}

/// What the busy rooms' sockets saw.
struct HeldFigures {
    joined: usize,
    opened: usize,
    closed_early: usize,
    still_waiting: usize,
    errors: ErrorKinds,
}

/// Step 4: the busy rooms still have people waiting, and every socket stayed.
async fn collect_held(busy: Busy) -> HeldFigures {
    let _ = busy.stop.send(true);
    let mut held = Vec::new();
    for holder in busy.holders {
        held.push(holder.await.unwrap_or_else(|e| Held {
            error: Some(format!("holder failed: {e}")),
            ..Held::default()
        }));
    }
    let mut errors = ErrorKinds::new();
    for error in held.iter().filter_map(|h| h.error.clone()) {
        common::count(&mut errors, error);
    }
    HeldFigures {
        joined: held.len(),
        opened: held.iter().filter(|h| h.opened).count(),
        closed_early: held.iter().filter(|h| h.closed_early).count(),
        still_waiting: held
            .iter()
            .filter(|h| h.last_waiting.is_some_and(|w| w > 0))
            .count(),
        errors,
    }
}

fn report_window(json: bool, window: &Window) {
    say(
        json,
        format!(
            "window {} UTC, {:.1} s; load average {} → {}",
            window.started_utc,
            window.elapsed,
            window.load_start.as_deref().unwrap_or("?"),
            window.load_end.as_deref().unwrap_or("?")
        ),
    );
    if let Some((commands_per_s, redis_cores, per_command)) = &window.redis {
        say(
            json,
            format!(
                "redis: {commands_per_s:.1} commands/s, {:.2}% of a core",
                redis_cores * 100.0
            ),
        );
        let top: Vec<String> = per_command
            .iter()
            .take(TOP_COMMANDS)
            .map(|(name, per_s)| format!("{name} {per_s:.1}/s"))
            .collect();
        if !top.is_empty() {
            say(json, format!("  by command: {}", top.join(", ")));
        }
    }
    for node in &window.nodes {
        say(
            json,
            format!(
                "{} (pid {}): CPU {}, ticks asked {}",
                node.url,
                node.pid.map_or("?".into(), |p| p.to_string()),
                node.cpu_cores
                    .map_or("?".into(), |c| format!("{:.2}% of a core", c * 100.0)),
                node.ticks_asked_per_s
                    .map_or("not reported".into(), |t| format!("{t:.1}/s")),
            ),
        );
    }
    if let Some(cpu) = window.cpu {
        say(json, format!("{cpu}"));
    }
}

fn report_busy(run: &IdleRun<'_>, held: &HeldFigures) {
    if run.busy * run.visitors_per_busy == 0 {
        return;
    }
    let HeldFigures {
        opened,
        closed_early,
        still_waiting,
        ..
    } = held;
    say(
        run.json,
        format!(
            "busy sockets: {opened} opened, {closed_early} closed early, {still_waiting} saw \
             people waiting in their room's last status"
        ),
    );
    for (kind, n) in &held.errors {
        say(run.json, format!("  {n} × {kind}"));
    }
}

/// Step 5: what this Redis answers now, for scale: SET/s, and the window's
/// commands/s as a share of it.
async fn measure_ceiling(
    json: bool,
    host: &str,
    port: u16,
    requests: u64,
    window: &Window,
) -> Result<(f64, Option<f64>), LoadError> {
    let set_per_s = redis_ceiling(host, port, requests).await?;
    let ratio = window.redis.as_ref().map(|(c, _, _)| c / set_per_s);
    say(
        json,
        format!(
            "redis-benchmark -t set -n {requests} -c 50: {set_per_s:.0} SET/s; \
             commands/s ÷ that = {}",
            ratio.map_or("?".into(), |r| format!("{:.5} ({:.3}%)", r, r * 100.0))
        ),
    );
    Ok((set_per_s, ratio))
}

/// The one-line JSON summary (`--json`).
fn print_summary(
    run: &IdleRun<'_>,
    (created, existed): (u64, u64),
    held: &HeldFigures,
    window: &Window,
    ceiling: Option<(f64, Option<f64>)>,
) {
    let redis = &window.redis;
    let summary = json!({
        "mode": "idle",
        "nodes": window.nodes,
        "rooms": run.rooms,
        "rooms_created": created,
        "rooms_existed": existed,
        "busy": run.busy,
        "visitors_per_busy": run.visitors_per_busy,
        "busy_joined": held.joined,
        "busy_sockets_opened": held.opened,
        "busy_sockets_closed_early": held.closed_early,
        "busy_sockets_still_waiting": held.still_waiting,
        "warmup_s": run.warmup.as_secs(),
        "window_s": window.elapsed,
        "window_started_utc": window.started_utc,
        "load_average_start": window.load_start,
        "load_average_end": window.load_end,
        "redis_commands_per_s": redis.as_ref().map(|r| r.0),
        "redis_cpu_cores": redis.as_ref().map(|r| r.1),
        "redis_commands_by_name_per_s": redis
            .as_ref()
            .map(|r| r.2.iter().cloned().collect::<BTreeMap<_, _>>()),
        "redis_ceiling_set_per_s": ceiling.map(|c| c.0),
        "redis_commands_to_ceiling": ceiling.and_then(|c| c.1),
        "node_cpu_cores_max": window
            .nodes
            .iter()
            .filter_map(|n| n.cpu_cores)
            .reduce(f64::max),
        "cpu": window.cpu,
    });
    println!("{summary}");
}

/// Creates the rooms concurrently, room i on node i mod n; 409 counts as existed.
async fn create_rooms(
    nodes: &[Node],
    admin_token: &str,
    room_ids: &[RoomId],
    busy: u64,
    concurrency: usize,
) -> (u64, u64, ErrorKinds) {
    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + CREATE_PHASE_LIMIT;
    let room_ids: Arc<[RoomId]> = room_ids.into();
    let nodes: Arc<[Node]> = nodes.into();
    let token: Arc<str> = admin_token.into();
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(room_ids.len()).max(1) {
        let (next, room_ids, nodes, token) =
            (next.clone(), room_ids.clone(), nodes.clone(), token.clone());
        workers.push(tokio::spawn(async move {
            let http = common::http_client(nodes.len());
            let (mut created, mut existed, mut errors) = (0u64, 0u64, ErrorKinds::new());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= room_ids.len() {
                    break;
                }
                if Instant::now() >= deadline {
                    common::count(&mut errors, "not sent: creation time limit");
                    continue;
                }
                let room = &room_ids[i];
                let config = room_config(room, (i as u64) < busy);
                let node = &nodes[i % nodes.len()];
                match create_room(&http, node, &token, room, &config).await {
                    Ok(true) => created += 1,
                    Ok(false) => existed += 1,
                    Err(error) => common::count(&mut errors, error.to_string()),
                }
            }
            (created, existed, errors)
        }));
    }
    let (mut created, mut existed, mut errors) = (0, 0, ErrorKinds::new());
    for worker in workers {
        match worker.await {
            Ok((c, e, kinds)) => {
                created += c;
                existed += e;
                common::merge(&mut errors, kinds);
            }
            Err(error) => common::count(&mut errors, format!("worker failed: {error}")),
        }
    }
    (created, existed, errors)
}

/// A busy room admits one visitor a second and lets one hold a pass at a
/// time (for 600 s), so of its visitors one is admitted and the rest wait
/// through any window this tool allows; an idle room is the server's defaults.
fn room_config(room: &RoomId, busy: bool) -> RoomConfig {
    let config = common::room_config(room);
    if busy {
        RoomConfig {
            admit_per_tick: 1,
            tick_ms: 1000,
            max_active: Some(1),
            pass_ttl_s: 600,
            ..config
        }
    } else {
        config
    }
}

/// Joins `per_room` visitors in each busy room (with the page's `{}` body).
/// Returns (visitor index, room, ticket) for each visitor that joined.
async fn join_busy(
    nodes: &[Node],
    busy_rooms: &[RoomId],
    per_room: u64,
) -> (Vec<(usize, RoomId, String)>, ErrorKinds) {
    let total = busy_rooms.len() as u64 * per_room;
    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + BUSY_PHASE_LIMIT;
    let rooms: Arc<[RoomId]> = busy_rooms.into();
    let nodes: Arc<[Node]> = nodes.into();
    let mut workers = Vec::new();
    for _ in 0..(total as usize).min(32) {
        let (next, rooms, nodes) = (next.clone(), rooms.clone(), nodes.clone());
        workers.push(tokio::spawn(async move {
            let http = common::http_client(nodes.len());
            let mut joined = Vec::new();
            let mut errors = ErrorKinds::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total {
                    break;
                }
                if Instant::now() >= deadline {
                    common::count(&mut errors, "not sent: join time limit");
                    continue;
                }
                let room = &rooms[(index / per_room) as usize];
                let node = &nodes[index as usize % nodes.len()];
                let request = http
                    .post(format!("{}/api/rooms/{room}/join", node.base))
                    .json(&json!({}));
                let outcome = common::join_ticket(request).await;
                match outcome {
                    Ok(ticket) => joined.push((index as usize, room.clone(), ticket)),
                    Err(kind) => common::count(&mut errors, kind),
                }
            }
            (joined, errors)
        }));
    }
    let mut joined = Vec::new();
    let mut errors = ErrorKinds::new();
    for worker in workers {
        match worker.await {
            Ok((j, e)) => {
                joined.extend(j);
                common::merge(&mut errors, e);
            }
            Err(error) => common::count(&mut errors, format!("worker failed: {error}")),
        }
    }
    joined.sort_by_key(|(index, _, _)| *index);
    (joined, errors)
}

/// Holds one WebSocket until told to stop, reading every status.
async fn hold(url: String, mut stop: watch::Receiver<bool>) -> Held {
    let mut held = Held::default();
    let open = tokio::time::timeout(BUSY_PHASE_LIMIT, tokio_tungstenite::connect_async(&url)).await;
    let mut ws = match open {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(error)) => {
            held.error = Some(format!("handshake: {error}"));
            return held;
        }
        Err(_) => {
            held.error = Some("handshake timed out".into());
            return held;
        }
    };
    held.opened = true;
    loop {
        tokio::select! {
            message = ws.next() => match message {
                Some(Ok(message)) => {
                    if let Ok(text) = message.to_text()
                        && let Ok(status) = serde_json::from_str::<Status>(text)
                    {
                        held.statuses += 1;
                        held.last_waiting = Some(status.waiting);
                    }
                }
                Some(Err(error)) => {
                    held.closed_early = true;
                    held.error = Some(format!("socket: {error}"));
                    return held;
                }
                None => {
                    held.closed_early = true;
                    held.error = Some("socket closed by the server".into());
                    return held;
                }
            },
            _ = stop.changed() => break,
        }
    }
    let _ = ws.close(None).await;
    held
}

/// Each node's `waitroom_ticks_asked_total`, where it reports one.
async fn ticks_asked(nodes: &[Node]) -> Vec<Option<u64>> {
    let mut out = Vec::new();
    for node in nodes {
        out.push(
            common::scrape(node)
                .await
                .ok()
                .and_then(|s| s.ticks_asked_total),
        );
    }
    out
}

/// Runs `redis-benchmark -t set` against the Redis measured; returns SET/s.
async fn redis_ceiling(host: &str, port: u16, requests: u64) -> Result<f64, LoadError> {
    let output = tokio::time::timeout(
        CEILING_LIMIT,
        tokio::process::Command::new("redis-benchmark")
            .args(["-h", host, "-p", &port.to_string(), "-t", "set"])
            .args(["-n", &requests.to_string(), "-c", "50", "-q"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| {
        LoadError::Setup(format!(
            "redis-benchmark ran past {} s",
            CEILING_LIMIT.as_secs()
        ))
    })?
    .map_err(LoadError::io("redis-benchmark"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse_benchmark(&text)
        .ok_or_else(|| LoadError::Setup(format!("redis-benchmark printed no SET rate: {text}")))
}

/// The rate in `redis-benchmark -q`'s last `SET: N requests per second` line.
fn parse_benchmark(text: &str) -> Option<f64> {
    text.split(['\r', '\n'])
        .filter_map(|line| line.trim().strip_prefix("SET: "))
        .filter_map(|rest| rest.split_once(" requests per second"))
        .filter_map(|(rate, _)| rate.trim().parse().ok())
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_gives_commands_cpu_and_calls() {
        let mark = parse_info(
            "# Stats\r\ntotal_connections_received:3\r\ntotal_commands_processed:1234\r\n\
             # CPU\r\nused_cpu_sys:1.50\r\nused_cpu_user:2.25\r\nused_cpu_sys_children:9\r\n\
             # Commandstats\r\ncmdstat_evalsha:calls=40,usec=100,usec_per_call=2.5\r\n\
             cmdstat_info:calls=2,usec=1\r\n",
        );
        assert_eq!(mark.commands, 1234);
        assert!((mark.cpu_s - 3.75).abs() < 1e-9);
        assert_eq!(mark.calls["evalsha"], 40);
        assert_eq!(mark.calls["info"], 2);
    }

    #[test]
    fn the_benchmark_rate_is_its_last_set_line() {
        let out = "SET: rps=0.0 (overall: nan) avg_msec=nan\rSET: 91743.12 requests per second, p50=0.271 msec\n";
        assert_eq!(parse_benchmark(out), Some(91743.12));
        assert_eq!(parse_benchmark("nothing"), None);
    }
}
