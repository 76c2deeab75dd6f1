//! The `waitroom` binary itself: flags, and a clean stop on a signal.

use waitroom_testkit as support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::node::{ADMIN_TOKEN, Node};
use support::{FetchJson, close_code, next_status};

/// A node of the binary with `args` and a paused room `queue`, one visitor
/// waiting there with a socket open: the node, its base URL, the visitor's
/// ticket and socket.
async fn node_with_a_waiting_socket(args: &[&str]) -> (Node, String, String, support::Socket) {
    let node = Node::start(env!("CARGO_BIN_EXE_waitroom"), args);
    let port = node.port;
    let base = node.url("");
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{base}/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": "queue", "name": "Queue", "target_url": "/x", "paused": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let waiting: Value = http
        .post(format!("{base}/api/rooms/queue/join"))
        .fetch_json()
        .await;
    let ticket = waiting["ticket"].as_str().unwrap().to_string();
    let (mut socket, _) = tokio_tungstenite::connect_async(format!(
        "ws://127.0.0.1:{port}/api/rooms/queue/ws?ticket={ticket}"
    ))
    .await
    .unwrap();
    next_status(&mut socket).await;
    (node, base, ticket, socket)
}

/// A stop logs no ERROR: the node shuts its own listener, and actix's
/// accept loop, sometimes woken by that before its pause took effect,
/// logged `Error accepting connection: Invalid argument` (one stop in five
/// of the release binary), which would page an operator alerting on ERROR
/// at every rolling restart. Twenty stops, each reading the whole log.
#[test]
fn a_node_stops_without_logging_an_error() {
    for stop in 0..20 {
        let mut node = Node::start_with(|port| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_waitroom"));
            command
                .args(["--listen", &format!("127.0.0.1:{port}"), "--drain-s", "0"])
                .args(["--admin-token", ADMIN_TOKEN])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            command
        });
        node.signal("-TERM");
        assert_eq!(node.wait(Duration::from_secs(10)), Some(0), "exit status");
        let log = node.kill_and_read_output();
        assert!(
            log.contains("no longer accepting connections"),
            "stop {stop}: the log of the stop was read:\n{log}"
        );
        assert!(
            !log.contains("ERROR"),
            "stop {stop} logged an error:\n{log}"
        );
    }
}

#[tokio::test]
async fn sigint_closes_every_socket_then_exits_zero() {
    let (mut server, base, _, mut socket) =
        node_with_a_waiting_socket(&["--demo-room", "--drain-s", "0"]).await;
    let demo = reqwest::get(format!("{base}/rooms/demo")).await.unwrap();
    assert_eq!(demo.status(), 200, "--demo-room creates the demo room");

    server.signal("-INT");
    assert_eq!(
        close_code(&mut socket).await,
        1012,
        "sockets hear 'service restart'"
    );
    assert_eq!(server.wait(Duration::from_secs(30)), Some(0), "exit status");
}

/// SIGHUP (an operator's "reload") neither stops the node nor drains it:
/// a SIGTERM sent after it still finds the node serving, and drains it.
/// The kernel hands a process its pending signals lowest first, so were
/// SIGHUP's default (exit) left in place, the node would end by it, its
/// socket cut rather than told 1012, and no exit code.
#[tokio::test]
async fn sighup_is_ignored_and_a_later_sigterm_still_drains() {
    let (mut server, _, _, mut socket) = node_with_a_waiting_socket(&["--drain-s", "0"]).await;
    server.signal("-HUP");
    server.signal("-TERM");
    assert_eq!(close_code(&mut socket).await, 1012);
    assert_eq!(server.wait(Duration::from_secs(30)), Some(0), "exit status");
}

#[test]
fn an_unreachable_redis_stops_the_start_with_a_clear_message() {
    let output = Command::new(env!("CARGO_BIN_EXE_waitroom"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            "redis://127.0.0.1:1/",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let printed = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
    assert!(
        printed.contains("cannot use the Redis store at redis://127.0.0.1:1/"),
        "{printed}"
    );
}

#[test]
fn every_flag_is_documented_with_its_environment_variable() {
    let output = Command::new(env!("CARGO_BIN_EXE_waitroom"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--listen",
        "--redis-url",
        "--admin-token",
        "--secret",
        "--previous-secret",
        "--drain-s",
        "--demo-room",
        "--log-format",
        "--join-rate-per-ip",
        "--code-guesses-per-ip",
        "--trusted-proxies",
        "--outbound-allow-networks",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
    for env in [
        "WAITROOM_LISTEN",
        "WAITROOM_REDIS_URL",
        "WAITROOM_ADMIN_TOKEN",
        "WAITROOM_SECRET",
        "WAITROOM_PREVIOUS_SECRET",
        "WAITROOM_DRAIN_S",
        "WAITROOM_DEMO_ROOM",
        "WAITROOM_JOIN_RATE_PER_IP",
        "WAITROOM_CODE_GUESSES_PER_IP",
        "WAITROOM_TRUSTED_PROXIES",
        "WAITROOM_OUTBOUND_ALLOW_NETWORKS",
    ] {
        assert!(help.contains(env), "{env} missing from --help");
    }
}

#[test]
fn a_short_admin_token_is_refused_at_start() {
    let output = Command::new(env!("CARGO_BIN_EXE_waitroom"))
        .args(["--listen", "127.0.0.1:0", "--admin-token", "T0k"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "a 3-character token must not start a node"
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("at least 32 characters"), "{said}");
}

#[tokio::test]
async fn a_generated_admin_token_goes_to_a_private_file_not_to_the_log() {
    use std::os::unix::fs::PermissionsExt;

    let tmp = std::env::temp_dir().join(format!("waitroom-token-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let tmpdir = tmp.clone();
    let server = Node::start_with(move |port| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_waitroom"));
        command
            .args(["--listen", &format!("127.0.0.1:{port}"), "--secret", "s"])
            .env("TMPDIR", &tmpdir)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    });
    let pid = server.pid();
    let base = server.url("");
    let http = reqwest::Client::new();

    let file = tmp.join(format!("waitroom-admin-token-{pid}"));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "only the operator reads the token");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert!(token.len() >= 32, "{token}");
    let rooms = http
        .get(format!("{base}/api/admin/rooms"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(rooms.status(), 200, "the file's token is the node's token");

    let logged = server.kill_and_read_output();
    assert!(
        logged.contains(&file.display().to_string()),
        "the log names the file: {logged}"
    );
    assert!(!logged.contains(&token), "the token itself is never logged");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_trusted_proxy_that_is_not_an_address_stops_the_start() {
    let output = Command::new(env!("CARGO_BIN_EXE_waitroom"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--trusted-proxies",
            "10.0.0.0/8,proxy.example",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("\"proxy.example\" is neither an IP address nor a network"),
        "{said}"
    );
}

#[test]
fn a_previous_secret_needs_a_current_one_that_differs() {
    let start = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_waitroom"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("WAITROOM_SECRET")
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?} must not start a node");
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    };
    let said = start(&["--previous-secret", "old"]);
    assert!(said.contains("--secret"), "{said}");
    let said = start(&["--secret", "same", "--previous-secret", "same"]);
    assert!(
        said.contains("--previous-secret is the same as --secret"),
        "{said}"
    );
}

#[tokio::test]
async fn sigterm_drains_then_refuses_connections_closes_sockets_with_1012_and_finishes_requests() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    // Long enough for the checks made while it lasts.
    let (mut server, base, ticket, mut socket) =
        node_with_a_waiting_socket(&["--drain-s", "3"]).await;
    let port = server.port;
    let http = reqwest::Client::new();
    // A join whose body is still on its way when the signal comes.
    let mut in_flight = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    in_flight
        .write_all(
            b"POST /api/rooms/queue/join HTTP/1.1\r\nHost: waitroom\r\nConnection: close\r\n\
              Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{",
        )
        .await
        .unwrap();

    server.signal("-TERM");
    // The signal is handled on the server's own time: the first readiness
    // answered after it is 503.
    let deadline = Instant::now() + Duration::from_secs(10);
    let unready = loop {
        let answer = http.get(format!("{base}/readyz")).send().await.unwrap();
        if answer.status() == 503 {
            break answer.json::<Value>().await.unwrap();
        }
        assert!(Instant::now() < deadline, "/readyz never said 503");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(unready["error"]["code"], "draining");
    // Meanwhile everything else is served as before.
    assert_eq!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let joined = http
        .post(format!("{base}/api/rooms/queue/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), 200, "joins are served while draining");
    let status = http
        .get(format!("{base}/api/rooms/queue/status"))
        .bearer_auth(&ticket)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);

    assert_eq!(
        close_code(&mut socket).await,
        1012,
        "after the drain, sockets are told to reconnect"
    );
    assert!(
        TcpStream::connect(("127.0.0.1", port)).await.is_err(),
        "by then a new connection is refused, so a proxy tries another node"
    );
    in_flight.write_all(b"}").await.unwrap();
    let mut answer = Vec::new();
    in_flight.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the request in flight is finished: {answer}"
    );
    assert!(answer.contains(r#""state":"waiting""#), "{answer}");
    assert_eq!(server.wait(Duration::from_secs(30)), Some(0), "exit status");
}

/// `--redis-wait-replicas 1` on a master without a replica: the node says
/// at start that every write will wait and answer 503; with one, it does not.
#[tokio::test]
async fn a_master_with_fewer_replicas_than_waited_for_is_named_at_start() {
    use support::redis::RedisServer;

    let master = RedisServer::start();
    let start = |url: String| {
        Node::start_with(move |port| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_waitroom"));
            command
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--admin-token", ADMIN_TOKEN, "--secret", "s"])
                .args(["--redis-url", &url, "--redis-wait-replicas", "1"])
                .env("NO_COLOR", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            command
        })
    };
    let mut alone = start(master.url());
    alone.wait_until("/healthz").await;
    let said = alone.kill_and_read_output();
    assert!(
        said.contains("fewer replicas than --redis-wait-replicas") && said.contains("replicas=0"),
        "{said}"
    );
    let _replica = RedisServer::start_replica_of(&master);
    let mut replicated = start(master.url());
    replicated.wait_until("/healthz").await;
    let said = replicated.kill_and_read_output();
    assert!(!said.contains("fewer replicas"), "{said}");
}
