//! The words of admission: rooms, their config and stats, a visitor's place,
//! and the events a store publishes when a room changes.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::words::clock::{Millis, Moment};
use crate::words::config::{QueueMethod, RoomConfig};
use crate::words::draw::{DrawInfo, EntryId, Waiting};

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
    /// Sessions that lapsed for want of use (`session_idle_s`), ever.
    #[serde(default)]
    pub sessions_lapsed: u64,
    /// Visitors waiting for the opening (before it; 0 after).
    pub pre_queue: u64,
    /// Visitors admitted from a `bypass_networks` address, ever.
    pub bypassed: u64,
    /// Of those, the ones whose pass is valid now (outside `active`).
    pub bypassed_active: u64,
    /// Visitors waiting in the priority line (they joined with a code).
    #[serde(default)]
    pub priority_waiting: u64,
    /// When the schedule's next entry falls due.
    pub next_change_at: Option<Moment>,
    /// The rate the ticks admit at: `admit_per_tick`, or autotune's.
    pub admit_per_tick_effective: u32,
    /// Autotune's last decision and its changes; null without autotune.
    pub autotune: Option<crate::words::autotune::AutotuneStats>,
}

impl RoomStats {
    /// Who waits, as a change of the room's opening is judged.
    pub fn waiting_for_opening(&self) -> Waiting {
        Waiting {
            line: self.waiting,
            pre_queue: self.pre_queue,
        }
    }
}

/// A room as the operator API shows it: its id, config and stats.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RoomInfo {
    pub id: RoomId,
    #[serde(flatten)]
    pub config: RoomConfig,
    /// Whether the room has a `user_key`, which itself is never shown.
    pub user_key_set: bool,
    /// Whether the room has a `notify_webhook_secret`, never shown either.
    pub notify_webhook_secret_set: bool,
    pub stats: RoomStats,
    /// The room's draw, with `opens_at`.
    pub draw: Option<DrawInfo>,
}

impl RoomInfo {
    pub fn new(id: RoomId, config: RoomConfig, stats: RoomStats, draw: Option<DrawInfo>) -> Self {
        Self {
            user_key_set: config.user_key.is_some(),
            notify_webhook_secret_set: config.notify_webhook_secret.is_some(),
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
    /// The session of the pass that expires at `expires_at` lapsed: no
    /// verify, gate or sale call accepted it for the room's
    /// `session_idle_s`. Told as `expired` until that expiry.
    Lapsed {
        expires_at: Millis,
    },
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
    /// They asked to be notified (api.md, "Step away"), and the place or
    /// pass that holds the request is still theirs.
    pub notify: bool,
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
    fn visitor_ids_round_trip_as_hex() {
        let id = VisitorId(0xdead_beef);
        assert_eq!(id.to_string().parse::<VisitorId>(), Ok(id));
        assert!("xyz".parse::<VisitorId>().is_err());
    }
}
