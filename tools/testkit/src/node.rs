//! A `waitroom` binary running as a process of its own, for what only a
//! process shows: signals, exit codes, restarts. Started on a fresh port
//! through [`crate::ports`]; killed when dropped.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::ports::{spawn_listening, wait_until_listening};

/// How long a node may take to listen.
const STARTUP: Duration = Duration::from_secs(30);

pub struct NodeProcess {
    pub port: u16,
    child: Child,
    /// Makes the node's command for a port, for a restart on the same one.
    command: Box<dyn FnMut(u16) -> Command + Send>,
}

impl NodeProcess {
    /// Starts the node `command(port)` makes (it must listen on
    /// `127.0.0.1:port`) on a fresh port, and returns once it listens.
    pub fn start(mut command: impl FnMut(u16) -> Command + Send + 'static) -> Self {
        let (child, port) = spawn_listening("the waitroom node", STARTUP, &mut command);
        Self {
            port,
            child,
            command: Box::new(command),
        }
    }

    /// Starts it again, on its port, once the last process has ended.
    pub fn restart(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_some(),
            "the node on port {} is still running",
            self.port
        );
        self.child = (self.command)(self.port)
            .spawn()
            .expect("the waitroom binary starts");
        if let Err(reason) = wait_until_listening(&mut self.child, self.port, STARTUP) {
            panic!(
                "the node did not start again on port {}: {reason}",
                self.port
            );
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until `path` answers 200 (`/readyz`: ready for visitors).
    pub async fn wait_until(&mut self, path: &str) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + STARTUP;
        loop {
            if let Ok(answer) = http.get(self.url(path)).send().await
                && answer.status() == 200
            {
                return;
            }
            if let Some(exit) = self.child.try_wait().unwrap() {
                panic!("the node on port {} exited with {exit}", self.port);
            }
            assert!(
                Instant::now() < deadline,
                "{path} on port {} never answered 200",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends the process a signal (`TERM`, `INT`).
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// Waits for the process to end by itself (at most 30 s).
    pub async fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                return exit;
            }
            assert!(
                Instant::now() < deadline,
                "the node on port {} did not exit",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the process and reads what it wrote (when its output was piped).
    pub fn kill_and_read_output(mut self) -> String {
        use std::io::Read;

        let _ = self.child.kill();
        let mut output = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            stdout.read_to_string(&mut output).unwrap();
        }
        if let Some(mut stderr) = self.child.stderr.take() {
            stderr.read_to_string(&mut output).unwrap();
        }
        output
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
