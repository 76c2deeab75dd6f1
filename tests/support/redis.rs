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

fn free_port() -> u16 {
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
