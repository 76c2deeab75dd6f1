//! A private `redis-server` for one test: a free port, its own directory,
//! killed when dropped. A machine without `redis-server` fails loudly.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    pub dir: std::path::PathBuf,
    child: Option<Child>,
    args: Vec<String>,
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> Self {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server with extra arguments (say `--appendonly yes`).
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "waitroom-redis-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = Self {
            port: free_port(),
            dir,
            child: None,
            args: extra.iter().map(|a| a.to_string()).collect(),
        };
        server.launch();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn launch(&mut self) {
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
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server is needed for these tests: run ./scripts/test, which installs it",
            );
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let client = redis::Client::open(self.url()).unwrap();
            if let Ok(mut connection) = client.get_connection()
                && redis::cmd("PING").query::<String>(&mut connection).is_ok()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server (SIGKILL: as abrupt as a crash).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
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

/// A local Redis Cluster of three masters, no replicas, for one test.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// A port whose cluster bus port (+10000) is free too.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

impl RedisCluster {
    pub fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let dir = std::env::temp_dir().join(format!(
                    "waitroom-cluster-{}-{}",
                    std::process::id(),
                    rand_suffix()
                ));
                std::fs::create_dir_all(&dir).unwrap();
                let mut node = RedisServer {
                    port: free_cluster_port(),
                    dir,
                    child: None,
                    args: [
                        "--cluster-enabled",
                        "yes",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                    ]
                    .map(String::from)
                    .to_vec(),
                };
                node.launch();
                node
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect(
                "redis-cli is needed for the cluster tests: run ./scripts/test, which installs it",
            );
        assert!(created.success(), "redis-cli --cluster create failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &nodes {
            let client = redis::Client::open(node.url()).unwrap();
            let mut connection = client.get_connection().unwrap();
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut connection)
                    .unwrap();
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster did not come up");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Self { nodes }
    }

    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }
}
