//! The sale on Redis: one Lua script per operation (`lua/sale_*.lua`) on the
//! room's sale keys, under the same hash tag as the rest of the room. Confirmed
//! orders are appended to the Redis Stream `wr:{room}:orders`.

use std::sync::LazyLock;

use async_trait::async_trait;
use redis::{RedisError, Script, Value};

use super::admission::{RedisStore, number, text};
use super::connection::Effect;
use super::keys::sale_keys;
use super::script_error::ScriptError;
use crate::store::SaleStore;
use crate::words::sale::{
    Buyer, Claim, ClaimState, Inventory, SaleConfig, SaleError, SaleView, SeatState, Stock, Want,
    new_claim_id,
};
use crate::words::{RoomId, VisitorId};

macro_rules! sale_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../../../lua/sale_lib.lua"),
                "\n",
                include_str!(concat!("../../../lua/", $file))
            ))
        })
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
        Some(ScriptError::WrongKind(kind)) if kind == "seats" => {
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
        None => SaleError::Unavailable(error.to_string()),
    }
}

/// `{ id, visitor, state, quantity, seats, sequence, hold_expires_at, confirmed_at }`.
fn parse_claim(reply: &[Value]) -> Option<Claim> {
    let [
        id,
        visitor,
        state,
        quantity,
        seats,
        sequence,
        expires,
        confirmed,
    ] = reply
    else {
        return None;
    };
    let seats = text(seats)?;
    Some(Claim {
        claim_id: text(id)?,
        visitor: text(visitor)?.parse::<VisitorId>().ok()?,
        state: ClaimState::parse(&text(state)?)?,
        quantity: number(quantity)?,
        seats: seats
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        sequence: number(sequence)?,
        hold_expires_at: number(expires)?,
        confirmed_at: text(confirmed).and_then(|c| c.parse().ok()),
    })
}

fn unreadable() -> SaleError {
    SaleError::Unavailable("unexpected reply from a sale script".into())
}

#[async_trait]
impl SaleStore for RedisStore {
    async fn configure_sale(
        &self,
        room: &RoomId,
        config: SaleConfig,
    ) -> Result<SaleView, SaleError> {
        let (kind, stock, seats) = match &config.inventory {
            Inventory::Stock(n) => ("stock", *n, Vec::new()),
            Inventory::Seats(seats) => ("seats", 0, seats.clone()),
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

    async fn stock(&self, room: &RoomId) -> Result<Stock, SaleError> {
        let reply: Vec<u64> = self
            .eval(&STOCK, &sale_keys(room), Effect::Reads, [])
            .await
            .map_err(sale_error)?;
        let &[left, held] = reply.as_slice() else {
            return Err(unreadable());
        };
        Ok(Stock { left, held })
    }

    async fn sale(&self, room: &RoomId) -> Result<SaleView, SaleError> {
        let reply: Vec<Value> = self
            .eval(&VIEW, &sale_keys(room), Effect::Reads, [])
            .await
            .map_err(sale_error)?;
        let (head, seats) = reply.split_at(4.min(reply.len()));
        let [kind, stock_left, per_user_limit, hold_ttl_s] = head else {
            return Err(unreadable());
        };
        let seats: std::collections::BTreeMap<String, SeatState> = seats
            .chunks(2)
            .filter_map(|pair| {
                let state = match text(pair.get(1)?)?.get(..1) {
                    None => SeatState::Free,
                    Some("s") => SeatState::Sold,
                    Some(_) => SeatState::Held,
                };
                Some((text(&pair[0])?, state))
            })
            .collect();
        let kind = if text(kind).as_deref() == Some("seats") {
            "seats"
        } else {
            "stock"
        };
        let stock_left = if kind == "seats" {
            seats.values().filter(|s| **s == SeatState::Free).count() as u64
        } else {
            number(stock_left).ok_or_else(unreadable)?
        };
        Ok(SaleView {
            kind,
            stock_left,
            seats,
            per_user_limit: number(per_user_limit).ok_or_else(unreadable)? as u32,
            hold_ttl_s: number(hold_ttl_s).ok_or_else(unreadable)?,
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
        let (wants, seats) = match want {
            Want::Quantity(_) => ("quantity", Vec::new()),
            Want::Seats(seats) => ("seats", seats.clone()),
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
        let reply: Vec<Value> = self
            .eval(&CLAIM, &sale_keys(room), Effect::Writes, args)
            .await
            .map_err(sale_error)?;
        parse_claim(&reply).ok_or_else(unreadable)
    }

    async fn confirm(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<Claim, SaleError> {
        let args = [visitor.to_string(), claim_id.to_string()];
        let reply: Vec<Value> = self
            .eval(&CONFIRM, &sale_keys(room), Effect::Writes, args)
            .await
            .map_err(sale_error)?;
        parse_claim(&reply).ok_or_else(unreadable)
    }

    async fn release(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<(), SaleError> {
        let args = [visitor.to_string(), claim_id.to_string()];
        let _: Value = self
            .eval(&RELEASE, &sale_keys(room), Effect::Writes, args)
            .await
            .map_err(sale_error)?;
        Ok(())
    }

    async fn release_holds_of(&self, room: &RoomId, visitor: VisitorId) -> Result<u64, SaleError> {
        self.eval(
            &RELEASE_HOLDS,
            &sale_keys(room),
            Effect::Writes,
            [visitor.to_string()],
        )
        .await
        .map_err(sale_error)
    }

    async fn claims_of(&self, room: &RoomId, visitor: VisitorId) -> Result<Vec<Claim>, SaleError> {
        let reply: Vec<Vec<Value>> = self
            .eval(
                &MINE,
                &sale_keys(room),
                Effect::Reads,
                [visitor.to_string()],
            )
            .await
            .map_err(sale_error)?;
        reply
            .iter()
            .map(|c| parse_claim(c).ok_or_else(unreadable))
            .collect()
    }

    async fn orders(&self, room: &RoomId) -> Result<Vec<Claim>, SaleError> {
        let reply: Vec<Vec<Value>> = self
            .eval(&ORDERS, &sale_keys(room), Effect::Reads, [])
            .await
            .map_err(sale_error)?;
        reply
            .iter()
            .map(|c| parse_claim(c).ok_or_else(unreadable))
            .collect()
    }
}
