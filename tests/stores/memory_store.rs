//! The conformance suite on the embedded memory store.

use crate::conformance;

use std::sync::Arc;

use waitroom::store::memory::MemoryStore;
use waitroom::words::clock::ManualClock;

async fn memory_harness() -> conformance::Harness {
    let clock = ManualClock::new(1_767_225_600_000);
    let store = MemoryStore::new(Arc::new(clock.clone()));
    conformance::Harness {
        sale: Arc::new(store.sale()),
        store: Arc::new(store),
        clock,
        _backing: None,
    }
}

conformance_suite!(memory_harness);
