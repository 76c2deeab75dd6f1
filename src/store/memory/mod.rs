//! The embedded store for one node: the rules' model (`words::rules`)
//! behind a lock, every operation one critical section.

mod admission;
mod sale;

pub use admission::MemoryStore;
pub use sale::MemorySale;
