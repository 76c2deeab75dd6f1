//! An origin's health endpoint, or a webhook's receiver, whose answer the
//! test decides: for the outbound client's tests (`waitroom::live::outbound`,
//! `waitroom::live::webhook`), autotune's, and a load scenario with an
//! origin that slows down or fails.
//!
//! It listens on 127.0.0.1, on a port the kernel picks, and answers every
//! request (any method, any path) with the status set (200 at first)
//! after the delay set (none at first), then closes the connection. The
//! test can also make it redirect (`Location`), send its head and stall
//! the body, send a body too big for anyone to read (counting what it
//! got through), or stop accepting, so that connecting is refused. It
//! keeps the moment each request arrived, each request whole (method,
//! target, headers, a body of up to 1 MiB) and how many connections it
//! accepted.
//!
//! A node calls only public addresses unless told otherwise: give the node
//! `--outbound-allow-networks 127.0.0.0/8` (`Settings::outbound_allow_networks`,
//! `OutboundPolicy::allow_networks`) to reach this one.
//!
//! ```no_run
//! # async fn example() {
//! use std::time::Duration;
//! use waitroom_testkit::health_origin::HealthOrigin;
//!
//! let origin = HealthOrigin::start().await;
//! origin.set_delay(Duration::from_millis(1500)); // a slow origin
//! origin.set_status(503); // a failing one
//! origin.refuse().await; // a gone one
//! let asked = origin.requests().len();
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// The longest request head read; a longer one is answered all the same.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The length a stalled body claims (and never sends).
const STALLED_BODY_BYTES: usize = 1 << 20;
/// The longest request body kept; a longer one is cut there.
const MAX_BODY_BYTES: usize = 1 << 20;
/// The length a huge body claims, and sends for as long as it is read.
pub const HUGE_BODY_BYTES: u64 = 1 << 30;

/// What every request is answered with, from the moment it is set.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    delay: Duration,
    /// Each request's sender is looked up in `/proc` before it is
    /// answered (`name_senders`); off, an answer waits for nothing.
    name_senders: bool,
    location: Option<String>,
    stall_body: bool,
    huge_body: bool,
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    /// When its head had arrived.
    pub at: Instant,
    pub method: String,
    /// The path and query, as the request line has them.
    pub target: String,
    /// Names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The process that opened the connection, when it is a child of this
    /// test (a node it started): which node sent it. Linux only; known
    /// once the request is answered, and only after `name_senders`.
    pub sender_pid: Option<u32>,
}

impl Received {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Checks the webhook's `Waitroom-Signature` as a receiver would,
    /// apart from the signer: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
    /// "<t>.<body>")>`. Its `t`.
    pub fn assert_signed(&self, secret: &str) -> u64 {
        use hmac::{Hmac, Mac};
        let signature = self
            .header("waitroom-signature")
            .expect("every webhook call is signed");
        let (t, v1) = signature
            .strip_prefix("t=")
            .and_then(|rest| rest.split_once(",v1="))
            .unwrap_or_else(|| panic!("the signature's form: {signature}"));
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(&self.body);
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(v1, expected, "the signature verifies with the secret");
        t.parse().expect("t is unix seconds")
    }
}

/// What the origin and its connections share.
struct Shared {
    answer: Mutex<Answer>,
    /// When each request's head had arrived, in order.
    requests: Mutex<Vec<Instant>>,
    /// Each request whole, once its body is in.
    received: Mutex<Vec<Received>>,
    /// Connections accepted, a request read on them or not.
    accepted: AtomicUsize,
    /// Bytes of huge bodies sent, and huge bodies cut off by the client.
    huge_bytes_sent: AtomicU64,
    huge_bodies_cut: AtomicUsize,
    /// Every open connection's task: dropped (so cut) with the origin.
    connections: Mutex<JoinSet<()>>,
}

pub struct HealthOrigin {
    address: SocketAddr,
    shared: Arc<Shared>,
    /// The accepting task and what stops it, while it accepts.
    accepting: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
}

impl HealthOrigin {
    /// An origin answering 200 at once, on 127.0.0.1 and a free port.
    pub async fn start() -> HealthOrigin {
        Self::start_on("127.0.0.1:0")
            .await
            .expect("a port on 127.0.0.1")
    }

    /// [`HealthOrigin::start`] on another address (`[::1]:0`, say), or
    /// why it cannot listen there (a machine without IPv6).
    pub async fn start_on(address: &str) -> std::io::Result<HealthOrigin> {
        let listener = TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            answer: Mutex::new(Answer {
                status: 200,
                delay: Duration::ZERO,
                name_senders: false,
                location: None,
                stall_body: false,
                huge_body: false,
            }),
            requests: Mutex::default(),
            received: Mutex::default(),
            accepted: AtomicUsize::new(0),
            huge_bytes_sent: AtomicU64::new(0),
            huge_bodies_cut: AtomicUsize::new(0),
            connections: Mutex::default(),
        });
        let origin = HealthOrigin {
            address,
            shared,
            accepting: Mutex::default(),
        };
        origin.accept_on(listener);
        Ok(origin)
    }

    /// Its health URL: `http://127.0.0.1:{port}/health`
    /// (`http://[::1]:{port}/health` on IPv6's loopback).
    pub fn url(&self) -> String {
        self.url_for("/health")
    }

    /// `path` (starting with `/`) on this origin.
    pub fn url_for(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// The status of every answer from now on (200 at first).
    pub fn set_status(&self, status: u16) {
        self.shared.answer.lock().unwrap().status = status;
    }

    /// How long each request waits, after its head arrived, before its
    /// answer's head is sent (none at first).
    pub fn set_delay(&self, delay: Duration) {
        self.shared.answer.lock().unwrap().delay = delay;
    }

    /// From now on each request's sender (`Received::sender_pid`) is
    /// looked up, alongside its delay: on a loaded machine the lookup,
    /// which reads `/proc`, can outlast a short delay and so hold the
    /// answer back, which is why it is asked for, never done by default.
    pub fn name_senders(&self) {
        self.shared.answer.lock().unwrap().name_senders = true;
    }

    /// A `Location` header on every answer (with a 3xx status, a redirect),
    /// or none.
    pub fn set_location(&self, location: Option<&str>) {
        self.shared.answer.lock().unwrap().location = location.map(str::to_owned);
    }

    /// Whether answers send their head and then stall: the body they
    /// announce never comes, and the connection stays open until the
    /// client closes it.
    pub fn set_stall_body(&self, stall: bool) {
        self.shared.answer.lock().unwrap().stall_body = stall;
    }

    /// Whether answers announce a body of [`HUGE_BODY_BYTES`] and send it
    /// for as long as the client reads ([`HealthOrigin::huge_bytes_sent`]).
    pub fn set_huge_body(&self, huge: bool) {
        self.shared.answer.lock().unwrap().huge_body = huge;
    }

    /// How many bytes of huge bodies were sent (the client's socket
    /// buffers included: the kernel's, not what the client read).
    pub fn huge_bytes_sent(&self) -> u64 {
        self.shared.huge_bytes_sent.load(Ordering::SeqCst)
    }

    /// How many huge bodies ended because the client closed the connection.
    pub fn huge_bodies_cut(&self) -> usize {
        self.shared.huge_bodies_cut.load(Ordering::SeqCst)
    }

    /// Stops accepting and closes the listening socket, so that connecting
    /// is refused (connections already open are answered as before).
    /// Returns once the socket is closed.
    pub async fn refuse(&self) {
        let accepting = self.accepting.lock().unwrap().take();
        if let Some((stop, task)) = accepting {
            let _ = stop.send(());
            let _ = task.await;
        }
    }

    /// After [`HealthOrigin::refuse`], accepts again on the same port.
    /// Panics if something else took the port in between.
    pub async fn accept_again(&self) {
        if self.accepting.lock().unwrap().is_some() {
            return;
        }
        let listener = TcpListener::bind(self.address)
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "the health origin's port {} was taken: {error}",
                    self.port()
                )
            });
        self.accept_on(listener);
    }

    /// When each request arrived (its head read), oldest first.
    pub fn requests(&self) -> Vec<Instant> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Every request whole, oldest first (once its body is in).
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// How many connections were accepted, a request read on them or not.
    pub fn connections(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    fn accept_on(&self, listener: TcpListener) {
        let (stop, mut stopped) = oneshot::channel();
        let shared = self.shared.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        shared.accepted.fetch_add(1, Ordering::SeqCst);
                        let mut connections = shared.connections.lock().unwrap();
                        while connections.try_join_next().is_some() {}
                        connections.spawn(answer(stream, shared.clone()));
                    }
                }
            }
        });
        *self.accepting.lock().unwrap() = Some((stop, task));
    }
}

impl Drop for HealthOrigin {
    fn drop(&mut self) {
        if let Some((_, task)) = self.accepting.get_mut().unwrap().take() {
            task.abort();
        }
        self.shared.connections.lock().unwrap().abort_all();
    }
}

/// One connection: one request read, one answer sent, then closed.
async fn answer(mut stream: TcpStream, shared: Arc<Shared>) {
    // Looked up while the connection is open: its socket is still the sender's.
    let ends = stream.peer_addr().ok().zip(stream.local_addr().ok());
    // Alongside the answer's delay, so as not to add to it.
    let naming = shared.answer.lock().unwrap().name_senders;
    let sender = ends
        .filter(|_| naming)
        .map(|(peer, local)| tokio::task::spawn_blocking(move || child_owning(peer, local)));
    let Some(mut request) = read_request(&mut stream).await else {
        return;
    };
    shared.requests.lock().unwrap().push(request.at);
    let Some(body) = read_body(&mut stream, &request).await else {
        return;
    };
    request.body = body;
    let kept = {
        let mut received = shared.received.lock().unwrap();
        received.push(request);
        received.len() - 1
    };
    let answer = shared.answer.lock().unwrap().clone();
    tokio::time::sleep(answer.delay).await;
    if let Some(sender) = sender {
        shared.received.lock().unwrap()[kept].sender_pid = sender.await.ok().flatten();
    }
    let body = "ok\n";
    let length = if answer.huge_body {
        HUGE_BODY_BYTES as usize
    } else if answer.stall_body {
        STALLED_BODY_BYTES
    } else {
        body.len()
    };
    let location = answer
        .location
        .map(|to| format!("Location: {to}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {length}\r\n\
         {location}Connection: close\r\n\r\n",
        answer.status,
        reason(answer.status),
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    if answer.huge_body {
        return send_huge_body(stream, &shared).await;
    }
    if answer.stall_body {
        // Holds the connection until the client lets go.
        let mut sink = [0; 1024];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        return;
    }
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Sends a huge body's bytes until they are all sent or the client closes
/// the connection.
async fn send_huge_body(mut stream: TcpStream, shared: &Shared) {
    let chunk = [b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < HUGE_BODY_BYTES {
        if stream.write_all(&chunk).await.is_err() {
            shared.huge_bodies_cut.fetch_add(1, Ordering::SeqCst);
            return;
        }
        sent += chunk.len() as u64;
        shared
            .huge_bytes_sent
            .fetch_add(chunk.len() as u64, Ordering::SeqCst);
    }
}

/// Reads the request's head (up to its end, or [`MAX_HEAD_BYTES`]): the
/// request without its body, and the body's first bytes (those read with
/// the head) in its `body`; `None` if the client left before it ended.
async fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut head = Vec::new();
    let mut buffer = [0; 1024];
    let end = loop {
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if head.len() >= MAX_HEAD_BYTES {
            break head.len();
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    };
    let at = Instant::now();
    let rest = head.get(end + 4..).unwrap_or_default().to_vec();
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default().to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Some(Received {
        at,
        method,
        target,
        headers,
        body: rest,
        sender_pid: None,
    })
}

/// The child process of this one holding the TCP socket from `peer` to
/// `local` (both on this host): its inode from `/proc/net/tcp`, then the
/// children's open files. `None` where there is no `/proc`, or it is not a
/// child's.
fn child_owning(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let hex_port = |port: u16| format!(":{port:04X}");
    let (from, to) = (hex_port(peer.port()), hex_port(local.port()));
    let table = std::fs::read_to_string(if peer.is_ipv4() {
        "/proc/net/tcp"
    } else {
        "/proc/net/tcp6"
    })
    .ok()?;
    let inode = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() > 9 && fields[1].ends_with(&from) && fields[2].ends_with(&to))
            .then(|| fields[9].to_owned())
    })?;
    let socket = format!("socket:[{inode}]");
    let mut children = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if let Ok(listed) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(
                listed
                    .split_whitespace()
                    .filter_map(|pid| pid.parse::<u32>().ok()),
            );
        }
    }
    children.into_iter().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|target| target.as_os_str() == socket.as_str())
            })
        })
    })
}

/// The rest of the request's body, by its `Content-Length` (none without
/// one), up to [`MAX_BODY_BYTES`]; `None` if the client left before.
async fn read_body(stream: &mut TcpStream, request: &Received) -> Option<Vec<u8>> {
    let length = request
        .header("content-length")
        .and_then(|length| length.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_BODY_BYTES);
    let mut body = request.body.clone();
    let mut buffer = [0; 4096];
    while body.len() < length {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => body.extend_from_slice(&buffer[..n]),
        }
    }
    body.truncate(length);
    Some(body)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}
