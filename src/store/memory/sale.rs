//! The sale on the embedded store: each room's sale behind one mutex. The
//! room's `MemoryStore` holds a handle on the same sales, so creating a room
//! wipes its predecessor's sale in the same critical section.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::store::SaleStore;
use crate::words::clock::{Millis, SharedClock};
use crate::words::sale::{
    Buyer, Claim, ClaimState, Inventory, SaleConfig, SaleError, SaleView, SeatState, Stock, Want,
    new_claim_id,
};
use crate::words::{RoomId, VisitorId};

/// A cheap-clone handle; every clone sees the same sales.
#[derive(Clone)]
pub struct MemorySale {
    clock: SharedClock,
    sales: Arc<Mutex<HashMap<RoomId, Sale>>>,
}

struct Sale {
    config: SaleConfig,
    stock_left: u64,
    /// Seat → the claim holding or owning it (absent: free).
    seats: BTreeMap<String, Option<String>>,
    claims: HashMap<String, Claim>,
    /// Each visitor's claims, in the order made.
    mine: HashMap<VisitorId, Vec<String>>,
    /// (expiry, claim id) of every hold, soonest first.
    holds: BTreeSet<(Millis, String)>,
    /// Units each buyer (a visitor, or a known user) holds or bought.
    units: HashMap<Buyer, u64>,
    /// Whose limit each claim counts against.
    buyers: HashMap<String, Buyer>,
    idempotency: HashMap<(VisitorId, String), String>,
    next_sequence: u64,
    orders: Vec<String>,
}

impl Sale {
    fn new(config: SaleConfig) -> Self {
        let (stock_left, seats) = match &config.inventory {
            Inventory::Stock(n) => (*n, BTreeMap::new()),
            Inventory::Seats(seats) => (0, seats.iter().map(|s| (s.clone(), None)).collect()),
        };
        Self {
            config,
            stock_left,
            seats,
            claims: HashMap::new(),
            mine: HashMap::new(),
            holds: BTreeSet::new(),
            units: HashMap::new(),
            buyers: HashMap::new(),
            idempotency: HashMap::new(),
            next_sequence: 0,
            orders: Vec::new(),
        }
    }

    /// Gives what a claim held back to stock.
    fn give_back(&mut self, claim_id: &str, to: ClaimState) {
        let Some(claim) = self.claims.get_mut(claim_id) else {
            return;
        };
        claim.state = to;
        self.holds
            .remove(&(claim.hold_expires_at, claim_id.to_string()));
        if let Some(units) = self
            .buyers
            .get(claim_id)
            .and_then(|buyer| self.units.get_mut(buyer))
        {
            *units = units.saturating_sub(claim.quantity);
        }
        if claim.seats.is_empty() {
            self.stock_left += claim.quantity;
        }
        for seat in &claim.seats {
            self.seats.insert(seat.clone(), None);
        }
    }

    fn expire_holds(&mut self, now: Millis) {
        while let Some((expires_at, claim_id)) = self.holds.first().cloned() {
            if expires_at > now {
                break;
            }
            self.give_back(&claim_id, ClaimState::Expired);
        }
    }

    fn view(&self) -> SaleView {
        let seats = self
            .seats
            .iter()
            .map(|(seat, owner)| {
                let state = match owner.as_ref().and_then(|id| self.claims.get(id)) {
                    None => SeatState::Free,
                    Some(claim) if claim.state == ClaimState::Confirmed => SeatState::Sold,
                    Some(_) => SeatState::Held,
                };
                (seat.clone(), state)
            })
            .collect::<BTreeMap<_, _>>();
        let stock_left = match self.config.inventory {
            Inventory::Stock(_) => self.stock_left,
            Inventory::Seats(_) => seats.values().filter(|s| **s == SeatState::Free).count() as u64,
        };
        SaleView {
            kind: match self.config.inventory {
                Inventory::Stock(_) => "stock",
                Inventory::Seats(_) => "seats",
            },
            stock_left,
            seats,
            per_user_limit: self.config.per_user_limit,
            hold_ttl_s: self.config.hold_ttl_s,
        }
    }

    fn claim(
        &mut self,
        visitor: VisitorId,
        buyer: Buyer,
        want: &Want,
        key: Option<&str>,
        now: Millis,
    ) -> Result<Claim, SaleError> {
        if let Some(key) = key
            && let Some(first) = self.idempotency.get(&(visitor, key.to_string()))
        {
            return Ok(self.claims[first].clone());
        }
        match (want, &self.config.inventory) {
            (Want::Quantity(_), Inventory::Seats(_)) => {
                return Err(SaleError::WrongKind("this sale sells seats: ask for seats"));
            }
            (Want::Seats(_), Inventory::Stock(_)) => {
                return Err(SaleError::WrongKind(
                    "this sale sells a quantity: ask for quantity",
                ));
            }
            (Want::Seats(seats), Inventory::Seats(_)) => {
                if let Some(unknown) = seats.iter().find(|s| !self.seats.contains_key(*s)) {
                    return Err(SaleError::UnknownSeat(unknown.clone()));
                }
            }
            _ => {}
        }
        let held = self.units.get(&buyer).copied().unwrap_or(0);
        if held + want.units() > self.config.per_user_limit as u64 {
            return Err(SaleError::LimitReached(self.config.per_user_limit));
        }
        let claim_id = new_claim_id();
        match want {
            Want::Quantity(n) => {
                if self.stock_left < *n {
                    return Err(SaleError::SoldOut);
                }
                self.stock_left -= n;
            }
            Want::Seats(seats) => {
                if let Some(taken) = seats.iter().find(|s| self.seats[*s].is_some()) {
                    return Err(SaleError::SeatTaken(taken.clone()));
                }
                for seat in seats {
                    self.seats.insert(seat.clone(), Some(claim_id.clone()));
                }
            }
        }
        self.next_sequence += 1;
        let claim = Claim {
            claim_id: claim_id.clone(),
            visitor,
            state: ClaimState::Held,
            quantity: want.units(),
            seats: match want {
                Want::Seats(seats) => seats.clone(),
                Want::Quantity(_) => Vec::new(),
            },
            sequence: self.next_sequence,
            hold_expires_at: now + self.config.hold_ttl_s * 1000,
            confirmed_at: None,
        };
        *self.units.entry(buyer.clone()).or_default() += claim.quantity;
        self.buyers.insert(claim_id.clone(), buyer);
        self.holds.insert((claim.hold_expires_at, claim_id.clone()));
        if let Some(key) = key {
            self.idempotency
                .insert((visitor, key.to_string()), claim_id.clone());
        }
        self.mine.entry(visitor).or_default().push(claim_id.clone());
        self.claims.insert(claim_id, claim.clone());
        Ok(claim)
    }

    /// The visitor's claims, in the order made.
    fn claims_of(&self, visitor: VisitorId) -> impl Iterator<Item = &Claim> {
        self.mine
            .get(&visitor)
            .into_iter()
            .flatten()
            .filter_map(|id| self.claims.get(id))
    }

    fn own_claim(&mut self, visitor: VisitorId, claim_id: &str) -> Result<&mut Claim, SaleError> {
        self.claims
            .get_mut(claim_id)
            .filter(|c| c.visitor == visitor)
            .ok_or(SaleError::ClaimNotFound)
    }
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
        op: impl FnOnce(&mut Sale, Millis) -> Result<T, SaleError>,
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
        let sale = Sale::new(config);
        let view = sale.view();
        self.sales.lock().insert(room.clone(), sale);
        Ok(view)
    }

    async fn sale(&self, room: &RoomId) -> Result<SaleView, SaleError> {
        self.with_sale(room, |sale, _| Ok(sale.view()))
    }

    async fn stock(&self, room: &RoomId) -> Result<Stock, SaleError> {
        self.with_sale(room, |sale, _| {
            let left = match sale.config.inventory {
                Inventory::Stock(_) => sale.stock_left,
                Inventory::Seats(_) => sale.seats.values().filter(|o| o.is_none()).count() as u64,
            };
            Ok(Stock {
                left,
                held: sale.holds.len() as u64,
            })
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
        self.with_sale(room, |sale, now| {
            let claim = sale.own_claim(visitor, claim_id)?;
            match claim.state {
                ClaimState::Held => {
                    claim.state = ClaimState::Confirmed;
                    claim.confirmed_at = Some(now);
                    let (expiry, confirmed) = (claim.hold_expires_at, claim.clone());
                    sale.holds.remove(&(expiry, claim_id.to_string()));
                    sale.orders.push(claim_id.to_string());
                    Ok(confirmed)
                }
                ClaimState::Confirmed => Ok(claim.clone()),
                ClaimState::Expired => Err(SaleError::HoldExpired),
                ClaimState::Released => Err(SaleError::Released),
            }
        })
    }

    async fn release(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        claim_id: &str,
    ) -> Result<(), SaleError> {
        self.with_sale(room, |sale, _| {
            match sale.own_claim(visitor, claim_id)?.state {
                ClaimState::Held => {
                    sale.give_back(claim_id, ClaimState::Released);
                    Ok(())
                }
                ClaimState::Confirmed => Err(SaleError::AlreadyConfirmed),
                ClaimState::Released | ClaimState::Expired => Ok(()),
            }
        })
    }

    async fn release_holds_of(&self, room: &RoomId, visitor: VisitorId) -> Result<u64, SaleError> {
        self.with_sale(room, |sale, _| {
            let held: Vec<String> = sale
                .claims_of(visitor)
                .filter(|c| c.state == ClaimState::Held)
                .map(|c| c.claim_id.clone())
                .collect();
            for claim_id in &held {
                sale.give_back(claim_id, ClaimState::Released);
            }
            Ok(held.len() as u64)
        })
    }

    async fn claims_of(&self, room: &RoomId, visitor: VisitorId) -> Result<Vec<Claim>, SaleError> {
        self.with_sale(room, |sale, _| {
            Ok(sale
                .claims_of(visitor)
                .filter(|c| matches!(c.state, ClaimState::Held | ClaimState::Confirmed))
                .cloned()
                .collect())
        })
    }

    async fn orders(&self, room: &RoomId) -> Result<Vec<Claim>, SaleError> {
        self.with_sale(room, |sale, _| {
            Ok(sale
                .orders
                .iter()
                .map(|id| sale.claims[id].clone())
                .collect())
        })
    }
}
