//! The sale on Redis: one Lua script per operation (`lua/sale_*.lua`) on the
//! room's sale keys, under the same hash tag as the rest of the room. Confirmed
//! orders are appended to the Redis Stream `wr:{room}:orders`.

use std::sync::LazyLock;

use async_trait::async_trait;
use redis::{RedisError, Script, Value};

use super::admission::RedisStore;
use super::connection::Effect;
use super::keys::sale_keys;
use super::prelude::{WANTS, sale_script};
use super::replies::{WireClaim, WireSale, read, read_list};
use super::script_error::ScriptError;
use crate::store::{SaleStore, SaleStoreExt};
use crate::words::op::{self, Handle, SaleAnswer, SaleOp};
use crate::words::sale::{
    Buyer, Claim, Inventory, SaleError, SaleKind, SaleView, SeatState, Stock, Want, new_claim_id,
};

/// A sale script from `lua/` (see `prelude::sale_script`).
macro_rules! sale_script {
    ($file:literal) => {
        LazyLock::new(|| sale_script(include_str!(concat!("../../../lua/", $file))))
    };
}

static CONFIGURE: LazyLock<Script> = sale_script!("sale_configure.lua");
static VIEW: LazyLock<Script> = sale_script!("sale_view.lua");
static STOCK: LazyLock<Script> = sale_script!("sale_stock.lua");
static CLAIM: LazyLock<Script> = sale_script!("sale_claim.lua");
static CONFIRM: LazyLock<Script> = sale_script!("sale_confirm.lua");
static RELEASE: LazyLock<Script> = sale_script!("sale_release.lua");
static MINE: LazyLock<Script> = sale_script!("sale_mine.lua");
static RELEASE_HOLDS: LazyLock<Script> = sale_script!("sale_release_holds.lua");
static ORDERS: LazyLock<Script> = sale_script!("sale_orders.lua");

/// Maps the scripts' error replies (`CODE detail`) onto sale errors.
fn sale_error(error: RedisError) -> SaleError {
    match ScriptError::of(&error) {
        Some(ScriptError::NoSale) => SaleError::NoSale,
        Some(ScriptError::SoldOut) => SaleError::SoldOut,
        Some(ScriptError::SeatTaken(seat)) => SaleError::SeatTaken(seat),
        Some(ScriptError::UnknownSeat(seat)) => SaleError::UnknownSeat(seat),
        Some(ScriptError::Limit(limit)) => SaleError::LimitReached(limit),
        Some(ScriptError::WrongKind(kind)) if kind == <&str>::from(SaleKind::Seats) => {
            SaleError::WrongKind("this sale sells seats: ask for seats")
        }
        Some(ScriptError::WrongKind(_)) => {
            SaleError::WrongKind("this sale sells a quantity: ask for quantity")
        }
        Some(ScriptError::NoClaim) => SaleError::ClaimNotFound,
        Some(ScriptError::Expired) => SaleError::HoldExpired,
        Some(ScriptError::Released) => SaleError::Released,
        Some(ScriptError::Confirmed) => SaleError::AlreadyConfirmed,
        Some(other) => SaleError::Unavailable(format!("unexpected refusal {other:?}")),
        None => {
            super::connection::count_failure(&error);
            SaleError::Unavailable(error.to_string())
        }
    }
}

/// A claim from a script's JSON answer.
fn parse_claim(reply: &str) -> Result<Claim, SaleError> {
    read::<WireClaim>(reply)
        .ok()
        .and_then(WireClaim::into_claim)
        .ok_or_else(unreadable)
}

/// Claims from a script's JSON list.
fn parse_claims(reply: &str) -> Result<Vec<Claim>, SaleError> {
    read_list::<WireClaim>(reply)
        .map_err(|_| unreadable())?
        .into_iter()
        .map(|claim| claim.into_claim().ok_or_else(unreadable))
        .collect()
}

fn unreadable() -> SaleError {
    SaleError::Unavailable("unexpected reply from a sale script".into())
}

#[async_trait]
impl SaleStore for RedisStore {
    async fn apply(&self, op: SaleOp) -> Result<SaleAnswer, SaleError> {
        op.run_on(self).await
    }
}

impl Handle<op::ConfigureSale> for RedisStore {
    async fn handle(
        &self,
        op::ConfigureSale { room, config }: op::ConfigureSale,
    ) -> Result<SaleView, SaleError> {
        let room = &room;
        let (kind, stock, seats): (&str, _, _) = match &config.inventory {
            Inventory::Stock(n) => (SaleKind::Stock.into(), *n, Vec::new()),
            Inventory::Seats(seats) => (SaleKind::Seats.into(), 0, seats.clone()),
        };
        let args = [
            kind.to_string(),
            stock.to_string(),
            config.per_user_limit.to_string(),
            config.hold_ttl_s.to_string(),
        ]
        .into_iter()
        .chain(seats);
        let _: Value = self
            .eval(&CONFIGURE, &sale_keys(room), Effect::Writes, args)
            .await
            .map_err(sale_error)?;
        self.sale(room).await
    }
}

impl Handle<op::ReadStock> for RedisStore {
    async fn handle(&self, op::ReadStock { room }: op::ReadStock) -> Result<Stock, SaleError> {
        let room = &room;
        let reply: Vec<u64> = self
            .eval(&STOCK, &sale_keys(room), Effect::Reads, [])
            .await
            .map_err(sale_error)?;
        let &[left, held, sweep_left] = reply.as_slice() else {
            return Err(unreadable());
        };
        Ok(Stock {
            left,
            held,
            sweep_left: sweep_left == 1,
        })
    }
}

impl Handle<op::ReadSale> for RedisStore {
    async fn handle(&self, op::ReadSale { room }: op::ReadSale) -> Result<SaleView, SaleError> {
        let room = &room;
        let reply: String = self
            .eval(&VIEW, &sale_keys(room), Effect::Reads, [])
            .await
            .map_err(sale_error)?;
        let sale: WireSale = read(&reply).map_err(|_| unreadable())?;
        let seats: std::collections::BTreeMap<String, SeatState> = sale
            .seats
            .into_iter()
            .map(|(seat, state)| {
                let state = match state.get(..1) {
                    None => SeatState::Free,
                    Some("s") => SeatState::Sold,
                    Some(_) => SeatState::Held,
                };
                (seat, state)
            })
            .collect();
        let kind = sale.kind;
        let stock_left = if kind == SaleKind::Seats {
            seats.values().filter(|s| **s == SeatState::Free).count() as u64
        } else {
            sale.stock_left.ok_or_else(unreadable)?
        };
        Ok(SaleView {
            kind,
            stock_left,
            seats,
            per_user_limit: sale.per_user_limit as u32,
            hold_ttl_s: sale.hold_ttl_s,
        })
    }
}

impl Handle<op::MakeClaim> for RedisStore {
    async fn handle(
        &self,
        op::MakeClaim {
            room,
            visitor,
            user,
            want,
            idempotency_key,
        }: op::MakeClaim,
    ) -> Result<Claim, SaleError> {
        let (room, user, want, key) = (&room, user.as_deref(), &want, idempotency_key.as_deref());
        let (wants, seats) = match want {
            Want::Quantity(_) => (WANTS[0], Vec::new()),
            Want::Seats(seats) => (WANTS[1], seats.clone()),
        };
        let args = [
            visitor.to_string(),
            key.unwrap_or_default().to_string(),
            new_claim_id(),
            wants.to_string(),
            want.units().to_string(),
            Buyer::of(visitor, user).key(),
        ]
        .into_iter()
        .chain(seats);
        let reply: String = self
            .eval(&CLAIM, &sale_keys(room), Effect::Writes, args)
            .await
            .map_err(sale_error)?;
        parse_claim(&reply)
    }
}

impl Handle<op::ConfirmClaim> for RedisStore {
    async fn handle(
        &self,
        op::ConfirmClaim {
            room,
            visitor,
            claim_id,
        }: op::ConfirmClaim,
    ) -> Result<Claim, SaleError> {
        let (room, claim_id) = (&room, claim_id.as_str());
        let args = [visitor.to_string(), claim_id.to_string()];
        let reply: String = self
            .eval(&CONFIRM, &sale_keys(room), Effect::Writes, args)
            .await
            .map_err(sale_error)?;
        parse_claim(&reply)
    }
}

impl Handle<op::ReleaseClaim> for RedisStore {
    async fn handle(
        &self,
        op::ReleaseClaim {
            room,
            visitor,
            claim_id,
        }: op::ReleaseClaim,
    ) -> Result<(), SaleError> {
        let (room, claim_id) = (&room, claim_id.as_str());
        let args = [visitor.to_string(), claim_id.to_string()];
        let _: Value = self
            .eval(&RELEASE, &sale_keys(room), Effect::Writes, args)
            .await
            .map_err(sale_error)?;
        Ok(())
    }
}

impl Handle<op::ReleaseHoldsOf> for RedisStore {
    async fn handle(
        &self,
        op::ReleaseHoldsOf { room, visitor }: op::ReleaseHoldsOf,
    ) -> Result<u64, SaleError> {
        let room = &room;
        self.eval(
            &RELEASE_HOLDS,
            &sale_keys(room),
            Effect::Writes,
            [visitor.to_string()],
        )
        .await
        .map_err(sale_error)
    }
}

impl Handle<op::ClaimsOf> for RedisStore {
    async fn handle(
        &self,
        op::ClaimsOf { room, visitor }: op::ClaimsOf,
    ) -> Result<Vec<Claim>, SaleError> {
        let room = &room;
        let reply: String = self
            .eval(
                &MINE,
                &sale_keys(room),
                Effect::Reads,
                [visitor.to_string()],
            )
            .await
            .map_err(sale_error)?;
        parse_claims(&reply)
    }
}

impl Handle<op::Orders> for RedisStore {
    async fn handle(&self, op::Orders { room }: op::Orders) -> Result<Vec<Claim>, SaleError> {
        let room = &room;
        let reply: String = self
            .eval(&ORDERS, &sale_keys(room), Effect::Reads, [])
            .await
            .map_err(sale_error)?;
        parse_claims(&reply)
    }
}
