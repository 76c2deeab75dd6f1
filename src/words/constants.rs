//! Figures the stores share: the memory store uses them here, and the Redis
//! store's Lua scripts are given them in a generated prelude
//! (`src/store/redis/prelude.rs`), so that no script repeats one.

use super::clock::Millis;

/// How far back the achieved admission rate looks.
pub const RATE_WINDOW_MS: Millis = 60_000;

/// The span the per-address join limit's rate is counted over (joins per
/// minute; see `join_limit`).
pub const JOIN_LIMIT_WINDOW_MS: Millis = 60_000;

/// The most a tick sweeps of each kind (visitors absent too long, passes
/// never seen arriving) in one call: a sweep never grows with the crowd. A
/// tick that filled a slice leaves the rest for the room's next call and
/// says it is due again after [`SWEEP_AGAIN_MS`], so a mass lapse clears a
/// slice at a time, each a short step for the store. At 1,000 the longest
/// slice of a 300,000-visitor lapse ran 42 ms on Redis (`cargo bench --bench
/// redis_sweeps`, BENCHMARKS.md): each place swept removes its entries and
/// writes its "away" key; a quarter of that keeps every step at 4–10 ms.
pub const SWEEP_SLICE: u64 = 250;

/// How soon a tick that left sweeping to do asks to be called again: the
/// store is free between two slices, and a lapse of 300,000 clears in
/// about 1,200 calls, well under a minute.
pub const SWEEP_AGAIN_MS: Millis = 25;

/// How long a visitor whose place was swept for being away is told so
/// (`expired`, `away_too_long`) rather than plainly `expired`: long enough
/// for a phone unlocked after lunch, short enough that a mass lapse's
/// markers leave the store by themselves within the hour.
pub const AWAY_REMEMBERED_MS: Millis = 3_600_000;
