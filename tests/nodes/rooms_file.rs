//! Rooms as code (`--rooms`, api.md "Rooms from a file") with the real
//! binary: nodes starting at once on one Redis, restarts after a live
//! change and after an edit, a bad file, a key kept in a file of its own,
//! and the example file and the docs' snippets, loaded as they are.

use support::repo;
use waitroom_testkit as support;

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::browser::TempDir;
use support::node::{ADMIN_TOKEN, Node, SECRET};
use support::redis::RedisServer;
use waitroom::startup::rooms_file::RoomsFile;

const BINARY: &str = env!("CARGO_BIN_EXE_waitroom");
/// How long a node with a bad file may take to give up.
const EXIT_WITHIN: Duration = Duration::from_secs(10);
const USER_KEY: &str = "the-shop-signs-user-tokens-with-this-0123456789";

/// A node with `args`, logging JSON lines to `log` (appended to across
/// restarts).
fn node(log: &Path, args: &[&str], envs: &[(&str, &str)]) -> Node {
    let log = log.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let envs: Vec<(String, String)> = envs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Node::start_with(move |port| {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("the node's log file");
        let mut command = Command::new(BINARY);
        command
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-token", ADMIN_TOKEN, "--secret", SECRET])
            .args(["--log-format", "json"])
            .args(&args)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("a second handle on the log"))
            .stderr(out);
        command
    })
}

/// What the nodes logging to `log` said they did with `room`, in order.
fn outcomes(log: &Path, room: &str) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| {
            line["message"] == "room applied from the rooms file" && line["room"] == room
        })
        .map(|line| line["outcome"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn admin_get(node: &Node, path: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .get(node.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

async fn patch(node: &Node, room: &str, change: Value) {
    let answer = reqwest::Client::new()
        .patch(node.url(&format!("/api/admin/rooms/{room}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&change)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
}

/// Kills the node (no drain: a crash) and starts it again on its port.
fn crash_and_restart(node: &mut Node) {
    node.signal("-KILL");
    node.wait(Duration::from_secs(10));
    node.restart();
}

const DROP_V1: &str = r#"
[[room]]
id = "spring-drop"
name = "Spring drop"
target_url = "https://shop.example/drop"
admit_per_tick = 5
paused = false
"#;

#[tokio::test]
async fn two_nodes_starting_at_once_on_one_redis_create_the_room_once() {
    let redis = RedisServer::start();
    let dir = TempDir::new("rooms-at-once");
    let file = dir.0.join("rooms.toml");
    std::fs::write(&file, DROP_V1).unwrap();
    let url = redis.url();
    let logs = [dir.0.join("a.log"), dir.0.join("b.log")];
    let nodes: Vec<Node> = std::thread::scope(|scope| {
        let started: Vec<_> = logs
            .iter()
            .map(|log| {
                let (url, file) = (url.clone(), file.to_str().unwrap().to_string());
                scope.spawn(move || node(log, &["--redis-url", &url, "--rooms", &file], &[]))
            })
            .collect();
        started.into_iter().map(|s| s.join().unwrap()).collect()
    });
    let said: Vec<String> = logs
        .iter()
        .flat_map(|log| outcomes(log, "spring-drop"))
        .collect();
    assert_eq!(
        said.iter().filter(|o| *o == "created").count(),
        1,
        "one node created the room, the other found it applied: {said:?}"
    );
    assert!(said.iter().any(|o| o == "unchanged"), "{said:?}");
    for node in &nodes {
        let (status, room) = admin_get(node, "/api/admin/rooms/spring-drop").await;
        assert_eq!(status, 200);
        assert_eq!(
            (&room["name"], &room["admit_per_tick"]),
            (&json!("Spring drop"), &json!(5))
        );
    }
}

/// A node that cannot have its port (the previous process still holds it,
/// in a rolling deploy on one host) stops before it writes its rooms file
/// to the shared store: the file is applied only by a node that serves.
#[tokio::test]
async fn a_node_that_cannot_have_its_port_applies_no_room() {
    let redis = RedisServer::start();
    let dir = TempDir::new("rooms-no-port");
    let file = dir.0.join("rooms.toml");
    std::fs::write(&file, DROP_V1).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let output = Command::new(BINARY)
        .args(["--listen", &address, "--admin-token", ADMIN_TOKEN])
        .args([
            "--redis-url",
            &redis.url(),
            "--rooms",
            file.to_str().unwrap(),
        ])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{said}");
    assert!(
        said.contains(&address),
        "the start error names the address: {said}"
    );
    let other = node(
        &dir.0.join("other.log"),
        &["--redis-url", &redis.url()],
        &[],
    );
    let (status, _) = admin_get(&other, "/api/admin/rooms/spring-drop").await;
    assert_eq!(status, 404, "the file's room was not made: {said}");
}

#[tokio::test]
async fn a_restart_keeps_a_live_pause_and_an_edited_table_is_applied() {
    let redis = RedisServer::start();
    let dir = TempDir::new("rooms-restart");
    let file = dir.0.join("rooms.toml");
    std::fs::write(&file, DROP_V1).unwrap();
    let log = dir.0.join("node.log");
    // The file by its environment variable this time.
    let mut node = node(
        &log,
        &["--redis-url", &redis.url()],
        &[("WAITROOM_ROOMS", file.to_str().unwrap())],
    );
    assert_eq!(outcomes(&log, "spring-drop"), ["created"]);

    // The operator's emergency stop (the file says `paused = false`), then
    // a crash and a restart with the same file: the room stays paused.
    patch(
        &node,
        "spring-drop",
        json!({"paused": true, "notice": "Back soon"}),
    )
    .await;
    crash_and_restart(&mut node);
    assert_eq!(outcomes(&log, "spring-drop"), ["created", "unchanged"]);
    let (_, room) = admin_get(&node, "/api/admin/rooms/spring-drop").await;
    assert_eq!(
        (&room["paused"], &room["admit_per_tick"]),
        (&json!(true), &json!(5))
    );

    // An edited table is applied at the next start: the fields it names
    // (`paused = false` among them: the file wins), and nothing else (the
    // notice stays).
    std::fs::write(
        &file,
        DROP_V1.replace("admit_per_tick = 5", "admit_per_tick = 7"),
    )
    .unwrap();
    crash_and_restart(&mut node);
    assert_eq!(
        outcomes(&log, "spring-drop"),
        ["created", "unchanged", "changed"]
    );
    let (_, room) = admin_get(&node, "/api/admin/rooms/spring-drop").await;
    assert_eq!(
        (&room["paused"], &room["admit_per_tick"], &room["notice"]),
        (&json!(false), &json!(7), &json!("Back soon"))
    );
}

/// Runs the binary with `rooms` as its rooms file (written to `dir`) and
/// waits for it to give up: its exit code and everything it wrote.
fn refused(dir: &Path, rooms: &str) -> (Option<i32>, String) {
    let file = dir.join("rooms.toml");
    std::fs::write(&file, rooms).unwrap();
    let mut child = Command::new(BINARY)
        .args(["--listen", "127.0.0.1:0", "--admin-token", ADMIN_TOKEN])
        .args(["--rooms", file.to_str().unwrap()])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + EXIT_WITHIN;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a node with a bad rooms file did not stop:\n{rooms}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code(), said)
}

#[test]
fn a_bad_rooms_file_stops_the_node_naming_the_line_and_the_field() {
    let dir = TempDir::new("rooms-bad");
    let head = "[[room]]\nid = \"drop\"\nname = \"Drop\"\ntarget_url = \"https://shop.example/\"\n";
    let cases = [
        (format!("{head}admit_per_tick = 5\n[oops\n"), 6, None),
        (
            format!("{head}admit_per_tik = 5\n"),
            5,
            Some("admit_per_tik"),
        ),
        (
            format!("{head}max_active = \"lots\"\n"),
            5,
            Some("max_active"),
        ),
        (
            "[[room]]\nid = \"Spring Drop\"\nname = \"x\"\ntarget_url = \"/x\"\n".into(),
            2,
            Some("id"),
        ),
        (
            "[[room]]\nid = \"drop\"\nname = \"Drop\"\ntarget_url = \"javascript:alert(1)\"\n"
                .into(),
            4,
            Some("target_url"),
        ),
        (format!("{head}\n\ntick_ms = 50\n"), 7, Some("tick_ms")),
        (
            format!("{head}user_key_file = \"no-such.key\"\n"),
            5,
            Some("user_key_file"),
        ),
    ];
    for (rooms, line, field) in cases {
        let (code, said) = refused(&dir.0, &rooms);
        assert!(
            code.is_some_and(|c| c != 0),
            "exit {code:?}; said:\n{said}\nfor\n{rooms}"
        );
        assert!(
            said.contains(&format!("rooms.toml:{line}:")),
            "line {line} named in:\n{said}\nfor\n{rooms}"
        );
        if let Some(field) = field {
            assert!(
                said.contains(&format!("field `{field}`")),
                "field {field} named in:\n{said}\nfor\n{rooms}"
            );
        }
        assert!(!said.contains("listening"), "{said}");
    }
}

fn user_token(key: &str, room: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": "user-1", "room": room, "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(key.as_bytes()),
    )
    .unwrap()
}

#[tokio::test]
async fn a_user_key_file_sets_the_key_which_no_log_or_answer_shows() {
    let dir = TempDir::new("rooms-key");
    std::fs::create_dir_all(dir.0.join("secrets")).unwrap();
    std::fs::write(dir.0.join("secrets/members.key"), format!("{USER_KEY}\n")).unwrap();
    let file = dir.0.join("rooms.toml");
    std::fs::write(
        &file,
        "[[room]]\nid = \"members\"\nname = \"Members\"\ntarget_url = \"/shop\"\n\
         user_key_file = \"secrets/members.key\"\nuser_required = true\n",
    )
    .unwrap();
    let log = dir.0.join("node.log");
    // Every log line there is, in case any of them carried the key.
    let node = node(
        &log,
        &["--rooms", file.to_str().unwrap()],
        &[("RUST_LOG", "trace")],
    );
    let http = reqwest::Client::new();
    let join = |body: Value| {
        http.post(node.url("/api/rooms/members/join"))
            .json(&body)
            .send()
    };
    assert_eq!(join(json!({})).await.unwrap().status(), 401);
    let signed_elsewhere = user_token("another-key-of-32-characters-or-more-0123", "members");
    assert_eq!(
        join(json!({"user": signed_elsewhere}))
            .await
            .unwrap()
            .status(),
        401
    );
    let joined = join(json!({"user": user_token(USER_KEY, "members")}))
        .await
        .unwrap();
    assert_eq!(
        joined.status(),
        200,
        "a token signed with the file's key joins"
    );

    let (_, room) = admin_get(&node, "/api/admin/rooms/members").await;
    assert_eq!(room["user_key_set"], true);
    let (_, rooms) = admin_get(&node, "/api/admin/rooms").await;
    for shown in [room, rooms] {
        assert!(!shown.to_string().contains(USER_KEY), "{shown}");
    }
    drop(node);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("room applied from the rooms file"));
    assert!(
        logged.contains("\"level\":\"TRACE\""),
        "the log holds every level"
    );
    assert!(!logged.contains(USER_KEY), "the key is in the log");
}

/// `deploy/rooms.example.toml`, with the key file it names, in a directory
/// of its own.
fn example_in(dir: &Path) -> PathBuf {
    let file = dir.join("rooms.toml");
    std::fs::copy(repo("deploy/rooms.example.toml"), &file).unwrap();
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    std::fs::write(dir.join("secrets/spring-drop.user-key"), USER_KEY).unwrap();
    file
}

#[tokio::test]
async fn the_example_rooms_file_starts_a_node_with_its_rooms() {
    let dir = TempDir::new("rooms-example");
    let file = example_in(&dir.0);
    let mut declared: Vec<String> = RoomsFile::load(&file)
        .unwrap()
        .rooms()
        .map(|table| table.id.to_string())
        .collect();
    declared.sort();
    assert!(declared.len() >= 2, "{declared:?}");
    let node = node(
        &dir.0.join("node.log"),
        &["--rooms", file.to_str().unwrap()],
        &[],
    );
    let (_, listed) = admin_get(&node, "/api/admin/rooms").await;
    let ids: Vec<&str> = listed["rooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|room| room["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, declared.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn the_docs_chapter_shows_the_example_and_its_snippets_load() {
    let chapter = std::fs::read_to_string(repo("docs/src/rooms-as-code.md")).unwrap();
    let include = "{{#include ../../deploy/rooms.example.toml}}";
    assert!(
        chapter.contains(include),
        "the chapter includes the example file"
    );
    let summary = std::fs::read_to_string(repo("docs/src/SUMMARY.md")).unwrap();
    assert!(
        summary.contains("(rooms-as-code.md)"),
        "SUMMARY.md lists the chapter"
    );

    let dir = TempDir::new("rooms-docs");
    let file = example_in(&dir.0);
    let mut snippets = 0;
    for block in chapter.split("```toml\n").skip(1) {
        let snippet = block.split("```").next().unwrap();
        if snippet.contains("{{#include") {
            continue;
        }
        RoomsFile::parse(&file, snippet).unwrap_or_else(|error| {
            panic!("a snippet of the docs does not load: {error}\n{snippet}")
        });
        snippets += 1;
    }
    assert!(snippets >= 1, "the chapter's own snippets are checked");
}
