//! The embedded store for a single node: every room's model
//! (`words::rules::RoomModel`) behind its own mutex, so each operation
//! (join, tick, leave…) is one critical section and a check can never be
//! separated from the act it guards. What the store adds to the model: the
//! time and chance it runs on, rooms by id, closing, and the events.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::{Mutex, MutexGuard, RwLock};
use tokio::sync::broadcast;

use super::sale::MemorySale;
use crate::store::{Store, StoreError, Tick};
use crate::words::chance::{Dice, OsChance, SharedChance};
use crate::words::clock::Moment;
use crate::words::clock::{Millis, SharedClock};
use crate::words::codes::GroupSummary;
use crate::words::draw::{DrawKey, EntryId};
use crate::words::login_limit::Lockout;
use crate::words::notify::OutboxEvent;
use crate::words::op::{
    AddCodes, AdminSessionEnded, AnnounceStock, Answer, ApplyTable, Arrive, ClaimEvents, CloseRoom,
    CodeGroups, Configure, CreateRoom, DrawEntries, EndAdminSession, Handle, HoldEvents, Join,
    Leave, ListReports, ListRooms, LoginAttempt, Notify, Op, Ping, Places, ReadReport, ReadRoom,
    RecordSample, RemoveCodes, Resume, ResumeArrivals, RevokePass, RoomIds, SettleEvents, Status,
    TickIfDue, Touch, UserOf,
};
use crate::words::report::{
    DAY_MS, DEFAULT_REPORT_KEEP_DAYS, Ledger, Report, ReportEntry, ReportFacts,
};
use crate::words::room_table::{Applied, TableHash};
use crate::words::rules::{FORGOTTEN_PER_OPERATION, FORGOTTEN_PER_TICK, RoomModel};
use crate::words::{
    LineSummary, Place, PlaceState, RoomEvent, RoomId, RoomInfo, StoreEvent, VisitorId,
};

/// Events buffered per subscriber before a slow one is told it lagged.
const EVENT_BUFFER: usize = 4_096;

pub struct MemoryStore {
    clock: SharedClock,
    chance: SharedChance,
    rooms: RwLock<HashMap<RoomId, Arc<Mutex<Kept>>>>,
    events: broadcast::Sender<StoreEvent>,
    /// Operator sessions ended by logout, until they would have expired.
    ended_sessions: Mutex<HashMap<String, Millis>>,
    /// Wrong operator logins per client block: this node is every node.
    logins: Mutex<Lockout>,
    /// The rooms' sales: creating a room wipes the sale of any room that had
    /// its id before, under the same lock that creates it.
    sale: MemorySale,
    /// Closed rooms' reports, oldest close first, each kept `report_keep_ms`.
    reports: Mutex<Vec<ClosedReport>>,
    report_keep_ms: Millis,
}

/// A closed room's report as the store keeps it: its ledger and facts.
struct ClosedReport {
    room: RoomId,
    closed_at: Millis,
    ledger: Ledger,
    facts: ReportFacts,
}

impl ClosedReport {
    fn entry(&self) -> ReportEntry {
        ReportEntry {
            room: self.room.to_string(),
            created_at: Moment(self.ledger.created_at),
            closed_at: Some(Moment(self.closed_at)),
        }
    }
}

/// A room as the store keeps it: a closed room stays, without its model
/// (so without its visitors), until its id is used again; it keeps the
/// rooms file's table it was last under, so that an unchanged file does not
/// make it again (lua/close_room.lua keeps the room's record likewise).
enum Kept {
    /// Boxed: a room's model is large, and a closed room keeps a hash only.
    Open(Box<RoomModel>),
    Closed {
        applied: Option<TableHash>,
    },
}

impl Kept {
    fn model(&mut self) -> Option<&mut RoomModel> {
        match self {
            Kept::Open(model) => Some(model),
            Kept::Closed { .. } => None,
        }
    }

    fn is_open(&self) -> bool {
        matches!(self, Kept::Open(_))
    }

    /// Closes the room; its model, if it was open.
    fn close(&mut self) -> Option<Box<RoomModel>> {
        match self {
            Kept::Open(model) => {
                let applied = model.applied().cloned();
                match std::mem::replace(self, Kept::Closed { applied }) {
                    Kept::Open(model) => Some(model),
                    Kept::Closed { .. } => None,
                }
            }
            Kept::Closed { .. } => None,
        }
    }
}

impl MemoryStore {
    /// A store on the operating system's randomness.
    pub fn new(clock: SharedClock) -> Self {
        Self::with_chance(clock, Arc::new(OsChance))
    }

    /// A store whose random choices come from `chance` (a seeded one makes
    /// the same choices as any other store given the same seed).
    pub fn with_chance(clock: SharedClock, chance: SharedChance) -> Self {
        Self {
            sale: MemorySale::new(clock.clone()),
            clock,
            chance,
            rooms: RwLock::new(HashMap::new()),
            events: broadcast::channel(EVENT_BUFFER).0,
            ended_sessions: Mutex::new(HashMap::new()),
            logins: Mutex::default(),
            reports: Mutex::default(),
            report_keep_ms: DEFAULT_REPORT_KEEP_DAYS * DAY_MS,
        }
    }

    /// Keeps a closed room's report for `days` (`--report-keep-days`), or
    /// until the node stops, if that comes first.
    pub fn keep_reports_for(mut self, days: u64) -> Self {
        self.report_keep_ms = days.saturating_mul(DAY_MS);
        self
    }

    /// The closed rooms' reports still kept at `now` (older ones dropped).
    fn kept_reports(&self, now: Millis) -> MutexGuard<'_, Vec<ClosedReport>> {
        let mut reports = self.reports.lock();
        let keep = self.report_keep_ms;
        reports.retain(|r| r.closed_at.saturating_add(keep) > now);
        reports
    }

    /// The sale store of these rooms (a handle: every call returns the same sales).
    pub fn sale(&self) -> MemorySale {
        self.sale.clone()
    }

    fn room_handle(&self, id: &RoomId) -> Result<Arc<Mutex<Kept>>, StoreError> {
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
        op: impl FnOnce(&mut RoomModel, Millis) -> T,
    ) -> Result<T, StoreError> {
        let handle = self.room_handle(id)?;
        let mut room = HeldRoom::lock(&handle, name);
        let Some(model) = room.model() else {
            return Err(StoreError::RoomClosed(id.clone()));
        };
        let now = self.clock.now_ms();
        if let Some(event) = model.begin(now, FORGOTTEN_PER_OPERATION) {
            self.publish(event);
        }
        Ok(op(model, now))
    }

    /// Runs `op` on an open room as it is: no schedule entry applied, no
    /// sweep (as `lua/outbox_*.lua`, which only hand out and settle the
    /// outbox's events).
    fn with_open_room_as_is<T>(
        &self,
        id: &RoomId,
        name: &'static str,
        op: impl FnOnce(&mut RoomModel, Millis) -> T,
    ) -> Result<T, StoreError> {
        let handle = self.room_handle(id)?;
        let mut room = HeldRoom::lock(&handle, name);
        let Some(model) = room.model() else {
            return Err(StoreError::RoomClosed(id.clone()));
        };
        Ok(op(model, self.clock.now_ms()))
    }

    /// The visitor's place once `touch` has marked what reading it means
    /// (presence, arrival); a closed room's visitors are told it is closed.
    fn place_after(
        &self,
        id: &RoomId,
        name: &'static str,
        visitor: VisitorId,
        touch: impl FnOnce(&mut RoomModel, Millis),
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

    /// The random choices of one operation, all drawn whatever it needs
    /// (as the Redis store draws them), so seeded stores stay in step.
    fn dice(&self) -> Dice {
        Dice::roll(self.chance.as_ref())
    }
}

/// What a closed room's visitors are told.
fn closed_place(visitor: VisitorId) -> Place {
    Place {
        visitor,
        state: PlaceState::Closed,
        line: LineSummary::default(),
        facts: Arc::default(),
        priority: None,
        notify: false,
    }
}

/// A room's lock held for one operation. Every other caller of the room
/// waits that long, so the time it is held is the operation's cost to the
/// room; it is recorded in `waitroom_memory_store_op_seconds`, by `op`.
struct HeldRoom<'a> {
    room: MutexGuard<'a, Kept>,
    op: &'static str,
    since: Instant,
}

impl<'a> HeldRoom<'a> {
    fn lock(handle: &'a Mutex<Kept>, op: &'static str) -> Self {
        let room = handle.lock();
        Self {
            room,
            op,
            since: Instant::now(),
        }
    }
}

impl Deref for HeldRoom<'_> {
    type Target = Kept;
    fn deref(&self) -> &Kept {
        &self.room
    }
}

impl DerefMut for HeldRoom<'_> {
    fn deref_mut(&mut self) -> &mut Kept {
        &mut self.room
    }
}

impl Drop for HeldRoom<'_> {
    fn drop(&mut self) {
        metrics::histogram!("waitroom_memory_store_op_seconds", "op" => self.op)
            .record(self.since.elapsed().as_secs_f64());
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn apply(&self, op: Op) -> Result<Answer, StoreError> {
        op.run_on(self).await
    }

    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.events.subscribe()
    }
}

impl Handle<CreateRoom> for MemoryStore {
    async fn handle(
        &self,
        CreateRoom { room: id, config }: CreateRoom,
    ) -> Result<Box<RoomInfo>, StoreError> {
        let dice = self.dice();
        config.validate().map_err(StoreError::InvalidConfig)?;
        let now = self.clock.now_ms();
        let mut rooms = self.rooms.write();
        if let Some(existing) = rooms.get(&id)
            && existing.lock().is_open()
        {
            return Err(StoreError::RoomExists(id));
        }
        // Nothing of a predecessor under this id survives: no order, no
        // hold, no stock (its passes already fail: the new room never
        // admitted them).
        self.sale.wipe(&id);
        let model = RoomModel::new(id.clone(), *config, now, &dice);
        let info = Box::new(model.info(now));
        rooms.insert(id, Arc::new(Mutex::new(Kept::Open(Box::new(model)))));
        Ok(info)
    }
}

impl Handle<ApplyTable> for MemoryStore {
    async fn handle(&self, ApplyTable { table }: ApplyTable) -> Result<Applied, StoreError> {
        let dice = self.dice();
        let now = self.clock.now_ms();
        // The map's lock, held throughout as `CreateRoom` holds it: nobody
        // makes or replaces this room between the look and the act.
        let mut rooms = self.rooms.write();
        if let Some(handle) = rooms.get(&table.id).cloned() {
            let mut room = HeldRoom::lock(&handle, "apply_table");
            match &mut *room {
                Kept::Open(model) => {
                    if let Some(event) = model.begin(now, FORGOTTEN_PER_OPERATION) {
                        self.publish(event);
                    }
                    return Ok(match model.apply_table(&table, now, &dice)? {
                        Some((_, event)) => {
                            self.publish(event);
                            Applied::Changed
                        }
                        None => Applied::Unchanged,
                    });
                }
                Kept::Closed { applied } if applied.as_ref() == Some(&table.hash) => {
                    return Ok(Applied::Unchanged);
                }
                Kept::Closed { .. } => {}
            }
        }
        let model = RoomModel::from_table(&table, now, &dice)?;
        self.sale.wipe(&table.id);
        rooms.insert(
            table.id.clone(),
            Arc::new(Mutex::new(Kept::Open(Box::new(model)))),
        );
        Ok(Applied::Created)
    }
}

impl Handle<Configure> for MemoryStore {
    async fn handle(
        &self,
        Configure { room: id, patch }: Configure,
    ) -> Result<Box<RoomInfo>, StoreError> {
        let dice = self.dice();
        let (info, event) = self.with_open_room(&id, "configure", |room, now| {
            room.configure(&patch, now, &dice)
        })??;
        self.publish(event);
        Ok(Box::new(info))
    }
}

impl Handle<CloseRoom> for MemoryStore {
    async fn handle(&self, CloseRoom { room: id, sale }: CloseRoom) -> Result<(), StoreError> {
        let handle = self.room_handle(&id)?;
        let mut room = HeldRoom::lock(&handle, "close_room");
        let Some(model) = room.close() else {
            return Err(StoreError::RoomNotFound(id));
        };
        let now = self.clock.now_ms();
        self.kept_reports(now).push(ClosedReport {
            room: id.clone(),
            closed_at: now,
            ledger: model.ledger().clone(),
            facts: ReportFacts {
                closed_at: Some(now),
                sale: sale.and_then(|sale| serde_json::from_str(&sale).ok()),
                ..model.report_facts(now)
            },
        });
        self.publish(RoomEvent::Closed { room: id });
        Ok(())
    }
}

impl Handle<ReadReport> for MemoryStore {
    async fn handle(
        &self,
        ReadReport {
            room: id,
            created_at,
        }: ReadReport,
    ) -> Result<Box<Report>, StoreError> {
        let wanted = |made: Millis| created_at.is_none_or(|at| at == made);
        if let Ok(handle) = self.room_handle(&id) {
            let mut room = HeldRoom::lock(&handle, "report");
            if let Some(model) = room.model() {
                let now = self.clock.now_ms();
                if wanted(model.ledger().created_at) {
                    let facts = model.report_facts(now);
                    return Ok(Box::new(model.ledger().report(id.as_str(), facts, now)));
                }
            }
        }
        let now = self.clock.now_ms();
        let reports = self.kept_reports(now);
        let kept = reports
            .iter()
            .rev()
            .find(|r| r.room == id && wanted(r.ledger.created_at));
        match kept {
            Some(r) => Ok(Box::new(r.ledger.report(id.as_str(), r.facts.clone(), now))),
            None if created_at.is_some() => Err(StoreError::ReportNotFound(id)),
            None => Err(StoreError::RoomNotFound(id)),
        }
    }
}

impl Handle<ListReports> for MemoryStore {
    async fn handle(&self, ListReports {}: ListReports) -> Result<Vec<ReportEntry>, StoreError> {
        let now = self.clock.now_ms();
        let rooms: Vec<_> = self
            .rooms
            .read()
            .iter()
            .map(|(id, handle)| (id.clone(), handle.clone()))
            .collect();
        let mut entries: Vec<ReportEntry> = rooms
            .iter()
            .filter_map(|(id, handle)| match &*handle.lock() {
                Kept::Open(model) => Some(ReportEntry {
                    room: id.to_string(),
                    created_at: Moment(model.ledger().created_at),
                    closed_at: None,
                }),
                Kept::Closed { .. } => None,
            })
            .collect();
        entries.extend(self.kept_reports(now).iter().map(ClosedReport::entry));
        ReportEntry::sort(&mut entries);
        Ok(entries)
    }
}

impl Handle<ReadRoom> for MemoryStore {
    async fn handle(&self, ReadRoom { room: id }: ReadRoom) -> Result<Box<RoomInfo>, StoreError> {
        self.with_open_room(&id, "room", |room, now| Box::new(room.info(now)))
            .map_err(|e| match e {
                StoreError::RoomClosed(id) => StoreError::RoomNotFound(id),
                other => other,
            })
    }
}

impl Handle<ListRooms> for MemoryStore {
    async fn handle(&self, _: ListRooms) -> Result<Vec<RoomInfo>, StoreError> {
        let handles: Vec<_> = self.rooms.read().values().cloned().collect();
        let now = self.clock.now_ms();
        let mut infos: Vec<RoomInfo> = handles
            .iter()
            .filter_map(|handle| {
                let mut room = HeldRoom::lock(handle, "rooms");
                room.model().map(|model| {
                    if let Some(event) = model.begin(now, FORGOTTEN_PER_OPERATION) {
                        self.publish(event);
                    }
                    model.info(now)
                })
            })
            .collect();
        infos.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(infos)
    }
}

impl Handle<RoomIds> for MemoryStore {
    async fn handle(&self, _: RoomIds) -> Result<Vec<RoomId>, StoreError> {
        let rooms = self.rooms.read();
        Ok(rooms
            .iter()
            .filter(|(_, room)| room.lock().is_open())
            .map(|(id, _)| id.clone())
            .collect())
    }
}

impl Handle<Join> for MemoryStore {
    async fn handle(
        &self,
        Join {
            room: id,
            visitor,
            options,
        }: Join,
    ) -> Result<Place, StoreError> {
        let dice = self.dice();
        let (place, event) = self.with_open_room(&id, "join", |room, now| {
            room.join(visitor, &options, now, &dice)
        })??;
        if let Some(event) = event {
            self.publish(event);
        }
        Ok(place)
    }
}

impl Handle<AddCodes> for MemoryStore {
    async fn handle(
        &self,
        AddCodes { room: id, group }: AddCodes,
    ) -> Result<GroupSummary, StoreError> {
        self.with_open_room(&id, "add_codes", |room, _| room.add_codes(group))?
    }
}

impl Handle<CodeGroups> for MemoryStore {
    async fn handle(
        &self,
        CodeGroups { room: id }: CodeGroups,
    ) -> Result<Vec<GroupSummary>, StoreError> {
        self.with_open_room(&id, "code_groups", |room, _| room.code_groups())
    }
}

impl Handle<RemoveCodes> for MemoryStore {
    async fn handle(&self, RemoveCodes { room: id, group }: RemoveCodes) -> Result<(), StoreError> {
        self.with_open_room(&id, "remove_codes", |room, _| room.remove_codes(&group))?
    }
}

impl Handle<DrawEntries> for MemoryStore {
    async fn handle(
        &self,
        DrawEntries {
            room: id,
            after,
            limit,
        }: DrawEntries,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError> {
        self.with_open_room(&id, "draw_entries", |room, now| {
            room.draw_entries(after, limit, now)
        })?
    }
}

impl Handle<Status> for MemoryStore {
    async fn handle(&self, Status { room: id, visitor }: Status) -> Result<Place, StoreError> {
        self.place_after(&id, "status", visitor, |room, now| {
            room.mark_present(visitor, now)
        })
    }
}

impl Handle<Places> for MemoryStore {
    async fn handle(
        &self,
        Places { room: id, visitors }: Places,
    ) -> Result<Vec<Place>, StoreError> {
        let read = self.with_open_room(&id, "places", |room, now| {
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
}

impl Handle<Arrive> for MemoryStore {
    async fn handle(
        &self,
        Arrive {
            room: id,
            visitor,
            pass_exp_s,
        }: Arrive,
    ) -> Result<Place, StoreError> {
        self.place_after(&id, "arrive", visitor, |room, now| {
            room.arrive(visitor, pass_exp_s, now)
        })
    }
}

impl Handle<ResumeArrivals> for MemoryStore {
    async fn handle(
        &self,
        ResumeArrivals { room: id, seen }: ResumeArrivals,
    ) -> Result<u64, StoreError> {
        self.with_open_room(&id, "resume_arrivals", |room, now| {
            room.resume_arrivals(seen, now)
        })
    }
}

impl Handle<RevokePass> for MemoryStore {
    async fn handle(
        &self,
        RevokePass {
            room: id,
            visitor,
            pass_exp_s,
            why,
        }: RevokePass,
    ) -> Result<bool, StoreError> {
        self.with_open_room(&id, "revoke_pass", |room, now| {
            room.revoke_pass(visitor, pass_exp_s, why, now)
        })
    }
}

impl Handle<UserOf> for MemoryStore {
    async fn handle(
        &self,
        UserOf { room: id, visitor }: UserOf,
    ) -> Result<Option<String>, StoreError> {
        self.with_open_room(&id, "user_of", |room, _| room.user_of(visitor))
    }
}

impl Handle<Leave> for MemoryStore {
    async fn handle(&self, Leave { room: id, visitor }: Leave) -> Result<(), StoreError> {
        match self.with_open_room(&id, "leave", |room, now| room.leave(visitor, now)) {
            Ok(Some(event)) => self.publish(event),
            Ok(None) | Err(StoreError::RoomClosed(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

impl Handle<Touch> for MemoryStore {
    async fn handle(&self, Touch { room: id, visitors }: Touch) -> Result<(), StoreError> {
        let handle = self.room_handle(&id)?;
        let mut room = HeldRoom::lock(&handle, "touch");
        // A closed room has no one to mark (as lua/touch.lua): no error, so
        // the promoter does not warn about it while its sockets go.
        let Some(model) = room.model() else {
            return Ok(());
        };
        let now = self.clock.now_ms();
        // The schedule's entries due apply, but nothing is swept: as
        // lua/touch.lua, which keeps marking presence to one write.
        if let Some(event) = model.catch_up(now) {
            self.publish(event);
        }
        for visitor in visitors {
            model.mark_present(visitor, now);
        }
        Ok(())
    }
}

impl Handle<TickIfDue> for MemoryStore {
    async fn handle(&self, TickIfDue { room: id }: TickIfDue) -> Result<Tick, StoreError> {
        let dice = self.dice();
        let handle = self.room_handle(&id)?;
        let mut room = HeldRoom::lock(&handle, "tick");
        let Some(model) = room.model() else {
            return Err(StoreError::RoomClosed(id));
        };
        let now = self.clock.now_ms();
        if let Some(event) = model.begin(now, FORGOTTEN_PER_TICK) {
            self.publish(event);
        }
        let ran = model.tick(now, dice.pick).map(|(report, events)| {
            // Published under the room's lock so events leave in version order.
            for event in events {
                self.publish(event);
            }
            report
        });
        Ok(Tick {
            ran,
            busy: model.busy(),
            next_due_in_ms: model.next_due_in_ms(now),
            change_in_ms: model.change_in_ms(now),
            arrival_resumptions: model.arrival_resumptions(),
            outbox: model.outbox_pending(),
            figures: model.figures(now),
        })
    }
}

impl Handle<AnnounceStock> for MemoryStore {
    async fn handle(
        &self,
        AnnounceStock { room: id, stock }: AnnounceStock,
    ) -> Result<(), StoreError> {
        if let Some(event) =
            self.with_open_room(&id, "announce_stock", |room, _| room.announce_stock(stock))?
        {
            self.publish(event);
        }
        Ok(())
    }
}

impl Handle<RecordSample> for MemoryStore {
    async fn handle(
        &self,
        RecordSample {
            room: id,
            epoch,
            latency_ms,
            failure,
        }: RecordSample,
    ) -> Result<(), StoreError> {
        let handle = self.room_handle(&id)?;
        let mut room = HeldRoom::lock(&handle, "record_sample");
        let Some(model) = room.model() else {
            return Err(StoreError::RoomClosed(id));
        };
        // Nothing is swept: as lua/record_sample.lua, one write.
        if let Some(event) = model.catch_up(self.clock.now_ms()) {
            self.publish(event);
        }
        model.record_sample(epoch, latency_ms, failure);
        Ok(())
    }
}

impl Handle<Notify> for MemoryStore {
    async fn handle(
        &self,
        Notify {
            room: id,
            visitor,
            ask,
        }: Notify,
    ) -> Result<Place, StoreError> {
        self.with_open_room(&id, "notify", |room, now| {
            room.notify(visitor, ask.as_deref(), now)
        })?
    }
}

impl Handle<Resume> for MemoryStore {
    async fn handle(
        &self,
        Resume {
            room: id,
            visitor,
            kind,
        }: Resume,
    ) -> Result<Place, StoreError> {
        match self.with_open_room(&id, "resume", |room, now| room.resume(visitor, kind, now)) {
            Err(StoreError::RoomClosed(_)) => Ok(closed_place(visitor)),
            other => other?,
        }
    }
}

impl Handle<ClaimEvents> for MemoryStore {
    async fn handle(
        &self,
        ClaimEvents {
            room: id,
            consumer,
            takeover_ms,
            limit,
        }: ClaimEvents,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        self.with_open_room_as_is(&id, "claim_events", |room, now| {
            room.claim_events(&consumer, takeover_ms, limit, now)
        })
    }
}

impl Handle<HoldEvents> for MemoryStore {
    async fn handle(
        &self,
        HoldEvents {
            room: id,
            consumer,
            entries,
        }: HoldEvents,
    ) -> Result<Vec<String>, StoreError> {
        self.with_open_room_as_is(&id, "hold_events", |room, now| {
            room.hold_events(&consumer, &entries, now)
        })
    }
}

impl Handle<SettleEvents> for MemoryStore {
    async fn handle(
        &self,
        SettleEvents {
            room: id,
            entries,
            push_gone,
        }: SettleEvents,
    ) -> Result<(), StoreError> {
        self.with_open_room_as_is(&id, "settle_events", |room, _| {
            room.settle_events(&entries, &push_gone)
        })
    }
}

impl Handle<Ping> for MemoryStore {
    async fn handle(&self, _: Ping) -> Result<(), StoreError> {
        Ok(())
    }
}

impl Handle<EndAdminSession> for MemoryStore {
    async fn handle(
        &self,
        EndAdminSession { session, until }: EndAdminSession,
    ) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let mut ended = self.ended_sessions.lock();
        ended.retain(|_, until| *until > now);
        ended.insert(session, until);
        Ok(())
    }
}

impl Handle<AdminSessionEnded> for MemoryStore {
    async fn handle(
        &self,
        AdminSessionEnded { session }: AdminSessionEnded,
    ) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        Ok(self
            .ended_sessions
            .lock()
            .get(&session)
            .is_some_and(|until| *until > now))
    }
}

impl Handle<LoginAttempt> for MemoryStore {
    async fn handle(
        &self,
        LoginAttempt { block, attempt }: LoginAttempt,
    ) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        self.logins
            .lock()
            .attempt(block, attempt, now)
            .map_err(|retry_after_s| StoreError::TooManyAttempts { retry_after_s })
    }
}
