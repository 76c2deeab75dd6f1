//! The boundary every store implements for the sale: one method that runs
//! any of the sale's operations (`words::op::SaleOp`), each one atomic step.

use async_trait::async_trait;

use crate::words::op::{self, Operation, SaleAnswer, SaleOp};
use crate::words::sale::{Claim, SaleConfig, SaleError, SaleView, Stock, Want};
use crate::words::{RoomId, VisitorId};

#[async_trait]
pub trait SaleStore: Send + Sync + 'static {
    /// Runs one of the sale's operations as one atomic step; call it
    /// through [`SaleStoreExt::run`], which keeps the answer typed.
    async fn apply(&self, op: SaleOp) -> Result<SaleAnswer, SaleError>;
}

/// Any sale store's operations, typed: `run` takes every operation; the
/// rest are the calls made most, spelt short.
#[async_trait]
pub trait SaleStoreExt: SaleStore {
    /// Runs `op` and answers with its own type.
    async fn run<O>(&self, op: O) -> Result<O::Answer, SaleError>
    where
        O: Operation<Any = SaleOp, AnyAnswer = SaleAnswer, Error = SaleError>,
    {
        let answer = self.apply(op.into()).await?;
        O::answer(answer).ok_or_else(|| {
            SaleError::Unavailable(format!(
                "the store answered another operation than {}",
                O::NAME
            ))
        })
    }

    async fn configure_sale(
        &self,
        room: &RoomId,
        config: SaleConfig,
    ) -> Result<SaleView, SaleError> {
        self.run(op::ConfigureSale {
            room: room.clone(),
            config,
        })
        .await
    }
    async fn sale(&self, room: &RoomId) -> Result<SaleView, SaleError> {
        self.run(op::ReadSale { room: room.clone() }).await
    }
    async fn stock(&self, room: &RoomId) -> Result<Stock, SaleError> {
        self.run(op::ReadStock { room: room.clone() }).await
    }
    /// A claim of a visitor who holds no user's place.
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
    async fn claim_as(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        user: Option<&str>,
        want: &Want,
        idempotency_key: Option<&str>,
    ) -> Result<Claim, SaleError> {
        self.run(op::MakeClaim {
            room: room.clone(),
            visitor,
            user: user.map(str::to_string),
            want: want.clone(),
            idempotency_key: idempotency_key.map(str::to_string),
        })
        .await
    }
    async fn confirm(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<Claim, SaleError> {
        let claim_id = claim_id.to_string();
        self.run(op::ConfirmClaim {
            room: room.clone(),
            visitor,
            claim_id,
        })
        .await
    }
    async fn release(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<(), SaleError> {
        let claim_id = claim_id.to_string();
        self.run(op::ReleaseClaim {
            room: room.clone(),
            visitor,
            claim_id,
        })
        .await
    }
    async fn release_holds_of(&self, room: &RoomId, visitor: VisitorId) -> Result<u64, SaleError> {
        self.run(op::ReleaseHoldsOf {
            room: room.clone(),
            visitor,
        })
        .await
    }
    async fn claims_of(&self, room: &RoomId, visitor: VisitorId) -> Result<Vec<Claim>, SaleError> {
        self.run(op::ClaimsOf {
            room: room.clone(),
            visitor,
        })
        .await
    }
    async fn orders(&self, room: &RoomId) -> Result<Vec<Claim>, SaleError> {
        self.run(op::Orders { room: room.clone() }).await
    }
}

impl<S: SaleStore + ?Sized> SaleStoreExt for S {}
