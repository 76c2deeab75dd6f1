//! The `waitroom` binary as operators run it: a node process on a free
//! port, with the flags a test gives, killed when dropped. For what only a
//! real process shows (signals, exit codes, real time, a node that dies).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ports::spawn_listening;

/// The admin token every node started here takes.
pub const ADMIN_TOKEN: &str = "an-admin-token-for-the-tests-0123456789";
/// The secret every node started here shares, so they serve one deployment.
pub const SECRET: &str = "a-secret-shared-by-the-test-nodes";

pub struct Node {
    child: Child,
    pub port: u16,
}

impl Node {
    /// Starts `binary` (`env!("CARGO_BIN_EXE_waitroom")`) with `args` after
    /// its address, admin token and secret; its log goes to the test's
    /// output only when `WAITROOM_TEST_NODE_LOG` is set.
    pub fn start(binary: impl AsRef<Path>, args: &[&str]) -> Self {
        let binary = binary.as_ref();
        let log = std::env::var_os("WAITROOM_TEST_NODE_LOG").is_some();
        let (child, port) = spawn_listening("waitroom", Duration::from_secs(30), |port| {
            let mut command = Command::new(binary);
            command
                .args([
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "--admin-token",
                    ADMIN_TOKEN,
                    "--secret",
                    SECRET,
                ])
                .args(args)
                .stdin(Stdio::null())
                .stdout(if log { Stdio::inherit() } else { Stdio::null() })
                .stderr(if log { Stdio::inherit() } else { Stdio::null() });
            command
        });
        Self { child, port }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
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
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the node's status") {
                return status.code();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the node did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
