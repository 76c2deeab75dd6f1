//! `autotune` mode: a drop that runs itself (api.md, "Scheduled changes"
//! and "Admission that follows the origin"). The tool starts a test origin
//! of known capacity on 127.0.0.1 (`origin`: a checkout behind a queue of
//! workers, and a `/health` through the same queue), measures what it
//! takes, then creates a room whose `autotune` follows that `/health`,
//! admitting at first more than the origin can take, with one schedule
//! entry (a notice and a higher `admit_per_tick`) at a set time. Shoppers
//! arrive at a steady rate, more than the origin can take, each going
//! through the waiting page as `drop` mode plays it and then sending the
//! origin its checkout's requests, one after another (`shopper`).
//!
//! Over the last `--window` seconds it reports the rate the room admitted
//! at against the origin's capacity measured in the same run, the origin's
//! p95 latency against autotune's target, autotune's changes (from the
//! room's stats, read every 2 s, and the nodes' counters: `watch`), and
//! when the schedule's entry applied. The nodes must be allowed to call
//! loopback: `--outbound-allow-networks 127.0.0.0/8`.

mod figures;
pub(crate) mod origin;
mod report;
mod shopper;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use waitroom::words::autotune::Autotune;
use waitroom::words::clock::rfc3339;
use waitroom::words::{RoomConfig, RoomId};

use crate::common::{self, ErrorKinds, Node, epoch_micros, say};
use crate::drop::visitor::{Connections, Shared};
use crate::error::LoadError;

pub use origin::Capacity;

use figures::{Figures, Inputs, Span};
use origin::{Origin, Record};
use shopper::{Outcome, Shop, shopper};
use watch::Watched;

/// Between creating the room and the first arrival.
const LEAD: Duration = Duration::from_secs(1);

/// How long the origin's capacity is measured, and by how many clients
/// per worker (enough to keep every worker busy).
const MEASURE_FOR: Duration = Duration::from_secs(5);
const CLIENTS_PER_WORKER: usize = 4;

/// After the deadline, how long shopper tasks get to hand in what they saw.
const COLLECT_SLACK: Duration = Duration::from_secs(30);

/// The run's phase change: one schedule entry.
pub struct Phase {
    /// From the first arrival.
    pub at: Duration,
    /// The room's new `admit_per_tick` (none: unchanged).
    pub admit_per_tick: Option<u32>,
    pub notice: String,
}

pub struct AutotuneRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a RoomId,
    pub admin_token: &'a str,
    /// Shoppers arriving a second, throughout.
    pub arrival_rate: f64,
    /// From the first arrival to the end: then every shopper still busy gives up.
    pub duration: Duration,
    /// The figures are those of the run's last this long.
    pub window: Duration,
    pub admit_per_tick: u32,
    pub tick_ms: u64,
    pub phase: Phase,
    pub latency_target_ms: u64,
    pub error_rate_max: f64,
    pub min_per_tick: u32,
    pub capacity: Capacity,
    /// Requests each admitted shopper sends the origin, one after another.
    pub checkouts: u32,
    pub source_ips: u8,
    pub http_concurrency: usize,
    pub open_concurrency: usize,
    pub server_pids: &'a [u32],
    pub json: bool,
}

impl AutotuneRun<'_> {
    fn visitors(&self) -> u64 {
        (self.arrival_rate * self.duration.as_secs_f64()).floor() as u64
    }

    /// Shoppers a second the origin takes, on paper.
    fn capacity_visitors_per_s(&self) -> f64 {
        self.capacity.per_s() / self.checkouts.max(1) as f64
    }
}

/// What the run saw, gathered at its end.
struct Ran {
    /// The run's clock: the first arrival, and the same as epoch ms.
    start: Instant,
    start_ms: u64,
    measured_per_s: f64,
    outcomes: Vec<Outcome>,
    lost_tasks: ErrorKinds,
    watched: Watched,
    /// The room's admin view at the end, or why it could not be read.
    room: Result<serde_json::Value, String>,
    counted_at_end: watch::Counted,
    records: Vec<Record>,
    cpu: Option<common::CpuUse>,
    load_start: Option<String>,
    load_end: Option<String>,
    elapsed_s: f64,
}

pub async fn run(run: AutotuneRun<'_>) -> Result<(), LoadError> {
    announce(&run);
    let origin = Origin::start(run.capacity)?;
    let measured_per_s = origin::measure_capacity(
        &origin,
        CLIENTS_PER_WORKER * run.capacity.workers as usize,
        MEASURE_FOR,
    )
    .await;
    say(
        run.json,
        format!(
            "the origin ({}): {:.1} requests/s served when kept busy for {} s ({:.1} on paper: {} workers × {} ms)",
            origin.url(""),
            measured_per_s,
            MEASURE_FOR.as_secs(),
            run.capacity.per_s(),
            run.capacity.workers,
            run.capacity.service.as_millis()
        ),
    );
    let http = common::http_client(1);
    let start = Instant::now() + LEAD;
    let start_ms = epoch_micros() / 1000 + LEAD.as_millis() as u64;
    create_room(&http, &run, &origin, start_ms).await?;
    let ran = play_and_watch(&run, &http, origin, start, start_ms, measured_per_s).await;
    report::report(&run, &ran);
    Ok(())
}

/// What the settings make of the run, before it starts.
fn announce(run: &AutotuneRun<'_>) {
    let takes = run.capacity_visitors_per_s();
    let per_s = |per_tick: u32| per_tick as f64 * 1000.0 / run.tick_ms.max(1) as f64;
    let line_growth = (run.arrival_rate - takes).max(0.0);
    say(
        run.json,
        format!(
            "plan: the origin takes {:.1} requests/s ({} workers × {} ms), {takes:.1} shoppers/s at {} requests each; \
             {:.1} shoppers/s arrive ({:.2}× that) for {} s; the room admits {} every {} ms ({:.1}/s, {:.2}×) at first, \
             {} from {} s; autotune aims at p95 {} ms (the origin's service alone: {} ms); figures over the last {} s",
            run.capacity.per_s(),
            run.capacity.workers,
            run.capacity.service.as_millis(),
            run.checkouts,
            run.arrival_rate,
            run.arrival_rate / takes,
            run.duration.as_secs(),
            run.admit_per_tick,
            run.tick_ms,
            per_s(run.admit_per_tick),
            per_s(run.admit_per_tick) / takes,
            run.phase
                .admit_per_tick
                .map_or("unchanged".into(), |n| format!("{n} ({:.1}/s)", per_s(n))),
            run.phase.at.as_secs(),
            run.latency_target_ms,
            run.capacity.service.as_millis(),
            run.window.as_secs(),
        ),
    );
    say(
        run.json,
        format!(
            "  if autotune holds the origin at its capacity, the line grows by about {line_growth:.1} a second, \
             to about {:.0} sockets by the end",
            line_growth * run.duration.as_secs_f64()
        ),
    );
}

/// The room: autotune on the origin's `/health`, the phase change as one
/// schedule entry; new on the first node, found by every other (one store).
async fn create_room(
    http: &reqwest::Client,
    run: &AutotuneRun<'_>,
    origin: &Origin,
    start_ms: u64,
) -> Result<(), LoadError> {
    let at_ms = start_ms + run.phase.at.as_millis() as u64;
    let mut set = serde_json::Map::new();
    set.insert("notice".into(), json!(run.phase.notice));
    if let Some(n) = run.phase.admit_per_tick {
        set.insert("admit_per_tick".into(), json!(n));
    }
    // Sent as JSON: a config's `schedule` is never read from one.
    let mut schedule = serde_json::Map::new();
    schedule.insert(
        "schedule".into(),
        json!([{"at": rfc3339(at_ms), "set": set}]),
    );
    let config = RoomConfig {
        admit_per_tick: run.admit_per_tick,
        tick_ms: run.tick_ms,
        paused: false,
        autotune: Some(Autotune {
            health_url: origin.url("/health"),
            latency_target_ms: run.latency_target_ms,
            error_rate_max: run.error_rate_max,
            min_per_tick: run.min_per_tick,
            max_per_tick: None,
            dry_run: false,
        }),
        ..common::room_config(run.room)
    };
    let room = run.room;
    for (i, node) in run.nodes.iter().enumerate() {
        let created =
            common::create_room_with(http, node, run.admin_token, room, &config, schedule.clone())
                .await?;
        match (i, created) {
            (0, false) => {
                return Err(LoadError::Usage(format!(
                    "{}: room {room} already exists; autotune mode needs a new room (give another --room)",
                    node.base
                )));
            }
            (0, true) => say(
                run.json,
                format!(
                    "{}: room {room} created: {} admitted every {} ms, autotune on {} (target {} ms), \
                     the schedule's entry at {}",
                    node.base,
                    run.admit_per_tick,
                    run.tick_ms,
                    origin.url("/health"),
                    run.latency_target_ms,
                    rfc3339(at_ms)
                ),
            ),
            (_, true) => {
                return Err(LoadError::Setup(format!(
                    "{}: room {room} was created anew there: that node has a store of its own",
                    node.base
                )));
            }
            (_, false) => say(
                run.json,
                format!("{}: room {room} found (shared store)", node.base),
            ),
        }
    }
    Ok(())
}

/// The shoppers and the watch on the room, side by side until the
/// deadline; then what the room, the nodes and the origin say.
async fn play_and_watch(
    run: &AutotuneRun<'_>,
    http: &reqwest::Client,
    origin: Origin,
    start: Instant,
    start_ms: u64,
    measured_per_s: f64,
) -> Ran {
    let deadline = start + run.duration;
    let shop = Arc::new(Shop {
        page: Shared::new(
            Connections {
                nodes: run.nodes,
                room: run.room,
                source_ips: run.source_ips,
                http_concurrency: run.http_concurrency,
                open_concurrency: run.open_concurrency,
            },
            deadline,
        ),
        origin: common::http_client(run.http_concurrency),
        checkout_url: origin.url("/checkout"),
        checkouts: run.checkouts,
        checked_out: AtomicU64::new(0),
    });
    let load_start = common::loadavg();
    let cpu_start = common::cpu_mark(run.server_pids);
    let ((outcomes, lost_tasks), mut watched) = tokio::join!(
        play(run, shop.clone(), start),
        watch_room(run, http, &shop, &origin, start)
    );
    let cpu = match (cpu_start, common::cpu_mark(run.server_pids)) {
        (Some(before), Some(after)) => Some(after.since(&before)),
        _ => None,
    };
    let room = watch::read_room(http, &run.nodes[0], run.admin_token, run.room.as_str()).await;
    // The changes since the last read too, as the nodes' counters have them.
    if let Ok(room) = &room {
        watch::merge_changes(&mut watched.changes, watch::changes_of(room));
    }
    let counted_at_end = watch::counted(run.nodes, run.room.as_str()).await;
    let records = on_the_runs_clock(origin.take_records(), origin.started(), start);
    origin.stop();
    Ran {
        start,
        start_ms,
        measured_per_s,
        outcomes,
        lost_tasks,
        watched,
        room,
        counted_at_end,
        records,
        cpu,
        load_start,
        load_end: common::loadavg(),
        elapsed_s: start.elapsed().as_secs_f64(),
    }
}

/// The origin's records, timed from the run's start instead of the origin's.
fn on_the_runs_clock(records: Vec<Record>, origin_started: Instant, start: Instant) -> Vec<Record> {
    records
        .into_iter()
        .filter_map(|r| {
            let arrived = (origin_started + r.arrived).checked_duration_since(start)?;
            Some(Record { arrived, ..r })
        })
        .collect()
}

/// The shoppers, at a steady rate, shopper i on node i mod n; what each saw.
async fn play(
    run: &AutotuneRun<'_>,
    shop: Arc<Shop>,
    start: Instant,
) -> (Vec<Outcome>, ErrorKinds) {
    let visitors = run.visitors();
    let mut tasks = Vec::with_capacity(visitors as usize);
    for i in 0..visitors {
        let arrival = start + Duration::from_secs_f64(i as f64 / run.arrival_rate);
        if arrival > Instant::now() {
            tokio::time::sleep_until(arrival.into()).await;
        }
        tasks.push(tokio::spawn(shopper(shop.clone(), i, arrival)));
    }
    let collect_by = start + run.duration + COLLECT_SLACK;
    let mut outcomes = Vec::with_capacity(tasks.len());
    let mut lost = ErrorKinds::new();
    for task in tasks {
        match tokio::time::timeout_at(collect_by.into(), task).await {
            Ok(Ok(outcome)) => outcomes.push(outcome),
            Ok(Err(error)) => common::count(&mut lost, format!("shopper task failed: {error}")),
            Err(_) => common::count(&mut lost, "shopper task did not stop"),
        }
    }
    (outcomes, lost)
}

/// Reads the room every couple of seconds until the deadline (a progress
/// line every 10 s), and the nodes' counters when the window opens.
async fn watch_room(
    run: &AutotuneRun<'_>,
    http: &reqwest::Client,
    shop: &Shop,
    origin: &Origin,
    start: Instant,
) -> Watched {
    let deadline = start + run.duration;
    let window_from = deadline - run.window;
    let mut watched = Watched::default();
    let mut every = tokio::time::interval_at(start.into(), watch::POLL_EVERY);
    for n in 0u64.. {
        every.tick().await;
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if watched.counted_at_window.is_none() && now >= window_from {
            watched.counted_at_window = Some(watch::counted(run.nodes, run.room.as_str()).await);
        }
        match watch::read_room(http, &run.nodes[0], run.admin_token, run.room.as_str()).await {
            Ok(room) => {
                watch::merge_changes(&mut watched.changes, watch::changes_of(&room));
                let poll = watch::poll_of(&room, now);
                if n % 5 == 4 {
                    say_progress(run.json, shop, origin, &poll, now - start);
                }
                watched.polls.push(poll);
            }
            Err(kind) => common::count(&mut watched.errors, format!("reading the room: {kind}")),
        }
    }
    watched
}

fn say_progress(json: bool, shop: &Shop, origin: &Origin, poll: &watch::Poll, at: Duration) {
    let p = &shop.page.progress;
    say(
        json,
        format!(
            "  {:>4.0} s: {} arrived, {} in line ({} by the room), {} admitted, {} checked out; the room admits {} a tick \
             ({}: {}); {} waiting at the origin",
            at.as_secs_f64(),
            p.arrived.load(Ordering::Relaxed),
            p.in_line.load(Ordering::Relaxed),
            poll.waiting,
            p.admitted.load(Ordering::Relaxed),
            shop.checked_out.load(Ordering::Relaxed),
            poll.effective,
            poll.state,
            poll.reason,
            origin.waiting(),
        ),
    );
}

/// The window's figures and the timeline's, from what the run saw.
fn figures_of(run: &AutotuneRun<'_>, ran: &Ran) -> (Figures, Vec<Figures>) {
    let admissions: Vec<Duration> = ran
        .outcomes
        .iter()
        .filter_map(|o| o.admitted_at?.checked_duration_since(ran.start))
        .collect();
    let polls: Vec<(Duration, watch::Poll)> = ran
        .watched
        .polls
        .iter()
        .map(|p| (p.at.saturating_duration_since(ran.start), p.clone()))
        .collect();
    let changes: Vec<(Duration, watch::Change)> = ran
        .watched
        .changes
        .iter()
        .map(|c| {
            (
                Duration::from_millis(c.at_ms.saturating_sub(ran.start_ms)),
                c.clone(),
            )
        })
        .collect();
    let inputs = Inputs {
        admissions: &admissions,
        records: &ran.records,
        polls: &polls,
        changes: &changes,
        checkouts: run.checkouts,
        tick_ms: run.tick_ms,
        service: run.capacity.service,
        workers: run.capacity.workers,
        capacity_per_s: ran.measured_per_s,
    };
    let window = Figures::of(
        Span {
            from: run.duration - run.window,
            to: run.duration,
        },
        &inputs,
    );
    let step = if run.duration >= Duration::from_secs(300) {
        Duration::from_secs(30)
    } else {
        (run.duration / 10).max(Duration::from_secs(1))
    };
    (window, figures::timeline(run.duration, step, &inputs))
}
