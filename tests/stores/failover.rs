//! The store fails over and the service goes on: a Redis Cluster master or
//! a Sentinel-managed master killed or stalled in the middle of a sale, with
//! nodes that follow the promoted replica by themselves.
//!
//! Each test starts its own store (a cluster of three masters with a
//! replica each, or a master with two replicas and three sentinels; failure
//! detected within a second), two `waitroom` processes on it (real time,
//! as operators run them), and buyers who claim and confirm while the
//! room's master fails.

use waitroom_testkit as support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use parking_lot::Mutex;
use serde_json::{Value, json};
use support::node::{ADMIN_TOKEN, Node};
use support::redis::{RedisCluster, RedisSentinels};

/// How long the tests wait for the nodes to come back: generous, since a
/// test waits and does not time; the measured time is printed.
const RECOVERY_PATIENCE: Duration = Duration::from_secs(30);
/// How long after a call is sent its outcome is known: the client's
/// timeout, and a little more.
const SETTLED: Duration = Duration::from_millis(5_500);
/// How long every call to a node must have succeeded, once settled, for
/// the node to count as back.
const STEADY: Duration = Duration::from_millis(1_500);
const BUYERS: usize = 64;

fn nodes_on(url: &str, count: usize) -> Vec<Node> {
    (0..count)
        .map(|_| Node::start(env!("CARGO_BIN_EXE_waitroom"), &["--redis-url", url]))
        .collect()
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// A visitor's join on `node`: the status, if it answered 200.
async fn join(node: &Node, room: &str) -> Option<Value> {
    let response = http()
        .post(node.url(&format!("/api/rooms/{room}/join")))
        .send()
        .await
        .ok()?;
    (response.status() == 200).then_some(())?;
    response.json().await.ok()
}

/// A room everyone passes straight into, selling more than the buyers take
/// in a test; the buyers' passes.
async fn open_sale(nodes: &[Node], room: &str) -> Vec<String> {
    let created = http()
        .post(nodes[0].url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": room, "name": room, "target_url": "/sold",
            "admit_per_tick": 100_000, "abandon_after_s": 86_400, "pass_ttl_s": 86_400}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let put = http()
        .put(nodes[0].url(&format!("/api/admin/rooms/{room}/sale")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"stock": 1_000_000, "per_user_limit": 1_000, "hold_ttl_s": 3_600}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let mut passes = Vec::new();
    for i in 0..BUYERS {
        let status = join(&nodes[i % nodes.len()], room).await.unwrap();
        assert_eq!(status["state"], "admitted");
        passes.push(status["pass"].as_str().unwrap().to_owned());
    }
    passes
}

/// What one call answered, when it was sent, on which node.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    sent: Instant,
    node: usize,
    ok: bool,
}

/// One claim and its confirmation; whether both succeeded.
async fn buy(http: &reqwest::Client, node: &Node, room: &str, pass: &str) -> bool {
    let Ok(claimed) = http
        .post(node.url(&format!("/api/rooms/{room}/sale/claims")))
        .bearer_auth(pass)
        .json(&json!({"quantity": 1}))
        .send()
        .await
    else {
        return false;
    };
    if claimed.status() != 201 {
        return false;
    }
    let Ok(claim) = claimed.json::<Value>().await else {
        return false;
    };
    let confirm = http
        .post(node.url(&format!(
            "/api/rooms/{room}/sale/claims/{}/confirm",
            claim["claim_id"].as_str().unwrap()
        )))
        .bearer_auth(pass)
        .send()
        .await;
    confirm.is_ok_and(|c| c.status() == 200)
}

/// Buyers buying (about 100 purchases a second among them, each buyer one
/// purchase at a time) and visitors joining on every node until `stop`:
/// every outcome.
async fn keep_buying(
    nodes: &[Node],
    room: &str,
    passes: &[String],
    stop: &AtomicBool,
    outcomes: &Mutex<Vec<(&'static str, Outcome)>>,
) {
    let pace = Duration::from_millis(10 * BUYERS as u64);
    let buyers = passes.iter().enumerate().map(|(i, pass)| {
        let outcomes = &outcomes;
        async move {
            let node = i % nodes.len();
            let http = http();
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let ok = buy(&http, &nodes[node], room, pass).await;
                outcomes.lock().push(("sale", Outcome { sent, node, ok }));
                tokio::time::sleep(pace.saturating_sub(sent.elapsed())).await;
            }
        }
    });
    // Joins go out every 50 ms whether earlier ones answered or not, so they
    // show when a node's new calls succeed again, not when its hung ones end.
    let joiners = (0..nodes.len()).map(|node| {
        let outcomes = &outcomes;
        async move {
            let mut joins = futures_util::stream::FuturesUnordered::new();
            let mut every = tokio::time::interval(Duration::from_millis(50));
            while !stop.load(Ordering::Relaxed) {
                tokio::select! {
                    _ = every.tick() => joins.push(async move {
                        let sent = Instant::now();
                        let ok = join(&nodes[node], room).await.is_some();
                        ("join", Outcome { sent, node, ok })
                    }),
                    Some(outcome) = futures_util::StreamExt::next(&mut joins) => outcomes.lock().push(outcome),
                }
            }
            while let Some(outcome) = futures_util::StreamExt::next(&mut joins).await {
                outcomes.lock().push(outcome);
            }
        }
    });
    futures_util::join!(join_all(buyers), join_all(joiners));
}

/// Whether every kind of call to every node has been back for `STEADY`:
/// no call known to have failed since, and every call sent in that time
/// known to have succeeded (sent at least `SETTLED` before `now`).
fn everyone_back(outcomes: &[(&'static str, Outcome)], nodes: usize, now: Instant) -> bool {
    let Some(settled_by) = now.checked_sub(SETTLED) else {
        return false;
    };
    ["sale", "join"].iter().all(|kind| {
        (0..nodes).all(|node| {
            recovered_at(outcomes, kind, node).is_some_and(|back| back + STEADY <= settled_by)
        })
    })
}

/// The moment from which every call of `kind` sent on `node` succeeded.
fn recovered_at(outcomes: &[(&'static str, Outcome)], kind: &str, node: usize) -> Option<Instant> {
    let mut sent: Vec<&Outcome> = outcomes
        .iter()
        .filter(|(k, o)| *k == kind && o.node == node)
        .map(|(_, o)| o)
        .collect();
    sent.sort_by_key(|o| o.sent);
    let last_failure = sent.iter().rposition(|o| !o.ok);
    let first_good = match last_failure {
        Some(i) => sent.get(i + 1)?,
        None => sent.first()?,
    };
    Some(first_good.sent)
}

/// How the room's master fails.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    /// SIGKILL: its connections are refused and reset.
    Killed,
    /// SIGSTOP: it holds its connections and answers nothing, as a frozen
    /// host or a partition does; calls time out.
    Stalled,
}

/// The store under test, and how its master fails over.
enum Backing {
    Cluster(RedisCluster),
    Sentinels(RedisSentinels),
}

impl Backing {
    fn name(&self) -> &'static str {
        match self {
            Backing::Cluster(_) => "cluster",
            Backing::Sentinels(_) => "sentinel",
        }
    }

    fn url(&self) -> String {
        match self {
            Backing::Cluster(cluster) => cluster.url(),
            Backing::Sentinels(sentinels) => sentinels.url(),
        }
    }

    /// The server that holds `room` now.
    fn master_of(&self, room: &str) -> usize {
        match self {
            Backing::Cluster(cluster) => cluster.master_of(&format!("wr:{{{room}}}:room")),
            Backing::Sentinels(sentinels) => sentinels.master(),
        }
    }

    fn fail(&mut self, server: usize, failure: Failure) {
        match (self, failure) {
            (Backing::Cluster(cluster), Failure::Killed) => cluster.kill(server),
            (Backing::Cluster(cluster), Failure::Stalled) => cluster.pause(server),
            (Backing::Sentinels(sentinels), Failure::Killed) => sentinels.kill(server),
            (Backing::Sentinels(sentinels), Failure::Stalled) => sentinels.pause(server),
        }
    }

    /// Waits until another server holds `room`; that server.
    fn wait_for_failover(&self, room: &str, old: usize) -> usize {
        match self {
            Backing::Cluster(cluster) => {
                cluster.wait_for_failover(&format!("wr:{{{room}}}:room"), old, RECOVERY_PATIENCE)
            }
            Backing::Sentinels(sentinels) => sentinels.wait_for_failover(old, RECOVERY_PATIENCE),
        }
    }

    /// A room on the same master as `room`, so that its events ride the
    /// failover too.
    fn room_beside(&self, room: &str) -> String {
        let master = self.master_of(room);
        (0..)
            .map(|i| format!("line-{i}"))
            .find(|line| self.master_of(line) == master)
            .unwrap()
    }
}

/// Two nodes on `backing`; 64 buyers claim and confirm (about 100 a
/// second) and visitors join on both nodes while the room's master fails;
/// a visitor waits on a socket in another room of that master. Every node
/// must follow the promoted replica by itself: sales and joins succeed
/// again on both nodes, and the socket hears its admission.
async fn fail_over_mid_sale(mut backing: Backing, failure: Failure) {
    let room = "failover";
    let name = backing.name();
    let nodes = nodes_on(&backing.url(), 2);
    let passes = open_sale(&nodes, room).await;
    let line = backing.room_beside(room);
    let mut waiting = waiting_visitor(&nodes, &line).await;
    let stop = AtomicBool::new(false);

    let outcomes = Mutex::new(Vec::new());
    let load = keep_buying(&nodes, room, &passes, &stop, &outcomes);
    let failover = async {
        // The sale is going on before the master fails.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let master = backing.master_of(room);
        let failed_at = Instant::now();
        backing.fail(master, failure);
        let backing = &backing;
        let promoted = tokio::task::block_in_place(|| backing.wait_for_failover(room, master));
        let promoted_at = Instant::now();
        // The nodes have `RECOVERY_PATIENCE` to follow the new master; the
        // load stops once every node has been back a while.
        while promoted_at.elapsed() < RECOVERY_PATIENCE
            && !everyone_back(&outcomes.lock(), nodes.len(), Instant::now())
        {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        stop.store(true, Ordering::Relaxed);
        (master, failed_at, promoted_at, promoted)
    };
    let ((), (master, failed_at, promoted_at, promoted)) = futures_util::join!(load, failover);
    let outcomes = outcomes.into_inner();

    let count = |kind: &str, ok: bool, from: Instant, to: Instant| {
        outcomes
            .iter()
            .filter(|(k, o)| *k == kind && o.ok == ok && o.sent >= from && o.sent < to)
            .count()
    };
    let end = Instant::now();
    let before = count("sale", true, failed_at - Duration::from_secs(2), failed_at);
    assert!(before > 0, "buyers bought before the failover");
    println!(
        "{name} {failure:?}: replica {promoted} took over from master {master} {:.1} s after it failed; \
         purchases: {before} before, {} after the promotion; calls failed: {} sales, {} joins",
        (promoted_at - failed_at).as_secs_f64(),
        count("sale", true, promoted_at, end),
        count("sale", false, failed_at, end),
        count("join", false, failed_at, end),
    );
    for kind in ["sale", "join"] {
        for node in 0..nodes.len() {
            let back = recovered_at(&outcomes, kind, node).unwrap_or_else(|| {
                let failed: Vec<String> = outcomes
                    .iter()
                    .filter(|(k, o)| *k == kind && o.node == node && !o.ok)
                    .map(|(_, o)| {
                        format!(
                            "{:.2}",
                            o.sent.saturating_duration_since(promoted_at).as_secs_f64()
                        )
                    })
                    .collect();
                panic!(
                    "the last {kind} call sent to node {node} failed, {:.1} s after the promotion; \
                     its failed calls were sent at these seconds after it: {failed:?}",
                    end.saturating_duration_since(promoted_at).as_secs_f64(),
                )
            });
            println!(
                "{name} {failure:?}: every {kind} sent to node {node} succeeded from {:.1} s after the promotion ({:.1} s after the failure)",
                back.saturating_duration_since(promoted_at).as_secs_f64(),
                back.saturating_duration_since(failed_at).as_secs_f64(),
            );
        }
    }
    // Events of the failed master's slots reach the sockets again.
    let resumed = http()
        .patch(nodes[0].url(&format!("/api/admin/rooms/{line}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"paused": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let heard = tokio::time::timeout(RECOVERY_PATIENCE, async {
        loop {
            let status = support::next_status(&mut waiting).await;
            if status["state"] == "admitted" {
                return;
            }
        }
    })
    .await;
    assert!(
        heard.is_ok(),
        "{name} {failure:?}: the socket on node 1 heard statuses but not its admission within {} s of the room's resumption",
        RECOVERY_PATIENCE.as_secs()
    );
}

/// A visitor waiting in a paused room `line`, its socket on the second node.
async fn waiting_visitor(nodes: &[Node], line: &str) -> support::Socket {
    let created = http()
        .post(nodes[0].url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(
            &json!({"id": line, "name": line, "target_url": "/in", "paused": true,
            "tick_ms": 200, "abandon_after_s": 86_400}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let status = join(&nodes[0], line).await.unwrap();
    assert_eq!(status["state"], "waiting");
    let url = nodes[1]
        .url(&format!(
            "/api/rooms/{line}/ws?ticket={}",
            status["ticket"].as_str().unwrap()
        ))
        .replacen("http", "ws", 1);
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    assert_eq!(support::next_status(&mut socket).await["position"], 1);
    socket
}

async fn cluster() -> Backing {
    Backing::Cluster(
        tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(1))
            .await
            .unwrap(),
    )
}

async fn sentinels() -> Backing {
    Backing::Sentinels(
        tokio::task::spawn_blocking(RedisSentinels::start)
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_master_killed_mid_sale_is_followed_by_every_node() {
    fail_over_mid_sale(cluster().await, Failure::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_master_stalled_mid_sale_is_followed_by_every_node() {
    fail_over_mid_sale(cluster().await, Failure::Stalled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sentinel_master_killed_mid_sale_is_followed_by_every_node() {
    fail_over_mid_sale(sentinels().await, Failure::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sentinel_master_stalled_mid_sale_is_followed_by_every_node() {
    fail_over_mid_sale(sentinels().await, Failure::Stalled).await;
}

/// One purchase that survives retries: the claim carries an
/// `Idempotency-Key` (a retry after a 503 gets the same claim, never a
/// second hold), the confirm is retried as it is. The confirmed claim's id
/// when the confirm was acknowledged (200).
async fn buy_once(
    http: &reqwest::Client,
    node: &Node,
    room: &str,
    pass: &str,
    key: &str,
) -> Option<String> {
    let claimed = http
        .post(node.url(&format!("/api/rooms/{room}/sale/claims")))
        .bearer_auth(pass)
        .header("Idempotency-Key", key)
        .json(&json!({"quantity": 1}))
        .send()
        .await
        .ok()?;
    if claimed.status() != 201 {
        return None;
    }
    let claim: Value = claimed.json().await.ok()?;
    let id = claim["claim_id"].as_str()?.to_owned();
    let confirmed = http
        .post(node.url(&format!("/api/rooms/{room}/sale/claims/{id}/confirm")))
        .bearer_auth(pass)
        .send()
        .await
        .ok()?;
    (confirmed.status() == 200).then_some(id)
}

/// What a lossy failover did to the confirms acknowledged to buyers.
struct Losses {
    /// Confirms acknowledged before the master failed, and after the promotion.
    before: usize,
    after: usize,
    /// Acknowledged confirms missing from the orders afterwards.
    lost: usize,
    /// Purchases refused meanwhile (a 503 or a timeout).
    refused: usize,
}

/// Two nodes with `--redis-wait-replicas wait` on a cluster whose masters
/// have two replicas each; buyers claim and confirm while the room's
/// replicas stall (SIGSTOP) and their links are cut on the master
/// (`CLIENT KILL TYPE replica`), so what the master takes from then on
/// reaches no replica; then the master is killed and the replicas go on,
/// one of them is promoted without those writes, and the other replicates
/// it (so `WAIT 1` can be met again).
async fn confirms_through_a_lossy_failover(wait: u32) -> Losses {
    let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(2))
        .await
        .unwrap();
    let room = "durable";
    let key = format!("wr:{{{room}}}:room");
    let wait_flag = wait.to_string();
    let nodes: Vec<Node> = (0..2)
        .map(|_| {
            Node::start(
                env!("CARGO_BIN_EXE_waitroom"),
                &[
                    "--redis-url",
                    &cluster.url(),
                    "--redis-wait-replicas",
                    &wait_flag,
                ],
            )
        })
        .collect();
    let passes = open_sale(&nodes, room).await;
    let stop = AtomicBool::new(false);
    let acknowledged = Mutex::new(Vec::new());
    let refused = std::sync::atomic::AtomicUsize::new(0);
    let buyers = passes.iter().enumerate().map(|(i, pass)| {
        let (acknowledged, refused, stop, nodes) = (&acknowledged, &refused, &stop, &nodes);
        async move {
            let http = http();
            let mut purchase = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("buyer-{i}-purchase-{purchase}");
                match buy_once(&http, &nodes[i % nodes.len()], room, pass, &key).await {
                    Some(id) => {
                        acknowledged.lock().push((Instant::now(), id));
                        purchase += 1;
                    }
                    None => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10 * BUYERS as u64)).await;
            }
        }
    });
    let failover = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let master = cluster.master_of(&key);
        let replicas = cluster.replicas_of(master);
        assert_eq!(replicas.len(), 2);
        for &replica in &replicas {
            cluster.pause(replica);
        }
        cluster.cut_replica_links(master);
        let failed_at = Instant::now();
        // What the master takes now reaches no replica.
        tokio::time::sleep(Duration::from_secs(2)).await;
        cluster.kill(master);
        for &replica in &replicas {
            cluster.resume(replica);
        }
        let cluster = &cluster;
        tokio::task::block_in_place(|| cluster.wait_for_failover(&key, master, RECOVERY_PATIENCE));
        let promoted_at = Instant::now();
        // The sale goes on after the promotion.
        tokio::time::sleep(Duration::from_secs(8)).await;
        stop.store(true, Ordering::Relaxed);
        (failed_at, promoted_at)
    };
    let (_, (failed_at, promoted_at)) = futures_util::join!(join_all(buyers), failover);

    let orders: Value = loop {
        let answer = http()
            .get(nodes[0].url(&format!("/api/admin/rooms/{room}/sale/orders")))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        if answer.status() == 200 {
            break answer.json().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ordered: std::collections::HashSet<&str> = orders["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|order| order["claim_id"].as_str().unwrap())
        .collect();
    let acknowledged = acknowledged.into_inner();
    let losses = Losses {
        before: acknowledged
            .iter()
            .filter(|(at, _)| *at < failed_at)
            .count(),
        after: acknowledged
            .iter()
            .filter(|(at, _)| *at > promoted_at)
            .count(),
        lost: acknowledged
            .iter()
            .filter(|(_, id)| !ordered.contains(id.as_str()))
            .count(),
        refused: refused.into_inner(),
    };
    println!(
        "--redis-wait-replicas {wait}: {} confirms acknowledged ({} before the replicas stalled, {} after the promotion), {} of them lost; {} purchases refused meanwhile",
        acknowledged.len(),
        losses.before,
        losses.after,
        losses.lost,
        losses.refused
    );
    losses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_waiting_for_replicas_a_failover_loses_acknowledged_confirms() {
    let losses = confirms_through_a_lossy_failover(0).await;
    assert!(
        losses.lost > 0,
        "the failover this test stages loses what only the master had"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_for_a_replica_a_failover_loses_no_acknowledged_confirm() {
    let losses = confirms_through_a_lossy_failover(1).await;
    assert!(
        losses.before > 0,
        "confirms were acknowledged before the failover"
    );
    assert!(
        losses.after > 0,
        "and after it, once a replica follows the new master"
    );
    assert_eq!(losses.lost, 0, "no acknowledged confirm was lost");
    assert!(
        losses.refused > 0,
        "while the replicas were cut off, purchases were refused, not acknowledged"
    );
}
