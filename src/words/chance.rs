//! Chance: every random choice a store makes (a draw's seed, an entrant's
//! id, whom the `random` method admits) comes from a [`Chance`] the store
//! is given, as time comes from a `Clock`. A node runs on the operating
//! system's randomness; a test hands every store the same seed, so stores
//! that apply the same operations make the same choices and can be
//! compared answer for answer (`tests/stores/differential.rs`).
//!
//! Whom `random` admits is decided by [`pick`], a function both the Rust
//! rules and `lua/tick.lua` compute alike from one number the node passes
//! in: Lua has no 64-bit integers and no random source we can seed, but it
//! has `redis.sha1hex`, and SHA-1's first 48 bits are a uniform integer a
//! double holds exactly.

use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use sha1::{Digest, Sha1};

use super::draw::{DrawSeed, EntryId};

/// A source of random numbers.
pub trait Chance: Send + Sync + 'static {
    fn next_u64(&self) -> u64;

    fn bytes32(&self) -> [u8; 32] {
        let mut bytes = [0; 32];
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        bytes
    }
}

/// Shared handle to whichever chance the application runs on.
pub type SharedChance = Arc<dyn Chance>;

/// The operating system's randomness (through `rand`'s thread generator).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsChance;

impl Chance for OsChance {
    fn next_u64(&self) -> u64 {
        rand::random()
    }
}

/// A sequence fixed by its seed: the same numbers on every run.
pub struct SeededChance(Mutex<StdRng>);

impl SeededChance {
    pub fn new(seed: u64) -> Self {
        Self(Mutex::new(StdRng::seed_from_u64(seed)))
    }
}

impl Chance for SeededChance {
    fn next_u64(&self) -> u64 {
        self.0.lock().next_u64()
    }
}

/// The random choices one store operation may need, drawn up front and all
/// of them every time, whatever the operation turns out to need: so two
/// stores given the same seed stay in step whichever branch each takes.
#[derive(Debug, Clone)]
pub struct Dice {
    /// A draw's seed, should the operation start one.
    pub draw_seed: [u8; 32],
    /// An entrant's id, should the operation enter someone in a draw.
    pub entry: EntryId,
    /// What [`pick`] chooses from, should the operation admit at random.
    pub pick: PickSeed,
}

impl Dice {
    pub fn roll(chance: &dyn Chance) -> Self {
        Self {
            draw_seed: chance.bytes32(),
            entry: EntryId::from_bytes(chance.bytes32()[..12].try_into().expect("12 of 32")),
            pick: PickSeed(chance.next_u64()),
        }
    }

    pub fn draw_seed(&self) -> DrawSeed {
        DrawSeed::from_bytes(self.draw_seed)
    }
}

/// The number a tick's random admissions are derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PickSeed(pub u64);

impl PickSeed {
    /// How it is passed to a script: 16 lowercase hex digits.
    pub fn to_hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

/// The `nth` (0-based) random choice of a tick among `count` waiting: an
/// index in `0..count`, uniform up to a bias below `count / 2^48`. The same
/// in `lua/tick.lua`: `math.fmod(tonumber(string.sub(redis.sha1hex(seed ..
/// ':' .. nth), 1, 12), 16), count)`.
pub fn pick(seed: PickSeed, nth: u64, count: u64) -> u64 {
    assert!(count > 0, "a pick among nobody");
    let digest = Sha1::digest(format!("{}:{nth}", seed.to_hex()));
    let mut first = [0u8; 8];
    first[2..].copy_from_slice(&digest[..6]);
    u64::from_be_bytes(first) % count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_chances_repeat() {
        let (a, b) = (SeededChance::new(9), SeededChance::new(9));
        let rolls = |c: &SeededChance| (0..4).map(|_| c.next_u64()).collect::<Vec<_>>();
        assert_eq!(rolls(&a), rolls(&b));
        assert_ne!(rolls(&a), rolls(&SeededChance::new(10)));
    }

    /// What lua/tick.lua computes: the seed in hex, ':', the pick's number.
    #[test]
    fn a_pick_is_the_first_48_bits_of_sha1_modulo_the_count() {
        let seed = PickSeed(0xff);
        let digest = Sha1::digest(b"00000000000000ff:3");
        let first48 = digest[..6].iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
        assert_eq!(pick(seed, 3, 1_000_003), first48 % 1_000_003);
        assert_eq!(pick(seed, 3, 1), 0);
    }

    /// Uniform enough: over 60,000 picks among 6, each index comes up
    /// within 5% of 10,000 (the bound is ~8 standard deviations: a fixed
    /// seed, so it cannot flake).
    #[test]
    fn picks_are_uniform() {
        let mut counts = [0u32; 6];
        for nth in 0..60_000 {
            counts[pick(PickSeed(42), nth, 6) as usize] += 1;
        }
        for count in counts {
            assert!((9_500..=10_500).contains(&count), "{counts:?}");
        }
    }
}
