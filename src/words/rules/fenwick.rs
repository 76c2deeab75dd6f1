//! Fenwick trees. `LineIndex`: append-only over join sequence numbers, so a
//! waiting visitor's exact position is an O(log n) prefix sum rather than a
//! walk of the line; each slot is 1 while that sequence number waits, 0 once
//! it has been admitted or has left. `Counts`: a fixed number of slots with
//! any counts (the draw's bucket sizes).

#[derive(Debug, Default)]
pub struct LineIndex {
    /// 1-based Fenwick array; `tree[0]` is unused.
    tree: Vec<u32>,
}

impl LineIndex {
    pub fn new() -> Self {
        Self { tree: vec![0] }
    }

    /// Appends the next sequence number (`len() + 1`), waiting.
    pub fn push_waiting(&mut self) -> u64 {
        let i = self.tree.len();
        let low = i & i.wrapping_neg();
        // The new node covers (i - low, i]: its own 1 plus the sum of the
        // already-present slots in that range.
        let covered = self.prefix(i - 1) - self.prefix(i - low);
        self.tree.push(1 + covered);
        i as u64
    }

    /// Marks `seq` as no longer waiting.
    pub fn remove(&mut self, seq: u64) {
        let mut i = seq as usize;
        while i < self.tree.len() {
            self.tree[i] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// How many sequence numbers `<= seq` are still waiting: for a waiting
    /// `seq`, its 1-based position in line.
    pub fn rank(&self, seq: u64) -> u64 {
        self.prefix(seq as usize) as u64
    }

    /// The waiting sequence number at 1-based position `rank` (the inverse
    /// of `rank`), found by descending the tree in O(log n).
    pub fn select(&self, rank: u64) -> u64 {
        find(&self.tree, rank as u32) as u64 + 1
    }

    fn prefix(&self, mut i: usize) -> u32 {
        let mut sum = 0;
        while i > 0 {
            sum += self.tree[i];
            i &= i - 1;
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_counts_only_waiting_sequence_numbers() {
        let mut index = LineIndex::new();
        let mut waiting = Vec::new();
        for _ in 0..1000 {
            waiting.push(index.push_waiting());
        }
        for seq in (1..=1000u64).filter(|s| s % 3 == 0 || s % 7 == 0) {
            index.remove(seq);
            waiting.retain(|w| *w != seq);
        }
        for _ in 0..37 {
            waiting.push(index.push_waiting());
        }
        for (expected, seq) in waiting.iter().enumerate() {
            assert_eq!(index.rank(*seq), expected as u64 + 1, "seq {seq}");
            assert_eq!(
                index.select(expected as u64 + 1),
                *seq,
                "rank {}",
                expected + 1
            );
        }
    }
}

/// The 0-based slot of the `rank`-th (1-based) counted item in a 1-based
/// Fenwick array, found by descending the tree in O(log n).
fn find(tree: &[u32], rank: u32) -> usize {
    let mut position = 0;
    let mut left = rank;
    let mut step = (tree.len() - 1).next_power_of_two();
    while step > 0 {
        let next = position + step;
        if next < tree.len() && tree[next] < left {
            position = next;
            left -= tree[next];
        }
        step /= 2;
    }
    position
}

/// Counts over a fixed number of slots, with prefix sums and their inverse.
#[derive(Debug)]
pub struct Counts {
    /// 1-based Fenwick array; `tree[0]` is unused.
    tree: Vec<u32>,
}

impl Counts {
    pub fn new(slots: usize) -> Self {
        Self {
            tree: vec![0; slots + 1],
        }
    }

    /// Adds one to 0-based `slot`, or takes one away.
    pub fn add(&mut self, slot: usize, delta: i32) {
        let mut i = slot + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// The sum over the slots before 0-based `slot`.
    pub fn before(&self, slot: usize) -> u64 {
        let mut i = slot;
        let mut sum = 0u64;
        while i > 0 {
            sum += u64::from(self.tree[i]);
            i &= i - 1;
        }
        sum
    }

    /// The 0-based slot holding the `rank`-th counted item (1-based).
    pub fn find(&self, rank: u64) -> usize {
        find(&self.tree, rank as u32)
    }
}
