//! Live visitors: this node's sockets and the hub that keeps them up to date
//! from the store's events, the promoter that ticks the rooms, and each
//! socket's loop.

pub mod connection;
pub mod hub;
pub mod promoter;
pub mod socket;
pub mod upgrade;
