//! Words and rules: the vocabulary every other layer speaks (rooms, visitors,
//! places, events, the sale, the status message, time and credentials) and
//! the rules that need no store (config validation, ETA, signing). Nothing
//! here knows actix or Redis.

pub mod clock;
pub mod constants;
pub mod credentials;
pub mod draw;
pub mod join_limit;
mod model;
pub mod pow;
pub mod sale;
pub mod status;

pub use model::*;
