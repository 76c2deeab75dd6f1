//! The sale on the embedded store: each room's sale model
//! (`words::rules::SaleModel`) behind one mutex. The room's `MemoryStore`
//! holds a handle on the same sales, so creating a room wipes its
//! predecessor's sale in the same critical section.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::store::SaleStore;
use crate::words::clock::{Millis, SharedClock};
use crate::words::rules::SaleModel;
use crate::words::sale::{Buyer, Claim, SaleConfig, SaleError, SaleView, Stock, Want};
use crate::words::{RoomId, VisitorId};

/// A cheap-clone handle; every clone sees the same sales.
#[derive(Clone)]
pub struct MemorySale {
    clock: SharedClock,
    sales: Arc<Mutex<HashMap<RoomId, SaleModel>>>,
}

impl MemorySale {
    /// Only the memory store makes one (see `MemoryStore::sale`), so the
    /// sales it serves are always those its rooms wipe.
    pub(super) fn new(clock: SharedClock) -> Self {
        Self {
            clock,
            sales: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Drops the room's sale, claims and orders and all (a room created again
    /// under an old id starts with nothing of its predecessor's).
    pub(super) fn wipe(&self, room: &RoomId) {
        self.sales.lock().remove(room);
    }

    /// Runs `op` on the room's sale after giving back the expired holds.
    fn with_sale<T>(
        &self,
        room: &RoomId,
        op: impl FnOnce(&mut SaleModel, Millis) -> Result<T, SaleError>,
    ) -> Result<T, SaleError> {
        let now = self.clock.now_ms();
        let mut sales = self.sales.lock();
        let sale = sales.get_mut(room).ok_or(SaleError::NoSale)?;
        sale.expire_holds(now);
        op(sale, now)
    }
}

#[async_trait]
impl SaleStore for MemorySale {
    async fn configure_sale(
        &self,
        room: &RoomId,
        config: SaleConfig,
    ) -> Result<SaleView, SaleError> {
        let sale = SaleModel::new(config);
        let view = sale.view();
        self.sales.lock().insert(room.clone(), sale);
        Ok(view)
    }

    async fn sale(&self, room: &RoomId) -> Result<SaleView, SaleError> {
        self.with_sale(room, |sale, _| Ok(sale.view()))
    }

    async fn stock(&self, room: &RoomId) -> Result<Stock, SaleError> {
        let now = self.clock.now_ms();
        let mut sales = self.sales.lock();
        let sale = sales.get_mut(room).ok_or(SaleError::NoSale)?;
        let sweep_left = sale.expire_holds(now);
        Ok(Stock {
            sweep_left,
            ..sale.stock()
        })
    }

    async fn claim_as(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        user: Option<&str>,
        want: &Want,
        key: Option<&str>,
    ) -> Result<Claim, SaleError> {
        let buyer = Buyer::of(visitor, user);
        self.with_sale(room, |sale, now| sale.claim(visitor, buyer, want, key, now))
    }

    async fn confirm(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<Claim, SaleError> {
        self.with_sale(room, |sale, now| sale.confirm(visitor, claim_id, now))
    }

    async fn release(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<(), SaleError> {
        self.with_sale(room, |sale, now| sale.release(visitor, claim_id, now))
    }

    async fn release_holds_of(&self, room: &RoomId, visitor: VisitorId) -> Result<u64, SaleError> {
        self.with_sale(room, |sale, now| Ok(sale.release_holds_of(visitor, now)))
    }

    async fn claims_of(&self, room: &RoomId, visitor: VisitorId) -> Result<Vec<Claim>, SaleError> {
        self.with_sale(room, |sale, now| Ok(sale.claims_of(visitor, now)))
    }

    async fn orders(&self, room: &RoomId) -> Result<Vec<Claim>, SaleError> {
        self.with_sale(room, |sale, _| Ok(sale.orders()))
    }
}
