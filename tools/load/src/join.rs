//! `join` mode: as many joins per second as the server answers, from a fixed
//! number of keep-alive connections, optionally against a baseline GET path
//! measured the same way in the same run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use waitroom::words::status::Status;
use waitroom::words::{RoomConfig, RoomId};

use super::common::{self, ErrorKinds, Latency, Node, say};
use super::error::{Failure, LoadError};

/// How the load is shaped; the same for the baseline and the joins.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub concurrency: usize,
    /// Stop after this many requests (always bounded by `MAX_COUNT`).
    pub count: u64,
    /// Stop sending once this much time has passed.
    pub duration: Duration,
    /// Requests per second across all connections; `None`: as fast as answered.
    pub rate: Option<f64>,
    /// `--count` was given (so stopping at `duration` means falling short).
    pub counted: bool,
    /// Baseline and join phases alternate this many times, so a machine
    /// whose load drifts weighs on both alike.
    pub rounds: u32,
}

pub struct JoinRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a RoomId,
    pub admin_token: &'a str,
    pub create_room: bool,
    pub plan: Plan,
    pub baseline_path: Option<&'a str>,
    /// Server processes whose CPU time each phase reports (same machine).
    pub server_pids: &'a [u32],
    /// Joins carry the page's body (`{}`, `Content-Type: application/json`);
    /// `false`: no body at all.
    pub body: bool,
    pub json: bool,
}

#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Join { room: &'a RoomId, body: bool },
    Get(&'a str),
}

/// The outcome of one load phase.
#[derive(Debug, Serialize)]
pub struct Phase {
    pub what: String,
    pub ok: u64,
    pub errors: u64,
    pub error_kinds: ErrorKinds,
    pub elapsed_s: f64,
    pub per_s: f64,
    /// Every request, answered or not.
    pub latency: Option<Latency>,
    /// The run hit its time bound before `--count` requests were sent.
    pub stopped_by_time: bool,
    /// Who used the CPU during this phase (over all rounds).
    pub cpu: Option<common::CpuUse>,
    /// Server CPU time per answered request, when `--server-pid` names the
    /// server: what a request costs the server, whoever else uses the machine.
    pub server_cpu_us_per_request: Option<f64>,
}

/// One phase of one round, before summing.
#[derive(Clone)]
struct Raw {
    ok: u64,
    error_kinds: ErrorKinds,
    micros: Vec<u64>,
    elapsed_s: f64,
    stopped_by_time: bool,
    cpu: Option<common::CpuUse>,
}

/// Sums the rounds of one phase.
fn summarize(what: String, raws: Vec<Raw>) -> Phase {
    let mut phase = Phase {
        what,
        ok: 0,
        errors: 0,
        error_kinds: ErrorKinds::new(),
        elapsed_s: 0.0,
        per_s: 0.0,
        latency: None,
        stopped_by_time: false,
        cpu: None,
        server_cpu_us_per_request: None,
    };
    let mut micros = Vec::new();
    let (mut busy, mut tool, mut server, mut cores) = (0.0, 0.0, Some(0.0), 0);
    let mut cpu_complete = true;
    for raw in raws {
        phase.ok += raw.ok;
        phase.elapsed_s += raw.elapsed_s;
        phase.stopped_by_time |= raw.stopped_by_time;
        common::merge(&mut phase.error_kinds, raw.error_kinds);
        micros.extend(raw.micros);
        match raw.cpu {
            Some(cpu) => {
                busy += cpu.machine_busy_cores * raw.elapsed_s;
                tool += cpu.tool_cores * raw.elapsed_s;
                server = server
                    .zip(cpu.server_cores)
                    .map(|(s, c)| s + c * raw.elapsed_s);
                cores = cpu.cores;
            }
            None => cpu_complete = false,
        }
    }
    phase.errors = phase.error_kinds.values().sum();
    if phase.elapsed_s > 0.0 {
        phase.per_s = phase.ok as f64 / phase.elapsed_s;
        phase.cpu = cpu_complete.then(|| common::CpuUse {
            cores,
            machine_busy_cores: busy / phase.elapsed_s,
            tool_cores: tool / phase.elapsed_s,
            server_cores: server.map(|s| s / phase.elapsed_s),
        });
        // `server` is the server's CPU seconds over the phase.
        phase.server_cpu_us_per_request = server
            .filter(|_| cpu_complete && phase.ok > 0)
            .map(|seconds| seconds * 1e6 / phase.ok as f64);
    }
    phase.latency = Latency::from_micros(micros);
    phase
}

pub async fn run(run: JoinRun<'_>) -> Result<(), LoadError> {
    if run.create_room {
        create_paused_room(&run).await?;
    }
    describe_plan(&run);
    let (baseline_raws, join_raws, rounds) = run_rounds(&run).await;
    let baseline = run
        .baseline_path
        .map(|path| summarize(format!("GET {path}"), baseline_raws));
    let joins = summarize(join_what(run.room), join_raws);
    let ratio = report_totals(&run, &joins, baseline.as_ref());
    if run.json {
        let JoinRun {
            nodes,
            room,
            plan,
            body,
            ..
        } = run;
        let summary = json!({
            "mode": "join",
            "nodes": nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
            "room": room,
            "concurrency": plan.concurrency,
            "join_body": if body { Some("{}") } else { None },
            "rate": plan.rate,
            "join": joins,
            "baseline": baseline,
            "ratio": ratio,
            "rounds": rounds,
        });
        println!("{summary}");
    }
    Ok(())
}

fn join_what(room: &RoomId) -> String {
    format!("POST /api/rooms/{room}/join")
}

/// Creates the room on every node, paused so that every visitor waits.
async fn create_paused_room(run: &JoinRun<'_>) -> Result<(), LoadError> {
    let room = run.room;
    let http = common::http_client(1);
    let config = RoomConfig {
        paused: true,
        abandon_after_s: 86_400,
        ..common::room_config(room)
    };
    let (nodes, token) = (run.nodes, run.admin_token);
    let how = "paused: everyone waits";
    common::create_room_on_every_node(&http, nodes, token, room, &config, run.json, how).await?;
    Ok(())
}

/// The lines saying what the run sends, and how much of it.
fn describe_plan(run: &JoinRun<'_>) {
    let plan = run.plan;
    let limit = match plan.rate {
        Some(rate) => format!("at {rate}/s"),
        None => "as fast as answered".into(),
    };
    say(
        run.json,
        format!(
            "joins sent {}",
            if run.body {
                "as the page sends them: body {} with Content-Type: application/json"
            } else {
                "with no body (--no-body)"
            }
        ),
    );
    say(
        run.json,
        format!(
            "{} connection(s) over {} node(s), {limit}, each phase until {} requests or {:.0} s{}",
            plan.concurrency,
            run.nodes.len(),
            plan.count,
            plan.duration.as_secs_f64(),
            if plan.rounds > 1 {
                format!(", {} rounds", plan.rounds)
            } else {
                String::new()
            }
        ),
    );
}

/// Every round: the baseline phase (if any), then the join phase, each
/// reported as it ends. Returns the raw phases and each round's figures.
async fn run_rounds(run: &JoinRun<'_>) -> (Vec<Raw>, Vec<Raw>, Vec<serde_json::Value>) {
    let JoinRun {
        nodes,
        room,
        plan,
        baseline_path,
        server_pids,
        body,
        json,
        ..
    } = *run;
    let mut baseline_raws = Vec::new();
    let mut join_raws = Vec::new();
    let mut rounds = Vec::new();
    for round in 1..=plan.rounds {
        let prefix = if plan.rounds > 1 {
            format!("round {round}: ")
        } else {
            String::new()
        };
        let baseline_per_s = match baseline_path {
            Some(path) => {
                let raw = load(nodes, Target::Get(path), plan, server_pids).await;
                let phase = summarize(format!("GET {path}"), vec![raw.clone()]);
                say(json, format!("{prefix}{}", describe(&phase, "requests")));
                baseline_raws.push(raw);
                Some(phase.per_s)
            }
            None => None,
        };
        let raw = load(nodes, Target::Join { room, body }, plan, server_pids).await;
        let phase = summarize(join_what(room), vec![raw.clone()]);
        say(json, format!("{prefix}{}", describe(&phase, "joins")));
        join_raws.push(raw);
        let ratio = baseline_per_s.filter(|b| *b > 0.0).map(|b| phase.per_s / b);
        rounds.push(
            json!({"baseline_per_s": baseline_per_s, "join_per_s": phase.per_s, "ratio": ratio}),
        );
    }
    (baseline_raws, join_raws, rounds)
}

/// The lines over all rounds, and the joins against the baseline; returns
/// joins/s ÷ baseline requests/s.
fn report_totals(run: &JoinRun<'_>, joins: &Phase, baseline: Option<&Phase>) -> Option<f64> {
    let json = run.json;
    if run.plan.rounds > 1 {
        if let Some(baseline) = baseline {
            say(
                json,
                format!("all rounds: {}", describe(baseline, "requests")),
            );
        }
        say(json, format!("all rounds: {}", describe(joins, "joins")));
    }
    let ratio = baseline
        .filter(|b| b.per_s > 0.0)
        .map(|b| joins.per_s / b.per_s);
    if let (Some(ratio), Some(baseline)) = (ratio, baseline) {
        say(
            json,
            format!(
                "joins/s ÷ {} req/s = {:.0} ÷ {:.0} = {ratio:.3}",
                baseline.what, joins.per_s, baseline.per_s
            ),
        );
    }
    if let (Some(join_us), Some(baseline_us), Some(baseline)) = (
        joins.server_cpu_us_per_request,
        baseline.and_then(|b| b.server_cpu_us_per_request),
        baseline,
    ) {
        say(
            json,
            format!(
                "server CPU per request: join {join_us:.1} µs, {} {baseline_us:.1} µs; \
                 {} ÷ join = {:.3}",
                baseline.what,
                baseline.what,
                baseline_us / join_us
            ),
        );
    }
    ratio
}

fn describe(phase: &Phase, unit: &str) -> String {
    let latency = phase
        .latency
        .map(|l| l.to_string())
        .unwrap_or_else(|| "no requests".into());
    let mut line = format!(
        "{}: {} {unit} ok in {:.2} s = {:.0} {unit}/s; latency {latency}; errors {}",
        phase.what, phase.ok, phase.elapsed_s, phase.per_s, phase.errors
    );
    if let Some(cpu) = phase.cpu {
        line.push_str(&format!("; {cpu}"));
    }
    if let Some(us) = phase.server_cpu_us_per_request {
        line.push_str(&format!(" = {us:.1} µs of server CPU per request"));
    }
    for (kind, n) in &phase.error_kinds {
        line.push_str(&format!("\n  {n} × {kind}"));
    }
    if phase.stopped_by_time {
        line.push_str("\n  stopped at the time bound before the count was reached");
    }
    line
}

/// Runs one phase: `plan.concurrency` workers, each with its own keep-alive
/// connection to one node (worker i → node i mod n), sharing one request
/// counter so the count and the rate hold across all of them.
async fn load(nodes: &[Node], target: Target<'_>, plan: Plan, server_pids: &[u32]) -> Raw {
    let next = Arc::new(AtomicU64::new(0));
    let cpu_start = common::cpu_mark(server_pids);
    let started = Instant::now();
    let deadline = started + plan.duration;
    let mut workers = Vec::with_capacity(plan.concurrency);
    for i in 0..plan.concurrency {
        let node = &nodes[i % nodes.len()];
        let url = match target {
            Target::Join { room, .. } => format!("{}/api/rooms/{room}/join", node.base),
            Target::Get(path) => format!("{}{path}", node.base),
        };
        let is_join = matches!(target, Target::Join { .. });
        let body = matches!(target, Target::Join { body: true, .. });
        workers.push(tokio::spawn(worker(
            url,
            is_join,
            body,
            next.clone(),
            plan,
            started,
            deadline,
        )));
    }
    let mut raw = Raw {
        ok: 0,
        error_kinds: ErrorKinds::new(),
        micros: Vec::new(),
        elapsed_s: 0.0,
        stopped_by_time: false,
        cpu: None,
    };
    for worker in workers {
        match worker.await {
            Ok(result) => {
                raw.ok += result.ok;
                common::merge(&mut raw.error_kinds, result.errors);
                raw.micros.extend(result.micros);
            }
            Err(error) => common::count(&mut raw.error_kinds, format!("worker failed: {error}")),
        }
    }
    raw.elapsed_s = started.elapsed().as_secs_f64();
    raw.cpu = match (cpu_start, common::cpu_mark(server_pids)) {
        (Some(start), Some(end)) => Some(end.since(&start)),
        _ => None,
    };
    let errors: u64 = raw.error_kinds.values().sum();
    raw.stopped_by_time = plan.counted && raw.ok + errors < plan.count;
    raw
}

struct WorkerResult {
    ok: u64,
    errors: ErrorKinds,
    micros: Vec<u64>,
}

async fn worker(
    url: String,
    is_join: bool,
    body: bool,
    next: Arc<AtomicU64>,
    plan: Plan,
    started: Instant,
    deadline: Instant,
) -> WorkerResult {
    // One connection per worker: a pool of one, kept alive.
    let http = common::http_client(1);
    let mut result = WorkerResult {
        ok: 0,
        errors: ErrorKinds::new(),
        micros: Vec::new(),
    };
    loop {
        let index = next.fetch_add(1, Ordering::Relaxed);
        if index >= plan.count {
            break;
        }
        // With a rate, each request has its slot; latency counts from the
        // slot, so a server that falls behind shows it (no coordinated omission).
        let begin = match plan.rate {
            Some(rate) => {
                let slot = started + Duration::from_secs_f64(index as f64 / rate);
                if slot >= deadline {
                    break;
                }
                tokio::time::sleep_until(slot.into()).await;
                slot
            }
            None => {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                now
            }
        };
        let request = if is_join && body {
            // What the waiting page's join sends (static/waitroom-client.js).
            http.post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body("{}")
        } else if is_join {
            http.post(&url)
        } else {
            http.get(&url)
        };
        let outcome = match request.send().await {
            Ok(response) => {
                let status = response.status();
                match response.bytes().await {
                    // A join answers 200 with a Status; anything else is an error.
                    Ok(body)
                        if is_join
                            && status == 200
                            && serde_json::from_slice::<Status>(&body).is_ok() =>
                    {
                        Ok(())
                    }
                    Ok(_) if !is_join && status.is_success() => Ok(()),
                    Ok(_) => Err(Failure(format!("HTTP {status}"))),
                    Err(error) => Err(Failure::from(error)),
                }
            }
            Err(error) => Err(Failure::from(error)),
        };
        result.micros.push(begin.elapsed().as_micros() as u64);
        match outcome {
            Ok(()) => result.ok += 1,
            Err(kind) => common::count(&mut result.errors, kind),
        }
    }
    result
}
