//! The `waitroom` binary as operators run it: a node process on a free
//! port, with the flags a test gives, killed when dropped. For what only a
//! real process shows (signals, exit codes, real time, a node that dies or
//! is restarted).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::{spawn_listening, wait_until_listening};

/// The admin token every node started here takes.
pub const ADMIN_TOKEN: &str = "an-admin-token-for-the-tests-0123456789";
/// The secret every node started here shares, so they serve one deployment.
pub const SECRET: &str = "a-secret-shared-by-the-test-nodes";
/// How long a node may take to listen.
const STARTUP: Duration = Duration::from_secs(30);

pub struct Node {
    child: Child,
    pub port: u16,
    /// Makes the node's command for a port, for a restart on the same one.
    command: Box<dyn FnMut(u16) -> Command + Send>,
}

impl Node {
    /// Starts `binary` (`env!("CARGO_BIN_EXE_waitroom")`) with `args` after
    /// its address, admin token and secret; its log goes to the test's
    /// output only when `WAITROOM_TEST_NODE_LOG` is set.
    pub fn start(binary: impl AsRef<Path>, args: &[&str]) -> Self {
        let binary = binary.as_ref().to_path_buf();
        let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        let log = std::env::var_os("WAITROOM_TEST_NODE_LOG").is_some();
        Self::start_with(move |port| {
            let mut command = Command::new(&binary);
            command
                .args([
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "--admin-token",
                    ADMIN_TOKEN,
                    "--secret",
                    SECRET,
                ])
                .args(&args)
                .stdin(Stdio::null())
                .stdout(if log { Stdio::inherit() } else { Stdio::null() })
                .stderr(if log { Stdio::inherit() } else { Stdio::null() });
            command
        })
    }

    /// Starts the node `command(port)` makes (it must listen on
    /// `127.0.0.1:port`), for flags, environment or output of the test's
    /// own, on a fresh port; returns once it listens.
    pub fn start_with(mut command: impl FnMut(u16) -> Command + Send + 'static) -> Self {
        let (child, port) = spawn_listening("waitroom", STARTUP, &mut command);
        Self {
            child,
            port,
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

    /// Sends the node a signal (`"-TERM"`, `"-INT"`, `"-KILL"`).
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill {signal} {}", self.child.id());
    }

    /// Waits for the process to end, at most `within`; its exit code.
    pub fn wait(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the node's status") {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the node did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
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

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
