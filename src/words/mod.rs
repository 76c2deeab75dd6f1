//! Words and rules: the vocabulary every other layer speaks (rooms, visitors,
//! places, events, the sale, the status message, the pages' languages, time, chance,
//! credentials, the form of a URL a node is told to call), the rules that need no
//! store (config validation, ETA, signing, the webhook's signature), and the
//! rules every store implements, as a pure model (`rules`). Nothing here
//! knows actix or Redis.

pub mod autotune;
pub mod chance;
pub mod clock;
pub mod codes;
pub mod config;
pub mod constants;
pub mod credentials;
pub mod draw;
pub mod health_url;
pub mod join_limit;
pub mod language;
pub mod login_limit;
mod model;
pub mod networks;
pub mod notify;
pub mod op;
pub mod operations;
pub mod origin_token;
pub mod page;
pub mod pow;
pub mod push;
pub mod report;
pub mod return_url;
pub mod room_table;
pub mod rules;
pub mod sale;
pub mod schedule;
pub mod status;
pub mod webhook_signature;
pub(crate) mod wire;
#[cfg(test)]
pub(crate) mod written;

pub use config::{
    ConfigError, ConfigPatch, DEFAULT_ABANDON_AFTER_S, DEFAULT_ADMIT_PER_TICK, DEFAULT_PASS_TTL_S,
    DEFAULT_TICK_MS, MAX_NOTICE_CHARS, MIN_USER_KEY_CHARS, QueueMethod, RoomConfig, Secret,
};
pub use model::*;
pub use wire::WireName;
pub(crate) use wire::{one_of, wire_enum};
