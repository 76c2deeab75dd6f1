//! Notifications across nodes that die (design rule 16; api.md, "Step
//! away: notifications"): three `waitroom` processes on one private Redis
//! send a room's webhook events, one is killed with SIGKILL while it holds
//! events it claimed, and still every event is delivered, none twice
//! under different ids, the dead node's taken over by the others.
//!
//! The receiver is testkit's loopback recorder, which also names the child
//! process (the node) that opened each connection: the test tells which
//! node sent what without trusting anything the nodes say.

use waitroom_testkit as support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use support::health_origin::{HealthOrigin, Received};
use support::node::{ADMIN_TOKEN, Node, SECRET};
use support::redis::RedisServer;

const ROOM: &str = "callback";
/// Visitors who ask to be notified: more than one tick's slice (250), so
/// that `near` is also sent between the slices.
const VISITORS: usize = 300;
const WEBHOOK_SECRET: &str = "a-webhook-secret-of-at-least-32-characters";
/// How long the receiver holds each request at first, so that a node has
/// events under way, and more claimed, when it dies.
const SLOW: Duration = Duration::from_secs(2);
/// The nodes' `--notify-takeover-s`.
const TAKEOVER_S: u64 = 3;

/// A node of the binary on `redis`, sending notifications to loopback,
/// its resume links on `public_url` (`None`: its own address).
fn notifying_node(redis: &str, public_url: Option<String>) -> Node {
    let redis = redis.to_owned();
    let log = std::env::var_os("WAITROOM_TEST_NODE_LOG").is_some();
    Node::start_with(move |port| {
        let public = public_url
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_waitroom"));
        command
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-token", ADMIN_TOKEN, "--secret", SECRET])
            .args(["--redis-url", &redis, "--public-url", &public])
            .args(["--outbound-allow-networks", "127.0.0.0/8"])
            .args(["--notify-takeover-s", &TAKEOVER_S.to_string()])
            .args(["--notify-per-ip", "10000"])
            .stdin(Stdio::null())
            .stdout(if log { Stdio::inherit() } else { Stdio::null() })
            .stderr(if log { Stdio::inherit() } else { Stdio::null() });
        command
    })
}

/// Polls `check` every 50 ms until it finds what it looks for, for at most
/// `within`; `what` names it if it never does.
async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what} after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One webhook request, checked and read.
struct Delivered {
    at: Instant,
    sender: u32,
    body: Value,
}

impl Delivered {
    fn id(&self) -> &str {
        self.body["id"].as_str().unwrap()
    }
}

/// Checks `request` as api.md describes the webhook's call: a POST of the
/// event's JSON, signed `t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
/// "<t>.<body>")>`, its resume link on the public URL. A request whose
/// sender had ended when the receiver looked was the `killed` node's.
fn checked(request: &Received, public_url: &str, killed: u32) -> Delivered {
    assert_eq!(request.method, "POST");
    request.assert_signed(WEBHOOK_SECRET);
    let body: Value = serde_json::from_slice(&request.body).expect("a JSON body");
    let (id, kind, visitor) = (
        body["id"].as_str().unwrap(),
        body["type"].as_str().unwrap(),
        body["visitor"].as_str().unwrap(),
    );
    assert_eq!(
        id,
        format!("{visitor}-{kind}"),
        "the id names the visitor and the kind"
    );
    assert!(matches!(kind, "near" | "admitted"), "{body}");
    assert_eq!(body["room"], ROOM);
    assert!(
        body["contact"].is_string(),
        "the webhook's body has the contact: {body}"
    );
    let resume = body["resume_url"].as_str().unwrap();
    assert!(
        resume.starts_with(&format!("{public_url}/rooms/{ROOM}/resume?code=")),
        "{resume}"
    );
    if kind == "near" {
        let position = body["position"].as_u64().expect("near has a position");
        assert!(position <= 2, "near comes with 1 or fewer ahead: {body}");
    }
    Delivered {
        at: request.at,
        // No process held the connection when the receiver looked: its
        // sender had died by then, with the request already written.
        sender: request.sender_pid.unwrap_or(killed),
        body,
    }
}

/// The outbox's length and how many entries were ever added to it.
async fn outbox(redis: &mut redis::aio::MultiplexedConnection) -> (u64, u64) {
    let key = format!("wr:{{{ROOM}}}:outbox");
    let info: HashMap<String, redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(&key)
        .query_async(redis)
        .await
        .expect("the room's outbox exists");
    let number = |field: &str| match info.get(field) {
        Some(redis::Value::Int(n)) => *n as u64,
        other => panic!("XINFO STREAM {key}: {field} is {other:?}"),
    };
    (number("length"), number("entries-added"))
}

/// The outbox's events claimed and not yet settled, by consumer (a node):
/// their ids.
async fn held(redis: &mut redis::aio::MultiplexedConnection) -> BTreeMap<String, BTreeSet<String>> {
    let key = format!("wr:{{{ROOM}}}:outbox");
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(&key)
        .arg("-")
        .arg("+")
        .query_async(redis)
        .await
        .unwrap();
    let ids: HashMap<String, String> = entries
        .into_iter()
        .map(|(entry, fields)| {
            let id = fields.into_iter().find(|(name, _)| name == "id").unwrap().1;
            (entry, id)
        })
        .collect();
    let pending: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(&key)
        .arg("senders")
        .arg("-")
        .arg("+")
        .arg(10_000)
        .query_async(redis)
        .await
        .unwrap();
    let mut held: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (entry, consumer, _, _) in pending {
        held.entry(consumer)
            .or_default()
            .insert(ids[&entry].clone());
    }
    held
}

/// Every visitor joins through one of the nodes in turn and asks to be
/// called on the webhook with one place ahead.
async fn join_and_ask(nodes: &[Node]) {
    let http = reqwest::Client::new();
    let bases: Vec<String> = nodes.iter().map(|node| node.url("")).collect();
    stream::iter(0..VISITORS)
        .for_each_concurrent(16, |i| {
            let (http, base) = (http.clone(), bases[i % bases.len()].clone());
            async move {
                let joined: Value = http
                    .post(format!("{base}/api/rooms/{ROOM}/join"))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let ticket = joined["ticket"].as_str().expect("a ticket").to_owned();
                let asked = http
                    .post(format!("{base}/api/rooms/{ROOM}/notify"))
                    .bearer_auth(&ticket)
                    .json(&json!({"contact": format!("visitor-{i}@example.test"), "ahead": 1}))
                    .send()
                    .await
                    .unwrap();
                assert!(asked.status().is_success(), "notify: {}", asked.status());
            }
        })
        .await;
}

/// The issue's words: "three nodes, one killed while it holds pending
/// events: every event delivered, none twice under different ids".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_while_it_holds_events_leaves_them_to_the_others() {
    let started = Instant::now();
    let redis = RedisServer::start();
    let first = notifying_node(&redis.url(), None);
    let public_url = first.url("");
    let public = public_url.trim_end_matches('/').to_owned();
    let mut nodes = vec![first];
    for _ in 0..2 {
        nodes.push(notifying_node(&redis.url(), Some(public.clone())));
    }
    let pids: Vec<u32> = nodes.iter().map(Node::pid).collect();
    let receiver = HealthOrigin::start().await;
    receiver.name_senders();
    receiver.set_delay(SLOW);

    let http = reqwest::Client::new();
    let created = http
        .post(nodes[0].url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({
            "id": ROOM, "name": "Called back", "target_url": "/shop",
            "paused": true, "admit_per_tick": 1000, "tick_ms": 200,
            "abandon_after_s": 120,
            "notify_webhook_url": receiver.url_for("/hook"),
            "notify_webhook_secret": WEBHOOK_SECRET,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    join_and_ask(&nodes).await;

    let unpaused = http
        .patch(nodes[1].url(&format!("/api/admin/rooms/{ROOM}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"paused": false}))
        .send()
        .await
        .unwrap();
    assert!(unpaused.status().is_success(), "{}", unpaused.status());

    // Node 1 dies once it is sending admissions (the receiver knows the
    // sender once it answered): it then holds what it has under way and
    // what it claimed with it.
    let victim = pids[0];
    eventually(
        "node 1 to send an admission",
        Duration::from_secs(15),
        || {
            let sending = receiver.received().iter().any(|request| {
                request.sender_pid == Some(victim)
                    && serde_json::from_slice::<Value>(&request.body)
                        .is_ok_and(|body| body["type"] == "admitted")
            });
            async move { sending.then_some(()) }
        },
    )
    .await;
    nodes[0].signal("-KILL");
    nodes[0].wait(Duration::from_secs(5));
    let killed_at = Instant::now();
    let mut store = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // What node 1 held when it died: the consumer holding what it sent.
    let sent_by_victim: BTreeSet<String> = receiver
        .received()
        .iter()
        .filter(|request| request.sender_pid == Some(victim))
        .map(|request| serde_json::from_slice::<Value>(&request.body).unwrap()["id"].to_string())
        .map(|id| id.trim_matches('"').to_owned())
        .collect();
    let victim_held = held(&mut store)
        .await
        .into_values()
        .find(|ids| !ids.is_disjoint(&sent_by_victim))
        .expect("node 1 held events in the outbox when it died");
    // The receiver stays slow until every visitor's admission has been
    // sent once: the living nodes' passes then outlast the takeover time,
    // unevenly, their own claims to keep while they take node 1's over.
    // Then it is fast, for what is left.
    eventually("every admission sent once", Duration::from_secs(40), || {
        let sent: BTreeSet<String> = receiver
            .received()
            .iter()
            .filter_map(|request| serde_json::from_slice::<Value>(&request.body).ok())
            .filter_map(|body| body["id"].as_str().map(str::to_owned))
            .filter(|id| id.ends_with("-admitted"))
            .collect();
        async move { (sent.len() == VISITORS).then_some(()) }
    })
    .await;
    receiver.set_delay(Duration::ZERO);
    let (everything, added) = eventually(
        "every event delivered and the outbox empty",
        Duration::from_secs(60),
        || {
            let requests = receiver.received();
            let mut store = store.clone();
            async move {
                let ids: BTreeSet<String> = requests
                    .iter()
                    .filter_map(|request| serde_json::from_slice::<Value>(&request.body).ok())
                    .filter_map(|body| body["id"].as_str().map(str::to_owned))
                    .collect();
                let admitted = ids.iter().filter(|id| id.ends_with("-admitted")).count();
                let (length, added) = outbox(&mut store).await;
                (admitted == VISITORS && length == 0 && ids.len() as u64 == added)
                    .then_some((requests, added))
            }
        },
    )
    .await;
    let ran = started.elapsed();

    let delivered: Vec<Delivered> = everything
        .iter()
        .map(|request| checked(request, &public, victim))
        .collect();
    assert!(
        delivered.iter().all(|one| pids.contains(&one.sender)),
        "every call came from one of the nodes"
    );

    // Each event is one body, whoever sent it and however often.
    let mut by_id: BTreeMap<&str, Vec<&Delivered>> = BTreeMap::new();
    for one in &delivered {
        by_id.entry(one.id()).or_default().push(one);
    }
    for (id, copies) in &by_id {
        assert!(
            copies.iter().all(|copy| copy.body == copies[0].body),
            "{id} was sent with different bodies"
        );
    }
    // One id per visitor and kind, one contact per visitor, one visitor per contact.
    let mut kinds: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    let mut contacts: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut visitors_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for one in &delivered {
        let visitor = one.body["visitor"].as_str().unwrap();
        let contact = one.body["contact"].as_str().unwrap();
        kinds
            .entry((visitor, one.body["type"].as_str().unwrap()))
            .or_default()
            .insert(one.id());
        contacts.entry(visitor).or_default().insert(contact);
        visitors_of.entry(contact).or_default().insert(visitor);
    }
    assert!(kinds.values().all(|ids| ids.len() == 1));
    assert!(
        contacts.values().all(|them| them.len() == 1),
        "one contact per visitor"
    );
    assert!(
        visitors_of.values().all(|them| them.len() == 1),
        "one visitor per contact"
    );
    let expected: BTreeSet<String> = (0..VISITORS)
        .map(|i| format!("visitor-{i}@example.test"))
        .collect();
    let seen: BTreeSet<String> = visitors_of.keys().map(|c| c.to_string()).collect();
    assert_eq!(
        seen, expected,
        "every visitor was called on their own contact"
    );
    let admitted = by_id.keys().filter(|id| id.ends_with("-admitted")).count();
    let near = by_id.keys().filter(|id| id.ends_with("-near")).count();
    assert_eq!(admitted, VISITORS, "every visitor's admission was sent");
    assert_eq!(by_id.len() as u64, added, "every event written was sent");

    // The dead node's events were taken over: sent again by another after
    // it died. Among the living, an event goes to one node only.
    let taken_over: Vec<&str> = by_id
        .iter()
        .filter(|(_, copies)| {
            copies.iter().any(|copy| copy.sender == victim)
                && copies
                    .iter()
                    .any(|copy| copy.sender != victim && copy.at >= killed_at)
        })
        .map(|(id, _)| *id)
        .collect();
    let by_two_living: Vec<&str> = by_id
        .iter()
        .filter(|(_, copies)| {
            let living: BTreeSet<u32> = copies
                .iter()
                .map(|copy| copy.sender)
                .filter(|sender| *sender != victim)
                .collect();
            living.len() > 1
        })
        .map(|(id, _)| *id)
        .collect();
    for id in &victim_held {
        assert!(
            by_id[id.as_str()]
                .iter()
                .any(|copy| copy.sender != victim && copy.at >= killed_at),
            "{id}, held by node 1 when it died, was sent by another node after"
        );
    }
    let from_victim = delivered.iter().filter(|one| one.sender == victim).count();
    let repeats = delivered.len() - by_id.len();
    eprintln!(
        "{} requests for {} events ({admitted} admitted, {near} near), {repeats} repeated; \
         node 1 sent {from_victim} and held {} when it died, {} sent again after; \
         sent by two living nodes: {}; per node: {:?}; ran {:?}",
        delivered.len(),
        by_id.len(),
        victim_held.len(),
        taken_over.len(),
        by_two_living.len(),
        pids.iter()
            .map(|pid| delivered.iter().filter(|one| one.sender == *pid).count())
            .collect::<Vec<_>>(),
        ran,
    );
    assert!(
        !taken_over.is_empty(),
        "node 1 died holding events under way: another node sent them again"
    );
    assert!(
        by_two_living.is_empty(),
        "retries aside, one node sends an event: {by_two_living:?}"
    );
}
