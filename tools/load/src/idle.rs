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
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;
use waitroom::words::status::Status;
use waitroom::words::{RoomConfig, RoomId};

use super::common::{self, ErrorKinds, Node, create_room, say};

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

/// Checks that a Redis URL points at this machine; returns host and port.
pub fn loopback_redis(raw: &str) -> Result<(String, u16), String> {
    let url = reqwest::Url::parse(raw).map_err(|e| format!("--redis-url {raw:?}: {e}"))?;
    if url.scheme() != "redis" {
        return Err(format!("--redis-url {raw:?}: give a redis:// URL"));
    }
    let host = url.host_str().unwrap_or_default().to_string();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    };
    if !loopback {
        return Err(format!(
            "--redis-url {raw:?}: refused: this tool only talks to loopback \
             (127.x.x.x, localhost or [::1])"
        ));
    }
    Ok((bare.to_string(), url.port().unwrap_or(6379)))
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
) -> Result<RedisMark, String> {
    let mut text = String::new();
    for section in ["stats", "cpu", "commandstats"] {
        let part: String = redis::cmd("INFO")
            .arg(section)
            .query_async(connection)
            .await
            .map_err(|e| format!("redis INFO {section}: {e}"))?;
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

pub async fn run(run: IdleRun<'_>) -> Result<(), String> {
    let IdleRun {
        nodes,
        admin_token,
        prefix,
        rooms,
        busy,
        visitors_per_busy,
        create_concurrency,
        redis_url,
        server_pids,
        warmup,
        window,
        ceiling_requests,
        json,
    } = run;
    if busy > rooms {
        return Err(format!("--busy {busy} is more than --rooms {rooms}"));
    }
    if !server_pids.is_empty() && server_pids.len() != nodes.len() {
        return Err(format!(
            "--server-pid names {} process(es) for {} node(s): give one per node, in --url's order",
            server_pids.len(),
            nodes.len()
        ));
    }
    let redis_target = redis_url.map(loopback_redis).transpose()?;
    let room_ids: Vec<RoomId> = (0..rooms)
        .map(|i| {
            RoomId::parse(&format!("{prefix}-{i}"))
                .ok_or_else(|| format!("--room-prefix {prefix:?} makes no valid room id"))
        })
        .collect::<Result<_, _>>()?;
    let mut connection = match redis_url {
        Some(url) => Some(
            redis::Client::open(url)
                .map_err(|e| format!("--redis-url: {e}"))?
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| format!("--redis-url: {e}"))?,
        ),
        None => None,
    };

    // 1. The rooms: the first `busy` admit one visitor a second and let
    // one hold a pass at a time, so the rest keep waiting; the others are
    // the server's defaults.
    let started = Instant::now();
    let (created, existed, create_errors) =
        create_rooms(nodes, admin_token, &room_ids, busy, create_concurrency).await;
    say(
        json,
        format!(
            "rooms {prefix}-0 … {prefix}-{}: {created} created, {existed} existed, {} errors, in {:.1} s \
             over {} node(s)",
            rooms.saturating_sub(1),
            create_errors.values().sum::<u64>(),
            started.elapsed().as_secs_f64(),
            nodes.len()
        ),
    );
    for (kind, n) in &create_errors {
        say(json, format!("  {n} × {kind}"));
    }
    if !create_errors.is_empty() {
        return Err("some rooms could not be created".into());
    }

    // 2. The busy rooms' visitors: each joins and holds a WebSocket, visitor
    // j of busy room r on node (r × visitors + j) mod n.
    let (stop_tx, stop_rx) = watch::channel(false);
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
    let wanted = busy * visitors_per_busy;
    if wanted > 0 {
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

    // 3. The start-up burst passes, then the window.
    say(
        json,
        format!(
            "warm-up {} s, then a {} s window",
            warmup.as_secs(),
            window.as_secs()
        ),
    );
    tokio::time::sleep(warmup).await;
    let load_start = common::loadavg();
    let window_started_utc = common::utc_now();
    let redis_start = match connection.as_mut() {
        Some(c) => Some(redis_mark(c).await?),
        None => None,
    };
    let ticks_start = ticks_asked(nodes).await;
    let node_cpu_start: Vec<Option<f64>> =
        server_pids.iter().map(|p| common::pid_cpu_s(*p)).collect();
    let cpu_start = common::cpu_mark(server_pids);
    let at = Instant::now();
    tokio::time::sleep(window).await;
    let elapsed = at.elapsed().as_secs_f64();
    let cpu = cpu_start
        .zip(common::cpu_mark(server_pids))
        .map(|(s, e)| e.since(&s));
    let node_cpu_end: Vec<Option<f64>> =
        server_pids.iter().map(|p| common::pid_cpu_s(*p)).collect();
    let ticks_end = ticks_asked(nodes).await;
    let redis_end = match connection.as_mut() {
        Some(c) => Some(redis_mark(c).await?),
        None => None,
    };
    let load_end = common::loadavg();

    let node_figures: Vec<NodeFigures> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| NodeFigures {
            url: node.base.clone(),
            pid: server_pids.get(i).copied(),
            cpu_cores: node_cpu_start
                .get(i)
                .copied()
                .flatten()
                .zip(node_cpu_end.get(i).copied().flatten())
                .map(|(s, e)| (e - s) / elapsed),
            ticks_asked_per_s: ticks_start[i]
                .zip(ticks_end[i])
                .map(|(s, e)| e.saturating_sub(s) as f64 / elapsed),
        })
        .collect();
    let redis_figures = redis_start.zip(redis_end).map(|(s, e)| {
        let mut per_command: Vec<(String, f64)> = e
            .calls
            .iter()
            .map(|(name, calls)| {
                let before = s.calls.get(name).copied().unwrap_or(0);
                (name.clone(), calls.saturating_sub(before) as f64 / elapsed)
            })
            .filter(|(_, per_s)| *per_s > 0.0)
            .collect();
        per_command.sort_by(|a, b| b.1.total_cmp(&a.1));
        (
            e.commands.saturating_sub(s.commands) as f64 / elapsed,
            (e.cpu_s - s.cpu_s) / elapsed,
            per_command,
        )
    });

    // 4. The busy rooms still have people waiting, and every socket stayed.
    let _ = stop_tx.send(true);
    let mut held = Vec::new();
    for holder in holders {
        held.push(holder.await.unwrap_or_else(|e| Held {
            error: Some(format!("holder failed: {e}")),
            ..Held::default()
        }));
    }
    let opened = held.iter().filter(|h| h.opened).count();
    let closed_early = held.iter().filter(|h| h.closed_early).count();
    let still_waiting = held
        .iter()
        .filter(|h| h.last_waiting.is_some_and(|w| w > 0))
        .count();
    let mut socket_errors = ErrorKinds::new();
    for error in held.iter().filter_map(|h| h.error.clone()) {
        common::count(&mut socket_errors, error);
    }

    say(
        json,
        format!(
            "window {window_started_utc} UTC, {elapsed:.1} s; load average {} → {}",
            load_start.as_deref().unwrap_or("?"),
            load_end.as_deref().unwrap_or("?")
        ),
    );
    if let Some((commands_per_s, redis_cores, per_command)) = &redis_figures {
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
    for node in &node_figures {
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
    if let Some(cpu) = cpu {
        say(json, format!("{cpu}"));
    }
    if wanted > 0 {
        say(
            json,
            format!(
                "busy sockets: {opened} opened, {closed_early} closed early, {still_waiting} saw \
                 people waiting in their room's last status"
            ),
        );
        for (kind, n) in &socket_errors {
            say(json, format!("  {n} × {kind}"));
        }
    }

    // 5. What this Redis answers now, for scale.
    let ceiling = match (&redis_target, ceiling_requests) {
        (Some((host, port)), requests) if requests > 0 => {
            let set_per_s = redis_ceiling(host, *port, requests).await?;
            let ratio = redis_figures.as_ref().map(|(c, _, _)| c / set_per_s);
            say(
                json,
                format!(
                    "redis-benchmark -t set -n {requests} -c 50: {set_per_s:.0} SET/s; \
                     commands/s ÷ that = {}",
                    ratio.map_or("?".into(), |r| format!("{:.5} ({:.3}%)", r, r * 100.0))
                ),
            );
            Some((set_per_s, ratio))
        }
        _ => None,
    };

    if json {
        let summary = json!({
            "mode": "idle",
            "nodes": node_figures,
            "rooms": rooms,
            "rooms_created": created,
            "rooms_existed": existed,
            "busy": busy,
            "visitors_per_busy": visitors_per_busy,
            "busy_joined": held.len(),
            "busy_sockets_opened": opened,
            "busy_sockets_closed_early": closed_early,
            "busy_sockets_still_waiting": still_waiting,
            "warmup_s": warmup.as_secs(),
            "window_s": elapsed,
            "window_started_utc": window_started_utc,
            "load_average_start": load_start,
            "load_average_end": load_end,
            "redis_commands_per_s": redis_figures.as_ref().map(|r| r.0),
            "redis_cpu_cores": redis_figures.as_ref().map(|r| r.1),
            "redis_commands_by_name_per_s": redis_figures
                .as_ref()
                .map(|r| r.2.iter().cloned().collect::<BTreeMap<_, _>>()),
            "redis_ceiling_set_per_s": ceiling.map(|c| c.0),
            "redis_commands_to_ceiling": ceiling.and_then(|c| c.1),
            "node_cpu_cores_max": node_figures
                .iter()
                .filter_map(|n| n.cpu_cores)
                .reduce(f64::max),
            "cpu": cpu,
        });
        println!("{summary}");
    }
    Ok(())
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
                    Err(error) => common::count(&mut errors, error),
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
                let outcome = match http
                    .post(format!("{}/api/rooms/{room}/join", node.base))
                    .json(&json!({}))
                    .send()
                    .await
                {
                    Ok(response) if response.status() == 200 => match response.bytes().await {
                        Ok(body) => serde_json::from_slice::<Status>(&body)
                            .map(|status| status.ticket.to_string())
                            .map_err(|e| format!("join: not a status: {e}")),
                        Err(error) => Err(common::error_kind(&error)),
                    },
                    Ok(response) => Err(format!("join: HTTP {}", response.status())),
                    Err(error) => Err(common::error_kind(&error)),
                };
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
async fn redis_ceiling(host: &str, port: u16, requests: u64) -> Result<f64, String> {
    let output = tokio::time::timeout(
        CEILING_LIMIT,
        tokio::process::Command::new("redis-benchmark")
            .args(["-h", host, "-p", &port.to_string(), "-t", "set"])
            .args(["-n", &requests.to_string(), "-c", "50", "-q"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| format!("redis-benchmark ran past {} s", CEILING_LIMIT.as_secs()))?
    .map_err(|e| format!("redis-benchmark: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse_benchmark(&text).ok_or_else(|| format!("redis-benchmark printed no SET rate: {text}"))
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

    #[test]
    fn only_a_loopback_redis_is_measured() {
        assert_eq!(
            loopback_redis("redis://127.0.0.1:6390/").unwrap(),
            ("127.0.0.1".to_string(), 6390)
        );
        assert!(loopback_redis("redis://localhost/").is_ok());
        assert!(loopback_redis("redis://10.0.0.1:6379/").is_err());
        assert!(loopback_redis("http://127.0.0.1:6379/").is_err());
    }
}
