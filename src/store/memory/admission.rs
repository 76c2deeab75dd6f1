//! The embedded store for a single node: every room behind its own mutex, so
//! each operation (join, tick, leave…) is one critical section and a check can
//! never be separated from the act it guards.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::{Mutex, MutexGuard, RwLock};
use tokio::sync::broadcast;

use super::draw_line::DrawLine;
use super::fenwick::LineIndex;
use super::sale::MemorySale;
use crate::store::{JoinOptions, Store, StoreError, Tick, TickReport};
use crate::words::clock::{Millis, SharedClock};
use crate::words::constants::RATE_WINDOW_MS;
use crate::words::draw::{self, DrawInfo, DrawKey, EntryId};
use crate::words::join_limit::{self, Gcra};
use crate::words::sale::Stock;
use crate::words::{
    Admission, LineSummary, Order, Place, PlaceState, QueueMethod, RoomConfig, RoomEvent,
    RoomFacts, RoomId, RoomInfo, RoomPatch, RoomStats, StoreEvent, VisitorId,
};

/// Events buffered per subscriber before a slow one is told it lagged.
const EVENT_BUFFER: usize = 4_096;

pub struct MemoryStore {
    clock: SharedClock,
    rooms: RwLock<HashMap<RoomId, Arc<Mutex<Room>>>>,
    events: broadcast::Sender<StoreEvent>,
    /// Operator sessions ended by logout, until they would have expired.
    ended_sessions: Mutex<HashMap<String, Millis>>,
    /// The rooms' sales: creating a room wipes the sale of any room that had
    /// its id before, under the same lock that creates it.
    sale: MemorySale,
}

impl MemoryStore {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            sale: MemorySale::new(clock.clone()),
            clock,
            rooms: RwLock::new(HashMap::new()),
            events: broadcast::channel(EVENT_BUFFER).0,
            ended_sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The sale store of these rooms (a handle: every call returns the same sales).
    pub fn sale(&self) -> MemorySale {
        self.sale.clone()
    }

    fn room_handle(&self, id: &RoomId) -> Result<Arc<Mutex<Room>>, StoreError> {
        self.rooms
            .read()
            .get(id)
            .cloned()
            .ok_or_else(|| StoreError::RoomNotFound(id.clone()))
    }

    /// Runs `op` on an open room at the store's current time.
    fn with_open_room<T>(
        &self,
        id: &RoomId,
        name: &'static str,
        op: impl FnOnce(&mut Room, Millis) -> T,
    ) -> Result<T, StoreError> {
        let handle = self.room_handle(id)?;
        let mut room = HeldRoom::lock(&handle, name);
        if room.closed {
            return Err(StoreError::RoomClosed(id.clone()));
        }
        let now = self.clock.now_ms();
        room.expire(now, FORGOTTEN_PER_OPERATION);
        Ok(op(&mut room, now))
    }

    /// The visitor's place once `touch` has marked what reading it means
    /// (presence, arrival); a closed room's visitors are told it is closed.
    fn place_after(
        &self,
        id: &RoomId,
        name: &'static str,
        visitor: VisitorId,
        touch: impl FnOnce(&mut Room, Millis),
    ) -> Result<Place, StoreError> {
        match self.with_open_room(id, name, |room, now| {
            touch(room, now);
            room.place(visitor, now)
        }) {
            Err(StoreError::RoomClosed(_)) => Ok(closed_place(visitor)),
            other => other,
        }
    }

    fn publish(&self, event: RoomEvent) {
        // No subscriber is not an error: nobody is connected yet.
        let _ = self.events.send(StoreEvent::Room(event));
    }
}

/// What a closed room's visitors are told.
fn closed_place(visitor: VisitorId) -> Place {
    Place {
        visitor,
        state: PlaceState::Closed,
        line: LineSummary::default(),
        facts: Arc::default(),
    }
}

/// A room's lock held for one operation. Every other caller of the room
/// waits that long, so the time it is held is the operation's cost to the
/// room; it is recorded in `waitroom_memory_store_op_seconds`, by `op`.
struct HeldRoom<'a> {
    room: MutexGuard<'a, Room>,
    op: &'static str,
    since: Instant,
}

impl<'a> HeldRoom<'a> {
    fn lock(handle: &'a Mutex<Room>, op: &'static str) -> Self {
        let room = handle.lock();
        Self {
            room,
            op,
            since: Instant::now(),
        }
    }
}

impl Deref for HeldRoom<'_> {
    type Target = Room;
    fn deref(&self) -> &Room {
        &self.room
    }
}

impl DerefMut for HeldRoom<'_> {
    fn deref_mut(&mut self) -> &mut Room {
        &mut self.room
    }
}

impl Drop for HeldRoom<'_> {
    fn drop(&mut self) {
        metrics::histogram!("waitroom_memory_store_op_seconds", "op" => self.op)
            .record(self.since.elapsed().as_secs_f64());
    }
}

/// Where a waiting visitor's place is kept.
#[derive(Debug, Clone, Copy)]
enum Spot {
    /// In the line, by join sequence number.
    Joined(u64),
    /// In the draw (joined before the opening).
    Drawn { key: DrawKey, entry: EntryId },
}

impl Spot {
    fn order(self) -> Order {
        match self {
            Spot::Joined(seq) => Order::Joined(seq),
            Spot::Drawn { key, entry } => Order::Drawn {
                key: key.prefix(),
                entry,
            },
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum VisitorState {
    Waiting {
        spot: Spot,
        joined_at: Millis,
        last_seen: Millis,
    },
    Admitted {
        admitted_at: Millis,
        expires_at: Millis,
        /// When the pass is reclaimed unless `/api/verify` sees it first
        /// (`arrival_grace_s`); `None` once seen, or with no grace.
        arrival_due: Option<Millis>,
    },
}

struct Room {
    id: RoomId,
    config: RoomConfig,
    /// What the config says to every status, shared with every place handed out.
    facts: Arc<RoomFacts>,
    closed: bool,
    created_at: Millis,
    /// Tokens left for this tick period: refilled to `admit_per_tick` by each
    /// tick, spent on the head of the line first, then on pass-through arrivals.
    tokens: u32,
    /// The tick schedule's anchor: ticks are due at `last_tick + k * tick_ms`.
    last_tick: Millis,
    /// When a tick last actually ran.
    last_tick_ran: Option<Millis>,
    /// Admissions per second over the rate window, as of the last tick.
    achieved_rate: f64,
    version: u64,
    index: LineIndex,
    /// The line: join sequence number → visitor, head first.
    line: BTreeMap<u64, VisitorId>,
    /// Visitors with a place or a pass. Expired visitors are forgotten: an
    /// unknown visitor and an expired one are told the same thing.
    visitors: HashMap<VisitorId, VisitorState>,
    /// Visitors who gave up their place or pass (or had it taken back), no
    /// longer in `visitors`: until when they are told `left`. Forgotten
    /// then, a bounded number per operation, soonest first by `departures`.
    departed: HashMap<VisitorId, Millis>,
    departures: BTreeSet<(Millis, VisitorId)>,
    /// (last seen, visitor) of every waiting visitor, stalest first, so a
    /// tick finds the abandoned without walking the line.
    presence: BTreeSet<(Millis, VisitorId)>,
    /// The draw, from the moment the room has an `opens_at`: its entrants
    /// wait ahead of the line, in drawn order.
    draw: Option<DrawLine>,
    /// Whether the opening was announced (`RoomEvent::Drawn`).
    drawn_announced: bool,
    /// (pass expiry, visitor) of every admitted visitor, soonest first.
    active: BTreeSet<(Millis, VisitorId)>,
    /// (time, admitted) over the rate window, oldest first.
    admissions: VecDeque<(Millis, u64)>,
    admitted_total: u64,
    /// Per-address join limits: client address → theoretical arrival time.
    join_limits: HashMap<String, Millis>,
    join_limits_prune_at: usize,
    turned_away: u64,
    /// (arrival due, visitor) of every admitted visitor `/api/verify` has
    /// not seen yet, when the room has an `arrival_grace_s`.
    arrivals: BTreeSet<(Millis, VisitorId)>,
    /// How many times `arrivals` were resumed after an outage.
    arrival_resumptions: u64,
    no_shows: u64,
    /// Known users (a user token's `sub`) → the visitor holding their place.
    users: HashMap<String, VisitorId>,
    /// And back: the user whose place a visitor holds.
    user_of: HashMap<VisitorId, String>,
    /// Proof-of-work solutions used, until they expire.
    used_pow: HashMap<String, Millis>,
    used_pow_prune_at: usize,
}

/// The per-address map is pruned when it reaches this size, or twice its
/// size after the last pruning.
const MIN_JOIN_LIMITS_PRUNE: usize = 1024;
/// Departed visitors forgotten per operation on the room at most, and per
/// tick: each is forgotten once, so no operation does more than a bounded
/// amount of it, and the ticks (which an idle room still gets, once per
/// heartbeat) keep up with any rate of leaving.
const FORGOTTEN_PER_OPERATION: usize = 64;
const FORGOTTEN_PER_TICK: usize = 4_096;

impl Room {
    fn new(id: RoomId, config: RoomConfig, now: Millis) -> Self {
        let draw = config.opens_at.map(|_| DrawLine::new());
        Self {
            id,
            tokens: config.admit_per_tick,
            facts: Arc::new(RoomFacts::of(&config, None, false)),
            config,
            closed: false,
            created_at: now,
            last_tick: now,
            last_tick_ran: None,
            achieved_rate: 0.0,
            version: 0,
            index: LineIndex::new(),
            line: BTreeMap::new(),
            visitors: HashMap::new(),
            departed: HashMap::new(),
            departures: BTreeSet::new(),
            presence: BTreeSet::new(),
            draw,
            drawn_announced: false,
            active: BTreeSet::new(),
            admissions: VecDeque::new(),
            admitted_total: 0,
            join_limits: HashMap::new(),
            join_limits_prune_at: MIN_JOIN_LIMITS_PRUNE,
            turned_away: 0,
            arrivals: BTreeSet::new(),
            arrival_resumptions: 0,
            no_shows: 0,
            users: HashMap::new(),
            user_of: HashMap::new(),
            used_pow: HashMap::new(),
            used_pow_prune_at: MIN_JOIN_LIMITS_PRUNE,
        }
    }

    /// What time alone ends: passes run out, and departed visitors are
    /// forgotten (up to `at_most` of them).
    fn expire(&mut self, now: Millis, at_most: usize) {
        self.expire_passes(now);
        for _ in 0..at_most {
            match self.departures.first() {
                Some(&(until, visitor)) if until <= now => {
                    self.departures.pop_first();
                    if self.departed.get(&visitor) == Some(&until) {
                        self.departed.remove(&visitor);
                    }
                }
                _ => break,
            }
        }
    }

    fn expire_passes(&mut self, now: Millis) {
        while let Some(&(expires_at, visitor)) = self.active.first() {
            if expires_at > now {
                break;
            }
            self.active.pop_first();
            if let Some(VisitorState::Admitted {
                arrival_due: Some(due),
                ..
            }) = self.forget(visitor)
            {
                self.arrivals.remove(&(due, visitor));
            }
        }
    }

    /// Drops everything the room keeps of a visitor (their user's place
    /// included, if it was theirs); returns the state they were in.
    fn forget(&mut self, visitor: VisitorId) -> Option<VisitorState> {
        if let Some(user) = self.user_of.remove(&visitor)
            && self.users.get(&user) == Some(&visitor)
        {
            self.users.remove(&user);
        }
        self.visitors.remove(&visitor)
    }

    /// Forgets a visitor who gave up their place or pass, who is told
    /// `left` until `until` (at least `abandon_after_s` from now).
    fn depart(&mut self, visitor: VisitorId, until: Millis, now: Millis) {
        let until = until.max(now + self.config.abandon_after_s * 1000);
        self.forget(visitor);
        self.departed.insert(visitor, until);
        self.departures.insert((until, visitor));
    }

    /// Whether the room is open: it has no `opens_at`, or that has passed.
    fn opened(&self, now: Millis) -> bool {
        self.config.opens_at.is_none_or(|at| now >= at.0)
    }

    /// Everyone waiting: the draw's entrants and the line.
    fn waiting(&self) -> u64 {
        self.draw.as_ref().map_or(0, DrawLine::waiting) + self.line.len() as u64
    }

    /// Takes a waiting visitor's spot out of the draw or the line.
    fn unqueue(&mut self, spot: Spot, now: Millis) {
        match spot {
            Spot::Joined(seq) => {
                self.line.remove(&seq);
                self.index.remove(seq);
            }
            Spot::Drawn { key, .. } => {
                let before_opening = !self.opened(now);
                if let Some(draw) = &mut self.draw {
                    draw.remove(&key, before_opening);
                }
            }
        }
    }

    /// Drops waiting visitors not seen for `abandon_after_s`; returns their places.
    fn sweep_abandoned(&mut self, now: Millis) -> Vec<Order> {
        let grace = self.config.abandon_after_s * 1000;
        let mut departed = Vec::new();
        while let Some(&(last_seen, visitor)) = self.presence.first() {
            if last_seen + grace > now {
                break;
            }
            self.presence.pop_first();
            if let Some(VisitorState::Waiting { spot, .. }) = self.forget(visitor) {
                self.unqueue(spot, now);
                departed.push(spot.order());
            }
        }
        departed
    }

    fn under_cap(&self) -> bool {
        self.config
            .max_active
            .is_none_or(|cap| (self.active.len() as u64) < cap)
    }

    fn admit(&mut self, visitor: VisitorId, order: Order, now: Millis) -> Admission {
        let expires_at = now + self.config.pass_ttl_s * 1000;
        let arrival_due = self.config.arrival_grace_s.map(|grace| now + grace * 1000);
        if let Some(due) = arrival_due {
            self.arrivals.insert((due, visitor));
        }
        self.visitors.insert(
            visitor,
            VisitorState::Admitted {
                admitted_at: now,
                expires_at,
                arrival_due,
            },
        );
        self.active.insert((expires_at, visitor));
        // `passthrough` admits past the bucket.
        self.tokens = self.tokens.saturating_sub(1);
        self.admitted_total += 1;
        Admission {
            visitor,
            order,
            admitted_at: now,
            expires_at,
        }
    }

    fn record_admissions(&mut self, now: Millis, count: u64) {
        if count > 0 {
            match self.admissions.back_mut() {
                Some((at, n)) if *at == now => *n += count,
                _ => self.admissions.push_back((now, count)),
            }
        }
        while let Some(&(at, _)) = self.admissions.front() {
            if at + RATE_WINDOW_MS > now {
                break;
            }
            self.admissions.pop_front();
        }
    }

    fn admitted_since(&self, since_exclusive: Millis) -> u64 {
        self.admissions
            .iter()
            .filter(|(at, _)| *at > since_exclusive)
            .map(|(_, n)| n)
            .sum()
    }

    /// Admissions per second over the window ending at `last_tick`.
    fn measure_rate(&self, last_tick: Millis) -> f64 {
        let window_start = last_tick
            .saturating_sub(RATE_WINDOW_MS)
            .max(self.created_at);
        let span_ms = (last_tick - window_start).max(self.config.tick_ms);
        let admitted = self
            .admissions
            .iter()
            .filter(|(at, _)| *at > window_start && *at <= last_tick)
            .map(|(_, n)| n)
            .sum::<u64>();
        admitted as f64 * 1000.0 / span_ms as f64
    }

    /// The rate an ETA divides by: none while paused, the configured rate
    /// before the first tick, then the rate achieved (none if nothing got in).
    fn rate_per_s(&self) -> Option<f64> {
        if self.config.paused {
            return None;
        }
        if self.last_tick_ran.is_none() {
            return Some(self.config.admit_per_tick as f64 * 1000.0 / self.config.tick_ms as f64);
        }
        (self.achieved_rate > 0.0).then_some(self.achieved_rate)
    }

    fn summary(&self) -> LineSummary {
        LineSummary {
            version: self.version,
            waiting: self.waiting(),
            rate_per_s: self.rate_per_s(),
            paused: self.config.paused,
            tick_at: self.last_tick_ran,
        }
    }

    fn place(&self, visitor: VisitorId, now: Millis) -> Place {
        let state = match self.visitors.get(&visitor) {
            // A line closed for a sold-out sale: its places stay, unused.
            Some(VisitorState::Waiting { .. }) if self.facts.sold_out => PlaceState::Closed,
            Some(VisitorState::Waiting {
                spot: Spot::Drawn { entry, .. },
                ..
            }) if !self.opened(now) => PlaceState::PreQueue { entry: *entry },
            Some(VisitorState::Waiting { spot, .. }) => PlaceState::Waiting {
                order: spot.order(),
                position: self.position(*spot),
            },
            Some(VisitorState::Admitted {
                admitted_at,
                expires_at,
                ..
            }) => PlaceState::Admitted {
                admitted_at: *admitted_at,
                expires_at: *expires_at,
            },
            None if self
                .departed
                .get(&visitor)
                .is_some_and(|until| *until > now) =>
            {
                PlaceState::Left
            }
            None => PlaceState::Expired,
        };
        Place {
            visitor,
            state,
            line: self.summary(),
            facts: self.facts.clone(),
        }
    }

    /// 1-based: the draw's entrants first, then the line.
    fn position(&self, spot: Spot) -> u64 {
        let draw = self.draw.as_ref();
        match spot {
            Spot::Drawn { key, .. } => draw.map_or(1, |draw| draw.rank(&key)),
            Spot::Joined(seq) => draw.map_or(0, DrawLine::waiting) + self.index.rank(seq),
        }
    }

    fn mark_present(&mut self, visitor: VisitorId, now: Millis) {
        if let Some(VisitorState::Waiting { last_seen, .. }) = self.visitors.get_mut(&visitor)
            && *last_seen < now
        {
            self.presence.remove(&(*last_seen, visitor));
            self.presence.insert((now, visitor));
            *last_seen = now;
        }
    }

    fn join(
        &mut self,
        visitor: VisitorId,
        options: &JoinOptions,
        now: Millis,
    ) -> Result<Place, StoreError> {
        let visitor = match &options.user {
            // One place per user: the user's live place, whoever asks.
            Some(user) => match self.users.get(user) {
                Some(held) if self.holds_a_place(*held) => *held,
                _ => visitor,
            },
            None if self.config.user_required => return Err(StoreError::UserRequired),
            None => visitor,
        };
        match self.visitors.get(&visitor) {
            Some(VisitorState::Waiting { .. }) => self.mark_present(visitor, now),
            Some(VisitorState::Admitted { .. }) => {}
            // Sold out: new arrivals are told so, and take nothing.
            None if self.facts.sold_out => {
                let mut place = self.place(visitor, now);
                place.state = PlaceState::Closed;
                return Ok(place);
            }
            None => {
                self.welcome(options, now)?;
                let opened = self.opened(now);
                let pass_through = opened
                    && !self.config.paused
                    && (self.config.queue_method == QueueMethod::Passthrough
                        || (self.tokens > 0 && self.waiting() == 0 && self.under_cap()));
                if pass_through {
                    self.admit(visitor, Order::Joined(0), now);
                    self.record_admissions(now, 1);
                } else {
                    let spot = match &mut self.draw {
                        Some(draw) if !opened => {
                            let (key, entry) = draw.enter(visitor);
                            Spot::Drawn { key, entry }
                        }
                        _ => {
                            let seq = self.index.push_waiting();
                            self.line.insert(seq, visitor);
                            Spot::Joined(seq)
                        }
                    };
                    self.presence.insert((now, visitor));
                    self.visitors.insert(
                        visitor,
                        VisitorState::Waiting {
                            spot,
                            joined_at: now,
                            last_seen: now,
                        },
                    );
                }
            }
        }
        if let Some(user) = &options.user {
            self.users.insert(user.clone(), visitor);
            self.user_of.insert(visitor, user.clone());
        }
        Ok(self.place(visitor, now))
    }

    /// One of those waiting, each as likely as any other (`random`); in a
    /// drawn room, one of the draw's entrants while any wait (as on Redis).
    fn random_waiting(&self) -> Option<VisitorId> {
        if let Some(draw) = self.draw.as_ref().filter(|draw| draw.waiting() > 0) {
            return draw
                .select(rand::random_range(1..=draw.waiting()))
                .map(|(_, visitor)| visitor);
        }
        let waiting = self.line.len() as u64;
        (waiting > 0).then(|| self.line[&self.index.select(rand::random_range(1..=waiting))])
    }

    /// The head: the draw's first entrant, else the line's.
    fn first_waiting(&self) -> Option<VisitorId> {
        if let Some((_, visitor)) = self.draw.as_ref().and_then(|draw| draw.select(1)) {
            return Some(visitor);
        }
        self.line.first_key_value().map(|(_, visitor)| *visitor)
    }

    /// Whether a new arrival may take a place, spending what it uses (its
    /// proof of work, its address's join budget); a refusal changes nothing
    /// but the room's `turned_away`.
    fn welcome(&mut self, options: &JoinOptions, now: Millis) -> Result<(), StoreError> {
        let refusal = if self.config.queue_method == QueueMethod::Reject
            || self.config.closes_at.is_some_and(|at| now >= at.0)
        {
            Some(StoreError::NotAccepting)
        } else if self.config.pow_difficulty > 0 {
            match &options.pow {
                None => Some(StoreError::PowRequired),
                Some(solved) if solved.difficulty < self.config.pow_difficulty => {
                    Some(StoreError::PowTooEasy)
                }
                Some(solved) if self.used_pow.contains_key(&solved.id) => {
                    Some(StoreError::PowReused)
                }
                Some(_) => None,
            }
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.turned_away += 1;
            return Err(refusal);
        }
        if let Some(limit) = &options.limit {
            let tat = self.join_limits.get(&limit.client).copied();
            match join_limit::decide(tat, now, limit.per_minute) {
                Gcra::Allowed { tat } => {
                    self.join_limits.insert(limit.client.clone(), tat);
                    if self.join_limits.len() >= self.join_limits_prune_at {
                        // An address whose TAT has passed is as good as
                        // unknown; pruning when the map doubles keeps the
                        // cost per join constant.
                        self.join_limits.retain(|_, tat| *tat > now);
                        self.join_limits_prune_at =
                            (2 * self.join_limits.len()).max(MIN_JOIN_LIMITS_PRUNE);
                    }
                }
                Gcra::Refused { retry_after_s } => {
                    self.turned_away += 1;
                    return Err(StoreError::RateLimited { retry_after_s });
                }
            }
        }
        if self.config.pow_difficulty > 0
            && let Some(solved) = &options.pow
        {
            self.used_pow.insert(solved.id.clone(), solved.until);
            if self.used_pow.len() >= self.used_pow_prune_at {
                // A solution past its expiry is refused as expired before it
                // gets here, so pruning when the map doubles loses nothing.
                self.used_pow.retain(|_, until| *until > now);
                self.used_pow_prune_at = (2 * self.used_pow.len()).max(MIN_JOIN_LIMITS_PRUNE);
            }
        }
        Ok(())
    }

    fn holds_a_place(&self, visitor: VisitorId) -> bool {
        matches!(
            self.visitors.get(&visitor),
            Some(VisitorState::Waiting { .. } | VisitorState::Admitted { .. })
        )
    }

    /// Passes whose visitor never arrived in time give their slot back;
    /// returns how many.
    fn reclaim_no_shows(&mut self, now: Millis) -> u64 {
        let before = self.no_shows;
        while let Some(&(due, visitor)) = self.arrivals.first() {
            if due > now {
                break;
            }
            self.arrivals.pop_first();
            if let Some(&VisitorState::Admitted {
                expires_at,
                arrival_due: Some(pending),
                ..
            }) = self.visitors.get(&visitor)
                && pending == due
            {
                self.active.remove(&(expires_at, visitor));
                self.depart(visitor, expires_at, now);
                self.no_shows += 1;
            }
        }
        self.no_shows - before
    }

    /// `/api/verify` saw the visitor's pass: they arrived.
    fn arrive(&mut self, visitor: VisitorId) {
        if let Some(VisitorState::Admitted { arrival_due, .. }) = self.visitors.get_mut(&visitor)
            && let Some(due) = arrival_due.take()
        {
            self.arrivals.remove(&(due, visitor));
        }
    }

    /// Gives every admitted visitor not seen yet the whole arrival grace
    /// again from `now`, unless that was done since `seen` (see
    /// `Store::resume_arrivals`); the count of resumptions.
    fn resume_arrivals(&mut self, seen: Option<u64>, now: Millis) -> u64 {
        if seen.is_some_and(|seen| self.arrival_resumptions > seen) {
            return self.arrival_resumptions;
        }
        self.arrival_resumptions += 1;
        let Some(grace) = self.config.arrival_grace_s else {
            return self.arrival_resumptions;
        };
        let resumed_due = now + grace * 1000;
        let earlier: Vec<(Millis, VisitorId)> = self
            .arrivals
            .range(..(resumed_due, VisitorId(0)))
            .copied()
            .collect();
        for (due, visitor) in &earlier {
            self.arrivals.remove(&(*due, *visitor));
            self.arrivals.insert((resumed_due, *visitor));
            if let Some(VisitorState::Admitted { arrival_due, .. }) = self.visitors.get_mut(visitor)
            {
                *arrival_due = Some(resumed_due);
            }
        }
        self.arrival_resumptions
    }

    /// Takes back the visitor's pass (the admission whose pass has `exp`
    /// `pass_exp_s`, if given); a waiting place is left alone. Whether a
    /// pass was taken.
    fn revoke_pass(&mut self, visitor: VisitorId, pass_exp_s: Option<u64>, now: Millis) -> bool {
        match self.visitors.get(&visitor) {
            Some(VisitorState::Admitted { expires_at, .. })
                if pass_exp_s.is_none_or(|exp| exp == *expires_at / 1000) =>
            {
                self.leave(visitor, now);
                true
            }
            _ => false,
        }
    }

    /// Removes the visitor's place or slot, at once; they are told `left`
    /// for a while (`depart`). Returns their place in the order if they
    /// were waiting.
    fn leave(&mut self, visitor: VisitorId, now: Millis) -> Option<Order> {
        match self.visitors.get(&visitor).copied()? {
            VisitorState::Waiting {
                spot, last_seen, ..
            } => {
                self.unqueue(spot, now);
                self.presence.remove(&(last_seen, visitor));
                self.depart(visitor, now, now);
                self.version += 1;
                Some(spot.order())
            }
            VisitorState::Admitted {
                expires_at,
                arrival_due,
                ..
            } => {
                self.active.remove(&(expires_at, visitor));
                if let Some(due) = arrival_due {
                    self.arrivals.remove(&(due, visitor));
                }
                // Told `left` while the pass would have run.
                self.depart(visitor, expires_at, now);
                None
            }
        }
    }

    /// The tick, if one is due, and the events it makes: the opening's
    /// announcement the first time the room is open, then the tick.
    fn tick(&mut self, now: Millis) -> Option<(TickReport, Vec<RoomEvent>)> {
        let tick_ms = self.config.tick_ms;
        let mut events = Vec::new();
        if self.opening_due(now) {
            // The order was fixed as each entrant joined: the opening only
            // says so, and the sockets read their positions.
            self.drawn_announced = true;
            if self.waiting() > 0 {
                self.version += 1;
                events.push(RoomEvent::Drawn {
                    room: self.id.clone(),
                    line: self.summary(),
                });
            }
        }
        // An empty room with a full bucket has nothing to do (as on Redis,
        // where this keeps an idle room's heartbeat to a read).
        let idle = self.waiting() == 0
            && self.active.is_empty()
            && self.tokens >= self.config.admit_per_tick;
        if now < self.last_tick + tick_ms || idle {
            let report = TickReport {
                waiting: self.waiting(),
                active: self.active.len() as u64,
                ..TickReport::default()
            };
            return (!events.is_empty()).then_some((report, events));
        }
        // Keep the cadence: a late tick does not shift every later one.
        self.last_tick += (now - self.last_tick) / tick_ms * tick_ms;
        let departed = self.sweep_abandoned(now);
        let no_shows = self.reclaim_no_shows(now);
        self.tokens = self.config.admit_per_tick;
        let mut admitted = Vec::new();
        if self.opened(now) && !self.config.paused && !self.facts.sold_out {
            let method = self.config.queue_method;
            // `passthrough` lets the whole line in, bucket and cap ignored.
            while method == QueueMethod::Passthrough || (self.tokens > 0 && self.under_cap()) {
                let next = match method {
                    QueueMethod::Random => self.random_waiting(),
                    _ => self.first_waiting(),
                };
                let Some(visitor) = next else {
                    break;
                };
                let Some(VisitorState::Waiting {
                    spot, last_seen, ..
                }) = self.visitors.get(&visitor).copied()
                else {
                    unreachable!("a visitor in line is waiting");
                };
                self.presence.remove(&(last_seen, visitor));
                self.unqueue(spot, now);
                admitted.push(self.admit(visitor, spot.order(), now));
            }
        }
        self.record_admissions(now, admitted.len() as u64);
        self.last_tick_ran = Some(now);
        self.achieved_rate = self.measure_rate(now);
        self.version += 1;
        let report = TickReport {
            admitted: admitted.len() as u64,
            abandoned: departed.len() as u64,
            no_shows,
            waiting: self.waiting(),
            active: self.active.len() as u64,
        };
        events.push(RoomEvent::Tick {
            room: self.id.clone(),
            admitted: admitted.into(),
            departed: departed.into(),
            line: self.summary(),
        });
        Some((report, events))
    }

    /// The room has opened and nobody has been told yet.
    fn opening_due(&self, now: Millis) -> bool {
        self.draw.is_some() && !self.drawn_announced && self.opened(now)
    }

    /// When this room next needs its tick asked for: the tick period, or
    /// sooner for an opening to announce.
    fn next_due_in_ms(&self, now: Millis) -> Millis {
        let tick = match (self.last_tick + self.config.tick_ms).saturating_sub(now) {
            // Due but with nothing to do: ask again a period from now.
            0 => self.config.tick_ms,
            wait => wait,
        };
        match self.config.opens_at {
            Some(at) if self.draw.is_some() && !self.drawn_announced => {
                tick.min(at.0.saturating_sub(now).max(1))
            }
            _ => tick,
        }
    }

    fn draw_info(&self, now: Millis) -> Option<DrawInfo> {
        let (draw, opens_at) = (self.draw.as_ref()?, self.config.opens_at?);
        let opened = self.opened(now);
        Some(DrawInfo {
            opens_at,
            commitment: draw.commitment.clone(),
            seed: opened.then(|| draw.seed.to_hex()),
            entrants: draw.entries.len() as u64,
            drawn_at: opened.then_some(opens_at),
        })
    }

    fn info(&self, now: Millis) -> RoomInfo {
        let oldest_wait_ms = self
            .first_waiting()
            .and_then(|visitor| match self.visitors.get(&visitor) {
                Some(VisitorState::Waiting { joined_at, .. }) => {
                    Some(now.saturating_sub(*joined_at))
                }
                _ => None,
            })
            .unwrap_or(0);
        RoomInfo::new(
            self.id.clone(),
            self.config.clone(),
            RoomStats {
                waiting: self.waiting(),
                active: self.active.len() as u64,
                admitted_total: self.admitted_total,
                admitted_last_minute: self.admitted_since(now.saturating_sub(RATE_WINDOW_MS)),
                oldest_wait_seconds: oldest_wait_ms / 1000,
                turned_away: self.turned_away,
                no_shows: self.no_shows,
                pre_queue: match &self.draw {
                    Some(draw) if !self.opened(now) => draw.waiting(),
                    _ => 0,
                },
            },
            self.draw_info(now),
        )
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn create_room(&self, id: RoomId, config: RoomConfig) -> Result<RoomInfo, StoreError> {
        config.validate().map_err(StoreError::InvalidConfig)?;
        let now = self.clock.now_ms();
        let mut rooms = self.rooms.write();
        if let Some(existing) = rooms.get(&id)
            && !existing.lock().closed
        {
            return Err(StoreError::RoomExists(id));
        }
        // Nothing of a predecessor under this id survives: no order, no
        // hold, no stock (its passes already fail: the new room never
        // admitted them).
        self.sale.wipe(&id);
        let room = Room::new(id.clone(), config, now);
        let info = room.info(now);
        rooms.insert(id, Arc::new(Mutex::new(room)));
        Ok(info)
    }

    async fn configure(&self, id: &RoomId, patch: RoomPatch) -> Result<RoomInfo, StoreError> {
        let (info, event) = self.with_open_room(id, "configure", |room, now| {
            let config = patch
                .apply_to(&room.config)
                .map_err(StoreError::InvalidConfig)?;
            let pre_queue = room.info(now).stats.pre_queue;
            draw::check_schedule(room.config.opens_at, config.opens_at, now, pre_queue)
                .map_err(StoreError::InvalidConfig)?;
            if config.opens_at.is_some() && room.draw.is_none() {
                room.draw = Some(DrawLine::new());
            }
            room.tokens = room.tokens.min(config.admit_per_tick);
            room.facts = Arc::new(RoomFacts::of(
                &config,
                room.facts.stock_left,
                room.facts.sold_out && config.close_when_sold_out,
            ));
            room.config = config;
            let event = RoomEvent::Configured {
                room: id.clone(),
                line: room.summary(),
                facts: room.facts.clone(),
            };
            Ok::<_, StoreError>((room.info(now), event))
        })??;
        self.publish(event);
        Ok(info)
    }

    async fn close_room(&self, id: &RoomId) -> Result<(), StoreError> {
        let handle = self.room_handle(id)?;
        let mut room = HeldRoom::lock(&handle, "close_room");
        if room.closed {
            return Err(StoreError::RoomNotFound(id.clone()));
        }
        let now = self.clock.now_ms();
        *room = Room::new(id.clone(), room.config.clone(), now);
        room.closed = true;
        self.publish(RoomEvent::Closed { room: id.clone() });
        Ok(())
    }

    async fn room(&self, id: &RoomId) -> Result<RoomInfo, StoreError> {
        self.with_open_room(id, "room", |room, now| room.info(now))
            .map_err(|e| match e {
                StoreError::RoomClosed(id) => StoreError::RoomNotFound(id),
                other => other,
            })
    }

    async fn rooms(&self) -> Result<Vec<RoomInfo>, StoreError> {
        let handles: Vec<_> = self.rooms.read().values().cloned().collect();
        let now = self.clock.now_ms();
        let mut infos: Vec<RoomInfo> = handles
            .iter()
            .filter_map(|handle| {
                let mut room = HeldRoom::lock(handle, "rooms");
                (!room.closed).then(|| {
                    room.expire(now, FORGOTTEN_PER_OPERATION);
                    room.info(now)
                })
            })
            .collect();
        infos.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(infos)
    }

    async fn room_ids(&self) -> Result<Vec<RoomId>, StoreError> {
        let rooms = self.rooms.read();
        Ok(rooms
            .iter()
            .filter(|(_, room)| !room.lock().closed)
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn join_with(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        options: &JoinOptions,
    ) -> Result<Place, StoreError> {
        self.with_open_room(id, "join", |room, now| room.join(visitor, options, now))?
    }

    async fn draw_entries(
        &self,
        id: &RoomId,
        after: Option<(DrawKey, EntryId)>,
        limit: usize,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError> {
        self.with_open_room(id, "draw_entries", |room, now| {
            let draw = room.draw.as_ref().ok_or(StoreError::NoDraw)?;
            if !room.opened(now) {
                return Err(StoreError::NotDrawn);
            }
            let from = match after {
                Some((key, _)) => std::ops::Bound::Excluded(key),
                None => std::ops::Bound::Unbounded,
            };
            Ok(draw
                .entries
                .range((from, std::ops::Bound::Unbounded))
                .take(limit)
                .map(|(key, entry)| (*key, *entry))
                .collect())
        })?
    }

    async fn status(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        self.place_after(id, "status", visitor, |room, now| {
            room.mark_present(visitor, now)
        })
    }

    async fn places(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<Vec<Place>, StoreError> {
        let read = self.with_open_room(id, "places", |room, now| {
            visitors
                .iter()
                .map(|visitor| {
                    room.mark_present(*visitor, now);
                    room.place(*visitor, now)
                })
                .collect()
        });
        match read {
            Err(StoreError::RoomClosed(_)) => {
                Ok(visitors.iter().copied().map(closed_place).collect())
            }
            other => other,
        }
    }

    async fn arrive(&self, id: &RoomId, visitor: VisitorId) -> Result<Place, StoreError> {
        self.place_after(id, "arrive", visitor, |room, _| room.arrive(visitor))
    }

    async fn resume_arrivals(&self, id: &RoomId, seen: Option<u64>) -> Result<u64, StoreError> {
        self.with_open_room(id, "resume_arrivals", |room, now| {
            room.resume_arrivals(seen, now)
        })
    }

    async fn revoke_pass(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        pass_exp_s: Option<u64>,
    ) -> Result<bool, StoreError> {
        self.with_open_room(id, "revoke_pass", |room, now| {
            room.revoke_pass(visitor, pass_exp_s, now)
        })
    }

    async fn user_of(&self, id: &RoomId, visitor: VisitorId) -> Result<Option<String>, StoreError> {
        self.with_open_room(id, "user_of", |room, _| room.user_of.get(&visitor).cloned())
    }

    async fn leave(&self, id: &RoomId, visitor: VisitorId) -> Result<(), StoreError> {
        let left = self.with_open_room(id, "leave", |room, now| {
            room.leave(visitor, now).map(|order| RoomEvent::Left {
                room: id.clone(),
                order,
                line: room.summary(),
            })
        });
        match left {
            Ok(Some(event)) => self.publish(event),
            Ok(None) | Err(StoreError::RoomClosed(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    async fn touch(&self, id: &RoomId, visitors: &[VisitorId]) -> Result<(), StoreError> {
        let handle = self.room_handle(id)?;
        let mut room = HeldRoom::lock(&handle, "touch");
        // A closed room has no one to mark (as lua/touch.lua): no error, so
        // the promoter does not warn about it while its sockets go.
        if room.closed {
            return Ok(());
        }
        let now = self.clock.now_ms();
        room.expire(now, FORGOTTEN_PER_OPERATION);
        for visitor in visitors {
            room.mark_present(*visitor, now);
        }
        Ok(())
    }

    async fn tick(&self, id: &RoomId) -> Result<Tick, StoreError> {
        let handle = self.room_handle(id)?;
        let mut room = HeldRoom::lock(&handle, "tick");
        if room.closed {
            return Err(StoreError::RoomClosed(id.clone()));
        }
        let now = self.clock.now_ms();
        room.expire(now, FORGOTTEN_PER_TICK);
        let ran = room.tick(now).map(|(report, events)| {
            // Published under the room's lock so events leave in version order.
            for event in events {
                self.publish(event);
            }
            report
        });
        Ok(Tick {
            ran,
            busy: room.waiting() > 0 || !room.active.is_empty(),
            next_due_in_ms: room.next_due_in_ms(now),
            arrival_resumptions: room.arrival_resumptions,
        })
    }

    async fn announce_stock(&self, id: &RoomId, stock: Stock) -> Result<(), StoreError> {
        let event = self.with_open_room(id, "announce_stock", |room, _| {
            let facts = RoomFacts::of(
                &room.config,
                Some(stock.left),
                stock.sold_out() && room.config.close_when_sold_out,
            );
            if *room.facts == facts {
                return None;
            }
            room.facts = Arc::new(facts);
            Some(RoomEvent::Configured {
                room: id.clone(),
                line: room.summary(),
                facts: room.facts.clone(),
            })
        })?;
        if let Some(event) = event {
            self.publish(event);
        }
        Ok(())
    }

    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.events.subscribe()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn end_admin_session(&self, id: &str, until: Millis) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let mut ended = self.ended_sessions.lock();
        ended.retain(|_, until| *until > now);
        ended.insert(id.to_string(), until);
        Ok(())
    }

    async fn admin_session_ended(&self, id: &str) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        Ok(self
            .ended_sessions
            .lock()
            .get(id)
            .is_some_and(|until| *until > now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24, item 18: a visitor who left, was abandoned, ran out or was
    /// reclaimed leaves nothing behind in the room.
    #[test]
    fn nothing_of_a_visitor_stays_once_they_are_gone() {
        let at = |s: u64| 1_767_225_600_000 + s * 1000;
        let mut config = RoomConfig::new("R", "/x");
        (config.admit_per_tick, config.abandon_after_s) = (2, 20);
        (config.pass_ttl_s, config.arrival_grace_s) = (60, Some(5));
        let mut room = Room::new(RoomId::parse("r").unwrap(), config, at(0));
        let joined: Vec<VisitorId> = (0..6)
            .map(|n| {
                let visitor = VisitorId::random();
                let known = JoinOptions {
                    user: Some(format!("user-{n}")),
                    ..JoinOptions::default()
                };
                room.join(visitor, &known, at(0)).unwrap();
                visitor
            })
            .collect();
        room.leave(joined[2], at(0)); // waiting
        room.leave(joined[0], at(0)); // admitted
        assert!(
            [joined[0], joined[2]]
                .iter()
                .all(|gone| !room.visitors.contains_key(gone) && !room.user_of.contains_key(gone)),
            "gone at once"
        );
        assert_eq!((room.users.len(), room.departed.len()), (4, 2));
        // #1's pass is reclaimed unseen, #3 is abandoned, #4 and #5 (still
        // polling) are admitted at 20 s; every pass has run out at 80 s.
        room.mark_present(joined[4], at(15));
        room.mark_present(joined[5], at(15));
        for now in [at(20), at(80)] {
            room.expire(now, FORGOTTEN_PER_TICK);
            room.tick(now);
        }
        assert!(room.visitors.is_empty(), "{:?}", room.visitors);
        assert!(room.departed.is_empty() && room.departures.is_empty());
        assert!(room.users.is_empty() && room.user_of.is_empty());
        assert!(room.presence.is_empty() && room.active.is_empty() && room.arrivals.is_empty());
    }

    #[test]
    fn an_operation_forgets_a_bounded_number_of_departed_visitors() {
        let now = 1_000_000;
        let mut room = Room::new(RoomId::parse("r").unwrap(), RoomConfig::new("R", "/x"), now);
        for _ in 0..FORGOTTEN_PER_OPERATION + FORGOTTEN_PER_TICK + 10 {
            room.depart(VisitorId::random(), now, now);
        }
        let later = now + room.config.abandon_after_s * 1000;
        room.expire(later - 1, FORGOTTEN_PER_TICK);
        assert_eq!(
            room.departed.len(),
            FORGOTTEN_PER_OPERATION + FORGOTTEN_PER_TICK + 10
        );
        room.expire(later, FORGOTTEN_PER_OPERATION);
        assert_eq!(room.departed.len(), FORGOTTEN_PER_TICK + 10);
        room.expire(later, FORGOTTEN_PER_TICK);
        assert_eq!(room.departed.len(), 10);
        room.expire(later, FORGOTTEN_PER_TICK);
        assert!(room.departed.is_empty() && room.departures.is_empty());
    }
}
