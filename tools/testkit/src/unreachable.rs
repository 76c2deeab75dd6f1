//! A store that can be made unreachable: it wraps another and, while down,
//! answers every call with `StoreError::Unavailable`, as the Redis store
//! does when Redis cannot be reached. For tests of what the service does
//! without its store, on the memory store and a driven clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use tokio::sync::broadcast;
use waitroom::startup::Stores;
use waitroom::store::{Store, StoreError};
use waitroom::words::clock::SharedClock;
use waitroom::words::op::{Answer, Op};
use waitroom::words::{RoomId, StoreEvent};

pub struct Unreachable {
    inner: Arc<dyn Store>,
    down: AtomicBool,
}

impl Unreachable {
    /// The memory store behind a switch (the sale's store stays reachable).
    pub fn memory(clock: SharedClock) -> (Arc<Self>, Stores) {
        let Stores { admission, sale } = Stores::memory(clock);
        let store = Arc::new(Self {
            inner: admission,
            down: AtomicBool::new(false),
        });
        let stores = Stores {
            admission: store.clone(),
            sale,
        };
        (store, stores)
    }

    /// From now on every call fails (`down`), or reaches the store again.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    fn reach(&self) -> Result<&dyn Store, StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("the test cut the store off".into()));
        }
        Ok(self.inner.as_ref())
    }
}

#[async_trait]
impl Store for Unreachable {
    async fn apply(&self, op: Op) -> Result<Answer, StoreError> {
        self.reach()?.apply(op).await
    }
    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.inner.subscribe()
    }
    async fn watch(&self, room: &RoomId) -> Result<(), StoreError> {
        self.reach()?.watch(room).await
    }
}
