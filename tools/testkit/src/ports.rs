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

/// Waits until `child` listens on `port`: `Err` (the child killed) when it
/// exits first (it could not bind) or `within` runs out.
pub fn wait_until_listening(child: &mut Child, port: u16, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("exited with {status}"));
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
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

    #[test]
    #[should_panic(expected = "did not start on any of 8 ports")]
    fn a_server_that_never_starts_fails_loudly_with_its_reasons() {
        start_on_free_port("nothing", |_| Err::<(), _>("refused".into()));
    }
}
