//! The `waitroom` binary itself: flags, and a clean stop on a signal.

use waitroom_testkit as support;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::redis::free_port;
use support::{FetchJson, close_code, next_status};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

async fn wait_until_healthy(http: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sigint_closes_every_socket_then_exits_zero() {
    let port = free_port();
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_waitroom"))
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--admin-token",
                "an-admin-token-of-at-least-32-chars",
                "--secret",
                "s",
                "--demo-room",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    wait_until_healthy(&http, &base).await;
    let created = http
        .post(format!("{base}/api/admin/rooms"))
        .bearer_auth("an-admin-token-of-at-least-32-chars")
        .json(&json!({"id": "stop", "name": "Stop", "target_url": "/x", "paused": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let demo = http.get(format!("{base}/rooms/demo")).send().await.unwrap();
    assert_eq!(demo.status(), 200, "--demo-room creates the demo room");
    let status: Value = http
        .post(format!("{base}/api/rooms/stop/join"))
        .fetch_json()
        .await;
    let url = format!(
        "ws://127.0.0.1:{port}/api/rooms/stop/ws?ticket={}",
        status["ticket"].as_str().unwrap()
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    next_status(&mut socket).await;

    let interrupted = Command::new("kill")
        .args(["-INT", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    assert_eq!(
        close_code(&mut socket).await,
        1001,
        "sockets hear 'going away'"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let exit = loop {
        if let Some(exit) = server.0.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "exit status {exit:?}");
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
        "--demo-room",
        "--log-format",
        "--join-rate-per-ip",
        "--trusted-proxies",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
    for env in [
        "WAITROOM_LISTEN",
        "WAITROOM_REDIS_URL",
        "WAITROOM_ADMIN_TOKEN",
        "WAITROOM_SECRET",
        "WAITROOM_PREVIOUS_SECRET",
        "WAITROOM_DEMO_ROOM",
        "WAITROOM_JOIN_RATE_PER_IP",
        "WAITROOM_TRUSTED_PROXIES",
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
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_waitroom"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--secret", "s"])
        .env("TMPDIR", &tmp)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    wait_until_healthy(&http, &base).await;

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

    let mut server = Server(child);
    server.0.kill().unwrap();
    let mut logged = String::new();
    for stream in [
        server
            .0
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read>),
        server
            .0
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut stream = stream;
        stream.read_to_string(&mut logged).unwrap();
    }
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
