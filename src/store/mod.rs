//! Stores: the boundary every store implements (one method per operation,
//! each one atomic step: one critical section in memory, one Lua script on
//! Redis), and the two stores, memory and Redis.

pub mod measured;
pub mod memory;
pub mod redis;
mod sale;

pub use sale::SaleStore;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::words::clock::Millis;
use crate::words::codes::{GroupSummary, NewGroup};
use crate::words::draw::{DrawInfo, DrawKey, EntryId};
use crate::words::join_limit::ClientBlock;
use crate::words::login_limit::Attempt;
pub use crate::words::operations::{JoinOptions, RoomFigures, StoreError, Tick, TickReport};
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
    async fn create_room(&self, id: RoomId, config: RoomConfig) -> Result<RoomInfo, StoreError>;
    async fn configure(&self, id: &RoomId, patch: ConfigPatch) -> Result<RoomInfo, StoreError>;
    /// Applies a table of the rooms file, in one atomic step: a room
    /// missing (or closed under another table) is created from it; an open
    /// room under another table (or none) takes the fields it names, as
    /// `configure` would; a room whose last table was this one is left as
    /// it is, open or closed. However many nodes apply it at once, it is
    /// applied once.
    async fn apply_table(&self, table: &RoomTable) -> Result<Applied, StoreError>;
    /// Closes a room: every visitor's state becomes `closed`.
    async fn close_room(&self, id: &RoomId) -> Result<(), StoreError>;
    /// An open room with its live stats.
    async fn room(&self, id: &RoomId) -> Result<RoomInfo, StoreError>;
    async fn rooms(&self) -> Result<Vec<RoomInfo>, StoreError>;
    /// Ids of the open rooms, for the promoter.
    async fn room_ids(&self) -> Result<Vec<RoomId>, StoreError>;

    /// Joins, or returns the visitor's existing place: idempotent per visitor.
    async fn join(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        self.join_with(id, visitor, &JoinOptions::default()).await
    }
    /// `join`, with options; the limit is checked in the same atomic step.
    async fn join_with(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        options: &JoinOptions,
    ) -> Result<Place, StoreError>;
    /// The visitor's place now; counts as a sign of presence.
    async fn status(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError>;
    /// Several visitors' places, in their order, each read as `status`
    /// reads one, in one atomic step: what a node reads for a batch of its
    /// sockets when it must read them all (the draw's positions, a resync).
    async fn places(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<Vec<Place>, StoreError> {
        let mut places = Vec::with_capacity(visitors.len());
        for visitor in visitors {
            places.push(self.status(id, *visitor).await?);
        }
        Ok(places)
    }
    /// The room's draw as anyone may see it; [`StoreError::NoDraw`]
    /// without `opens_at`.
    async fn draw(&self, id: &RoomId) -> Result<DrawInfo, StoreError> {
        self.room(id).await?.draw.ok_or(StoreError::NoDraw)
    }
    /// Up to `limit` entrants after `after`, in drawn order;
    /// [`StoreError::NotDrawn`] before the opening.
    async fn draw_entries(
        &self,
        id: &RoomId,
        after: Option<(DrawKey, EntryId)>,
        limit: usize,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError>;
    /// Adds a group of priority codes to an open room; `GroupExists` if
    /// one of that name is there.
    async fn add_codes(&self, id: &RoomId, group: NewGroup) -> Result<GroupSummary, StoreError>;
    /// The room's groups of codes, by name (never the codes).
    async fn code_groups(&self, id: &RoomId) -> Result<Vec<GroupSummary>, StoreError>;
    /// Removes a group: its unused codes stop working at once;
    /// `GroupNotFound` if there is none of that name.
    async fn remove_codes(&self, id: &RoomId, group: &str) -> Result<(), StoreError>;
    /// The user (a user token's `sub`) whose place this visitor holds, if
    /// the visitor joined with one: their sale's limit counts per user.
    async fn user_of(&self, id: &RoomId, visitor: VisitorId) -> Result<Option<String>, StoreError>;
    /// Gives up the place or the admitted slot.
    async fn leave(&self, id: &RoomId, visitor: VisitorId) -> Result<(), StoreError>;
    /// The visitor's place, read for `/api/verify` (or the sale) checking
    /// their pass: an admitted visitor has arrived, so their pass is no
    /// longer reclaimed as a no-show.
    async fn arrive(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError>;
    /// Arrivals could not be recorded for a while (the store was
    /// unreachable, so `/api/verify` let passes through on their signature
    /// alone): every admitted visitor not seen yet gets the room's whole
    /// `arrival_grace_s` again, counted from now (a later deadline stays),
    /// so nobody who arrived meanwhile is reclaimed as a no-show, and the
    /// room's count of resumptions goes up. Unless it went up since `seen`
    /// (the count the caller last saw in a tick): then another node resumed
    /// after the same outage, and nothing changes. Returns the count. One
    /// bounded step however many passes wait: the new deadline is written
    /// once, and the tick's no-show sweep moves each arrival to it, a slice
    /// a call.
    async fn resume_arrivals(&self, id: &RoomId, seen: Option<u64>) -> Result<u64, StoreError>;
    /// Takes back the visitor's pass (only the admission whose pass has
    /// this `exp`, in seconds, if given); its slot is free at once, and a
    /// waiting place is left alone. Whether a pass was taken back.
    async fn revoke_pass(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        pass_exp_s: Option<u64>,
    ) -> Result<bool, StoreError>;
    /// Marks these visitors present (they hold a socket on some node).
    async fn touch(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<(), StoreError>;
    /// Runs the room's tick if one is due at the store's time, and says when
    /// the next is due. Safe to call from every node at once: a due tick
    /// runs once. A closed room answers `RoomClosed`.
    async fn tick(&self, id: &RoomId) -> Result<Tick, StoreError>;

    /// Tells the room's line what its sale has left (`stock_left` in every
    /// status); a sale sold out closes the line if the room says so. Every
    /// node's sockets hear it. Called by whichever node's tick ran.
    async fn announce_stock(&self, id: &RoomId, stock: Stock) -> Result<(), StoreError>;

    /// Every room's events, on this node.
    fn subscribe(&self) -> broadcast::Receiver<StoreEvent>;
    /// Makes sure this node hears `room`'s events (on a cluster, sharded
    /// channels are subscribed one by one); call before reading a place.
    async fn watch(&self, _room: &RoomId) -> Result<(), StoreError> {
        Ok(())
    }
    /// Is the store reachable?
    async fn ping(&self) -> Result<(), StoreError>;

    /// Ends an operator session on every node (logout), remembered until
    /// `until`, when the session would have ended anyway.
    async fn end_admin_session(&self, id: &str, until: Millis) -> Result<(), StoreError>;
    /// Was this operator session ended?
    async fn admin_session_ended(&self, id: &str) -> Result<bool, StoreError>;
    /// Counts an operator login attempt from `block` (an admin or origin
    /// token, on the API or the login form) against the lockout of
    /// `words::login_limit`, in one atomic step: a wrong token spends one
    /// of the block's 10 a minute; past them every attempt, the right
    /// token included, is refused with [`StoreError::TooManyAttempts`]
    /// until the budget has room. On Redis one budget for every node; the
    /// memory store, one node, counts its own.
    async fn login_attempt(&self, block: &ClientBlock, attempt: Attempt) -> Result<(), StoreError>;
}

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
) -> Result<bool, StoreError> {
    let taken = rooms.revoke_pass(room, visitor, pass_exp_s).await?;
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
