//! The stores: the conformance suite on every store (memory, one Redis,
//! Redis with `WAIT`, a Redis Cluster), the stores side by side on seeded
//! random sequences, a managed Redis (TLS, credentials, Sentinel), the
//! store failing over mid-sale, and the cap held under racing joins.

#[macro_use]
mod conformance;

mod concurrency;
mod differential;
mod failover;
mod managed_redis;
mod memory_store;
mod redis_cluster;
mod redis_store;
