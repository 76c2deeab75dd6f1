//! `drop` mode: a drop as it happens, through the waiting page's own
//! sequence. Creates a room with a sale (per-user limit 1) on nodes that
//! share one store, then starts V visitors at a steady rate over T seconds,
//! visitor i on node i mod n, each an async task doing what `static/room.js`
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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use waitroom::words::sale::{ClaimView, SaleRequest, SaleView};
use waitroom::words::status::Status;
use waitroom::words::{RoomConfig, RoomId};

use super::claims::{error_code, put_sale};
use super::common::{self, CpuUse, ErrorKinds, Latency, Node, create_room, epoch_micros, say};
use super::error::{Failure, LoadError};
use super::sockets::{self, SocketSpec};

/// The page pings its socket this often (`PING_MS` in `static/room.js`).
const PING_EVERY: Duration = Duration::from_secs(20);
/// While its socket is down the page polls this often (`POLL_MS`).
const POLL_EVERY: Duration = Duration::from_secs(5);
/// The page's reconnect and join-retry backoff (`RETRY`): 1 s doubling to 30 s.
const BACKOFF_BASE_MS: u64 = 1_000;
const BACKOFF_MAX_MS: u64 = 30_000;
/// The longest one socket may take to connect and finish its handshake.
const OPEN_TIMEOUT: Duration = Duration::from_secs(20);
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

/// Where a visitor was in the page's sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
enum Stage {
    #[default]
    Joining,
    Waiting,
    Verifying,
    Claiming,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Joining => "joining",
            Stage::Waiting => "waiting",
            Stage::Verifying => "verifying",
            Stage::Claiming => "claiming",
        }
    }
}

/// How a visit ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// Admitted, pass verified, claim answered (201 or 409).
    Done,
    /// Still at this stage when the run's time was up.
    GaveUp(Stage),
    /// A step the page or the site does not retry failed.
    Failed(Stage),
    /// The room told the visitor it is over for them: `closed` (and why),
    /// `expired`, `left`, or a join refused for good.
    Finished(String),
}

/// What a claim was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Claimed {
    Created {
        sequence: u64,
    },
    /// A 409, by its code (`sold_out`, …).
    Refused(String),
}

/// What one Status told the visitor.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Waiting {
        position: Option<u64>,
    },
    Admitted {
        pass: String,
        tick_at_ms: Option<u64>,
    },
    Finished(String),
}

impl Seen {
    fn of(status: &Status) -> Self {
        match (status.state, &status.pass) {
            ("waiting", _) => Seen::Waiting {
                position: status.position,
            },
            ("admitted", Some(pass)) => Seen::Admitted {
                pass: pass.clone(),
                tick_at_ms: status.tick_at_ms,
            },
            ("admitted", None) => Seen::Finished("admitted without a pass".into()),
            (state, _) => Seen::Finished(match status.reason {
                Some(reason) => format!("{state}: {reason}"),
                None => state.to_string(),
            }),
        }
    }
}

/// How a visitor's wait ended.
#[derive(Debug)]
enum Settled {
    Admitted(Admission),
    /// The room said it is over for the visitor (what it said).
    Finished(String),
}

/// The admission, as the visitor got it.
#[derive(Debug)]
struct Admission {
    pass: String,
    at: Instant,
}

/// What one visitor saw, times in µs.
#[derive(Debug, Default)]
struct Visit {
    stage: Stage,
    /// The tool started this visitor this late after its scheduled arrival.
    lag_us: u64,
    join_attempts: u32,
    /// Arrival → the first answer that gave a position, and the position.
    first_position: Option<(u64, u64)>,
    /// The join's answer was already an admission (no line).
    admitted_at_join: bool,
    last_position: Option<u64>,
    /// Statuses whose position differed from the last one seen.
    position_updates: u32,
    /// Of those, the ones where the position went up (it never should).
    positions_rose: u32,
    /// Arrival → the admission status.
    waited_us: Option<u64>,
    /// The admission's tick → the admission status at the visitor.
    tick_to_admission_us: Option<u64>,
    /// The admission status → `/api/verify` answered 204.
    verified_us: Option<u64>,
    claimed: Option<Claimed>,
    claim_us: Option<u64>,
    sockets_opened: u32,
    sockets_lost: u32,
    polls: u32,
    /// Every failed attempt, by kind (also those retried).
    errors: ErrorKinds,
    end: Option<End>,
}

impl Visit {
    /// Takes in a position `since_arrival_us` after the arrival.
    fn saw_position(&mut self, position: u64, since_arrival_us: u64) {
        if self.first_position.is_none() {
            self.first_position = Some((since_arrival_us, position));
        }
        if let Some(last) = self.last_position
            && last != position
        {
            self.position_updates += 1;
            if position > last {
                self.positions_rose += 1;
            }
        }
        self.last_position = Some(position);
    }

    /// Takes in a status; `Some` once the visitor's wait is over.
    fn saw(&mut self, seen: Seen, arrival: Instant, at: Instant) -> Option<Settled> {
        let since_arrival = at.saturating_duration_since(arrival).as_micros() as u64;
        match seen {
            Seen::Waiting { position } => {
                if let Some(position) = position {
                    self.saw_position(position, since_arrival);
                }
                None
            }
            Seen::Admitted { pass, tick_at_ms } => {
                self.waited_us = Some(since_arrival);
                self.tick_to_admission_us =
                    tick_at_ms.map(|tick| epoch_micros().saturating_sub(tick * 1000));
                Some(Settled::Admitted(Admission { pass, at }))
            }
            Seen::Finished(what) => Some(Settled::Finished(what)),
        }
    }

    fn error(&mut self, kind: impl Into<String>) {
        common::count(&mut self.errors, kind);
    }

    /// Counts why the visit failed at `stage`, and ends it there.
    fn failed(&mut self, stage: Stage, kind: impl Into<String>) -> End {
        self.error(kind);
        End::Failed(stage)
    }
}

/// The status a join or a poll answered with, if the body reads as one.
fn status_of(body: &[u8]) -> Option<Status<'_>> {
    serde_json::from_str(std::str::from_utf8(body).ok()?).ok()
}

/// The page's backoff (`backoff()` in `static/lib-api.js`): 1 s doubling to
/// 30 s, times a jitter in 0.8..1.2 drawn from `seed`.
fn backoff(attempt: u32, seed: u64) -> Duration {
    let base = BACKOFF_BASE_MS.saturating_mul(1u64 << attempt.min(16));
    let jitter = 0.8 + 0.4 * (splitmix64(seed) >> 11) as f64 / (1u64 << 53) as f64;
    Duration::from_millis(((base.min(BACKOFF_MAX_MS) as f64 * jitter) as u64).min(BACKOFF_MAX_MS))
}

/// A well-mixed 64-bit value from `x` (no random crate needed for jitter).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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

/// One node's addresses, as the visitors use them.
struct NodeUrls {
    node: Node,
    join: String,
    status: String,
    verify: String,
    claims: String,
}

/// What every visitor task shares.
struct Shared {
    nodes: Vec<NodeUrls>,
    room: RoomId,
    http: reqwest::Client,
    http_permits: Semaphore,
    open_permits: Semaphore,
    socket_config: WebSocketConfig,
    source_ips: u8,
    /// Makes each run's Idempotency-Keys its own.
    run_id: u64,
    deadline: Instant,
    progress: Progress,
}

/// Counters for the progress lines.
#[derive(Default)]
struct Progress {
    arrived: AtomicU64,
    in_line: AtomicU64,
    admitted: AtomicU64,
    verified: AtomicU64,
    claims_answered: AtomicU64,
}

/// One held up on a gauge while it lives (also when its future is dropped
/// at the time bound).
struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    fn up(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        Self(gauge)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One answered HTTP request: status, `Retry-After` (s) and body.
struct Answer {
    status: u16,
    retry_after_s: Option<u64>,
    body: bytes::Bytes,
}

impl Shared {
    /// Sends a request within the HTTP concurrency bound and reads its answer.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, Failure> {
        let _permit = self.http_permits.acquire().await.expect("never closed");
        let response = request.send().await?;
        let status = response.status().as_u16();
        let retry_after_s = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let body = response.bytes().await?;
        Ok(Answer {
            status,
            retry_after_s,
            body,
        })
    }
}

/// "HTTP 409 sold_out", or "HTTP 500" for a body without a code.
fn http_kind(answer: &Answer) -> String {
    match error_code(&answer.body) {
        Some(code) => format!("HTTP {} {code}", answer.status),
        None => format!("HTTP {}", answer.status),
    }
}

/// One visitor, from its scheduled arrival to the end of the run at most.
async fn visitor(shared: Arc<Shared>, index: u64, arrival: Instant) -> Visit {
    let mut visit = Visit {
        lag_us: arrival.elapsed().as_micros() as u64,
        ..Visit::default()
    };
    shared.progress.arrived.fetch_add(1, Ordering::Relaxed);
    let end = match tokio::time::timeout_at(
        shared.deadline.into(),
        visit_page(&shared, index, arrival, &mut visit),
    )
    .await
    {
        Ok(end) => end,
        Err(_) => End::GaveUp(visit.stage),
    };
    visit.end = Some(end);
    visit
}

/// The page's sequence and the site's: join, wait, verify, claim.
async fn visit_page(shared: &Shared, index: u64, arrival: Instant, visit: &mut Visit) -> End {
    let node_index = index as usize % shared.nodes.len();
    let node = &shared.nodes[node_index];
    let progress = &shared.progress;

    let (ticket, waited) = match join(shared, node, index, arrival, visit).await {
        Ok(joined) => joined,
        Err(end) => return end,
    };
    let admission = match waited {
        Some(admission) => {
            visit.admitted_at_join = true;
            admission
        }
        None => {
            visit.stage = Stage::Waiting;
            let in_line = Gauge::up(&progress.in_line);
            let waited = wait_in_line(shared, node_index, index, &ticket, arrival, visit).await;
            drop(in_line);
            match waited {
                Settled::Admitted(admission) => admission,
                Settled::Finished(what) => return End::Finished(what),
            }
        }
    };
    progress.admitted.fetch_add(1, Ordering::Relaxed);

    // The site checks the pass.
    visit.stage = Stage::Verifying;
    let verify = shared.http.get(&node.verify).bearer_auth(&admission.pass);
    match shared.send(verify).await {
        Ok(answer) if answer.status == 204 => {
            visit.verified_us = Some(admission.at.elapsed().as_micros() as u64);
            progress.verified.fetch_add(1, Ordering::Relaxed);
        }
        Ok(answer) => {
            return visit.failed(Stage::Verifying, format!("verify: {}", http_kind(&answer)));
        }
        Err(kind) => {
            return visit.failed(Stage::Verifying, format!("verify: {kind}"));
        }
    }

    // One claim, as the sale page sends it.
    visit.stage = Stage::Claiming;
    let sent = Instant::now();
    let claim = shared
        .http
        .post(&node.claims)
        .bearer_auth(&admission.pass)
        .header("Idempotency-Key", format!("drop-{}-{index}", shared.run_id))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(r#"{"quantity":1}"#);
    let answer = shared.send(claim).await;
    visit.claim_us = Some(sent.elapsed().as_micros() as u64);
    let claimed = match answer {
        Ok(answer) if answer.status == 201 => {
            match serde_json::from_slice::<ClaimView>(&answer.body) {
                Ok(claim) => Claimed::Created {
                    sequence: claim.sequence,
                },
                Err(_) => {
                    return visit.failed(Stage::Claiming, "claim: 201 without a readable claim");
                }
            }
        }
        Ok(answer) if answer.status == 409 => Claimed::Refused(
            error_code(&answer.body).unwrap_or_else(|| "409 without a code".into()),
        ),
        Ok(answer) => {
            return visit.failed(Stage::Claiming, format!("claim: {}", http_kind(&answer)));
        }
        Err(kind) => {
            return visit.failed(Stage::Claiming, format!("claim: {kind}"));
        }
    };
    visit.claimed = Some(claimed);
    progress.claims_answered.fetch_add(1, Ordering::Relaxed);
    End::Done
}

/// Joins as the page does (its body, retries with its backoff, a 429's
/// `Retry-After`); the ticket, and the admission if the join was one.
async fn join(
    shared: &Shared,
    node: &NodeUrls,
    index: u64,
    arrival: Instant,
    visit: &mut Visit,
) -> Result<(String, Option<Admission>), End> {
    let mut retries = 0u32;
    loop {
        visit.join_attempts += 1;
        let request = shared
            .http
            .post(&node.join)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body("{}");
        let wait = match shared.send(request).await {
            Ok(answer) if answer.status == 200 => {
                let at = Instant::now();
                match status_of(&answer.body) {
                    Some(status) => {
                        let ticket = status.ticket.to_string();
                        let mut seen = Seen::of(&status);
                        // A join admitted at once was admitted by no tick:
                        // its tick_at_ms is the last tick's.
                        if let Seen::Admitted { tick_at_ms, .. } = &mut seen {
                            *tick_at_ms = None;
                        }
                        return match visit.saw(seen, arrival, at) {
                            None => Ok((ticket, None)),
                            Some(Settled::Admitted(admission)) => Ok((ticket, Some(admission))),
                            Some(Settled::Finished(what)) => Err(End::Finished(what)),
                        };
                    }
                    None => {
                        visit.error("join: 200 without a readable status");
                        backoff(retries, index ^ ((retries as u64) << 40))
                    }
                }
            }
            Ok(answer) if answer.status == 429 => {
                visit.error(format!("join: {}", http_kind(&answer)));
                Duration::from_secs(answer.retry_after_s.unwrap_or(30).clamp(1, 600))
            }
            // The page stops here: not accepting, no such room, closed, or
            // (no proof of work or user token is sent) refused for good.
            Ok(answer) if matches!(answer.status, 401 | 403 | 404 | 409) => {
                return Err(End::Finished(format!("join: {}", http_kind(&answer))));
            }
            Ok(answer) => {
                visit.error(format!("join: {}", http_kind(&answer)));
                backoff(retries, index ^ ((retries as u64) << 40))
            }
            Err(kind) => {
                visit.error(format!("join: {kind}"));
                backoff(retries, index ^ ((retries as u64) << 40))
            }
        };
        retries += 1;
        tokio::time::sleep(wait).await;
    }
}

/// How a socket's life ended.
enum SocketEnd {
    /// The wait is over: admitted, or finished.
    Settled(Settled),
    /// The socket failed or closed while the visitor still waits.
    Lost(String),
}

/// Follows the visitor's place until it is settled: the socket, and while
/// it is down the page's polls and reconnects.
async fn wait_in_line(
    shared: &Shared,
    node_index: usize,
    index: u64,
    ticket: &str,
    arrival: Instant,
    visit: &mut Visit,
) -> Settled {
    let node = &shared.nodes[node_index];
    let spec = SocketSpec {
        node: node_index,
        addr: node.node.addr,
        source: sockets::source_address(
            node.node.addr,
            (index as usize / shared.nodes.len()) % shared.source_ips as usize,
        ),
        url: format!(
            "ws://{}/api/rooms/{}/ws?ticket={}",
            node.node.authority,
            shared.room,
            common::query_escape(ticket)
        ),
    };
    let mut attempt = 0u32;
    loop {
        match follow_socket(shared, &spec, arrival, visit).await {
            SocketEnd::Settled(settled) => return settled,
            SocketEnd::Lost(kind) => {
                visit.sockets_lost += 1;
                visit.error(format!("socket: {kind}"));
            }
        }
        // The page: poll at once and every 5 s, reconnect after the backoff.
        let reconnect_at = Instant::now() + backoff(attempt, index ^ ((attempt as u64) << 32));
        attempt += 1;
        loop {
            visit.polls += 1;
            let poll = shared.http.get(&node.status).bearer_auth(ticket);
            match shared.send(poll).await {
                Ok(answer) if answer.status == 200 => {
                    let at = Instant::now();
                    match status_of(&answer.body) {
                        Some(status) => {
                            if let Some(settled) = visit.saw(Seen::of(&status), arrival, at) {
                                return settled;
                            }
                        }
                        None => visit.error("poll: 200 without a readable status"),
                    }
                }
                Ok(answer) if matches!(answer.status, 401 | 404) => {
                    return Settled::Finished(format!("poll: {}", http_kind(&answer)));
                }
                Ok(answer) => visit.error(format!("poll: {}", http_kind(&answer))),
                Err(kind) => visit.error(format!("poll: {kind}")),
            }
            let now = Instant::now();
            if now >= reconnect_at {
                break;
            }
            tokio::time::sleep(POLL_EVERY.min(reconnect_at - now)).await;
        }
    }
}

/// One socket: opens it, reads statuses until the wait is over (then
/// closes it, as the page does when it sends the visitor on) or it is lost.
async fn follow_socket(
    shared: &Shared,
    spec: &SocketSpec,
    arrival: Instant,
    visit: &mut Visit,
) -> SocketEnd {
    let permit = shared.open_permits.acquire().await.expect("never closed");
    let opened = tokio::time::timeout(
        OPEN_TIMEOUT,
        sockets::open_socket(spec, shared.socket_config),
    )
    .await;
    drop(permit);
    let mut ws = match opened {
        Ok(Ok(ws)) => ws,
        Ok(Err(error)) => return SocketEnd::Lost(error.0),
        Err(_) => {
            return SocketEnd::Lost(format!("open timed out after {} s", OPEN_TIMEOUT.as_secs()));
        }
    };
    visit.sockets_opened += 1;
    let mut ping = tokio::time::interval_at((Instant::now() + PING_EVERY).into(), PING_EVERY);
    loop {
        tokio::select! {
            message = ws.next() => {
                let at = Instant::now();
                match message {
                    Some(Ok(Message::Text(text))) => {
                        // A pong or an error (say store_unavailable: the
                        // socket stays open) is not a Status.
                        let Ok(status) = serde_json::from_str::<Status>(&text) else { continue };
                        if let Some(settled) = visit.saw(Seen::of(&status), arrival, at) {
                            // Closed beside the visitor, who goes on at once.
                            tokio::spawn(async move {
                                let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
                            });
                            return SocketEnd::Settled(settled);
                        }
                    }
                    Some(Ok(Message::Close(frame))) => {
                        return SocketEnd::Lost(match frame {
                            Some(frame) => format!("close {} {}", u16::from(frame.code), frame.reason),
                            None => "close without a code".into(),
                        });
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return SocketEnd::Lost(format!("error: {error}")),
                    None => return SocketEnd::Lost("connection ended".into()),
                }
            }
            _ = ping.tick() => {
                if let Err(error) = ws.send(Message::text(r#"{"type":"ping"}"#)).await {
                    return SocketEnd::Lost(format!("ping: {error}"));
                }
            }
        }
    }
}

/// p50, p99 and max of per-visitor counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
struct Counts {
    visitors: usize,
    total: u64,
    p50: u64,
    p99: u64,
    max: u64,
}

impl Counts {
    fn of(mut counts: Vec<u64>) -> Option<Self> {
        if counts.is_empty() {
            return None;
        }
        counts.sort_unstable();
        let rank = |p: f64| {
            let index = ((p * counts.len() as f64).ceil() as usize).max(1) - 1;
            counts[index.min(counts.len() - 1)]
        };
        Some(Self {
            visitors: counts.len(),
            total: counts.iter().sum(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: *counts.last().expect("not empty"),
        })
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {}, p99 {}, max {} ({} in all)",
            self.p50, self.p99, self.max, self.total
        )
    }
}

/// Every visitor's figures, aggregated.
#[derive(Debug, Default, Serialize)]
struct Summary {
    visitors: usize,
    done: u64,
    /// Visitors still busy when the time was up, by the stage they were in.
    gave_up: BTreeMap<&'static str, u64>,
    /// Visitors whose verify or claim failed, by stage (and tasks that
    /// handed in no report, as "no report").
    failed: BTreeMap<&'static str, u64>,
    /// Visitors the room sent away (`closed: sold_out`, …), by what it said.
    finished: BTreeMap<String, u64>,
    arrival_lag: Option<Latency>,
    joined: u64,
    /// Joins that had to be sent again.
    join_retries: u64,
    admitted_at_join: u64,
    positioned: u64,
    first_position: Option<Latency>,
    /// The largest first position any visitor was given.
    longest_line: Option<u64>,
    position_updates: Option<Counts>,
    positions_rose: u64,
    admitted: u64,
    waited: Option<Latency>,
    tick_to_admission: Option<Latency>,
    verified: u64,
    verify: Option<Latency>,
    claims_answered: u64,
    created: u64,
    refused: ErrorKinds,
    claim: Option<Latency>,
    /// The 201s' sequences are 1..=created, once each.
    sequences_once_each: bool,
    sockets_opened: u64,
    sockets_lost: u64,
    visitors_that_polled: u64,
    polls: u64,
    error_kinds: ErrorKinds,
}

fn summarize(visits: &[Visit]) -> Summary {
    let mut s = Summary {
        visitors: visits.len(),
        ..Summary::default()
    };
    let mut lags = Vec::new();
    let mut first = Vec::new();
    let mut updates = Vec::new();
    let mut waited = Vec::new();
    let mut ticks = Vec::new();
    let mut verify = Vec::new();
    let mut claim = Vec::new();
    let mut sequences = Vec::new();
    for v in visits {
        match &v.end {
            Some(End::Done) => s.done += 1,
            Some(End::GaveUp(stage)) => *s.gave_up.entry(stage.name()).or_default() += 1,
            Some(End::Failed(stage)) => *s.failed.entry(stage.name()).or_default() += 1,
            Some(End::Finished(what)) => *s.finished.entry(what.clone()).or_default() += 1,
            None => *s.failed.entry("no report").or_default() += 1,
        }
        lags.push(v.lag_us);
        s.join_retries += v.join_attempts.saturating_sub(1) as u64;
        if v.first_position.is_some() || v.admitted_at_join || v.waited_us.is_some() {
            s.joined += 1;
        }
        s.admitted_at_join += v.admitted_at_join as u64;
        if let Some((us, position)) = v.first_position {
            s.positioned += 1;
            first.push(us);
            s.longest_line = s.longest_line.max(Some(position));
            updates.push(v.position_updates as u64);
        }
        s.positions_rose += v.positions_rose as u64;
        if let Some(us) = v.waited_us {
            s.admitted += 1;
            waited.push(us);
        }
        ticks.extend(v.tick_to_admission_us);
        if let Some(us) = v.verified_us {
            s.verified += 1;
            verify.push(us);
        }
        match &v.claimed {
            Some(Claimed::Created { sequence }) => {
                s.created += 1;
                sequences.push(*sequence);
            }
            Some(Claimed::Refused(code)) => common::count(&mut s.refused, code.clone()),
            None => {}
        }
        if v.claimed.is_some() {
            s.claims_answered += 1;
            claim.extend(v.claim_us);
        }
        s.sockets_opened += v.sockets_opened as u64;
        s.sockets_lost += v.sockets_lost as u64;
        s.visitors_that_polled += (v.polls > 0) as u64;
        s.polls += v.polls as u64;
        for (kind, n) in &v.errors {
            *s.error_kinds.entry(kind.clone()).or_default() += n;
        }
    }
    sequences.sort_unstable();
    s.sequences_once_each = sequences.iter().copied().eq(1..=s.created);
    s.arrival_lag = Latency::from_micros(lags);
    s.first_position = Latency::from_micros(first);
    s.position_updates = Counts::of(updates);
    s.waited = Latency::from_micros(waited);
    s.tick_to_admission = Latency::from_micros(ticks);
    s.verify = Latency::from_micros(verify);
    s.claim = Latency::from_micros(claim);
    s
}

fn by_kind<K: std::fmt::Display>(counts: &BTreeMap<K, u64>) -> String {
    counts
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn latency_text(latency: Option<Latency>) -> String {
    latency.map_or_else(|| "none".into(), |l| l.to_string())
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
    let account = Account::read(&http, &run, &s).await;
    report_visitors(&run, &s);
    report_sale(&run, &s, &account);
    let tool_peak_memory = report_run(&run, &played, &account);
    if run.json {
        print_summary(&run, &played, &account, tool_peak_memory, &s);
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

/// Step 1: the room, new on the first node; every other node must find it
/// there (one shared store), or the drop would be several drops.
async fn create_shared_room(http: &reqwest::Client, run: &DropRun<'_>) -> Result<(), LoadError> {
    let DropRun {
        room,
        admit_per_tick,
        tick_ms,
        max_active,
        pass_ttl_s,
        json,
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
    for (i, node) in run.nodes.iter().enumerate() {
        let created = create_room(http, node, run.admin_token, room, &room_config).await?;
        match (i, created) {
            (0, false) => {
                return Err(LoadError::Usage(format!(
                    "{}: room {room} already exists; drop mode needs a new room (give another --room)",
                    node.base
                )));
            }
            (0, true) => say(
                json,
                format!(
                    "{}: room {room} created: {admit_per_tick} admitted every {tick_ms} ms, {}, passes for {pass_ttl_s} s",
                    node.base,
                    max_active.map_or("no cap".into(), |cap| format!("at most {cap} active"))
                ),
            ),
            (_, true) => {
                return Err(LoadError::Setup(format!(
                    "{}: room {room} was created anew there: that node has a store of its own; \
                     a drop over several nodes needs them all on one Redis (--redis-url)",
                    node.base
                )));
            }
            (_, false) => say(
                json,
                format!("{}: room {room} found (shared store)", node.base),
            ),
        }
    }
    Ok(())
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
    let shared = Arc::new(Shared::of(run, start));
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

impl Shared {
    /// What the visitors of `run` share; they give up at `start` plus the
    /// run's duration.
    fn of(run: &DropRun<'_>, start: Instant) -> Self {
        let room = run.room;
        Self {
            nodes: run
                .nodes
                .iter()
                .map(|node| NodeUrls {
                    node: node.clone(),
                    join: format!("{}/api/rooms/{room}/join", node.base),
                    status: format!("{}/api/rooms/{room}/status", node.base),
                    verify: format!("{}/api/verify?room={room}", node.base),
                    claims: format!("{}/api/rooms/{room}/sale/claims", node.base),
                })
                .collect(),
            room: room.clone(),
            http: common::http_client(run.http_concurrency),
            http_permits: Semaphore::new(run.http_concurrency),
            open_permits: Semaphore::new(run.open_concurrency),
            socket_config: sockets::client_config(),
            source_ips: run.source_ips,
            run_id: epoch_micros(),
            deadline: start + run.duration,
            progress: Progress::default(),
        }
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
                "passed (every visitor done, the sale exact, no position rose)"
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
    fn positions_count_their_changes_and_rises() {
        let mut v = Visit::default();
        for (position, at) in [(40, 5), (40, 6), (30, 7), (10, 8), (12, 9), (12, 10)] {
            v.saw_position(position, at);
        }
        assert_eq!(v.first_position, Some((5, 40)));
        assert_eq!(v.position_updates, 3);
        assert_eq!(v.positions_rose, 1);
        assert_eq!(v.last_position, Some(12));
    }

    #[test]
    fn an_admission_ends_the_wait_and_is_timed_from_the_arrival() {
        let arrival = Instant::now();
        let mut v = Visit::default();
        let at = arrival + Duration::from_millis(250);
        assert!(
            v.saw(Seen::Waiting { position: Some(3) }, arrival, at)
                .is_none()
        );
        assert!(
            v.saw(Seen::Waiting { position: None }, arrival, at)
                .is_none()
        );
        let admitted = Seen::Admitted {
            pass: "p".into(),
            tick_at_ms: None,
        };
        let settled = v.saw(admitted, arrival, at + Duration::from_millis(750));
        let Some(Settled::Admitted(admission)) = settled else {
            panic!("not admitted");
        };
        assert_eq!(admission.pass, "p");
        assert_eq!(v.waited_us, Some(1_000_000));
        assert_eq!(v.first_position, Some((250_000, 3)));
        let closed = v.saw(Seen::Finished("closed: sold_out".into()), arrival, at);
        assert!(
            matches!(&closed, Some(Settled::Finished(what)) if what == "closed: sold_out"),
            "{closed:?}"
        );
    }

    #[test]
    fn statuses_read_as_the_page_reads_them() {
        let text = |state: &str, position: &str, pass: &str, reason: &str| {
            format!(
                r#"{{"type":"status","room":"r","state":"{state}","ticket":"t","position":{position},
                "waiting":1,"eta_seconds":null,"pass":{pass},"redirect_url":null,"expires_at":null,
                "paused":false,"tick_at_ms":1000,"notice":null,"reason":{reason}}}"#
            )
        };
        let seen = |raw: String| Seen::of(&serde_json::from_str::<Status>(&raw).unwrap());
        assert_eq!(
            seen(text("waiting", "7", "null", "null")),
            Seen::Waiting { position: Some(7) }
        );
        assert_eq!(
            seen(text("admitted", "null", r#""jwt""#, "null")),
            Seen::Admitted {
                pass: "jwt".into(),
                tick_at_ms: Some(1000)
            }
        );
        assert_eq!(
            seen(text("closed", "null", "null", r#""sold_out""#)),
            Seen::Finished("closed: sold_out".into())
        );
        assert_eq!(
            seen(text("expired", "null", "null", "null")),
            Seen::Finished("expired".into())
        );
    }

    #[test]
    fn backoff_doubles_to_its_cap_with_a_fifth_of_jitter() {
        for seed in 0..200 {
            let first = backoff(0, seed).as_millis();
            assert!((800..=1200).contains(&first), "{first}");
            let third = backoff(2, seed).as_millis();
            assert!((3200..=4800).contains(&third), "{third}");
            assert!(backoff(40, seed).as_millis() <= 30_000);
            assert!(backoff(40, seed).as_millis() >= 24_000);
        }
        assert_ne!(backoff(0, 1), backoff(0, 2));
    }

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

    #[test]
    fn counts_are_nearest_rank() {
        let c = Counts::of((1..=100).collect()).unwrap();
        assert_eq!((c.p50, c.p99, c.max, c.total), (50, 99, 100, 5050));
        assert!(Counts::of(vec![]).is_none());
    }

    #[test]
    fn the_summary_counts_each_visitor_once_by_how_it_ended() {
        let done = |sequence: Option<u64>| Visit {
            join_attempts: 1,
            first_position: Some((1_000, 5)),
            position_updates: 2,
            waited_us: Some(10_000),
            verified_us: Some(2_000),
            claimed: Some(match sequence {
                Some(sequence) => Claimed::Created { sequence },
                None => Claimed::Refused("sold_out".into()),
            }),
            claim_us: Some(500),
            sockets_opened: 1,
            end: Some(End::Done),
            ..Visit::default()
        };
        let mut lost = Visit {
            join_attempts: 3,
            end: Some(End::GaveUp(Stage::Joining)),
            ..Visit::default()
        };
        lost.error("join: HTTP 503 store_unavailable");
        lost.error("join: HTTP 503 store_unavailable");
        let visits = vec![
            done(Some(2)),
            done(Some(1)),
            done(None),
            lost,
            Visit {
                admitted_at_join: true,
                waited_us: Some(3_000),
                end: Some(End::Failed(Stage::Verifying)),
                ..Visit::default()
            },
            Visit {
                end: Some(End::Finished("closed: sold_out".into())),
                ..Visit::default()
            },
        ];
        let s = summarize(&visits);
        assert_eq!(s.visitors, 6);
        assert_eq!(s.done, 3);
        assert_eq!(s.gave_up.get("joining"), Some(&1));
        assert_eq!(s.failed.get("verifying"), Some(&1));
        assert_eq!(s.finished.get("closed: sold_out"), Some(&1));
        assert_eq!(s.joined, 4);
        assert_eq!(s.join_retries, 2);
        assert_eq!(s.admitted_at_join, 1);
        assert_eq!(s.positioned, 3);
        assert_eq!(s.longest_line, Some(5));
        assert_eq!(s.position_updates.unwrap().total, 6);
        assert_eq!(s.admitted, 4);
        assert_eq!(s.verified, 3);
        assert_eq!(s.claims_answered, 3);
        assert_eq!(s.created, 2);
        assert!(s.sequences_once_each);
        assert_eq!(s.refused.get("sold_out"), Some(&1));
        assert_eq!(
            s.error_kinds.get("join: HTTP 503 store_unavailable"),
            Some(&2)
        );
        assert_eq!(s.sockets_opened, 3);
    }
}
