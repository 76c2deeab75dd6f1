//! The sale behind the gate: limited stock or named seats, sold exactly
//! once. A claim (limit check, stock or all its seats, the hold) is one atomic
//! step; holds not confirmed in time go back to stock by themselves.

pub mod http;
pub mod memory;
pub mod model;
pub mod redis;
