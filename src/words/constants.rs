//! Figures the stores share: the memory store uses them here, and the Redis
//! store's Lua scripts are given them in a generated prelude
//! (`src/store/redis/prelude.rs`), so that no script repeats one.

use super::clock::Millis;

/// How far back the achieved admission rate looks.
pub const RATE_WINDOW_MS: Millis = 60_000;

/// The span the per-address join limit's rate is counted over (joins per
/// minute; see `join_limit`).
pub const JOIN_LIMIT_WINDOW_MS: Millis = 60_000;
