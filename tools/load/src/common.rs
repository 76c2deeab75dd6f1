//! What every mode shares: the loopback-only node list (and Redis), the
//! bounds every run keeps, latency summaries, the admin calls, a join's
//! ticket, and reading `/metrics`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use waitroom::words::status::Status;
use waitroom::words::{RoomConfig, RoomId};

use crate::error::{Failure, LoadError};

/// The most requests one join run sends, whatever `--count` says.
pub const MAX_COUNT: u64 = 10_000_000;
/// The longest a join run may last, whatever `--duration` or `--count` say.
pub const MAX_DURATION_S: u64 = 300;
/// The longest sockets may be held.
pub const MAX_HOLD_S: u64 = 600;
/// The longest `idle --warmup`: past the first heartbeat wave's start.
pub const MAX_WARMUP_S: u64 = 1_200;
/// The most sockets one run opens (the open-files limit usually stops it
/// well before this).
pub const MAX_SOCKETS: u64 = 200_000;
/// The most rooms one idle run creates.
pub const MAX_ROOMS: u64 = 100_000;
/// The most visitors one claims run joins and claims for.
pub const MAX_VISITORS: u64 = 1_000_000;
/// How long any single HTTP request may take before it counts as an error.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// One server node: the base URL for HTTP, the address for raw TCP.
#[derive(Debug, Clone)]
pub struct Node {
    /// `http://host:port`, no trailing slash.
    pub base: String,
    /// What the host resolved to (always a loopback address).
    pub addr: SocketAddr,
    /// `host:port` as given, for the WebSocket URL.
    pub authority: String,
}

/// Parses `--url` (comma-separated) and refuses anything that is not
/// loopback: this tool generates load, so it only ever aims at this machine.
pub fn parse_nodes(list: &str) -> Result<Vec<Node>, LoadError> {
    let mut nodes = Vec::new();
    for raw in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        nodes.push(parse_node(raw)?);
    }
    if nodes.is_empty() {
        return Err(LoadError::Usage("--url names no node".into()));
    }
    Ok(nodes)
}

fn parse_node(raw: &str) -> Result<Node, LoadError> {
    let url =
        reqwest::Url::parse(raw).map_err(|e| LoadError::Usage(format!("--url {raw:?}: {e}")))?;
    if url.scheme() != "http" {
        return Err(LoadError::Usage(format!(
            "--url {raw:?}: only http:// is supported (the server's loopback listener)"
        )));
    }
    if !(url.path().is_empty() || url.path() == "/") || url.query().is_some() {
        return Err(LoadError::Usage(format!(
            "--url {raw:?}: give the node's base URL only, like http://127.0.0.1:8080"
        )));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let host = url.host_str().unwrap_or_default();
    let literal = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>();
    let addr = match literal {
        Ok(ip) if ip.is_loopback() => SocketAddr::new(ip, port),
        Err(_) if host.eq_ignore_ascii_case("localhost") => ("localhost", port)
            .to_socket_addrs()
            .map_err(LoadError::io(format!(
                "--url {raw:?}: cannot resolve localhost"
            )))?
            .find(|a| a.ip().is_loopback())
            .ok_or_else(|| {
                LoadError::Usage(format!(
                    "--url {raw:?}: localhost resolves to no loopback address"
                ))
            })?,
        _ => {
            return Err(LoadError::Usage(format!(
                "--url {raw:?}: refused: this tool only talks to loopback \
                 (127.x.x.x, localhost or [::1])"
            )));
        }
    };
    let authority = format!("{host}:{port}");
    Ok(Node {
        base: format!("http://{authority}"),
        addr,
        authority,
    })
}

/// Checks that a Redis URL points at this machine; returns host and port.
pub fn loopback_redis(raw: &str) -> Result<(String, u16), LoadError> {
    let url = reqwest::Url::parse(raw)
        .map_err(|e| LoadError::Usage(format!("--redis-url {raw:?}: {e}")))?;
    if url.scheme() != "redis" {
        return Err(LoadError::Usage(format!(
            "--redis-url {raw:?}: give a redis:// URL"
        )));
    }
    let host = url.host_str().unwrap_or_default().to_string();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    };
    if !loopback {
        return Err(LoadError::Usage(format!(
            "--redis-url {raw:?}: refused: this tool only talks to loopback \
             (127.x.x.x, localhost or [::1])"
        )));
    }
    Ok((bare.to_string(), url.port().unwrap_or(6379)))
}

/// A connection to `--redis-url`, if given (loopback only).
pub async fn connect_redis(
    redis_url: Option<&str>,
) -> Result<Option<redis::aio::MultiplexedConnection>, LoadError> {
    let Some(url) = redis_url else {
        return Ok(None);
    };
    loopback_redis(url)?;
    let client = redis::Client::open(url).map_err(LoadError::redis("--redis-url"))?;
    let connection = client
        .get_multiplexed_async_connection()
        .await
        .map_err(LoadError::redis("--redis-url"))?;
    Ok(Some(connection))
}

/// Raises this process's open-files soft limit to the hard limit; returns
/// the limit now in force.
pub fn raise_open_files_limit() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(error) => {
            eprintln!("warning: could not raise the open-files limit: {error}");
            rlimit::getrlimit(rlimit::Resource::NOFILE)
                .map(|(soft, _)| soft)
                .unwrap_or(0)
        }
    }
}

/// A client for this tool: keep-alive, no proxy (loopback only, even when
/// `HTTP_PROXY` is set), a bounded wait, no cookies (each join is a new visitor).
pub fn http_client(idle_per_host: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(idle_per_host)
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("a plain HTTP client builds")
}

/// Names a failed request by its cause, so errors group into a few kinds.
pub fn error_kind(error: &reqwest::Error) -> String {
    let what = if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "connect"
    } else if error.is_body() || error.is_decode() {
        "body"
    } else {
        "request"
    };
    let mut root: &dyn std::error::Error = error;
    while let Some(source) = root.source() {
        root = source;
    }
    format!("{what}: {root}")
}

/// Counts of errors by kind.
pub type ErrorKinds = BTreeMap<String, u64>;

/// How a join phase went: who of those asked for got what they came for
/// (a ticket, a pass), the errors by kind, and how long it took.
pub struct Joins {
    pub joined: u64,
    pub errors: ErrorKinds,
    pub seconds: f64,
}

impl Joins {
    /// Counts the joins that got something since `started`, says so in the
    /// line `said` makes of the count and the seconds, and lists the errors.
    pub fn tally<T>(
        json: bool,
        got: &[Option<T>],
        errors: ErrorKinds,
        started: Instant,
        said: impl FnOnce(u64, f64) -> String,
    ) -> Self {
        let seconds = started.elapsed().as_secs_f64();
        let joined = got.iter().filter(|g| g.is_some()).count() as u64;
        say(json, said(joined, seconds));
        for (kind, n) in &errors {
            say(json, format!("  {n} × {kind}"));
        }
        Joins {
            joined,
            errors,
            seconds,
        }
    }
}

pub fn count(kinds: &mut ErrorKinds, kind: impl Into<String>) {
    *kinds.entry(kind.into()).or_default() += 1;
}

pub fn merge(into: &mut ErrorKinds, from: ErrorKinds) {
    for (kind, n) in from {
        *into.entry(kind).or_default() += n;
    }
}

/// What one worker made: items with their indexes, and its errors.
pub type WorkerYield<T> = (Vec<(usize, T)>, ErrorKinds);

/// Gathers what workers made, each item at its index among `n`; an index no
/// worker reached (the phase ran out of time) is counted as not sent.
pub async fn gather_indexed<T>(
    workers: Vec<tokio::task::JoinHandle<WorkerYield<T>>>,
    n: usize,
) -> (Vec<Option<T>>, ErrorKinds) {
    let mut items: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut errors = ErrorKinds::new();
    for worker in workers {
        match worker.await {
            Ok((made, worker_errors)) => {
                for (index, item) in made {
                    items[index] = Some(item);
                }
                merge(&mut errors, worker_errors);
            }
            Err(error) => count(&mut errors, format!("worker failed: {error}")),
        }
    }
    let missing = items.iter().filter(|i| i.is_none()).count() as u64;
    let counted: u64 = errors.values().sum();
    if missing > counted {
        errors.insert("not sent: join phase time limit".into(), missing - counted);
    }
    (items, errors)
}

/// p50, p99 and max of a set of durations.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Latency {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// From durations in microseconds (nearest-rank percentiles).
    pub fn from_micros(mut micros: Vec<u64>) -> Option<Self> {
        if micros.is_empty() {
            return None;
        }
        micros.sort_unstable();
        let rank = |p: f64| {
            let index = ((p * micros.len() as f64).ceil() as usize).max(1) - 1;
            micros[index.min(micros.len() - 1)] as f64 / 1000.0
        };
        Some(Self {
            count: micros.len(),
            p50_ms: rank(0.50),
            p99_ms: rank(0.99),
            max_ms: *micros.last().expect("not empty") as f64 / 1000.0,
        })
    }
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.p50_ms, self.p99_ms, self.max_ms
        )
    }
}

/// The body of `POST /api/admin/rooms`: the room's id beside its config's fields.
#[derive(Serialize)]
struct NewRoom<'a> {
    id: &'a RoomId,
    #[serde(flatten)]
    config: &'a RoomConfig,
}

/// A config for a room this tool creates: the server's defaults, named
/// after the room and sending admitted visitors to `/`.
pub fn room_config(room: &RoomId) -> RoomConfig {
    RoomConfig::new(format!("load test {room}"), "/")
}

/// Creates `room` on every node in turn, saying of each that it was created
/// (`how`) or was there already, to be used as it is; whether each was
/// created.
pub async fn create_room_on_every_node(
    http: &reqwest::Client,
    nodes: &[Node],
    admin_token: &str,
    room: &RoomId,
    config: &RoomConfig,
    json: bool,
    how: &str,
) -> Result<Vec<bool>, LoadError> {
    let mut created = Vec::new();
    for node in nodes {
        let made = create_room(http, node, admin_token, room, config).await?;
        let what = if made {
            format!("created ({how})")
        } else {
            "already exists: using it as it is".into()
        };
        say(json, format!("{}: room {room} {what}", node.base));
        created.push(made);
    }
    Ok(created)
}

/// A room new on the first node that every other node finds there (one
/// shared store), or the run would be several runs; `more`: fields besides
/// the config's (as [`create_room_with`]); `mode` names the mode
/// for the error, `described` the config for the line said.
#[allow(clippy::too_many_arguments)]
pub async fn create_shared_room(
    http: &reqwest::Client,
    nodes: &[Node],
    admin_token: &str,
    room: &RoomId,
    config: &RoomConfig,
    more: &serde_json::Map<String, serde_json::Value>,
    mode: &str,
    described: &str,
    json: bool,
) -> Result<(), LoadError> {
    for (i, node) in nodes.iter().enumerate() {
        let created = create_room_with(http, node, admin_token, room, config, more.clone()).await?;
        match (i, created) {
            (0, false) => {
                return Err(LoadError::Usage(format!(
                    "{}: room {room} already exists; {mode} mode needs a new room (give another --room)",
                    node.base
                )));
            }
            (0, true) => say(
                json,
                format!("{}: room {room} created: {described}", node.base),
            ),
            (_, true) => {
                return Err(LoadError::Setup(format!(
                    "{}: room {room} was created anew there: that node has a store of its own; \
                     a run over several nodes needs them all on one Redis (--redis-url)",
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

/// Creates `room` on `node`. `Ok(true)`: created; `Ok(false)`: it existed.
pub async fn create_room(
    http: &reqwest::Client,
    node: &Node,
    admin_token: &str,
    room: &RoomId,
    config: &RoomConfig,
) -> Result<bool, LoadError> {
    create_room_with(
        http,
        node,
        admin_token,
        room,
        config,
        serde_json::Map::new(),
    )
    .await
}

/// [`create_room`] with `more` fields beside the config's: those a
/// `RoomConfig` does not carry as sent (its `schedule` is never read back
/// from one, so it is sent as JSON).
pub async fn create_room_with(
    http: &reqwest::Client,
    node: &Node,
    admin_token: &str,
    room: &RoomId,
    config: &RoomConfig,
    more: serde_json::Map<String, serde_json::Value>,
) -> Result<bool, LoadError> {
    let mut body = serde_json::to_value(NewRoom { id: room, config })
        .map_err(|e| LoadError::Setup(format!("the room's config: {e}")))?;
    if let Some(fields) = body.as_object_mut() {
        fields.extend(more);
    }
    let response = http
        .post(format!("{}/api/admin/rooms", node.base))
        .bearer_auth(admin_token)
        .json(&body)
        .send()
        .await
        .map_err(|e| {
            LoadError::Node(format!(
                "{}: creating the room: {}",
                node.base,
                error_kind(&e)
            ))
        })?;
    match response.status().as_u16() {
        201 => Ok(true),
        409 => Ok(false),
        status => {
            let text = response.text().await.unwrap_or_default();
            Err(LoadError::Node(format!(
                "{}: creating the room answered {status}: {text}",
                node.base
            )))
        }
    }
}

/// Sends one join (`request`, a POST to a room's join) and reads the new
/// visitor's ticket from the status it answers.
pub async fn join_ticket(request: reqwest::RequestBuilder) -> Result<String, Failure> {
    match request.send().await {
        Ok(response) if response.status() == 200 => {
            let body = response.bytes().await?;
            serde_json::from_slice::<Status>(&body)
                .map(|status| status.ticket.to_string())
                .map_err(|e| Failure(format!("join: not a status: {e}")))
        }
        Ok(response) => Err(Failure(format!("join: HTTP {}", response.status()))),
        Err(error) => Err(Failure::from(error)),
    }
}

/// The figures this tool reads from a node's `/metrics`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Scrape {
    pub resident_memory_bytes: Option<u64>,
    pub sockets_open: Option<u64>,
    pub open_fds: Option<u64>,
    /// How many times the node asked the store for a tick (builds before
    /// the promoter counted them: none).
    pub ticks_asked_total: Option<u64>,
}

/// Reads `/metrics` on a fresh connection (so it holds no descriptor after),
/// waiting at most 3 s: a node at its open-files limit cannot accept it.
pub async fn scrape(node: &Node) -> Result<Scrape, LoadError> {
    Ok(parse_metrics(&metrics_text(node).await?))
}

/// A node's `/metrics` text, read as `scrape` reads it.
pub async fn metrics_text(node: &Node) -> Result<String, LoadError> {
    let http = http_client(0);
    let failed =
        |e: reqwest::Error| LoadError::Node(format!("{}/metrics: {}", node.base, error_kind(&e)));
    http.get(format!("{}/metrics", node.base))
        .timeout(Duration::from_secs(3))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(failed)?
        .text()
        .await
        .map_err(failed)
}

/// The cumulative buckets of histogram `name` in a `/metrics` text:
/// (its other labels as written, like `op="join"`, or empty; upper bound
/// in seconds; count); `+Inf` is infinity.
pub fn histogram_buckets(text: &str, name: &str) -> Vec<(String, f64, u64)> {
    let prefix = format!("{name}_bucket{{");
    text.lines()
        .filter_map(|line| {
            let (labels, count) = line.strip_prefix(&prefix)?.split_once("} ")?;
            let mut le = None;
            let mut others = Vec::new();
            for label in labels.split(',') {
                match label.strip_prefix("le=") {
                    Some(bound) => le = Some(bound.trim_matches('"')),
                    None => others.push(label),
                }
            }
            let le = match le? {
                "+Inf" => f64::INFINITY,
                finite => finite.parse().ok()?,
            };
            Some((
                others.join(","),
                le,
                count.trim().parse::<f64>().ok()? as u64,
            ))
        })
        .collect()
}

pub fn parse_metrics(text: &str) -> Scrape {
    let mut scrape = Scrape::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let value = Some(value.max(0.0) as u64);
        match name.trim() {
            "process_resident_memory_bytes" => scrape.resident_memory_bytes = value,
            "waitroom_sockets_open" => scrape.sockets_open = value,
            "process_open_fds" => scrape.open_fds = value,
            "waitroom_ticks_asked_total" => scrape.ticks_asked_total = value,
            _ => {}
        }
    }
    scrape
}

/// CPU time used so far, in seconds: by the whole machine (busy, all
/// cores), by this process, and by the server processes named with
/// `--server-pid`. The tool shares the machine with the server it measures,
/// so every phase says who used the CPU.
#[derive(Debug, Clone)]
pub struct CpuMark {
    machine_busy_s: f64,
    own_s: f64,
    servers_s: Option<f64>,
    at: std::time::Instant,
}

/// Average cores busy over a phase: the whole machine, this tool, and the
/// named server processes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CpuUse {
    pub cores: usize,
    pub machine_busy_cores: f64,
    pub tool_cores: f64,
    pub server_cores: Option<f64>,
}

/// Linux reports CPU time in clock ticks of 1/100 s (`USER_HZ`).
const TICKS_PER_S: f64 = 100.0;

/// utime + stime of a process, in seconds, from `/proc/{pid}/stat`.
fn process_cpu_s(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name; utime and stime are the 14th and 15th.
    let after_name: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = after_name.get(11)?.parse().ok()?;
    let stime: f64 = after_name.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_S)
}

/// utime + stime of process `pid` so far, in seconds.
pub fn pid_cpu_s(pid: u32) -> Option<f64> {
    process_cpu_s(&pid.to_string())
}

/// The machine's load averages (1, 5, 15 min) as `/proc/loadavg` gives them.
pub fn loadavg() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// Now, UTC, to the second (`2026-11-23T11:32:08Z`).
pub fn utc_now() -> String {
    waitroom::words::clock::rfc3339(epoch_micros() / 1000)
}

pub fn cpu_mark(server_pids: &[u32]) -> Option<CpuMark> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: f64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| fields.get(i))
        .sum();
    let servers_s = if server_pids.is_empty() {
        None
    } else {
        server_pids
            .iter()
            .map(|pid| process_cpu_s(&pid.to_string()))
            .sum()
    };
    Some(CpuMark {
        machine_busy_s: busy / TICKS_PER_S,
        own_s: process_cpu_s("self")?,
        servers_s,
        at: std::time::Instant::now(),
    })
}

impl CpuMark {
    pub fn since(&self, start: &CpuMark) -> CpuUse {
        let wall = self.at.duration_since(start.at).as_secs_f64().max(1e-9);
        CpuUse {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            machine_busy_cores: (self.machine_busy_s - start.machine_busy_s) / wall,
            tool_cores: (self.own_s - start.own_s) / wall,
            server_cores: self
                .servers_s
                .zip(start.servers_s)
                .map(|(end, start)| (end - start) / wall),
        }
    }
}

impl std::fmt::Display for CpuUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CPU: {:.2} of {} cores busy: this tool {:.2}",
            self.machine_busy_cores, self.cores, self.tool_cores
        )?;
        if let Some(server) = self.server_cores {
            write!(
                f,
                ", server {server:.2}, everything else {:.2}",
                (self.machine_busy_cores - self.tool_cores - server).max(0.0)
            )?;
        }
        Ok(())
    }
}

/// Milliseconds or microseconds since the Unix epoch, as the server's ticks are stamped.
pub fn epoch_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Percent-encodes a query value (tickets are URL-safe today; stay safe anyway).
pub fn query_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Prints a line for people: to stdout, or to stderr when stdout carries JSON.
pub fn say(json: bool, line: impl AsRef<str>) {
    if json {
        eprintln!("{}", line.as_ref());
    } else {
        println!("{}", line.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_are_accepted() {
        assert!(parse_nodes("http://127.0.0.1:8080").is_ok());
        assert!(parse_nodes("http://127.3.4.5:8080,http://[::1]:9").is_ok());
        assert!(parse_nodes("http://localhost:8080/").is_ok());
        for bad in [
            "http://10.0.0.1:8080",
            "http://example.com/",
            "https://127.0.0.1/",
            "http://127.0.0.1:1/api",
            "",
        ] {
            assert!(parse_nodes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_loopback_redis_is_measured() {
        assert_eq!(
            loopback_redis("redis://127.0.0.1:6390/").unwrap(),
            ("127.0.0.1".to_string(), 6390)
        );
        assert!(loopback_redis("redis://localhost/").is_ok());
        assert!(loopback_redis("redis://10.0.0.1:6379/").is_err());
        assert!(loopback_redis("http://127.0.0.1:6379/").is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let l = Latency::from_micros((1..=100).map(|i| i * 1000).collect()).unwrap();
        assert_eq!((l.p50_ms, l.p99_ms, l.max_ms), (50.0, 99.0, 100.0));
        assert!(Latency::from_micros(vec![]).is_none());
    }

    #[test]
    fn a_new_room_is_its_id_beside_its_config() {
        let room = RoomId::parse("bench").unwrap();
        let config = room_config(&room);
        let body = serde_json::to_value(NewRoom {
            id: &room,
            config: &config,
        })
        .unwrap();
        assert_eq!(body["id"], "bench");
        assert_eq!(body["name"], "load test bench");
        assert_eq!(body["target_url"], "/");
        assert_eq!(body["max_active"], serde_json::Value::Null);
    }

    #[test]
    fn metrics_lines_are_read() {
        let s = parse_metrics(
            "# HELP x\nwaitroom_sockets_open 12\nprocess_resident_memory_bytes 4096\nother{a=\"b\"} 1\n",
        );
        assert_eq!(s.sockets_open, Some(12));
        assert_eq!(s.resident_memory_bytes, Some(4096));
        assert_eq!(s.ticks_asked_total, None);
        let s = parse_metrics("waitroom_ticks_asked_total 7\n");
        assert_eq!(s.ticks_asked_total, Some(7));
    }

    #[test]
    fn histogram_buckets_are_read() {
        let text = "# TYPE t histogram\nt_bucket{le=\"0.001\"} 3\nt_bucket{le=\"+Inf\"} 4\nt_sum 0.5\nt_count 4\ntt_bucket{le=\"1\"} 9\nt_bucket{op=\"join\",le=\"0.5\"} 2\n";
        assert_eq!(
            histogram_buckets(text, "t"),
            vec![
                (String::new(), 0.001, 3),
                (String::new(), f64::INFINITY, 4),
                ("op=\"join\"".to_string(), 0.5, 2)
            ]
        );
        assert!(histogram_buckets(text, "u").is_empty());
    }
}
