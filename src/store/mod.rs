//! Stores: the boundary every store implements (one method that runs any
//! operation of `words::op`, each one atomic step: one critical section in
//! memory, one Lua script on Redis), and the two stores, memory and Redis.

pub mod measured;
pub mod memory;
pub mod redis;
mod sale;

pub use sale::{SaleStore, SaleStoreExt};

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::words::clock::Millis;
use crate::words::codes::{GroupSummary, NewGroup};
use crate::words::draw::{DrawInfo, DrawKey, EntryId};
use crate::words::join_limit::ClientBlock;
use crate::words::login_limit::Attempt;
use crate::words::op::{self, Answer, Op, Operation};
pub use crate::words::operations::{
    JoinOptions, PassTakenBack, RoomFigures, StoreError, Tick, TickReport,
};
use crate::words::room_table::{Applied, RoomTable};
use crate::words::sale::{SaleConfig, SaleError, SaleView, Stock};
use crate::words::{ConfigPatch, Place, RoomConfig, RoomId, RoomInfo, StoreEvent, VisitorId};

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// What kind of store this is, as the metrics name it (`memory`, `redis`).
    fn name(&self) -> &'static str {
        "custom"
    }
    /// The kinds of failure this store counts in `waitroom_store_errors_total`
    /// (besides `unexpected`, which every store may give), registered at
    /// zero when the store is put to use (see [`measured`]).
    fn failure_kinds(&self) -> &'static [&'static str] {
        &[]
    }
    /// Runs one operation (`words::op`) as one atomic step. Call it through
    /// [`StoreExt::run`], which keeps the answer typed; a store implements it
    /// as `op.run_on(self)`, having said how it runs each operation.
    async fn apply(&self, op: Op) -> Result<Answer, StoreError>;
    /// Every room's events, on this node.
    fn subscribe(&self) -> broadcast::Receiver<StoreEvent>;
    /// Makes sure this node hears `room`'s events (on a cluster, sharded
    /// channels are subscribed one by one); call before reading a place.
    async fn watch(&self, _room: &RoomId) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Any store's operations, typed: `run` takes every operation; the rest
/// are the calls made most, spelt short (an operation needs none of them).
#[async_trait]
pub trait StoreExt: Store {
    /// Runs `op` and answers with its own type.
    async fn run<O>(&self, op: O) -> Result<O::Answer, StoreError>
    where
        O: Operation<Any = Op, AnyAnswer = Answer, Error = StoreError>,
    {
        let answer = self.apply(op.into()).await?;
        O::answer(answer).ok_or_else(|| {
            StoreError::Unexpected(format!(
                "the store answered another operation than {}",
                O::NAME
            ))
        })
    }

    async fn create_room(&self, room: RoomId, config: RoomConfig) -> Result<RoomInfo, StoreError> {
        let config = Box::new(config);
        self.run(op::CreateRoom { room, config })
            .await
            .map(|info| *info)
    }
    async fn configure(&self, room: &RoomId, patch: ConfigPatch) -> Result<RoomInfo, StoreError> {
        self.run(op::Configure {
            room: room.clone(),
            patch,
        })
        .await
        .map(|info| *info)
    }
    async fn apply_table(&self, table: &RoomTable) -> Result<Applied, StoreError> {
        self.run(op::ApplyTable {
            table: table.clone(),
        })
        .await
    }
    async fn close_room(&self, room: &RoomId) -> Result<(), StoreError> {
        self.run(op::CloseRoom {
            room: room.clone(),
            sale: None,
        })
        .await
    }
    async fn room(&self, room: &RoomId) -> Result<RoomInfo, StoreError> {
        let info = self.run(op::ReadRoom { room: room.clone() }).await?;
        Ok(*info)
    }
    async fn rooms(&self) -> Result<Vec<RoomInfo>, StoreError> {
        self.run(op::ListRooms {}).await
    }
    async fn room_ids(&self) -> Result<Vec<RoomId>, StoreError> {
        self.run(op::RoomIds {}).await
    }
    /// Joins with no options.
    async fn join(&self, room: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        self.join_with(room, visitor, &JoinOptions::default()).await
    }
    async fn join_with(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        options: &JoinOptions,
    ) -> Result<Place, StoreError> {
        let options = options.clone();
        self.run(op::Join {
            room: room.clone(),
            visitor,
            options,
        })
        .await
    }
    async fn status(&self, room: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        self.run(op::Status {
            room: room.clone(),
            visitor,
        })
        .await
    }
    async fn places(
        &self,
        room: &RoomId,
        visitors: &[VisitorId],
    ) -> Result<Vec<Place>, StoreError> {
        let visitors = visitors.to_vec();
        self.run(op::Places {
            room: room.clone(),
            visitors,
        })
        .await
    }
    /// The room's draw as anyone may see it; [`StoreError::NoDraw`]
    /// without `opens_at`.
    async fn draw(&self, room: &RoomId) -> Result<DrawInfo, StoreError> {
        self.room(room).await?.draw.ok_or(StoreError::NoDraw)
    }
    async fn draw_entries(
        &self,
        room: &RoomId,
        after: Option<(DrawKey, EntryId)>,
        limit: usize,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError> {
        self.run(op::DrawEntries {
            room: room.clone(),
            after,
            limit,
        })
        .await
    }
    async fn add_codes(&self, room: &RoomId, group: NewGroup) -> Result<GroupSummary, StoreError> {
        self.run(op::AddCodes {
            room: room.clone(),
            group,
        })
        .await
    }
    async fn code_groups(&self, room: &RoomId) -> Result<Vec<GroupSummary>, StoreError> {
        self.run(op::CodeGroups { room: room.clone() }).await
    }
    async fn remove_codes(&self, room: &RoomId, group: &str) -> Result<(), StoreError> {
        let group = group.to_string();
        self.run(op::RemoveCodes {
            room: room.clone(),
            group,
        })
        .await
    }
    async fn user_of(
        &self,
        room: &RoomId,
        visitor: VisitorId,
    ) -> Result<Option<String>, StoreError> {
        self.run(op::UserOf {
            room: room.clone(),
            visitor,
        })
        .await
    }
    async fn leave(&self, room: &RoomId, visitor: VisitorId) -> Result<(), StoreError> {
        self.run(op::Leave {
            room: room.clone(),
            visitor,
        })
        .await
    }
    async fn arrive(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        pass_exp_s: u64,
    ) -> Result<Place, StoreError> {
        self.run(op::Arrive {
            room: room.clone(),
            visitor,
            pass_exp_s,
        })
        .await
    }
    async fn resume_arrivals(&self, room: &RoomId, seen: Option<u64>) -> Result<u64, StoreError> {
        self.run(op::ResumeArrivals {
            room: room.clone(),
            seen,
        })
        .await
    }
    async fn revoke_pass(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        pass_exp_s: Option<u64>,
        why: PassTakenBack,
    ) -> Result<bool, StoreError> {
        self.run(op::RevokePass {
            room: room.clone(),
            visitor,
            pass_exp_s,
            why,
        })
        .await
    }
    async fn touch(&self, room: &RoomId, visitors: &[VisitorId]) -> Result<(), StoreError> {
        let visitors = visitors.to_vec();
        self.run(op::Touch {
            room: room.clone(),
            visitors,
        })
        .await
    }
    async fn tick(&self, room: &RoomId) -> Result<Tick, StoreError> {
        self.run(op::TickIfDue { room: room.clone() }).await
    }
    async fn announce_stock(&self, room: &RoomId, stock: Stock) -> Result<(), StoreError> {
        self.run(op::AnnounceStock {
            room: room.clone(),
            stock,
        })
        .await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.run(op::Ping {}).await
    }
    async fn end_admin_session(&self, session: &str, until: Millis) -> Result<(), StoreError> {
        let session = session.to_string();
        self.run(op::EndAdminSession { session, until }).await
    }
    async fn admin_session_ended(&self, session: &str) -> Result<bool, StoreError> {
        let session = session.to_string();
        self.run(op::AdminSessionEnded { session }).await
    }
    async fn login_attempt(&self, block: &ClientBlock, attempt: Attempt) -> Result<(), StoreError> {
        self.run(op::LoginAttempt {
            block: *block,
            attempt,
        })
        .await
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

/// Gives up a visitor's place or pass (`Store::leave`), then their holds:
/// with the pass gone they could never confirm them, so the stock goes back
/// at once instead of when the holds expire.
pub async fn give_up(
    rooms: &dyn Store,
    sales: &dyn SaleStore,
    room: &RoomId,
    visitor: VisitorId,
) -> Result<(), StoreError> {
    rooms.leave(room, visitor).await?;
    release_holds(sales, room, visitor).await
}

/// Takes back a visitor's pass (`Store::revoke_pass`) and, if one was
/// taken, their holds with it. Whether a pass was taken.
pub async fn take_back_pass(
    rooms: &dyn Store,
    sales: &dyn SaleStore,
    room: &RoomId,
    visitor: VisitorId,
    pass_exp_s: Option<u64>,
    why: PassTakenBack,
) -> Result<bool, StoreError> {
    let taken = rooms.revoke_pass(room, visitor, pass_exp_s, why).await?;
    if taken {
        release_holds(sales, room, visitor).await?;
    }
    Ok(taken)
}

/// A claim made while the pass was being taken back may still land after
/// this: it holds only until its own expiry.
async fn release_holds(
    sales: &dyn SaleStore,
    room: &RoomId,
    visitor: VisitorId,
) -> Result<(), StoreError> {
    match sales.release_holds_of(room, visitor).await {
        Ok(0) | Err(SaleError::NoSale) => Ok(()),
        Ok(released) => {
            tracing::info!(%room, %visitor, released, "holds given back with the pass");
            Ok(())
        }
        Err(SaleError::Unavailable(reason)) => Err(StoreError::Unavailable(reason)),
        Err(other) => Err(StoreError::Unexpected(other.to_string())),
    }
}

/// Why a sale could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetUpSaleError {
    #[error(transparent)]
    Room(#[from] StoreError),
    #[error(transparent)]
    Sale(#[from] SaleError),
}

/// Sets up (or replaces, claims and all) the sale of a room that exists.
pub async fn set_up_sale(
    rooms: &dyn Store,
    sales: &dyn SaleStore,
    room: &RoomId,
    config: SaleConfig,
) -> Result<SaleView, SetUpSaleError> {
    rooms.room(room).await?;
    let view = sales.configure_sale(room, config).await?;
    rooms.announce_stock(room, sales.stock(room).await?).await?;
    tracing::info!(%room, kind = <&str>::from(view.kind), stock_left = view.stock_left, "sale set up");
    Ok(view)
}
