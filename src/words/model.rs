//! The words of admission: rooms, their config and stats, a visitor's place,
//! and the events a store publishes when a room changes.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::words::clock::{Millis, Moment};
use crate::words::draw::{DrawInfo, EntryId};
use crate::words::language::Language;
use crate::words::networks::Networks;
use crate::words::page::{PageBranding, PagePatch, is_deceptive};
use crate::words::wire_enum;

/// A room's slug: `[a-z0-9-]{1,64}`. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RoomId(Arc<str>);

impl RoomId {
    pub fn parse(raw: &str) -> Option<Self> {
        let valid = (1..=64).contains(&raw.len())
            && raw
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        valid.then(|| Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RoomId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The pattern `RoomId::parse` checks, for the API description.
pub const ROOM_ID_PATTERN: &str = "^[a-z0-9-]{1,64}$";

impl utoipa::PartialSchema for RoomId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some(ROOM_ID_PATTERN))
            .into()
    }
}

impl utoipa::ToSchema for RoomId {}

impl<'de> Deserialize<'de> for RoomId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        RoomId::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom("room id must match [a-z0-9-]{1,64}"))
    }
}

/// A visitor: 64 random bits, written as 16 hex digits. Tickets and passes
/// are signed, so the id needs to be unique, not secret; 64 bits keep a
/// million-visitor line small (collision odds there: about 3 in 10^8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VisitorId(pub u64);

impl VisitorId {
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl fmt::Display for VisitorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl FromStr for VisitorId {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        if s.len() != 16 {
            return Err(());
        }
        u64::from_str_radix(s, 16).map(Self).map_err(|_| ())
    }
}

impl Serialize for VisitorId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What an operator sets on a room. Field names are the public API's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RoomConfig {
    pub name: String,
    pub target_url: String,
    /// Visitors admitted per tick; also the token bucket's capacity.
    pub admit_per_tick: u32,
    pub tick_ms: u64,
    /// Cap on visitors holding an unexpired pass at once; `None` = no cap.
    pub max_active: Option<u64>,
    pub pass_ttl_s: u64,
    /// A waiting visitor with no socket and no poll for this long loses the place.
    pub abandon_after_s: u64,
    pub paused: bool,
    /// A pass no `/api/verify` has seen this long after its admission is
    /// reclaimed as a no-show; `None` = off.
    #[serde(default)]
    pub arrival_grace_s: Option<u64>,
    /// The HS256 key the room's site signs user tokens with. Write-only:
    /// never serialized (the operator API shows `user_key_set`) nor logged.
    #[serde(default, skip_serializing)]
    #[schema(ignore)]
    pub user_key: Option<Secret>,
    /// Anonymous joins are refused (401 `user_required`).
    #[serde(default)]
    pub user_required: bool,
    /// A join without a valid code is refused (403 `code_required`):
    /// invite-only rooms, presale phases.
    #[serde(default)]
    pub code_required: bool,
    /// A join that makes a new place must carry a solved challenge; 0 = off.
    #[serde(default)]
    pub pow_difficulty: u32,
    /// The operator's message to everyone in the room, shown on the waiting
    /// page and pushed to every socket when it changes.
    #[serde(default)]
    pub notice: Option<String>,
    #[serde(default)]
    pub queue_method: QueueMethod,
    /// The scheduled opening: before it joins enter the pre-queue, drawn
    /// into one random order at the opening (`super::draw`).
    #[serde(default)]
    pub opens_at: Option<Moment>,
    /// From then on new arrivals are turned away; those waiting stay.
    #[serde(default)]
    pub closes_at: Option<Moment>,
    /// When the room's sale sells out (nothing left, no hold out), everyone
    /// waiting is told `closed`, `sold_out`, and so is every new arrival.
    #[serde(default = "yes")]
    pub close_when_sold_out: bool,
    /// Clients from these addresses and networks are admitted at once,
    /// whatever the bucket, the cap, `paused`, the method or the opening,
    /// and hold passes outside the cap (api.md, "Bypass networks").
    #[serde(default)]
    #[schema(value_type = Vec<String>, example = json!(["203.0.113.7", "10.20.0.0/16"]))]
    pub bypass_networks: Networks,
    /// The pages' language for a visitor who asks for none we speak
    /// (neither `?lang=`, the `wr_lang` cookie nor `Accept-Language`).
    #[serde(default)]
    pub language: Language,
    /// The operator's branding of the waiting and sale pages.
    #[serde(default)]
    pub page: PageBranding,
}

fn yes() -> bool {
    true
}

wire_enum! {
    /// How a room admits (api.md's `queue_method`).
    #[derive(Default)]
    pub enum QueueMethod {
        /// In join order.
        #[default]
        Fifo,
        /// Each tick admits uniformly at random among those waiting; nobody has
        /// a position, only an expected wait.
        Random,
        /// Every arrival is admitted at once, bucket and cap ignored; a line
        /// that exists is admitted at the next tick.
        Passthrough,
        /// New arrivals are turned away; those waiting keep their places.
        Reject,
    }
}

impl QueueMethod {
    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn parse(name: &str) -> Option<Self> {
        name.parse().ok()
    }
}

/// The longest notice, in characters.
pub const MAX_NOTICE_CHARS: usize = 500;

/// A key an operator gives and nobody reads back: its `Debug` (what the
/// logs would print) is `[redacted]`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    #[test]
    fn a_room_config_in_the_logs_keeps_its_user_key_to_itself() {
        let mut config = RoomConfig::new("Drop", "/buy");
        config.user_key = Some(Secret::new("the-shop-s-user-key-0123456789abcdef"));
        let logged = format!("{config:?}");
        assert!(!logged.contains("the-shop"), "{logged}");
        assert!(logged.contains("[redacted]"), "{logged}");
    }
}

/// The shortest user key accepted: a short HMAC key can be guessed offline.
pub const MIN_USER_KEY_CHARS: usize = 32;

pub const DEFAULT_ADMIT_PER_TICK: u32 = 10;
pub const DEFAULT_TICK_MS: u64 = 5_000;
pub const DEFAULT_PASS_TTL_S: u64 = 600;
/// How long a visitor with no socket and no poll keeps a place: a phone
/// that locks or a tab in the background for a few minutes must come back
/// to it (hosted rooms keep a place 5 to 20 minutes).
pub const DEFAULT_ABANDON_AFTER_S: u64 = 300;

/// A change to any subset of a room's config. `max_active: null` removes the cap,
/// so that field distinguishes "absent" from "null".
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomPatch {
    pub name: Option<String>,
    pub target_url: Option<String>,
    pub admit_per_tick: Option<u32>,
    pub tick_ms: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>)]
    pub max_active: Option<Option<u64>>,
    pub pass_ttl_s: Option<u64>,
    pub abandon_after_s: Option<u64>,
    pub paused: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>)]
    pub arrival_grace_s: Option<Option<u64>>,
    /// Write-only: at least 32 characters, or null to remove it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, write_only)]
    pub user_key: Option<Option<Secret>>,
    pub user_required: Option<bool>,
    pub code_required: Option<bool>,
    pub pow_difficulty: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub notice: Option<Option<String>>,
    pub queue_method: Option<QueueMethod>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Moment>)]
    pub opens_at: Option<Option<Moment>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Moment>)]
    pub closes_at: Option<Option<Moment>>,
    pub close_when_sold_out: Option<bool>,
    /// Read as a list of text, so a bad entry is the config's error
    /// (`invalid_config`, naming it), not the body's.
    #[serde(default, deserialize_with = "network_list")]
    pub bypass_networks: Option<Vec<String>>,
    /// A language code (`en`, `ko`, `ja`, `zh-Hans`, `es`, `fr`, `de`,
    /// `pt-BR`) or an alias of one (`zh`, `zh-CN`, `pt`, …); stored as
    /// its code.
    #[schema(value_type = Option<String>, example = "ko")]
    pub language: Option<String>,
    /// The fields given change; `null` removes every one.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<PagePatch>)]
    pub page: Option<Option<PagePatch>>,
}

/// A field that may be absent (unchanged) or `null` (removed).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `bypass_networks` as a list of text; anything else is refused by name.
fn network_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    Vec::<String>::deserialize(d).map(Some).map_err(|error| {
        serde::de::Error::custom(format!(
            "bypass_networks must be a list of addresses and networks: {error}"
        ))
    })
}

impl RoomPatch {
    /// The config of a new room made of this patch: the defaults, with the
    /// patch's fields (`name` and `target_url` are required).
    pub fn new_room(&self) -> Result<RoomConfig, String> {
        let (Some(name), Some(target_url)) = (&self.name, &self.target_url) else {
            return Err("name and target_url are required".into());
        };
        self.apply_to(&RoomConfig::new(name.clone(), target_url.clone()))
    }

    /// The config this patch makes of `base`, or what is wrong with it.
    pub fn apply_to(&self, base: &RoomConfig) -> Result<RoomConfig, String> {
        let mut next = base.clone();
        if let Some(v) = &self.name {
            next.name = v.clone();
        }
        if let Some(v) = &self.target_url {
            next.target_url = v.clone();
        }
        if let Some(v) = self.admit_per_tick {
            next.admit_per_tick = v;
        }
        if let Some(v) = self.tick_ms {
            next.tick_ms = v;
        }
        if let Some(v) = self.max_active {
            next.max_active = v;
        }
        if let Some(v) = self.pass_ttl_s {
            next.pass_ttl_s = v;
        }
        if let Some(v) = self.abandon_after_s {
            next.abandon_after_s = v;
        }
        if let Some(v) = self.paused {
            next.paused = v;
        }
        if let Some(v) = self.arrival_grace_s {
            next.arrival_grace_s = v;
        }
        if let Some(v) = &self.user_key {
            next.user_key = v.clone();
        }
        if let Some(v) = self.user_required {
            next.user_required = v;
        }
        if let Some(v) = self.code_required {
            next.code_required = v;
        }
        if let Some(v) = self.pow_difficulty {
            next.pow_difficulty = v;
        }
        if let Some(v) = &self.notice {
            // An empty notice is no notice.
            next.notice = v.clone().filter(|n| !n.trim().is_empty());
        }
        if let Some(v) = self.queue_method {
            next.queue_method = v;
        }
        if let Some(v) = self.opens_at {
            next.opens_at = v;
        }
        if let Some(v) = self.closes_at {
            next.closes_at = v;
        }
        if let Some(v) = self.close_when_sold_out {
            next.close_when_sold_out = v;
        }
        if let Some(v) = &self.bypass_networks {
            next.bypass_networks = Networks::parse(v)?;
        }
        if let Some(tag) = &self.language {
            next.language = Language::from_tag(tag).ok_or_else(|| {
                format!(
                    "language {tag:?} is not one we speak: it must be {}",
                    Language::expected()
                )
            })?;
        }
        match &self.page {
            Some(Some(patch)) => next.page = patch.apply_to(&next.page),
            Some(None) => next.page = PageBranding::default(),
            None => {}
        }
        next.validate()?;
        Ok(next)
    }
}

impl RoomConfig {
    pub fn new(name: impl Into<String>, target_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            target_url: target_url.into(),
            admit_per_tick: DEFAULT_ADMIT_PER_TICK,
            tick_ms: DEFAULT_TICK_MS,
            max_active: None,
            pass_ttl_s: DEFAULT_PASS_TTL_S,
            abandon_after_s: DEFAULT_ABANDON_AFTER_S,
            paused: false,
            arrival_grace_s: None,
            user_key: None,
            user_required: false,
            code_required: false,
            pow_difficulty: 0,
            notice: None,
            queue_method: QueueMethod::Fifo,
            opens_at: None,
            closes_at: None,
            close_when_sold_out: true,
            bypass_networks: Networks::default(),
            language: Language::default(),
            page: PageBranding::default(),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        let name_len = self.name.trim().chars().count();
        if name_len == 0 || name_len > 200 {
            return Err("name must be 1 to 200 characters".into());
        }
        if self.name.chars().any(is_deceptive) {
            return Err(
                "name must not contain control characters or bidirectional overrides".into(),
            );
        }
        if !target_url_ok(&self.target_url) {
            return Err("target_url must be an absolute http(s) URL with a host, or a path starting with a single /".into());
        }
        if !(1..=100_000).contains(&self.admit_per_tick) {
            return Err("admit_per_tick must be between 1 and 100000".into());
        }
        if !(100..=3_600_000).contains(&self.tick_ms) {
            return Err("tick_ms must be between 100 and 3600000".into());
        }
        if self.max_active == Some(0) {
            return Err("max_active must be at least 1, or null for no cap".into());
        }
        if !(1..=7 * 86_400).contains(&self.pass_ttl_s) {
            return Err("pass_ttl_s must be between 1 and 604800".into());
        }
        if !(15..=86_400).contains(&self.abandon_after_s) {
            return Err("abandon_after_s must be between 15 and 86400".into());
        }
        if self
            .arrival_grace_s
            .is_some_and(|grace| !(5..=86_400).contains(&grace))
        {
            return Err("arrival_grace_s must be between 5 and 86400, or null for off".into());
        }
        if let Some(key) = &self.user_key {
            let key = key.expose();
            let chars = key.chars().count();
            if !(MIN_USER_KEY_CHARS..=512).contains(&chars) || key.chars().any(char::is_control) {
                return Err(format!(
                    "user_key must be {MIN_USER_KEY_CHARS} to 512 characters, without control characters (openssl rand -hex 32 makes one)"
                ));
            }
        }
        if let Some(notice) = &self.notice
            && (notice.chars().count() > MAX_NOTICE_CHARS
                || notice.chars().any(|c| is_deceptive(c) && c != '\n'))
        {
            return Err(format!(
                "notice must be at most {MAX_NOTICE_CHARS} characters, without control characters (line breaks allowed) or bidirectional overrides"
            ));
        }
        if self.pow_difficulty > super::pow::MAX_DIFFICULTY {
            return Err(format!(
                "pow_difficulty must be between 0 (off) and {}",
                super::pow::MAX_DIFFICULTY
            ));
        }
        if let (Some(opens), Some(closes)) = (self.opens_at, self.closes_at)
            && closes <= opens
        {
            return Err("closes_at must be after opens_at".into());
        }
        self.page.validate()?;
        if self.user_required && self.user_key.is_none() {
            return Err(
                "user_required needs a user_key: without one no user token can be checked".into(),
            );
        }
        Ok(())
    }
}

/// Where admitted visitors go: an absolute http(s) URL with a host, or a
/// path on this site. `//evil.example` and `/\evil.example` are paths only
/// in name: browsers take them to another host.
fn target_url_ok(url: &str) -> bool {
    if url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if let Some(rest) = url.strip_prefix('/') {
        return !rest.starts_with('/') && !rest.starts_with('\\');
    }
    url::Url::parse(url).is_ok_and(|parsed| {
        matches!(parsed.scheme(), "http" | "https")
            && parsed.host_str().is_some_and(|h| !h.is_empty())
    })
}

/// Live figures of one room.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RoomStats {
    pub waiting: u64,
    pub active: u64,
    pub admitted_total: u64,
    pub admitted_last_minute: u64,
    pub oldest_wait_seconds: u64,
    /// Joins refused by a limit (today: the per-address join limit).
    pub turned_away: u64,
    /// Passes reclaimed because no `/api/verify` saw them in `arrival_grace_s`.
    pub no_shows: u64,
    /// Visitors waiting for the opening (before it; 0 after).
    pub pre_queue: u64,
    /// Visitors admitted from a `bypass_networks` address, ever.
    pub bypassed: u64,
    /// Of those, the ones whose pass is valid now (outside `active`).
    pub bypassed_active: u64,
    /// Visitors waiting in the priority line (they joined with a code).
    #[serde(default)]
    pub priority_waiting: u64,
}

/// A room as the operator API shows it: its id, config and stats.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RoomInfo {
    pub id: RoomId,
    #[serde(flatten)]
    pub config: RoomConfig,
    /// Whether the room has a `user_key`, which itself is never shown.
    pub user_key_set: bool,
    pub stats: RoomStats,
    /// The room's draw, with `opens_at`.
    pub draw: Option<DrawInfo>,
}

impl RoomInfo {
    pub fn new(id: RoomId, config: RoomConfig, stats: RoomStats, draw: Option<DrawInfo>) -> Self {
        Self {
            user_key_set: config.user_key.is_some(),
            id,
            config,
            stats,
            draw,
        }
    }
}

/// Where a waiting visitor stands in the room's order: the drawn
/// pre-queue first (by draw key), then everyone who joined after the
/// opening (by join sequence number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Order {
    /// In the priority line (joined with a code): lower `priority` first;
    /// within it, code holders drawn at the opening (`seq` 0, by `key`, the
    /// draw key's first 8 bytes), then by the sequence number of joins at
    /// that priority (`key` 0).
    Priority {
        priority: u32,
        seq: u64,
        key: u64,
    },
    /// Drawn at the opening; `key` is the draw key's first 8 bytes.
    Drawn {
        key: u64,
        entry: EntryId,
    },
    Joined(u64),
}

impl Order {
    /// The entrant's public id, for those who were in the pre-queue.
    pub fn entry(self) -> Option<EntryId> {
        match self {
            Order::Drawn { entry, .. } => Some(entry),
            Order::Joined(_) | Order::Priority { .. } => None,
        }
    }
}

/// Where a visitor stands in a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceState {
    /// In the pre-queue of a room not yet open: no position until the draw.
    PreQueue {
        entry: EntryId,
    },
    /// In line at `order`, `position` 1 = next.
    Waiting {
        order: Order,
        position: u64,
    },
    /// Holding a pass issued at `admitted_at`, valid until `expires_at`.
    Admitted {
        admitted_at: Millis,
        expires_at: Millis,
    },
    /// The pass ran out, or nothing is known of the visitor here.
    Expired,
    /// The place was lost because its visitor was away (no socket, no poll)
    /// for longer than `abandon_after_s`; told so for `AWAY_REMEMBERED_MS`.
    Away,
    Left,
    Closed,
}

/// A visitor's place, read in one atomic step with the room's figures.
#[derive(Debug, Clone)]
pub struct Place {
    pub visitor: VisitorId,
    pub state: PlaceState,
    pub line: LineSummary,
    /// Where an admitted visitor is sent, and what the operator says.
    pub facts: Arc<RoomFacts>,
    /// The code group whose line the visitor waits in, if they joined with a code.
    pub priority: Option<Arc<str>>,
}

/// What every status says about the room besides the line: where an
/// admitted visitor is sent and the operator's notice. Only the operator
/// changes them, so a room's places and sockets share one copy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoomFacts {
    pub target_url: String,
    pub notice: Option<String>,
    pub opens_at: Option<Moment>,
    pub queue_method: QueueMethod,
    /// Units or seats still free in the room's sale, as of the last tick
    /// that looked; `None` without a sale.
    pub stock_left: Option<u64>,
    /// The sale sold out and the room closes its line for it
    /// (`close_when_sold_out`): the waiting are told `closed`, `sold_out`.
    pub sold_out: bool,
    /// How long a waiting visitor who is away (no socket, no poll) keeps
    /// the place, at least: the room's `abandon_after_s`.
    pub abandon_after_s: u64,
    /// The room's `closes_at`: a ticket handed out lasts at least until then.
    pub closes_at: Option<Moment>,
}

impl RoomFacts {
    /// The facts a config gives, with the sale's as they were.
    pub fn of(config: &RoomConfig, stock_left: Option<u64>, sold_out: bool) -> Self {
        Self {
            target_url: config.target_url.clone(),
            notice: config.notice.clone(),
            opens_at: config.opens_at,
            queue_method: config.queue_method,
            stock_left,
            sold_out,
            abandon_after_s: config.abandon_after_s,
            closes_at: config.closes_at,
        }
    }
}

/// The room-wide part of every status: enough for a node to compute a
/// waiting socket's position and ETA without asking the store again.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LineSummary {
    /// Incremented by every change that moves positions (tick, a waiting
    /// visitor leaving). A node applies an event only if it is newer than the
    /// version its socket was synced at.
    pub version: u64,
    pub waiting: u64,
    /// Admissions per second actually achieved over the last minute; `None`
    /// while paused or when nothing can be said yet.
    pub rate_per_s: Option<f64>,
    pub paused: bool,
    /// When the last tick ran (the tick's own time), for latency measurements.
    pub tick_at: Option<Millis>,
}

impl LineSummary {
    pub fn eta_seconds(&self, position: u64) -> Option<u64> {
        let rate = self.rate_per_s.filter(|r| *r > 0.0)?;
        Some((position as f64 / rate).ceil() as u64)
    }
}

/// One admitted visitor in a tick event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub visitor: VisitorId,
    /// The place in line it was admitted from: admissions leave the head in
    /// order, so a tick's admissions are sorted by it.
    pub order: Order,
    pub admitted_at: Millis,
    pub expires_at: Millis,
}

/// What a store publishes; every node updates its own sockets from these alone.
#[derive(Debug, Clone)]
pub enum RoomEvent {
    /// A tick ran: `admitted` left the head of the line (in order), the
    /// waiting visitors at `departed` were dropped as abandoned.
    Tick {
        room: RoomId,
        admitted: Arc<[Admission]>,
        departed: Arc<[Order]>,
        line: LineSummary,
    },
    /// A visitor took a place in the priority line, ahead of everyone
    /// after `order` (a new place, or one moved from `from`, the general
    /// line). Positions behind it rise by one.
    Entered {
        room: RoomId,
        visitor: VisitorId,
        order: Order,
        from: Option<Order>,
        group: Arc<str>,
        /// The entrant's position in the line, once entered.
        position: u64,
        line: LineSummary,
    },
    /// A waiting visitor gave up the place.
    Left {
        room: RoomId,
        order: Order,
        line: LineSummary,
    },
    /// The room opened: its pre-queue's order is revealed, so every entrant
    /// now has a position (read again from the store).
    Drawn {
        room: RoomId,
        line: LineSummary,
    },
    /// The config changed: the rate (and so every ETA) may have.
    Configured {
        room: RoomId,
        line: LineSummary,
        facts: Arc<RoomFacts>,
    },
    Closed {
        room: RoomId,
    },
}

/// What a store tells every node.
#[derive(Debug, Clone)]
pub enum StoreEvent {
    Room(RoomEvent),
    /// The store can't be reached: events may be lost until it is back.
    Interrupted,
    /// The store is back: what was missed must be read again.
    Resumed,
}

impl RoomEvent {
    pub fn room(&self) -> &RoomId {
        match self {
            RoomEvent::Tick { room, .. }
            | RoomEvent::Left { room, .. }
            | RoomEvent::Entered { room, .. }
            | RoomEvent::Drawn { room, .. }
            | RoomEvent::Configured { room, .. }
            | RoomEvent::Closed { room } => room,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_ids_are_slugs() {
        assert!(RoomId::parse("spring-sale-2026").is_some());
        for bad in ["", "Spring", "a b", "a/b", "ä", &"x".repeat(65)] {
            assert!(RoomId::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn patch_distinguishes_null_cap_from_absent() {
        let mut base = RoomConfig::new("Sale", "https://shop.example/");
        base.max_active = Some(5);
        let keep: RoomPatch = serde_json::from_str(r#"{"paused":true}"#).unwrap();
        assert_eq!(keep.apply_to(&base).unwrap().max_active, Some(5));
        let lift: RoomPatch = serde_json::from_str(r#"{"max_active":null}"#).unwrap();
        assert_eq!(lift.apply_to(&base).unwrap().max_active, None);
        let bad: RoomPatch = serde_json::from_str(r#"{"tick_ms":5}"#).unwrap();
        assert!(bad.apply_to(&base).unwrap_err().contains("tick_ms"));
    }

    #[test]
    fn targets_are_absolute_http_urls_or_local_paths() {
        let with = |url: &str| {
            let mut config = RoomConfig::new("Sale", url);
            config.target_url = url.into();
            config.validate()
        };
        for good in [
            "https://shop.example/",
            "http://shop.example:8080/x?y=1",
            "/shop",
            "/",
        ] {
            assert!(with(good).is_ok(), "{good}");
        }
        for bad in [
            "//evil.example/",
            "/\\evil.example",
            "https://",
            "http://",
            "javascript:alert(1)",
            "ftp://x.example/",
            "shop",
            "https://a b.example/",
        ] {
            assert!(with(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_refuse_controls_and_bidi_overrides() {
        for bad in ["a\u{202E}b", "a\nb", "x\u{2066}y", "\u{7}"] {
            let config = RoomConfig::new(bad, "/x");
            assert!(config.validate().is_err(), "{bad:?}");
        }
        assert!(
            RoomConfig::new("Spring sale — 봄 세일", "/x")
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn visitor_ids_round_trip_as_hex() {
        let id = VisitorId(0xdead_beef);
        assert_eq!(id.to_string().parse::<VisitorId>(), Ok(id));
        assert!("xyz".parse::<VisitorId>().is_err());
    }
}
