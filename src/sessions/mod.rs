//! Live visitors: the WebSocket endpoint, the upgrade path that takes its
//! connection from the HTTP dispatcher, each socket's loop and write side,
//! and the hub that keeps this node's sockets up to date from the store's
//! events.

pub mod connection;
pub mod hub;
pub mod socket;
pub mod upgrade;
