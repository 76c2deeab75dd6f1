//! The embedded store for one node: every operation one critical section.

mod admission;
mod draw_line;
mod fenwick;
mod sale;

pub use admission::MemoryStore;
pub use sale::MemorySale;
