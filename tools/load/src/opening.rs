//! `opening` mode: a scheduled room's opening with a large pre-queue.
//!
//! Creates a room that opens in an hour, joins V visitors into its
//! pre-queue (the first S of them hold a WebSocket), then moves the opening
//! to a few seconds from now and measures, around it:
//! - the longest single store operation: on the memory store the node's
//!   `waitroom_memory_store_op_seconds` histogram (how long an operation
//!   holds its room's lock), on Redis its `SLOWLOG` (every command or script
//!   over 1 ms, with its duration inside Redis);
//! - the latency of joins sent at a steady rate throughout;
//! - when each socket first got its drawn position, against `opens_at`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use waitroom::words::clock::{Millis, Moment, rfc3339_ms};
use waitroom::words::status::State;
use waitroom::words::{RoomConfig, RoomId};

use super::common::{self, ErrorKinds, Latency, Node, create_room, epoch_micros, say};
use super::error::LoadError;
use super::sockets::{self, SocketSpec, Visitors};

/// The longest the pre-queue's joins may take.
const JOIN_PHASE_LIMIT: Duration = Duration::from_secs(600);
/// How far ahead the room's first `opens_at` lies: after every join.
const FIRST_OPENING: Duration = Duration::from_secs(3_600);
/// Redis logs every command slower than this (µs) while the tool measures.
const SLOWLOG_THRESHOLD_US: u64 = 1_000;
/// Slow commands Redis keeps while the tool measures.
const SLOWLOG_LENGTH: u64 = 100_000;
/// How often Redis's run-queue wait is sampled.
const RUN_QUEUE_SAMPLE: Duration = Duration::from_millis(50);
/// Joins before and after `opens_at` reported as "around the opening".
const AROUND_OPENING: Duration = Duration::from_secs(2);

pub struct OpeningRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a RoomId,
    pub admin_token: &'a str,
    pub visitors: u64,
    pub sockets: u64,
    pub source_ips: u8,
    pub admit_per_tick: u32,
    pub join_concurrency: usize,
    pub open_concurrency: usize,
    /// Seconds from moving the opening to the opening itself.
    pub lead: Duration,
    /// Seconds measured after the opening.
    pub after: Duration,
    /// Joins per second sent throughout the window (0: none).
    pub probe_rate: f64,
    pub redis_url: Option<&'a str>,
    pub json: bool,
}

/// What one socket saw.
#[derive(Debug, Default)]
struct SocketOutcome {
    open_error: Option<String>,
    /// When it was first told where it stands after the draw (epoch µs).
    told: Option<(u64, Told)>,
    /// It got a status without a position after it had one.
    lost_position: bool,
    /// Why it ended before the run stopped it, if it did.
    ended: Option<String>,
}

/// Where a socket first stood after the draw.
#[derive(Debug, Clone, Copy)]
enum Told {
    /// Waiting at this position, counted against the line of this tick.
    Position { position: u64, tick_at_ms: Millis },
    /// Admitted by the tick that opened the room, before any position.
    Admitted,
}

/// One join sent during the window.
#[derive(Debug, Clone, Copy)]
struct Probe {
    sent_us: u64,
    took_us: u64,
    ok: bool,
}

/// One of Redis's slow log entries.
#[derive(Debug, Clone, Serialize)]
struct SlowCommand {
    at_s: u64,
    duration_us: u64,
    command: String,
}

pub async fn run(run: OpeningRun<'_>) -> Result<(), LoadError> {
    let mut redis = common::connect_redis(run.redis_url).await?;
    let http = common::http_client(1);
    create_scheduled_room(&http, &run).await?;
    let (tickets, prequeue) = prequeue(&http, &run).await?;
    let watchers = open_watchers(&run, tickets).await;
    let window = measure_window(&http, &run, redis.as_mut()).await?;
    let _ = watchers.stop.send(true);
    let (outcomes, socket_errors) = collect_outcomes(watchers.tasks).await;
    let sockets = SocketTally::of(&outcomes, socket_errors, window.opens_at_ms * 1000);
    report(&run, &prequeue, watchers.opened, &sockets, &window);
    Ok(())
}

/// Creates the room on every node, opening in an hour so that every join
/// until then is pre-queued, and checks it has not opened already.
async fn create_scheduled_room(
    http: &reqwest::Client,
    run: &OpeningRun<'_>,
) -> Result<(), LoadError> {
    let (nodes, room) = (run.nodes, run.room);
    let first_opening = Moment(epoch_micros() / 1000 + FIRST_OPENING.as_millis() as Millis);
    let config = RoomConfig {
        admit_per_tick: run.admit_per_tick,
        tick_ms: 1_000,
        max_active: None,
        pass_ttl_s: 600,
        abandon_after_s: 86_400,
        opens_at: Some(first_opening),
        ..common::room_config(room)
    };
    for node in nodes {
        // On a shared Redis the first node creates it; the others find it.
        create_room(http, node, run.admin_token, room, &config).await?;
    }
    let draw = read_draw(http, &nodes[0], room).await?;
    if draw["seed"].is_string() {
        return Err(LoadError::Usage(format!(
            "room {room} has opened already: give a new --room"
        )));
    }
    say(
        run.json,
        format!(
            "room {room}: pre-queue of {} so far, commitment {}",
            draw["entrants"], draw["commitment"]
        ),
    );
    Ok(())
}

/// How the pre-queue's joins went.
struct Prequeue {
    joined: u64,
    errors: ErrorKinds,
    seconds: f64,
}

/// Joins every visitor into the pre-queue; the first `--sockets` of them
/// keep their tickets.
async fn prequeue(
    http: &reqwest::Client,
    run: &OpeningRun<'_>,
) -> Result<(Vec<Option<String>>, Prequeue), LoadError> {
    let joined_at = Instant::now();
    let (tickets, errors) = sockets::join_visitors(
        run.nodes,
        run.room,
        Visitors {
            count: run.visitors,
            keep: run.sockets,
            concurrency: run.join_concurrency,
            limit: JOIN_PHASE_LIMIT,
        },
    )
    .await;
    let seconds = joined_at.elapsed().as_secs_f64();
    let joined = run.visitors - errors.values().sum::<u64>();
    let entrants = read_draw(http, &run.nodes[0], run.room).await?["entrants"]
        .as_u64()
        .unwrap_or(0);
    say(
        run.json,
        format!(
            "joined {joined} of {} visitors in {seconds:.1} s ({:.0}/s); the pre-queue holds {entrants}",
            run.visitors,
            joined as f64 / seconds.max(0.001)
        ),
    );
    for (kind, n) in &errors {
        say(run.json, format!("  {n} × {kind}"));
    }
    let prequeue = Prequeue {
        joined,
        errors,
        seconds,
    };
    Ok((tickets, prequeue))
}

/// The sockets watching for their drawn place, and what stops them.
struct Watchers {
    tasks: Vec<JoinHandle<SocketOutcome>>,
    opened: u64,
    stop: watch::Sender<bool>,
}

/// Opens a socket for each kept ticket, each watching for its drawn place.
async fn open_watchers(run: &OpeningRun<'_>, tickets: Vec<Option<String>>) -> Watchers {
    let (nodes, room) = (run.nodes, run.room);
    if run.sockets >= sockets::LARGE_RUN {
        sockets::wait_for_time_waits(run.json).await;
    }
    let (stop, stop_rx) = watch::channel(false);
    let (opened_tx, mut opened_rx) = mpsc::unbounded_channel::<bool>();
    let permits = Arc::new(Semaphore::new(run.open_concurrency));
    let open_started = Instant::now();
    let mut tasks = Vec::new();
    for (i, ticket) in tickets.into_iter().enumerate() {
        let Some(ticket) = ticket else { continue };
        let node_index = i % nodes.len();
        let node = &nodes[node_index];
        let spec = SocketSpec {
            node: node_index,
            addr: node.addr,
            source: sockets::source_address(node.addr, (i / nodes.len()) % run.source_ips as usize),
            url: format!(
                "ws://{}/api/rooms/{room}/ws?ticket={}",
                node.authority,
                common::query_escape(&ticket)
            ),
        };
        tasks.push(tokio::spawn(watch_position(
            spec,
            permits.clone(),
            opened_tx.clone(),
            stop_rx.clone(),
        )));
    }
    drop(opened_tx);
    let (opened, open_failed) = sockets::count_opened(&mut opened_rx, tasks.len()).await;
    say(
        run.json,
        format!(
            "opened {opened} sockets in {:.1} s ({open_failed} failed)",
            open_started.elapsed().as_secs_f64()
        ),
    );
    Watchers {
        tasks,
        opened,
        stop,
    }
}

/// What the window around the opening measured.
struct Window {
    opens_at_ms: u64,
    probes: Vec<Probe>,
    op_buckets: BTreeMap<String, Buckets>,
    tick_buckets: BTreeMap<String, Buckets>,
    run_queue: Option<RunQueue>,
    slow: Option<Vec<SlowCommand>>,
    draw: serde_json::Value,
}

/// The window: slow log and histograms from here, joins at a steady rate
/// throughout, the opening `--lead` from now, until `--after` past it.
async fn measure_window(
    http: &reqwest::Client,
    run: &OpeningRun<'_>,
    mut redis: Option<&mut redis::aio::MultiplexedConnection>,
) -> Result<Window, LoadError> {
    let (nodes, room) = (run.nodes, run.room);
    let (sampler_stop_tx, sampler_stop_rx) = watch::channel(false);
    let mut sampler = None;
    if let Some(redis) = redis.as_deref_mut() {
        reset_slowlog(redis).await?;
        // Redis shares this machine's cores: a command is slow in its slow
        // log also while Redis waits for a CPU in the middle of it.
        sampler = redis_pid(redis)
            .await
            .map(|pid| tokio::spawn(sample_run_queue(pid, sampler_stop_rx)));
    }
    let metrics_before = read_metrics(nodes).await;
    let (probe_stop_tx, probe_stop_rx) = watch::channel(false);
    let prober = (run.probe_rate > 0.0).then(|| {
        tokio::spawn(probe_joins(
            nodes.to_vec(),
            room.clone(),
            run.probe_rate,
            probe_stop_rx,
        ))
    });
    let opens_at_ms = move_opening(http, run).await?;
    let window_end_us = (opens_at_ms + run.after.as_millis() as u64) * 1000;
    tokio::time::sleep(Duration::from_micros(
        window_end_us.saturating_sub(epoch_micros()),
    ))
    .await;
    let _ = probe_stop_tx.send(true);
    let probes = match prober {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let metrics_after = read_metrics(nodes).await;
    let _ = sampler_stop_tx.send(true);
    let run_queue = match sampler {
        Some(task) => task
            .await
            .ok()
            .and_then(|samples| RunQueue::of(&samples, opens_at_ms)),
        None => None,
    };
    let slow = match redis {
        Some(redis) => Some(read_slowlog(redis).await?),
        None => None,
    };
    Ok(Window {
        opens_at_ms,
        probes,
        op_buckets: bucket_delta(
            &metrics_before,
            &metrics_after,
            "waitroom_memory_store_op_seconds",
        ),
        tick_buckets: bucket_delta(&metrics_before, &metrics_after, "waitroom_tick_seconds"),
        run_queue,
        slow,
        draw: read_draw(http, &nodes[0], room).await?,
    })
}

/// Moves the room's opening to `--lead` from now (on a whole second);
/// returns it in epoch ms.
async fn move_opening(http: &reqwest::Client, run: &OpeningRun<'_>) -> Result<u64, LoadError> {
    let opens_at_ms = (epoch_micros() / 1000 + run.lead.as_millis() as u64).div_ceil(1000) * 1000;
    let patched = http
        .patch(format!(
            "{}/api/admin/rooms/{}",
            run.nodes[0].base, run.room
        ))
        .bearer_auth(run.admin_token)
        .json(&json!({ "opens_at": Moment(opens_at_ms) }))
        .send()
        .await
        .map_err(|e| LoadError::Node(format!("moving the opening: {}", common::error_kind(&e))))?;
    if !patched.status().is_success() {
        let status = patched.status();
        let text = patched.text().await.unwrap_or_default();
        return Err(LoadError::Node(format!(
            "moving the opening answered {status}: {text}"
        )));
    }
    say(
        run.json,
        format!(
            "the room opens at {} ({opens_at_ms} ms); measuring until {} s after",
            rfc3339_ms(opens_at_ms),
            run.after.as_secs()
        ),
    );
    Ok(opens_at_ms)
}

/// Every socket's outcome, waiting at most 30 s for them to stop.
async fn collect_outcomes(
    tasks: Vec<JoinHandle<SocketOutcome>>,
) -> (Vec<SocketOutcome>, ErrorKinds) {
    let mut outcomes = Vec::with_capacity(tasks.len());
    let mut socket_errors = ErrorKinds::new();
    let collect_deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for task in tasks {
        match tokio::time::timeout_at(collect_deadline, task).await {
            Ok(Ok(outcome)) => outcomes.push(outcome),
            Ok(Err(error)) => common::count(&mut socket_errors, format!("task failed: {error}")),
            Err(_) => common::count(&mut socket_errors, "task did not stop"),
        }
    }
    (outcomes, socket_errors)
}

/// What the sockets saw, counted.
struct SocketTally {
    errors: ErrorKinds,
    positioned: u64,
    positioning: Option<Latency>,
    positioned_early: u64,
    admitted_first: u64,
    lost: u64,
    duplicates: u64,
}

impl SocketTally {
    fn of(outcomes: &[SocketOutcome], mut errors: ErrorKinds, opens_at_us: u64) -> Self {
        // Positions read against the same tick's line are distinct; the
        // reads take long enough that later ones may follow a tick, so they
        // are grouped by it.
        let mut positions: BTreeMap<(Millis, u64), u64> = BTreeMap::new();
        let mut positioned_after_us = Vec::new();
        let (mut positioned_early, mut admitted_first, mut lost) = (0u64, 0u64, 0u64);
        for outcome in outcomes {
            if let Some(error) = &outcome.open_error {
                common::count(&mut errors, format!("not opened: {error}"));
            }
            if let Some(why) = &outcome.ended {
                common::count(&mut errors, format!("closed early: {why}"));
            }
            if let Some((at_us, told)) = outcome.told {
                match told {
                    Told::Position {
                        position,
                        tick_at_ms,
                    } => *positions.entry((tick_at_ms, position)).or_default() += 1,
                    Told::Admitted => admitted_first += 1,
                }
                match at_us.checked_sub(opens_at_us) {
                    Some(after_us) => positioned_after_us.push(after_us),
                    None => positioned_early += 1,
                }
            }
            lost += outcome.lost_position as u64;
        }
        Self {
            errors,
            positioned: positioned_after_us.len() as u64,
            positioning: Latency::from_micros(positioned_after_us),
            positioned_early,
            admitted_first,
            lost,
            duplicates: positions.values().map(|n| n - 1).sum(),
        }
    }
}

/// The joins sent during the window, summarised.
struct ProbeFigures {
    failed: usize,
    latency: Option<Latency>,
    around: Option<Latency>,
}

impl ProbeFigures {
    fn of(probes: &[Probe], opens_at_us: u64) -> Self {
        let around = |p: &&Probe| {
            p.sent_us + AROUND_OPENING.as_micros() as u64 >= opens_at_us
                && p.sent_us <= opens_at_us + AROUND_OPENING.as_micros() as u64
        };
        Self {
            failed: probes.iter().filter(|p| !p.ok).count(),
            latency: Latency::from_micros(probes.iter().map(|p| p.took_us).collect()),
            around: Latency::from_micros(probes.iter().filter(around).map(|p| p.took_us).collect()),
        }
    }
}

fn report(
    run: &OpeningRun<'_>,
    prequeue: &Prequeue,
    opened: u64,
    sockets: &SocketTally,
    window: &Window,
) {
    let json = run.json;
    report_sockets(json, opened, sockets, &window.draw);
    let probes = ProbeFigures::of(&window.probes, window.opens_at_ms * 1000);
    report_probes(json, window.probes.len(), &probes);
    report_store(json, window);
    if json {
        print_summary(run, prequeue, opened, sockets, &probes, window);
    }
}

fn report_sockets(json: bool, opened: u64, sockets: &SocketTally, draw: &serde_json::Value) {
    say(
        json,
        format!(
            "draw: {} entrants, seed {}",
            draw["entrants"],
            if draw["seed"].is_string() {
                "revealed"
            } else {
                "NOT revealed"
            }
        ),
    );
    let SocketTally {
        positioned,
        admitted_first,
        duplicates,
        positioned_early,
        lost,
        ..
    } = sockets;
    say(
        json,
        format!(
            "sockets: {opened} open, {positioned} told where they stand after opens_at \
             ({admitted_first} of them admitted at once, {duplicates} positions told twice against one tick's line, \
             {positioned_early} told before opens_at, {lost} lost a position again)"
        ),
    );
    if let Some(positioning) = &sockets.positioning {
        say(
            json,
            format!("  opens_at → drawn place on the socket: {positioning}"),
        );
    }
    for (kind, n) in &sockets.errors {
        say(json, format!("  {n} × {kind}"));
    }
}

fn report_probes(json: bool, sent: usize, probes: &ProbeFigures) {
    if let Some(latency) = &probes.latency {
        say(
            json,
            format!(
                "joins during the window: {sent} sent, {} failed; {latency}",
                probes.failed
            ),
        );
    }
    if let Some(latency) = &probes.around {
        say(
            json,
            format!(
                "  sent within {} s of opens_at: {} joins, {latency}",
                AROUND_OPENING.as_secs(),
                latency.count
            ),
        );
    }
}

/// The store's side of the window: the nodes' histograms, Redis's slow log
/// and its thread's waits for a CPU.
fn report_store(json: bool, window: &Window) {
    for (what, buckets) in [
        ("memory-store operations", &window.op_buckets),
        ("ticks (the node's call to the store)", &window.tick_buckets),
    ] {
        let Some(line) = buckets.get("").and_then(|all| describe_buckets(all)) else {
            continue;
        };
        say(json, format!("{what} during the window: {line}"));
        for (labels, by_label) in buckets.iter().filter(|(labels, _)| !labels.is_empty()) {
            if let Some(line) = describe_buckets(by_label) {
                say(json, format!("  {labels}: {line}"));
            }
        }
    }
    if let Some(slow) = &window.slow {
        let longest = slow.iter().max_by_key(|s| s.duration_us);
        say(
            json,
            format!(
                "redis: {} commands over {} ms during the window, {} over 10 ms; longest {}",
                slow.len(),
                SLOWLOG_THRESHOLD_US / 1000,
                slow.iter().filter(|s| s.duration_us > 10_000).count(),
                longest.map_or("none".into(), |s| format!(
                    "{:.2} ms ({}) at {}",
                    s.duration_us as f64 / 1000.0,
                    s.command,
                    rfc3339_ms(s.at_s * 1000)
                ))
            ),
        );
    }
    if let Some(run_queue) = &window.run_queue {
        say(
            json,
            format!(
                "redis's thread over the window: ran {:.0} ms, waited {:.0} ms for a CPU; the longest wait in one {} ms sample {:.1} ms, at {:+} ms from opens_at",
                run_queue.ran_ms,
                run_queue.waited_ms,
                RUN_QUEUE_SAMPLE.as_millis(),
                run_queue.longest_wait_ms,
                run_queue.longest_wait_at_ms
            ),
        );
    }
}

/// The one-line JSON summary (`--json`).
fn print_summary(
    run: &OpeningRun<'_>,
    prequeue: &Prequeue,
    opened: u64,
    sockets: &SocketTally,
    probes: &ProbeFigures,
    window: &Window,
) {
    let opens_at_us = window.opens_at_ms * 1000;
    // The slowest joins, sent at ms from opens_at: when the wait was.
    let mut slowest_probes: Vec<(i64, f64)> = window
        .probes
        .iter()
        .map(|p| {
            (
                (p.sent_us as i64 - opens_at_us as i64) / 1000,
                p.took_us as f64 / 1000.0,
            )
        })
        .collect();
    slowest_probes.sort_by(|a, b| b.1.total_cmp(&a.1));
    slowest_probes.truncate(20);
    let slow = &window.slow;
    let mut slowest = slow.clone().unwrap_or_default();
    slowest.sort_by_key(|s| std::cmp::Reverse(s.duration_us));
    slowest.truncate(20);
    let summary = json!({
        "mode": "opening",
        "nodes": run.nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
        "room": run.room,
        "visitors": run.visitors,
        "joined": prequeue.joined,
        "join_errors": prequeue.errors,
        "join_s": prequeue.seconds,
        "entrants": window.draw["entrants"],
        "seed_revealed": window.draw["seed"].is_string(),
        "opens_at_ms": window.opens_at_ms,
        "sockets": run.sockets,
        "opened": opened,
        "positioned": sockets.positioned,
        "admitted_first": sockets.admitted_first,
        "duplicate_positions": sockets.duplicates,
        "positioned_before_opening": sockets.positioned_early,
        "lost_position": sockets.lost,
        "socket_errors": sockets.errors,
        "positioning": sockets.positioning,
        "probe_joins": window.probes.len(),
        "probe_failed": probes.failed,
        "probe_latency": probes.latency,
        "probe_latency_around_opening": probes.around,
        "probe_slowest_sent_ms_from_opening_and_took_ms": slowest_probes,
        "memory_store_op_buckets": window.op_buckets,
        "tick_buckets": window.tick_buckets,
        "redis_slow_commands": slow.as_ref().map(Vec::len),
        "redis_run_queue": window.run_queue,
        "redis_slowest": slow.as_ref().map(|_| slowest),
    });
    println!("{summary}");
}

async fn read_draw(
    http: &reqwest::Client,
    node: &Node,
    room: &RoomId,
) -> Result<serde_json::Value, LoadError> {
    let response = http
        .get(format!("{}/api/rooms/{room}/draw", node.base))
        .send()
        .await
        .map_err(|e| LoadError::Node(format!("reading the draw: {}", common::error_kind(&e))))?;
    if response.status() != 200 {
        return Err(LoadError::Node(format!(
            "reading the draw answered {}",
            response.status()
        )));
    }
    response
        .json()
        .await
        .map_err(|e| LoadError::Node(format!("reading the draw: {}", common::error_kind(&e))))
}

/// Opens one socket, then notes when it is first told where it stands.
async fn watch_position(
    spec: SocketSpec,
    permits: Arc<Semaphore>,
    opened: mpsc::UnboundedSender<bool>,
    mut stop: watch::Receiver<bool>,
) -> SocketOutcome {
    let mut outcome = SocketOutcome::default();
    let (open, _) = sockets::open_counted(&spec, sockets::client_config(), &permits, &opened).await;
    let mut ws = match open {
        Ok(ws) => ws,
        Err(error) => {
            outcome.open_error = Some(error.0);
            return outcome;
        }
    };
    let (first, lost) = (&mut outcome.told, &mut outcome.lost_position);
    outcome.ended = sockets::read_statuses(&mut ws, &mut stop, false, |status, at_us| {
        let told = match (status.state, status.position) {
            (State::Waiting, Some(position)) => Some(Told::Position {
                position,
                tick_at_ms: status.tick_at_ms.unwrap_or(0),
            }),
            (State::Waiting, None) => {
                // Still pre-queued, or (once told) a position lost.
                *lost |= first.is_some();
                None
            }
            _ => Some(Told::Admitted),
        };
        if first.is_none() {
            *first = told.map(|told| (at_us, told));
        }
    })
    .await;
    outcome
}

/// New visitors joining at `rate` per second, round-robin over the nodes,
/// each join as the page sends it, until told to stop.
async fn probe_joins(
    nodes: Vec<Node>,
    room: RoomId,
    rate: f64,
    mut stop: watch::Receiver<bool>,
) -> Vec<Probe> {
    let http = common::http_client(64);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Probe>();
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0usize;
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = interval.tick() => {
                let url = format!("{}/api/rooms/{room}/join", nodes[sent % nodes.len()].base);
                sent += 1;
                let (http, done) = (http.clone(), done_tx.clone());
                tokio::spawn(async move {
                    let sent_us = epoch_micros();
                    let started = Instant::now();
                    let ok = http
                        .post(url)
                        .header("content-type", "application/json")
                        .body("{}")
                        .send()
                        .await
                        .is_ok_and(|r| r.status() == 200);
                    let _ = done.send(Probe {
                        sent_us,
                        took_us: started.elapsed().as_micros() as u64,
                        ok,
                    });
                });
            }
        }
    }
    drop(done_tx);
    let mut probes = Vec::with_capacity(sent);
    while let Some(probe) = done_rx.recv().await {
        probes.push(probe);
    }
    probes
}

/// Each node's `/metrics` text (empty where it could not be read).
async fn read_metrics(nodes: &[Node]) -> Vec<String> {
    let mut texts = Vec::new();
    for node in nodes {
        texts.push(common::metrics_text(node).await.unwrap_or_default());
    }
    texts
}

/// Per-bucket counts of a histogram: (upper bound in seconds, count), only
/// the buckets that got any, in order.
type Buckets = Vec<(f64, u64)>;

/// How many observations of histogram `name` fell in each bucket between
/// two scrapes of every node, for each set of its other labels (`op="join"`)
/// and over all of them (`""`).
fn bucket_delta(before: &[String], after: &[String], name: &str) -> BTreeMap<String, Buckets> {
    let mut cumulative: BTreeMap<String, BTreeMap<u64, (f64, i128)>> = BTreeMap::new();
    for (texts, sign) in [(after, 1i128), (before, -1i128)] {
        for text in texts {
            for (labels, le, count) in common::histogram_buckets(text, name) {
                let keys = match labels.is_empty() {
                    true => vec![labels],
                    false => vec![labels, String::new()],
                };
                for key in keys {
                    let slot = cumulative
                        .entry(key)
                        .or_default()
                        .entry(le.to_bits())
                        .or_insert((le, 0));
                    slot.1 += sign * count as i128;
                }
            }
        }
    }
    cumulative
        .into_iter()
        .map(|(labels, by_bound)| {
            // Cumulative counts to per-bucket counts, in order of the bound.
            let mut bounds: Vec<(f64, i128)> = by_bound.into_values().collect();
            bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut previous = 0i128;
            let mut buckets = Vec::new();
            for (le, count) in bounds {
                let own = count - previous;
                previous = count;
                if own > 0 {
                    buckets.push((le, own as u64));
                }
            }
            (labels, buckets)
        })
        .filter(|(_, buckets)| !buckets.is_empty())
        .collect()
}

/// "N observations; the longest ≤ X ms; M over 1 ms".
fn describe_buckets(buckets: &[(f64, u64)]) -> Option<String> {
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    let longest = buckets.last()?.0;
    let over_1ms: u64 = buckets.iter().filter(|b| b.0 > 0.001).map(|b| b.1).sum();
    Some(format!(
        "{total} observed, the longest {}; {over_1ms} over 1 ms",
        if longest.is_finite() {
            format!("≤ {} ms", longest * 1000.0)
        } else {
            "over the largest bucket".into()
        }
    ))
}

/// Redis's process id, from its INFO (it runs on this machine: loopback).
async fn redis_pid(redis: &mut redis::aio::MultiplexedConnection) -> Option<u32> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(redis)
        .await
        .ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

/// One sample of a thread's `/proc/PID/schedstat`: when (epoch µs), its
/// time on a CPU and its time waiting for one (ns, since it started).
#[derive(Debug, Clone, Copy)]
struct SchedSample {
    at_us: u64,
    ran_ns: u64,
    waited_ns: u64,
}

/// Samples `pid`'s main thread until told to stop (Linux; none elsewhere).
async fn sample_run_queue(pid: u32, mut stop: watch::Receiver<bool>) -> Vec<SchedSample> {
    let path = format!("/proc/{pid}/schedstat");
    let mut samples = Vec::new();
    let mut every = tokio::time::interval(RUN_QUEUE_SAMPLE);
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = every.tick() => {
                let Ok(text) = std::fs::read_to_string(&path) else { break };
                let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
                let (Some(Some(ran_ns)), Some(Some(waited_ns))) = (fields.next(), fields.next()) else {
                    break;
                };
                samples.push(SchedSample { at_us: epoch_micros(), ran_ns, waited_ns });
            }
        }
    }
    samples
}

/// What a thread's samples say about the window.
#[derive(Debug, Clone, Copy, Serialize)]
struct RunQueue {
    ran_ms: f64,
    waited_ms: f64,
    /// The most it waited within one sample, and that sample's end in ms from `opens_at`.
    longest_wait_ms: f64,
    longest_wait_at_ms: i64,
}

impl RunQueue {
    fn of(samples: &[SchedSample], opens_at_ms: u64) -> Option<Self> {
        let (first, last) = (samples.first()?, samples.last()?);
        let longest = samples
            .windows(2)
            .max_by_key(|pair| pair[1].waited_ns - pair[0].waited_ns)?;
        Some(Self {
            ran_ms: (last.ran_ns - first.ran_ns) as f64 / 1e6,
            waited_ms: (last.waited_ns - first.waited_ns) as f64 / 1e6,
            longest_wait_ms: (longest[1].waited_ns - longest[0].waited_ns) as f64 / 1e6,
            longest_wait_at_ms: longest[1].at_us as i64 / 1000 - opens_at_ms as i64,
        })
    }
}

async fn reset_slowlog(redis: &mut redis::aio::MultiplexedConnection) -> Result<(), LoadError> {
    let set = |name: &'static str, value: u64| {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .to_owned()
    };
    for command in [
        set("slowlog-log-slower-than", SLOWLOG_THRESHOLD_US),
        set("slowlog-max-len", SLOWLOG_LENGTH),
        redis::cmd("SLOWLOG").arg("RESET").to_owned(),
    ] {
        command
            .query_async::<()>(redis)
            .await
            .map_err(LoadError::redis("redis slow log"))?;
    }
    Ok(())
}

async fn read_slowlog(
    redis: &mut redis::aio::MultiplexedConnection,
) -> Result<Vec<SlowCommand>, LoadError> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(SLOWLOG_LENGTH)
        .query_async(redis)
        .await
        .map_err(LoadError::redis("redis SLOWLOG GET"))?;
    Ok(entries.iter().filter_map(slow_command).collect())
}

/// One `SLOWLOG GET` entry: id, unix time, duration (µs), arguments, …
fn slow_command(entry: &redis::Value) -> Option<SlowCommand> {
    let redis::Value::Array(fields) = entry else {
        return None;
    };
    let number = |value: &redis::Value| match value {
        redis::Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    let command = match fields.get(3)? {
        redis::Value::Array(args) => args
            .iter()
            .take(4)
            .map(|arg| match arg {
                redis::Value::BulkString(bytes) => {
                    let text = String::from_utf8_lossy(bytes);
                    text.chars().take(24).collect::<String>()
                }
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    Some(SlowCommand {
        at_s: number(fields.get(1)?)?,
        duration_us: number(fields.get(2)?)?,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_deltas_are_per_bucket_and_across_nodes() {
        let scrape = |a: u64, b: u64, inf: u64| {
            format!(
                "x_bucket{{le=\"0.001\"}} {a}\nx_bucket{{le=\"0.01\"}} {b}\nx_bucket{{le=\"+Inf\"}} {inf}\nx_sum 1\n"
            )
        };
        let before = vec![scrape(5, 5, 5), scrape(1, 1, 1)];
        let after = vec![scrape(9, 10, 10), scrape(1, 1, 2)];
        let delta = bucket_delta(&before, &after, "x")[""].clone();
        assert_eq!(delta, vec![(0.001, 4), (0.01, 1), (f64::INFINITY, 1)]);
        let line = describe_buckets(&delta).unwrap();
        assert!(line.contains("6 observed"), "{line}");
        assert!(line.contains("over the largest bucket"), "{line}");
        assert_eq!(
            describe_buckets(&delta[..2]).unwrap(),
            "5 observed, the longest ≤ 10 ms; 1 over 1 ms"
        );
    }

    #[test]
    fn histogram_deltas_are_kept_by_label_too() {
        let scrape = |join: u64, tick: u64| {
            format!(
                "x_bucket{{op=\"join\",le=\"0.001\"}} {join}\nx_bucket{{op=\"join\",le=\"+Inf\"}} {join}\n\
                 x_bucket{{op=\"tick\",le=\"0.001\"}} 0\nx_bucket{{op=\"tick\",le=\"+Inf\"}} {tick}\n"
            )
        };
        let delta = bucket_delta(&[scrape(1, 1)], &[scrape(4, 2)], "x");
        assert_eq!(delta["op=\"join\""], vec![(0.001, 3)]);
        assert_eq!(delta["op=\"tick\""], vec![(f64::INFINITY, 1)]);
        assert_eq!(delta[""], vec![(0.001, 3), (f64::INFINITY, 1)]);
    }

    #[test]
    fn the_longest_run_queue_wait_is_found_between_samples() {
        let sample = |at_ms: u64, ran_ms: u64, waited_ms: u64| SchedSample {
            at_us: at_ms * 1000,
            ran_ns: ran_ms * 1_000_000,
            waited_ns: waited_ms * 1_000_000,
        };
        let samples = [
            sample(1_000, 10, 1),
            sample(1_050, 20, 2),
            sample(1_100, 30, 9),
            sample(1_150, 40, 10),
        ];
        let run_queue = RunQueue::of(&samples, 1_080).unwrap();
        assert_eq!(run_queue.ran_ms, 30.0);
        assert_eq!(run_queue.waited_ms, 9.0);
        assert_eq!(run_queue.longest_wait_ms, 7.0);
        assert_eq!(run_queue.longest_wait_at_ms, 20);
        assert!(RunQueue::of(&samples[..1], 0).is_none());
    }

    #[test]
    fn slow_log_entries_are_read() {
        use redis::Value::{Array, BulkString, Int};
        let entry = Array(vec![
            Int(7),
            Int(1_700_000_000),
            Int(12_345),
            Array(vec![
                BulkString(b"EVALSHA".to_vec()),
                BulkString(b"0123456789abcdef0123456789abcdef01234567".to_vec()),
                BulkString(b"12".to_vec()),
            ]),
        ]);
        let slow = slow_command(&entry).unwrap();
        assert_eq!(slow.duration_us, 12_345);
        assert_eq!(slow.at_s, 1_700_000_000);
        assert_eq!(slow.command, "EVALSHA 0123456789abcdef01234567 12");
    }
}
