//! One room's rules, every operation on it a method that takes the time and
//! the chance it needs and does no I/O: joining, the tick (bucket, cap,
//! queue method, the opening), leaving, expiry, abandonment, no-shows,
//! revocation, presence and what each visitor is told. The memory store is
//! this behind a lock; the Lua scripts implement the same rules, and
//! `tests/stores/differential.rs` holds them together.

use std::collections::HashMap;
use std::sync::Arc;

use super::callbacks::{Callbacks, HELD_PRESENCE};
use super::departures::{Departure, Departures};
use super::door::Door;
use super::draw_line::DrawLine;
use super::line::{Line, Spot};
use super::pace::Pace;
use super::passes::{Passes, Resumed, renewed_lapse};
use crate::words::autotune::{AutotuneReport, AutotuneStats, Failure, Tuning};
use crate::words::chance::{Dice, PickSeed};
use crate::words::clock::{Millis, Moment};
use crate::words::codes::{CodeHash, Codes, Granted, GroupSummary, NewGroup, Refused};
use crate::words::constants::{AWAY_REMEMBERED_MS, RATE_WINDOW_MS, SWEEP_AGAIN_MS, SWEEP_SLICE};
use crate::words::draw::{self, DrawInfo, DrawKey, EntryId};
use crate::words::notify::{Ask, EventKind, OutboxEvent};
use crate::words::operations::{JoinOptions, PassTakenBack, RoomFigures, StoreError, TickReport};
use crate::words::report::{Arrival, Ledger, ReportFacts, Swept};
use crate::words::room_table::{RoomTable, TableHash};
use crate::words::sale::Stock;
use crate::words::{
    Admission, ConfigPatch, LineSummary, Order, Place, PlaceState, QueueMethod, RoomConfig,
    RoomEvent, RoomFacts, RoomId, RoomInfo, RoomStats, VisitorId,
};

/// Departed visitors forgotten per operation on the room at most, and per
/// tick: each is forgotten once, so no operation does more than a bounded
/// amount of it, and the ticks (which an idle room still gets, once per
/// heartbeat) keep up with any rate of leaving.
pub const FORGOTTEN_PER_OPERATION: usize = 64;
pub const FORGOTTEN_PER_TICK: usize = 4_096;

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
        /// When the session lapses unless a verify, gate or sale call
        /// renews it (`renew`); `expires_at` when the room had no sessions
        /// at the admission. The pass's key in `Passes`.
        lapse_at: Millis,
        /// When the pass is reclaimed unless `/api/verify` sees it first
        /// (`arrival_grace_s`); `None` once seen, or with no grace.
        arrival_due: Option<Millis>,
    },
}

pub struct RoomModel {
    id: RoomId,
    config: RoomConfig,
    /// What the config says to every status, shared with every place handed out.
    facts: Arc<RoomFacts>,
    version: u64,
    /// Visitors with a place or a pass. Expired visitors are forgotten: an
    /// unknown visitor and an expired one are told the same thing.
    visitors: HashMap<VisitorId, VisitorState>,
    line: Line,
    passes: Passes,
    pace: Pace,
    door: Door,
    departed: Departures,
    /// Whether the opening was announced (`RoomEvent::Drawn`).
    drawn_announced: bool,
    /// The last tick filled a sweep's slice: the next call sweeps on,
    /// whether a tick is due or not.
    sweep_left: bool,
    /// The last expiry filled its slice: passes that ran out are left.
    passes_left: bool,
    /// The last tick admitted a whole slice: the next call admits on.
    admit_left: bool,
    /// Known users (a user token's `sub`) → the visitor holding their place.
    users: HashMap<String, VisitorId>,
    /// And back: the user whose place a visitor holds.
    user_of: HashMap<VisitorId, String>,
    /// The rooms file's table applied last to this room, if any.
    applied: Option<TableHash>,
    /// The room's priority codes.
    codes: Codes,
    /// The group each visitor in the priority line joined with.
    groups_of: HashMap<VisitorId, Arc<str>>,
    /// What the room's report counts, from its making.
    ledger: Ledger,
    /// An operator paused the room: the schedule waits until they unpause.
    schedule_held: bool,
    /// Autotune's rate, samples and decisions.
    tuning: Tuning,
    /// Who asked to be notified, and the outbox.
    callbacks: Callbacks,
}

impl RoomModel {
    /// A new room; its draw starts with the dice's seed if it has an `opens_at`.
    pub fn new(id: RoomId, config: RoomConfig, now: Millis, dice: &Dice) -> Self {
        Self {
            id,
            facts: Arc::new(RoomFacts::of(&config, None, false)),
            line: Line::new(
                (config.opens_at.is_some() || config.schedule.sets_opening())
                    .then(|| dice.draw_seed()),
            ),
            pace: Pace::new(&config, now),
            config,
            version: 0,
            visitors: HashMap::new(),
            passes: Passes::default(),
            door: Door::default(),
            departed: Departures::default(),
            drawn_announced: false,
            sweep_left: false,
            passes_left: false,
            admit_left: false,
            users: HashMap::new(),
            user_of: HashMap::new(),
            applied: None,
            codes: Codes::default(),
            groups_of: HashMap::new(),
            ledger: Ledger::new(now),
            schedule_held: false,
            tuning: Tuning::new(0),
            callbacks: Callbacks::default(),
        }
        .started()
    }

    /// A new room's own: autotune's rate starts at the room's, and a room
    /// made paused holds its schedule, as an operator's pause does.
    fn started(mut self) -> Self {
        self.schedule_held = self.config.paused;
        self.tuning = Tuning::new(self.config.admit_per_tick);
        self
    }

    /// A new room made of a table of the rooms file, which it remembers.
    pub fn from_table(table: &RoomTable, now: Millis, dice: &Dice) -> Result<Self, StoreError> {
        let config = table.patch.new_room().map_err(StoreError::InvalidConfig)?;
        let mut room = Self::new(table.id.clone(), config, now, dice);
        room.applied = Some(table.hash.clone());
        Ok(room)
    }

    /// The rooms file's table applied last, if any.
    pub fn applied(&self) -> Option<&TableHash> {
        self.applied.as_ref()
    }

    /// Applies a table of the rooms file as an operator's change of the
    /// fields it names, unless it is the table applied last: `None` then,
    /// and nothing changes (what the operator changed since stays).
    pub fn apply_table(
        &mut self,
        table: &RoomTable,
        now: Millis,
        dice: &Dice,
    ) -> Result<Option<(RoomInfo, RoomEvent)>, StoreError> {
        if self.applied.as_ref() == Some(&table.hash) {
            return Ok(None);
        }
        let changed = self.configure(&table.patch, now, dice)?;
        self.applied = Some(table.hash.clone());
        Ok(Some(changed))
    }

    pub fn config(&self) -> &RoomConfig {
        &self.config
    }

    /// What comes first in every operation on the room, at `now`: the
    /// schedule's entries due ([`RoomModel::catch_up`]: its event, if one
    /// applied), then what time alone ends ([`RoomModel::expire`]).
    pub fn begin(&mut self, now: Millis, at_most: usize) -> Option<RoomEvent> {
        let event = self.catch_up(now);
        self.expire(now, at_most);
        event
    }

    /// What time alone ends: passes run out (a slice of them at most: a
    /// mass expiry is swept over several calls, and the cap counts a pass
    /// until it is swept, never fewer), and departed visitors are forgotten
    /// (up to `at_most` of them).
    pub fn expire(&mut self, now: Millis, at_most: usize) {
        let mut swept = 0;
        while swept < SWEEP_SLICE {
            let Some((visitor, bypassed)) = self.passes.pop_expired(now) else {
                break;
            };
            swept += 1;
            let Some(VisitorState::Admitted {
                expires_at,
                arrival_due,
                ..
            }) = self.visitors.get(&visitor).copied()
            else {
                continue;
            };
            if expires_at > now && self.config.session_idle_s.is_none() {
                // Its session lapsed, but sessions are off since: the pass
                // lasts until its expiry.
                self.passes.hold_again(visitor, expires_at, bypassed);
                self.set_lapse(visitor, expires_at);
                continue;
            }
            if let Some(due) = arrival_due {
                self.passes.arrived(due, visitor);
            }
            self.end_pass(visitor, expires_at, now);
        }
        // As the last call before a tick left it: that tick sweeps on.
        self.passes_left = swept == SWEEP_SLICE;
        self.departed.forget(now, at_most);
    }

    /// Forgets the visitor if their pass ran out (or their session
    /// lapsed) and no sweep has come to it yet: an operation on one visitor
    /// never waits for the sweep.
    fn expire_visitor(&mut self, visitor: VisitorId, now: Millis) {
        if let Some(VisitorState::Admitted {
            expires_at,
            lapse_at,
            arrival_due,
            ..
        }) = self.visitors.get(&visitor).copied()
            && self.pass_over(expires_at, lapse_at, now)
        {
            self.passes.take_back(visitor, lapse_at, arrival_due);
            self.end_pass(visitor, expires_at, now);
        }
    }

    /// The session's idle time, with sessions on.
    fn session_idle_ms(&self) -> Option<Millis> {
        self.config.session_idle_s.map(|idle| idle * 1000)
    }

    /// Whether a pass is no longer valid at `now`: run out, or its session
    /// lapsed (with sessions on: off, a pass lasts until its expiry).
    fn pass_over(&self, expires_at: Millis, lapse_at: Millis, now: Millis) -> bool {
        expires_at <= now || (lapse_at <= now && self.config.session_idle_s.is_some())
    }

    /// An admitted visitor whose pass is no longer held is forgotten; one
    /// whose session lapsed before the pass's expiry is counted, and told
    /// so (`PlaceState::Lapsed`) until that expiry.
    fn end_pass(&mut self, visitor: VisitorId, expires_at: Millis, now: Millis) {
        self.forget(visitor);
        if expires_at > now {
            self.ledger.counts.sessions_lapsed += 1;
            self.departed
                .depart(visitor, expires_at, Departure::Lapsed { expires_at });
        }
    }

    fn set_lapse(&mut self, visitor: VisitorId, to: Millis) {
        if let Some(VisitorState::Admitted { lapse_at, .. }) = self.visitors.get_mut(&visitor) {
            *lapse_at = to;
        }
    }

    /// A verify, gate or sale call accepted the visitor's pass (the one
    /// that expires at `pass_exp_s`) at `now`: with sessions on, its
    /// session lasts on (`renewed_lapse`). A lapsed one stays lapsed.
    fn renew(&mut self, visitor: VisitorId, pass_exp_s: u64, now: Millis) {
        let Some(idle_ms) = self.session_idle_ms() else {
            return;
        };
        let Some(&VisitorState::Admitted {
            expires_at,
            lapse_at,
            ..
        }) = self.visitors.get(&visitor)
        else {
            return;
        };
        if expires_at / 1000 != pass_exp_s || self.pass_over(expires_at, lapse_at, now) {
            return;
        }
        if let Some(to) = renewed_lapse(lapse_at, expires_at, idle_ms, now) {
            self.passes.move_end(visitor, lapse_at, to);
            self.set_lapse(visitor, to);
        }
    }

    /// Applies an operator's change (and then the schedule's entries due,
    /// if the change unpaused the room); the event that tells every node.
    /// An operator's pause holds the schedule (api.md).
    pub fn configure(
        &mut self,
        patch: &ConfigPatch,
        now: Millis,
        dice: &Dice,
    ) -> Result<(RoomInfo, RoomEvent), StoreError> {
        let config = patch
            .apply_to(&self.config)
            .map_err(StoreError::InvalidConfig)?;
        self.check_opening(&self.config, &config, now)
            .map_err(StoreError::InvalidConfig)?;
        if (config.opens_at.is_some() || config.schedule.sets_opening()) && self.line.draw.is_none()
        {
            self.line.draw = Some(DrawLine::new(dice.draw_seed()));
        }
        if patch.get("paused").is_some_and(|p| !p.is_null()) {
            self.schedule_held = config.paused;
        }
        self.install(config, now);
        let event = self
            .catch_up(now)
            .unwrap_or_else(|| self.configured_event());
        Ok((self.info(now), event))
    }

    /// The opening's rule for a change from `old` to `new` at `now`
    /// (`draw::check_schedule`), with the line and pre-queue as they are.
    fn check_opening(
        &self,
        old: &RoomConfig,
        new: &RoomConfig,
        now: Millis,
    ) -> Result<(), crate::words::ConfigError> {
        draw::check_schedule(
            old.opens_at,
            new.opens_at,
            now,
            self.info(now).stats.waiting_for_opening(),
        )
    }

    /// Puts a checked config in place: the bucket, the pace, autotune's
    /// rate and what every status says follow it.
    fn install(&mut self, config: RoomConfig, now: Millis) {
        self.tuning.configured(
            (self.config.autotune.as_ref(), self.config.admit_per_tick),
            (config.autotune.as_ref(), config.admit_per_tick),
        );
        let per_tick = self
            .tuning
            .rate(config.autotune.as_ref(), config.admit_per_tick);
        self.pace.tokens = self.pace.tokens.min(per_tick);
        let pace = |c: &RoomConfig| (c.admit_per_tick, c.tick_ms, c.paused);
        if pace(&config) != pace(&self.config) {
            self.pace.changed_at(now);
        }
        self.facts = Arc::new(RoomFacts::of(
            &config,
            self.facts.stock_left,
            self.facts.sold_out && config.close_when_sold_out,
        ));
        self.config = config;
    }

    fn configured_event(&self) -> RoomEvent {
        RoomEvent::Configured {
            room: self.id.clone(),
            line: self.summary(),
            facts: self.facts.clone(),
        }
    }

    /// Applies the schedule's entries due at `now` (unless an operator's
    /// pause holds them), as an operator's change would be applied: the
    /// first operation at or after an entry's time applies it (design
    /// rule 15). The event that tells every node, if anything applied.
    pub fn catch_up(&mut self, now: Millis) -> Option<RoomEvent> {
        if self.schedule_held {
            return None;
        }
        let next = self
            .config
            .apply_due(now, |old, new| self.check_opening(old, new, now))?;
        self.install(next, now);
        Some(self.configured_event())
    }

    /// The rate this room's ticks admit at: `admit_per_tick`, or autotune's.
    fn per_tick(&self) -> u32 {
        self.tuning
            .rate(self.config.autotune.as_ref(), self.config.admit_per_tick)
    }

    /// Keeps a health sample a node took for the room (`op::RecordSample`).
    pub fn record_sample(&mut self, epoch: u64, latency_ms: u64, failure: Option<Failure>) {
        if self.config.autotune.is_some() {
            self.tuning.record(epoch, latency_ms, failure);
        }
    }

    /// Drops everything the room keeps of a visitor (their user's place
    /// included, if it was theirs); returns the state they were in.
    fn forget(&mut self, visitor: VisitorId) -> Option<VisitorState> {
        self.groups_of.remove(&visitor);
        self.callbacks.forget(visitor);
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
        self.departed.depart(visitor, until, Departure::Left);
    }

    /// Whether the room is open: it has no `opens_at`, or that has passed.
    fn opened(&self, now: Millis) -> bool {
        self.config.opens_at.is_none_or(|at| now >= at.0)
    }

    /// Someone waits or holds a pass: the room needs its ticks.
    pub fn busy(&self) -> bool {
        self.line.waiting() > 0 || self.passes.held() > 0
    }

    pub fn arrival_resumptions(&self) -> u64 {
        self.passes.resumptions
    }

    pub fn user_of(&self, visitor: VisitorId) -> Option<String> {
        self.user_of.get(&visitor).cloned()
    }

    /// Drops waiting visitors not seen for `abandon_after_s`, a slice at
    /// most; returns their places, and whether the slice was full.
    fn sweep_abandoned(&mut self, now: Millis) -> (Vec<Order>, bool) {
        let grace = self.config.abandon_after_s * 1000;
        let opened = self.opened(now);
        let mut departed = Vec::new();
        let mut swept = 0;
        while let Some((last_seen, visitor)) = self.line.stalest() {
            if last_seen + grace > now || swept == SWEEP_SLICE {
                break;
            }
            swept += 1;
            match self.visitors.get(&visitor).copied() {
                Some(VisitorState::Waiting { spot, .. }) => {
                    self.forget(visitor);
                    self.departed
                        .depart(visitor, now + AWAY_REMEMBERED_MS, Departure::Away);
                    self.line.remove(spot, last_seen, visitor, opened);
                    departed.push(spot.order());
                }
                // Only those waiting are seen by the line; were another
                // there, it would be dropped from the sweep, not admitted.
                _ => self.line.unsee(visitor, last_seen),
            }
        }
        (departed, swept == SWEEP_SLICE)
    }

    fn under_cap(&self) -> bool {
        self.config
            .max_active
            .is_none_or(|cap| self.passes.held() < cap)
    }

    /// A new pass's expiry, and its session's lapse (the idle clock starts
    /// at the admission).
    fn pass_ends(&self, now: Millis) -> (Millis, Millis) {
        let expires_at = now + self.config.pass_ttl_s * 1000;
        let lapse_at = self
            .session_idle_ms()
            .map_or(expires_at, |idle| (now + idle).min(expires_at));
        (expires_at, lapse_at)
    }

    fn admit(&mut self, visitor: VisitorId, order: Order, now: Millis) -> Admission {
        let (expires_at, mut lapse_at) = self.pass_ends(now);
        let mut arrival_due = self.config.arrival_grace_s.map(|grace| now + grace * 1000);
        if self.callbacks.asked(visitor).is_some() {
            // Called back from afar: the pass waits `notify_hold_s` for them.
            let held = (now + self.config.notify_hold_s * 1000).min(expires_at);
            lapse_at = lapse_at.max(held);
            arrival_due = arrival_due.map(|due| due.max(held));
            self.callbacks.left_line(visitor);
            self.callbacks
                .write(EventKind::Admitted, visitor, None, now);
        }
        self.groups_of.remove(&visitor);
        self.passes.issue(visitor, lapse_at, arrival_due);
        self.visitors.insert(
            visitor,
            VisitorState::Admitted {
                admitted_at: now,
                expires_at,
                lapse_at,
                arrival_due,
            },
        );
        // `passthrough` admits past the bucket.
        self.pace.tokens = self.pace.tokens.saturating_sub(1);
        Admission {
            visitor,
            order,
            admitted_at: now,
            expires_at,
        }
    }

    /// A pass outside the cap: no token spent, no admission counted in the
    /// rate (the line's ETA is not about these), no arrival awaited.
    fn admit_bypassed(&mut self, visitor: VisitorId, now: Millis) {
        let (expires_at, lapse_at) = self.pass_ends(now);
        self.passes.issue_bypassed(visitor, lapse_at);
        self.visitors.insert(
            visitor,
            VisitorState::Admitted {
                admitted_at: now,
                expires_at,
                lapse_at,
                arrival_due: None,
            },
        );
    }

    /// The room's figures for the metrics (`Tick::figures`).
    pub fn figures(&self, now: Millis) -> RoomFigures {
        let line = self.summary();
        RoomFigures {
            waiting: line.waiting,
            active: self.passes.held(),
            max_active: self.config.max_active,
            paused: self.config.paused,
            opened: self.opened(now),
            tail_eta_s: line.eta_seconds(line.waiting),
            admitted_last_minute: self.pace.admitted_since(now.saturating_sub(RATE_WINDOW_MS)),
            sessions_lapsed: self.ledger.counts.sessions_lapsed,
            admit_per_tick_effective: self.per_tick(),
        }
    }

    fn summary(&self) -> LineSummary {
        LineSummary {
            version: self.version,
            waiting: self.line.waiting(),
            rate_per_s: self.pace.rate_per_s(&self.config, self.per_tick()),
            paused: self.config.paused,
            tick_at: self.pace.last_tick_ran,
        }
    }

    /// What the visitor is told now.
    pub fn place(&self, visitor: VisitorId, now: Millis) -> Place {
        let state = match self.visitors.get(&visitor) {
            // A line closed for a sold-out sale: its places stay, unused.
            Some(VisitorState::Waiting { .. }) if self.facts.sold_out => PlaceState::Closed,
            Some(VisitorState::Waiting {
                spot: Spot::Drawn { entry, .. } | Spot::PriorityDrawn { entry, .. },
                ..
            }) if !self.opened(now) => PlaceState::PreQueue { entry: *entry },
            Some(VisitorState::Waiting { spot, .. }) => PlaceState::Waiting {
                order: spot.order(),
                position: self.line.position(*spot),
            },
            // A pass that ran out is gone, swept or not; so is a lapsed
            // session's.
            Some(VisitorState::Admitted { expires_at, .. }) if *expires_at <= now => {
                PlaceState::Expired
            }
            Some(VisitorState::Admitted {
                expires_at,
                lapse_at,
                ..
            }) if self.pass_over(*expires_at, *lapse_at, now) => PlaceState::Lapsed {
                expires_at: *expires_at,
            },
            Some(VisitorState::Admitted {
                admitted_at,
                expires_at,
                ..
            }) => PlaceState::Admitted {
                admitted_at: *admitted_at,
                expires_at: *expires_at,
            },
            None => match self.departed.departure(visitor, now) {
                Some(Departure::Left) => PlaceState::Left,
                Some(Departure::Away) => PlaceState::Away,
                Some(Departure::Lapsed { expires_at }) => PlaceState::Lapsed { expires_at },
                None => PlaceState::Expired,
            },
        };
        let priority = match state {
            PlaceState::Waiting { .. } | PlaceState::PreQueue { .. } => {
                self.groups_of.get(&visitor).cloned()
            }
            _ => None,
        };
        let notify = matches!(
            state,
            PlaceState::Waiting { .. } | PlaceState::PreQueue { .. } | PlaceState::Admitted { .. }
        ) && self.callbacks.asked(visitor).is_some();
        Place {
            visitor,
            state,
            line: self.summary(),
            facts: self.facts.clone(),
            priority,
            notify,
        }
    }

    /// Keeps the visitor's request to be notified (`request`), or drops it
    /// (`None`): only a waiting visitor may ask. While it holds, the place
    /// is kept however long they are away, until `near` gives them
    /// `notify_return_s` to come back.
    pub fn notify(
        &mut self,
        visitor: VisitorId,
        ask: Option<&Ask>,
        now: Millis,
    ) -> Result<Place, StoreError> {
        let Some(&VisitorState::Waiting {
            spot, last_seen, ..
        }) = self.visitors.get(&visitor)
        else {
            if ask.is_some() {
                return Err(StoreError::NotWaiting);
            }
            self.callbacks.forget(visitor);
            return Ok(self.place(visitor, now));
        };
        let Some(ask) = ask else {
            self.callbacks.forget(visitor);
            self.set_presence(visitor, now);
            return Ok(self.place(visitor, now));
        };
        if !self.callbacks.may_ask(visitor, &ask.client, ask.per_client) {
            return Err(StoreError::TooManyNotifications);
        }
        if let Some(limit) = &ask.join_limit {
            self.door.spend_join(limit, now)?;
        }
        let near = (self.config.queue_method != QueueMethod::Random).then(|| spot.order());
        self.callbacks
            .ask(visitor, ask.request.clone(), ask.client.clone(), near);
        let near_to_come = self
            .callbacks
            .asked(visitor)
            .is_some_and(|asked| asked.pending_near.is_some());
        // Kept while away until `near`; after it, the return window stays.
        let held = if near_to_come || near.is_none() {
            HELD_PRESENCE
        } else {
            last_seen
        };
        self.set_presence(visitor, held.max(now));
        Ok(self.place(visitor, now))
    }

    /// Sets when a waiting visitor counts as last seen (the abandonment
    /// sweep drops them `abandon_after_s` after it).
    fn set_presence(&mut self, visitor: VisitorId, to: Millis) {
        if let Some(VisitorState::Waiting { last_seen, .. }) = self.visitors.get_mut(&visitor) {
            self.line.seen(visitor, *last_seen, to);
            *last_seen = to;
        }
    }

    /// Spends the visitor's resume code of `kind` (a notification's link):
    /// the place as it is now, and the visitor is present. A code spent
    /// before is `ResumeUsed`; once the place ended, its state tells so.
    pub fn resume(
        &mut self,
        visitor: VisitorId,
        kind: EventKind,
        now: Millis,
    ) -> Result<Place, StoreError> {
        match self.callbacks.spend(visitor, kind) {
            Some(false) => Err(StoreError::ResumeUsed),
            _ => {
                self.mark_present(visitor, now);
                Ok(self.place(visitor, now))
            }
        }
    }

    /// Up to `limit` events of the outbox for `consumer` (`op::ClaimEvents`).
    pub fn claim_events(
        &mut self,
        consumer: &str,
        takeover_ms: Millis,
        limit: usize,
        now: Millis,
    ) -> Vec<OutboxEvent> {
        self.callbacks.claim(consumer, takeover_ms, limit, now)
    }

    /// `op::HoldEvents`.
    pub fn hold_events(&mut self, consumer: &str, entries: &[String], now: Millis) -> Vec<String> {
        self.callbacks.hold(consumer, entries, now)
    }

    /// `op::SettleEvents`.
    pub fn settle_events(&mut self, entries: &[String], push_gone: &[VisitorId]) {
        self.callbacks.settle(entries);
        for visitor in push_gone {
            self.callbacks.drop_push(*visitor);
        }
    }

    /// Events in the outbox, not yet settled.
    pub fn outbox_pending(&self) -> u64 {
        self.callbacks.pending()
    }

    /// Sends `near` to those who asked and now have `ahead` or fewer
    /// ahead: the line's head is looked at, no deeper than the largest
    /// `ahead` asked in the room (`MAX_AHEAD` at most), so the cost follows
    /// those called, never the crowd. None in a `random` room (no positions) or before
    /// the opening. Each is given `notify_return_s` to come back.
    fn call_near(&mut self, now: Millis) {
        if !self.callbacks.any()
            || !self.opened(now)
            || self.config.queue_method == QueueMethod::Random
        {
            return;
        }
        let mut due = Vec::new();
        for (order, visitor) in self.callbacks.awaiting_near() {
            let Some(VisitorState::Waiting { spot, .. }) = self.visitors.get(&visitor) else {
                continue;
            };
            let position = self.line.position(*spot);
            if position > u64::from(self.callbacks.reach()) + 1 {
                break;
            }
            let ahead = self
                .callbacks
                .asked(visitor)
                .map_or(0, |asked| u64::from(asked.request.ahead));
            if position <= ahead + 1 {
                due.push((order, visitor, position));
            }
        }
        let back_by = (now + self.config.notify_return_s * 1000)
            .saturating_sub(self.config.abandon_after_s * 1000);
        for (order, visitor, position) in due {
            self.callbacks.near_sent(visitor, order);
            self.callbacks
                .write(EventKind::Near, visitor, Some(position), now);
            self.set_presence(visitor, back_by);
        }
    }

    /// The visitor is present (they asked, or hold a socket).
    pub fn mark_present(&mut self, visitor: VisitorId, now: Millis) {
        if let Some(VisitorState::Waiting { last_seen, .. }) = self.visitors.get_mut(&visitor)
            && *last_seen < now
        {
            self.line.seen(visitor, *last_seen, now);
            *last_seen = now;
        }
    }

    /// Joins, or returns the visitor's (or their user's) place; with a
    /// valid code, in the priority line (moving a visitor waiting in the
    /// general line there). The event, when the priority line took someone.
    /// A refusal by a limit is counted in the report (`turned_away`).
    pub fn join(
        &mut self,
        visitor: VisitorId,
        options: &JoinOptions,
        now: Millis,
        dice: &Dice,
    ) -> Result<(Place, Option<RoomEvent>), StoreError> {
        let joined = self.take_place(visitor, options, now, dice);
        if let Err(error) = &joined {
            self.ledger.turned_away(error);
        }
        joined
    }

    fn take_place(
        &mut self,
        visitor: VisitorId,
        options: &JoinOptions,
        now: Millis,
        dice: &Dice,
    ) -> Result<(Place, Option<RoomEvent>), StoreError> {
        self.expire_visitor(visitor, now);
        let visitor = match &options.user {
            // One place per user: the user's live place, whoever asks.
            Some(user) => match self.users.get(user).copied() {
                Some(held) => {
                    self.expire_visitor(held, now);
                    if self.visitors.contains_key(&held) {
                        held
                    } else {
                        visitor
                    }
                }
                None => visitor,
            },
            None if self.config.user_required => return Err(StoreError::UserRequired),
            None => visitor,
        };
        let mut event = None;
        match self.visitors.get(&visitor).copied() {
            Some(VisitorState::Waiting {
                spot, last_seen, ..
            }) => {
                self.mark_present(visitor, now);
                // A code moves a visitor of the general line ahead; one
                // already in the priority line spends nothing.
                if let Some(code) = options.code
                    && !matches!(spot, Spot::Priority { .. } | Spot::PriorityDrawn { .. })
                {
                    let granted = self.grant(code, options, now)?;
                    let seen = last_seen.max(now);
                    self.line.remove(spot, seen, visitor, self.opened(now));
                    let from = Some(spot.order());
                    event = Some(self.enter_priority(visitor, granted, from, dice.entry, now));
                }
            }
            Some(VisitorState::Admitted { .. }) => {}
            // Sold out: new arrivals are told so, and take nothing.
            None if self.facts.sold_out => {
                let mut place = self.place(visitor, now);
                place.state = PlaceState::Closed;
                return Ok((place, None));
            }
            // Straight in for a bypass network's client, whatever the
            // bucket, cap, pause, method or opening; not once closed.
            None if options
                .address
                .is_some_and(|address| self.config.bypass_networks.contains(address)) =>
            {
                self.door.still_accepting(&self.config, now)?;
                self.admit_bypassed(visitor, now);
                self.ledger.arrived(Arrival::Bypassed, self.line.waiting());
            }
            None => {
                let granted = match options.code {
                    Some(code) => Some(self.check_code(code, options, now)?),
                    None if self.config.code_required => return Err(StoreError::CodeRequired),
                    None => None,
                };
                self.door.welcome(&self.config, options, now)?;
                if let (Some(code), Some(granted)) = (options.code, &granted) {
                    self.codes.spend(code, granted);
                }
                event = self.take_new_place(visitor, now, dice.entry, granted);
            }
        }
        if let Some(user) = &options.user {
            self.users.insert(user.clone(), visitor);
            self.user_of.insert(visitor, user.clone());
        }
        Ok((self.place(visitor, now), event))
    }

    /// What a code gives, unspent; looked at only while the join's client
    /// has code guesses left, a wrong one spending one (see `Door::guess`).
    fn check_code(
        &mut self,
        code: CodeHash,
        options: &JoinOptions,
        now: Millis,
    ) -> Result<Granted, StoreError> {
        let codes = &self.codes;
        self.door.guess(options.code_guesses.as_ref(), now, || {
            codes.check(code).map_err(|refused| match refused {
                Refused::Invalid => StoreError::InvalidCode,
                Refused::Used => StoreError::CodeUsed,
            })
        })
    }

    /// Checks a code and spends one use of it.
    fn grant(
        &mut self,
        code: CodeHash,
        options: &JoinOptions,
        now: Millis,
    ) -> Result<Granted, StoreError> {
        let granted = self.check_code(code, options, now)?;
        self.codes.spend(code, &granted);
        Ok(granted)
    }

    /// Puts a visitor at the back of their priority's level (from the
    /// general line's `from`, if they waited there); the event that moves
    /// everyone behind.
    fn enter_priority(
        &mut self,
        visitor: VisitorId,
        granted: Granted,
        from: Option<Order>,
        entry: EntryId,
        now: Millis,
    ) -> RoomEvent {
        let opened = self.opened(now);
        let spot = self
            .line
            .enter_priority(visitor, granted.priority, opened, entry, now);
        let group: Arc<str> = granted.group.into();
        self.groups_of.insert(visitor, group.clone());
        let joined_at = match self.visitors.get(&visitor) {
            Some(VisitorState::Waiting { joined_at, .. }) => *joined_at,
            _ => now,
        };
        self.visitors.insert(
            visitor,
            VisitorState::Waiting {
                spot,
                joined_at,
                last_seen: now,
            },
        );
        if self.callbacks.moved(visitor, spot.order()) {
            self.set_presence(visitor, HELD_PRESENCE);
        }
        self.version += 1;
        RoomEvent::Entered {
            room: self.id.clone(),
            visitor,
            order: spot.order(),
            from,
            group,
            position: self.line.position(spot),
            line: self.summary(),
        }
    }

    /// Adds a group of codes.
    pub fn add_codes(&mut self, group: NewGroup) -> Result<GroupSummary, StoreError> {
        let name = group.group.clone();
        self.codes.add(group).map_err(|exists| {
            if exists {
                StoreError::GroupExists(name)
            } else {
                StoreError::TooManyGroups(crate::words::codes::MAX_GROUPS)
            }
        })
    }

    /// Every group of codes, by name.
    pub fn code_groups(&self) -> Vec<GroupSummary> {
        self.codes.groups()
    }

    /// Removes a group: its unused codes stop working at once.
    pub fn remove_codes(&mut self, group: &str) -> Result<(), StoreError> {
        if self.codes.remove(group) {
            Ok(())
        } else {
            Err(StoreError::GroupNotFound(group.to_string()))
        }
    }

    /// Straight through with room to spare, else at the back of the line
    /// (or in the draw, before the opening), or of the priority line with
    /// a code; the event when the priority line took them.
    fn take_new_place(
        &mut self,
        visitor: VisitorId,
        now: Millis,
        entry: EntryId,
        granted: Option<Granted>,
    ) -> Option<RoomEvent> {
        let opened = self.opened(now);
        let pass_through = opened
            && !self.config.paused
            && (self.config.queue_method == QueueMethod::Passthrough
                || (self.pace.tokens > 0 && self.line.waiting() == 0 && self.under_cap()));
        if pass_through {
            self.admit(visitor, Order::Joined(0), now);
            self.pace.record_admissions(now, 1);
            self.ledger
                .arrived(Arrival::PassedThrough, self.line.waiting());
            return None;
        }
        let event = match granted {
            Some(granted) => Some(self.enter_priority(visitor, granted, None, entry, now)),
            None => {
                let spot = self.line.enter(visitor, opened, entry, now);
                self.visitors.insert(
                    visitor,
                    VisitorState::Waiting {
                        spot,
                        joined_at: now,
                        last_seen: now,
                    },
                );
                None
            }
        };
        self.ledger.arrived(Arrival::Line, self.line.waiting());
        event
    }

    /// Passes whose visitor never arrived in time give their slot back, a
    /// slice of the arrivals due at most; returns how many, and whether the
    /// slice was full.
    ///
    /// An arrival due before the last resumption's deadline, of a visitor
    /// admitted before that resumption, is not due yet: it is moved to that
    /// deadline here, as the sweep meets it (see `resume_arrivals`).
    fn reclaim_no_shows(&mut self, now: Millis) -> (u64, bool) {
        let before = self.passes.no_shows;
        let mut swept = 0;
        while swept < SWEEP_SLICE
            && let Some((due, visitor)) = self.passes.pop_due_arrival(now)
        {
            swept += 1;
            let Some(&VisitorState::Admitted {
                admitted_at,
                expires_at,
                lapse_at,
                arrival_due: Some(pending),
            }) = self.visitors.get(&visitor)
            else {
                continue;
            };
            if pending != due {
                continue;
            }
            if let Some(resumed) = self.passes.resumed
                && admitted_at < resumed.at
                && due < resumed.due
                && resumed.due > now
            {
                self.passes.await_arrival(resumed.due, visitor);
                if let Some(VisitorState::Admitted { arrival_due, .. }) =
                    self.visitors.get_mut(&visitor)
                {
                    *arrival_due = Some(resumed.due);
                }
                continue;
            }
            self.passes.take_back(visitor, lapse_at, None);
            self.depart(visitor, expires_at, now);
            self.passes.no_shows += 1;
        }
        (self.passes.no_shows - before, swept == SWEEP_SLICE)
    }

    /// A verify, gate or sale call read the visitor's place to check their
    /// pass (the one that expires at `pass_exp_s`): they arrived, and their
    /// session, if still live, is renewed.
    pub fn arrive(&mut self, visitor: VisitorId, pass_exp_s: u64, now: Millis) {
        self.expire_visitor(visitor, now);
        if let Some(VisitorState::Admitted { arrival_due, .. }) = self.visitors.get_mut(&visitor)
            && let Some(due) = arrival_due.take()
        {
            self.passes.arrived(due, visitor);
        }
        self.renew(visitor, pass_exp_s, now);
    }

    /// Gives every admitted visitor not seen yet the whole arrival grace
    /// again from `now` (a later deadline stays), unless that was done since
    /// `seen` (see `op::ResumeArrivals`); the count of resumptions.
    /// One step whatever the crowd: the new deadline is written once, and
    /// the no-show sweep moves each arrival to it as it meets one.
    pub fn resume_arrivals(&mut self, seen: Option<u64>, now: Millis) -> u64 {
        if seen.is_some_and(|seen| self.passes.resumptions > seen) {
            return self.passes.resumptions;
        }
        self.passes.resumptions += 1;
        let Some(grace) = self.config.arrival_grace_s else {
            return self.passes.resumptions;
        };
        let due = now + grace * 1000;
        self.passes.resumed = Some(Resumed {
            at: now,
            due: self.passes.resumed.map_or(due, |r| r.due.max(due)),
        });
        self.passes.resumptions
    }

    /// Takes back the visitor's pass (the admission whose pass has `exp`
    /// `pass_exp_s`, if given); a waiting place is left alone. Whether a
    /// pass was taken.
    pub fn revoke_pass(
        &mut self,
        visitor: VisitorId,
        pass_exp_s: Option<u64>,
        why: PassTakenBack,
        now: Millis,
    ) -> bool {
        self.expire_visitor(visitor, now);
        match self.visitors.get(&visitor) {
            Some(VisitorState::Admitted { expires_at, .. })
                if pass_exp_s.is_none_or(|exp| exp == *expires_at / 1000) =>
            {
                self.remove(visitor, now);
                let counts = &mut self.ledger.counts;
                *match why {
                    PassTakenBack::Revoked => &mut counts.revoked,
                    PassTakenBack::GivenUp => &mut counts.left,
                } += 1;
                true
            }
            _ => false,
        }
    }

    /// Removes the visitor's place or slot, at once; they are told `left`
    /// for a while (`depart`). The event that tells every node, if they
    /// were waiting.
    pub fn leave(&mut self, visitor: VisitorId, now: Millis) -> Option<RoomEvent> {
        self.expire_visitor(visitor, now);
        let removed = self.remove(visitor, now)?;
        self.ledger.counts.left += 1;
        removed
    }

    /// Removes the visitor's place or slot (`None`: they had neither); the
    /// event that tells every node, if they were waiting.
    fn remove(&mut self, visitor: VisitorId, now: Millis) -> Option<Option<RoomEvent>> {
        Some(match self.visitors.get(&visitor).copied()? {
            VisitorState::Waiting {
                spot, last_seen, ..
            } => {
                self.line.remove(spot, last_seen, visitor, self.opened(now));
                self.depart(visitor, now, now);
                self.version += 1;
                Some(RoomEvent::Left {
                    room: self.id.clone(),
                    order: spot.order(),
                    line: self.summary(),
                })
            }
            VisitorState::Admitted {
                expires_at,
                lapse_at,
                arrival_due,
                ..
            } => {
                self.passes.take_back(visitor, lapse_at, arrival_due);
                // Told `left` while the pass would have run.
                self.depart(visitor, expires_at, now);
                None
            }
        })
    }

    /// The tick, if one is due, and the events it makes: the opening's
    /// announcement the first time the room is open, then the tick.
    /// `random` admits by `pick` (see `words::chance::pick`). After a tick
    /// that filled a sweep's slice, a call that finds no tick due still
    /// sweeps the next slice (and admits nobody).
    pub fn tick(&mut self, now: Millis, pick: PickSeed) -> Option<(TickReport, Vec<RoomEvent>)> {
        let mut events = Vec::new();
        if self.opening_due(now) {
            // The order was fixed as each entrant joined: the opening only
            // says so, and the sockets read their positions (if anyone
            // entered: a line that formed after the opening has nothing
            // to read again).
            self.drawn_announced = true;
            if let Some(opens_at) = self.config.opens_at {
                self.pace.changed_at(opens_at.0);
            }
            if self.line.drawn_waiting() + self.line.priority_waiting() > 0 {
                self.version += 1;
                events.push(RoomEvent::Drawn {
                    room: self.id.clone(),
                    line: self.summary(),
                });
            }
        }
        let due = now >= self.pace.last_tick + self.config.tick_ms;
        // An empty room with a full bucket has nothing to do (as on Redis,
        // where this keeps an idle room's heartbeat to a read).
        let idle = !self.busy() && self.pace.tokens >= self.per_tick();
        if idle {
            (self.sweep_left, self.admit_left) = (false, false);
        }
        if !(due || self.sweep_left || self.admit_left) || idle {
            let report = TickReport {
                waiting: self.line.waiting(),
                active: self.passes.held(),
                ..TickReport::default()
            };
            return (!events.is_empty()).then_some((report, events));
        }
        let mut tuned = (None, None);
        if due {
            if let Some(tune) = self.config.autotune.clone() {
                // Decided in the tick's own step from the samples kept, so
                // every node's tick decides alike (design rule 15).
                let line = self.line.waiting() > 0;
                tuned = (
                    self.tuning
                        .take_probe(line, now)
                        .then(|| tune.check(self.tuning.epoch)),
                    self.tuning
                        .decide(&tune, self.config.admit_per_tick, line, now),
                );
            }
            self.pace.start_tick(&self.config, self.per_tick(), now);
        }
        let (departed, more_absent) = self.sweep_abandoned(now);
        let (no_shows, more_no_shows) = self.reclaim_no_shows(now);
        self.sweep_left = more_absent || more_no_shows || std::mem::take(&mut self.passes_left);
        // A tick admits a slice at most; the next calls admit on with what
        // the bucket has left (or, `passthrough`, the rest of the line).
        let (admitted, waits_ms) = if due || self.admit_left {
            let (admitted, waits) = self.admit_due(now, pick);
            self.admit_left = admitted.len() as u64 == SWEEP_SLICE;
            self.pace.end_tick(&self.config, now, admitted.len() as u64);
            (admitted, waits)
        } else {
            (Vec::new(), Vec::new())
        };
        self.call_near(now);
        let swept = Swept {
            abandoned: departed.len() as u64,
            no_shows,
            waiting: self.line.waiting(),
            active: self.passes.held(),
        };
        self.ledger.tick(now, &waits_ms, swept);
        let report = TickReport {
            admitted: admitted.len() as u64,
            waits_ms,
            abandoned: swept.abandoned,
            no_shows,
            waiting: swept.waiting,
            active: swept.active,
            probe: tuned.0,
            tuned: tuned.1,
        };
        // A call between ticks that admitted and dropped no one moved no
        // place: no new version and no event, so that catching up on a
        // sweep sends the sockets nothing.
        if due || !admitted.is_empty() || !departed.is_empty() {
            self.version += 1;
            events.push(RoomEvent::Tick {
                room: self.id.clone(),
                admitted: admitted.into(),
                departed: departed.into(),
                line: self.summary(),
            });
        }
        Some((report, events))
    }

    /// Whom this tick lets in: as many as the bucket and the cap allow, in
    /// the room's queue method; `passthrough` lets the whole line in, bucket
    /// and cap ignored. A slice at most (`SWEEP_SLICE`) per call. With
    /// each admission its wait, from joining or (for the pre-queue) the
    /// opening.
    fn admit_due(&mut self, now: Millis, pick: PickSeed) -> (Vec<Admission>, Vec<Millis>) {
        let (mut admitted, mut waits) = (Vec::new(), Vec::new());
        if !self.opened(now) || self.config.paused || self.facts.sold_out {
            return (admitted, waits);
        }
        let opens_at = self.config.opens_at.map_or(0, |at| at.0);
        let method = self.config.queue_method;
        while (admitted.len() as u64) < SWEEP_SLICE
            && (method == QueueMethod::Passthrough || (self.pace.tokens > 0 && self.under_cap()))
        {
            let next = match method {
                QueueMethod::Random => self.line.random(pick, admitted.len() as u64),
                _ => self.line.first(),
            };
            let Some(visitor) = next else {
                break;
            };
            let Some(VisitorState::Waiting {
                spot,
                last_seen,
                joined_at,
            }) = self.visitors.get(&visitor).copied()
            else {
                unreachable!("a visitor in line is waiting");
            };
            self.line.remove(spot, last_seen, visitor, true);
            admitted.push(self.admit(visitor, spot.order(), now));
            waits.push(now.saturating_sub(joined_at.max(opens_at)));
        }
        (admitted, waits)
    }

    /// The room has opened and nobody has been told yet.
    fn opening_due(&self, now: Millis) -> bool {
        self.line.draw.is_some() && !self.drawn_announced && self.opened(now)
    }

    /// When this room next needs its tick asked for: the tick period, or
    /// sooner for an opening to announce or a sweep to go on with.
    pub fn next_due_in_ms(&self, now: Millis) -> Millis {
        let mut tick = self.pace.next_due_in_ms(&self.config, now);
        if self.sweep_left || self.admit_left {
            tick = tick.min(SWEEP_AGAIN_MS);
        }
        if let Some(change) = self.change_in_ms(now) {
            tick = tick.min(change);
        }
        match self.config.opens_at {
            Some(at) if self.line.draw.is_some() && !self.drawn_announced => {
                tick.min(at.0.saturating_sub(now).max(1))
            }
            _ => tick,
        }
    }

    /// How long until the schedule's next entry falls due, unless an
    /// operator's pause holds the schedule (`Tick::change_in_ms`).
    pub fn change_in_ms(&self, now: Millis) -> Option<Millis> {
        let at = self.config.schedule.next_at()?;
        (!self.schedule_held).then(|| at.saturating_sub(now).max(1))
    }

    /// The line hears what its sale has left; the event, if that changes
    /// what the line is told.
    pub fn announce_stock(&mut self, stock: Stock) -> Option<RoomEvent> {
        let facts = RoomFacts::of(
            &self.config,
            Some(stock.left),
            stock.sold_out() && self.config.close_when_sold_out,
        );
        if *self.facts == facts {
            return None;
        }
        self.facts = Arc::new(facts);
        Some(RoomEvent::Configured {
            room: self.id.clone(),
            line: self.summary(),
            facts: self.facts.clone(),
        })
    }

    /// Up to `limit` entrants after `after`, in drawn order, once drawn.
    pub fn draw_entries(
        &self,
        after: Option<(DrawKey, EntryId)>,
        limit: usize,
        now: Millis,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError> {
        let draw = self.line.draw.as_ref().ok_or(StoreError::NoDraw)?;
        if !self.opened(now) {
            return Err(StoreError::NotDrawn);
        }
        // Code holders first (lower priority first, each in drawn order),
        // then everyone else; a page after a code holder goes on among them.
        let everyone = |from| {
            draw.entries
                .range((from, std::ops::Bound::Unbounded))
                .map(|(key, entry)| (*key, *entry))
        };
        let entries: Vec<(DrawKey, EntryId)> = match after {
            Some((key, _)) if draw.entries.contains_key(&key) => {
                everyone(std::ops::Bound::Excluded(key))
                    .take(limit)
                    .collect()
            }
            Some((key, _)) => self
                .line
                .priority_entries()
                .skip_while(|(k, _)| *k != key)
                .skip(1)
                .chain(everyone(std::ops::Bound::Unbounded))
                .take(limit)
                .collect(),
            None => self
                .line
                .priority_entries()
                .chain(everyone(std::ops::Bound::Unbounded))
                .take(limit)
                .collect(),
        };
        Ok(entries)
    }

    fn draw_info(&self, now: Millis) -> Option<DrawInfo> {
        let draw = self.line.draw.as_ref()?;
        // Before an entry of the schedule sets the opening, the draw is
        // shown at the opening it will set: its commitment is public from
        // the start, its seed only once the opening has passed.
        let opens_at = self.config.opens_at.or(self.config.schedule.opening())?;
        let opened = self.config.opens_at.is_some() && self.opened(now);
        let priority_entrants = self.line.priority_entrants();
        Some(DrawInfo {
            opens_at,
            commitment: draw.commitment.clone(),
            seed: opened.then(|| draw.seed.to_hex()),
            entrants: draw.entries.len() as u64 + priority_entrants,
            priority_entrants,
            drawn_at: opened.then_some(opens_at),
        })
    }

    /// The room's ledger, for its report.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// What the room's report shows beside its ledger, as of `now`.
    pub fn report_facts(&self, now: Millis) -> ReportFacts {
        ReportFacts {
            opens_at: self.config.opens_at.map(|at| at.0),
            closed_at: None,
            draw: self.draw_info(now),
            sale: None,
            autotune: self.config.autotune.as_ref().map(|_| AutotuneReport {
                admit_per_tick_effective: self.per_tick(),
                changes: self.tuning.changes.iter().cloned().collect(),
            }),
        }
    }

    /// The room with its live stats.
    pub fn info(&self, now: Millis) -> RoomInfo {
        let oldest_wait_ms = self
            .line
            .first()
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
                waiting: self.line.waiting(),
                active: self.passes.held(),
                admitted_total: self.passes.admitted_total,
                admitted_last_minute: self.pace.admitted_since(now.saturating_sub(RATE_WINDOW_MS)),
                oldest_wait_seconds: oldest_wait_ms / 1000,
                turned_away: self.door.turned_away,
                no_shows: self.passes.no_shows,
                sessions_lapsed: self.ledger.counts.sessions_lapsed,
                pre_queue: match &self.line.draw {
                    Some(draw) if !self.opened(now) => {
                        draw.waiting() + self.line.priority_waiting()
                    }
                    _ => 0,
                },
                bypassed: self.passes.bypassed_total,
                bypassed_active: self.passes.bypassed_valid(now),
                priority_waiting: self.line.priority_waiting(),
                next_change_at: self.config.schedule.next_at().map(Moment),
                admit_per_tick_effective: self.per_tick(),
                autotune: self
                    .config
                    .autotune
                    .as_ref()
                    .map(|_| AutotuneStats::of(&self.tuning)),
            },
            self.draw_info(now),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::chance::SeededChance;

    /// Issue 24, item 18: a visitor who left, was abandoned, ran out or was
    /// reclaimed leaves nothing behind in the room.
    #[test]
    fn nothing_of_a_visitor_stays_once_they_are_gone() {
        let at = |s: u64| 1_767_225_600_000 + s * 1000;
        let mut config = RoomConfig::new("R", "/x");
        (config.admit_per_tick, config.abandon_after_s) = (2, 20);
        (config.pass_ttl_s, config.arrival_grace_s) = (60, Some(5));
        let chance = SeededChance::new(3);
        let dice = || Dice::roll(&chance);
        let mut room = RoomModel::new(RoomId::parse("r").unwrap(), config, at(0), &dice());
        let joined: Vec<VisitorId> = (0..6)
            .map(|n| {
                let visitor = VisitorId::random();
                let known = JoinOptions {
                    user: Some(format!("user-{n}")),
                    ..JoinOptions::default()
                };
                room.join(visitor, &known, at(0), &dice()).unwrap();
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
        assert_eq!((room.users.len(), room.departed.remembered()), (4, 2));
        // #1's pass is reclaimed unseen, #3 is abandoned, #4 and #5 (still
        // polling) are admitted at 20 s; every pass has run out at 80 s.
        room.mark_present(joined[4], at(15));
        room.mark_present(joined[5], at(15));
        for now in [at(20), at(80)] {
            room.expire(now, FORGOTTEN_PER_TICK);
            room.tick(now, dice().pick);
        }
        assert!(room.visitors.is_empty(), "{:?}", room.visitors);
        // #3 is told for an hour that they were away too long.
        assert_eq!(room.departed.remembered(), 1);
        room.expire(at(20) + AWAY_REMEMBERED_MS, FORGOTTEN_PER_TICK);
        assert!(room.departed.is_empty());
        assert!(room.users.is_empty() && room.user_of.is_empty());
        assert!(room.line.is_empty() && room.passes.is_empty());
    }

    #[test]
    fn an_operation_forgets_a_bounded_number_of_departed_visitors() {
        let now = 1_000_000;
        let dice = Dice::roll(&SeededChance::new(3));
        let mut room = RoomModel::new(
            RoomId::parse("r").unwrap(),
            RoomConfig::new("R", "/x"),
            now,
            &dice,
        );
        for _ in 0..FORGOTTEN_PER_OPERATION + FORGOTTEN_PER_TICK + 10 {
            room.depart(VisitorId::random(), now, now);
        }
        let later = now + room.config.abandon_after_s * 1000;
        room.expire(later - 1, FORGOTTEN_PER_TICK);
        assert_eq!(
            room.departed.remembered(),
            FORGOTTEN_PER_OPERATION + FORGOTTEN_PER_TICK + 10
        );
        room.expire(later, FORGOTTEN_PER_OPERATION);
        assert_eq!(room.departed.remembered(), FORGOTTEN_PER_TICK + 10);
        room.expire(later, FORGOTTEN_PER_TICK);
        assert_eq!(room.departed.remembered(), 10);
        room.expire(later, FORGOTTEN_PER_TICK);
        assert!(room.departed.is_empty());
    }
}
