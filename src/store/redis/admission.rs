//! The shared store for many nodes: every operation is one Lua script (see
//! `lua/`) on one room's keys, all under the hash tag `wr:{room}` so each
//! script touches one Redis Cluster slot. Events go out on the room's
//! channel; every node's hub hears them and updates its own sockets.
//!
//! On one server (`redis://`, or Sentinel's master) events go out on a
//! pattern subscription; on a cluster (`redis+cluster://`) on sharded
//! channels, SSUBSCRIBE/SPUBLISH, Redis 7. How the store connects is
//! `connection`'s.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::{AsyncCommands, PushInfo, PushKind, RedisError, Script, Value};
use tokio::sync::{broadcast, mpsc};

use super::config;
use super::connection::{Connection, Effect, Link, RedisOptions, ScriptCall, unavailable};
use super::events::parse_event;
use super::join_batch::{Join, JoinBatches, Joined};
use super::keys::{
    REPORTED_KEY, ROOM, ROOMS_KEY, USER_OF, channel, ended_session_key, login_key, room_key,
    room_keys, room_of_channel, sale_keys,
};
use super::prelude::{plain_script, room_script};
use super::replies::{
    TableReply, WireChange, WireDecision, WireOutboxEvent, WirePlace, WireRoomInfo, WireTick, read,
    read_list,
};
use super::script_error::ScriptError;
use crate::store::{JoinOptions, Store, StoreError, StoreExt, Tick};
use crate::words::autotune::{self, AutotuneStats};
use crate::words::chance::{Dice, OsChance, SharedChance};
use crate::words::clock::{Millis, Moment, SharedClock};
use crate::words::codes::{CodeHash, GroupSummary};
use crate::words::draw::{self, DrawInfo, DrawKey, DrawSeed, EntryId};
use crate::words::notify::OutboxEvent;
use crate::words::op::{self, Answer, Handle, Op};
use crate::words::report::DAY_MS;
use crate::words::room_table::{Applied, TableHash};
use crate::words::{Place, RoomId, RoomInfo, RoomStats, StoreEvent, VisitorId};

const EVENT_BUFFER: usize = 4_096;
/// How often an operation runs again after meeting a schedule entry due:
/// once the entries are applied it finds none, unless another node's
/// entries fell due meanwhile.
const SCHEDULE_RETRIES: usize = 5;

/// A room script from `lua/` (see `prelude::room_script`).
macro_rules! script {
    ($file:literal) => {
        room_script(include_str!(concat!("../../../lua/", $file)))
    };
}

struct Scripts {
    create_room: Script,
    apply_table: Script,
    configure: Script,
    close_room: Script,
    room_info: Script,
    status: Script,
    places: Script,
    leave: Script,
    touch: Script,
    tick: Script,
    arrive: Script,
    resume_arrivals: Script,
    revoke_pass: Script,
    announce_stock: Script,
    draw_entries: Script,
    add_codes: Script,
    code_groups: Script,
    remove_codes: Script,
    report: Script,
    reports: Script,
    record_sample: Script,
    notify: Script,
    resume: Script,
    outbox_claim: Script,
    outbox_hold: Script,
    outbox_settle: Script,
    /// Not a room's: the prelude and `lua/login.lua` alone.
    login: Script,
}

impl Scripts {
    /// What `script` does: the reads (and presence marks, made again within
    /// seconds if lost) are answered without waiting for replicas.
    fn effect(&self, script: &Script) -> Effect {
        let reads = [
            &self.room_info,
            &self.status,
            &self.places,
            &self.touch,
            &self.draw_entries,
            &self.code_groups,
            &self.report,
        ];
        if reads.iter().any(|read| std::ptr::eq(*read, script)) {
            Effect::Reads
        } else {
            Effect::Writes
        }
    }

    fn load() -> Self {
        Self {
            create_room: script!("create_room.lua"),
            apply_table: script!("apply_table.lua"),
            configure: script!("configure.lua"),
            close_room: script!("close_room.lua"),
            room_info: script!("room_info.lua"),
            status: script!("status.lua"),
            places: script!("places.lua"),
            leave: script!("leave.lua"),
            touch: script!("touch.lua"),
            tick: script!("tick.lua"),
            arrive: script!("arrive.lua"),
            resume_arrivals: script!("resume_arrivals.lua"),
            revoke_pass: script!("revoke_pass.lua"),
            announce_stock: script!("announce_stock.lua"),
            draw_entries: script!("draw_entries.lua"),
            add_codes: script!("add_codes.lua"),
            code_groups: script!("code_groups.lua"),
            remove_codes: script!("remove_codes.lua"),
            report: script!("report.lua"),
            reports: script!("reports.lua"),
            record_sample: script!("record_sample.lua"),
            notify: script!("notify.lua"),
            resume: script!("resume.lua"),
            outbox_claim: script!("outbox_claim.lua"),
            outbox_hold: script!("outbox_hold.lua"),
            outbox_settle: script!("outbox_settle.lua"),
            login: plain_script(include_str!("../../../lua/login.lua")),
        }
    }
}

pub struct RedisStore {
    /// One server (at an address, or Sentinel's master) or a Cluster,
    /// followed through restarts and failovers.
    link: Arc<Link>,
    scripts: Arc<Scripts>,
    /// Tests drive time; in production the scripts read Redis server time.
    clock: Option<SharedClock>,
    /// Where this node's random choices come from (see `words::chance`).
    chance: SharedChance,
    events: broadcast::Sender<StoreEvent>,
    /// The draw seeds of rooms this node joined visitors to, so that it can
    /// make each entrant's draw key (Lua has no HMAC). The join script
    /// checks the seed's commitment, so a stale one is only a retry.
    draw_seeds: Mutex<HashMap<RoomId, Arc<DrawSeed>>>,
    /// Joins go to Redis a room's worth at a time (see `join_batch`).
    joins: Arc<JoinBatches>,
    /// How long a closed room's report is kept.
    report_keep_ms: Millis,
}

impl RedisStore {
    /// Connects to Redis and subscribes to every room's events. `clock`:
    /// `None` in production (Redis server time decides), a driven clock in tests.
    pub async fn connect(url: &str, clock: Option<SharedClock>) -> Result<Self, StoreError> {
        Self::connect_with(url, &RedisOptions::default(), clock).await
    }

    /// [`RedisStore::connect`], with TLS roots and durability from `options`.
    pub async fn connect_with(
        url: &str,
        options: &RedisOptions,
        clock: Option<SharedClock>,
    ) -> Result<Self, StoreError> {
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let events = broadcast::channel(EVENT_BUFFER).0;
        let link = Arc::new(Link::connect(url, options, push_tx, events.clone()).await?);
        config::migrate(&link).await?;
        tokio::spawn(forward_events(push_rx, link.clone(), events.clone()));
        Ok(Self {
            joins: JoinBatches::new(link.clone(), script!("join.lua"), clock.clone()),
            link,
            scripts: Arc::new(Scripts::load()),
            clock,
            chance: Arc::new(OsChance),
            events,
            draw_seeds: Mutex::new(HashMap::new()),
            report_keep_ms: options.report_keep_days.saturating_mul(DAY_MS),
        })
    }

    /// `lua/report.lua`'s answer: the raw fields of the room's report.
    pub(super) async fn report_fields(
        &self,
        room: &RoomId,
        created_at: Option<Millis>,
    ) -> Result<String, StoreError> {
        let at = created_at.map(|at| at.to_string()).unwrap_or_default();
        self.run_script(&self.scripts.report, room, [at]).await
    }

    /// `lua/reports.lua`'s answer: the room's reports kept.
    pub(super) async fn report_lives(&self, room: &RoomId) -> Result<Vec<String>, StoreError> {
        self.run_script(&self.scripts.reports, room, []).await
    }

    /// Every room a report may be kept of: the open ones and those closed
    /// with one.
    pub(super) async fn reported_rooms(&self) -> Result<Vec<RoomId>, StoreError> {
        // Two reads: on a Cluster the two sets are in slots of their own.
        let mut connection = self.connection().await;
        let mut ids: Vec<String> = connection.smembers(ROOMS_KEY).await.map_err(unavailable)?;
        let reported: Vec<String> = connection
            .smembers(REPORTED_KEY)
            .await
            .map_err(unavailable)?;
        ids.extend(reported);
        ids.sort();
        ids.dedup();
        Ok(ids.iter().filter_map(|id| RoomId::parse(id)).collect())
    }

    /// The same store, its random choices taken from `chance` (a seeded one
    /// makes the same choices as any other store given the same seed).
    pub fn with_chance(mut self, chance: SharedChance) -> Self {
        self.chance = chance;
        self
    }

    /// The random choices of one operation, all drawn whatever it needs
    /// (as the memory store draws them), so seeded stores stay in step.
    fn dice(&self) -> Dice {
        Dice::roll(self.chance.as_ref())
    }

    /// Runs a script on `keys` with the time first among its arguments
    /// (other features' scripts, such as the sale's, share this connection).
    pub(super) async fn eval<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        effect: Effect,
        args: impl IntoIterator<Item = String>,
    ) -> Result<T, RedisError> {
        let args = std::iter::once(self.now_arg()).chain(args).collect();
        let reply = self
            .link
            .run(ScriptCall {
                script,
                keys,
                args,
                channel: None,
                effect,
            })
            .await?;
        Ok(redis::from_redis_value(reply)?)
    }

    async fn connection(&self) -> Connection {
        self.link.connection().await
    }

    fn now_arg(&self) -> String {
        self.clock
            .as_ref()
            .map(|c| c.now_ms().to_string())
            .unwrap_or_default()
    }

    /// Runs one of the room's scripts with `args` after the common ones.
    async fn run_script<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        room: &RoomId,
        args: impl IntoIterator<Item = String>,
    ) -> Result<T, StoreError> {
        self.run_with_keys(script, room, &[], args).await
    }

    /// `run_script`, with `more_keys` (of the same room) after the room's
    /// own. A script that met a schedule entry due changed nothing: the
    /// entries are applied ([`RedisStore::record`]) and it runs again.
    async fn run_with_keys<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        room: &RoomId,
        more_keys: &[String],
        args: impl IntoIterator<Item = String>,
    ) -> Result<T, StoreError> {
        let args: Vec<String> = args.into_iter().collect();
        for _ in 0..SCHEDULE_RETRIES {
            match self.run_once(script, room, more_keys, args.clone()).await {
                Err(StoreError::ScheduleDue(_)) => {
                    self.record(room).await?;
                }
                other => return other,
            }
        }
        Err(StoreError::ScheduleDue(room.clone()))
    }

    /// One run of the script.
    async fn run_once<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        room: &RoomId,
        more_keys: &[String],
        args: Vec<String>,
    ) -> Result<T, StoreError> {
        let keys: Vec<String> = room_keys(room).iter().chain(more_keys).cloned().collect();
        let channel = channel(room);
        let args = std::iter::once(self.now_arg()).chain(args).collect();
        self.link
            .run(ScriptCall {
                script,
                keys: &keys,
                args,
                channel: Some(&channel),
                effect: self.scripts.effect(script),
            })
            .await
            .and_then(|reply| Ok(redis::from_redis_value(reply)?))
            .map_err(|error| store_error(room, error))
    }

    /// Config and stats, plus the config revision a change must be made
    /// against, once the schedule's entries due are applied (api.md,
    /// "Scheduled changes"): as an operator's change is, written only if
    /// nobody wrote the config since it was read, so that nodes applying
    /// them at once apply them once (design rule 15).
    async fn record(&self, room: &RoomId) -> Result<RoomRecord, StoreError> {
        for _ in 0..SCHEDULE_RETRIES {
            let reply: String = self
                .run_once(&self.scripts.room_info, room, &[], Vec::new())
                .await?;
            let record = read(&reply)
                .ok()
                .and_then(|wire| parse_info(room, wire))
                .ok_or_else(|| StoreError::Unexpected("unexpected room record".into()))?;
            if record.held {
                return Ok(record);
            }
            let (now, waiting) = (record.now, record.info.stats.waiting_for_opening());
            let Some(config) = record.info.config.apply_due(now, |old, new| {
                draw::check_schedule(old.opens_at, new.opens_at, now, waiting)
            }) else {
                return Ok(record);
            };
            // No seed: an entry's opening got its draw when the schedule
            // was set, and drawing none here keeps this store's random
            // choices in step with the memory store's (which draws none).
            let args = [record.revision, String::new(), String::new()]
                .into_iter()
                .chain([config::stored(&config)])
                .chain(config::plan(&config, None))
                .collect();
            match self
                .run_once::<Value>(&self.scripts.configure, room, &[], args)
                .await
            {
                Ok(_) | Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(StoreError::Conflict(room.clone()))
    }

    /// The room's draw seed, read once per room and kept.
    async fn draw_seed(
        &self,
        room: &RoomId,
        fresh: bool,
    ) -> Result<Option<Arc<DrawSeed>>, StoreError> {
        if !fresh && let Some(seed) = self.draw_seeds.lock().get(room) {
            return Ok(Some(seed.clone()));
        }
        let mut connection = self.connection().await;
        let seed: Option<String> = connection
            .hget(room_key(room, ROOM), "draw_seed")
            .await
            .map_err(unavailable)?;
        let seed = seed.and_then(|s| s.parse::<DrawSeed>().ok()).map(Arc::new);
        if let Some(seed) = &seed {
            self.draw_seeds.lock().insert(room.clone(), seed.clone());
        }
        Ok(seed)
    }

    async fn join_once(
        &self,
        id: &RoomId,
        visitor: VisitorId,
        options: &JoinOptions,
        seed: Option<&DrawSeed>,
        entry: EntryId,
    ) -> Result<Place, StoreError> {
        // Made for every join once the room has a seed: the script uses it
        // only for a new place before the opening.
        let (commitment, entry, key) = match seed {
            Some(seed) => (
                seed.commitment(),
                entry.to_string(),
                seed.key_of(&entry).to_hex(),
            ),
            None => Default::default(),
        };
        let join = Join {
            visitor: visitor.to_string(),
            fresh: if options.fresh { "1" } else { "" }.to_string(),
            per_minute: options
                .limit
                .as_ref()
                .map(|limit| limit.per_minute.to_string())
                .unwrap_or_default(),
            pow_until: options
                .pow
                .as_ref()
                .map(|p| p.until.to_string())
                .unwrap_or_default(),
            commitment,
            entry,
            key,
            pow_difficulty: options
                .pow
                .as_ref()
                .map(|p| p.difficulty.to_string())
                .unwrap_or_default(),
            code: options.code.map(CodeHash::to_hex).unwrap_or_default(),
            address: options
                .address
                .map(config::address_form)
                .unwrap_or_default(),
            client: options
                .limit
                .as_ref()
                .map(|limit| limit.client.clone())
                .unwrap_or_default(),
            code_guesses: options
                .code_guesses
                .as_ref()
                .map(|budget| format!("{} {}", budget.per_minute, budget.client))
                .unwrap_or_default(),
            pow_id: options
                .pow
                .as_ref()
                .map(|p| p.id.clone())
                .unwrap_or_default(),
            user: options.user.clone().unwrap_or_default(),
        };
        let reply = match self
            .joins
            .join(id, join)
            .await
            .map_err(|error| store_error(id, error))?
        {
            Joined::AtTheBack {
                seq,
                position,
                version,
                shared,
            } => return Ok(shared.place_at_the_back(visitor, seq, position, version)),
            Joined::Refused(refusal) => {
                return Err(ScriptError::of_reply(&refusal).map_or_else(
                    || StoreError::Unexpected(format!("a join refused with {refusal:?}")),
                    |refusal| refused(id, refusal),
                ));
            }
            Joined::Place(reply) => reply,
        };
        let place: WirePlace = read(&reply).map_err(|_| unexpected_place())?;
        // The place's owner: a known user's may be another visitor.
        let owner = place
            .visitor
            .as_deref()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::Unexpected("a join without its visitor".into()))?;
        place.into_place(owner).ok_or_else(unexpected_place)
    }
}

/// What a script's failure means for the caller: the refusal it answered,
/// or (anything else) the store is unavailable.
fn store_error(room: &RoomId, error: RedisError) -> StoreError {
    match ScriptError::of(&error) {
        Some(refusal) => refused(room, refusal),
        None => unavailable(error),
    }
}

fn refused(room: &RoomId, refusal: ScriptError) -> StoreError {
    match refusal {
        ScriptError::NoRoom => StoreError::RoomNotFound(room.clone()),
        ScriptError::Closed => StoreError::RoomClosed(room.clone()),
        ScriptError::Exists => StoreError::RoomExists(room.clone()),
        ScriptError::Conflict => StoreError::Conflict(room.clone()),
        ScriptError::RateLimited(retry_after_s) => StoreError::RateLimited { retry_after_s },
        ScriptError::UserRequired => StoreError::UserRequired,
        ScriptError::PowRequired => StoreError::PowRequired,
        ScriptError::PowReused => StoreError::PowReused,
        ScriptError::PowTooEasy => StoreError::PowTooEasy,
        ScriptError::NotAccepting => StoreError::NotAccepting,
        ScriptError::NoDraw => StoreError::NoDraw,
        ScriptError::NotDrawn => StoreError::NotDrawn,
        ScriptError::DrawSeed => StoreError::DrawSeed,
        ScriptError::ScheduleDue => StoreError::ScheduleDue(room.clone()),
        ScriptError::NotWaiting => StoreError::NotWaiting,
        ScriptError::TooManyNotify => StoreError::TooManyNotifications,
        ScriptError::ResumeUsed => StoreError::ResumeUsed,
        ScriptError::CodeRequired => StoreError::CodeRequired,
        ScriptError::InvalidCode => StoreError::InvalidCode,
        ScriptError::CodeUsed => StoreError::CodeUsed,
        // The callers name the group (`add_codes`, `remove_codes`).
        ScriptError::GroupExists => StoreError::GroupExists(String::new()),
        ScriptError::NoGroup => StoreError::GroupNotFound(String::new()),
        ScriptError::TooManyGroups => StoreError::TooManyGroups(crate::words::codes::MAX_GROUPS),
        other => StoreError::Unexpected(format!("{other:?} from an admission script")),
    }
}

/// A room as `room_info.lua` reads it.
struct RoomRecord {
    info: RoomInfo,
    /// The config revision a change must be made against.
    revision: String,
    /// The store's time of the read.
    now: Millis,
    /// The rooms file's table the room was under last, if any.
    applied: Option<TableHash>,
    /// An operator's pause holds the schedule.
    held: bool,
}

/// A fresh draw seed and its commitment, for the scripts that keep one if
/// the room gets its first `opens_at`.
fn seed_args(dice: &Dice) -> [String; 2] {
    let seed = dice.draw_seed();
    [seed.to_hex(), seed.commitment()]
}

/// A pushed value as text.
fn text(value: &Value) -> Option<String> {
    redis::from_redis_value_ref::<String>(value).ok()
}

fn parse_info(room: &RoomId, wire: WireRoomInfo) -> Option<RoomRecord> {
    let field = |name: &str| wire.room.get(name).cloned();
    let parse = |name: &str| field(name)?.parse::<u64>().ok();
    let config = config::read(&wire.room, wire.schedule.as_deref())?;
    let tuning = autotune::Tuning {
        effective: parse("tune_effective").map_or(config.admit_per_tick, |n| n as u32),
        ..Default::default()
    };
    let effective = tuning.rate(config.autotune.as_ref(), config.admit_per_tick);
    let autotune = config.autotune.as_ref().map(|_| AutotuneStats {
        decision: field("tune_last")
            .and_then(|json| serde_json::from_str::<WireDecision>(&json).ok())
            .map(WireDecision::into_decision)
            .unwrap_or_default(),
        changes: wire
            .tune_changes
            .iter()
            .filter_map(|json| serde_json::from_str::<WireChange>(json).ok())
            .map(WireChange::into_change)
            .collect(),
    });
    let stats = RoomStats {
        waiting: wire.waiting,
        active: wire.active,
        admitted_total: parse("admitted_total")?,
        admitted_last_minute: wire.admitted_last_minute,
        oldest_wait_seconds: wire.oldest_wait_ms / 1000,
        turned_away: field("turned_away")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        no_shows: field("no_shows").and_then(|n| n.parse().ok()).unwrap_or(0),
        sessions_lapsed: field("sessions_lapsed")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        pre_queue: wire.pre_queue,
        bypassed: field("bypassed").and_then(|n| n.parse().ok()).unwrap_or(0),
        bypassed_active: wire.bypassed_active,
        priority_waiting: wire.priority_waiting,
        next_change_at: config.schedule.next_at().map(Moment),
        admit_per_tick_effective: effective,
        autotune,
    };
    // As the model's `draw_info`: before an entry of the schedule sets the
    // opening, the draw is shown at the opening it will set, unopened.
    let opened = wire.opened && config.opens_at.is_some();
    let draw = config
        .opens_at
        .or(config.schedule.opening())
        .zip(field("draw_commitment").filter(|c| !c.is_empty()))
        .map(|(opens_at, commitment)| DrawInfo {
            opens_at,
            commitment,
            // The seed stays in the store until the opening reveals it.
            seed: field("draw_seed").filter(|_| opened),
            entrants: wire.entrants,
            priority_entrants: wire.priority_entrants,
            drawn_at: opened.then_some(opens_at),
        });
    Some(RoomRecord {
        applied: field("applied").map(TableHash::stored),
        held: field("schedule_held").as_deref() == Some("1"),
        revision: field("config_rev")?,
        now: wire.now,
        info: RoomInfo::new(room.clone(), config, stats, draw),
    })
}

fn unexpected_place() -> StoreError {
    StoreError::Unexpected("unexpected place".into())
}

/// Turns pub/sub pushes into store events. After a disconnection it keeps
/// pinging so the manager reconnects (and resubscribes), then says `Resumed`.
async fn forward_events(
    mut pushes: mpsc::UnboundedReceiver<PushInfo>,
    link: Arc<Link>,
    events: broadcast::Sender<StoreEvent>,
) {
    let mut interrupted = false;
    while let Some(push) = pushes.recv().await {
        match push.kind {
            PushKind::PMessage | PushKind::SMessage => {
                let (channel, payload) = match push.data.as_slice() {
                    [_, channel, payload] | [channel, payload] => (channel, payload),
                    _ => continue,
                };
                let event = text(channel)
                    .and_then(|c| room_of_channel(&c))
                    .zip(text(payload))
                    .and_then(|(room, payload)| parse_event(room, &payload));
                match event {
                    Some(event) => {
                        let _ = events.send(StoreEvent::Room(event));
                    }
                    None => tracing::warn!(?push.data, "unreadable room event"),
                }
            }
            PushKind::Disconnection if !interrupted => {
                interrupted = true;
                tracing::warn!("lost the connection to Redis; reconnecting");
                let _ = events.send(StoreEvent::Interrupted);
                link.on_disconnection();
            }
            PushKind::PSubscribe | PushKind::SSubscribe if interrupted => {
                interrupted = false;
                tracing::info!("reconnected to Redis and resubscribed");
                let _ = events.send(StoreEvent::Resumed);
            }
            _ => {}
        }
    }
}

#[async_trait]
impl Store for RedisStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn failure_kinds(&self) -> &'static [&'static str] {
        super::connection::FAILURE_KINDS
    }

    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.events.subscribe()
    }

    async fn watch(&self, room: &RoomId) -> Result<(), StoreError> {
        self.link.watch(&channel(room)).await.map_err(unavailable)
    }

    async fn apply(&self, op: Op) -> Result<Answer, StoreError> {
        op.run_on(self).await
    }
}

impl Handle<op::CreateRoom> for RedisStore {
    /// The set of room ids lives in a slot of its own (on a Cluster no
    /// script can touch it and a room's keys together), so creating and
    /// closing are ordered to make a failure between the two steps harmless:
    /// an id is listed before its room exists and unlisted after it closed.
    /// A listed id without an open room only costs a tick that answers
    /// `NOROOM`; an open room is never missing from the list.
    async fn handle(
        &self,
        op::CreateRoom { room: id, config }: op::CreateRoom,
    ) -> Result<Box<RoomInfo>, StoreError> {
        let dice = self.dice();
        config.validate().map_err(StoreError::InvalidConfig)?;
        self.link
            .write(redis::cmd("SADD").arg(ROOMS_KEY).arg(id.as_str()))
            .await
            .map_err(unavailable)?;
        // The sale's keys go too: a room created again under an old id starts
        // with nothing of its predecessor's sale (one script, one slot).
        let _: Value = self
            .run_with_keys(
                &self.scripts.create_room,
                &id,
                &sale_keys(&id),
                seed_args(&dice)
                    .into_iter()
                    .chain([config::stored(&config)])
                    .chain(config::plan(&config, Some(config.paused))),
            )
            .await?;
        self.room(&id).await.map(Box::new)
    }
}

impl Handle<op::Configure> for RedisStore {
    async fn handle(
        &self,
        op::Configure { room, patch }: op::Configure,
    ) -> Result<Box<RoomInfo>, StoreError> {
        let id = &room;
        let dice = self.dice();
        // Optimistic: read, change, write if nobody wrote in between.
        for _ in 0..10 {
            let RoomRecord {
                info,
                revision,
                now,
                ..
            } = self.record(id).await?;
            let config = patch
                .apply_to(&info.config)
                .map_err(StoreError::InvalidConfig)?;
            draw::check_schedule(
                info.config.opens_at,
                config.opens_at,
                now,
                info.stats.waiting_for_opening(),
            )
            .map_err(StoreError::InvalidConfig)?;
            // An operator's pause holds the schedule (api.md).
            let held = patch
                .get("paused")
                .is_some_and(|p| !p.is_null())
                .then_some(config.paused);
            let args = std::iter::once(revision)
                .chain(seed_args(&dice))
                .chain([config::stored(&config)])
                .chain(config::plan(&config, held));
            match self
                .run_script::<Value>(&self.scripts.configure, id, args)
                .await
            {
                Ok(_) => return self.room(id).await.map(Box::new),
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(StoreError::Conflict(id.clone()))
    }
}

impl Handle<op::ApplyTable> for RedisStore {
    /// As `configure`, optimistic: the config is made from the room as
    /// read, and `apply_table.lua` writes it only if the room is still what
    /// was read; the script alone decides whether the table is new, so that
    /// nodes applying it at once apply it once. A table already applied is
    /// not checked again (a past `opens_at` it set is no error then).
    async fn handle(
        &self,
        op::ApplyTable { table }: op::ApplyTable,
    ) -> Result<Applied, StoreError> {
        let table = &table;
        let dice = self.dice();
        let id = &table.id;
        for _ in 0..10 {
            let (config, revision, held) = match self.record(id).await {
                Ok(record) if record.applied.as_ref() == Some(&table.hash) => {
                    return Ok(Applied::Unchanged);
                }
                Ok(RoomRecord {
                    info,
                    revision,
                    now,
                    ..
                }) => {
                    let config = table
                        .patch
                        .apply_to(&info.config)
                        .map_err(StoreError::InvalidConfig)?;
                    draw::check_schedule(
                        info.config.opens_at,
                        config.opens_at,
                        now,
                        info.stats.waiting_for_opening(),
                    )
                    .map_err(StoreError::InvalidConfig)?;
                    let held = table
                        .patch
                        .get("paused")
                        .is_some_and(|p| !p.is_null())
                        .then_some(config.paused);
                    (config, revision, held)
                }
                Err(StoreError::RoomNotFound(_) | StoreError::RoomClosed(_)) => {
                    let config = table.patch.new_room().map_err(StoreError::InvalidConfig)?;
                    // Listed before it exists, as `create_room` does.
                    self.link
                        .write(redis::cmd("SADD").arg(ROOMS_KEY).arg(id.as_str()))
                        .await
                        .map_err(unavailable)?;
                    let held = Some(config.paused);
                    (config, String::new(), held)
                }
                Err(error) => return Err(error),
            };
            let args = [table.hash.as_str().to_string(), revision]
                .into_iter()
                .chain(seed_args(&dice))
                .chain([config::stored(&config)])
                .chain(config::plan(&config, held));
            let reply: String = match self
                .run_with_keys(&self.scripts.apply_table, id, &sale_keys(id), args)
                .await
            {
                Ok(reply) => reply,
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error),
            };
            return match reply.parse::<TableReply>() {
                Ok(TableReply::Created) => Ok(Applied::Created),
                Ok(TableReply::Changed) => Ok(Applied::Changed),
                Ok(TableReply::Unchanged) => Ok(Applied::Unchanged),
                Ok(TableReply::StillClosed) => {
                    self.link
                        .write(redis::cmd("SREM").arg(ROOMS_KEY).arg(id.as_str()))
                        .await
                        .map_err(unavailable)?;
                    Ok(Applied::Unchanged)
                }
                Err(_) => Err(StoreError::Unexpected(format!(
                    "apply_table answered {reply}"
                ))),
            };
        }
        Err(StoreError::Conflict(id.clone()))
    }
}

impl Handle<op::CloseRoom> for RedisStore {
    async fn handle(&self, op::CloseRoom { room, sale }: op::CloseRoom) -> Result<(), StoreError> {
        let id = &room;
        let args = [self.report_keep_ms.to_string(), sale.unwrap_or_default()];
        let _: Value = self.run_script(&self.scripts.close_room, id, args).await?;
        // Listed with a report before unlisted as open: never missing from both.
        self.link
            .write(redis::cmd("SADD").arg(REPORTED_KEY).arg(id.as_str()))
            .await
            .map_err(unavailable)?;
        self.link
            .write(redis::cmd("SREM").arg(ROOMS_KEY).arg(id.as_str()))
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

impl Handle<op::ReadRoom> for RedisStore {
    async fn handle(
        &self,
        op::ReadRoom { room }: op::ReadRoom,
    ) -> Result<Box<RoomInfo>, StoreError> {
        let id = &room;
        match self.record(id).await {
            Ok(record) => Ok(Box::new(record.info)),
            Err(StoreError::RoomClosed(id)) => Err(StoreError::RoomNotFound(id)),
            Err(error) => Err(error),
        }
    }
}

impl Handle<op::ListRooms> for RedisStore {
    async fn handle(&self, _: op::ListRooms) -> Result<Vec<RoomInfo>, StoreError> {
        let mut infos = Vec::new();
        for id in self.room_ids().await? {
            match self.room(&id).await {
                Ok(info) => infos.push(info),
                Err(StoreError::RoomNotFound(_)) => {}
                Err(error) => return Err(error),
            }
        }
        infos.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(infos)
    }
}

impl Handle<op::RoomIds> for RedisStore {
    async fn handle(&self, _: op::RoomIds) -> Result<Vec<RoomId>, StoreError> {
        let mut connection = self.connection().await;
        let ids: Vec<String> = connection.smembers(ROOMS_KEY).await.map_err(unavailable)?;
        Ok(ids.iter().filter_map(|id| RoomId::parse(id)).collect())
    }
}

impl Handle<op::Join> for RedisStore {
    async fn handle(
        &self,
        op::Join {
            room,
            visitor,
            options,
        }: op::Join,
    ) -> Result<Place, StoreError> {
        let (id, options) = (&room, &options);
        let entry = self.dice().entry;
        let seed = self.draw_seeds.lock().get(id).cloned();
        let mut joined = self
            .join_once(id, visitor, options, seed.as_deref(), entry)
            .await;
        for _ in 0..SCHEDULE_RETRIES {
            // The call met a schedule entry due and changed nothing.
            if !matches!(joined, Err(StoreError::ScheduleDue(_))) {
                break;
            }
            self.record(id).await?;
            joined = self
                .join_once(id, visitor, options, seed.as_deref(), entry)
                .await;
        }
        match joined {
            // The room has a draw this node has no (or an old) seed for:
            // the script changed nothing, so read the seed and join again.
            Err(StoreError::DrawSeed) => {
                let seed = self.draw_seed(id, true).await?;
                self.join_once(id, visitor, options, seed.as_deref(), entry)
                    .await
            }
            other => other,
        }
    }
}

impl Handle<op::AddCodes> for RedisStore {
    async fn handle(
        &self,
        op::AddCodes { room, group }: op::AddCodes,
    ) -> Result<GroupSummary, StoreError> {
        let id = &room;
        let args = [
            group.group.clone(),
            group.priority.to_string(),
            group.uses.to_string(),
        ]
        .into_iter()
        .chain(group.codes.iter().map(|code| code.to_hex()));
        let total: u64 = self
            .run_script(&self.scripts.add_codes, id, args)
            .await
            .map_err(|error| match error {
                StoreError::GroupExists(_) => StoreError::GroupExists(group.group.clone()),
                other => other,
            })?;
        Ok(GroupSummary {
            group: group.group,
            priority: group.priority,
            uses: group.uses,
            total,
            used: 0,
        })
    }
}

impl Handle<op::CodeGroups> for RedisStore {
    async fn handle(
        &self,
        op::CodeGroups { room }: op::CodeGroups,
    ) -> Result<Vec<GroupSummary>, StoreError> {
        let id = &room;
        let reply: String = self.run_script(&self.scripts.code_groups, id, []).await?;
        let mut groups: Vec<GroupSummary> = read_list(&reply)
            .map_err(|_| StoreError::Unexpected("unreadable groups of codes".into()))?;
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        Ok(groups)
    }
}

impl Handle<op::RemoveCodes> for RedisStore {
    async fn handle(
        &self,
        op::RemoveCodes { room, group }: op::RemoveCodes,
    ) -> Result<(), StoreError> {
        let (id, group) = (&room, group.as_str());
        self.run_script::<()>(&self.scripts.remove_codes, id, [group.to_string()])
            .await
            .map_err(|error| match error {
                StoreError::GroupNotFound(_) => StoreError::GroupNotFound(group.to_string()),
                other => other,
            })
    }
}

impl Handle<op::DrawEntries> for RedisStore {
    async fn handle(
        &self,
        op::DrawEntries { room, after, limit }: op::DrawEntries,
    ) -> Result<Vec<(DrawKey, EntryId)>, StoreError> {
        let id = &room;
        let after = after
            .map(|(key, entry)| format!("{}:{entry}", key.to_hex()))
            .unwrap_or_default();
        let members: Vec<String> = self
            .run_script(&self.scripts.draw_entries, id, [after, limit.to_string()])
            .await?;
        members
            .iter()
            .map(|member| {
                let (key, entry) = member.split_once(':')?;
                Some((key.parse().ok()?, entry.parse().ok()?))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| StoreError::Unexpected("an unreadable draw entry".into()))
    }
}

impl Handle<op::Status> for RedisStore {
    async fn handle(&self, op::Status { room, visitor }: op::Status) -> Result<Place, StoreError> {
        let id = &room;
        let reply: String = self
            .run_script(&self.scripts.status, id, [visitor.to_string()])
            .await?;
        read::<WirePlace>(&reply)
            .ok()
            .and_then(|place| place.into_place(visitor))
            .ok_or_else(unexpected_place)
    }
}

impl Handle<op::Places> for RedisStore {
    async fn handle(
        &self,
        op::Places { room, visitors }: op::Places,
    ) -> Result<Vec<Place>, StoreError> {
        let (id, visitors) = (&room, visitors.as_slice());
        if visitors.is_empty() {
            return Ok(Vec::new());
        }
        let reply: String = self
            .run_script(
                &self.scripts.places,
                id,
                visitors.iter().map(VisitorId::to_string),
            )
            .await?;
        let reply: Vec<WirePlace> = read_list(&reply).map_err(|_| unexpected_place())?;
        if reply.len() != visitors.len() {
            return Err(StoreError::Unexpected(format!(
                "{} places for {} visitors",
                reply.len(),
                visitors.len()
            )));
        }
        visitors
            .iter()
            .zip(reply)
            .map(|(visitor, place)| place.into_place(*visitor).ok_or_else(unexpected_place))
            .collect()
    }
}

impl Handle<op::UserOf> for RedisStore {
    async fn handle(
        &self,
        op::UserOf { room, visitor }: op::UserOf,
    ) -> Result<Option<String>, StoreError> {
        let id = &room;
        let mut connection = self.connection().await;
        connection
            .hget(room_key(id, USER_OF), visitor.to_string())
            .await
            .map_err(unavailable)
    }
}

impl Handle<op::Leave> for RedisStore {
    async fn handle(&self, op::Leave { room, visitor }: op::Leave) -> Result<(), StoreError> {
        let id = &room;
        let _: Value = self
            .run_script(&self.scripts.leave, id, [visitor.to_string()])
            .await?;
        Ok(())
    }
}

impl Handle<op::Arrive> for RedisStore {
    async fn handle(
        &self,
        op::Arrive {
            room,
            visitor,
            pass_exp_s,
        }: op::Arrive,
    ) -> Result<Place, StoreError> {
        let id = &room;
        let reply: String = self
            .run_script(
                &self.scripts.arrive,
                id,
                [visitor.to_string(), pass_exp_s.to_string()],
            )
            .await?;
        read::<WirePlace>(&reply)
            .ok()
            .and_then(|place| place.into_place(visitor))
            .ok_or_else(unexpected_place)
    }
}

impl Handle<op::ResumeArrivals> for RedisStore {
    async fn handle(
        &self,
        op::ResumeArrivals { room, seen }: op::ResumeArrivals,
    ) -> Result<u64, StoreError> {
        let id = &room;
        let seen = seen.map(|count| count.to_string()).unwrap_or_default();
        self.run_script(&self.scripts.resume_arrivals, id, [seen])
            .await
    }
}

impl Handle<op::RevokePass> for RedisStore {
    async fn handle(
        &self,
        op::RevokePass {
            room,
            visitor,
            pass_exp_s,
            why,
        }: op::RevokePass,
    ) -> Result<bool, StoreError> {
        let id = &room;
        let expected = pass_exp_s.map(|e| e.to_string()).unwrap_or_default();
        let taken: u64 = self
            .run_script(
                &self.scripts.revoke_pass,
                id,
                [visitor.to_string(), expected, why.counted_as().to_string()],
            )
            .await?;
        Ok(taken == 1)
    }
}

impl Handle<op::Touch> for RedisStore {
    async fn handle(&self, op::Touch { room, visitors }: op::Touch) -> Result<(), StoreError> {
        let (id, visitors) = (&room, visitors.as_slice());
        let _: Value = self
            .run_script(
                &self.scripts.touch,
                id,
                visitors.iter().map(VisitorId::to_string),
            )
            .await?;
        Ok(())
    }
}

impl Handle<op::TickIfDue> for RedisStore {
    async fn handle(&self, op::TickIfDue { room }: op::TickIfDue) -> Result<Tick, StoreError> {
        let id = &room;
        let pick = self.dice().pick;
        let reply: String = self
            .run_script(&self.scripts.tick, id, [pick.to_hex()])
            .await?;
        let tick: WireTick = read(&reply)
            .map_err(|error| StoreError::Unexpected(format!("tick answered {reply}: {error}")))?;
        Ok(tick.into())
    }
}

impl Handle<op::AnnounceStock> for RedisStore {
    async fn handle(
        &self,
        op::AnnounceStock { room, stock }: op::AnnounceStock,
    ) -> Result<(), StoreError> {
        let id = &room;
        let _: u64 = self
            .run_script(
                &self.scripts.announce_stock,
                id,
                [stock.left.to_string(), stock.held.to_string()],
            )
            .await?;
        Ok(())
    }
}

impl Handle<op::RecordSample> for RedisStore {
    async fn handle(
        &self,
        op::RecordSample {
            room,
            epoch,
            latency_ms,
            failure,
        }: op::RecordSample,
    ) -> Result<(), StoreError> {
        let failure = failure.map_or_else(|| autotune::NO_FAILURE.to_string(), |f| f.name());
        let _: Value = self
            .run_script(
                &self.scripts.record_sample,
                &room,
                [latency_ms.to_string(), failure, epoch.to_string()],
            )
            .await?;
        Ok(())
    }
}

impl RedisStore {
    /// Runs a script that answers a place (`WirePlace`).
    async fn place_of(
        &self,
        script: &Script,
        room: &RoomId,
        visitor: VisitorId,
        args: Vec<String>,
    ) -> Result<Place, StoreError> {
        let reply: String = self.run_script(script, room, args).await?;
        read::<WirePlace>(&reply)
            .ok()
            .and_then(|place| place.into_place(visitor))
            .ok_or_else(unexpected_place)
    }
}

impl Handle<op::Notify> for RedisStore {
    async fn handle(
        &self,
        op::Notify { room, visitor, ask }: op::Notify,
    ) -> Result<Place, StoreError> {
        let mut args = vec![visitor.to_string()];
        match ask {
            Some(ask) => args.extend([
                serde_json::to_string(&ask.request)
                    .map_err(|error| StoreError::Unexpected(error.to_string()))?,
                ask.client.clone(),
                ask.per_client.to_string(),
                ask.join_limit
                    .map(|limit| limit.per_minute.to_string())
                    .unwrap_or_default(),
            ]),
            None => args.push(String::new()),
        }
        self.place_of(&self.scripts.notify, &room, visitor, args)
            .await
    }
}

impl Handle<op::Resume> for RedisStore {
    async fn handle(
        &self,
        op::Resume {
            room,
            visitor,
            kind,
        }: op::Resume,
    ) -> Result<Place, StoreError> {
        let args = vec![visitor.to_string(), kind.to_string()];
        self.place_of(&self.scripts.resume, &room, visitor, args)
            .await
    }
}

impl Handle<op::ClaimEvents> for RedisStore {
    async fn handle(
        &self,
        op::ClaimEvents {
            room,
            consumer,
            takeover_ms,
            limit,
        }: op::ClaimEvents,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let reply: String = self
            .run_script(
                &self.scripts.outbox_claim,
                &room,
                [
                    consumer.to_string(),
                    takeover_ms.to_string(),
                    limit.to_string(),
                ],
            )
            .await?;
        let events: Vec<WireOutboxEvent> = read_list(&reply)
            .map_err(|error| StoreError::Unexpected(format!("outbox answered {reply}: {error}")))?;
        events
            .into_iter()
            .map(WireOutboxEvent::into_event)
            .collect::<Option<_>>()
            .ok_or_else(|| StoreError::Unexpected(format!("an unreadable outbox event: {reply}")))
    }
}

impl Handle<op::HoldEvents> for RedisStore {
    async fn handle(
        &self,
        op::HoldEvents {
            room,
            consumer,
            entries,
        }: op::HoldEvents,
    ) -> Result<Vec<String>, StoreError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let args = std::iter::once(consumer.to_string()).chain(entries);
        let reply: String = self
            .run_script(&self.scripts.outbox_hold, &room, args)
            .await?;
        read_list(&reply).map_err(|error| StoreError::Unexpected(error.to_string()))
    }
}

impl Handle<op::SettleEvents> for RedisStore {
    async fn handle(
        &self,
        op::SettleEvents {
            room,
            entries,
            push_gone,
        }: op::SettleEvents,
    ) -> Result<(), StoreError> {
        let args =
            std::iter::once(entries.join(" ")).chain(push_gone.iter().map(VisitorId::to_string));
        let _: Value = self
            .run_script(&self.scripts.outbox_settle, &room, args)
            .await?;
        Ok(())
    }
}

impl Handle<op::Ping> for RedisStore {
    async fn handle(&self, _: op::Ping) -> Result<(), StoreError> {
        let mut connection = self.connection().await;
        let _: String = redis::cmd("PING")
            .query_async(&mut connection)
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

impl Handle<op::EndAdminSession> for RedisStore {
    async fn handle(
        &self,
        op::EndAdminSession { session, until }: op::EndAdminSession,
    ) -> Result<(), StoreError> {
        let id = session.as_str();
        self.link
            .write(
                redis::cmd("SET")
                    .arg(ended_session_key(id))
                    .arg(1)
                    .arg("PXAT")
                    .arg(until),
            )
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

impl Handle<op::AdminSessionEnded> for RedisStore {
    async fn handle(
        &self,
        op::AdminSessionEnded { session }: op::AdminSessionEnded,
    ) -> Result<bool, StoreError> {
        let id = session.as_str();
        let mut connection = self.connection().await;
        connection
            .exists(ended_session_key(id))
            .await
            .map_err(unavailable)
    }
}

impl Handle<op::LoginAttempt> for RedisStore {
    async fn handle(
        &self,
        op::LoginAttempt { block, attempt }: op::LoginAttempt,
    ) -> Result<(), StoreError> {
        let block = &block;
        let attempt: &'static str = attempt.into();
        // Answered without waiting for replicas: a count a failover loses
        // gives a guesser a few more tries, and an operator's login should
        // not wait on (or fail with) a slow replica.
        let wait_s: u64 = self
            .eval(
                &self.scripts.login,
                &[login_key(block)],
                Effect::Reads,
                [attempt.to_string()],
            )
            .await
            .map_err(unavailable)?;
        match wait_s {
            0 => Ok(()),
            retry_after_s => Err(StoreError::TooManyAttempts { retry_after_s }),
        }
    }
}
