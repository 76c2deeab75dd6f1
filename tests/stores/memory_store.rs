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

/// A closed room's report is kept `--report-keep-days` on the store's
/// clock, then gone from the reports and from the list.
#[tokio::test]
async fn a_closed_rooms_report_is_kept_for_its_days_then_gone() {
    use waitroom::store::{StoreError, StoreExt};
    use waitroom::words::op::{ListReports, ReadReport};
    use waitroom::words::{RoomConfig, RoomId};

    let clock = ManualClock::new(1_767_225_600_000);
    let store = MemoryStore::new(Arc::new(clock.clone())).keep_reports_for(2);
    let id = RoomId::parse("r").unwrap();
    store
        .create_room(id.clone(), RoomConfig::new("R", "/x"))
        .await
        .unwrap();
    store.close_room(&id).await.unwrap();
    let read = || {
        store.run(ReadReport {
            room: id.clone(),
            created_at: None,
        })
    };
    clock.advance_ms(2 * 24 * 3_600_000 - 1);
    assert!(read().await.is_ok(), "kept for two days");
    assert_eq!(store.run(ListReports {}).await.unwrap().len(), 1);
    clock.advance_ms(1);
    assert!(matches!(read().await, Err(StoreError::RoomNotFound(_))));
    assert!(store.run(ListReports {}).await.unwrap().is_empty());
}
