//! A private `redis-server` for one test: a free port, its own directory,
//! killed when dropped. A machine without `redis-server` fails loudly.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use crate::ports::free_port;
use crate::ports::{free_cluster_port, start_on_ports};
use crate::tls::Secured;

pub struct RedisServer {
    pub port: u16,
    /// The TLS port, when the server is [`Secured`] with TLS.
    pub tls_port: Option<u16>,
    pub dir: std::path::PathBuf,
    child: Option<Child>,
    args: Vec<String>,
    secured: Secured,
}

/// Without persistence, and a replica that connects is sent its data at
/// once, not after the default 5 s of diskless delay.
const EPHEMERAL: [&str; 6] = [
    "--save",
    "",
    "--appendonly",
    "no",
    "--repl-diskless-sync-delay",
    "0",
];

/// How long a server may take to answer after it was started.
const STARTUP: Duration = Duration::from_secs(10);

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> Self {
        Self::start_with(&EPHEMERAL)
    }

    /// Starts a server with extra arguments (say `--appendonly yes`).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_on(free_port, "redis", extra, &Secured::default())
    }

    /// Starts a server without persistence, secured as `secured` says.
    pub fn start_secured(secured: &Secured) -> Self {
        Self::start_on(free_port, "redis", &EPHEMERAL, secured)
    }

    /// Starts one on a port from `choose` (fresh ones for each attempt).
    fn start_on(choose: fn() -> u16, kind: &str, extra: &[&str], secured: &Secured) -> Self {
        start_on_ports("redis-server", choose, |port| {
            let dir = temp_dir(kind);
            let mut server = Self {
                port,
                tls_port: secured.tls.as_ref().map(|_| choose()),
                dir,
                child: None,
                args: extra.iter().map(|a| a.to_string()).collect(),
                secured: secured.clone(),
            };
            server.launch().map(|()| server)
        })
    }

    /// The plain port's URL, with the default user's password if it has one.
    pub fn url(&self) -> String {
        let password = match &self.secured.password {
            Some(password) => format!(":{password}@"),
            None => String::new(),
        };
        format!("redis://{password}127.0.0.1:{}/", self.port)
    }

    /// The TLS port's URL, by the name its certificate gives
    /// (`localhost`), with the user (or password) the node is to use.
    pub fn tls_url(&self) -> String {
        let port = self.tls_port.expect("the server is secured with TLS");
        format!("rediss://{}localhost:{port}/", self.secured.userinfo())
    }

    /// Starts a replica of `master` (no persistence) and waits until it has
    /// synced, so that `WAIT 1` on the master is met from the first write.
    /// The master is best started with [`RedisServer::start`], which sends a
    /// replica its data without delay.
    pub fn start_replica_of(master: &RedisServer) -> Self {
        let port = master.port.to_string();
        let replica = Self::start_with(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--replicaof",
            "127.0.0.1",
            &port,
        ]);
        // The replica says it is up once it loaded the master's data; the
        // master counts it (for WAIT) only after its first acknowledgement,
        // up to a second later.
        let deadline = Instant::now() + STARTUP;
        while !replica.info("replication").is_some_and(|info| {
            info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0")
        }) || !master
            .info("replication")
            .is_some_and(|info| info.contains("state=online"))
        {
            assert!(Instant::now() < deadline, "the replica did not sync");
            std::thread::sleep(Duration::from_millis(20));
        }
        replica
    }

    /// The port other servers and clients are given: the TLS one when it
    /// has one (a Cluster with TLS announces it; replication uses it).
    pub fn client_port(&self) -> u16 {
        self.tls_port.unwrap_or(self.port)
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts the process and waits until it answers; `Err` when it exits
    /// first (its port was taken) or never answers.
    fn launch(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--dir",
            ])
            .arg(&self.dir)
            .args(&self.args)
            .args(self.secured.server_args(self.tls_port))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server is needed for these tests: run ./scripts/test, which installs it",
            );
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + STARTUP;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!("redis-server exited with {status}"));
            }
            // Answered by this very process (not another that holds the
            // port), with its data loaded.
            if self.server_pid() == Some(pid) && self.loaded() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.stop();
                return Err(format!("redis-server did not answer within {STARTUP:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `process_id` of whatever Redis answers on this port.
    fn server_pid(&self) -> Option<u32> {
        self.info("server")?
            .lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
    }

    /// A section of `INFO` (answered while loading, too).
    fn info(&self, section: &str) -> Option<String> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut connection = client
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        redis::cmd("INFO").arg(section).query(&mut connection).ok()
    }

    /// Whether the server finished loading its data (it answers `LOADING`
    /// to every command but a few until then).
    fn loaded(&self) -> bool {
        self.info("persistence")
            .is_some_and(|info| info.lines().any(|line| line.trim() == "loading:0"))
    }

    /// Stops the server (SIGKILL: as abrupt as a crash).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory (the port it just
    /// left; tried again for a moment if the kernel still holds it).
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + STARTUP;
        while let Err(reason) = self.launch() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start again on port {}: {reason}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn temp_dir(kind: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "waitroom-{kind}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A local Redis Cluster of three masters, with replicas or without, for
/// one test. Failures are detected within a second (`cluster-node-timeout`),
/// and a replica takes over however long it was cut off, so a test can kill
/// a master and see a replica promoted in a few seconds.
pub struct RedisCluster {
    /// The masters as created first, then their replicas.
    nodes: Vec<RedisServer>,
    /// Nodes stalled with SIGSTOP: not asked anything until resumed.
    paused: std::sync::Mutex<std::collections::HashSet<usize>>,
    secured: Secured,
}

/// One line of `CLUSTER NODES`.
struct ClusterNode {
    id: String,
    port: u16,
    master: bool,
    failed: bool,
    /// The master's id, for a replica.
    replica_of: Option<String>,
    slots: Vec<(u16, u16)>,
}

/// How many sets of fresh nodes a cluster is created from before the test
/// fails.
const CREATE_ATTEMPTS: usize = 3;

/// `redis-cli --cluster create` over `nodes`: `Err` with what it printed,
/// and what each node already knew, when it refused.
fn create_cluster(
    nodes: &[RedisServer],
    replicas: usize,
    client_options: &[String],
) -> Result<(), String> {
    if replicas == 0 && !client_options.iter().any(|option| option == "--tls") {
        return create_masters(nodes, client_options);
    }
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.client_port()))
        .collect();
    let created = Command::new("redis-cli")
        .args(client_options)
        .arg("--cluster")
        .arg("create")
        .args(&addresses)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .stdin(Stdio::null())
        .output()
        .expect("redis-cli is needed for the cluster tests: run ./scripts/test, which installs it");
    if created.status.success() {
        return Ok(());
    }
    let known: Vec<String> = nodes
        .iter()
        .map(|node| {
            let nodes = Command::new("redis-cli")
                .args(client_options)
                .args(["-p", &node.client_port().to_string(), "CLUSTER", "NODES"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            format!("{} knew:\n{nodes}", node.client_port())
        })
        .collect();
    Err(format!(
        "{}{}\n{}",
        String::from_utf8_lossy(&created.stdout),
        String::from_utf8_lossy(&created.stderr),
        known.join("\n")
    ))
}

/// Three masters (no replicas) made a cluster by hand: each given a third of
/// the slots, and the first introduced to the others. What `redis-cli
/// --cluster create` does, without its second-long pauses between steps:
/// the conformance suite makes a cluster for each of its scenarios.
fn create_masters(nodes: &[RedisServer], client_options: &[String]) -> Result<(), String> {
    let run = |node: &RedisServer, args: &[String]| -> Result<(), String> {
        let out = Command::new("redis-cli")
            .args(client_options)
            .args(["-p", &node.client_port().to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli: {e}"))?;
        let said = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && said.trim() == "OK" {
            Ok(())
        } else {
            Err(format!(
                "{args:?} on {}: {said}{}",
                node.client_port(),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    // A node that already knows another (met between its start and now)
    // is no fresh node: refused as `--cluster create` refuses it.
    for node in nodes {
        let known = Command::new("redis-cli")
            .args(client_options)
            .args(["-p", &node.client_port().to_string(), "CLUSTER", "NODES"])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .map_err(|e| format!("redis-cli: {e}"))?;
        if known.lines().filter(|line| !line.trim().is_empty()).count() != 1 {
            return Err(format!(
                "[ERR] Node 127.0.0.1:{} is not empty. It knows:\n{known}",
                node.client_port()
            ));
        }
    }
    const SLOTS: usize = 16_384;
    let share = SLOTS / nodes.len();
    for (n, node) in nodes.iter().enumerate() {
        let first = n * share;
        let last = if n + 1 == nodes.len() {
            SLOTS - 1
        } else {
            first + share - 1
        };
        run(
            node,
            &[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &first.to_string(),
                &last.to_string(),
            ]
            .map(String::from),
        )?;
    }
    for other in &nodes[1..] {
        run(
            &nodes[0],
            &[
                "CLUSTER",
                "MEET",
                "127.0.0.1",
                &other.client_port().to_string(),
            ]
            .map(String::from),
        )?;
    }
    Ok(())
}

impl RedisCluster {
    pub fn start() -> Self {
        Self::start_with_replicas(0)
    }

    /// Three masters with `replicas` replicas each.
    pub fn start_with_replicas(replicas: usize) -> Self {
        Self::start_secured(replicas, &Secured::default())
    }

    /// Three masters with `replicas` replicas each, secured as `secured`
    /// says: with TLS, the cluster's bus and replication use it too, and
    /// the nodes announce their TLS ports.
    pub fn start_secured(replicas: usize, secured: &Secured) -> Self {
        let mut options = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "1000",
            "--cluster-replica-validity-factor",
            "0",
        ];
        options.extend(EPHEMERAL);
        if secured.tls.is_some() {
            options.extend(["--tls-cluster", "yes", "--tls-replication", "yes"]);
        }
        let mut client_options = Vec::new();
        if let Some(certificates) = &secured.tls {
            client_options.extend(["--tls".to_owned(), "--cacert".to_owned()]);
            client_options.push(certificates.ca_file.display().to_string());
        }
        if let Some(password) = &secured.password {
            client_options.extend(["-a", password, "--no-auth-warning"].map(String::from));
        }
        // Fresh nodes, and fresh ones again when `--cluster create`
        // refuses them: CI once found a node just started here "not empty"
        // (it knew other nodes, met between its start and the creation;
        // whose, the failure did not say, so now it lists them).
        let mut failures = Vec::new();
        let nodes = loop {
            let nodes: Vec<RedisServer> = (0..3 * (1 + replicas))
                .map(|_| RedisServer::start_on(free_cluster_port, "cluster", &options, secured))
                .collect();
            match create_cluster(&nodes, replicas, &client_options) {
                Ok(()) => break nodes,
                Err(reason) => failures.push(reason),
            }
            assert!(
                failures.len() < CREATE_ATTEMPTS,
                "redis-cli --cluster create failed {CREATE_ATTEMPTS} times:\n{}",
                failures.join("\n")
            );
        };
        let cluster = Self {
            nodes,
            paused: Default::default(),
            secured: secured.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in 0..cluster.nodes.len() {
            while !cluster.node_sees_everyone_ok(node) || !cluster.replica_in_sync(node) {
                assert!(Instant::now() < deadline, "the cluster did not come up");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        cluster
    }

    /// The URL of the cluster, every node a seed: over TLS, with the
    /// user or password, when the cluster is secured so.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.client_port()))
            .collect();
        let scheme = match self.secured.tls {
            Some(_) => "rediss+cluster",
            None => "redis+cluster",
        };
        format!("{scheme}://{}{}/", self.secured.userinfo(), hosts.join(","))
    }

    /// The URL of the cluster with one node as its only seed.
    pub fn url_through(&self, node: usize) -> String {
        format!("redis+cluster://127.0.0.1:{}/", self.nodes[node].port)
    }

    pub fn node(&self, index: usize) -> &RedisServer {
        &self.nodes[index]
    }

    /// The node (an index into the cluster's nodes) that serves `key` now.
    pub fn master_of(&self, key: &str) -> usize {
        let slot = self.slot_of(key);
        let nodes = self.cluster_nodes();
        let master = nodes
            .iter()
            .find(|n| {
                n.master && !n.failed && n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .unwrap_or_else(|| panic!("no master serves slot {slot}"));
        self.index_of(master.port)
    }

    /// The replicas of a master, as the cluster sees them now.
    pub fn replicas_of(&self, master: usize) -> Vec<usize> {
        let nodes = self.cluster_nodes();
        let port = self.nodes[master].client_port();
        let id = &nodes.iter().find(|n| n.port == port).unwrap().id;
        nodes
            .iter()
            .filter(|n| n.replica_of.as_ref() == Some(id))
            .map(|n| self.index_of(n.port))
            .collect()
    }

    /// Kills a node (SIGKILL, as a crash).
    pub fn kill(&mut self, node: usize) {
        self.nodes[node].stop();
    }

    /// Stalls a node (SIGSTOP): it holds its connections and answers nothing.
    pub fn pause(&self, node: usize) {
        self.signal(node, "-STOP");
        self.paused.lock().unwrap().insert(node);
    }

    /// Lets a stalled node go on (SIGCONT).
    pub fn resume(&self, node: usize) {
        self.signal(node, "-CONT");
        self.paused.lock().unwrap().remove(&node);
    }

    fn signal(&self, node: usize, signal: &str) {
        let pid = self.nodes[node].pid().expect("the node runs");
        let sent = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {signal} {pid}");
    }

    /// Cuts a master's links to its replicas (`CLIENT KILL TYPE replica`):
    /// what it writes until they reconnect reaches none of them.
    pub fn cut_replica_links(&self, master: usize) {
        let mut connection = self.connect(master);
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query(&mut connection)
            .expect("CLIENT KILL TYPE replica");
    }

    /// Waits until a node other than `old` serves `key` and every live node
    /// sees the cluster whole again; the new master.
    pub fn wait_for_failover(&self, key: &str, old: usize, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let live = self.live();
            if let Some(&asked) = live.first() {
                let slot = self.slot_of_via(asked, key);
                let promoted = self.cluster_nodes_of(asked).into_iter().find(|n| {
                    n.master
                        && !n.failed
                        && n.port != self.nodes[old].client_port()
                        && n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
                });
                if let Some(promoted) = promoted
                    && live.iter().all(|&i| self.node_sees_cluster_ok(i))
                {
                    return self.index_of(promoted.port);
                }
            }
            assert!(
                Instant::now() < deadline,
                "no replica took over {key}'s slot within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.client_port() == port)
            .unwrap()
    }

    fn connect(&self, node: usize) -> redis::Connection {
        redis::Client::open(self.nodes[node].url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("cluster node {node}: {e}"))
    }

    /// The nodes that run and are not stalled.
    fn live(&self) -> Vec<usize> {
        let paused = self.paused.lock().unwrap();
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].pid().is_some() && !paused.contains(i))
            .collect()
    }

    /// A live node to ask.
    fn any_live(&self) -> usize {
        *self.live().first().expect("a cluster node runs")
    }

    fn slot_of(&self, key: &str) -> u16 {
        self.slot_of_via(self.any_live(), key)
    }

    fn slot_of_via(&self, node: usize, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.connect(node))
            .unwrap()
    }

    fn cluster_nodes(&self) -> Vec<ClusterNode> {
        self.cluster_nodes_of(self.any_live())
    }

    fn cluster_nodes_of(&self, node: usize) -> Vec<ClusterNode> {
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.connect(node))
            .unwrap();
        text.lines().filter_map(parse_cluster_node).collect()
    }

    fn node_sees_cluster_ok(&self, node: usize) -> bool {
        let Ok(info) = redis::cmd("CLUSTER")
            .arg("INFO")
            .query::<String>(&mut self.connect(node))
        else {
            return false;
        };
        info.contains("cluster_state:ok")
    }

    /// A replica whose first sync with its master is done (a replica
    /// promoted before that would have nothing), or a master that counts
    /// every replica connected to it as online (as `WAIT` counts them).
    fn replica_in_sync(&self, node: usize) -> bool {
        self.nodes[node].info("replication").is_some_and(|info| {
            if info.contains("role:master") {
                info.lines()
                    .filter(|line| line.starts_with("slave") && line.contains("ip="))
                    .all(|line| line.contains("state=online"))
            } else {
                info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0")
            }
        })
    }

    /// The cluster is ok on `node`, and it knows every node, none failing.
    fn node_sees_everyone_ok(&self, node: usize) -> bool {
        self.node_sees_cluster_ok(node) && {
            let nodes = self.cluster_nodes_of(node);
            nodes.len() == self.nodes.len() && nodes.iter().all(|n| !n.failed)
        }
    }
}

/// `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slots…>`
fn parse_cluster_node(line: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let port = fields
        .get(1)?
        .split(['@', ','])
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let flags = fields.get(2)?;
    let slots = fields
        .iter()
        .skip(8)
        .filter(|range| !range.starts_with('['))
        .filter_map(|range| match range.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => range.parse().ok().map(|s| (s, s)),
        })
        .collect();
    Some(ClusterNode {
        id: fields[0].to_owned(),
        port,
        master: flags.contains("master"),
        failed: flags.contains("fail") || flags.contains("noaddr"),
        replica_of: (fields.get(3)? != &"-").then(|| fields[3].to_owned()),
        slots,
    })
}

/// A master with two replicas, watched by three Redis Sentinels (Debian's
/// `redis-sentinel`), for one test: a master that fails is replaced within
/// a few seconds (`down-after-milliseconds` 1000).
pub struct RedisSentinels {
    /// The servers: the first master, then its replicas.
    pub servers: Vec<RedisServer>,
    sentinels: Vec<SentinelProcess>,
    secured: Secured,
    /// The Sentinels' own password (`requirepass` in their configuration).
    sentinel_password: Option<String>,
}

/// The name the sentinels know the master by.
pub const SENTINEL_MASTER: &str = "mymaster";

struct SentinelProcess {
    /// Plain, for the test kit's own questions.
    port: u16,
    /// What the node is given when the deployment is secured with TLS.
    tls_port: Option<u16>,
    dir: std::path::PathBuf,
    child: Child,
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RedisSentinels {
    pub fn start() -> Self {
        Self::start_secured(&Secured::default(), None)
    }

    /// Servers secured as `secured` says (with TLS, replication and the
    /// Sentinels use it too), and Sentinels that ask for `sentinel_password`.
    pub fn start_secured(secured: &Secured, sentinel_password: Option<&str>) -> Self {
        let mut options = EPHEMERAL.to_vec();
        if secured.tls.is_some() {
            options.extend(["--tls-replication", "yes"]);
        }
        let master = RedisServer::start_on(free_port, "redis", &options, secured);
        let master_port = master.client_port().to_string();
        options.extend(["--replicaof", "127.0.0.1", &master_port]);
        let replicas = (0..2).map(|_| RedisServer::start_on(free_port, "redis", &options, secured));
        let servers: Vec<RedisServer> = std::iter::once(master).chain(replicas).collect();
        let master_port = servers[0].client_port();
        let sentinels = (0..3)
            .map(|_| {
                start_on_ports("redis-sentinel", free_port, |port| {
                    SentinelProcess::start(port, master_port, secured, sentinel_password)
                })
            })
            .collect();
        let deployment = Self {
            servers,
            sentinels,
            secured: secured.clone(),
            sentinel_password: sentinel_password.map(str::to_owned),
        };
        // Each sentinel knows the two others and both replicas, and each
        // replica has its first copy of the master's data.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = deployment.sentinels.iter().all(|s| {
                deployment.master_info(s.port).is_some_and(|info| {
                    info.get("num-other-sentinels").map(String::as_str) == Some("2")
                        && info.get("num-slaves").map(String::as_str) == Some("2")
                })
            }) && deployment.servers[1..].iter().all(|r| {
                r.info("replication").is_some_and(|info| {
                    info.contains("master_link_status:up")
                        && info.contains("master_sync_in_progress:0")
                })
            });
            if ready {
                return deployment;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels did not find each other and the replicas: {:?}",
                deployment
                    .sentinels
                    .iter()
                    .map(|s| deployment.master_info(s.port))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis+sentinel://` naming every sentinel and the master (over TLS,
    /// with the servers' user or password and the Sentinels' password, when
    /// secured so).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.tls_port.unwrap_or(s.port)))
            .collect();
        let scheme = match self.secured.tls {
            Some(_) => "rediss+sentinel",
            None => "redis+sentinel",
        };
        let query = match &self.sentinel_password {
            Some(password) => format!("?sentinel_password={password}"),
            None => String::new(),
        };
        format!(
            "{scheme}://{}{}/{SENTINEL_MASTER}{query}",
            self.secured.userinfo(),
            hosts.join(",")
        )
    }

    /// A plain connection to a Sentinel, with its password.
    fn ask(&self, port: u16) -> Option<redis::Connection> {
        let password = match &self.sentinel_password {
            Some(password) => format!(":{password}@"),
            None => String::new(),
        };
        redis::Client::open(format!("redis://{password}127.0.0.1:{port}/"))
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()
    }

    /// The server the sentinels name as master now.
    pub fn master(&self) -> usize {
        let port = self.master_port().expect("a sentinel answers");
        self.servers
            .iter()
            .position(|s| s.client_port() == port)
            .expect("the master is one of ours")
    }

    fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let mut connection = self.ask(s.port)?;
            let (_, port): (String, u16) = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(SENTINEL_MASTER)
                .query(&mut connection)
                .ok()?;
            Some(port)
        })
    }

    /// Kills a server (SIGKILL).
    pub fn kill(&mut self, server: usize) {
        self.servers[server].stop();
    }

    /// Stalls a server (SIGSTOP).
    pub fn pause(&self, server: usize) {
        let pid = self.servers[server].pid().expect("the server runs");
        let sent = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits until the sentinels name a master other than `old`, and it
    /// answers as a master; the new master.
    pub fn wait_for_failover(&self, old: usize, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            if let Some(port) = self.master_port()
                && port != self.servers[old].client_port()
                && let Some(new) = self.servers.iter().position(|s| s.client_port() == port)
                && self.servers[new]
                    .info("replication")
                    .is_some_and(|info| info.contains("role:master"))
            {
                return new;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels named no new master within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl SentinelProcess {
    fn start(
        port: u16,
        master_port: u16,
        secured: &Secured,
        password: Option<&str>,
    ) -> Result<Self, String> {
        let dir = temp_dir("sentinel");
        let config = dir.join("sentinel.conf");
        let mut lines = vec![
            format!("port {port}"),
            "bind 127.0.0.1".to_owned(),
            format!("dir {}", dir.display()),
            format!("sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 2"),
            format!("sentinel down-after-milliseconds {SENTINEL_MASTER} 1000"),
            format!("sentinel failover-timeout {SENTINEL_MASTER} 5000"),
            format!("sentinel parallel-syncs {SENTINEL_MASTER} 2"),
        ];
        let tls_port = secured.tls.as_ref().map(|_| free_port());
        if let (Some(certificates), Some(tls_port)) = (&secured.tls, tls_port) {
            lines.push(format!("tls-port {tls_port}"));
            lines.push("tls-replication yes".to_owned());
            // `--tls-cert-file PATH` as the configuration line `tls-cert-file PATH`.
            for pair in certificates.server_args().chunks(2) {
                lines.push(format!("{} {}", pair[0].trim_start_matches("--"), pair[1]));
            }
        }
        if let Some(password) = password {
            lines.push(format!("requirepass {password}"));
        }
        if let Some(password) = &secured.password {
            lines.push(format!("sentinel auth-pass {SENTINEL_MASTER} {password}"));
        }
        std::fs::write(&config, lines.join("\n") + "\n").unwrap();
        let mut child = Command::new("redis-sentinel")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-sentinel is needed for these tests: run ./scripts/test, which installs it",
            );
        match crate::ports::wait_until_listening(&mut child, port, STARTUP) {
            Ok(()) => Ok(Self {
                port,
                tls_port,
                dir,
                child,
            }),
            Err(reason) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(reason)
            }
        }
    }
}

impl RedisSentinels {
    /// `SENTINEL MASTER <name>` as field → value.
    fn master_info(&self, port: u16) -> Option<std::collections::HashMap<String, String>> {
        let mut connection = self.ask(port)?;
        let fields: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(SENTINEL_MASTER)
            .query(&mut connection)
            .ok()?;
        Some(
            fields
                .chunks(2)
                .filter_map(|pair| Some((pair.first()?.clone(), pair.get(1)?.clone())))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU16, Ordering};

    static TAKEN: AtomicU16 = AtomicU16::new(0);

    /// The taken port first, then fresh ones.
    fn taken_then_free() -> u16 {
        match TAKEN.swap(0, Ordering::SeqCst) {
            0 => free_port(),
            port => port,
        }
    }

    #[test]
    fn redis_starts_on_another_port_when_its_port_was_taken_meanwhile() {
        // Another process's listener on the port chosen first (as in the CI
        // failure: chosen free, then taken before redis-server bound it).
        let intruder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = intruder.local_addr().unwrap().port();
        TAKEN.store(taken, Ordering::SeqCst);
        let server = RedisServer::start_on(
            taken_then_free,
            "redis",
            &["--save", ""],
            &Secured::default(),
        );
        assert_ne!(server.port, taken);
        assert_eq!(server.server_pid(), server.pid(), "our own server answers");
    }

    #[test]
    fn a_cluster_is_not_created_over_a_node_that_knows_another_and_says_whom() {
        let options = [
            "--cluster-enabled",
            "yes",
            "--save",
            "",
            "--appendonly",
            "no",
        ];
        let start =
            || RedisServer::start_on(free_cluster_port, "cluster", &options, &Secured::default());
        let nodes = [start(), start(), start()];
        let stranger = start();
        let met = Command::new("redis-cli")
            .args([
                "-p",
                &nodes[0].port.to_string(),
                "CLUSTER",
                "MEET",
                "127.0.0.1",
            ])
            .arg(stranger.port.to_string())
            .output()
            .unwrap();
        assert!(met.status.success());
        // CLUSTER MEET adds the stranger at once (in handshake).
        let refusal = create_cluster(&nodes, 0, &[]).unwrap_err();
        assert!(refusal.contains("not empty"), "{refusal}");
        assert!(
            refusal.contains(&format!(":{}@", stranger.port)),
            "{refusal}"
        );
    }
}
