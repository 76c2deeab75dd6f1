//! The boundary every store implements for the sale: one method per
//! operation, each one atomic step.

use async_trait::async_trait;

use crate::words::sale::{Claim, SaleConfig, SaleError, SaleView, Stock, Want};
use crate::words::{RoomId, VisitorId};

#[async_trait]
pub trait SaleStore: Send + Sync + 'static {
    /// Sets up (or replaces, claims and all) the room's sale.
    async fn configure_sale(
        &self,
        room: &RoomId,
        config: SaleConfig,
    ) -> Result<SaleView, SaleError>;
    async fn sale(&self, room: &RoomId) -> Result<SaleView, SaleError>;
    /// What is free and how many holds are out, for the room's line.
    async fn stock(&self, room: &RoomId) -> Result<Stock, SaleError>;
    /// One atomic step: the per-user limit, the stock or every seat, the hold.
    /// A repeated `idempotency_key` of the same visitor returns the first result.
    async fn claim(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        want: &Want,
        idempotency_key: Option<&str>,
    ) -> Result<Claim, SaleError> {
        self.claim_as(room, visitor, None, want, idempotency_key)
            .await
    }
    /// `claim` by a visitor whose place is `user`'s (their pass came from a
    /// user token): the limit counts that user's units of every visit and
    /// device (`Buyer`), in the same atomic step.
    async fn claim_as(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        user: Option<&str>,
        want: &Want,
        idempotency_key: Option<&str>,
    ) -> Result<Claim, SaleError>;
    async fn confirm(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<Claim, SaleError>;
    async fn release(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<(), SaleError>;
    /// Gives every hold of the visitor back to stock (their pass was taken
    /// back, so they can no longer confirm it); how many. Orders stay.
    async fn release_holds_of(&self, room: &RoomId, visitor: VisitorId) -> Result<u64, SaleError>;
    /// The visitor's held and confirmed claims.
    async fn claims_of(&self, room: &RoomId, visitor: VisitorId) -> Result<Vec<Claim>, SaleError>;
    /// Confirmed claims in order of confirmation.
    async fn orders(&self, room: &RoomId) -> Result<Vec<Claim>, SaleError>;
}
