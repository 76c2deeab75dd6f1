//! Failed operator logins, limited per client address (the peer address):
//! past the limit, every login attempt from that address, the right token
//! included, is refused with 429 until the limit has room again, so
//! guessing the admin token at full speed gets nowhere. The counting is
//! governor's; this module only remembers which addresses are shut out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use parking_lot::Mutex;

/// Wrong tokens an address may try per minute.
const FAILURES_PER_MINUTE: u32 = 10;

pub struct LoginGuard {
    failures: DefaultKeyedRateLimiter<IpAddr>,
    clock: DefaultClock,
    /// Addresses past the limit, and until when.
    shut_out: Mutex<HashMap<IpAddr, Instant>>,
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
    /// Whether `address` may try a login now; if not, how long until it may.
    pub fn may_try(&self, address: IpAddr) -> Result<(), Duration> {
        let mut shut_out = self.shut_out.lock();
        match shut_out.get(&address) {
            Some(until) if *until > Instant::now() => Err(*until - Instant::now()),
            Some(_) => {
                shut_out.remove(&address);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Counts a failed login from `address`; past the limit the address is
    /// shut out, and the answer says for how long.
    pub fn failed(&self, address: IpAddr) -> Result<(), Duration> {
        match self.failures.check_key(&address) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let mut shut_out = self.shut_out.lock();
                shut_out.insert(address, Instant::now() + wait);
                // Forget addresses that stopped trying, so the map stays small.
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
        let guesser: IpAddr = "192.0.2.1".parse().unwrap();
        let operator: IpAddr = "192.0.2.2".parse().unwrap();
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
