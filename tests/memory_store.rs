//! The conformance suite on the embedded memory store.

mod conformance;

use std::sync::Arc;

use waitroom::store::memory::MemorySale;
use waitroom::store::memory::MemoryStore;
use waitroom::words::clock::ManualClock;

async fn memory_harness() -> conformance::Harness {
    let clock = ManualClock::new(1_767_225_600_000);
    conformance::Harness {
        store: Arc::new(MemoryStore::new(Arc::new(clock.clone()))),
        sale: Arc::new(MemorySale::new(Arc::new(clock.clone()))),
        clock,
        _backing: None,
    }
}

conformance_suite!(memory_harness);
