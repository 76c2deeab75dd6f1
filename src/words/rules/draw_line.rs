//! A room's draw in memory: every entrant in drawn order, and those of them
//! still waiting, with each one's rank in O(log n) so that a million
//! entrants cost the opening nothing and each socket's first read little.
//!
//! Written here rather than taken from a crate: the waiting entrants need
//! insert, remove, rank, select and pop-first on 32-byte keys, which is an
//! order-statistics tree; since the keys are HMACs (uniform), buckets by
//! key prefix with a Fenwick tree over the bucket sizes do the same with
//! the two structures we already have.

use std::collections::BTreeMap;

use super::fenwick::Counts;
use crate::words::VisitorId;
use crate::words::draw::{DrawKey, DrawSeed, EntryId};

/// Buckets by the key's first 12 bits: about 250 entrants each at a million.
const BUCKET_BITS: u32 = 12;

pub struct DrawLine {
    pub seed: DrawSeed,
    pub commitment: String,
    /// Every entrant in drawn order; frozen at the opening.
    pub entries: BTreeMap<DrawKey, EntryId>,
    waiting: Ranked,
}

impl DrawLine {
    pub fn new(seed: DrawSeed) -> Self {
        Self {
            commitment: seed.commitment(),
            seed,
            entries: BTreeMap::new(),
            waiting: Ranked::new(),
        }
    }

    /// A new entrant, `entry`: their key in the order.
    pub fn enter(&mut self, visitor: VisitorId, entry: EntryId) -> DrawKey {
        let key = self.seed.key_of(&entry);
        self.entries.insert(key, entry);
        self.waiting.insert(key, visitor);
        key
    }

    /// An entrant stops waiting; before the opening they are no entrant at all.
    pub fn remove(&mut self, key: &DrawKey, before_opening: bool) {
        self.waiting.remove(key);
        if before_opening {
            self.entries.remove(key);
        }
    }

    pub fn waiting(&self) -> u64 {
        self.waiting.len
    }

    /// 1-based position among the entrants still waiting.
    pub fn rank(&self, key: &DrawKey) -> u64 {
        self.waiting.rank(key)
    }

    /// The entrant at 1-based position `rank` among those waiting.
    pub fn select(&self, rank: u64) -> Option<(DrawKey, VisitorId)> {
        self.waiting.select(rank)
    }
}

/// A sorted set of keys with ranks.
struct Ranked {
    buckets: Vec<Vec<(DrawKey, VisitorId)>>,
    sizes: Counts,
    len: u64,
}

impl Ranked {
    fn new() -> Self {
        Self {
            buckets: vec![Vec::new(); 1 << BUCKET_BITS],
            sizes: Counts::new(1 << BUCKET_BITS),
            len: 0,
        }
    }

    fn bucket(key: &DrawKey) -> usize {
        (key.prefix() >> (64 - BUCKET_BITS)) as usize
    }

    fn insert(&mut self, key: DrawKey, visitor: VisitorId) {
        let b = Self::bucket(&key);
        let bucket = &mut self.buckets[b];
        if let Err(i) = bucket.binary_search_by_key(&key, |(k, _)| *k) {
            bucket.insert(i, (key, visitor));
            self.sizes.add(b, 1);
            self.len += 1;
        }
    }

    fn remove(&mut self, key: &DrawKey) {
        let b = Self::bucket(key);
        let bucket = &mut self.buckets[b];
        if let Ok(i) = bucket.binary_search_by_key(key, |(k, _)| *k) {
            bucket.remove(i);
            self.sizes.add(b, -1);
            self.len -= 1;
        }
    }

    fn rank(&self, key: &DrawKey) -> u64 {
        let b = Self::bucket(key);
        let within = self.buckets[b].partition_point(|(k, _)| k < key);
        self.sizes.before(b) + within as u64 + 1
    }

    fn select(&self, rank: u64) -> Option<(DrawKey, VisitorId)> {
        if rank == 0 || rank > self.len {
            return None;
        }
        let b = self.sizes.find(rank);
        let within = rank - self.sizes.before(b);
        self.buckets[b].get(within as usize - 1).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::chance::{Chance, Dice, SeededChance};

    #[test]
    fn ranks_follow_the_keys_through_removals_and_pops() {
        let chance = SeededChance::new(1);
        let mut line = DrawLine::new(DrawSeed::from_bytes(chance.bytes32()));
        let mut keys: Vec<DrawKey> = (0..5000u64)
            .map(|v| line.enter(VisitorId(v), Dice::roll(&chance).entry))
            .collect();
        keys.sort();
        for gone in keys.iter().step_by(7) {
            line.remove(gone, false);
        }
        keys = keys
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % 7 != 0)
            .map(|(_, k)| k)
            .collect();
        let first = line.select(1).unwrap().0;
        line.remove(&first, false);
        assert_eq!(first, keys.remove(0));
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(line.rank(key), i as u64 + 1);
            assert_eq!(line.select(i as u64 + 1).unwrap().0, *key);
        }
        assert_eq!(line.waiting(), keys.len() as u64);
        assert_eq!(line.entries.len(), 5000, "entries stay after the opening");
        assert!(
            line.entries
                .keys()
                .zip(line.entries.keys().skip(1))
                .all(|(a, b)| a < b)
        );
    }
}
