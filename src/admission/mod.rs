//! Admission: who waits, who is let in, and when. The rules live in the
//! stores (one atomic step per operation); the promoter drives the ticks.

mod fenwick;
pub mod memory;
pub mod model;
pub mod promoter;
pub mod redis;
pub mod store;
