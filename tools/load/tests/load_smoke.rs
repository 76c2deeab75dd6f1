//! The load tool against the real server binary, small: a few hundred joins,
//! a few hundred sockets, a few hundred claims and a drop of a few hundred
//! visitors, read back from the tool's `--json` summary.
//!
//! The server is another package of the workspace, so Cargo gives this test
//! no `CARGO_BIN_EXE_waitroom`: it runs the `waitroom` binary that sits
//! beside this package's `waitroom-load` in the target directory, or the one
//! `WAITROOM_BIN` names. `cargo test --workspace` builds both first (the
//! server's own tests need its binary); `cargo test -p waitroom-load` alone
//! runs whatever server binary was last built there.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use waitroom_testkit::ports::spawn_listening;

const ADMIN_TOKEN: &str = "load-smoke-admin-token-of-32-chars-or-more";
/// Every tool run here is bounded by its own flags; this only catches a hang.
const TOOL_PATIENCE: Duration = Duration::from_secs(60);

/// The server process, killed when the test ends however it ends.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary: `WAITROOM_BIN`, or `waitroom` beside the load tool.
fn server_binary() -> PathBuf {
    let path = match std::env::var_os("WAITROOM_BIN") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_BIN_EXE_waitroom-load"))
            .with_file_name(format!("waitroom{}", std::env::consts::EXE_SUFFIX)),
    };
    assert!(
        path.is_file(),
        "no server binary at {}: build it first (`cargo test --workspace` does, \
         or `cargo build -p waitroom`), or name it in WAITROOM_BIN",
        path.display()
    );
    path
}

fn start_server() -> Server {
    start_server_with(&[])
}

/// A fresh Redis (dropped last, after the nodes) and two nodes sharing it.
fn two_nodes_on_one_redis() -> (waitroom_testkit::redis::RedisServer, [Server; 2]) {
    let redis = waitroom_testkit::redis::RedisServer::start();
    let redis_url = redis.url();
    let nodes = [
        start_server_with(&["--redis-url", &redis_url]),
        start_server_with(&["--redis-url", &redis_url]),
    ];
    (redis, nodes)
}

fn start_server_with(extra: &[&str]) -> Server {
    let (child, port) = spawn_listening("the server", Duration::from_secs(30), |port| {
        let mut command = Command::new(server_binary());
        command
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--admin-token",
                ADMIN_TOKEN,
                "--secret",
                "load-smoke-secret",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    });
    Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// Runs the load tool; returns its exit status, stdout and stderr.
fn load_tool(args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_waitroom-load"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the load tool starts");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let deadline = Instant::now() + TOOL_PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the load tool ran past {TOOL_PATIENCE:?}: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, out.join().unwrap(), err.join().unwrap())
}

fn summary(args: &[&str]) -> Value {
    let (status, stdout, stderr) = load_tool(args);
    assert!(status.success(), "{args:?} failed: {stderr}");
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON line ({e}): {stdout}\n{stderr}"))
}

#[test]
fn join_mode_joins_every_visitor_without_errors_against_a_baseline() {
    let server = start_server();
    let s = summary(&[
        "--json",
        "join",
        "--url",
        &server.url,
        "--room",
        "smoke-join",
        "--admin-token",
        ADMIN_TOKEN,
        "--create-room",
        "--concurrency",
        "8",
        "--count",
        "300",
        "--path-baseline",
        "/healthz",
    ]);
    let join = &s["join"];
    assert_eq!(join["ok"], 300, "{s}");
    assert_eq!(join["errors"], 0, "{s}");
    assert!(join["per_s"].as_f64().unwrap() > 0.0, "{s}");
    assert_eq!(join["latency"]["count"], 300, "{s}");
    assert_eq!(s["baseline"]["ok"], 300, "{s}");
    assert_eq!(s["baseline"]["errors"], 0, "{s}");
    assert!(s["ratio"].as_f64().unwrap() > 0.0, "{s}");
    assert_eq!(s["join_body"], "{}", "joins carry the page's body: {s}");
}

#[test]
fn join_mode_without_a_body_joins_every_visitor_too() {
    let server = start_server();
    let s = summary(&[
        "--json",
        "join",
        "--url",
        &server.url,
        "--room",
        "smoke-join-bare",
        "--admin-token",
        ADMIN_TOKEN,
        "--create-room",
        "--concurrency",
        "8",
        "--count",
        "300",
        "--no-body",
    ]);
    assert_eq!(s["join"]["ok"], 300, "{s}");
    assert_eq!(s["join"]["errors"], 0, "{s}");
    assert_eq!(s["join_body"], Value::Null, "{s}");
}

#[test]
fn sockets_mode_opens_every_socket_and_misses_no_tick() {
    let server = start_server();
    let s = summary(&[
        "--json",
        "sockets",
        "--url",
        &server.url,
        "--room",
        "smoke-sockets",
        "--admin-token",
        ADMIN_TOKEN,
        "--sockets",
        "300",
        "--source-ips",
        "2",
        "--hold",
        "3",
    ]);
    assert_eq!(s["joined"], 300, "{s}");
    assert_eq!(s["opened"], 300, "{s}");
    assert_eq!(s["failed"], 0, "{s}");
    assert_eq!(s["closed_early"], 0, "{s}");
    assert_eq!(s["server_sockets_open"], 300, "{s}");
    assert!(s["ticks_measured"].as_u64().unwrap() >= 1, "{s}");
    assert!(s["deliveries"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["missed_updates"], 0, "{s}");
    assert!(s["tick_latency"]["max_ms"].as_f64().is_some(), "{s}");
    assert!(
        s["memory_per_socket_bytes"].as_f64().is_some(),
        "memory is read before and while held: {s}"
    );
}

#[test]
fn sockets_mode_with_the_floor_reports_both_and_their_ratio() {
    let server = start_server();
    let args = [
        "--json",
        "sockets",
        "--url",
        &server.url,
        "--room",
        "smoke-floor",
        "--admin-token",
        ADMIN_TOKEN,
        "--sockets",
        "50",
        "--hold",
        "3",
        "--floor",
    ];
    let (status, stdout, stderr) = load_tool(&args);
    assert!(status.success(), "{args:?} failed: {stderr}");
    let s: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON line ({e}): {stdout}\n{stderr}"));
    let floor = &s["floor"];
    assert_eq!(floor["opened"], 50, "{s}");
    assert_eq!(floor["failed"], 0, "{s}");
    assert_eq!(floor["closed_early"], 0, "{s}");
    assert_eq!(floor["missed_updates"], 0, "{s}");
    assert!(floor["deliveries"].as_u64().unwrap() >= 50, "{s}");
    assert!(
        floor["tick_latency"]["p99_ms"].as_f64().unwrap() > 0.0,
        "{s}"
    );
    let report = &floor["server_reports"][0];
    assert_eq!(report["connections"], 50, "{s}");
    assert_eq!(report["handshake_failures"], 0, "{s}");
    assert!(report["written"].as_u64().unwrap() >= 50, "{s}");
    // Then the real phase, as without the floor.
    assert_eq!(s["opened"], 50, "{s}");
    assert_eq!(s["missed_updates"], 0, "{s}");
    assert!(s["floor_ratio"]["p99"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["floor_ratio"]["p50"].as_f64().unwrap() > 0.0, "{s}");
    assert_eq!(s["floor_target_ratio"], 1.25, "{s}");
    assert_eq!(
        s["combined"],
        Value::Null,
        "no barrier, nothing to combine: {s}"
    );
    assert!(
        stderr.contains("floor p99") && stderr.contains("ratio"),
        "{stderr}"
    );
}

#[test]
fn claims_mode_sells_exactly_the_stock_and_refuses_the_rest() {
    let server = start_server();
    let s = summary(&[
        "--json",
        "claims",
        "--url",
        &server.url,
        "--room",
        "smoke-claims",
        "--admin-token",
        ADMIN_TOKEN,
        "--visitors",
        "300",
        "--stock",
        "200",
        "--concurrency",
        "8",
        "--duration",
        "30",
    ]);
    assert_eq!(s["joined"], 300, "{s}");
    assert_eq!(s["answered"], 300, "{s}");
    assert_eq!(s["created"], 200, "{s}");
    assert_eq!(s["refused"], 100, "{s}");
    assert_eq!(s["refused_codes"]["sold_out"], 100, "{s}");
    assert_eq!(s["errors"], 0, "{s}");
    assert_eq!(s["not_sent"], 0, "{s}");
    assert_eq!(s["latency"]["count"], 300, "{s}");
    assert!(s["per_s"].as_f64().unwrap() > 0.0, "{s}");
    let store = &s["stores"][0];
    assert_eq!(store["expected_created"], 200, "{s}");
    assert_eq!(store["sequences_once_each"], true, "{s}");
    assert_eq!(store["stock_left"], 0, "{s}");
    assert_eq!(s["check_passed"], true, "{s}");
}

#[test]
fn idle_mode_measures_redis_and_every_node_over_its_window() {
    let (redis, nodes) = two_nodes_on_one_redis();
    let redis_url = redis.url();
    let urls = format!("{},{}", nodes[0].url, nodes[1].url);
    let pids = format!("{},{}", nodes[0].child.id(), nodes[1].child.id());
    let s = summary(&[
        "--json",
        "idle",
        "--url",
        &urls,
        "--admin-token",
        ADMIN_TOKEN,
        "--rooms",
        "20",
        "--busy",
        "2",
        "--visitors-per-busy",
        "3",
        "--redis-url",
        &redis_url,
        "--server-pid",
        &pids,
        "--warmup",
        "1",
        "--window",
        "2",
        "--ceiling-requests",
        "2000",
    ]);
    assert_eq!(s["mode"], "idle", "{s}");
    assert_eq!(s["rooms_created"], 20, "{s}");
    assert_eq!(s["busy_joined"], 6, "{s}");
    assert_eq!(s["busy_sockets_opened"], 6, "{s}");
    assert_eq!(s["busy_sockets_closed_early"], 0, "{s}");
    assert_eq!(s["busy_sockets_still_waiting"], 6, "{s}");
    assert!(s["window_s"].as_f64().unwrap() >= 2.0, "{s}");
    // Two busy rooms tick once a second on each node: Redis is never idle.
    assert!(s["redis_commands_per_s"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["redis_cpu_cores"].as_f64().is_some(), "{s}");
    assert!(s["redis_commands_by_name_per_s"].is_object(), "{s}");
    assert!(s["redis_ceiling_set_per_s"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["redis_commands_to_ceiling"].as_f64().is_some(), "{s}");
    assert!(s["load_average_start"].is_string(), "{s}");
    let reported = s["nodes"].as_array().unwrap();
    assert_eq!(reported.len(), 2, "{s}");
    for node in reported {
        assert!(node["cpu_cores"].as_f64().is_some(), "{s}");
        assert!(node["ticks_asked_per_s"].as_f64().unwrap() > 0.0, "{s}");
    }
    // A second run finds every room there already.
    let again = summary(&[
        "--json",
        "idle",
        "--url",
        &nodes[0].url,
        "--admin-token",
        ADMIN_TOKEN,
        "--rooms",
        "20",
        "--warmup",
        "0",
        "--window",
        "1",
    ]);
    assert_eq!(again["rooms_existed"], 20, "{again}");
    assert_eq!(again["redis_commands_per_s"], Value::Null, "{again}");
}

#[test]
fn the_tool_refuses_any_address_that_is_not_loopback() {
    let (status, _, stderr) = load_tool(&[
        "join",
        "--url",
        "http://192.0.2.1:8080",
        "--room",
        "x",
        "--count",
        "1",
    ]);
    assert!(!status.success());
    assert!(stderr.contains("loopback"), "{stderr}");
}

/// Asserts an `opening` run drew every pre-queued socket once, after the opening.
fn assert_every_socket_drawn(s: &Value, visitors: u64, sockets: u64) {
    assert_eq!(s["mode"], "opening", "{s}");
    assert_eq!(s["joined"], visitors, "{s}");
    assert_eq!(s["seed_revealed"], true, "{s}");
    // The timed joins before the opening entered the pre-queue too.
    assert!(s["entrants"].as_u64().unwrap() >= visitors, "{s}");
    assert_eq!(s["opened"], sockets, "{s}");
    // More sockets than tokio's per-task budget of 128: every one of them
    // is told its position, none is closed as too slow.
    assert_eq!(s["positioned"], sockets, "{s}");
    assert_eq!(s["duplicate_positions"], 0, "{s}");
    assert_eq!(s["positioned_before_opening"], 0, "{s}");
    assert_eq!(s["lost_position"], 0, "{s}");
    assert_eq!(s["socket_errors"], serde_json::json!({}), "{s}");
    assert!(s["probe_joins"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["probe_failed"], 0, "{s}");
    assert!(s["positioning"]["max_ms"].as_f64().is_some(), "{s}");
}

fn opening_args<'a>(url: &'a str, room: &'a str) -> Vec<&'a str> {
    vec![
        "--json",
        "opening",
        "--url",
        url,
        "--room",
        room,
        "--admin-token",
        ADMIN_TOKEN,
        "--visitors",
        "2000",
        "--sockets",
        "300",
        "--lead",
        "1",
        "--after",
        "2",
        "--probe-rate",
        "50",
    ]
}

#[test]
fn opening_mode_positions_every_socket_and_reads_the_memory_stores_longest_operation() {
    let server = start_server();
    let s = summary(&opening_args(&server.url, "smoke-opening"));
    assert_every_socket_drawn(&s, 2000, 300);
    let ops = s["memory_store_op_buckets"].as_object().unwrap();
    assert!(ops.contains_key(""), "the window saw store operations: {s}");
    assert!(ops.contains_key("op=\"join\""), "joins among them: {s}");
    assert_eq!(s["redis_slow_commands"], Value::Null, "{s}");
}

#[test]
fn opening_mode_on_redis_reads_its_slow_log() {
    let redis = waitroom_testkit::redis::RedisServer::start();
    let redis_url = redis.url();
    let server = start_server_with(&["--redis-url", &redis_url]);
    let mut args = opening_args(&server.url, "smoke-opening-redis");
    args.extend(["--redis-url", &redis_url]);
    let s = summary(&args);
    assert_every_socket_drawn(&s, 2000, 300);
    assert!(s["redis_slow_commands"].as_u64().is_some(), "{s}");
    assert!(s["redis_slowest"].is_array(), "{s}");
    // Redis runs here: its thread's run-queue wait is sampled over the window.
    assert!(
        s["redis_run_queue"]["ran_ms"].as_f64().unwrap() > 0.0,
        "{s}"
    );
    assert!(s["redis_run_queue"]["waited_ms"].as_f64().is_some(), "{s}");
    assert!(
        s["memory_store_op_buckets"].as_object().unwrap().is_empty(),
        "no memory store on a Redis node: {s}"
    );
}

fn drop_args<'a>(url: &'a str, room: &'a str, stock: &'a str) -> Vec<&'a str> {
    vec![
        "--json",
        "drop",
        "--url",
        url,
        "--room",
        room,
        "--admin-token",
        ADMIN_TOKEN,
        "--visitors",
        "300",
        "--arrive-over",
        "2",
        "--stock",
        stock,
        // 50 a second against 150 arriving: a line forms, and drains
        // about 4 s after the last arrival.
        "--admit-per-tick",
        "25",
        "--tick-ms",
        "500",
        "--duration",
        "30",
        "--source-ips",
        "2",
    ]
}

/// Asserts a `drop` run of 300 visitors took every one of them through the
/// page's sequence, and sold exactly `sold`.
fn assert_every_visitor_through(s: &Value, sold: u64) {
    assert_eq!(s["mode"], "drop", "{s}");
    assert_eq!(s["visitors"], 300, "{s}");
    assert_eq!(s["joined"], 300, "{s}");
    assert_eq!(s["done"], 300, "{s}");
    assert_eq!(s["admitted"], 300, "{s}");
    assert_eq!(s["verified"], 300, "{s}");
    assert_eq!(s["claims_answered"], 300, "{s}");
    assert_eq!(s["created"], sold, "{s}");
    if sold < 300 {
        assert_eq!(s["refused"]["sold_out"], 300 - sold, "{s}");
    } else {
        assert_eq!(s["refused"], serde_json::json!({}), "{s}");
    }
    assert_eq!(s["sequences_once_each"], true, "{s}");
    assert_eq!(s["stock_left"], s["stock_left_expected"], "{s}");
    assert_eq!(s["gave_up"], serde_json::json!({}), "{s}");
    assert_eq!(s["failed"], serde_json::json!({}), "{s}");
    assert_eq!(s["finished"], serde_json::json!({}), "{s}");
    assert_eq!(s["error_kinds"], serde_json::json!({}), "{s}");
    // A line formed, and its visitors saw it move on their sockets.
    assert!(s["positioned"].as_u64().unwrap() > 0, "{s}");
    assert!(s["sockets_opened"].as_u64().unwrap() > 0, "{s}");
    assert!(s["position_updates"]["total"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["positions_rose"], 0, "{s}");
    assert!(s["first_position"]["max_ms"].as_f64().is_some(), "{s}");
    assert_eq!(s["waited"]["count"], 300, "{s}");
    assert_eq!(s["verify"]["count"], 300, "{s}");
    assert_eq!(s["claim"]["count"], 300, "{s}");
    assert_eq!(s["room_admitted_total"], 300, "{s}");
    // The room's own report: the same counts, and the waits within the
    // buckets' error of what the visitors measured.
    assert_eq!(s["room_report"]["counts_equal"], true, "{s}");
    assert_eq!(s["room_report"]["waits_within"], true, "{s}");
    assert_eq!(s["check_passed"], true, "{s}");
}

#[test]
fn drop_mode_takes_every_visitor_through_the_page_and_sells_the_stock_once() {
    let server = start_server();
    let s = summary(&drop_args(&server.url, "smoke-drop", "200"));
    assert_every_visitor_through(&s, 200);
}

#[test]
fn drop_mode_over_two_redis_nodes_is_one_drop() {
    let (_redis, nodes) = two_nodes_on_one_redis();
    let urls = format!("{},{}", nodes[0].url, nodes[1].url);
    let s = summary(&drop_args(&urls, "smoke-drop-redis", "1000"));
    assert_eq!(s["nodes"].as_array().unwrap().len(), 2, "{s}");
    assert_every_visitor_through(&s, 300);
}

#[test]
fn drop_mode_refuses_nodes_that_do_not_share_a_store() {
    let nodes = [start_server(), start_server()];
    let urls = format!("{},{}", nodes[0].url, nodes[1].url);
    let (status, _, stderr) = load_tool(&drop_args(&urls, "smoke-drop-apart", "10"));
    assert!(!status.success());
    assert!(stderr.contains("store of its own"), "{stderr}");
}

#[test]
fn autotune_mode_runs_a_drop_that_runs_itself_against_its_own_origin() {
    // The node may call the tool's origin on loopback only if told so.
    let server = start_server_with(&["--outbound-allow-networks", "127.0.0.0/8"]);
    let s = summary(&[
        "--json",
        "autotune",
        "--url",
        &server.url,
        "--room",
        "smoke-autotune",
        "--admin-token",
        ADMIN_TOKEN,
        // 20 shoppers a second against 8 admitted: a line forms at once,
        // and the room's ticks hand out health checks while it lasts.
        "--arrival-rate",
        "20",
        "--duration",
        "8",
        "--window",
        "4",
        "--admit-per-tick",
        "4",
        "--tick-ms",
        "500",
        "--phase-at",
        "3",
        "--phase-admit-per-tick",
        "6",
        "--origin-workers",
        "2",
        "--origin-service-ms",
        "50",
        "--checkouts",
        "2",
        "--source-ips",
        "2",
    ]);
    assert_eq!(s["mode"], "autotune", "{s}");
    assert_eq!(s["origin_capacity_per_s"], 40.0, "{s}");
    assert!(s["origin_measured_per_s"].as_f64().unwrap() > 0.0, "{s}");
    // The schedule's one entry applied, with no error.
    assert_eq!(s["schedule"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s["schedule_applied"], true, "{s}");
    assert!(s["schedule"][0]["applied_after_ms"].is_i64(), "{s}");
    // The node checked the origin's health through the tool's origin.
    assert_eq!(s["samples_taken"], true, "{s}");
    assert!(
        s["window"]["origin_health_checks"].as_u64().unwrap() > 0,
        "{s}"
    );
    assert!(s["shoppers"]["admitted"].as_u64().unwrap() > 0, "{s}");
    assert!(s["window"]["admitted_to_capacity"].is_f64(), "{s}");
    assert!(s["changes"]["run_counted"]["down"].is_u64(), "{s}");
    assert_eq!(s["timeline"].as_array().unwrap().len(), 8, "{s}");
    assert_eq!(s["watch_errors"], serde_json::json!({}), "{s}");
    assert_eq!(s["check_passed"], true, "{s}");
}
