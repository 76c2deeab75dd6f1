//! Ports for every server the tests start (Redis, a Cluster, Sentinel,
//! nginx, chromedriver, the node binary), and the one way to start such a
//! server: on a fresh port, again on another when the first was taken.
//!
//! The port is chosen, then the server binds it, so another process may
//! take it in between. Two things keep that from failing a test:
//! - ports come from below Linux's ephemeral range (32768–60999), which the
//!   kernel hands to outgoing connections and to `bind(0)`: no client's
//!   connection can take one of ours between the check and the bind; and
//!   no port is handed out twice in one test process;
//! - a server that still fails to bind (another test binary picked the
//!   same port) is started again on a fresh one, by [`start_on_free_port`].
//!
//! And a server is the test's own before a test talks to it: it counts as
//! listening only once the kernel shows the listening socket in the hands
//! of the process the test started, or of one it started
//! ([`wait_until_listening`]); something else answering on the port is
//! another process's server, and the start is tried again elsewhere.

use std::collections::HashSet;
use std::net::TcpListener;
use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where ports are chosen: below the ephemeral range, and low enough that a
/// Cluster node's bus port (+10,000) is below it too.
const FIRST: u16 = 12_000;
const LAST: u16 = 22_000;
/// How many ports a server is tried on before the test fails.
const ATTEMPTS: usize = 8;

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port nothing listens on now, never handed out before in this process.
pub fn free_port() -> u16 {
    free_port_where(|_| true)
}

/// A free port whose Redis Cluster bus port (+10,000) is free too.
pub fn free_cluster_port() -> u16 {
    free_port_where(|port| bindable(port + 10_000))
}

fn free_port_where(also: impl Fn(u16) -> bool) -> u16 {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    for _ in 0..10_000 {
        let port = FIRST + (random() % u64::from(LAST - FIRST)) as u16;
        if !handed_out.contains(&port) && bindable(port) && also(port) {
            handed_out.insert(port);
            return port;
        }
    }
    panic!("no free port between {FIRST} and {LAST}");
}

fn bindable(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A cheap random number (the port choice needs no quality, only spread
/// across test processes started at the same moment).
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.finish()
}

/// Starts a server with `start(port)` on a fresh port, and on another fresh
/// one when it fails (the port was taken after all): `what` names it in the
/// failure, which lists every attempt's reason.
pub fn start_on_free_port<T>(what: &str, start: impl FnMut(u16) -> Result<T, String>) -> T {
    start_on_ports(what, free_port, start)
}

/// [`start_on_free_port`] with ports from `choose`.
pub fn start_on_ports<T>(
    what: &str,
    mut choose: impl FnMut() -> u16,
    mut start: impl FnMut(u16) -> Result<T, String>,
) -> T {
    let mut failures = Vec::new();
    for _ in 0..ATTEMPTS {
        let port = choose();
        match start(port) {
            Ok(server) => return server,
            Err(reason) => failures.push(format!("port {port}: {reason}")),
        }
    }
    panic!(
        "{what} did not start on any of {ATTEMPTS} ports:\n{}",
        failures.join("\n")
    );
}

/// Waits until `child` (or a process it started) listens on `port`:
/// `Err` (the child killed) when it exits first (it could not bind) or
/// `within` runs out. Another process answering on the port counts for
/// nothing: the socket must be the child's (see [`listens`]).
pub fn wait_until_listening(child: &mut Child, port: u16, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("exited with {status}"));
        }
        if listens(child.id(), port) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("not listening after {within:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid`, or one of its descendants, holds a TCP socket
/// listening on `port`, as the kernel tells it: the inodes of the sockets
/// among the processes' open files (`/proc/<pid>/fd`), against the
/// listening sockets of their network namespace (`/proc/<pid>/net/tcp`,
/// `tcp6`). Read from `/proc` because no library of the tests' says which
/// process a listening port belongs to.
pub fn listens(pid: u32, port: u16) -> bool {
    let family = descendants_of(pid);
    let sockets: HashSet<u64> = family
        .iter()
        .filter_map(|pid| std::fs::read_dir(format!("/proc/{pid}/fd")).ok())
        .flatten()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    ["tcp", "tcp6"].iter().any(|table| {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            return false;
        };
        text.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                return false;
            };
            let listening = *state == "0A";
            let on_port = local
                .rsplit_once(':')
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok())
                == Some(port);
            listening && on_port && inode.parse().is_ok_and(|inode| sockets.contains(&inode))
        })
    })
}

/// `pid` and every process below it.
fn descendants_of(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            // After the command's name, in parentheses that it may itself hold.
            let after_name = &stat[stat.rfind(')')? + 1..];
            let parent = after_name.split_whitespace().nth(1)?.parse().ok()?;
            Some((child, parent))
        })
        .collect();
    let mut family = vec![pid];
    let mut next = 0;
    while next < family.len() {
        let parent = family[next];
        family.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(child, _)| *child),
        );
        next += 1;
    }
    family
}

/// Spawns a server process built by `command(port)` on a fresh port, and
/// on another when it exits or does not listen within `within` (its port
/// was taken): the child and its port.
pub fn spawn_listening(
    what: &str,
    within: Duration,
    mut command: impl FnMut(u16) -> std::process::Command,
) -> (Child, u16) {
    start_on_free_port(what, |port| {
        let mut child = command(port)
            .spawn()
            .map_err(|e| format!("could not start: {e}"))?;
        wait_until_listening(&mut child, port, within).map(|()| (child, port))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_and_never_handed_out_twice() {
        let ports: Vec<u16> = (0..200).map(|_| free_port()).collect();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        assert!(ports.iter().all(|p| (FIRST..LAST).contains(p)));
    }

    #[test]
    fn a_server_whose_port_is_taken_starts_on_another() {
        // Hold the first port chosen, as another process would.
        let mut held = None;
        let started = start_on_free_port("a listener", |port| {
            if held.is_none() {
                held = Some(TcpListener::bind(("127.0.0.1", port)).unwrap());
            }
            TcpListener::bind(("127.0.0.1", port)).map_err(|e| e.to_string())
        });
        let held_port = held.unwrap().local_addr().unwrap().port();
        assert_ne!(started.local_addr().unwrap().port(), held_port);
    }

    /// A port that answers is not enough: the server must be the test's
    /// own process.
    #[test]
    fn a_port_is_the_childs_only_when_the_child_holds_its_socket() {
        let other = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = other.local_addr().unwrap().port();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(
            !listens(child.id(), port),
            "another's listener is not the child's"
        );
        assert!(listens(std::process::id(), port), "it is this process's");
        let waited = wait_until_listening(&mut child, port, Duration::from_millis(200));
        assert!(waited.is_err(), "{waited:?}");
    }

    #[test]
    #[should_panic(expected = "did not start on any of 8 ports")]
    fn a_server_that_never_starts_fails_loudly_with_its_reasons() {
        start_on_free_port("nothing", |_| Err::<(), _>("refused".into()));
    }
}
