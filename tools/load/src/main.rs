//! `waitroom-load`: measures a waitroom node (or several) on this machine.
//!
//! `join` mode: joins per second against a baseline GET path in the same run.
//! `sockets` mode: how many WebSockets a node holds, the memory each costs,
//! and how late each tick's status reaches each socket.
//! `claims` mode: claims per second on a sale behind the gate, and a check
//! that exactly the stock was sold.
//! `idle` mode: what many rooms, nearly all empty, cost Redis and each node.
//! `opening` mode: a scheduled room's opening with a large pre-queue: the
//! longest store operation, joins around it, and when each socket has its
//! drawn position.
//! `sockets --floor` first measures the same fan-out with nothing of
//! waitroom in the way (a floor server: this tool again, as a child
//! process), and reports tick→socket latency as a ratio to it.
//! `drop` mode: a drop as it happens: visitors arriving at a steady rate
//! through the waiting page's own sequence (join, socket, admission, verify,
//! claim), and what each of them saw.
//! `autotune` mode: a drop that runs itself: a test origin of known
//! capacity (in this process), a room whose autotune follows its health
//! and whose schedule changes it at a set time, shoppers arriving faster
//! than the origin can take them; the rate admitted against the origin's
//! capacity, and its latency against the target, over the run's last
//! minutes.
//!
//! It only talks to loopback addresses, and every run is bounded in count
//! and time and stops by itself.
//!
//! What it sends and reads is typed by the server's own library
//! (`waitroom::words`): room ids and configs, the status message, the sale's
//! request, claim and view.

#![forbid(unsafe_code)]

mod autotune;
mod claims;
mod common;
mod drop;
mod error;
mod floor;
mod idle;
mod join;
mod loopback;
mod notify;
mod opening;
mod sockets;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use waitroom::words::RoomId;

use common::{
    MAX_COUNT, MAX_DURATION_S, MAX_HOLD_S, MAX_ROOMS, MAX_SOCKETS, MAX_VISITORS, MAX_WARMUP_S,
};
use error::{BadValue, LoadError};

#[derive(Debug, Parser)]
#[command(
    name = "waitroom-load",
    version,
    about = "Load generator for waitroom nodes on this machine (loopback only)"
)]
struct Cli {
    /// Print a one-line JSON summary on stdout (the human-readable lines go to stderr).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Joins per second (each join a new visitor), optionally against a baseline GET path.
    Join(JoinArgs),
    /// Holds N WebSockets; measures memory per socket and tick→socket latency.
    Sockets(SocketsArgs),
    /// Claims per second on a sale: joins V visitors for their passes, then
    /// claims one unit each, and checks exactly min(stock, V) succeeded.
    Claims(ClaimsArgs),
    /// Creates many rooms (a few of them busy), waits out the start-up
    /// burst, then measures Redis commands/s and CPU and each node's CPU.
    Idle(IdleArgs),
    /// Pre-queues V visitors in a room that opens later (S of them on
    /// WebSockets), then opens it and measures the longest store
    /// operation, joins around the opening, and when each socket had its
    /// drawn position.
    Opening(OpeningArgs),
    /// The floor server `sockets --floor` runs as its child (internal).
    #[command(hide = true)]
    FloorServer(floor::ServerArgs),
    /// A drop as it happens: V visitors arriving over T seconds, each doing
    /// what the waiting page does (join with its body, socket, admission,
    /// verify, one claim on the room's sale), and what each of them saw.
    Drop(DropArgs),
    /// A drop that runs itself: shoppers arriving at a steady rate for T
    /// seconds into a room whose autotune follows a test origin of known
    /// capacity (this tool serves it on 127.0.0.1), with a schedule entry
    /// at a set time; the admitted rate against the origin's capacity over
    /// the last minutes. The nodes need `--outbound-allow-networks 127.0.0.0/8`.
    Autotune(AutotuneArgs),
    /// What notifications cost: V visitors join a paused room and ask to
    /// be notified (Redis memory before and after), optionally V status
    /// polls (the node CPU floor), then the room is unpaused and every
    /// event followed to this tool's webhook receiver (time, retries,
    /// duplicates, each node's share, node and Redis CPU). The nodes need
    /// `--outbound-allow-networks 127.0.0.0/8` and `--notify-per-ip` of V.
    Notify(NotifyArgs),
}

#[derive(Debug, Args)]
struct NotifyArgs {
    #[command(flatten)]
    target: Target,
    /// Visitors who join and ask to be notified (spread round-robin over the nodes).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=MAX_VISITORS))]
    visitors: u64,
    /// Characters of each visitor's contact (0: none).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=200))]
    contact_chars: u64,
    /// Each visitor also sends a push subscription of a browser's size
    /// (endpoint 180 characters on fcm.googleapis.com, p256dh 87, auth 22).
    #[arg(long)]
    push: bool,
    /// asked: stop after the requests; outbox: the receiver refuses all,
    /// stop when the outbox holds every event; delivered: until every
    /// `admitted` event is delivered.
    #[arg(long, value_enum, default_value_t = notify::StopAfter::Delivered)]
    stop_after: notify::StopAfter,
    /// Percent of the event ids whose first attempt the receiver answers 500.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=100))]
    fail_first_percent: u32,
    /// Room config: visitors admitted per tick once unpaused.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    admit_per_tick: u32,
    /// Room config: tick interval in ms.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    tick_ms: u64,
    /// Before the unpause, one status poll per visitor (the node CPU floor).
    #[arg(long)]
    polls: bool,
    /// Requests in flight at once (joins, requests, polls).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    concurrency: u16,
    /// The nodes' Redis (loopback): memory, key sizes, CPU.
    #[arg(long)]
    redis_url: Option<String>,
    /// PID(s) of the node process(es), comma-separated: their CPU.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
    /// Longest wait for the events after the unpause, seconds (at most 900).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=900))]
    duration: u64,
}

#[derive(Debug, Args)]
struct Target {
    /// Node base URL(s), comma-separated; loopback only (127.x.x.x, localhost, [::1]).
    #[arg(
        long,
        env = "WAITROOM_LOAD_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    url: String,
    /// Room to join: 1 to 64 of a-z, 0-9 and -.
    #[arg(long, default_value = "load", value_parser = parse_room)]
    room: RoomId,
    /// The server's admin token (to create the room).
    #[arg(long, env = "WAITROOM_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
}

#[derive(Debug, Args)]
struct JoinArgs {
    #[command(flatten)]
    target: Target,
    /// Create the room first on every node: paused, abandon_after_s 86400,
    /// so every visitor waits and nothing is admitted.
    #[arg(long)]
    create_room: bool,
    /// Concurrent keep-alive connections (spread round-robin over the nodes).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=4096))]
    concurrency: u16,
    /// Stop after this many requests (at most 10,000,000; still stops at 300 s).
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    count: Option<u64>,
    /// Stop after this many seconds (default 10, at most 300).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_DURATION_S))]
    duration: Option<u64>,
    /// Target rate over all connections, like `2000` or `2000/s` (default: as fast as answered).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// First run the same load as GET requests to this path (e.g. /healthz) as the ceiling.
    #[arg(long)]
    path_baseline: Option<String>,
    /// PID(s) of the server process(es) on this machine, comma-separated:
    /// each phase then reports the server's CPU time per request.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
    /// Alternate the baseline and join phases this many times (1 to 10); the
    /// figures are summed over all rounds. Rounds × duration may not exceed 300 s.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10))]
    rounds: u32,
    /// Send each join with no body. By default a join carries what the
    /// waiting page sends: `{}` with `Content-Type: application/json`.
    #[arg(long)]
    no_body: bool,
}

#[derive(Debug, Args)]
struct SocketsArgs {
    #[command(flatten)]
    target: Target,
    /// WebSockets to open (each a new visitor; spread round-robin over the nodes).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=MAX_SOCKETS))]
    sockets: u64,
    /// Local source addresses 127.P.Q.1 … 127.P.Q.K (P.Q: the node's port) to spread the sockets over
    /// (each source address has ~28k ephemeral ports).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=254))]
    source_ips: u8,
    /// Seconds to hold every socket once all are open (at most 600).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=MAX_HOLD_S))]
    hold: u64,
    /// Seconds after the hold for ticks that ran during it to arrive (at most 30).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=30))]
    drain: u64,
    /// Room config when this run creates the room: visitors admitted per tick.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    admit_per_tick: u32,
    /// Room config when this run creates the room: tick interval in ms.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    tick_ms: u64,
    /// Concurrent keep-alive connections for the joins.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    join_concurrency: u16,
    /// PID(s) of the server process(es) on this machine, comma-separated:
    /// the hold then reports the server's CPU use.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
    /// WebSocket handshakes in flight at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=4096))]
    open_concurrency: u16,
    /// A directory shared by several tool processes run together: once its
    /// sockets are open, each process marks itself ready there and starts
    /// its hold only when `--barrier-parties` processes are ready (or after
    /// 300 s), so every process's hold sees every socket open.
    #[arg(long, requires = "barrier_parties")]
    barrier_dir: Option<std::path::PathBuf>,
    /// How many processes meet at `--barrier-dir` (this one included).
    #[arg(long, requires = "barrier_dir", value_parser = clap::value_parser!(u32).range(1..=64))]
    barrier_parties: Option<u32>,
    /// First measure the floor: the same number of sockets, held as long,
    /// to a floor server per node (a child process on the node's loopback
    /// address) that writes each tick the same status frames to every
    /// connection with nothing of waitroom in the way; then run as usual
    /// and report tick→socket latency as a ratio to the floor's. With
    /// --barrier-dir, the processes meet for the floor too, and each
    /// reports the figures over all of their sockets at the end.
    #[arg(long)]
    floor: bool,
    /// Writer threads in each floor server (default: one per core, as many
    /// as a node's HTTP workers by default; give the nodes' --workers if set).
    #[arg(long, requires = "floor", value_parser = clap::value_parser!(u16).range(1..=256))]
    floor_workers: Option<u16>,
}

#[derive(Debug, Args)]
struct ClaimsArgs {
    #[command(flatten)]
    target: Target,
    /// Visitors to join and claim for (visitor i on node i mod n; at most 1,000,000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=MAX_VISITORS))]
    visitors: u64,
    /// Units on sale (per_user_limit 1): fewer than --visitors to sell out.
    #[arg(long, default_value_t = 1_000_000_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    stock: u64,
    /// Concurrent keep-alive connections for the claims (spread round-robin over the nodes).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=4096))]
    concurrency: u16,
    /// Concurrent keep-alive connections for the joins.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    join_concurrency: u16,
    /// Stop sending claims after this many seconds (at most 300).
    #[arg(long, default_value_t = MAX_DURATION_S, value_parser = clap::value_parser!(u64).range(1..=MAX_DURATION_S))]
    duration: u64,
    /// PID(s) of the server process(es) on this machine, comma-separated:
    /// the claim phase then reports the server's CPU time per claim.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
}

#[derive(Debug, Args)]
struct IdleArgs {
    /// Node base URL(s), comma-separated; loopback only (127.x.x.x, localhost, [::1]).
    #[arg(
        long,
        env = "WAITROOM_LOAD_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    url: String,
    /// The server's admin token (to create the rooms).
    #[arg(long, env = "WAITROOM_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Rooms are named PREFIX-0 … PREFIX-(N-1); ones that exist are used as they are.
    #[arg(long, default_value = "idle")]
    room_prefix: String,
    /// Rooms to create (room i on node i mod n; at most 100,000).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=MAX_ROOMS))]
    rooms: u64,
    /// How many of them (the first ones) are busy: admit 1 per 1000 ms
    /// tick, max_active 1, so their visitors stay in line.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=MAX_ROOMS))]
    busy: u64,
    /// Visitors joined in each busy room, each holding a WebSocket
    /// (spread round-robin over the nodes).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100))]
    visitors_per_busy: u64,
    /// Room creations in flight at once.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    create_concurrency: u16,
    /// The Redis the nodes share (loopback only): its INFO gives commands/s
    /// and its CPU. Without it only the nodes are measured.
    #[arg(long)]
    redis_url: Option<String>,
    /// PID of each node's server process, comma-separated, in --url's order.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
    /// Seconds to wait before the window (each node asks every room once at
    /// start; an empty room is then asked again after a pause of 0.5–1 times
    /// the heartbeat's period, 1,333 s for 10,000 rooms). At most 1,200, so
    /// a window can hold the first heartbeat wave (667–1,333 s).
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u64).range(0..=MAX_WARMUP_S))]
    warmup: u64,
    /// Seconds measured (at most 600).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=MAX_HOLD_S))]
    window: u64,
    /// After the window, run `redis-benchmark -t set -n N -c 50` against
    /// the same Redis and report commands/s as a share of its SET/s (0: skip).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    ceiling_requests: u64,
}

#[derive(Debug, Args)]
struct OpeningArgs {
    #[command(flatten)]
    target: Target,
    /// Visitors to pre-queue (visitor i on node i mod n; at most 1,000,000).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=MAX_VISITORS))]
    visitors: u64,
    /// How many of them (the first ones) hold a WebSocket.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=MAX_SOCKETS))]
    sockets: u64,
    /// Local source addresses 127.P.Q.1 … 127.P.Q.K (P.Q: the node's port) to spread the sockets over.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=254))]
    source_ips: u8,
    /// Room config: visitors admitted per 1,000 ms tick once open.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    admit_per_tick: u32,
    /// Concurrent keep-alive connections for the pre-queue's joins.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    join_concurrency: u16,
    /// WebSocket handshakes in flight at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=4096))]
    open_concurrency: u16,
    /// Seconds from moving the opening to the opening (rounded up to a whole second).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    lead: u64,
    /// Seconds measured after the opening.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=MAX_DURATION_S))]
    after: u64,
    /// New visitors joining per second throughout, timed (0: none).
    #[arg(long, default_value = "200", value_parser = parse_probe_rate)]
    probe_rate: f64,
    /// The nodes' Redis (loopback only): its slow log gives the longest
    /// command. Without it, the memory store's histogram does.
    #[arg(long)]
    redis_url: Option<String>,
}

#[derive(Debug, Args)]
struct DropArgs {
    #[command(flatten)]
    target: Target,
    /// Visitors arriving (visitor i on node i mod n; at most 1,000,000).
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=MAX_VISITORS))]
    visitors: u64,
    /// Seconds over which they arrive, at a steady rate (at most 300).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=MAX_DURATION_S))]
    arrive_over: u64,
    /// Units on sale (per_user_limit 1): fewer than --visitors to sell out.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    stock: u64,
    /// Room config: visitors admitted per tick. The defaults (3,500 a
    /// second against 5,000 arriving) build a line of about 13,000 by the
    /// last arrival (one socket each, within one process's 20,000
    /// descriptors) that drains about 4 s later.
    #[arg(long, default_value_t = 1_750, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    admit_per_tick: u32,
    /// Room config: tick interval in ms.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    tick_ms: u64,
    /// Room config: the most visitors holding a pass at once (default: no
    /// cap). A pass holds its slot until it expires (--pass-ttl-s).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_active: Option<u64>,
    /// Room config: how long a pass lasts, in seconds.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pass_ttl_s: u64,
    /// Seconds from the first arrival until every visitor still busy gives
    /// up (at most 300); more than --arrive-over.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(2..=MAX_DURATION_S))]
    duration: u64,
    /// Local source addresses 127.P.Q.1 … 127.P.Q.K (P.Q: the node's port) to spread the sockets
    /// over (one source address has ~28k ephemeral ports, and every visitor
    /// in line opens a socket).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=254))]
    source_ips: u8,
    /// HTTP requests (joins, polls, verifies, claims) in flight at once,
    /// over keep-alive connections; a visitor waiting for one is late, and
    /// its times say so.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u16).range(1..=4096))]
    http_concurrency: u16,
    /// WebSocket handshakes in flight at once.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u16).range(1..=4096))]
    open_concurrency: u16,
    /// PID(s) of the server process(es) on this machine, comma-separated:
    /// the run then reports their CPU use.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
}

/// The longest `autotune` run.
const MAX_AUTOTUNE_S: u64 = 900;

#[derive(Debug, Args)]
struct AutotuneArgs {
    #[command(flatten)]
    target: Target,
    /// Shoppers arriving a second, throughout the run (like 14 or 14/s).
    #[arg(long, default_value = "14", value_parser = parse_rate)]
    arrival_rate: f64,
    /// Seconds from the first arrival to the end (at most 900): then every
    /// shopper still busy gives up.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(2..=MAX_AUTOTUNE_S))]
    duration: u64,
    /// The figures are over the run's last this many seconds (at most --duration).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=MAX_AUTOTUNE_S))]
    window: u64,
    /// Room config: visitors admitted per tick at first. The defaults (12
    /// a second) are 1.2 times what the origin takes.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    admit_per_tick: u32,
    /// Room config: tick interval in ms.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    tick_ms: u64,
    /// When the schedule's entry falls due, in seconds from the first arrival.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=MAX_AUTOTUNE_S))]
    phase_at: u64,
    /// The entry's new admit_per_tick (0: the entry leaves it as it is).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    phase_admit_per_tick: u32,
    /// The entry's notice.
    #[arg(long, default_value = "The sale is open to everyone.")]
    phase_notice: String,
    /// Autotune's latency_target_ms (10 to 60000).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    latency_target_ms: u64,
    /// Autotune's error_rate_max (0 to 1).
    #[arg(long, default_value_t = 0.05)]
    error_rate_max: f64,
    /// Autotune's min_per_tick.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    min_per_tick: u32,
    /// The test origin: requests it serves at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    origin_workers: u32,
    /// The test origin: how long each request holds its worker, in ms.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    origin_service_ms: u64,
    /// The test origin: requests that may wait for a worker; past them it
    /// answers 503 at once.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    origin_queue_max: u64,
    /// Requests each admitted shopper sends the origin's checkout, one after another.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100))]
    checkouts: u32,
    /// Local source addresses 127.P.Q.1 … 127.P.Q.K (P.Q: the node's port) to spread the sockets over.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=254))]
    source_ips: u8,
    /// HTTP requests to the nodes (joins, polls, verifies) in flight at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=4096))]
    http_concurrency: u16,
    /// WebSocket handshakes in flight at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=4096))]
    open_concurrency: u16,
    /// PID(s) of the server process(es) on this machine, comma-separated:
    /// the run then reports their CPU use.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
}

fn parse_probe_rate(raw: &str) -> Result<f64, BadValue> {
    if raw.trim() == "0" {
        return Ok(0.0);
    }
    parse_rate(raw)
}

fn parse_rate(raw: &str) -> Result<f64, BadValue> {
    let number = raw.trim().trim_end_matches("/s");
    match number.parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate <= 1_000_000.0 => Ok(rate),
        _ => Err(BadValue {
            value: raw.into(),
            expected: "give requests per second, more than 0 and at most 1000000, like 2000/s",
        }),
    }
}

fn parse_room(raw: &str) -> Result<RoomId, BadValue> {
    RoomId::parse(raw).ok_or_else(|| BadValue {
        value: raw.into(),
        expected: "a room id is 1 to 64 of a-z, 0-9 and -",
    })
}

fn admin_token(target: &Target) -> Result<&str, LoadError> {
    target.admin_token.as_deref().ok_or_else(|| {
        LoadError::Usage(
            "--admin-token (or WAITROOM_ADMIN_TOKEN) is needed to create the room".into(),
        )
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let open_files_limit = common::raise_open_files_limit();
    let result = match cli.mode {
        Mode::Join(args) => run_join(args, cli.json).await,
        Mode::Sockets(args) => run_sockets(args, cli.json, open_files_limit).await,
        Mode::Claims(args) => run_claims(args, cli.json).await,
        Mode::Idle(args) => run_idle(args, cli.json).await,
        Mode::Opening(args) => run_opening(args, cli.json).await,
        Mode::FloorServer(args) => floor::serve(args).await,
        Mode::Drop(args) => run_drop(args, cli.json, open_files_limit).await,
        Mode::Autotune(args) => run_autotune(args, cli.json).await,
        Mode::Notify(args) => run_notify(args, cli.json).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("waitroom-load: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run_join(args: JoinArgs, json: bool) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.target.url)?;
    if let Some(path) = &args.path_baseline
        && !path.starts_with('/')
    {
        return Err(LoadError::Usage(format!(
            "--path-baseline {path:?} must start with /"
        )));
    }
    let token = if args.create_room {
        admin_token(&args.target)?
    } else {
        ""
    };
    // Each phase of each round stops at its duration; all of them together
    // never exceed MAX_DURATION_S per kind of phase.
    let duration = match args.count {
        Some(_) => MAX_DURATION_S / args.rounds as u64,
        None => args.duration.unwrap_or(10),
    };
    if duration * args.rounds as u64 > MAX_DURATION_S {
        return Err(LoadError::Usage(format!(
            "--rounds {} × --duration {duration} s exceeds {MAX_DURATION_S} s",
            args.rounds
        )));
    }
    let plan = join::Plan {
        concurrency: args.concurrency as usize,
        count: args.count.unwrap_or(MAX_COUNT),
        duration: Duration::from_secs(duration),
        rate: args.rate,
        counted: args.count.is_some(),
        rounds: args.rounds,
    };
    join::run(join::JoinRun {
        nodes: &nodes,
        room: &args.target.room,
        admin_token: token,
        create_room: args.create_room,
        plan,
        baseline_path: args.path_baseline.as_deref(),
        server_pids: &args.server_pid,
        body: !args.no_body,
        json,
    })
    .await
}

async fn run_sockets(
    args: SocketsArgs,
    json: bool,
    open_files_limit: u64,
) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.target.url)?;
    sockets::run(sockets::SocketsRun {
        nodes: &nodes,
        room: &args.target.room,
        admin_token: admin_token(&args.target)?,
        sockets: args.sockets,
        source_ips: args.source_ips,
        hold: Duration::from_secs(args.hold),
        drain: Duration::from_secs(args.drain),
        admit_per_tick: args.admit_per_tick,
        tick_ms: args.tick_ms,
        join_concurrency: args.join_concurrency as usize,
        open_concurrency: args.open_concurrency as usize,
        open_files_limit,
        server_pids: &args.server_pid,
        barrier: args.barrier_dir.zip(args.barrier_parties),
        floor_workers: args.floor.then(|| {
            args.floor_workers.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, |n| n.get().min(256) as u16)
            })
        }),
        json,
    })
    .await
}

async fn run_claims(args: ClaimsArgs, json: bool) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.target.url)?;
    claims::run(claims::ClaimsRun {
        nodes: &nodes,
        room: &args.target.room,
        admin_token: admin_token(&args.target)?,
        visitors: args.visitors,
        stock: args.stock,
        concurrency: args.concurrency as usize,
        join_concurrency: args.join_concurrency as usize,
        claim_limit: Duration::from_secs(args.duration),
        server_pids: &args.server_pid,
        json,
    })
    .await
}

async fn run_idle(args: IdleArgs, json: bool) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.url)?;
    let token = args.admin_token.as_deref().ok_or_else(|| {
        LoadError::Usage(
            "--admin-token (or WAITROOM_ADMIN_TOKEN) is needed to create the rooms".into(),
        )
    })?;
    if args.busy * args.visitors_per_busy > MAX_SOCKETS {
        return Err(LoadError::Usage(format!(
            "--busy × --visitors-per-busy is more than {MAX_SOCKETS} sockets"
        )));
    }
    idle::run(idle::IdleRun {
        nodes: &nodes,
        admin_token: token,
        prefix: &args.room_prefix,
        rooms: args.rooms,
        busy: args.busy,
        visitors_per_busy: args.visitors_per_busy,
        create_concurrency: args.create_concurrency as usize,
        redis_url: args.redis_url.as_deref(),
        server_pids: &args.server_pid,
        warmup: Duration::from_secs(args.warmup),
        window: Duration::from_secs(args.window),
        ceiling_requests: args.ceiling_requests,
        json,
    })
    .await
}

async fn run_opening(args: OpeningArgs, json: bool) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.target.url)?;
    if args.sockets > args.visitors {
        return Err(LoadError::Usage(
            "--sockets may not exceed --visitors".into(),
        ));
    }
    opening::run(opening::OpeningRun {
        nodes: &nodes,
        room: &args.target.room,
        admin_token: admin_token(&args.target)?,
        visitors: args.visitors,
        sockets: args.sockets,
        source_ips: args.source_ips,
        admit_per_tick: args.admit_per_tick,
        join_concurrency: args.join_concurrency as usize,
        open_concurrency: args.open_concurrency as usize,
        lead: Duration::from_secs(args.lead),
        after: Duration::from_secs(args.after),
        probe_rate: args.probe_rate,
        redis_url: args.redis_url.as_deref(),
        json,
    })
    .await
}

async fn run_drop(args: DropArgs, json: bool, open_files_limit: u64) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.target.url)?;
    if args.duration <= args.arrive_over {
        return Err(LoadError::Usage(format!(
            "--duration {} s must be longer than --arrive-over {} s (the line needs time to drain)",
            args.duration, args.arrive_over
        )));
    }
    drop::run(drop::DropRun {
        nodes: &nodes,
        room: &args.target.room,
        admin_token: admin_token(&args.target)?,
        visitors: args.visitors,
        arrive_over: Duration::from_secs(args.arrive_over),
        stock: args.stock,
        admit_per_tick: args.admit_per_tick,
        tick_ms: args.tick_ms,
        max_active: args.max_active,
        pass_ttl_s: args.pass_ttl_s,
        duration: Duration::from_secs(args.duration),
        source_ips: args.source_ips,
        http_concurrency: args.http_concurrency as usize,
        open_concurrency: args.open_concurrency as usize,
        open_files_limit,
        server_pids: &args.server_pid,
        json,
    })
    .await
}

async fn run_notify(args: NotifyArgs, json: bool) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.target.url)?;
    notify::run(notify::NotifyRun {
        nodes: &nodes,
        room: &args.target.room,
        admin_token: admin_token(&args.target)?,
        visitors: args.visitors,
        contact_chars: args.contact_chars as usize,
        push: args.push,
        stop_after: args.stop_after,
        fail_first_percent: args.fail_first_percent,
        admit_per_tick: args.admit_per_tick,
        tick_ms: args.tick_ms,
        polls: args.polls,
        concurrency: args.concurrency as usize,
        redis_url: args.redis_url.as_deref(),
        server_pids: &args.server_pid,
        duration: Duration::from_secs(args.duration),
        json,
    })
    .await
}

async fn run_autotune(args: AutotuneArgs, json: bool) -> Result<(), LoadError> {
    let nodes = common::parse_nodes(&args.target.url)?;
    if args.window > args.duration || args.phase_at >= args.duration {
        return Err(LoadError::Usage(format!(
            "--window {} s and --phase-at {} s must fall within --duration {} s",
            args.window, args.phase_at, args.duration
        )));
    }
    if !(0.0..=1.0).contains(&args.error_rate_max) {
        return Err(LoadError::Usage(
            "--error-rate-max is between 0 and 1".into(),
        ));
    }
    if args.arrival_rate * args.duration as f64 > MAX_VISITORS as f64 {
        return Err(LoadError::Usage(format!(
            "--arrival-rate × --duration is more than {MAX_VISITORS} shoppers"
        )));
    }
    autotune::run(autotune::AutotuneRun {
        nodes: &nodes,
        room: &args.target.room,
        admin_token: admin_token(&args.target)?,
        arrival_rate: args.arrival_rate,
        duration: Duration::from_secs(args.duration),
        window: Duration::from_secs(args.window),
        admit_per_tick: args.admit_per_tick,
        tick_ms: args.tick_ms,
        phase: autotune::Phase {
            at: Duration::from_secs(args.phase_at),
            admit_per_tick: (args.phase_admit_per_tick > 0).then_some(args.phase_admit_per_tick),
            notice: args.phase_notice,
        },
        latency_target_ms: args.latency_target_ms,
        error_rate_max: args.error_rate_max,
        min_per_tick: args.min_per_tick,
        capacity: autotune::Capacity {
            workers: args.origin_workers,
            service: Duration::from_millis(args.origin_service_ms),
            queue_max: args.origin_queue_max as usize,
        },
        checkouts: args.checkouts,
        source_ips: args.source_ips,
        http_concurrency: args.http_concurrency as usize,
        open_concurrency: args.open_concurrency as usize,
        server_pids: &args.server_pid,
        json,
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn rates_take_an_optional_per_second() {
        assert_eq!(parse_rate("2000/s"), Ok(2000.0));
        assert_eq!(parse_rate("1.5"), Ok(1.5));
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn runs_are_bounded() {
        assert!(Cli::try_parse_from(["w", "join", "--count", "10000001"]).is_err());
        assert!(Cli::try_parse_from(["w", "join", "--duration", "301"]).is_err());
        assert!(Cli::try_parse_from(["w", "join", "--count", "5", "--duration", "5"]).is_err());
        assert!(Cli::try_parse_from(["w", "sockets", "--hold", "601"]).is_err());
        assert!(Cli::try_parse_from(["w", "claims", "--visitors", "1000001"]).is_err());
        assert!(Cli::try_parse_from(["w", "claims", "--duration", "301"]).is_err());
        assert!(Cli::try_parse_from(["w", "sockets", "--barrier-dir", "/tmp/x"]).is_err());
        assert!(Cli::try_parse_from(["w", "sockets", "--floor-workers", "2"]).is_err());
        assert!(Cli::try_parse_from(["w", "sockets", "--floor", "--floor-workers", "0"]).is_err());
        assert!(Cli::try_parse_from(["w", "idle", "--rooms", "100001"]).is_err());
        assert!(Cli::try_parse_from(["w", "idle", "--window", "601"]).is_err());
        // A warm-up may reach past the first heartbeat wave's start (667 s).
        assert!(Cli::try_parse_from(["w", "idle", "--warmup", "1200"]).is_ok());
        assert!(Cli::try_parse_from(["w", "idle", "--warmup", "1201"]).is_err());
        assert!(Cli::try_parse_from(["w", "opening", "--visitors", "1000001"]).is_err());
        assert!(Cli::try_parse_from(["w", "opening", "--after", "301"]).is_err());
        assert!(Cli::try_parse_from(["w", "opening", "--probe-rate", "0"]).is_ok());
        assert!(Cli::try_parse_from(["w", "drop", "--visitors", "1000001"]).is_err());
        assert!(Cli::try_parse_from(["w", "drop", "--duration", "301"]).is_err());
        assert!(Cli::try_parse_from(["w", "drop", "--arrive-over", "301"]).is_err());
        assert!(Cli::try_parse_from(["w", "drop", "--max-active", "0"]).is_err());
        assert!(Cli::try_parse_from(["w", "autotune", "--duration", "901"]).is_err());
        assert!(Cli::try_parse_from(["w", "autotune", "--duration", "900"]).is_ok());
        assert!(Cli::try_parse_from(["w", "autotune", "--arrival-rate", "0"]).is_err());
    }

    #[test]
    fn rooms_are_the_servers_slugs() {
        assert!(Cli::try_parse_from(["w", "join", "--room", "spring-sale-2"]).is_ok());
        assert!(Cli::try_parse_from(["w", "join", "--room", "Spring Sale"]).is_err());
    }
}
