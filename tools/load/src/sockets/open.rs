//! Opening and reading sockets, for this mode and for `opening` and `drop`:
//! joining visitors for their tickets, where each socket connects from,
//! waiting out an earlier run's TIME_WAIT, one socket's handshake within
//! its time bound, and the statuses it reads.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use waitroom::words::RoomId;
use waitroom::words::status::Status;

use crate::common::{self, ErrorKinds, Node, epoch_micros, say};
use crate::error::Failure;

/// The longest the opening phase may take.
pub(super) const OPEN_PHASE_LIMIT: Duration = Duration::from_secs(120);

/// The longest one socket may take to connect and finish its handshake.
pub(super) const OPEN_TIMEOUT: Duration = Duration::from_secs(20);

/// Counts the sockets that opened and those that failed, as their tasks
/// report, until all `sockets` have or [`OPEN_PHASE_LIMIT`] is up.
pub async fn count_opened(
    reports: &mut mpsc::UnboundedReceiver<bool>,
    sockets: usize,
) -> (u64, u64) {
    let (mut opened, mut failed) = (0u64, 0u64);
    let deadline = tokio::time::Instant::now() + OPEN_PHASE_LIMIT;
    while opened + failed < sockets as u64 {
        match tokio::time::timeout_at(deadline, reports.recv()).await {
            Ok(Some(true)) => opened += 1,
            Ok(Some(false)) => failed += 1,
            Ok(None) | Err(_) => break,
        }
    }
    (opened, failed)
}

/// The `k`th local source address for sockets to `destination`:
/// 127.P.Q.(k+1), where P.Q is the destination's port, or ::1 for an IPv6
/// node. A source address bound with port 0 gets a port of its own among
/// its ~28k ephemeral ones whatever the destination, so sockets to
/// different nodes (or to the floor server) share no address: six tool
/// processes of 17,000 sockets each, one per node, would otherwise take
/// the same four addresses' ports (and those an earlier phase left in
/// TIME_WAIT). All of 127.0.0.0/8 is this host's on Linux.
pub fn source_address(destination: SocketAddr, k: usize) -> IpAddr {
    match destination {
        SocketAddr::V4(addr) => {
            let [high, low] = addr.port().to_be_bytes();
            IpAddr::V4(Ipv4Addr::new(127, high, low, (k + 1) as u8))
        }
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

/// Which visitors `join_visitors` joins, and how.
pub struct Visitors {
    /// New visitors to join (visitor i on node i mod nodes).
    pub count: u64,
    /// Tickets kept: those of the first `keep` visitors (a million tickets
    /// would cost the tool hundreds of MiB).
    pub keep: u64,
    /// Keep-alive workers joining at once.
    pub concurrency: usize,
    /// The longest the joins may take; the rest count as not sent.
    pub limit: Duration,
}

/// Joins new visitors from keep-alive workers; returns the first
/// `keep` visitors' tickets and the errors of all of them.
pub async fn join_visitors(
    nodes: &[Node],
    room: &RoomId,
    visitors: Visitors,
) -> (Vec<Option<String>>, ErrorKinds) {
    let Visitors {
        count: n,
        keep,
        concurrency,
        limit,
    } = visitors;
    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + limit;
    let urls: Arc<[String]> = nodes
        .iter()
        .map(|node| format!("{}/api/rooms/{room}/join", node.base))
        .collect();
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(n as usize).max(1) {
        let next = next.clone();
        let urls = urls.clone();
        workers.push(tokio::spawn(async move {
            let http = common::http_client(1);
            let mut tickets = Vec::new();
            let mut errors = ErrorKinds::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= n {
                    break;
                }
                if Instant::now() >= deadline {
                    common::count(&mut errors, "not sent: join phase time limit");
                    continue;
                }
                let url = &urls[index as usize % urls.len()];
                let outcome = common::join_ticket(http.post(url)).await;
                match outcome {
                    Ok(ticket) if index < keep => tickets.push((index as usize, ticket)),
                    Ok(_) => {}
                    Err(kind) => common::count(&mut errors, kind),
                }
            }
            (tickets, errors)
        }));
    }
    common::gather_indexed(workers, keep as usize).await
}

/// A small client socket: a status is a few hundred bytes.
pub fn client_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(64 * 1024))
        .max_frame_size(Some(64 * 1024))
}

/// Where one socket connects, from where, with which ticket.
pub struct SocketSpec {
    pub node: usize,
    pub addr: SocketAddr,
    pub source: IpAddr,
    pub url: String,
}

/// Loopback connections in TIME_WAIT (an earlier run's) above which a
/// large run waits for them to expire before opening. Each holds its local
/// port, and `bind` searches past them all: a large run started within a
/// minute of another spends its CPU in the kernel's port search, its
/// handshakes reach the server late, and the server answers 408 (seen
/// here: 45% of the machine in `inet_bhash2_conflict` and its callers,
/// 2–5% of handshakes failed). Small runs (the test suite's) do not wait.
pub(super) const TIME_WAIT_PATIENCE: usize = 5_000;

/// Sockets from which a run counts as large.
pub const LARGE_RUN: u64 = 5_000;

/// TIME_WAIT lasts 60 s on Linux.
pub(super) const TIME_WAIT_LONGEST_WAIT: Duration = Duration::from_secs(70);

pub async fn wait_for_time_waits(json: bool) {
    let started = Instant::now();
    let mut told = false;
    while let Some(waiting) = loopback_time_waits().filter(|n| *n > TIME_WAIT_PATIENCE) {
        if started.elapsed() > TIME_WAIT_LONGEST_WAIT {
            say(
                json,
                format!(
                    "warning: still {waiting} loopback connections in TIME_WAIT; opening anyway"
                ),
            );
            return;
        }
        if !told {
            say(
                json,
                format!(
                    "waiting for {waiting} loopback connections in TIME_WAIT (an earlier run's) to expire, at most {} s",
                    TIME_WAIT_LONGEST_WAIT.as_secs()
                ),
            );
            told = true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if told {
        say(
            json,
            format!(
                "TIME_WAIT cleared after {:.0} s",
                started.elapsed().as_secs_f64()
            ),
        );
    }
}

/// IPv4 connections from 127.x.x.x in TIME_WAIT, read from `/proc/net/tcp`
/// (Linux; `None` where there is no such file).
pub(super) fn loopback_time_waits() -> Option<usize> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let count = table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            // "sl local_address rem_address st …"; the address is the
            // in-memory word in hex, so on little-endian machines 127.0.0.1
            // reads "0100007F".
            let local = fields.nth(1).unwrap_or_default();
            let state = fields.nth(1).unwrap_or_default();
            state == "06" && local.get(6..8) == Some("7F")
        })
        .count();
    Some(count)
}

pub async fn open_socket(
    spec: &SocketSpec,
    config: WebSocketConfig,
) -> Result<WebSocketStream<TcpStream>, Failure> {
    let failed = |step: &str| {
        let step = step.to_string();
        move |e: std::io::Error| Failure(format!("{step}: {e}"))
    };
    let socket = match spec.addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(failed("socket"))?;
    // A bound socket takes one of its source address's ~28k ephemeral
    // ports, whatever the destination: binding spreads the sockets over
    // several addresses.
    socket
        .bind(SocketAddr::new(spec.source, 0))
        .map_err(failed("bind"))?;
    let stream = socket.connect(spec.addr).await.map_err(failed("connect"))?;
    let _ = stream.set_nodelay(true);
    let (ws, _) =
        tokio_tungstenite::client_async_with_config(spec.url.as_str(), stream, Some(config))
            .await
            .map_err(|e| Failure(format!("handshake: {e}")))?;
    Ok(ws)
}

/// Opens one socket once a permit allows, within `OPEN_TIMEOUT`, and says
/// on `opened` whether it opened; how long opening took once permitted.
pub async fn open_counted(
    spec: &SocketSpec,
    config: WebSocketConfig,
    permits: &Semaphore,
    opened: &mpsc::UnboundedSender<bool>,
) -> (Result<WebSocketStream<TcpStream>, Failure>, u64) {
    let permit = permits.acquire().await;
    let started = Instant::now();
    let open = tokio::time::timeout(OPEN_TIMEOUT, open_socket(spec, config)).await;
    let open_us = started.elapsed().as_micros() as u64;
    drop(permit);
    let ws = match open {
        Ok(result) => result,
        Err(_) => Err(Failure(format!(
            "timed out after {} s",
            OPEN_TIMEOUT.as_secs()
        ))),
    };
    let _ = opened.send(ws.is_ok());
    (ws, open_us)
}

/// Hands every Status the socket receives to `on_status` with when it
/// arrived (epoch µs), until told to stop (`None`; with `reset_on_stop` the
/// connection is then dropped with a reset) or the socket ends (why).
pub async fn read_statuses(
    ws: &mut WebSocketStream<TcpStream>,
    stop: &mut watch::Receiver<bool>,
    reset_on_stop: bool,
    mut on_status: impl FnMut(Status<'_>, u64),
) -> Option<String> {
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => {
                if reset_on_stop {
                    let _ = ws.get_ref().set_zero_linger();
                }
                return None;
            }
            message = ws.next() => {
                let at_us = epoch_micros();
                match message {
                    Some(Ok(Message::Text(text))) => {
                        // Other messages (a pong, an error) do not read as a Status.
                        if let Ok(status) = serde_json::from_str::<Status>(&text) {
                            on_status(status, at_us);
                        }
                    }
                    Some(Ok(Message::Close(frame))) => {
                        return Some(match frame {
                            Some(frame) => format!("close {} {}", u16::from(frame.code), frame.reason),
                            None => "close without a code".into(),
                        });
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return Some(format!("error: {error}")),
                    None => return Some("connection ended".into()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_to_different_nodes_bind_different_loopback_addresses() {
        let node = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let first = source_address(node(18090), 0);
        assert_eq!(first, IpAddr::from([127, 70, 170, 1]));
        assert_eq!(
            source_address(node(18090), 3),
            IpAddr::from([127, 70, 170, 4])
        );
        assert_ne!(source_address(node(18091), 0), first);
        assert!((0..6).all(|i| source_address(node(18090 + i), 0).is_loopback()));
    }
}
