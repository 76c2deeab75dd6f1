//! The README's nginx block, read from README.md and run as it is (only its
//! addresses changed) in a real nginx in front of a small protected origin:
//! no pass is sent to the waiting room, a valid pass of the room gets
//! through, and another room's pass, a pass given up with `leave`, or a
//! forged `X-Waitroom-Room` header do not.
//!
//! Needs Debian's `nginx` (`/usr/sbin/nginx`; `./scripts/test` installs it).
//! The test starts its own nginx on a free port, with its own prefix and
//! configuration in a temporary directory, in the foreground, and kills it
//! when done.

use waitroom_testkit as support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, COOKIE, LOCATION};
use serde_json::json;
use support::TestApp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const NGINX: &str = "/usr/sbin/nginx";
/// The room the README's block guards.
const ROOM: &str = "spring-sale";
const WAITING_ROOM: &str = "https://queue.example/rooms/spring-sale";

/// The README's nginx block, exactly as printed there.
fn readme_block() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md is readable");
    let section = readme
        .split_once("With nginx in front of the protected site")
        .expect("the README has its nginx section")
        .1;
    let block = section
        .split_once("```nginx\n")
        .expect("the section has an nginx block")
        .1;
    block
        .split_once("```")
        .expect("the nginx block ends")
        .0
        .to_string()
}

/// `text` with `from` replaced, which must be in it (so the README and this
/// test can't drift apart silently).
fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the README's nginx block no longer has {from:?}:\n{text}"
    );
    text.replace(from, to)
}

/// A foreground nginx with a prefix of its own; killed when dropped.
struct Nginx {
    port: u16,
    dir: PathBuf,
    child: Child,
}

impl Nginx {
    /// Runs `http_block` (what goes in `http { … }`, with `listen 80;`) on a
    /// free port (another, when nginx finds it taken).
    fn start(http_block: &str) -> Self {
        assert!(
            std::path::Path::new(NGINX).exists(),
            "{NGINX} is needed for this test: apt-get install nginx (./scripts/test installs it)"
        );
        support::ports::start_on_free_port("nginx", |port| Self::start_on(http_block, port))
    }

    fn start_on(http_block: &str, port: u16) -> Result<Self, String> {
        let dir =
            std::env::temp_dir().join(format!("waitroom-nginx-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let http_block = replaced(
            http_block,
            "listen 80;",
            &format!("listen 127.0.0.1:{port};"),
        );
        let config = format!(
            "daemon off;\n\
             master_process off;\n\
             worker_processes 1;\n\
             pid {dir}/nginx.pid;\n\
             error_log {dir}/logs/error.log info;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n\
             access_log {dir}/logs/access.log;\n\
             client_body_temp_path {dir}/client_body;\n\
             proxy_temp_path {dir}/proxy;\n\
             fastcgi_temp_path {dir}/fastcgi;\n\
             uwsgi_temp_path {dir}/uwsgi;\n\
             scgi_temp_path {dir}/scgi;\n\
             {http_block}\n\
             }}\n",
            dir = dir.display(),
        );
        let config_path = dir.join("nginx.conf");
        std::fs::write(&config_path, config).unwrap();
        let mut child = Command::new(NGINX)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .arg("-c")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{NGINX} did not start: {e}"));
        match support::ports::wait_until_listening(&mut child, port, Duration::from_secs(10)) {
            Ok(()) => Ok(Self { port, dir, child }),
            Err(reason) => {
                let log = std::fs::read_to_string(dir.join("logs/error.log")).unwrap_or_default();
                let _ = std::fs::remove_dir_all(&dir);
                Err(format!("{reason}:\n{log}"))
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The protected site: answers every request 200 "protected" and counts them.
async fn protected_origin() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
                          Content-Length: 9\r\nConnection: close\r\n\r\nprotected",
                    )
                    .await;
            });
        }
    });
    (port, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_nginx_block_lets_through_only_valid_passes_of_its_room() {
    let app = TestApp::spawn().await;
    app.create_room(ROOM, json!({"admit_per_tick": 1_000}))
        .await;
    app.create_room("autumn-sale", json!({"admit_per_tick": 1_000}))
        .await;
    let (origin_port, served) = protected_origin().await;

    let block = readme_block();
    let block = replaced(
        &block,
        "server 127.0.0.1:8080;",
        &format!("server 127.0.0.1:{};", app.port),
    );
    let block = replaced(
        &block,
        "server 127.0.0.1:3000;",
        &format!("server 127.0.0.1:{origin_port};"),
    );
    let nginx = Nginx::start(&block);

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let get = |headers: &[(reqwest::header::HeaderName, String)]| {
        let mut request = client.get(nginx.url("/checkout"));
        for (name, value) in headers {
            request = request.header(name.clone(), value.clone());
        }
        async move { request.send().await.expect("nginx answers") }
    };
    let sent_to_the_waiting_room = |response: reqwest::Response, what: &str| {
        assert_eq!(response.status(), 302, "{what}");
        assert_eq!(response.headers()[LOCATION], WAITING_ROOM, "{what}");
    };
    let let_through = |response: reqwest::Response, what: &'static str| async move {
        assert_eq!(response.status(), 200, "{what}");
        assert_eq!(response.text().await.unwrap(), "protected", "{what}");
    };
    let room_header = || reqwest::header::HeaderName::from_static("x-waitroom-room");

    // No pass: to the waiting room.
    sent_to_the_waiting_room(get(&[]).await, "no pass");
    sent_to_the_waiting_room(
        get(&[(COOKIE, "wr_pass=not-a-pass".into())]).await,
        "garbage",
    );

    // A valid pass of the room, as the cookie or a Bearer token: through.
    let admitted = app.join_api(ROOM).await;
    let pass = admitted["pass"].as_str().unwrap().to_string();
    let_through(get(&[(COOKIE, format!("wr_pass={pass}"))]).await, "cookie").await;
    let_through(
        get(&[(AUTHORIZATION, format!("Bearer {pass}"))]).await,
        "bearer",
    )
    .await;
    // Naming another room in the header changes nothing (nginx drops it).
    let_through(
        get(&[
            (COOKIE, format!("wr_pass={pass}")),
            (room_header(), "autumn-sale".into()),
        ])
        .await,
        "a valid pass with another room in the header",
    )
    .await;

    // Another room's pass, alone or with a forged header naming its room.
    let autumn = app.pass_for("autumn-sale").await;
    sent_to_the_waiting_room(
        get(&[(COOKIE, format!("wr_pass={autumn}"))]).await,
        "another room's pass",
    );
    sent_to_the_waiting_room(
        get(&[
            (COOKIE, format!("wr_pass={autumn}")),
            (room_header(), "autumn-sale".into()),
        ])
        .await,
        "another room's pass with a forged X-Waitroom-Room",
    );
    sent_to_the_waiting_room(
        get(&[
            (AUTHORIZATION, format!("Bearer {autumn}")),
            (room_header(), "autumn-sale".into()),
        ])
        .await,
        "another room's Bearer pass with a forged X-Waitroom-Room",
    );

    // Given up with leave: refused from then on.
    let left = app
        .http
        .post(app.url(&format!("/api/rooms/{ROOM}/leave")))
        .bearer_auth(admitted["ticket"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), 204);
    sent_to_the_waiting_room(
        get(&[(COOKIE, format!("wr_pass={pass}"))]).await,
        "a pass given up with leave",
    );

    assert_eq!(
        served.load(Ordering::SeqCst),
        3,
        "the origin saw only the requests let through"
    );
}
