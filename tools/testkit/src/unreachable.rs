//! A store that can be made unreachable: it wraps another and, while down,
//! answers every call with `StoreError::Unavailable`, as the Redis store
//! does when Redis cannot be reached. For tests of what the service does
//! without its store, on the memory store and a driven clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use tokio::sync::broadcast;
use waitroom::startup::Stores;
use waitroom::store::{JoinOptions, Store, StoreError, Tick};
use waitroom::words::clock::{Millis, SharedClock};
use waitroom::words::codes::{GroupSummary, NewGroup};
use waitroom::words::draw::{DrawKey, EntryId};
use waitroom::words::join_limit::ClientBlock;
use waitroom::words::login_limit::Attempt;
use waitroom::words::room_table::{Applied, RoomTable};
use waitroom::words::sale::Stock;
use waitroom::words::{ConfigPatch, Place, RoomConfig, RoomId, RoomInfo, StoreEvent, VisitorId};

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
    async fn create_room(&self, id: RoomId, config: RoomConfig) -> Result<RoomInfo, StoreError> {
        self.reach()?.create_room(id, config).await
    }
    async fn configure(&self, id: &RoomId, patch: ConfigPatch) -> Result<RoomInfo, StoreError> {
        self.reach()?.configure(id, patch).await
    }
    async fn apply_table(&self, table: &RoomTable) -> Result<Applied, StoreError> {
        self.reach()?.apply_table(table).await
    }
    async fn close_room(&self, id: &RoomId) -> Result<(), StoreError> {
        self.reach()?.close_room(id).await
    }
    async fn room(&self, id: &RoomId) -> Result<RoomInfo, StoreError> {
        self.reach()?.room(id).await
    }
    async fn rooms(&self) -> Result<Vec<RoomInfo>, StoreError> {
        self.reach()?.rooms().await
    }
    async fn room_ids(&self) -> Result<Vec<RoomId>, StoreError> {
        self.reach()?.room_ids().await
    }
    async fn join_with(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        options: &JoinOptions,
    ) -> Result<Place, StoreError> {
        self.reach()?.join_with(id, visitor, options).await
    }
    async fn status(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        self.reach()?.status(id, visitor).await
    }
    async fn places(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<Vec<Place>, StoreError> {
        self.reach()?.places(id, visitors).await
    }
    async fn draw_entries(
        &self,
        id: &RoomId,
        after: Option<(DrawKey, EntryId)>,
        limit: usize,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError> {
        self.reach()?.draw_entries(id, after, limit).await
    }
    async fn add_codes(&self, id: &RoomId, group: NewGroup) -> Result<GroupSummary, StoreError> {
        self.reach()?.add_codes(id, group).await
    }
    async fn code_groups(&self, id: &RoomId) -> Result<Vec<GroupSummary>, StoreError> {
        self.reach()?.code_groups(id).await
    }
    async fn remove_codes(&self, id: &RoomId, group: &str) -> Result<(), StoreError> {
        self.reach()?.remove_codes(id, group).await
    }
    async fn user_of(&self, id: &RoomId, visitor: VisitorId) -> Result<Option<String>, StoreError> {
        self.reach()?.user_of(id, visitor).await
    }
    async fn leave(&self, id: &RoomId, visitor: VisitorId) -> Result<(), StoreError> {
        self.reach()?.leave(id, visitor).await
    }
    async fn arrive(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        self.reach()?.arrive(id, visitor).await
    }
    async fn resume_arrivals(&self, id: &RoomId, seen: Option<u64>) -> Result<u64, StoreError> {
        self.reach()?.resume_arrivals(id, seen).await
    }
    async fn revoke_pass(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        pass_exp_s: Option<u64>,
    ) -> Result<bool, StoreError> {
        self.reach()?.revoke_pass(id, visitor, pass_exp_s).await
    }
    async fn touch(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<(), StoreError> {
        self.reach()?.touch(id, visitors).await
    }
    async fn tick(&self, id: &RoomId) -> Result<Tick, StoreError> {
        self.reach()?.tick(id).await
    }
    async fn announce_stock(&self, id: &RoomId, stock: Stock) -> Result<(), StoreError> {
        self.reach()?.announce_stock(id, stock).await
    }
    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.inner.subscribe()
    }
    async fn watch(&self, room: &RoomId) -> Result<(), StoreError> {
        self.reach()?.watch(room).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.reach()?.ping().await
    }
    async fn end_admin_session(&self, id: &str, until: Millis) -> Result<(), StoreError> {
        self.reach()?.end_admin_session(id, until).await
    }
    async fn admin_session_ended(&self, id: &str) -> Result<bool, StoreError> {
        self.reach()?.admin_session_ended(id).await
    }
    async fn login_attempt(&self, block: &ClientBlock, attempt: Attempt) -> Result<(), StoreError> {
        self.reach()?.login_attempt(block, attempt).await
    }
}
