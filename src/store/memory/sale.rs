//! The sale on the embedded store: each room's sale model
//! (`words::rules::SaleModel`) behind one mutex. The room's `MemoryStore`
//! holds a handle on the same sales, so creating a room wipes its
//! predecessor's sale in the same critical section.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::store::SaleStore;
use crate::words::RoomId;
use crate::words::clock::{Millis, SharedClock};
use crate::words::op::{
    ClaimsOf, ConfigureSale, ConfirmClaim, Handle, MakeClaim, Orders, ReadSale, ReadStock,
    ReleaseClaim, ReleaseHoldsOf, SaleAnswer, SaleOp,
};
use crate::words::rules::SaleModel;
use crate::words::sale::{Buyer, Claim, SaleError, SaleView, Stock};

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
    async fn apply(&self, op: SaleOp) -> Result<SaleAnswer, SaleError> {
        op.run_on(self).await
    }
}

impl Handle<ConfigureSale> for MemorySale {
    async fn handle(
        &self,
        ConfigureSale { room, config }: ConfigureSale,
    ) -> Result<SaleView, SaleError> {
        let sale = SaleModel::new(config);
        let view = sale.view();
        self.sales.lock().insert(room, sale);
        Ok(view)
    }
}

impl Handle<ReadSale> for MemorySale {
    async fn handle(&self, ReadSale { room }: ReadSale) -> Result<SaleView, SaleError> {
        self.with_sale(&room, |sale, _| Ok(sale.view()))
    }
}

impl Handle<ReadStock> for MemorySale {
    async fn handle(&self, ReadStock { room }: ReadStock) -> Result<Stock, SaleError> {
        let now = self.clock.now_ms();
        let mut sales = self.sales.lock();
        let sale = sales.get_mut(&room).ok_or(SaleError::NoSale)?;
        let sweep_left = sale.expire_holds(now);
        Ok(Stock {
            sweep_left,
            ..sale.stock()
        })
    }
}

impl Handle<MakeClaim> for MemorySale {
    async fn handle(&self, claim: MakeClaim) -> Result<Claim, SaleError> {
        let MakeClaim {
            room,
            visitor,
            user,
            want,
            idempotency_key,
        } = claim;
        let buyer = Buyer::of(visitor, user.as_deref());
        let key = idempotency_key.as_deref();
        self.with_sale(&room, |sale, now| {
            sale.claim(visitor, buyer, &want, key, now)
        })
    }
}

impl Handle<ConfirmClaim> for MemorySale {
    async fn handle(
        &self,
        ConfirmClaim {
            room,
            visitor,
            claim_id,
        }: ConfirmClaim,
    ) -> Result<Claim, SaleError> {
        self.with_sale(&room, |sale, now| sale.confirm(visitor, &claim_id, now))
    }
}

impl Handle<ReleaseClaim> for MemorySale {
    async fn handle(
        &self,
        ReleaseClaim {
            room,
            visitor,
            claim_id,
        }: ReleaseClaim,
    ) -> Result<(), SaleError> {
        self.with_sale(&room, |sale, now| sale.release(visitor, &claim_id, now))
    }
}

impl Handle<ReleaseHoldsOf> for MemorySale {
    async fn handle(
        &self,
        ReleaseHoldsOf { room, visitor }: ReleaseHoldsOf,
    ) -> Result<u64, SaleError> {
        self.with_sale(&room, |sale, now| Ok(sale.release_holds_of(visitor, now)))
    }
}

impl Handle<ClaimsOf> for MemorySale {
    async fn handle(&self, ClaimsOf { room, visitor }: ClaimsOf) -> Result<Vec<Claim>, SaleError> {
        self.with_sale(&room, |sale, now| Ok(sale.claims_of(visitor, now)))
    }
}

impl Handle<Orders> for MemorySale {
    async fn handle(&self, Orders { room }: Orders) -> Result<Vec<Claim>, SaleError> {
        self.with_sale(&room, |sale, _| Ok(sale.orders()))
    }
}
