//! The shared store for many nodes: Redis or Redis Cluster, one Lua script
//! (`lua/*.lua`) per operation, room events over (sharded) pub/sub.

mod admission;
mod config;
mod connection;
mod events;
mod join_batch;
mod keys;
mod prelude;
mod records;
mod replies;
mod report;
mod sale;
mod script_error;

pub use admission::RedisStore;
pub use connection::{RedisOptions, redacted};
pub use join_batch::JOINS_PER_CALL;
