//! The rules, as a pure model: every store operation's rules (join, tick,
//! leave, expiry, abandonment, no-shows, revocation, the draw, and the
//! sale's claim, confirm and release) as methods that take the time and
//! the chance they need, and do no I/O. The memory store is this model
//! behind a lock (`store::memory`); the Redis store runs the same rules in
//! `lua/*.lua`; `tests/stores/differential.rs` runs seeded sequences of
//! operations against both and fails on the first answer they disagree on.
//!
//! A room is split by what it keeps: its line (`line`, with the draw in
//! `draw_line` and the positions in `fenwick`), its passes (`passes`), its
//! pace (`pace`: bucket, schedule, rate), its door (`door`: who may take a
//! new place) and who left (`departures`); `room` holds them together.

mod callbacks;
mod departures;
mod door;
mod draw_line;
mod fenwick;
mod line;
mod pace;
mod passes;
mod room;
mod sale;

pub use callbacks::{HELD_PRESENCE, event_id};
pub use room::{FORGOTTEN_PER_OPERATION, FORGOTTEN_PER_TICK, RoomModel};
pub use sale::SaleModel;
