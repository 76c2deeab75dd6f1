//! Every store call, measured alike on every store: how long each
//! operation took (`waitroom_store_op_seconds{store, op}`), whether the
//! store answered at all (`waitroom_store_up{store}`), and the answers no
//! version of a store gives (`waitroom_store_errors_total{kind="unexpected"}`;
//! the Redis store counts its outages itself, by kind, where it can tell a
//! timeout from a lost connection: see `redis::connection::unavailable`).
//!
//! A wrapper rather than a timer in each store, so that the two stores are
//! measured the same way (the whole call, waits included) and a third would
//! be too. Labels are the store's name and the method's: a bounded set.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::{JoinOptions, SaleStore, Store, StoreError, Tick};
use crate::words::clock::Millis;
use crate::words::codes::{GroupSummary, NewGroup};
use crate::words::draw::{DrawInfo, DrawKey, EntryId};
use crate::words::join_limit::ClientBlock;
use crate::words::login_limit::Attempt;
use crate::words::room_table::{Applied, RoomTable};
use crate::words::sale::{Claim, SaleConfig, SaleError, SaleView, Stock, Want};
use crate::words::{ConfigPatch, Place, RoomConfig, RoomId, RoomInfo, StoreEvent, VisitorId};

/// The metric every store's failures are counted in, by `store` and `kind`.
pub const STORE_ERRORS: &str = "waitroom_store_errors_total";
const OP_SECONDS: &str = "waitroom_store_op_seconds";
const UP: &str = "waitroom_store_up";

/// How a call ended, as the metrics see it.
enum Outcome {
    /// The store answered (a refusal is an answer).
    Answered,
    /// The store could not be reached or did not answer in time.
    Unavailable,
    /// An answer no version of the store gives.
    Unexpected,
}

trait Judged {
    fn outcome(&self) -> Outcome;
}

impl<T> Judged for Result<T, StoreError> {
    fn outcome(&self) -> Outcome {
        match self {
            Err(StoreError::Unavailable(_)) => Outcome::Unavailable,
            Err(StoreError::Unexpected(_)) => Outcome::Unexpected,
            _ => Outcome::Answered,
        }
    }
}

impl<T> Judged for Result<T, SaleError> {
    fn outcome(&self) -> Outcome {
        match self {
            Err(SaleError::Unavailable(_)) => Outcome::Unavailable,
            _ => Outcome::Answered,
        }
    }
}

/// Times `call` as `op` on the store called `store` and notes its outcome.
async fn measure<R: Judged>(
    store: &'static str,
    op: &'static str,
    call: impl Future<Output = R>,
) -> R {
    let started = Instant::now();
    let answer = call.await;
    metrics::histogram!(OP_SECONDS, "store" => store, "op" => op)
        .record(started.elapsed().as_secs_f64());
    match answer.outcome() {
        Outcome::Answered => metrics::gauge!(UP, "store" => store).set(1.0),
        Outcome::Unavailable => metrics::gauge!(UP, "store" => store).set(0.0),
        Outcome::Unexpected => {
            metrics::gauge!(UP, "store" => store).set(1.0);
            metrics::counter!(STORE_ERRORS, "store" => store, "kind" => "unexpected").increment(1);
        }
    }
    answer
}

/// Registers the error counter of each `kinds` at zero, so that an alert on
/// its increase sees the first error too (a series that appears at 1 has
/// no increase to show).
fn register_error_kinds(store: &'static str, kinds: &[&'static str]) {
    for kind in kinds {
        metrics::counter!(STORE_ERRORS, "store" => store, "kind" => *kind).increment(0);
    }
}

/// A store whose every call is measured (see the module's documentation).
pub struct Measured<S: ?Sized> {
    inner: Arc<S>,
    name: &'static str,
}

impl Measured<dyn Store> {
    pub fn store(inner: Arc<dyn Store>) -> Arc<dyn Store> {
        let name = inner.name();
        register_error_kinds(name, inner.failure_kinds());
        register_error_kinds(name, &["unexpected"]);
        metrics::gauge!(UP, "store" => name).set(1.0);
        Arc::new(Self { inner, name })
    }
}

impl Measured<dyn SaleStore> {
    /// `name`: the admission store's, as the sale lives in the same store.
    pub fn sale(inner: Arc<dyn SaleStore>, name: &'static str) -> Arc<dyn SaleStore> {
        Arc::new(Self { inner, name })
    }
}

#[async_trait]
impl Store for Measured<dyn Store> {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn create_room(&self, id: RoomId, config: RoomConfig) -> Result<RoomInfo, StoreError> {
        measure(self.name, "create_room", self.inner.create_room(id, config)).await
    }

    async fn configure(&self, id: &RoomId, patch: ConfigPatch) -> Result<RoomInfo, StoreError> {
        measure(self.name, "configure", self.inner.configure(id, patch)).await
    }

    async fn apply_table(&self, table: &RoomTable) -> Result<Applied, StoreError> {
        measure(self.name, "apply_table", self.inner.apply_table(table)).await
    }

    async fn close_room(&self, id: &RoomId) -> Result<(), StoreError> {
        measure(self.name, "close_room", self.inner.close_room(id)).await
    }

    async fn room(&self, id: &RoomId) -> Result<RoomInfo, StoreError> {
        measure(self.name, "room", self.inner.room(id)).await
    }

    async fn rooms(&self) -> Result<Vec<RoomInfo>, StoreError> {
        measure(self.name, "rooms", self.inner.rooms()).await
    }

    async fn room_ids(&self) -> Result<Vec<RoomId>, StoreError> {
        measure(self.name, "room_ids", self.inner.room_ids()).await
    }

    async fn join(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        measure(self.name, "join", self.inner.join(id, visitor)).await
    }

    async fn join_with(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        options: &JoinOptions,
    ) -> Result<Place, StoreError> {
        measure(
            self.name,
            "join",
            self.inner.join_with(id, visitor, options),
        )
        .await
    }

    async fn status(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        measure(self.name, "status", self.inner.status(id, visitor)).await
    }

    async fn places(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<Vec<Place>, StoreError> {
        measure(self.name, "places", self.inner.places(id, visitors)).await
    }

    async fn draw(&self, id: &RoomId) -> Result<DrawInfo, StoreError> {
        measure(self.name, "draw", self.inner.draw(id)).await
    }

    async fn draw_entries(
        &self,
        id: &RoomId,
        after: Option<(DrawKey, EntryId)>,
        limit: usize,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError> {
        measure(
            self.name,
            "draw_entries",
            self.inner.draw_entries(id, after, limit),
        )
        .await
    }

    async fn add_codes(&self, id: &RoomId, group: NewGroup) -> Result<GroupSummary, StoreError> {
        measure(self.name, "add_codes", self.inner.add_codes(id, group)).await
    }

    async fn code_groups(&self, id: &RoomId) -> Result<Vec<GroupSummary>, StoreError> {
        measure(self.name, "code_groups", self.inner.code_groups(id)).await
    }

    async fn remove_codes(&self, id: &RoomId, group: &str) -> Result<(), StoreError> {
        measure(
            self.name,
            "remove_codes",
            self.inner.remove_codes(id, group),
        )
        .await
    }

    async fn user_of(&self, id: &RoomId, visitor: VisitorId) -> Result<Option<String>, StoreError> {
        measure(self.name, "user_of", self.inner.user_of(id, visitor)).await
    }

    async fn leave(&self, id: &RoomId, visitor: VisitorId) -> Result<(), StoreError> {
        measure(self.name, "leave", self.inner.leave(id, visitor)).await
    }

    async fn arrive(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        measure(self.name, "arrive", self.inner.arrive(id, visitor)).await
    }

    async fn resume_arrivals(&self, id: &RoomId, seen: Option<u64>) -> Result<u64, StoreError> {
        measure(
            self.name,
            "resume_arrivals",
            self.inner.resume_arrivals(id, seen),
        )
        .await
    }

    async fn revoke_pass(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        pass_exp_s: Option<u64>,
    ) -> Result<bool, StoreError> {
        measure(
            self.name,
            "revoke_pass",
            self.inner.revoke_pass(id, visitor, pass_exp_s),
        )
        .await
    }

    async fn touch(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<(), StoreError> {
        measure(self.name, "touch", self.inner.touch(id, visitors)).await
    }

    async fn tick(&self, id: &RoomId) -> Result<Tick, StoreError> {
        measure(self.name, "tick", self.inner.tick(id)).await
    }

    async fn announce_stock(&self, id: &RoomId, stock: Stock) -> Result<(), StoreError> {
        measure(
            self.name,
            "announce_stock",
            self.inner.announce_stock(id, stock),
        )
        .await
    }

    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.inner.subscribe()
    }

    async fn watch(&self, room: &RoomId) -> Result<(), StoreError> {
        measure(self.name, "watch", self.inner.watch(room)).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        measure(self.name, "ping", self.inner.ping()).await
    }

    async fn end_admin_session(&self, id: &str, until: Millis) -> Result<(), StoreError> {
        measure(
            self.name,
            "end_admin_session",
            self.inner.end_admin_session(id, until),
        )
        .await
    }

    async fn admin_session_ended(&self, id: &str) -> Result<bool, StoreError> {
        measure(
            self.name,
            "admin_session_ended",
            self.inner.admin_session_ended(id),
        )
        .await
    }

    async fn login_attempt(&self, block: &ClientBlock, attempt: Attempt) -> Result<(), StoreError> {
        measure(
            self.name,
            "login_attempt",
            self.inner.login_attempt(block, attempt),
        )
        .await
    }
}

#[async_trait]
impl SaleStore for Measured<dyn SaleStore> {
    async fn configure_sale(
        &self,
        room: &RoomId,
        config: SaleConfig,
    ) -> Result<SaleView, SaleError> {
        measure(
            self.name,
            "sale_configure",
            self.inner.configure_sale(room, config),
        )
        .await
    }

    async fn sale(&self, room: &RoomId) -> Result<SaleView, SaleError> {
        measure(self.name, "sale_view", self.inner.sale(room)).await
    }

    async fn stock(&self, room: &RoomId) -> Result<Stock, SaleError> {
        measure(self.name, "sale_stock", self.inner.stock(room)).await
    }

    async fn claim(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        want: &Want,
        idempotency_key: Option<&str>,
    ) -> Result<Claim, SaleError> {
        measure(
            self.name,
            "sale_claim",
            self.inner.claim(room, visitor, want, idempotency_key),
        )
        .await
    }

    async fn claim_as(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        user: Option<&str>,
        want: &Want,
        idempotency_key: Option<&str>,
    ) -> Result<Claim, SaleError> {
        measure(
            self.name,
            "sale_claim",
            self.inner
                .claim_as(room, visitor, user, want, idempotency_key),
        )
        .await
    }

    async fn confirm(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<Claim, SaleError> {
        measure(
            self.name,
            "sale_confirm",
            self.inner.confirm(room, visitor, claim_id),
        )
        .await
    }

    async fn release(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<(), SaleError> {
        measure(
            self.name,
            "sale_release",
            self.inner.release(room, visitor, claim_id),
        )
        .await
    }

    async fn release_holds_of(&self, room: &RoomId, visitor: VisitorId) -> Result<u64, SaleError> {
        measure(
            self.name,
            "sale_release_holds",
            self.inner.release_holds_of(room, visitor),
        )
        .await
    }

    async fn claims_of(&self, room: &RoomId, visitor: VisitorId) -> Result<Vec<Claim>, SaleError> {
        measure(self.name, "sale_mine", self.inner.claims_of(room, visitor)).await
    }

    async fn orders(&self, room: &RoomId) -> Result<Vec<Claim>, SaleError> {
        measure(self.name, "sale_orders", self.inner.orders(room)).await
    }
}
