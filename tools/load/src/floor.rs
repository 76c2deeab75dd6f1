//! The fan-out's floor (`sockets --floor`): the same status frames written
//! to the same number of open loopback connections, with nothing of
//! waitroom in the way, so the tick→socket latency of a real node can be
//! read as a ratio to what this machine's kernel allows in the same run.
//!
//! The floor server is this tool again, run as a child process (the hidden
//! `floor-server` subcommand), so that like a node it has its own process,
//! its own threads and its own descriptors. It listens on loopback, answers
//! each WebSocket handshake with the minimal `101`, and on every tick writes
//! to every connection one text frame holding the `Status` a real node would
//! send a waiting visitor: built by the server's own `Status::build` from a
//! room of the same config, with a real ticket (same length), the tick's
//! time in `tick_at_ms`, and a position and ETA that differ per connection
//! and fall by `admit_per_tick` every tick.
//!
//! Why a writer loop, and not a task per connection: a node's per-socket
//! path is a task per socket woken through a queue (actix-ws's session),
//! which costs a wake-up and a poll per socket per tick. The floor wants
//! the fastest honest way to put those frames on those connections, so each
//! of its writer threads (one per server worker: the server's actix workers
//! default to one per core, as does this) owns a share of the connections
//! and, on each tick, walks them in one loop: encode the status (it has to
//! be encoded at tick time, since its tick and position change), prefix the
//! frame header, one non-blocking `write`. Only a write that does not fit
//! the socket's buffer waits, in a task of its own (none should: the client
//! reads). What remains per frame is the encoding and the system call, which
//! on loopback also runs the receiver's TCP: the kernel's floor.
//!
//! Ticks fall on multiples of `tick_ms` since the epoch, so several floor
//! servers (one per node, in one tool process or several) tick at the same
//! moments, as nodes sharing one Redis fan out the same tick together.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::net::{TcpSocket, TcpStream};
use tokio::process::{Child, ChildStdout};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use waitroom::startup::LISTEN_BACKLOG;
use waitroom::words::credentials::Credentials;
use waitroom::words::status::{Status, StatusInput, TicketReturn};
use waitroom::words::{LineSummary, Order, PlaceState, RoomFacts, RoomId, VisitorId};

use super::common::{self, Latency, epoch_micros};
use super::error::{BadValue, LoadError};

/// The first line a floor server prints: this, a space, its address.
const LISTENING: &str = "listening";
/// The longest a floor server may take to say where it listens, and to
/// report once told to stop.
const CHILD_PATIENCE: Duration = Duration::from_secs(10);
/// The longest a handshake may take (the sockets mode's own limit).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest request head a handshake may send.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long a write that did not fit waits for room (the server's relay's).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Room for the longest WebSocket frame header (server to client, unmasked).
const HEADER_ROOM: usize = 10;

/// The hidden `floor-server` subcommand: what `sockets --floor` starts.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Loopback address to listen on (any free port).
    #[arg(long)]
    listen: IpAddr,
    /// The room named in every status.
    #[arg(long, value_parser = parse_room)]
    room: RoomId,
    #[arg(long, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    tick_ms: u64,
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    admit_per_tick: u32,
    /// The line's length at the first tick (`waiting` in every status).
    #[arg(long)]
    waiting: u64,
    /// Writer threads.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: u16,
    /// Stop after this many seconds even if never told to.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    lifetime_s: u64,
}

fn parse_room(raw: &str) -> Result<RoomId, BadValue> {
    RoomId::parse(raw).ok_or_else(|| BadValue {
        value: raw.into(),
        expected: "not a room id",
    })
}

/// What a floor server did, printed as its last line when it stops.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FloorReport {
    pub workers: u16,
    pub connections: u64,
    pub handshake_failures: u64,
    /// Ticks written (to however many connections were open then).
    pub ticks: u64,
    /// Frames written whole by the tick's own loop.
    pub written: u64,
    /// Frames that did not fit the socket's buffer and waited for room.
    pub waited_for_room: u64,
    /// Frames not written because the last one still waited for room.
    pub skipped_busy: u64,
    /// How long one tick took to write (encode and `write`), per tick the
    /// slowest of the writer threads, over ticks that wrote to 1+ sockets.
    pub tick_write: Option<Latency>,
}

/// One tick as a writer thread sees it.
#[derive(Debug, Clone, Copy)]
struct Tick {
    at_ms: u64,
    /// Ticks since this server's first.
    elapsed: u64,
}

/// What one writer thread did on one tick.
#[derive(Debug, Clone, Copy)]
struct WorkerTick {
    at_ms: u64,
    took_us: u64,
    written: u64,
    waited: u64,
    skipped: u64,
}

/// Connections whose handshake was answered, and those that failed.
#[derive(Default)]
struct Counts {
    registered: AtomicU64,
    failed: AtomicU64,
}

/// Everything every status of the room shares.
struct Shape {
    room: RoomId,
    facts: RoomFacts,
    credentials: Credentials,
    admit_per_tick: u64,
    waiting: u64,
    rate_per_s: f64,
}

/// One accepted connection, handed to a writer thread.
struct Accepted {
    stream: std::net::TcpStream,
    /// Its place in the line at the first tick (1 = next).
    order: u64,
}

struct Conn {
    stream: TcpStream,
    ticket: String,
    visitor: VisitorId,
    order: u64,
    /// A frame of this connection still waits for room.
    busy: Cell<bool>,
    dead: Cell<bool>,
}

/// Runs a floor server until its standard input closes or its lifetime
/// ends; its standard output says where it listens, then what it did.
pub async fn serve(args: ServerArgs) -> Result<(), LoadError> {
    let listener = listen(args.listen)?;
    let addr = listener
        .local_addr()
        .map_err(LoadError::io("local address"))?;
    let shape = Arc::new(Shape::of(&args));
    let stats = Arc::new(Mutex::new(Vec::<WorkerTick>::new()));
    let counts = Arc::new(Counts::default());
    let (tick_tx, tick_rx) = watch::channel(None::<Tick>);
    let inboxes = start_writers(args.workers, tick_rx, &shape, &stats, &counts)?;
    tell_parent(&format!("{LISTENING} {addr}"));
    tokio::select! {
        _ = accept_forever(&listener, &inboxes) => {}
        _ = tick_forever(args.tick_ms, &tick_tx) => {}
        _ = stdin_closed() => {}
        _ = tokio::time::sleep(Duration::from_secs(args.lifetime_s)) => {}
    }
    let ticks = stats.lock().map(|s| s.clone()).unwrap_or_default();
    let mut report = summarize(args.workers, &ticks);
    report.connections = counts.registered.load(Ordering::Relaxed);
    report.handshake_failures = counts.failed.load(Ordering::Relaxed);
    tell_parent(&serde_json::to_string(&report).expect("a report serializes"));
    Ok(())
}

/// A listener on `ip` (loopback only), any free port.
fn listen(ip: IpAddr) -> Result<tokio::net::TcpListener, LoadError> {
    if !ip.is_loopback() {
        return Err(LoadError::Usage(format!(
            "--listen {ip}: refused: only loopback addresses"
        )));
    }
    let socket = match ip {
        IpAddr::V4(_) => TcpSocket::new_v4(),
        IpAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(LoadError::io("socket"))?;
    let _ = socket.set_reuseaddr(true);
    socket
        .bind(SocketAddr::new(ip, 0))
        .map_err(LoadError::io("bind"))?;
    // The server's own backlog, so bursts of connects are queued alike.
    socket
        .listen(LISTEN_BACKLOG as u32)
        .map_err(LoadError::io("listen"))
}

impl Shape {
    fn of(args: &ServerArgs) -> Self {
        let mut config = common::room_config(&args.room);
        config.admit_per_tick = args.admit_per_tick;
        config.tick_ms = args.tick_ms;
        Self {
            room: args.room.clone(),
            facts: RoomFacts::of(&config, None, false),
            credentials: Credentials::from_secret(&format!("floor-{}", std::process::id())),
            admit_per_tick: args.admit_per_tick as u64,
            waiting: args.waiting,
            rate_per_s: args.admit_per_tick as f64 * 1000.0 / args.tick_ms as f64,
        }
    }
}

/// Starts the writer threads; returns the inbox of each.
fn start_writers(
    workers: u16,
    tick_rx: watch::Receiver<Option<Tick>>,
    shape: &Arc<Shape>,
    stats: &Arc<Mutex<Vec<WorkerTick>>>,
    counts: &Arc<Counts>,
) -> Result<Vec<mpsc::UnboundedSender<Accepted>>, LoadError> {
    let mut inboxes = Vec::new();
    for i in 0..workers {
        let (tx, rx) = mpsc::unbounded_channel();
        let (ticks, shape, stats, counts) = (
            tick_rx.clone(),
            shape.clone(),
            stats.clone(),
            counts.clone(),
        );
        std::thread::Builder::new()
            .name(format!("floor-writer-{i}"))
            .spawn(move || writer_thread(rx, ticks, shape, stats, counts))
            .map_err(LoadError::io("writer thread"))?;
        inboxes.push(tx);
    }
    Ok(inboxes)
}

/// Hands each accepted connection to the next writer thread, round-robin.
async fn accept_forever(
    listener: &tokio::net::TcpListener,
    inboxes: &[mpsc::UnboundedSender<Accepted>],
) {
    let mut accepted = 0u64;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: the run's own checks report it.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        let inbox = &inboxes[accepted as usize % inboxes.len()];
        accepted += 1;
        let _ = inbox.send(Accepted {
            stream,
            order: accepted,
        });
    }
}

/// Sends a tick on every multiple of `tick_ms` since the epoch.
async fn tick_forever(tick_ms: u64, tick_tx: &watch::Sender<Option<Tick>>) {
    let first = next_boundary(epoch_micros() / 1000, tick_ms);
    let mut boundary = first;
    loop {
        let now_us = epoch_micros();
        let wait_us = (boundary * 1000).saturating_sub(now_us);
        tokio::time::sleep(Duration::from_micros(wait_us)).await;
        let _ = tick_tx.send(Some(Tick {
            at_ms: epoch_micros() / 1000,
            elapsed: (boundary - first) / tick_ms,
        }));
        // The next boundary still ahead (a late wake-up skips, it never
        // sends two ticks for one boundary).
        boundary = next_boundary(boundary.max(epoch_micros() / 1000), tick_ms);
    }
}

/// Resolves once this process's standard input closes (the parent's word
/// to stop).
async fn stdin_closed() {
    // A thread of its own (not the runtime's blocking pool, which would
    // keep the process from ending while it reads).
    let (closed_tx, closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(io::Read::read(&mut io::stdin(), &mut buf), Ok(n) if n > 0) {}
        let _ = closed_tx.send(());
    });
    let _ = closed.await;
}

/// The report of what the writer threads recorded.
fn summarize(workers: u16, ticks: &[WorkerTick]) -> FloorReport {
    let mut slowest: std::collections::BTreeMap<u64, u64> = Default::default();
    for t in ticks.iter().filter(|t| t.written + t.waited > 0) {
        let took = slowest.entry(t.at_ms).or_default();
        *took = (*took).max(t.took_us);
    }
    FloorReport {
        workers,
        connections: 0,
        handshake_failures: 0,
        ticks: ticks
            .iter()
            .map(|t| t.at_ms)
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64,
        written: ticks.iter().map(|t| t.written).sum(),
        waited_for_room: ticks.iter().map(|t| t.waited).sum(),
        skipped_busy: ticks.iter().map(|t| t.skipped).sum(),
        tick_write: Latency::from_micros(slowest.into_values().collect()),
    }
}

/// The first multiple of `tick_ms` after `now_ms`.
fn next_boundary(now_ms: u64, tick_ms: u64) -> u64 {
    (now_ms / tick_ms + 1) * tick_ms
}

/// A waiting visitor's position after `elapsed` ticks: `admit_per_tick`
/// fewer each tick, never below 1 (the floor keeps everyone waiting).
fn position_at(order: u64, elapsed: u64, admit_per_tick: u64) -> u64 {
    order
        .saturating_sub(elapsed.saturating_mul(admit_per_tick))
        .max(1)
}

/// Writes `status` into `buf` as one unmasked WebSocket text frame (what a
/// server sends); returns where the frame starts in `buf`.
fn status_frame(buf: &mut Vec<u8>, status: &Status<'_>) -> usize {
    buf.clear();
    buf.resize(HEADER_ROOM, 0);
    serde_json::to_writer(&mut *buf, status).expect("a Status always serializes");
    let len = buf.len() - HEADER_ROOM;
    let mut header = [0u8; HEADER_ROOM];
    header[0] = 0x81; // FIN, text
    let header_len = if len < 126 {
        header[1] = len as u8;
        2
    } else if len <= u16::MAX as usize {
        header[1] = 126;
        header[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        header[1] = 127;
        header[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    let start = HEADER_ROOM - header_len;
    buf[start..HEADER_ROOM].copy_from_slice(&header[..header_len]);
    start
}

/// The `Sec-WebSocket-Key` of a request head, if it has one.
fn websocket_key(head: &[u8]) -> Option<&str> {
    let head = std::str::from_utf8(head).ok()?;
    head.split("\r\n").skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("sec-websocket-key")
            .then(|| value.trim())
    })
}

/// Reads a request head and answers it with `101` (anything that is not a
/// WebSocket handshake gets 400 and an error).
async fn handshake(stream: &TcpStream) -> io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let end = loop {
        stream.readable().await?;
        let mut chunk = [0u8; 1024];
        match stream.try_read(&mut chunk) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if head.len() > MAX_REQUEST_HEAD {
            return Err(io::Error::other("request head too long"));
        }
    };
    let Some(key) = websocket_key(&head[..end]) else {
        write_all(
            stream,
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
        )
        .await?;
        return Err(io::Error::other("not a WebSocket handshake"));
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: {}\r\n\r\n",
        derive_accept_key(key.as_bytes())
    );
    write_all(stream, response.as_bytes()).await
}

async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One writer thread: a single-threaded runtime (as each actix worker is)
/// that finishes the handshakes of the connections it is given between
/// ticks, and writes every tick to all of them in one loop.
fn writer_thread(
    inbox: mpsc::UnboundedReceiver<Accepted>,
    mut ticks: watch::Receiver<Option<Tick>>,
    shape: Arc<Shape>,
    stats: Arc<Mutex<Vec<WorkerTick>>>,
    counts: Arc<Counts>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds");
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let conns: Rc<RefCell<Vec<Rc<Conn>>>> = Rc::default();
        tokio::task::spawn_local(register_connections(
            inbox,
            conns.clone(),
            shape.clone(),
            counts,
        ));
        let mut buf = Vec::with_capacity(1024);
        while ticks.changed().await.is_ok() {
            let Some(tick) = *ticks.borrow_and_update() else {
                continue;
            };
            let done = write_tick(&conns.borrow(), &shape, tick, &mut buf);
            if let Ok(mut stats) = stats.lock() {
                stats.push(done);
            }
        }
    });
}

/// Finishes the handshake of every connection the thread is given, each in
/// a task of its own, and adds those that succeed to `conns`.
async fn register_connections(
    mut inbox: mpsc::UnboundedReceiver<Accepted>,
    conns: Rc<RefCell<Vec<Rc<Conn>>>>,
    shape: Arc<Shape>,
    counts: Arc<Counts>,
) {
    while let Some(accepted) = inbox.recv().await {
        let (conns, shape, counts) = (conns.clone(), shape.clone(), counts.clone());
        tokio::task::spawn_local(async move {
            match register(accepted, &shape).await {
                Some(conn) => {
                    conns.borrow_mut().push(Rc::new(conn));
                    counts.registered.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

/// One connection after its handshake, with a visitor and ticket of its
/// own; `None` if the handshake failed.
async fn register(accepted: Accepted, shape: &Shape) -> Option<Conn> {
    let stream = accepted
        .stream
        .set_nonblocking(true)
        .and_then(|()| TcpStream::from_std(accepted.stream))
        .ok()?;
    // Statuses are single small frames: send each at once.
    let _ = stream.set_nodelay(true);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&stream)).await {
        Ok(Ok(())) => {
            let visitor = VisitorId::random();
            let ticket =
                shape
                    .credentials
                    .issue_ticket(&shape.room, visitor, epoch_micros() / 1000);
            Some(Conn {
                stream,
                ticket,
                visitor,
                order: accepted.order,
                busy: Cell::new(false),
                dead: Cell::new(false),
            })
        }
        _ => None,
    }
}

/// Writes one tick's status to every open connection, in one loop.
fn write_tick(conns: &[Rc<Conn>], shape: &Shape, tick: Tick, buf: &mut Vec<u8>) -> WorkerTick {
    let started = Instant::now();
    let mut done = WorkerTick {
        at_ms: tick.at_ms,
        took_us: 0,
        written: 0,
        waited: 0,
        skipped: 0,
    };
    let admitted = tick.elapsed.saturating_mul(shape.admit_per_tick);
    let line = LineSummary {
        version: tick.elapsed + 1,
        waiting: shape.waiting.saturating_sub(admitted),
        rate_per_s: Some(shape.rate_per_s),
        paused: false,
        tick_at: Some(tick.at_ms),
    };
    for conn in conns {
        if conn.dead.get() {
            continue;
        }
        if conn.busy.get() {
            done.skipped += 1;
            continue;
        }
        let status = Status::build(
            StatusInput {
                room: &shape.room,
                ticket: &conn.ticket,
                ret: TicketReturn::ReadFromTicket,
                visitor: conn.visitor,
                state: PlaceState::Waiting {
                    order: Order::Joined(conn.order),
                    position: position_at(conn.order, tick.elapsed, shape.admit_per_tick),
                },
                line: &line,
                facts: &shape.facts,
                priority: None,
                notify: None,
            },
            &shape.credentials,
        );
        let start = status_frame(buf, &status);
        match write_frame(conn, &buf[start..]) {
            Written::Whole => done.written += 1,
            Written::Waiting => done.waited += 1,
            Written::Dead => {}
        }
    }
    done.took_us = started.elapsed().as_micros() as u64;
    done
}

/// What became of one frame written on a tick.
enum Written {
    /// Written whole at once.
    Whole,
    /// It did not fit the socket's buffer: the rest waits for room in a
    /// task of its own.
    Waiting,
    /// The connection failed.
    Dead,
}

/// One non-blocking write of `frame`; what did not fit waits for room in
/// a task of its own, the connection busy until then.
fn write_frame(conn: &Rc<Conn>, frame: &[u8]) -> Written {
    let rest = match conn.stream.try_write(frame) {
        Ok(n) if n == frame.len() => return Written::Whole,
        Ok(n) => frame[n..].to_vec(),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => frame.to_vec(),
        Err(_) => {
            conn.dead.set(true);
            return Written::Dead;
        }
    };
    conn.busy.set(true);
    let conn = conn.clone();
    tokio::task::spawn_local(async move {
        let sent = tokio::time::timeout(WRITE_TIMEOUT, write_all(&conn.stream, &rest));
        conn.dead.set(!matches!(sent.await, Ok(Ok(()))));
        conn.busy.set(false);
    });
    Written::Waiting
}

/// A line to the parent process (the tool's `sockets --floor`), which reads
/// this process's standard output.
fn tell_parent(line: &str) {
    println!("{line}");
}

/// A running floor server, seen from the tool.
pub struct FloorServer {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    pub addr: SocketAddr,
}

/// What a floor server is started with.
pub struct FloorPlan<'a> {
    pub listen: IpAddr,
    pub room: &'a RoomId,
    pub tick_ms: u64,
    pub admit_per_tick: u32,
    pub waiting: u64,
    pub workers: u16,
    pub lifetime: Duration,
}

impl FloorServer {
    /// Starts this tool as a floor server and waits for its address.
    pub async fn start(plan: &FloorPlan<'_>) -> Result<Self, LoadError> {
        let exe = std::env::current_exe().map_err(LoadError::io("floor server"))?;
        let mut child = tokio::process::Command::new(exe)
            .arg("floor-server")
            .args(["--listen", &plan.listen.to_string()])
            .args(["--room", plan.room.as_str()])
            .args(["--tick-ms", &plan.tick_ms.to_string()])
            .args(["--admit-per-tick", &plan.admit_per_tick.to_string()])
            .args(["--waiting", &plan.waiting.to_string()])
            .args(["--workers", &plan.workers.to_string()])
            .args(["--lifetime-s", &plan.lifetime.as_secs().max(1).to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(LoadError::io("floor server"))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(CHILD_PATIENCE, lines.next_line()).await;
        let addr = match first {
            Ok(Ok(Some(line))) => line
                .strip_prefix(LISTENING)
                .and_then(|a| a.trim().parse::<SocketAddr>().ok())
                .ok_or_else(|| LoadError::Floor(format!("floor server said {line:?}")))?,
            Ok(Ok(None)) => {
                return Err(LoadError::Floor(
                    "floor server ended before listening".into(),
                ));
            }
            Ok(Err(e)) => return Err(LoadError::io("floor server")(e)),
            Err(_) => {
                return Err(LoadError::Floor(
                    "floor server did not listen in time".into(),
                ));
            }
        };
        Ok(Self { child, lines, addr })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Tells the floor server to stop (its standard input closes) and reads
    /// its report.
    pub async fn stop(mut self) -> Result<FloorReport, LoadError> {
        drop(self.child.stdin.take());
        let report = match tokio::time::timeout(CHILD_PATIENCE, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => serde_json::from_str::<FloorReport>(&line)
                .map_err(|e| LoadError::Floor(format!("floor server report {line:?}: {e}"))),
            Ok(Ok(None)) => Err(LoadError::Floor(
                "floor server ended without a report".into(),
            )),
            Ok(Err(e)) => Err(LoadError::io("floor server")(e)),
            Err(_) => Err(LoadError::Floor(
                "floor server did not report in time".into(),
            )),
        };
        if tokio::time::timeout(CHILD_PATIENCE, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        report
    }
}

/// The real figures divided by the floor's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratios {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

pub fn ratios(real: &Latency, floor: &Latency) -> Option<Ratios> {
    let ratio = |r: f64, f: f64| (f > 0.0).then(|| r / f);
    Some(Ratios {
        p50: ratio(real.p50_ms, floor.p50_ms)?,
        p99: ratio(real.p99_ms, floor.p99_ms)?,
        max: ratio(real.max_ms, floor.max_ms)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;

    #[test]
    fn ticks_fall_on_multiples_of_tick_ms() {
        assert_eq!(next_boundary(1_000, 1_000), 2_000);
        assert_eq!(next_boundary(1_999, 1_000), 2_000);
        assert_eq!(next_boundary(2_001, 500), 2_500);
    }

    #[test]
    fn positions_fall_by_the_admission_rate_and_stop_at_one() {
        assert_eq!(position_at(100, 0, 1), 100);
        assert_eq!(position_at(100, 3, 10), 70);
        assert_eq!(position_at(5, 3, 10), 1);
        assert_eq!(position_at(u64::MAX, u64::MAX, 2), 1);
    }

    #[test]
    fn frames_carry_their_length_in_the_shortest_header() {
        let room = RoomId::parse("floor").unwrap();
        let credentials = Credentials::from_secret("s");
        let facts = RoomFacts::of(&common::room_config(&room), None, false);
        let line = LineSummary {
            waiting: 19_000,
            rate_per_s: Some(1.0),
            tick_at: Some(1_700_000_000_123),
            ..LineSummary::default()
        };
        for ticket in ["t".to_string(), "x".repeat(70_000)] {
            let status = Status::build(
                StatusInput {
                    room: &room,
                    ticket: &ticket,
                    ret: TicketReturn::ReadFromTicket,
                    visitor: VisitorId(7),
                    state: PlaceState::Waiting {
                        order: Order::Joined(42),
                        position: 42,
                    },
                    line: &line,
                    facts: &facts,
                    priority: None,
                    notify: None,
                },
                &credentials,
            );
            let mut buf = Vec::new();
            let start = status_frame(&mut buf, &status);
            let frame = &buf[start..];
            assert_eq!(frame[0], 0x81);
            let (len, header) = match frame[1] {
                126 => (u16::from_be_bytes([frame[2], frame[3]]) as usize, 4),
                127 => (
                    u64::from_be_bytes(frame[2..10].try_into().unwrap()) as usize,
                    10,
                ),
                n => (n as usize, 2),
            };
            assert_eq!(len, frame.len() - header);
            assert_eq!(&frame[header..], status.to_json().as_bytes());
        }
    }

    #[test]
    fn the_key_is_found_whatever_its_case() {
        let head =
            b"GET /floor HTTP/1.1\r\nHost: x\r\nSec-WebSocket-Key: abc==\r\nUpgrade: websocket";
        assert_eq!(websocket_key(head), Some("abc=="));
        let head = b"GET / HTTP/1.1\r\nsec-websocket-key:  k \r\n";
        assert_eq!(websocket_key(head), Some("k"));
        assert_eq!(websocket_key(b"GET / HTTP/1.1\r\nHost: x"), None);
    }

    #[test]
    fn ratios_need_a_floor_above_zero() {
        let floor = Latency::from_micros(vec![1_000, 2_000, 4_000]).unwrap();
        let real = Latency::from_micros(vec![1_500, 3_000, 5_000]).unwrap();
        let r = ratios(&real, &floor).unwrap();
        assert_eq!((r.p50, r.p99, r.max), (1.5, 1.25, 1.25));
        let zero = Latency::from_micros(vec![0]).unwrap();
        assert_eq!(ratios(&real, &zero), None);
    }

    #[test]
    fn the_report_takes_the_slowest_writer_of_each_tick() {
        let t = |at_ms, took_us, written| WorkerTick {
            at_ms,
            took_us,
            written,
            waited: 0,
            skipped: 0,
        };
        let ticks = [
            t(1000, 5_000, 3),
            t(1000, 9_000, 2),
            t(2000, 1_000, 5),
            t(2000, 2_000, 0),
        ];
        let report = summarize(2, &ticks);
        assert_eq!(report.ticks, 2);
        assert_eq!(report.written, 10);
        let write = report.tick_write.unwrap();
        assert_eq!((write.count, write.max_ms), (2, 9.0));
    }

    /// A writer thread against a real WebSocket client: the handshake is
    /// accepted and the tick arrives as a `Status` with its time.
    #[tokio::test]
    async fn a_client_reads_a_status_per_tick() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let room = RoomId::parse("floor").unwrap();
        let shape = Arc::new(Shape {
            facts: RoomFacts::of(&common::room_config(&room), None, false),
            room,
            credentials: Credentials::from_secret("s"),
            admit_per_tick: 1,
            waiting: 10,
            rate_per_s: 1.0,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let (tick_tx, tick_rx) = watch::channel(None);
        let stats = Arc::new(Mutex::new(Vec::new()));
        let counts = Arc::new(Counts::default());
        let (thread_stats, thread_counts) = (stats.clone(), counts.clone());
        std::thread::spawn(move || writer_thread(rx, tick_rx, shape, thread_stats, thread_counts));
        let connecting = tokio_tungstenite::connect_async(format!("ws://{addr}/floor"));
        let client = tokio::spawn(connecting);
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        };
        tx.send(Accepted { stream, order: 3 }).unwrap();
        let (mut ws, _) = client.await.unwrap().unwrap();
        // The connection is registered once its handshake is answered;
        // tick until a status arrives.
        let at_ms = 1_700_000_000_000;
        let message = loop {
            tick_tx.send(Some(Tick { at_ms, elapsed: 1 })).unwrap();
            if let Ok(message) = tokio::time::timeout(Duration::from_millis(50), ws.next()).await {
                break message.unwrap().unwrap();
            }
        };
        let Message::Text(text) = message else {
            panic!("not text: {message:?}");
        };
        let status: Status = serde_json::from_str(&text).unwrap();
        assert_eq!(status.tick_at_ms, Some(at_ms));
        assert_eq!(status.position, Some(2));
        assert_eq!(status.waiting, 9);
        assert_eq!(status.state, waitroom::words::status::State::Waiting);
        assert_eq!(status.room, "floor");
        // The writer records its tick once the tick's loop is done, which
        // may be after the client has read the frame.
        let recorded = async {
            while stats.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), recorded)
            .await
            .expect("the tick is recorded");
        assert_eq!(counts.registered.load(Ordering::Relaxed), 1);
    }
}
