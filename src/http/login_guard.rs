//! The operator login lockout as the HTTP layer asks it
//! (`words::login_limit`: 10 wrong tokens a minute per client block, then
//! every attempt refused, the right token included, until the budget has
//! room). The store counts, so that on Redis the 10 hold for the whole
//! deployment however many nodes a guesser spreads over. While the store
//! cannot be reached this node counts on its own meanwhile: a store
//! failure neither locks operators out nor lets a guesser run free, and
//! the log says the node's own count decides.

use parking_lot::Mutex;

use crate::http::refusal_log::RefusalLog;
use crate::store::{Store, StoreError, StoreExt};
use crate::words::clock::Millis;
use crate::words::join_limit::ClientBlock;
use crate::words::login_limit::{Attempt, Lockout};

#[derive(Default)]
pub struct LoginGuard {
    /// This node's own counts, while the store's cannot be had.
    fallback: Mutex<Lockout>,
}

impl LoginGuard {
    /// Decides and counts a login attempt from `block`: `Err` the seconds
    /// until the block may try again.
    pub async fn attempt(
        &self,
        store: &dyn Store,
        block: ClientBlock,
        attempt: Attempt,
        now: Millis,
        log: &RefusalLog,
    ) -> Result<(), u64> {
        match store.login_attempt(&block, attempt).await {
            Ok(()) => Ok(()),
            Err(StoreError::TooManyAttempts { retry_after_s }) => Err(retry_after_s),
            Err(error) => {
                if let Some(left_out) = log.admit("login_lockout_on_this_node", now) {
                    tracing::warn!(
                        %error,
                        left_out,
                        "the store did not count a login attempt: this node's own count decides"
                    );
                }
                self.fallback.lock().attempt(block, attempt, now)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::words::clock::ManualClock;
    use crate::words::login_limit::FAILURES_PER_MINUTE;

    /// On the memory store the lockout is per node, as it always was: two
    /// nodes (two stores) count apart.
    #[tokio::test]
    async fn an_address_past_the_limit_is_shut_out_and_others_are_not() {
        let clock = ManualClock::new(0);
        let store = MemoryStore::new(Arc::new(clock.clone()));
        let other_node = MemoryStore::new(Arc::new(clock));
        let guard = LoginGuard::default();
        let log = RefusalLog::default();
        let guesser = ClientBlock::Net("192.0.2.1/32".parse().unwrap());
        let operator = ClientBlock::Net("192.0.2.2/32".parse().unwrap());
        for _ in 0..FAILURES_PER_MINUTE {
            let wrong = guard.attempt(&store, guesser, Attempt::Wrong, 0, &log);
            assert_eq!(wrong.await, Ok(()));
        }
        let wait = guard.attempt(&store, guesser, Attempt::Wrong, 0, &log);
        assert_eq!(wait.await, Err(6), "one too many");
        let right = guard.attempt(&store, guesser, Attempt::Right, 0, &log);
        assert_eq!(right.await, Err(6), "shut out, right token or not");
        let elsewhere = guard.attempt(&store, operator, Attempt::Right, 0, &log);
        assert_eq!(elsewhere.await, Ok(()), "only that address");
        let other = guard.attempt(&other_node, guesser, Attempt::Right, 0, &log);
        assert_eq!(other.await, Ok(()), "another node counts its own");
    }
}
