//! Following a master that moves: what follows one ([`Follow`]), and the
//! gate that keeps checks of where it is to one at a time, one a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The shortest time between two checks of where the master is.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Something that follows where its master is.
pub(in crate::store::redis) trait Follow: Send + Sync {
    /// A call failed the way it fails when the master moved: check, soon.
    fn check_soon(self: Arc<Self>);
}

/// At most one check at a time, and one a second.
#[derive(Default)]
pub(super) struct CheckGate {
    running: AtomicBool,
    last: Mutex<Option<Instant>>,
}

impl CheckGate {
    /// Whether a check may start now; if so, it must call [`CheckGate::done`].
    pub(super) fn start(&self) -> bool {
        if self
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        let mut last = self.last.lock();
        if last.is_some_and(|at| at.elapsed() < CHECK_EVERY) {
            self.running.store(false, Ordering::Release);
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    pub(super) fn done(&self) {
        self.running.store(false, Ordering::Release);
    }
}

/// How long asking one node for its view may take.
pub(super) const VIEW_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a check goes on asking for a new view after calls failed, and
/// how often: a failover takes the cluster a few seconds.
pub(super) const FOLLOW_FOR: Duration = Duration::from_secs(15);
pub(super) const FOLLOW_EVERY: Duration = Duration::from_millis(250);
