//! The scripts' answers of more than a few values, read: each is one JSON
//! object (`cjson.encode` in `lua/*.lua`) read by serde into a type here, as
//! the room events are (`events.rs`), so that a field is named where it is
//! written and where it is read, never counted. (Answers of one to three
//! values stay plain Redis replies.)

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::events::{WireFacts, WireLine, list, parse_order, summary};
use crate::store::{RoomFigures, Tick, TickReport};
use std::str::FromStr;

use crate::words::autotune::{Change, Decision, Direction, HealthCheck, TuneState};
use crate::words::clock::{Millis, Moment};
use crate::words::sale::{Claim, ClaimState, SaleKind};
use crate::words::{LineSummary, Order, Place, PlaceState, RoomFacts, VisitorId, wire_enum};

wire_enum! {
    /// What `lua/apply_table.lua` did (its answer, one of the prelude's
    /// `TABLE_…` names).
    pub(super) enum TableReply {
        Created,
        Changed,
        Unchanged,
        /// Unchanged, and the room is closed: the node takes its id off
        /// the list of open rooms it put it on to create it.
        StillClosed,
    }
}

/// A script's answer of many values, read as `T`.
pub(super) fn read<T: DeserializeOwned>(json: &str) -> serde_json::Result<T> {
    serde_json::from_str(json)
}

/// A script's list of answers, which cjson writes `{}` when it is empty.
pub(super) fn read_list<T: DeserializeOwned>(json: &str) -> serde_json::Result<Vec<T>> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let items = list(&mut deserializer)?;
    deserializer.end()?;
    Ok(items)
}

/// A visitor's place (`place` in `lua/lib.lua`).
#[derive(Deserialize)]
pub(super) struct WirePlace {
    #[serde(flatten)]
    state: WireState,
    line: WireLine,
    facts: WireFacts,
    /// Whose place it is, in `join.lua`'s answer only: a known user's place
    /// may be another visitor's.
    #[serde(default)]
    pub visitor: Option<String>,
    /// The code group of a place in the priority line.
    #[serde(default)]
    priority: Option<String>,
    /// The visitor asked to be notified.
    #[serde(default)]
    notify: bool,
}

/// The letter each state of a place goes by in a script's answer, by the
/// name the scripts give it (`STATE.waiting` in the prelude): what
/// [`WireState`]'s names read, held together by a test.
pub(super) const STATES: [(&str, &str); 8] = [
    ("waiting", "w"),
    ("pre_queue", "p"),
    ("admitted", "a"),
    ("left", "l"),
    ("closed", "c"),
    ("expired", "e"),
    ("away", "x"),
    ("lapsed", "i"),
];

#[derive(Deserialize)]
#[serde(tag = "state")]
enum WireState {
    #[serde(rename = "w")]
    Waiting { order: String, position: u64 },
    #[serde(rename = "p")]
    PreQueue { order: String },
    #[serde(rename = "a")]
    Admitted {
        admitted_at: Millis,
        expires_at: Millis,
    },
    #[serde(rename = "l")]
    Left,
    #[serde(rename = "c")]
    Closed,
    #[serde(rename = "e")]
    Expired,
    #[serde(rename = "x")]
    Away,
    #[serde(rename = "i")]
    Lapsed { expires_at: Millis },
}

impl WirePlace {
    /// `visitor`'s place; `None` if its order is unreadable.
    pub(super) fn into_place(self, visitor: VisitorId) -> Option<Place> {
        let state = match self.state {
            WireState::Waiting { order, position } => PlaceState::Waiting {
                order: parse_order(&order)?,
                position,
            },
            WireState::PreQueue { order } => PlaceState::PreQueue {
                entry: parse_order(&order)?.entry()?,
            },
            WireState::Admitted {
                admitted_at,
                expires_at,
            } => PlaceState::Admitted {
                admitted_at,
                expires_at,
            },
            WireState::Left => PlaceState::Left,
            WireState::Closed => PlaceState::Closed,
            WireState::Expired => PlaceState::Expired,
            WireState::Away => PlaceState::Away,
            WireState::Lapsed { expires_at } => PlaceState::Lapsed { expires_at },
        };
        let queue_method = self.facts.queue_method().unwrap_or_default();
        Some(Place {
            visitor,
            state,
            line: self.line.summary(),
            facts: Arc::new(self.facts.into_facts(queue_method)),
            priority: self.priority.map(Into::into),
            notify: self.notify,
        })
    }
}

/// What the places one call of `lua/join.lua` answers share (its first
/// answer): the line's rate, tick time and pause, and the room's facts;
/// and, if any place at the back was answered by its join number alone,
/// what the others of its answer were made of: its position less its join
/// number, and the line's version.
#[derive(Deserialize)]
pub(super) struct WireJoinShared {
    rate: String,
    tick_at: String,
    paused: String,
    facts: WireFacts,
    #[serde(default)]
    pub(super) back: Option<(i64, u64)>,
}

/// A join call's shared part, read once for all of the call's places.
pub(super) struct JoinShared {
    /// The line but its version and count, which each place has its own.
    line: LineSummary,
    facts: Arc<RoomFacts>,
}

impl WireJoinShared {
    pub(super) fn into_shared(self) -> JoinShared {
        let queue_method = self.facts.queue_method().unwrap_or_default();
        JoinShared {
            line: summary(0, 0, &self.rate, &self.tick_at, &self.paused),
            facts: Arc::new(self.facts.into_facts(queue_method)),
        }
    }
}

impl JoinShared {
    /// `visitor`'s new place at the back of the general line: join number
    /// `seq`, at `position`, which is everyone waiting once it joined.
    pub(super) fn place_at_the_back(
        &self,
        visitor: VisitorId,
        seq: u64,
        position: u64,
        version: u64,
    ) -> Place {
        Place {
            visitor,
            state: PlaceState::Waiting {
                order: Order::Joined(seq),
                position,
            },
            line: LineSummary {
                version,
                waiting: position,
                ..self.line
            },
            facts: self.facts.clone(),
            priority: None,
            notify: false,
        }
    }
}

/// What `tick.lua` did; the counts are there when it ran.
#[derive(Deserialize)]
pub(super) struct WireTick {
    ran: bool,
    #[serde(default)]
    admitted: u64,
    #[serde(default, deserialize_with = "super::events::list")]
    waits: Vec<Millis>,
    #[serde(default)]
    abandoned: u64,
    #[serde(default)]
    no_shows: u64,
    waiting: u64,
    active: u64,
    next_due_in_ms: Millis,
    #[serde(default)]
    change_in_ms: Option<Millis>,
    arrival_resumptions: u64,
    /// Events in the room's outbox.
    #[serde(default)]
    outbox: u64,
    line: WireLine,
    /// '' without a cap.
    #[serde(default)]
    max_active: String,
    opened: bool,
    admitted_last_minute: u64,
    #[serde(default)]
    sessions_lapsed: u64,
    /// The health URL and the timeout, when this call's node takes the
    /// room's sample.
    #[serde(default)]
    probe: Option<WireCheck>,
    /// 'down' or 'up' when autotune changed the rate.
    #[serde(default)]
    tuned: Option<String>,
    admit_per_tick_effective: u32,
}

impl From<WireTick> for Tick {
    fn from(tick: WireTick) -> Self {
        Tick {
            ran: tick.ran.then_some(TickReport {
                admitted: tick.admitted,
                waits_ms: tick.waits,
                abandoned: tick.abandoned,
                no_shows: tick.no_shows,
                waiting: tick.waiting,
                active: tick.active,
                probe: tick.probe.map(|check| HealthCheck {
                    url: check.url,
                    timeout_ms: check.timeout_ms,
                    epoch: check.epoch,
                }),
                tuned: [Direction::Down, Direction::Up]
                    .into_iter()
                    .find(|d| tick.tuned.as_deref() == Some(d.name())),
            }),
            busy: tick.waiting > 0 || tick.active > 0,
            next_due_in_ms: tick.next_due_in_ms,
            change_in_ms: tick.change_in_ms,
            arrival_resumptions: tick.arrival_resumptions,
            outbox: tick.outbox,
            figures: {
                let line = tick.line.summary();
                RoomFigures {
                    waiting: line.waiting,
                    active: tick.active,
                    max_active: tick.max_active.parse().ok(),
                    paused: line.paused,
                    opened: tick.opened,
                    tail_eta_s: line.eta_seconds(line.waiting),
                    admitted_last_minute: tick.admitted_last_minute,
                    sessions_lapsed: tick.sessions_lapsed,
                    admit_per_tick_effective: tick.admit_per_tick_effective,
                }
            },
        }
    }
}

/// An open room as `room_info.lua` reads it: its stored fields, and the
/// figures counted from its other keys.
#[derive(Deserialize)]
pub(super) struct WireRoomInfo {
    pub room: HashMap<String, String>,
    pub waiting: u64,
    pub active: u64,
    pub admitted_last_minute: u64,
    pub oldest_wait_ms: Millis,
    pub pre_queue: u64,
    /// Bypass passes valid now (outside `active`).
    #[serde(default)]
    pub bypassed_active: u64,
    #[serde(default)]
    pub priority_waiting: u64,
    pub entrants: u64,
    #[serde(default)]
    pub priority_entrants: u64,
    pub opened: bool,
    /// The store's time of the read.
    pub now: Millis,
    /// The schedule, as `Schedule::stored` wrote it; absent without one.
    #[serde(default)]
    pub schedule: Option<String>,
    /// Autotune's last changes, JSON each (`WireChange`).
    #[serde(default, deserialize_with = "super::events::list")]
    pub tune_changes: Vec<String>,
}

/// A health check a tick hands out (`tick.lua`'s `probe`).
#[derive(Deserialize)]
pub(super) struct WireCheck {
    url: String,
    timeout_ms: u64,
    epoch: u64,
}

/// Autotune's last decision as `tick.lua` keeps it (`tune_last`).
#[derive(Deserialize)]
pub(super) struct WireDecision {
    state: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    p95_ms: Option<u64>,
    #[serde(default)]
    error_rate: Option<f64>,
    #[serde(default)]
    samples: u64,
    at: Millis,
}

impl WireDecision {
    pub(super) fn into_decision(self) -> Decision {
        Decision {
            state: TuneState::from_str(&self.state).unwrap_or_default(),
            reason: self.reason,
            p95_ms: self.p95_ms,
            error_rate: self.error_rate,
            samples: self.samples,
            at: Some(Moment(self.at)),
        }
    }
}

/// One of autotune's changes as `tick.lua` keeps it.
#[derive(Deserialize)]
pub(super) struct WireChange {
    at: Millis,
    from: u32,
    to: u32,
    reason: String,
}

impl WireChange {
    pub(super) fn into_change(self) -> Change {
        Change {
            at: Moment(self.at),
            from: self.from,
            to: self.to,
            reason: self.reason,
        }
    }
}

/// A claim as the sale's scripts answer it (`claim_reply` in
/// `lua/sale_lib.lua`).
#[derive(Deserialize)]
pub(super) struct WireClaim {
    id: String,
    visitor: String,
    state: String,
    quantity: u64,
    /// `seat,seat`, or empty for a quantity.
    seats: String,
    sequence: u64,
    expires: Millis,
    /// Empty until confirmed.
    confirmed: String,
}

impl WireClaim {
    pub(super) fn into_claim(self) -> Option<Claim> {
        Some(Claim {
            claim_id: self.id,
            visitor: self.visitor.parse().ok()?,
            state: ClaimState::parse(&self.state)?,
            quantity: self.quantity,
            seats: self
                .seats
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            sequence: self.sequence,
            hold_expires_at: self.expires,
            confirmed_at: self.confirmed.parse().ok(),
        })
    }
}

/// What a sale has left (`sale_view.lua`): each seat's state is '' (free),
/// `h:<claim>` (held) or `s:<claim>` (sold).
#[derive(Deserialize)]
pub(super) struct WireSale {
    pub kind: SaleKind,
    /// Absent only if the sale's record lost it.
    #[serde(default)]
    pub stock_left: Option<u64>,
    pub per_user_limit: u64,
    pub hold_ttl_s: u64,
    /// cjson writes an empty Lua table as `{}`: an empty map, as wanted.
    pub seats: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::{Order, QueueMethod};

    const LINE: &str =
        r#""line":{"version":3,"waiting":40,"rate":"0.4","tick_at":"1000","paused":"0"}"#;
    const FACTS: &str = r#""facts":{"queue_method":"random","stock_left":"","sold_out":false,"opens_at":"","target_url":"https:\/\/x.example\/","notice":""}"#;

    /// Each letter the prelude gives a state is read as the state of that
    /// name, and every state has one.
    #[test]
    fn every_state_a_script_names_is_read_as_that_state() {
        for (name, letter) in STATES {
            let place: WirePlace = read(&format!(
                r#"{{"state":"{letter}","order":"12","position":4,"admitted_at":1,"expires_at":2,{LINE},{FACTS}}}"#
            ))
            .unwrap();
            let read = match place.state {
                WireState::Waiting { .. } => "waiting",
                WireState::PreQueue { .. } => "pre_queue",
                WireState::Admitted { .. } => "admitted",
                WireState::Left => "left",
                WireState::Closed => "closed",
                WireState::Expired => "expired",
                WireState::Away => "away",
                WireState::Lapsed { .. } => "lapsed",
            };
            assert_eq!(read, name, "'{letter}'");
        }
    }

    #[test]
    fn places_are_read_by_their_state_with_what_each_state_has() {
        let visitor = VisitorId(7);
        let waiting: WirePlace = read(&format!(
            r#"{{"state":"w","order":"12","position":4,{LINE},{FACTS},"visitor":"{visitor}"}}"#
        ))
        .unwrap();
        assert_eq!(
            waiting.visitor.as_deref(),
            Some(visitor.to_string().as_str())
        );
        let place = waiting.into_place(visitor).unwrap();
        assert!(matches!(
            place.state,
            PlaceState::Waiting {
                order: Order::Joined(12),
                position: 4
            }
        ));
        assert_eq!(
            (
                place.line.version,
                place.line.waiting,
                place.line.rate_per_s
            ),
            (3, 40, Some(0.4))
        );
        assert_eq!(place.facts.target_url, "https://x.example/");
        assert_eq!(place.facts.queue_method, QueueMethod::Random);
        let admitted: WirePlace = read(&format!(
            r#"{{"state":"a","admitted_at":1000,"expires_at":61000,{LINE},{FACTS}}}"#
        ))
        .unwrap();
        assert!(matches!(
            admitted.into_place(visitor).unwrap().state,
            PlaceState::Admitted {
                admitted_at: 1000,
                expires_at: 61000
            }
        ));
        let places: Vec<WirePlace> = read_list(&format!(
            r#"[{{"state":"c",{LINE},{FACTS}}},{{"state":"e",{LINE},{FACTS}}}]"#
        ))
        .unwrap();
        let states: Vec<_> = places
            .into_iter()
            .map(|p| p.into_place(visitor).unwrap().state)
            .collect();
        assert!(matches!(
            states[..],
            [PlaceState::Closed, PlaceState::Expired]
        ));
        assert!(read_list::<WirePlace>("{}").unwrap().is_empty());
        assert!(read::<WirePlace>(&format!(r#"{{"state":"w",{LINE},{FACTS}}}"#)).is_err());
    }

    #[test]
    fn a_tick_that_did_not_run_counts_nothing() {
        let idle: Tick = read::<WireTick>(
            r#"{"ran":false,"waiting":0,"active":2,"next_due_in_ms":250,"arrival_resumptions":1,"line":{"version":3,"waiting":0,"rate":"","tick_at":"","paused":"1"},"max_active":"","opened":false,"admitted_last_minute":0,"admit_per_tick_effective":4}"#,
        )
        .unwrap()
        .into();
        assert_eq!(idle.ran, None);
        assert!(idle.busy);
        assert_eq!((idle.next_due_in_ms, idle.arrival_resumptions), (250, 1));
        assert_eq!(
            idle.figures,
            RoomFigures {
                active: 2,
                paused: true,
                admit_per_tick_effective: 4,
                ..RoomFigures::default()
            }
        );
        let ran: Tick = read::<WireTick>(
            r#"{"ran":true,"admitted":5,"waits":[1500,0],"abandoned":1,"no_shows":2,"waiting":9,"active":5,"next_due_in_ms":1000,"arrival_resumptions":0,"line":{"version":4,"waiting":9,"rate":"0.5","tick_at":"900","paused":"0"},"max_active":"5","opened":true,"admitted_last_minute":7,"sessions_lapsed":3,"probe":{"url":"http://o/h","timeout_ms":2000,"epoch":3},"tuned":"down","admit_per_tick_effective":4}"#,
        )
        .unwrap()
        .into();
        assert_eq!(
            ran.ran,
            Some(TickReport {
                admitted: 5,
                waits_ms: vec![1_500, 0],
                abandoned: 1,
                no_shows: 2,
                waiting: 9,
                active: 5,
                probe: Some(HealthCheck {
                    url: "http://o/h".into(),
                    timeout_ms: 2_000,
                    epoch: 3,
                }),
                tuned: Some(Direction::Down),
            })
        );
        assert_eq!(
            ran.figures,
            RoomFigures {
                waiting: 9,
                active: 5,
                max_active: Some(5),
                paused: false,
                opened: true,
                tail_eta_s: Some(18),
                admitted_last_minute: 7,
                sessions_lapsed: 3,
                admit_per_tick_effective: 4,
            }
        );
    }

    #[test]
    fn claims_and_sales_are_read_with_empty_lists_as_lua_writes_them() {
        let visitor = VisitorId(7);
        let claims: Vec<WireClaim> = read_list(&format!(
            r#"[{{"id":"c1","visitor":"{visitor}","state":"confirmed","quantity":2,"seats":"A1,A2","sequence":1,"expires":5000,"confirmed":"4000"}}]"#
        ))
        .unwrap();
        let claim = claims.into_iter().next().unwrap().into_claim().unwrap();
        assert_eq!(claim.seats, ["A1", "A2"]);
        assert_eq!(
            (claim.confirmed_at, claim.hold_expires_at),
            (Some(4000), 5000)
        );
        assert!(read_list::<WireClaim>("{}").unwrap().is_empty());
        let sale: WireSale = read(
            r#"{"kind":"stock","stock_left":3,"per_user_limit":2,"hold_ttl_s":600,"seats":{}}"#,
        )
        .unwrap();
        assert_eq!((sale.stock_left, sale.seats.len()), (Some(3), 0));
    }
}

/// An event of the outbox as `lua/outbox_claim.lua` hands it.
#[derive(Deserialize)]
pub(super) struct WireOutboxEvent {
    entry: String,
    id: String,
    kind: String,
    visitor: String,
    #[serde(default)]
    position: Option<u64>,
    at: Millis,
    reach: crate::words::notify::NotifyRequest,
}

impl WireOutboxEvent {
    pub(super) fn into_event(self) -> Option<crate::words::notify::OutboxEvent> {
        Some(crate::words::notify::OutboxEvent {
            entry: self.entry,
            id: self.id,
            kind: self.kind.parse().ok()?,
            visitor: self.visitor.parse().ok()?,
            position: self.position,
            at: self.at,
            reach: Some(self.reach),
        })
    }
}
