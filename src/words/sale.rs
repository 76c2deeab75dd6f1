//! The words of the sale: what is for sale, claims and their states, and
//! what can go wrong with a claim. The stores implement `store::SaleStore`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::words::clock::Millis;
use crate::words::clock::rfc3339;
use crate::words::{RoomId, VisitorId, wire_enum};

pub const DEFAULT_PER_USER_LIMIT: u32 = 1;
pub const DEFAULT_HOLD_TTL_S: u64 = 300;
const MAX_SEATS: usize = 10_000;

/// What is for sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inventory {
    /// A number of identical units.
    Stock(u64),
    /// Named seats, each sold once.
    Seats(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleConfig {
    pub inventory: Inventory,
    /// Units (held and confirmed) one visitor may have, or one user (see
    /// [`Buyer`]).
    pub per_user_limit: u32,
    pub hold_ttl_s: u64,
}

/// The operator's `PUT …/sale` body. A field written as `null` reads as absent.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaleRequest {
    pub stock: Option<u64>,
    pub seats: Option<Vec<String>>,
    pub per_user_limit: Option<u32>,
    pub hold_ttl_s: Option<u64>,
}

/// Seat ids are short and plain, so they can be stored and sent as they are.
pub fn valid_seat(seat: &str) -> bool {
    (1..=32).contains(&seat.len())
        && seat
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

impl SaleRequest {
    pub fn into_config(self) -> Result<SaleConfig, String> {
        let inventory = match (self.stock, self.seats) {
            (Some(stock), None) if stock <= 1_000_000_000 => Inventory::Stock(stock),
            (Some(_), None) => return Err("stock must be at most 1000000000".into()),
            (None, Some(seats)) => {
                if seats.is_empty() || seats.len() > MAX_SEATS {
                    return Err(format!("seats must list 1 to {MAX_SEATS} seats"));
                }
                if let Some(bad) = seats.iter().find(|s| !valid_seat(s)) {
                    return Err(format!(
                        "seat {bad:?} is not a valid seat id (1 to 32 of A-Z a-z 0-9 - _ .)"
                    ));
                }
                let mut unique = seats.clone();
                unique.sort();
                unique.dedup();
                if unique.len() != seats.len() {
                    return Err("seats must not repeat".into());
                }
                Inventory::Seats(seats)
            }
            _ => return Err("give either stock or seats".into()),
        };
        let per_user_limit = self.per_user_limit.unwrap_or(DEFAULT_PER_USER_LIMIT);
        if !(1..=1_000).contains(&per_user_limit) {
            return Err("per_user_limit must be between 1 and 1000".into());
        }
        let hold_ttl_s = self.hold_ttl_s.unwrap_or(DEFAULT_HOLD_TTL_S);
        if !(1..=86_400).contains(&hold_ttl_s) {
            return Err("hold_ttl_s must be between 1 and 86400".into());
        }
        Ok(SaleConfig {
            inventory,
            per_user_limit,
            hold_ttl_s,
        })
    }
}

/// What a claim asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    Quantity(u64),
    Seats(Vec<String>),
}

impl Want {
    pub fn units(&self) -> u64 {
        match self {
            Want::Quantity(n) => *n,
            Want::Seats(seats) => seats.len() as u64,
        }
    }

    /// Reads `{"quantity":n}` or `{"seats":[…]}`.
    pub fn parse(body: &serde_json::Value) -> Result<Want, (WantProblem, String)> {
        let object = body.as_object().ok_or((
            WantProblem::Claim,
            "send {\"quantity\":n} or {\"seats\":[…]}".to_string(),
        ))?;
        if let Some(unknown) = object.keys().find(|k| *k != "quantity" && *k != "seats") {
            return Err((WantProblem::Claim, format!("unknown field {unknown:?}")));
        }
        match (object.get("quantity"), object.get("seats")) {
            (Some(quantity), None) => match quantity.as_u64() {
                Some(n) if n >= 1 => Ok(Want::Quantity(n)),
                _ => Err((
                    WantProblem::Quantity,
                    "quantity must be a whole number of at least 1".into(),
                )),
            },
            (None, Some(seats)) => {
                let seats: Vec<String> = seats
                    .as_array()
                    .and_then(|list| {
                        list.iter()
                            .map(|s| s.as_str().map(str::to_string))
                            .collect()
                    })
                    .ok_or((
                        WantProblem::Seats,
                        "seats must be a list of seat ids".to_string(),
                    ))?;
                if seats.is_empty() || seats.len() > 1_000 {
                    return Err((WantProblem::Seats, "ask for 1 to 1000 seats".into()));
                }
                let mut unique = seats.clone();
                unique.sort();
                unique.dedup();
                if unique.len() != seats.len() {
                    return Err((WantProblem::Seats, "a seat is listed twice".into()));
                }
                Ok(Want::Seats(seats))
            }
            _ => Err((WantProblem::Claim, "send either quantity or seats".into())),
        }
    }
}

/// The body of a claim as the API description shows it (`Want::parse`
/// reads it, so its messages can say which field was wrong).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(untagged, deny_unknown_fields)]
#[schema(as = ClaimRequest)]
pub enum WantBody {
    Quantity {
        #[schema(minimum = 1)]
        quantity: u64,
    },
    Seats {
        #[schema(min_items = 1, max_items = 1000)]
        seats: Vec<String>,
    },
}

wire_enum! {
    pub enum ClaimState {
        Held,
        Confirmed,
        Released,
        Expired,
    }
}

impl ClaimState {
    pub fn parse(raw: &str) -> Option<Self> {
        raw.parse().ok()
    }
}

wire_enum! {
    /// What a sale sells: a quantity of one thing, or named seats.
    pub enum SaleKind {
        Stock,
        Seats,
    }
}

/// What is wrong with a claim's request (each its own error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WantProblem {
    /// Neither or both of `quantity` and `seats`, or another field.
    Claim,
    Quantity,
    Seats,
}

/// Whose units the per-user limit adds up: one visitor's, or, where the
/// pass came from a user token, one user's across every visit and device.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Buyer {
    Visitor(VisitorId),
    /// A user token's `sub`.
    User(String),
}

impl Buyer {
    /// The user's, when the visitor's place is a known user's.
    pub fn of(visitor: VisitorId, user: Option<&str>) -> Self {
        match user {
            Some(user) => Buyer::User(user.to_string()),
            None => Buyer::Visitor(visitor),
        }
    }

    /// As a store keys it: the visitor id (16 hex digits), or `u:` and the
    /// user's id, so the two never meet.
    pub fn key(&self) -> String {
        match self {
            Buyer::Visitor(visitor) => visitor.to_string(),
            Buyer::User(user) => format!("u:{user}"),
        }
    }
}

/// One claim, as stores keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub claim_id: String,
    pub visitor: VisitorId,
    pub state: ClaimState,
    pub quantity: u64,
    pub seats: Vec<String>,
    /// Its place among the room's successful claims: 1, 2, 3…
    pub sequence: u64,
    pub hold_expires_at: Millis,
    pub confirmed_at: Option<Millis>,
}

/// A claim as the API shows it; clients read it borrowing the ids.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Claim)]
pub struct ClaimView<'a> {
    pub claim_id: &'a str,
    pub room: &'a str,
    pub visitor: String,
    pub state: ClaimState,
    pub quantity: u64,
    #[schema(value_type = Vec<String>)]
    pub seats: Cow<'a, [String]>,
    pub sequence: u64,
    pub hold_expires_at: String,
    pub confirmed_at: Option<String>,
}

impl Claim {
    pub fn view<'a>(&'a self, room: &'a RoomId) -> ClaimView<'a> {
        ClaimView {
            claim_id: &self.claim_id,
            room: room.as_str(),
            visitor: self.visitor.to_string(),
            state: self.state,
            quantity: self.quantity,
            seats: Cow::Borrowed(&self.seats),
            sequence: self.sequence,
            hold_expires_at: rfc3339(self.hold_expires_at),
            confirmed_at: self.confirmed_at.map(rfc3339),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SeatState {
    Free,
    Held,
    Sold,
}

/// What a room's line needs to know of its sale: what is free, and how many
/// holds are out (a hold that expires gives its units back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stock {
    /// Units, or seats, still free.
    pub left: u64,
    /// Holds not yet confirmed, released or expired.
    pub held: u64,
    /// Whether the call that read this gave back a whole slice of expired
    /// holds: more may be waiting, so the promoter asks again soon rather
    /// than at the next tick (a mass expiry with no sale traffic would
    /// otherwise come back one slice per tick).
    pub sweep_left: bool,
}

impl Stock {
    /// Nothing left and nothing that could come back.
    pub fn sold_out(&self) -> bool {
        self.left == 0 && self.held == 0
    }
}

/// What is left, as `GET …/sale` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SaleView {
    pub kind: SaleKind,
    pub stock_left: u64,
    pub seats: std::collections::BTreeMap<String, SeatState>,
    pub per_user_limit: u32,
    pub hold_ttl_s: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SaleError {
    #[error("this room has no sale")]
    NoSale,
    #[error("sold out")]
    SoldOut,
    #[error("seat {0} is taken")]
    SeatTaken(String),
    #[error("seat {0} is not in this sale")]
    UnknownSeat(String),
    #[error("that would go over the limit of {0} per visitor")]
    LimitReached(u32),
    #[error("{0}")]
    WrongKind(&'static str),
    #[error("no such claim")]
    ClaimNotFound,
    #[error("the hold expired; claim again")]
    HoldExpired,
    #[error("the hold was released")]
    Released,
    #[error("the claim is already confirmed")]
    AlreadyConfirmed,
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// A fresh, unguessable claim id.
pub fn new_claim_id() -> String {
    format!("c{:024x}", rand::random::<u128>() >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_and_a_sale_read_back_as_written() {
        let room = RoomId::parse("sale").unwrap();
        let claim = Claim {
            claim_id: new_claim_id(),
            visitor: VisitorId(7),
            state: ClaimState::Held,
            quantity: 2,
            seats: vec!["A1".into(), "A2".into()],
            sequence: 3,
            hold_expires_at: 1_700_000_300_000,
            confirmed_at: None,
        };
        let written = serde_json::to_string(&claim.view(&room)).unwrap();
        let read: ClaimView = serde_json::from_str(&written).unwrap();
        assert_eq!(read.claim_id, claim.claim_id);
        assert_eq!(
            (read.room, read.state, read.sequence),
            ("sale", ClaimState::Held, 3)
        );
        assert_eq!(read.seats.as_ref(), claim.seats.as_slice());

        let sale = SaleView {
            kind: SaleKind::Seats,
            stock_left: 1,
            seats: [("A1".to_string(), SeatState::Free)].into(),
            per_user_limit: 1,
            hold_ttl_s: 300,
        };
        let read: SaleView = serde_json::from_str(&serde_json::to_string(&sale).unwrap()).unwrap();
        assert_eq!((read.kind, read.stock_left), (SaleKind::Seats, 1));
        assert_eq!(read.seats, sale.seats);
        let other =
            r#"{"kind":"raffle","stock_left":1,"seats":{},"per_user_limit":1,"hold_ttl_s":1}"#;
        assert!(serde_json::from_str::<SaleView>(other).is_err());
    }

    #[test]
    fn a_sale_request_reads_back_as_written() {
        let request = SaleRequest {
            stock: Some(5),
            seats: None,
            per_user_limit: Some(1),
            hold_ttl_s: None,
        };
        let read: SaleRequest =
            serde_json::from_str(&serde_json::to_string(&request).unwrap()).unwrap();
        assert_eq!(read.into_config(), request.into_config());
    }
}
