//! Failed operator logins, limited per client block (an IPv4 address, or
//! an IPv6 network: `words::join_limit::client_block`): past the limit,
//! every login attempt from that block, the right token included, is
//! refused with 429 until the limit has room again, so guessing the admin
//! token at full speed gets nowhere, from one address or from every
//! address of a /64. The counting is governor's; this module only
//! remembers which blocks are shut out.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use crate::words::join_limit::ClientBlock;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use parking_lot::Mutex;

/// Wrong tokens a client block may try per minute.
const FAILURES_PER_MINUTE: u32 = 10;

pub struct LoginGuard {
    failures: DefaultKeyedRateLimiter<ClientBlock>,
    clock: DefaultClock,
    /// Blocks past the limit, and until when.
    shut_out: Mutex<HashMap<ClientBlock, Instant>>,
}

impl Default for LoginGuard {
    fn default() -> Self {
        let per_minute = NonZeroU32::new(FAILURES_PER_MINUTE).expect("not zero");
        Self {
            failures: RateLimiter::keyed(Quota::per_minute(per_minute)),
            clock: DefaultClock::default(),
            shut_out: Mutex::new(HashMap::new()),
        }
    }
}

impl LoginGuard {
    /// Whether `block` may try a login now; if not, how long until it may.
    pub fn may_try(&self, block: ClientBlock) -> Result<(), Duration> {
        let mut shut_out = self.shut_out.lock();
        match shut_out.get(&block) {
            Some(until) if *until > Instant::now() => Err(*until - Instant::now()),
            Some(_) => {
                shut_out.remove(&block);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Counts a failed login from `block`; past the limit the block is
    /// shut out, and the answer says for how long.
    pub fn failed(&self, block: ClientBlock) -> Result<(), Duration> {
        match self.failures.check_key(&block) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let mut shut_out = self.shut_out.lock();
                shut_out.insert(block, Instant::now() + wait);
                // Forget blocks that stopped trying, so the map stays small.
                if shut_out.len() > 10_000 {
                    let now = Instant::now();
                    shut_out.retain(|_, until| *until > now);
                    self.failures.retain_recent();
                }
                Err(wait)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_past_the_limit_is_shut_out_and_others_are_not() {
        let guard = LoginGuard::default();
        let guesser = ClientBlock::Net("192.0.2.1/32".parse().unwrap());
        let operator = ClientBlock::Net("192.0.2.2/32".parse().unwrap());
        for _ in 0..FAILURES_PER_MINUTE {
            assert!(guard.may_try(guesser).is_ok());
            assert!(guard.failed(guesser).is_ok());
        }
        let wait = guard.failed(guesser).expect_err("one too many");
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(60));
        assert!(
            guard.may_try(guesser).is_err(),
            "shut out, right token or not"
        );
        assert!(guard.may_try(operator).is_ok(), "only that address");
    }
}
