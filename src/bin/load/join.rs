//! `join` mode: as many joins per second as the server answers, from a fixed
//! number of keep-alive connections, optionally against a baseline GET path
//! measured the same way in the same run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::common::{self, ErrorKinds, Latency, MAX_DURATION_S, Node, create_room, say};

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
}

pub struct JoinRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a str,
    pub admin_token: &'a str,
    pub create_room: bool,
    pub plan: Plan,
    pub baseline_path: Option<&'a str>,
    pub json: bool,
}

#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Join(&'a str),
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
}

pub async fn run(run: JoinRun<'_>) -> Result<(), String> {
    let JoinRun {
        nodes,
        room,
        admin_token,
        create_room: create,
        plan,
        baseline_path,
        json,
    } = run;
    if create {
        let http = common::http_client(1);
        let body = json!({
            "id": room,
            "name": format!("load test {room}"),
            "target_url": "/",
            "paused": true,
            "abandon_after_s": 86_400,
        });
        for node in nodes {
            let created = create_room(&http, node, admin_token, &body).await?;
            say(
                json,
                format!(
                    "{}: room {room} {}",
                    node.base,
                    if created {
                        "created (paused: everyone waits)"
                    } else {
                        "already exists: using it as it is"
                    }
                ),
            );
        }
    }
    let limit = match plan.rate {
        Some(rate) => format!("at {rate}/s"),
        None => "as fast as answered".into(),
    };
    say(
        json,
        format!(
            "{} connection(s) over {} node(s), {limit}, until {} requests or {:.0} s",
            plan.concurrency,
            nodes.len(),
            plan.count,
            plan.duration.as_secs_f64()
        ),
    );
    let baseline = match baseline_path {
        Some(path) => {
            let phase = load(nodes, Target::Get(path), plan).await;
            say(json, describe(&phase, "requests"));
            Some(phase)
        }
        None => None,
    };
    let joins = load(nodes, Target::Join(room), plan).await;
    say(json, describe(&joins, "joins"));
    let ratio = baseline
        .as_ref()
        .filter(|b| b.per_s > 0.0)
        .map(|b| joins.per_s / b.per_s);
    if let (Some(ratio), Some(baseline)) = (ratio, &baseline) {
        say(
            json,
            format!(
                "joins/s ÷ {} req/s = {:.0} ÷ {:.0} = {ratio:.3}",
                baseline.what, joins.per_s, baseline.per_s
            ),
        );
    }
    if json {
        let summary = json!({
            "mode": "join",
            "nodes": nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
            "room": room,
            "concurrency": plan.concurrency,
            "rate": plan.rate,
            "join": joins,
            "baseline": baseline,
            "ratio": ratio,
        });
        println!("{summary}");
    }
    Ok(())
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
    for (kind, n) in &phase.error_kinds {
        line.push_str(&format!("\n  {n} × {kind}"));
    }
    if phase.stopped_by_time {
        line.push_str(&format!(
            "\n  stopped at the {MAX_DURATION_S} s time bound before the count was reached"
        ));
    }
    line
}

/// Runs one phase: `plan.concurrency` workers, each with its own keep-alive
/// connection to one node (worker i → node i mod n), sharing one request
/// counter so the count and the rate hold across all of them.
async fn load(nodes: &[Node], target: Target<'_>, plan: Plan) -> Phase {
    let what = match target {
        Target::Join(room) => format!("POST /api/rooms/{room}/join"),
        Target::Get(path) => format!("GET {path}"),
    };
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + plan.duration;
    let mut workers = Vec::with_capacity(plan.concurrency);
    for i in 0..plan.concurrency {
        let node = &nodes[i % nodes.len()];
        let url = match target {
            Target::Join(room) => format!("{}/api/rooms/{room}/join", node.base),
            Target::Get(path) => format!("{}{path}", node.base),
        };
        let is_join = matches!(target, Target::Join(_));
        workers.push(tokio::spawn(worker(
            url,
            is_join,
            next.clone(),
            plan,
            started,
            deadline,
        )));
    }
    let mut ok = 0;
    let mut error_kinds = ErrorKinds::new();
    let mut micros = Vec::new();
    for worker in workers {
        match worker.await {
            Ok(result) => {
                ok += result.ok;
                common::merge(&mut error_kinds, result.errors);
                micros.extend(result.micros);
            }
            Err(error) => common::count(&mut error_kinds, format!("worker failed: {error}")),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let errors: u64 = error_kinds.values().sum();
    Phase {
        what,
        ok,
        errors,
        error_kinds,
        elapsed_s: elapsed,
        per_s: if elapsed > 0.0 {
            ok as f64 / elapsed
        } else {
            0.0
        },
        latency: Latency::from_micros(micros),
        stopped_by_time: plan.counted && ok + errors < plan.count,
    }
}

struct WorkerResult {
    ok: u64,
    errors: ErrorKinds,
    micros: Vec<u64>,
}

/// A join answers 200 with a Status body; anything else is an error.
const STATUS_PREFIX: &[u8] = br#"{"type":"status""#;

async fn worker(
    url: String,
    is_join: bool,
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
        let request = if is_join {
            http.post(&url)
        } else {
            http.get(&url)
        };
        let outcome = match request.send().await {
            Ok(response) => {
                let status = response.status();
                match response.bytes().await {
                    Ok(body) if is_join && status == 200 && body.starts_with(STATUS_PREFIX) => {
                        Ok(())
                    }
                    Ok(_) if !is_join && status.is_success() => Ok(()),
                    Ok(_) => Err(format!("HTTP {status}")),
                    Err(error) => Err(common::error_kind(&error)),
                }
            }
            Err(error) => Err(common::error_kind(&error)),
        };
        result.micros.push(begin.elapsed().as_micros() as u64);
        match outcome {
            Ok(()) => result.ok += 1,
            Err(kind) => common::count(&mut result.errors, kind),
        }
    }
    result
}
