//! The operator login lockout: wrong admin and origin tokens (on the API or
//! the login form) counted per client block (an IPv4 address, or an IPv6
//! network: [`join_limit::client_block`]), [`FAILURES_PER_MINUTE`] a minute
//! with a minute's worth at once, by the join limit's GCRA
//! ([`join_limit::decide`]). Past it, every attempt from the block, the
//! right token included, is refused until the budget has room, so
//! guessing a token at full speed gets nowhere, from one address or from
//! every address of a /64.
//!
//! The rule is here; the counts are the store's (`op::LoginAttempt`),
//! so that on Redis every node counts into one budget (`lua/login.lua`
//! mirrors [`decide`]), while the memory store, one node, keeps them in a
//! [`Lockout`]. A node whose store cannot be reached counts in a
//! [`Lockout`] of its own meanwhile.

use std::collections::HashMap;

use super::clock::Millis;
use super::join_limit::{self, ClientBlock, Gcra};

/// Wrong tokens a client block may try per minute.
pub const FAILURES_PER_MINUTE: u32 = 10;

/// The blocks a [`Lockout`] remembers before it forgets those whose
/// budget is whole again (and after, twice as many as it kept).
const MIN_PRUNE: usize = 1024;

/// Whether the token a login attempt sent was right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Attempt {
    Right,
    Wrong,
}

/// Decides an attempt from a block whose stored TAT is `tat` (none if it
/// has none, or it has passed): `Ok` with the TAT to store for a wrong
/// attempt (`None` for a right one, which spends nothing), or the seconds
/// until the block may try again.
pub fn decide(tat: Option<Millis>, now: Millis, attempt: Attempt) -> Result<Option<Millis>, u64> {
    match join_limit::decide(tat, now, FAILURES_PER_MINUTE) {
        Gcra::Refused { retry_after_s } => Err(retry_after_s),
        Gcra::Allowed { tat } => Ok((attempt == Attempt::Wrong).then_some(tat)),
    }
}

/// One node's counts of wrong attempts, per client block.
pub struct Lockout {
    tats: HashMap<ClientBlock, Millis>,
    prune_at: usize,
}

impl Default for Lockout {
    fn default() -> Self {
        Self {
            tats: HashMap::new(),
            prune_at: MIN_PRUNE,
        }
    }
}

impl Lockout {
    /// Decides an attempt from `block` at `now` and counts it (see
    /// [`decide`]); `Err` the seconds until the block may try again.
    pub fn attempt(
        &mut self,
        block: ClientBlock,
        attempt: Attempt,
        now: Millis,
    ) -> Result<(), u64> {
        let tat = self.tats.get(&block).copied().filter(|tat| *tat > now);
        if let Some(tat) = decide(tat, now, attempt)? {
            self.tats.insert(block, tat);
            // A block whose TAT has passed is as good as unknown: pruning
            // when the map doubles keeps the cost per attempt constant.
            if self.tats.len() >= self.prune_at {
                self.tats.retain(|_, tat| *tat > now);
                self.prune_at = (2 * self.tats.len()).max(MIN_PRUNE);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(address: &str) -> ClientBlock {
        ClientBlock::Net(address.parse().unwrap())
    }

    #[test]
    fn a_block_past_ten_wrong_a_minute_is_shut_out_the_right_token_too() {
        let mut lockout = Lockout::default();
        let guesser = block("192.0.2.1/32");
        for _ in 0..FAILURES_PER_MINUTE {
            assert_eq!(lockout.attempt(guesser, Attempt::Wrong, 0), Ok(()));
        }
        assert_eq!(lockout.attempt(guesser, Attempt::Wrong, 0), Err(6));
        assert_eq!(lockout.attempt(guesser, Attempt::Right, 0), Err(6));
        assert_eq!(lockout.attempt(guesser, Attempt::Right, 5_999), Err(1));
        assert_eq!(
            lockout.attempt(block("192.0.2.2/32"), Attempt::Wrong, 0),
            Ok(()),
            "only that block"
        );
        // One wrong token back every 6 s; a right one spends nothing.
        assert_eq!(lockout.attempt(guesser, Attempt::Right, 6_000), Ok(()));
        assert_eq!(lockout.attempt(guesser, Attempt::Right, 6_000), Ok(()));
        assert_eq!(lockout.attempt(guesser, Attempt::Wrong, 6_000), Ok(()));
        assert!(lockout.attempt(guesser, Attempt::Wrong, 6_000).is_err());
        // A minute's quiet gives the whole budget back.
        for _ in 0..FAILURES_PER_MINUTE {
            assert_eq!(lockout.attempt(guesser, Attempt::Wrong, 72_000), Ok(()));
        }
    }

    #[test]
    fn blocks_that_stopped_trying_are_forgotten() {
        let mut lockout = Lockout::default();
        for n in 0..(3 * MIN_PRUNE as u32) {
            let address = std::net::Ipv4Addr::from(n);
            let block = ClientBlock::Net(ipnet::Ipv4Net::from(address).into());
            lockout
                .attempt(block, Attempt::Wrong, u64::from(n) * 100)
                .unwrap();
        }
        assert!(lockout.tats.len() < 2 * MIN_PRUNE, "{}", lockout.tats.len());
    }
}
