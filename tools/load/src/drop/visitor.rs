//! One visitor of a drop, as the waiting page and the protected site play
//! it: the join with its retries, the socket with its pings, polls and
//! reconnects while it is down, the verify and the one claim; and what the
//! visitor saw on the way (`Visit`), timed from its scheduled arrival.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use waitroom::words::RoomId;
use waitroom::words::sale::ClaimView;
use waitroom::words::status::{State, Status};

use crate::claims::error_code;
use crate::common::{self, ErrorKinds, Node, epoch_micros};
use crate::error::Failure;
use crate::sockets::{self, SocketSpec};

/// The page pings its socket this often (`pingMs` in `static/waitroom-client.js`).
pub(crate) const PING_EVERY: Duration = Duration::from_secs(20);

/// While its socket is down the page polls this often (`POLL_MS`).
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(5);

/// The page's reconnect and join-retry backoff (`RETRY`): 1 s doubling to 30 s.
pub(crate) const BACKOFF_BASE_MS: u64 = 1_000;

pub(crate) const BACKOFF_MAX_MS: u64 = 30_000;

/// The longest one socket may take to connect and finish its handshake.
pub(crate) const OPEN_TIMEOUT: Duration = Duration::from_secs(20);

/// Where a visitor was in the page's sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Stage {
    #[default]
    Joining,
    Waiting,
    Verifying,
    Claiming,
}

impl Stage {
    pub(crate) fn name(self) -> &'static str {
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
pub(crate) enum End {
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
pub(crate) enum Claimed {
    Created {
        sequence: u64,
    },
    /// A 409, by its code (`sold_out`, …).
    Refused(String),
}

/// What one Status told the visitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
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
    pub(crate) fn of(status: &Status) -> Self {
        match (status.state, &status.pass) {
            (State::Waiting, _) => Seen::Waiting {
                position: status.position,
            },
            (State::Admitted, Some(pass)) => Seen::Admitted {
                pass: pass.clone(),
                tick_at_ms: status.tick_at_ms,
            },
            (State::Admitted, None) => Seen::Finished("admitted without a pass".into()),
            (state, _) => Seen::Finished(match status.reason {
                Some(reason) => format!("{state}: {reason}"),
                None => state.to_string(),
            }),
        }
    }
}

/// How a visitor's wait ended.
#[derive(Debug)]
pub(crate) enum Settled {
    Admitted(Admission),
    /// The room said it is over for the visitor (what it said).
    Finished(String),
}

/// The admission, as the visitor got it.
#[derive(Debug)]
pub(crate) struct Admission {
    pub(crate) pass: String,
    pub(crate) at: Instant,
}

/// What one visitor saw, times in µs.
#[derive(Debug, Default)]
pub(crate) struct Visit {
    pub(crate) stage: Stage,
    /// The tool started this visitor this late after its scheduled arrival.
    pub(crate) lag_us: u64,
    pub(crate) join_attempts: u32,
    /// Arrival → the first answer that gave a position, and the position.
    pub(crate) first_position: Option<(u64, u64)>,
    /// The join's answer was already an admission (no line).
    pub(crate) admitted_at_join: bool,
    pub(crate) last_position: Option<u64>,
    /// Statuses whose position differed from the last one seen.
    pub(crate) position_updates: u32,
    /// Of those, the ones where the position went up (it never should).
    pub(crate) positions_rose: u32,
    /// Arrival → the admission status.
    pub(crate) waited_us: Option<u64>,
    /// The admission's tick → the admission status at the visitor.
    pub(crate) tick_to_admission_us: Option<u64>,
    /// The admission status → `/api/verify` answered 204.
    pub(crate) verified_us: Option<u64>,
    pub(crate) claimed: Option<Claimed>,
    pub(crate) claim_us: Option<u64>,
    pub(crate) sockets_opened: u32,
    pub(crate) sockets_lost: u32,
    pub(crate) polls: u32,
    /// Every failed attempt, by kind (also those retried).
    pub(crate) errors: ErrorKinds,
    pub(crate) end: Option<End>,
}

impl Visit {
    /// Takes in a position `since_arrival_us` after the arrival.
    pub(crate) fn saw_position(&mut self, position: u64, since_arrival_us: u64) {
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
    pub(crate) fn saw(&mut self, seen: Seen, arrival: Instant, at: Instant) -> Option<Settled> {
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

    pub(crate) fn error(&mut self, kind: impl Into<String>) {
        common::count(&mut self.errors, kind);
    }

    /// Counts why the visit failed at `stage`, and ends it there.
    pub(crate) fn failed(&mut self, stage: Stage, kind: impl Into<String>) -> End {
        self.error(kind);
        End::Failed(stage)
    }
}

/// The status a join or a poll answered with, if the body reads as one.
pub(crate) fn status_of(body: &[u8]) -> Option<Status<'_>> {
    serde_json::from_str(std::str::from_utf8(body).ok()?).ok()
}

/// The page's backoff (`backoff()` in `static/lib-api.js`): 1 s doubling to
/// 30 s, times a jitter in 0.8..1.2 drawn from `seed`.
pub(crate) fn backoff(attempt: u32, seed: u64) -> Duration {
    let base = BACKOFF_BASE_MS.saturating_mul(1u64 << attempt.min(16));
    let jitter = 0.8 + 0.4 * (splitmix64(seed) >> 11) as f64 / (1u64 << 53) as f64;
    Duration::from_millis(((base.min(BACKOFF_MAX_MS) as f64 * jitter) as u64).min(BACKOFF_MAX_MS))
}

/// A well-mixed 64-bit value from `x` (no random crate needed for jitter).
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One node's addresses, as the visitors use them.
pub(crate) struct NodeUrls {
    pub(crate) node: Node,
    pub(crate) join: String,
    pub(crate) status: String,
    pub(crate) verify: String,
    pub(crate) claims: String,
}

/// What every visitor task shares.
pub(crate) struct Shared {
    pub(crate) nodes: Vec<NodeUrls>,
    pub(crate) room: RoomId,
    pub(crate) http: reqwest::Client,
    pub(crate) http_permits: Semaphore,
    pub(crate) open_permits: Semaphore,
    pub(crate) socket_config: WebSocketConfig,
    pub(crate) source_ips: u8,
    /// Makes each run's Idempotency-Keys its own.
    pub(crate) run_id: u64,
    pub(crate) deadline: Instant,
    pub(crate) progress: Progress,
}

/// Where the visitors go and how many of their requests and handshakes
/// may be in flight at once.
pub(crate) struct Connections<'a> {
    pub(crate) nodes: &'a [Node],
    pub(crate) room: &'a RoomId,
    pub(crate) source_ips: u8,
    /// HTTP requests (joins, polls, verifies, claims) in flight at once.
    pub(crate) http_concurrency: usize,
    /// WebSocket handshakes in flight at once.
    pub(crate) open_concurrency: usize,
}

impl Shared {
    /// What the visitors going through `to` share; they give up at `deadline`.
    pub(crate) fn new(to: Connections<'_>, deadline: Instant) -> Self {
        let room = to.room;
        Self {
            nodes: to
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
            http: common::http_client(to.http_concurrency),
            http_permits: Semaphore::new(to.http_concurrency),
            open_permits: Semaphore::new(to.open_concurrency),
            socket_config: sockets::client_config(),
            source_ips: to.source_ips,
            run_id: epoch_micros(),
            deadline,
            progress: Progress::default(),
        }
    }
}

/// Counters for the progress lines.
#[derive(Default)]
pub(crate) struct Progress {
    pub(crate) arrived: AtomicU64,
    pub(crate) in_line: AtomicU64,
    pub(crate) admitted: AtomicU64,
    pub(crate) verified: AtomicU64,
    pub(crate) claims_answered: AtomicU64,
}

/// One held up on a gauge while it lives (also when its future is dropped
/// at the time bound).
pub(crate) struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    pub(crate) fn up(gauge: &'a AtomicU64) -> Self {
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
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) retry_after_s: Option<u64>,
    pub(crate) body: bytes::Bytes,
}

impl Shared {
    /// Sends a request within the HTTP concurrency bound and reads its answer.
    pub(crate) async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, Failure> {
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
pub(crate) fn http_kind(answer: &Answer) -> String {
    match error_code(&answer.body) {
        Some(code) => format!("HTTP {} {code}", answer.status),
        None => format!("HTTP {}", answer.status),
    }
}

/// One visitor, from its scheduled arrival to the end of the run at most.
pub(crate) async fn visitor(shared: Arc<Shared>, index: u64, arrival: Instant) -> Visit {
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
pub(crate) async fn visit_page(
    shared: &Shared,
    index: u64,
    arrival: Instant,
    visit: &mut Visit,
) -> End {
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
pub(crate) async fn join(
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
pub(crate) enum SocketEnd {
    /// The wait is over: admitted, or finished.
    Settled(Settled),
    /// The socket failed or closed while the visitor still waits.
    Lost(String),
}

/// Follows the visitor's place until it is settled: the socket, and while
/// it is down the page's polls and reconnects.
pub(crate) async fn wait_in_line(
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
pub(crate) async fn follow_socket(
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
}
