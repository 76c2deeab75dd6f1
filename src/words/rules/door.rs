//! A room's door: whether a new arrival may take a place at all (the room
//! takes arrivals, their proof of work is good and unused, their address
//! has join budget left), whether a join's code may be looked at (its
//! address has code guesses left), and how many were turned away.

use std::collections::HashMap;

use crate::words::clock::Millis;
use crate::words::join_limit::{self, Gcra, JoinLimit};
use crate::words::operations::{JoinOptions, StoreError};
use crate::words::{QueueMethod, RoomConfig};

/// The per-address map is pruned when it reaches this size, or twice its
/// size after the last pruning.
const MIN_PRUNE: usize = 1024;

pub(super) struct Door {
    /// Per-address join limits: client address → theoretical arrival time.
    join_limits: HashMap<String, Millis>,
    join_limits_prune_at: usize,
    /// Per-address code-guess budgets: client address → theoretical
    /// arrival time of its next wrong code.
    code_guesses: HashMap<String, Millis>,
    code_guesses_prune_at: usize,
    /// Proof-of-work solutions used, until they expire.
    used_pow: HashMap<String, Millis>,
    used_pow_prune_at: usize,
    pub(super) turned_away: u64,
}

impl Default for Door {
    fn default() -> Self {
        Self {
            join_limits: HashMap::new(),
            join_limits_prune_at: MIN_PRUNE,
            code_guesses: HashMap::new(),
            code_guesses_prune_at: MIN_PRUNE,
            used_pow: HashMap::new(),
            used_pow_prune_at: MIN_PRUNE,
            turned_away: 0,
        }
    }
}

impl Door {
    /// Whether a new arrival may take a place, spending what it uses (its
    /// proof of work, its address's join budget); a refusal changes nothing
    /// but `turned_away`.
    pub(super) fn welcome(
        &mut self,
        config: &RoomConfig,
        options: &JoinOptions,
        now: Millis,
    ) -> Result<(), StoreError> {
        if let Some(refusal) = Self::refusal(config, options, &self.used_pow, now) {
            self.turned_away += 1;
            return Err(refusal);
        }
        if let Some(limit) = &options.limit {
            self.spend_join(limit, now)?;
        }
        if config.pow_difficulty > 0
            && let Some(solved) = &options.pow
        {
            self.used_pow.insert(solved.id.clone(), solved.until);
            // A solution past its expiry is refused as expired before it
            // gets here, so pruning when the map doubles loses nothing.
            prune(&mut self.used_pow, &mut self.used_pow_prune_at, now);
        }
        Ok(())
    }

    /// Spends one of the address's joins (a new place, or a request to be
    /// notified, which holds a place as long); refused past the budget,
    /// and counted as turned away.
    pub(super) fn spend_join(&mut self, limit: &JoinLimit, now: Millis) -> Result<(), StoreError> {
        let tat = self.join_limits.get(&limit.client).copied();
        match join_limit::decide(tat, now, limit.per_minute) {
            Gcra::Allowed { tat } => {
                self.join_limits.insert(limit.client.clone(), tat);
                // An address whose TAT has passed is as good as unknown;
                // pruning when the map doubles keeps the cost per join
                // constant.
                prune(&mut self.join_limits, &mut self.join_limits_prune_at, now);
                Ok(())
            }
            Gcra::Refused { retry_after_s } => {
                self.turned_away += 1;
                Err(StoreError::RateLimited { retry_after_s })
            }
        }
    }

    /// Looks a join's code up (`look`) while the client has code guesses
    /// left in `budget` (the same GCRA as the join limit, on its own
    /// budgets); a code refused as unknown or used spends one. Past the
    /// budget the code is not looked at, right or wrong: the join is
    /// refused as rate limited and counted as turned away, so guessing
    /// codes from one address gets a few tries a minute, never more.
    pub(super) fn guess<T>(
        &mut self,
        budget: Option<&JoinLimit>,
        now: Millis,
        look: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Some(budget) = budget else {
            return look();
        };
        let tat = self.code_guesses.get(&budget.client).copied();
        let spent = match join_limit::decide(tat, now, budget.per_minute) {
            Gcra::Allowed { tat } => tat,
            Gcra::Refused { retry_after_s } => {
                self.turned_away += 1;
                return Err(StoreError::RateLimited { retry_after_s });
            }
        };
        let answer = look();
        if let Err(StoreError::InvalidCode | StoreError::CodeUsed) = answer {
            self.code_guesses.insert(budget.client.clone(), spent);
            prune(&mut self.code_guesses, &mut self.code_guesses_prune_at, now);
        }
        answer
    }

    /// Whether the room still takes arrivals at all (`closes_at`), for a
    /// join the other rules do not apply to (a bypass network's client).
    pub(super) fn still_accepting(
        &mut self,
        config: &RoomConfig,
        now: Millis,
    ) -> Result<(), StoreError> {
        if config.closes_at.is_some_and(|at| now >= at.0) {
            self.turned_away += 1;
            return Err(StoreError::NotAccepting);
        }
        Ok(())
    }

    fn refusal(
        config: &RoomConfig,
        options: &JoinOptions,
        used_pow: &HashMap<String, Millis>,
        now: Millis,
    ) -> Option<StoreError> {
        if config.queue_method == QueueMethod::Reject
            || config.closes_at.is_some_and(|at| now >= at.0)
        {
            return Some(StoreError::NotAccepting);
        }
        if config.pow_difficulty == 0 {
            return None;
        }
        match &options.pow {
            None => Some(StoreError::PowRequired),
            Some(solved) if solved.difficulty < config.pow_difficulty => {
                Some(StoreError::PowTooEasy)
            }
            Some(solved) if used_pow.contains_key(&solved.id) => Some(StoreError::PowReused),
            Some(_) => None,
        }
    }
}

/// Drops the entries whose time has passed once the map reaches `at`, and
/// sets the next pruning at twice what is left.
fn prune(map: &mut HashMap<String, Millis>, at: &mut usize, now: Millis) {
    if map.len() >= *at {
        map.retain(|_, until| *until > now);
        *at = (2 * map.len()).max(MIN_PRUNE);
    }
}
