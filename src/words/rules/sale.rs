//! A room's sale, as a pure model: stock or seats, claims held until they
//! expire, confirmed once, the per-buyer limit and idempotent claims. The
//! memory store is this behind a lock; `lua/sale_*.lua` implement the same
//! rules.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::words::VisitorId;
use crate::words::clock::Millis;
use crate::words::constants::SWEEP_SLICE;
use crate::words::sale::{
    Buyer, Claim, ClaimState, Inventory, SaleConfig, SaleError, SaleKind, SaleView, SeatState,
    Stock, Want, new_claim_id,
};

pub struct SaleModel {
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

impl SaleModel {
    pub fn new(config: SaleConfig) -> Self {
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

    /// Gives back holds past their expiry, the soonest first, at most
    /// [`SWEEP_SLICE`] of them (as `lua/sale_lib.lua` does, so a mass expiry
    /// never makes one long script). Until the slice reaches it, an expired
    /// hold still counts in the stock's figures and in a known user's limit
    /// on their other devices; the calls that touch it settle it first
    /// ([`Self::settle`]): its owner's confirm, release and claims, a claim
    /// of its seat, a claim the stock would otherwise refuse.
    /// Whether the slice was full: more may be left.
    pub fn expire_holds(&mut self, now: Millis) -> bool {
        self.expire_up_to(now, SWEEP_SLICE) == SWEEP_SLICE
    }

    /// How many it gave back.
    fn expire_up_to(&mut self, now: Millis, count: u64) -> u64 {
        for given in 0..count {
            match self.holds.first().cloned() {
                Some((expires_at, claim_id)) if expires_at <= now => {
                    self.give_back(&claim_id, ClaimState::Expired);
                }
                _ => return given,
            }
        }
        count
    }

    /// Gives a claim's hold back if it has run out by `now`.
    fn settle(&mut self, claim_id: &str, now: Millis) {
        let ran_out = self
            .claims
            .get(claim_id)
            .is_some_and(|c| c.state == ClaimState::Held && c.hold_expires_at <= now);
        if ran_out {
            self.give_back(claim_id, ClaimState::Expired);
        }
    }

    /// Settles each of the visitor's claims.
    fn settle_claims_of(&mut self, visitor: VisitorId, now: Millis) {
        for claim_id in self.mine.get(&visitor).cloned().unwrap_or_default() {
            self.settle(&claim_id, now);
        }
    }

    pub fn view(&self) -> SaleView {
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
                Inventory::Stock(_) => SaleKind::Stock,
                Inventory::Seats(_) => SaleKind::Seats,
            },
            stock_left,
            seats,
            per_user_limit: self.config.per_user_limit,
            hold_ttl_s: self.config.hold_ttl_s,
        }
    }

    pub fn claim(
        &mut self,
        visitor: VisitorId,
        buyer: Buyer,
        want: &Want,
        key: Option<&str>,
        now: Millis,
    ) -> Result<Claim, SaleError> {
        if let Some(key) = key
            && let Some(first) = self.idempotency.get(&(visitor, key.to_string())).cloned()
        {
            self.settle(&first, now);
            return Ok(self.claims[&first].clone());
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
        // Holds past their expiry that the sweep's slice has not reached
        // count no more wherever this claim meets them: its seats' holders,
        // the visitor's own holds when the limit would refuse, and as many
        // of the soonest expired as the stock it asks for lacks (as
        // `lua/sale_claim.lua` does).
        if let Want::Seats(seats) = want {
            for seat in seats {
                if let Some(holder) = self.seats[seat].clone() {
                    self.settle(&holder, now);
                }
            }
        }
        let limit = self.config.per_user_limit as u64;
        let units = |sale: &Self| sale.units.get(&buyer).copied().unwrap_or(0);
        if units(self) + want.units() > limit {
            self.settle_claims_of(visitor, now);
            if units(self) + want.units() > limit {
                return Err(SaleError::LimitReached(self.config.per_user_limit));
            }
        }
        let claim_id = new_claim_id();
        match want {
            Want::Quantity(n) => {
                if self.stock_left < *n {
                    self.expire_up_to(now, n - self.stock_left);
                }
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
    fn all_claims_of(&self, visitor: VisitorId) -> impl Iterator<Item = &Claim> {
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

    /// What is left: free units (or seats), and the holds out.
    pub fn stock(&self) -> Stock {
        let left = match self.config.inventory {
            Inventory::Stock(_) => self.stock_left,
            Inventory::Seats(_) => self.seats.values().filter(|o| o.is_none()).count() as u64,
        };
        Stock {
            left,
            held: self.holds.len() as u64,
            sweep_left: false,
        }
    }

    pub fn confirm(
        &mut self,
        visitor: VisitorId,
        claim_id: &str,
        now: Millis,
    ) -> Result<Claim, SaleError> {
        self.settle(claim_id, now);
        let claim = self.own_claim(visitor, claim_id)?;
        match claim.state {
            ClaimState::Held => {
                claim.state = ClaimState::Confirmed;
                claim.confirmed_at = Some(now);
                let (expiry, confirmed) = (claim.hold_expires_at, claim.clone());
                self.holds.remove(&(expiry, claim_id.to_string()));
                self.orders.push(claim_id.to_string());
                Ok(confirmed)
            }
            ClaimState::Confirmed => Ok(claim.clone()),
            ClaimState::Expired => Err(SaleError::HoldExpired),
            ClaimState::Released => Err(SaleError::Released),
        }
    }

    pub fn release(
        &mut self,
        visitor: VisitorId,
        claim_id: &str,
        now: Millis,
    ) -> Result<(), SaleError> {
        self.settle(claim_id, now);
        match self.own_claim(visitor, claim_id)?.state {
            ClaimState::Held => {
                self.give_back(claim_id, ClaimState::Released);
                Ok(())
            }
            ClaimState::Confirmed => Err(SaleError::AlreadyConfirmed),
            ClaimState::Released | ClaimState::Expired => Ok(()),
        }
    }

    /// Gives back every hold of the visitor's; how many.
    pub fn release_holds_of(&mut self, visitor: VisitorId, now: Millis) -> u64 {
        self.settle_claims_of(visitor, now);
        let held: Vec<String> = self
            .all_claims_of(visitor)
            .filter(|c| c.state == ClaimState::Held)
            .map(|c| c.claim_id.clone())
            .collect();
        for claim_id in &held {
            self.give_back(claim_id, ClaimState::Released);
        }
        held.len() as u64
    }

    /// The visitor's claims held or confirmed, in the order made.
    pub fn claims_of(&mut self, visitor: VisitorId, now: Millis) -> Vec<Claim> {
        self.settle_claims_of(visitor, now);
        self.all_claims_of(visitor)
            .filter(|c| matches!(c.state, ClaimState::Held | ClaimState::Confirmed))
            .cloned()
            .collect()
    }

    /// Confirmed claims, in the order confirmed.
    pub fn orders(&self) -> Vec<Claim> {
        self.orders
            .iter()
            .map(|id| self.claims[id].clone())
            .collect()
    }
}
