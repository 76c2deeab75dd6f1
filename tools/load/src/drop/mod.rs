//! `drop` mode: a drop as it happens, through the waiting page's own
//! sequence. Creates a room with a sale (per-user limit 1) on nodes that
//! share one store, then starts V visitors at a steady rate over T seconds,
//! visitor i on node i mod n, each an async task doing what `static/waitroom-client.js`
//! and the protected site do:
//!
//! 1. `POST /api/rooms/{room}/join` with `{}` (`Content-Type:
//!    application/json`), retried with the page's backoff on failure;
//! 2. the WebSocket `/api/rooms/{room}/ws?ticket=…`, following the Status
//!    messages (pinging every 20 s); while it is down, a status poll at once
//!    and every 5 s, and a reconnect after a jittered backoff, as the page;
//! 3. once admitted, the socket is closed and the pass goes to the site:
//!    `GET /api/verify?room=…` with the pass as Bearer (204);
//! 4. one claim, `POST /api/rooms/{room}/sale/claims` `{"quantity":1}`.
//!
//! Every time is taken from the visitor's scheduled arrival (not from when
//! the tool got round to it), so the tool's own lateness counts against the
//! figures instead of hiding (and is reported on its own). The run is
//! bounded: at `--duration` after the first arrival every visitor still
//! busy gives up, counted by the stage it was in.

mod report;
mod summary;
pub(crate) mod visitor;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use waitroom::words::sale::{SaleRequest, SaleView};
use waitroom::words::{RoomConfig, RoomId};

use crate::claims::put_sale;
use crate::common::{self, CpuUse, ErrorKinds, Node, say};
use crate::error::LoadError;
use crate::sockets::{self};

use report::RoomReport;
use summary::{Summary, by_kind, latency_text, summarize};
use visitor::{Connections, Shared, Visit, visitor};

/// The page's wait before it sends an admitted visitor on
/// (`REDIRECT_DELAY_MS`); not played here, only said.
const PAGE_REDIRECT_DELAY_MS: u64 = 1_500;

/// Descriptors this tool holds besides its connections.
const OWN_DESCRIPTORS: u64 = 16;

/// How often a progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// After the deadline, how long visitor tasks get to hand in what they saw.
const COLLECT_SLACK: Duration = Duration::from_secs(30);

pub struct DropRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a RoomId,
    pub admin_token: &'a str,
    pub visitors: u64,
    /// Visitors arrive at a steady rate over this long.
    pub arrive_over: Duration,
    pub stock: u64,
    pub admit_per_tick: u32,
    pub tick_ms: u64,
    pub max_active: Option<u64>,
    pub pass_ttl_s: u64,
    /// From the first arrival to the moment every visitor still busy gives up.
    pub duration: Duration,
    pub source_ips: u8,
    /// HTTP requests (joins, polls, verifies, claims) in flight at once.
    pub http_concurrency: usize,
    /// WebSocket handshakes in flight at once.
    pub open_concurrency: usize,
    pub open_files_limit: u64,
    pub server_pids: &'a [u32],
    pub json: bool,
}

/// When visitor `i` of `n` arrives, counted from the first arrival.
fn arrival_offset(i: u64, n: u64, over: Duration) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos((over.as_nanos() * i as u128 / n as u128) as u64)
}

/// What the room's pace makes of the arrivals, if the nodes keep up.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Plan {
    arrival_per_s: f64,
    admission_per_s: f64,
    /// Visitors in line when the last one arrives (the line's peak): those
    /// arrived, less the room's full bucket at the start (the first
    /// arrivals pass straight through) and what the ticks admitted since.
    peak_line: u64,
    /// When the last visitor is admitted, from the first arrival.
    through_s: f64,
}

impl Plan {
    fn of(visitors: u64, over: Duration, admit_per_tick: u32, tick_ms: u64) -> Self {
        let over_s = over.as_secs_f64().max(1e-9);
        let arrival_per_s = visitors as f64 / over_s;
        let admission_per_s = admit_per_tick as f64 * 1000.0 / tick_ms.max(1) as f64;
        let admitted = admit_per_tick as f64 + admission_per_s * over_s;
        let peak_line = (visitors as f64 - admitted).max(0.0).round() as u64;
        Self {
            arrival_per_s,
            admission_per_s,
            peak_line,
            through_s: over_s + peak_line as f64 / admission_per_s,
        }
    }
}

pub async fn run(run: DropRun<'_>) -> Result<(), LoadError> {
    announce_plan(&run);
    let http = common::http_client(1);
    create_shared_room(&http, &run).await?;
    put_one_sale(&http, &run).await?;
    if run.visitors >= sockets::LARGE_RUN {
        sockets::wait_for_time_waits(run.json).await;
    }
    let played = play(&run).await;
    let mut s = summarize(&played.visits);
    s.visitors = run.visitors as usize;
    for (kind, n) in played.lost_tasks.clone() {
        *s.failed.entry("no report").or_default() += n;
        *s.error_kinds.entry(kind).or_default() += n;
    }
    let mut account = Account::read(&http, &run, &s).await;
    let room_report = RoomReport::read(&http, &run, &s).await;
    account.check &= room_report.agrees();
    report_visitors(&run, &s);
    report_sale(&run, &s, &account);
    room_report.say(run.json);
    let tool_peak_memory = report_run(&run, &played, &account);
    if run.json {
        print_summary(&run, &played, &account, tool_peak_memory, &s, &room_report);
    }
    Ok(())
}

/// What the room's pace makes of the arrivals, and whether this machine
/// has the descriptors for the line it should build.
fn announce_plan(run: &DropRun<'_>) {
    let json = run.json;
    // Every visitor in line holds a socket, beside the HTTP connections.
    let plan = Plan::of(
        run.visitors,
        run.arrive_over,
        run.admit_per_tick,
        run.tick_ms,
    );
    say(
        json,
        format!(
            "plan: arrivals {:.0}/s against admission {:.0}/s: the line should peak near {} at {:.1} s \
             and be through by {:.1} s{}",
            plan.arrival_per_s,
            plan.admission_per_s,
            plan.peak_line,
            run.arrive_over.as_secs_f64(),
            plan.through_s,
            if run.max_active.is_some() {
                " (if the cap allows)"
            } else {
                ""
            }
        ),
    );
    let open_files_limit = run.open_files_limit;
    let descriptors = plan.peak_line + run.http_concurrency as u64 + OWN_DESCRIPTORS;
    if descriptors > open_files_limit {
        say(
            json,
            format!(
                "warning: a line of {} sockets needs about {descriptors} descriptors here, the limit is \
                 {open_files_limit}: raise `ulimit -n` or admit faster (visitors whose socket cannot \
                 open poll instead, as the page does)",
                plan.peak_line
            ),
        );
    }
}

/// Step 1: the room, new on the first node, found on the others.
async fn create_shared_room(http: &reqwest::Client, run: &DropRun<'_>) -> Result<(), LoadError> {
    let DropRun {
        room,
        admit_per_tick,
        tick_ms,
        max_active,
        pass_ttl_s,
        ..
    } = *run;
    let room_config = RoomConfig {
        admit_per_tick,
        tick_ms,
        max_active,
        pass_ttl_s,
        paused: false,
        ..common::room_config(room)
    };
    let described = format!(
        "{admit_per_tick} admitted every {tick_ms} ms, {}, passes for {pass_ttl_s} s",
        max_active.map_or("no cap".into(), |cap| format!("at most {cap} active"))
    );
    common::create_shared_room(
        http,
        run.nodes,
        run.admin_token,
        room,
        &room_config,
        &serde_json::Map::new(),
        "drop",
        &described,
        run.json,
    )
    .await
}

async fn put_one_sale(http: &reqwest::Client, run: &DropRun<'_>) -> Result<(), LoadError> {
    let stock = run.stock;
    let sale = SaleRequest {
        stock: Some(stock),
        seats: None,
        per_user_limit: Some(1),
        hold_ttl_s: Some(3600),
    };
    put_sale(http, &run.nodes[0], run.admin_token, run.room, &sale).await?;
    say(
        run.json,
        format!("sale of {stock} units, 1 per visitor, holds of 1 h"),
    );
    Ok(())
}

/// What the visitors did, as their tasks handed it in.
struct Played {
    /// Arrivals per second.
    rate: f64,
    visits: Vec<Visit>,
    /// Tasks that handed in no report, by why.
    lost_tasks: ErrorKinds,
    elapsed_s: f64,
    cpu: Option<CpuUse>,
}

/// Step 2: the visitors, at a steady rate, visitor i on node i mod n.
async fn play(run: &DropRun<'_>) -> Played {
    let (visitors, arrive_over, json) = (run.visitors, run.arrive_over, run.json);
    let rate = visitors as f64 / arrive_over.as_secs_f64();
    say(
        json,
        format!(
            "{visitors} visitors arriving over {:.1} s ({rate:.0}/s) on {} node(s), {} source address(es); \
             every visitor still busy gives up {} s after the first arrival",
            arrive_over.as_secs_f64(),
            run.nodes.len(),
            run.source_ips,
            run.duration.as_secs()
        ),
    );
    let start = Instant::now() + Duration::from_millis(200);
    let shared = Arc::new(Shared::new(
        Connections {
            nodes: run.nodes,
            room: run.room,
            source_ips: run.source_ips,
            http_concurrency: run.http_concurrency,
            open_concurrency: run.open_concurrency,
        },
        start + run.duration,
    ));
    let cpu_start = common::cpu_mark(run.server_pids);
    let reporter = tokio::spawn(report_progress(shared.clone(), start, json));
    let mut tasks = Vec::with_capacity(visitors as usize);
    for i in 0..visitors {
        let arrival = start + arrival_offset(i, visitors, arrive_over);
        if arrival > Instant::now() {
            tokio::time::sleep_until(arrival.into()).await;
        }
        tasks.push(tokio::spawn(visitor(shared.clone(), i, arrival)));
    }
    let mut visits = Vec::with_capacity(tasks.len());
    let collect_deadline = shared.deadline + COLLECT_SLACK;
    let mut lost_tasks = ErrorKinds::new();
    for task in tasks {
        match tokio::time::timeout_at(collect_deadline.into(), task).await {
            Ok(Ok(visit)) => visits.push(visit),
            Ok(Err(error)) => {
                common::count(&mut lost_tasks, format!("visitor task failed: {error}"))
            }
            Err(_) => common::count(&mut lost_tasks, "visitor task did not stop"),
        }
    }
    reporter.abort();
    let elapsed_s = start.elapsed().as_secs_f64();
    let cpu = match (cpu_start, common::cpu_mark(run.server_pids)) {
        (Some(start), Some(end)) => Some(end.since(&start)),
        _ => None,
    };
    Played {
        rate,
        visits,
        lost_tasks,
        elapsed_s,
        cpu,
    }
}

/// Step 3: the sale's own account, and the room's, against the visitors'.
struct Account {
    stock_left: Option<u64>,
    admitted_total: Option<u64>,
    expected_created: u64,
    stock_left_expected: Option<u64>,
    sale_check: bool,
    check: bool,
}

impl Account {
    async fn read(http: &reqwest::Client, run: &DropRun<'_>, s: &Summary) -> Self {
        let (base, room, stock) = (&run.nodes[0].base, run.room, run.stock);
        let stock_left = match http
            .get(format!("{base}/api/rooms/{room}/sale"))
            .send()
            .await
        {
            Ok(response) if response.status() == 200 => {
                response.json::<SaleView>().await.ok().map(|v| v.stock_left)
            }
            _ => None,
        };
        let admitted_total = match http
            .get(format!("{base}/api/admin/rooms/{room}"))
            .bearer_auth(run.admin_token)
            .send()
            .await
        {
            Ok(response) if response.status() == 200 => response
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|room| room["stats"]["admitted_total"].as_u64()),
            _ => None,
        };
        let expected_created = stock.min(s.claims_answered);
        let stock_left_expected = stock.checked_sub(s.created);
        let sale_check = s.created == expected_created
            && s.sequences_once_each
            && stock_left.is_some()
            && stock_left == stock_left_expected;
        let all_done = s.done == run.visitors;
        Self {
            stock_left,
            admitted_total,
            expected_created,
            stock_left_expected,
            sale_check,
            check: sale_check && all_done && s.positions_rose == 0,
        }
    }
}

/// "0", or each kind's count.
fn by_kind_or_none<K: std::fmt::Display>(counts: &BTreeMap<K, u64>) -> String {
    if counts.is_empty() {
        "0".into()
    } else {
        by_kind(counts)
    }
}

/// How the visitors' visits ended, and what they saw until admitted.
fn report_visitors(run: &DropRun<'_>, s: &Summary) {
    let json = run.json;
    say(
        json,
        format!(
            "visitors: {}: {} done (admitted, pass verified, claim answered); gave up at the time bound: {}; \
             failed: {}; sent away by the room: {}",
            run.visitors,
            s.done,
            by_kind_or_none(&s.gave_up),
            by_kind_or_none(&s.failed),
            by_kind_or_none(&s.finished),
        ),
    );
    say(
        json,
        format!(
            "  arrival lag (the tool late in starting a visitor; counted in every time below): {}",
            latency_text(s.arrival_lag)
        ),
    );
    say(
        json,
        format!(
            "  joined: {} ({} joins sent again); admitted at once: {}; given a position: {}, the longest line {}",
            s.joined,
            s.join_retries,
            s.admitted_at_join,
            s.positioned,
            s.longest_line.map_or("none".into(), |n| n.to_string())
        ),
    );
    say(
        json,
        format!(
            "  arrival → first position: {}",
            latency_text(s.first_position)
        ),
    );
    say(
        json,
        format!(
            "  position updates seen per visitor in line: {}; positions that rose: {}",
            s.position_updates
                .map_or_else(|| "none".into(), |c| c.to_string()),
            s.positions_rose
        ),
    );
    say(
        json,
        format!(
            "  admitted: {}; arrival → admission status (time waiting): {}",
            s.admitted,
            latency_text(s.waited)
        ),
    );
    say(
        json,
        format!(
            "  admission's tick → its status at the visitor: {}",
            latency_text(s.tick_to_admission)
        ),
    );
    report_after_admission(json, s);
}

/// What the visitors saw once admitted: verify, claim, and their sockets.
fn report_after_admission(json: bool, s: &Summary) {
    say(
        json,
        format!(
            "  verified: {}; admission status → /api/verify 204: {} (the page itself waits {PAGE_REDIRECT_DELAY_MS} ms \
             before sending the visitor on; not played here)",
            s.verified,
            latency_text(s.verify)
        ),
    );
    say(
        json,
        format!(
            "  claims answered: {}: {} × 201 created, 409: {}; claim latency {}",
            s.claims_answered,
            s.created,
            by_kind_or_none(&s.refused),
            latency_text(s.claim)
        ),
    );
    say(
        json,
        format!(
            "  sockets: {} opened, {} lost while waiting; {} visitors polled ({} polls)",
            s.sockets_opened, s.sockets_lost, s.visitors_that_polled, s.polls
        ),
    );
    for (kind, n) in &s.error_kinds {
        say(json, format!("  error: {n} × {kind}"));
    }
}

fn report_sale(run: &DropRun<'_>, s: &Summary, account: &Account) {
    say(
        run.json,
        format!(
            "sale: {} sold (expected min(stock {}, claims answered {}) = {}); sequences 1..{} once each: {}; \
             stock_left {} (expected {}); the room counts {} admitted",
            s.created,
            run.stock,
            s.claims_answered,
            account.expected_created,
            s.created,
            if s.sequences_once_each { "yes" } else { "NO" },
            account
                .stock_left
                .map_or("unreadable".into(), |n| n.to_string()),
            account
                .stock_left_expected
                .map_or("none: more sold than stock".into(), |n| n.to_string()),
            account
                .admitted_total
                .map_or("unknown".into(), |n| n.to_string()),
        ),
    );
}

/// The run's CPU, this tool's memory and the verdict; returns the tool's
/// peak resident memory.
fn report_run(run: &DropRun<'_>, played: &Played, account: &Account) -> Option<u64> {
    let json = run.json;
    if let Some(cpu) = played.cpu {
        say(json, format!("during the run, {cpu}"));
    }
    let tool_peak_memory = peak_resident_bytes();
    if let Some(bytes) = tool_peak_memory {
        say(
            json,
            format!(
                "this tool's peak resident memory: {:.1} MiB",
                bytes as f64 / 1048576.0
            ),
        );
    }
    say(
        json,
        format!(
            "ran {:.1} s; check: {}",
            played.elapsed_s,
            if account.check {
                "passed (every visitor done, the sale exact, no position rose, the room's report agrees)"
            } else {
                "FAILED (see above)"
            }
        ),
    );
    tool_peak_memory
}

/// The one-line JSON summary (`--json`): the run's settings and checks,
/// then every figure of the summary.
fn print_summary(
    run: &DropRun<'_>,
    played: &Played,
    account: &Account,
    tool_peak_memory: Option<u64>,
    s: &Summary,
    room_report: &RoomReport,
) {
    let mut summary = json!({
        "mode": "drop",
        "nodes": run.nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
        "room": run.room,
        "arrive_over_s": run.arrive_over.as_secs_f64(),
        "arrival_rate_per_s": played.rate,
        "stock": run.stock,
        "admit_per_tick": run.admit_per_tick,
        "tick_ms": run.tick_ms,
        "max_active": run.max_active,
        "pass_ttl_s": run.pass_ttl_s,
        "duration_s": run.duration.as_secs(),
        "source_ips": run.source_ips,
        "http_concurrency": run.http_concurrency,
        "elapsed_s": played.elapsed_s,
        "expected_created": account.expected_created,
        "stock_left": account.stock_left,
        "stock_left_expected": account.stock_left_expected,
        "room_admitted_total": account.admitted_total,
        "cpu": played.cpu,
        "tool_peak_resident_bytes": tool_peak_memory,
        "sale_check_passed": account.sale_check,
        "check_passed": account.check,
        "room_report": room_report,
    });
    let figures = serde_json::to_value(s).expect("a summary serializes");
    if let (Some(summary), serde_json::Value::Object(figures)) = (summary.as_object_mut(), figures)
    {
        summary.extend(figures);
    }
    println!("{summary}");
}

/// This process's peak resident memory (`VmHWM`, Linux).
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A line every few seconds while the drop plays.
async fn report_progress(shared: Arc<Shared>, start: Instant, json: bool) {
    let mut every = tokio::time::interval_at((start + PROGRESS_EVERY).into(), PROGRESS_EVERY);
    loop {
        every.tick().await;
        let p = &shared.progress;
        say(
            json,
            format!(
                "  {:>4.0} s: {} arrived, {} in line, {} admitted, {} verified, {} claims answered",
                start.elapsed().as_secs_f64(),
                p.arrived.load(Ordering::Relaxed),
                p.in_line.load(Ordering::Relaxed),
                p.admitted.load(Ordering::Relaxed),
                p.verified.load(Ordering::Relaxed),
                p.claims_answered.load(Ordering::Relaxed),
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_spread_evenly_over_the_window() {
        let over = Duration::from_secs(10);
        assert_eq!(arrival_offset(0, 50_000, over), Duration::ZERO);
        assert_eq!(arrival_offset(25_000, 50_000, over), Duration::from_secs(5));
        assert_eq!(
            arrival_offset(49_999, 50_000, over),
            Duration::from_micros(9_999_800)
        );
    }

    #[test]
    fn the_plan_is_the_line_that_builds_while_arrivals_outpace_admission() {
        let plan = Plan::of(50_000, Duration::from_secs(10), 1_750, 500);
        assert_eq!(plan.arrival_per_s, 5_000.0);
        assert_eq!(plan.admission_per_s, 3_500.0);
        assert_eq!(plan.peak_line, 50_000 - 1_750 - 35_000);
        assert!((plan.through_s - (10.0 + 13_250.0 / 3_500.0)).abs() < 1e-9);
        let fast = Plan::of(300, Duration::from_secs(2), 100, 500);
        assert_eq!(fast.peak_line, 0);
        assert_eq!(fast.through_s, 2.0);
    }
}
