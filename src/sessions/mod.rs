//! Live visitors: the WebSocket endpoint, its session loop, and the hub that
//! keeps this node's sockets up to date from the store's events.

pub mod hub;
pub mod socket;
