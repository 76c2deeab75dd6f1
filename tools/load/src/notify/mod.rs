//! `notify` mode: what notifications cost (api.md, "Step away"). Creates a
//! paused room (no cap, `abandon_after_s` a day) whose webhook is this
//! tool's receiver ([`receiver`]), on nodes sharing one store; then
//!
//! 1. joins V visitors (visitor i on node i mod n), and asks for each to be
//!    notified (a contact of `--contact-chars`, and/or a push subscription
//!    of a browser's size), reading Redis's `used_memory` before the
//!    joins, after them and after the requests: a notified visitor's bytes
//!    against a plain place's, and `MEMORY USAGE` of the room's keys;
//! 2. with `--polls`, V status polls of those visitors (the node CPU floor);
//! 3. unless `--stop-after asked`, unpauses the room and follows the
//!    events: to the last distinct `admitted` event at the receiver
//!    (`delivered`: the time, events a second, retries, duplicates, each
//!    node's counters, node and Redis CPU), or, the receiver refusing
//!    everything, until the outbox holds every `admitted` event (`outbox`:
//!    its `MEMORY USAGE` per entry).

pub mod receiver;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};
use waitroom::words::{RoomConfig, RoomId};

use crate::common::{self, CpuUse, Node, say};
use crate::error::LoadError;
use receiver::{Answers, Receiver, Tally};

/// The room's webhook secret (at least 32 characters).
const SECRET: &str = "notify-bench-secret-0123456789abcdef";

/// A push subscription's endpoint of a browser's length (FCM's are about
/// 180 characters): the host must be one the node pushes to; nothing is
/// pushed in this mode unless the room is unpaused.
const PUSH_ENDPOINT_PREFIX: &str = "https://fcm.googleapis.com/fcm/send/";
const PUSH_ENDPOINT_CHARS: usize = 180;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StopAfter {
    /// After the requests (and the polls): memory only.
    Asked,
    /// The receiver refuses everything; stop once the outbox holds every event.
    Outbox,
    /// Until every visitor's `admitted` event is delivered.
    Delivered,
}

pub struct NotifyRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a RoomId,
    pub admin_token: &'a str,
    pub visitors: u64,
    pub contact_chars: usize,
    pub push: bool,
    pub stop_after: StopAfter,
    pub fail_first_percent: u32,
    pub admit_per_tick: u32,
    pub tick_ms: u64,
    pub polls: bool,
    pub concurrency: usize,
    pub redis_url: Option<&'a str>,
    pub server_pids: &'a [u32],
    pub duration: Duration,
    pub json: bool,
}

pub async fn run(run: NotifyRun<'_>) -> Result<(), LoadError> {
    let json = run.json;
    let receiver = Receiver::start(
        SECRET,
        Answers {
            fail_first_percent: run.fail_first_percent,
            refuse_all: run.stop_after == StopAfter::Outbox,
        },
    )?;
    let http = common::http_client(run.concurrency);
    create_room(&run, &http, &receiver).await?;
    let mut redis = common::connect_redis(run.redis_url).await?;
    let mut out = serde_json::Map::new();
    let tickets = join_and_ask(&run, &http, &mut redis, &mut out).await?;
    if run.polls {
        poll_each(&run, &http, &tickets, &mut out).await?;
    }
    if run.stop_after != StopAfter::Asked {
        follow(
            &run,
            &http,
            &receiver,
            &mut redis,
            tickets.len() as u64,
            &mut out,
        )
        .await?;
    }
    if json {
        out.insert("mode".into(), json!("notify"));
        out.insert("visitors".into(), json!(tickets.len()));
        println!("{}", Value::Object(out));
    }
    Ok(())
}

/// Step 1: the room, paused, its webhook the receiver, on every node.
async fn create_room(
    run: &NotifyRun<'_>,
    http: &reqwest::Client,
    receiver: &Receiver,
) -> Result<(), LoadError> {
    let config = RoomConfig {
        admit_per_tick: run.admit_per_tick,
        tick_ms: run.tick_ms,
        max_active: None,
        paused: true,
        abandon_after_s: 86_400,
        notify_webhook_url: Some(receiver.url()),
        ..common::room_config(run.room)
    };
    let described = format!(
        "paused, {} admitted every {} ms once unpaused, no cap; webhook {}",
        run.admit_per_tick,
        run.tick_ms,
        receiver.url()
    );
    common::create_shared_room(
        http,
        run.nodes,
        run.admin_token,
        run.room,
        &config,
        // The secret is write-only: a config does not serialize it.
        &serde_json::Map::from_iter([("notify_webhook_secret".into(), json!(SECRET))]),
        "notify",
        &described,
        run.json,
    )
    .await
}

/// Step 2: every visitor joins, then asks to be notified; Redis's memory
/// before, between and after, and the room's keys' sizes. The tickets.
async fn join_and_ask(
    run: &NotifyRun<'_>,
    http: &reqwest::Client,
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    out: &mut serde_json::Map<String, Value>,
) -> Result<Vec<String>, LoadError> {
    let json = run.json;
    let before_joins = used_memory(redis).await?;
    let (tickets, joins_s) = each_visitor(run, http, None, |_, _| Some(json!({}))).await?;
    let after_joins = used_memory(redis).await?;
    say(
        json,
        format!(
            "{} joined in {joins_s:.1} s over {} node(s)",
            tickets.len(),
            run.nodes.len()
        ),
    );
    let (_, asks_s) = each_visitor(run, http, Some(&tickets), |i, _| {
        Some(ask_body(i, run.contact_chars, run.push))
    })
    .await?;
    let after_asks = used_memory(redis).await?;
    say(
        json,
        format!("{} asked to be notified in {asks_s:.1} s", tickets.len()),
    );
    if let (Some(m0), Some(m1), Some(m2)) = (before_joins, after_joins, after_asks) {
        let n = tickets.len().max(1) as f64;
        let place = (m1 as f64 - m0 as f64) / n;
        let asked = (m2 as f64 - m1 as f64) / n;
        say(
            json,
            format!(
                "Redis used_memory: {m0} before the joins, {m1} after, {m2} after the requests: \
                 a place {place:.1} bytes, a request {asked:.1} bytes ({:.2}× a place)",
                asked / place
            ),
        );
        out.insert(
            "memory".into(),
            json!({ "before_joins": m0, "after_joins": m1, "after_asks": m2,
                "place_bytes": place, "request_bytes": asked, "request_per_place": asked / place }),
        );
    }
    if let Some(keys) = key_sizes(redis, run.room).await? {
        let text: Vec<String> = keys.iter().map(|(k, v)| format!("{k} {v}")).collect();
        say(
            json,
            format!("MEMORY USAGE of the room's keys: {}", text.join(", ")),
        );
        out.insert("keys_after_asks".into(), json!(keys));
    }

    Ok(tickets)
}

/// The floor: a status poll by every visitor, and the node CPU each took.
async fn poll_each(
    run: &NotifyRun<'_>,
    http: &reqwest::Client,
    tickets: &[String],
    out: &mut serde_json::Map<String, Value>,
) -> Result<(), LoadError> {
    let json = run.json;
    let start = common::cpu_mark(run.server_pids);
    let (_, polls_s) = each_visitor(run, http, Some(tickets), |_, _| None).await?;
    let cpu = cpu_since(start, run.server_pids);
    let per = per_op_us(cpu, polls_s, tickets.len());
    say(
        json,
        format!(
            "{} status polls in {polls_s:.2} s ({:.0}/s): node CPU {} per poll; {}",
            tickets.len(),
            tickets.len() as f64 / polls_s,
            micros(per),
            cpu.map_or(String::new(), |c| c.to_string())
        ),
    );
    out.insert(
        "polls".into(),
        json!({ "n": tickets.len(), "seconds": polls_s, "node_cpu_us_per_poll": per, "cpu": cpu }),
    );
    Ok(())
}

/// What one visitor asks for: a contact unique to them, of `chars`
/// characters, and/or a push subscription of a browser's size.
fn ask_body(i: usize, chars: usize, push: bool) -> Value {
    let mut body = serde_json::Map::new();
    if chars > 0 {
        let digits = format!("{i}");
        let pad = chars.saturating_sub(digits.len() + 1);
        body.insert(
            "contact".into(),
            json!(format!("+{}{digits}", "4".repeat(pad))),
        );
    }
    if push {
        let token = format!("{i:08}-").repeat(40);
        let endpoint = format!("{PUSH_ENDPOINT_PREFIX}{token}");
        let endpoint: String = endpoint.chars().take(PUSH_ENDPOINT_CHARS).collect();
        // A P-256 point (87 characters) and 16 bytes (22), as a browser's.
        let key =
            waitroom::words::push::VapidKey::from_scalar(&[7u8; 32]).expect("a scalar in range");
        body.insert(
            "push".into(),
            json!({ "endpoint": endpoint, "expirationTime": null,
                "keys": { "p256dh": key.public_key(), "auth": "AAECAwQFBgcICQoLDA0ODw" } }),
        );
    }
    Value::Object(body)
}

/// Each visitor's request, `concurrency` at once, visitor i on node i mod
/// n: a join (no tickets given), or, with `tickets`, a notify request
/// (`body` gives one) or a status poll (none). Answers the tickets of the
/// joins and the seconds taken; any failure stops the run.
async fn each_visitor(
    run: &NotifyRun<'_>,
    http: &reqwest::Client,
    tickets: Option<&[String]>,
    body: impl Fn(usize, &Node) -> Option<Value>,
) -> Result<(Vec<String>, f64), LoadError> {
    let started = Instant::now();
    let n = run.visitors as usize;
    let room = run.room;
    let requests = (0..n).map(|i| {
        let node = &run.nodes[i % run.nodes.len()];
        let body = body(i, node);
        let request = match (tickets, body) {
            (None, _) => http
                .post(format!("{}/api/rooms/{room}/join", node.base))
                .json(&json!({})),
            (Some(tickets), Some(body)) => http
                .post(format!("{}/api/rooms/{room}/notify", node.base))
                .bearer_auth(&tickets[i])
                .json(&body),
            (Some(tickets), None) => http
                .get(format!("{}/api/rooms/{room}/status", node.base))
                .bearer_auth(&tickets[i]),
        };
        async move {
            if tickets.is_none() {
                return common::join_ticket(request)
                    .await
                    .map_err(|e| format!("join {i}: {}", e.0));
            }
            match request.send().await {
                Ok(r) if r.status().is_success() => {
                    let _ = r.bytes().await;
                    Ok(String::new())
                }
                Ok(r) => {
                    let status = r.status();
                    Err(format!(
                        "visitor {i}: HTTP {status}: {}",
                        r.text().await.unwrap_or_default()
                    ))
                }
                Err(e) => Err(format!("visitor {i}: {}", common::error_kind(&e))),
            }
        }
    });
    let answers: Vec<Result<String, String>> = futures_util::stream::iter(requests)
        .buffered(run.concurrency)
        .collect()
        .await;
    let mut out = Vec::with_capacity(n);
    for answer in answers {
        out.push(answer.map_err(LoadError::Node)?);
    }
    Ok((out, started.elapsed().as_secs_f64()))
}

fn cpu_since(start: Option<common::CpuMark>, server_pids: &[u32]) -> Option<CpuUse> {
    Some(common::cpu_mark(server_pids)?.since(&start?))
}

/// Node CPU per operation, µs: the servers' cores × the wall ÷ n.
fn per_op_us(cpu: Option<CpuUse>, wall_s: f64, n: usize) -> Option<f64> {
    let cores = cpu?.server_cores?;
    Some(cores * wall_s * 1e6 / n.max(1) as f64)
}

fn micros(us: Option<f64>) -> String {
    us.map_or("(no --server-pid)".into(), |us| format!("{us:.1} µs"))
}

/// `INFO` as text, if Redis is named.
async fn info(
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    section: &str,
) -> Result<Option<String>, LoadError> {
    let Some(connection) = redis else {
        return Ok(None);
    };
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query_async(connection)
        .await
        .map_err(LoadError::redis(format!("redis INFO {section}")))?;
    Ok(Some(text))
}

fn info_field(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (k, v) = line.trim().split_once(':')?;
        (k == key).then(|| v.parse().ok()).flatten()
    })
}

async fn used_memory(
    redis: &mut Option<redis::aio::MultiplexedConnection>,
) -> Result<Option<u64>, LoadError> {
    Ok(info(redis, "memory")
        .await?
        .and_then(|text| info_field(&text, "used_memory"))
        .map(|m| m as u64))
}

/// Redis's own CPU so far (used_cpu_sys + used_cpu_user), seconds.
async fn redis_cpu_s(
    redis: &mut Option<redis::aio::MultiplexedConnection>,
) -> Result<Option<f64>, LoadError> {
    Ok(info(redis, "cpu").await?.map(|text| {
        info_field(&text, "used_cpu_sys").unwrap_or(0.0)
            + info_field(&text, "used_cpu_user").unwrap_or(0.0)
    }))
}

/// `MEMORY USAGE … SAMPLES 0` of every key of the room (`wr:{room}:*`).
async fn key_sizes(
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    room: &RoomId,
) -> Result<Option<BTreeMap<String, u64>>, LoadError> {
    let Some(connection) = redis else {
        return Ok(None);
    };
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("wr:{{{room}}}:*"))
        .query_async(connection)
        .await
        .map_err(LoadError::redis("redis KEYS"))?;
    let mut sizes = BTreeMap::new();
    for key in keys {
        let size: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(connection)
            .await
            .map_err(LoadError::redis("redis MEMORY USAGE"))?;
        let short = key
            .strip_prefix(&format!("wr:{{{room}}}:"))
            .unwrap_or(&key)
            .to_string();
        sizes.insert(short, size.unwrap_or(0));
    }
    Ok(Some(sizes))
}

async fn xlen(
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    room: &RoomId,
) -> Result<Option<u64>, LoadError> {
    let Some(connection) = redis else {
        return Ok(None);
    };
    let n: u64 = redis::cmd("XLEN")
        .arg(format!("wr:{{{room}}}:outbox"))
        .query_async(connection)
        .await
        .map_err(LoadError::redis("redis XLEN"))?;
    Ok(Some(n))
}

/// Each node's `waitroom_notifications_total` for the room, by outcome.
async fn node_counts(nodes: &[Node], room: &RoomId) -> Vec<BTreeMap<String, u64>> {
    let mut all = Vec::new();
    for node in nodes {
        let text = common::metrics_text(node).await.unwrap_or_default();
        let mut counts = BTreeMap::new();
        let room_label = format!("room=\"{room}\"");
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("waitroom_notifications_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.split_once("} ") else {
                continue;
            };
            if !labels.contains(&room_label) {
                continue;
            }
            let outcome = labels
                .split(',')
                .find_map(|l| l.strip_prefix("outcome=\""))
                .map(|o| o.trim_end_matches('"').to_string())
                .unwrap_or_default();
            *counts.entry(outcome).or_default() +=
                value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        }
        all.push(counts);
    }
    all
}

/// What the counters said before the unpause.
struct Before {
    counts: Vec<BTreeMap<String, u64>>,
    tally: Tally,
    redis_cpu_s: Option<f64>,
    cpu: Option<common::CpuMark>,
}

/// Step 3: unpauses the room and follows its events.
async fn follow(
    run: &NotifyRun<'_>,
    http: &reqwest::Client,
    receiver: &Receiver,
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    n: u64,
    out: &mut serde_json::Map<String, Value>,
) -> Result<(), LoadError> {
    let before = Before {
        counts: node_counts(run.nodes, run.room).await,
        tally: receiver.tally(),
        redis_cpu_s: redis_cpu_s(redis).await?,
        cpu: common::cpu_mark(run.server_pids),
    };
    let unpaused = Instant::now();
    unpause(run, http).await?;
    say(run.json, format!("unpaused at {}", common::utc_now()));
    let done = wait_for_events(run, receiver, redis, n, &before.tally, unpaused).await?;
    if run.stop_after == StopAfter::Outbox {
        return report_outbox(run, receiver, redis, unpaused, done, out).await;
    }
    report_delivery(run, receiver, redis, &before, unpaused, (done, n), out).await
}

async fn unpause(run: &NotifyRun<'_>, http: &reqwest::Client) -> Result<(), LoadError> {
    let response = http
        .patch(format!(
            "{}/api/admin/rooms/{}",
            run.nodes[0].base, run.room
        ))
        .bearer_auth(run.admin_token)
        .json(&json!({ "paused": false }))
        .send()
        .await
        .map_err(|e| LoadError::Node(format!("unpausing: {}", common::error_kind(&e))))?;
    if !response.status().is_success() {
        return Err(LoadError::Node(format!(
            "unpausing answered {}",
            response.status()
        )));
    }
    Ok(())
}

/// Until every visitor's `admitted` is delivered (or, for the outbox's
/// cost, written), or the run's duration: whether it came to that.
async fn wait_for_events(
    run: &NotifyRun<'_>,
    receiver: &Receiver,
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    n: u64,
    tally_before: &Tally,
    unpaused: Instant,
) -> Result<bool, LoadError> {
    let json = run.json;
    let deadline = unpaused + run.duration;
    let mut last_said = Instant::now();
    let done = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let tally = receiver.tally();
        let done = match run.stop_after {
            StopAfter::Outbox => {
                let len = xlen(redis, run.room).await?.unwrap_or(0);
                len >= n + tally_before.delivered()
            }
            _ => tally.delivered_of("admitted") >= n,
        };
        if done || Instant::now() >= deadline {
            break done;
        }
        if last_said.elapsed() >= Duration::from_secs(5) {
            last_said = Instant::now();
            say(
                json,
                format!(
                    "{:.0} s: {} delivered ({} admitted), {} requests",
                    unpaused.elapsed().as_secs_f64(),
                    tally.delivered(),
                    tally.delivered_of("admitted"),
                    tally.requests
                ),
            );
        }
    };
    Ok(done)
}

/// The outbox's cost per pending event, the receiver refusing them all.
async fn report_outbox(
    run: &NotifyRun<'_>,
    receiver: &Receiver,
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    unpaused: Instant,
    done: bool,
    out: &mut serde_json::Map<String, Value>,
) -> Result<(), LoadError> {
    let json = run.json;
    let wall_s = unpaused.elapsed().as_secs_f64();
    let tally = receiver.tally();
    let keys = key_sizes(redis, run.room).await?;
    let len = xlen(redis, run.room).await?.unwrap_or(0);
    let outbox = keys
        .as_ref()
        .and_then(|k| k.get("outbox").copied())
        .unwrap_or(0);
    say(
        json,
        format!(
            "outbox: {len} entries after {wall_s:.1} s ({}): MEMORY USAGE {outbox} bytes, \
             {:.1} bytes an entry; the receiver refused {} attempts",
            if done { "every event" } else { "timed out" },
            outbox as f64 / len.max(1) as f64,
            tally.failed_on_purpose
        ),
    );
    out.insert(
        "outbox".into(),
        json!({ "entries": len, "bytes": outbox, "bytes_per_entry": outbox as f64 / len.max(1) as f64,
            "keys": keys, "done": done }),
    );
    Ok(())
}

/// The delivery: how fast, how many retried, how the nodes shared it and
/// what it cost them and Redis.
async fn report_delivery(
    run: &NotifyRun<'_>,
    receiver: &Receiver,
    redis: &mut Option<redis::aio::MultiplexedConnection>,
    before: &Before,
    unpaused: Instant,
    (done, n): (bool, u64),
    out: &mut serde_json::Map<String, Value>,
) -> Result<(), LoadError> {
    let json = run.json;
    let cpu_end = common::cpu_mark(run.server_pids);
    let wall_s = unpaused.elapsed().as_secs_f64();
    let redis_after = redis_cpu_s(redis).await?;
    let tally = receiver.tally();
    let tally_before = &before.tally;
    let counts_after = node_counts(run.nodes, run.room).await;
    let cpu = before.cpu.clone().zip(cpu_end).map(|(s, e)| e.since(&s));
    let redis_cpu = before.redis_cpu_s.zip(redis_after).map(|(b, a)| a - b);
    let counts_before = &before.counts;
    let new = |kind: &str| tally.delivered_of(kind) - tally_before.delivered_of(kind);
    let last_s = tally
        .last_new
        .map(|at| {
            (receiver.started() + at)
                .saturating_duration_since(unpaused)
                .as_secs_f64()
        })
        .unwrap_or(wall_s);
    let delivered = tally.delivered() - tally_before.delivered();
    let mut per_node = Vec::new();
    for (before, after) in counts_before.iter().zip(&counts_after) {
        let diff: BTreeMap<String, u64> = after
            .iter()
            .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
            .collect();
        per_node.push(diff);
    }
    let node_sum = |outcome: &str| -> u64 {
        per_node
            .iter()
            .map(|c| c.get(outcome).copied().unwrap_or(0))
            .sum()
    };
    let attempts = tally.requests - tally_before.requests;
    let node_us = per_op_us(cpu, wall_s, attempts as usize);
    say(
        json,
        format!(
            "{}: {} admitted of {n} delivered (distinct ids), {} near; the last {last_s:.2} s after \
             the unpause: {:.0} events/s",
            if done { "done" } else { "TIMED OUT" },
            new("admitted"),
            new("near"),
            delivered as f64 / last_s
        ),
    );
    say(
        json,
        format!(
            "receiver: {attempts} requests, {} answered 500 on purpose, {} duplicates (an id \
             delivered again), {} bad signatures; nodes' counters: {} delivered, {} retried, {} given up",
            tally.failed_on_purpose - tally_before.failed_on_purpose,
            tally.duplicates - tally_before.duplicates,
            tally.bad_signature - tally_before.bad_signature,
            node_sum("delivered"),
            node_sum("retried"),
            node_sum("given_up")
        ),
    );
    for (node, counts) in run.nodes.iter().zip(&per_node) {
        say(json, format!("{}: {counts:?}", node.base));
    }
    say(
        json,
        format!(
            "node CPU {} per request to the receiver ({attempts}); Redis CPU {} over {wall_s:.2} s \
             ({}); {}",
            micros(node_us),
            redis_cpu.map_or("-".into(), |c| format!("{c:.2} s")),
            redis_cpu.map_or("-".into(), |c| format!(
                "{:.1} µs per event",
                c * 1e6 / delivered.max(1) as f64
            )),
            cpu.map_or(String::new(), |c| c.to_string())
        ),
    );
    out.insert(
        "delivered".into(),
        json!({ "done": done, "admitted": new("admitted"), "near": new("near"), "distinct": delivered,
            "last_event_s": last_s, "events_per_s": delivered as f64 / last_s, "wall_s": wall_s,
            "requests": attempts, "failed_on_purpose": tally.failed_on_purpose - tally_before.failed_on_purpose,
            "duplicates": tally.duplicates - tally_before.duplicates,
            "bad_signature": tally.bad_signature - tally_before.bad_signature,
            "per_node": per_node, "node_cpu_us_per_request": node_us, "redis_cpu_s": redis_cpu,
            "cpu": cpu, "receiver": tally }),
    );
    Ok(())
}
