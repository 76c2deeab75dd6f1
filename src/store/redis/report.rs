//! A room's report on Redis: the scripts keep its ledger (lua/lib.lua's
//! `ledger`), `lua/report.lua` reads it back raw, and this makes the
//! `words::report::Ledger` of it, whose report is the one the memory store
//! makes of its own.

use super::replies::WireChange;
use crate::words::autotune::AutotuneReport;
use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Deserialize;

use super::admission::RedisStore;
use super::events::list;
use super::replies::read;
use crate::store::StoreError;
use crate::words::clock::{Millis, Moment};
use crate::words::draw::DrawInfo;
use crate::words::op::{self, Handle};
use crate::words::report::{
    Counts, Ledger, OpenRow, Report, ReportEntry, ReportFacts, Row, Rows, TurnedAway, Waits,
};

/// `lua/report.lua`'s answer.
#[derive(Deserialize)]
struct WireReport {
    #[serde(default)]
    missing: bool,
    #[serde(default)]
    ledger: HashMap<String, String>,
    /// The open room's own hash; absent once closed (the ledger holds a
    /// copy of its fields then).
    #[serde(default)]
    room: Option<HashMap<String, String>>,
    #[serde(default, deserialize_with = "list")]
    minutes: Vec<String>,
    #[serde(default, deserialize_with = "list")]
    hours: Vec<String>,
    #[serde(default)]
    opened: Option<bool>,
    #[serde(default)]
    entrants: u64,
    #[serde(default)]
    priority_entrants: u64,
    #[serde(default)]
    now: Millis,
    /// An open room's autotune changes (JSON each, a line each); a closed
    /// room's ledger holds its copy.
    #[serde(default)]
    tune_changes: Option<String>,
}

impl WireReport {
    /// The ledger and the facts of the report, or `None` if a field is
    /// unreadable.
    fn ledger(&self) -> Option<(Ledger, ReportFacts)> {
        let l = &self.ledger;
        // The room's own fields: its hash while open, the ledger's copy after.
        let own = self.room.as_ref().unwrap_or(l);
        let number = |map: &HashMap<String, String>, name: &str| -> Option<u64> {
            map.get(name).map_or(Some(0), |v| v.parse().ok())
        };
        let admitted_total = number(own, "admitted_total")?;
        let admitted = number(l, "admitted")?;
        let passed_through = admitted_total.checked_sub(admitted)?;
        let bypassed = number(own, "bypassed")?;
        let turned_away = l
            .iter()
            .filter_map(|(field, n)| {
                let why = field.strip_prefix("turned:")?.parse::<TurnedAway>().ok()?;
                Some((why, n.parse().ok()?))
            })
            .collect::<BTreeMap<_, _>>();
        let counts = Counts {
            arrivals: number(own, "next_seq")?
                + number(l, "arrivals_other")?
                + bypassed
                + passed_through,
            admitted,
            passed_through,
            bypassed,
            left: number(l, "left")?,
            abandoned: number(l, "abandoned")?,
            no_shows: number(own, "no_shows")?,
            sessions_lapsed: number(own, "sessions_lapsed")?,
            revoked: number(l, "revoked")?,
            turned_away,
            peak_waiting: number(own, "peak_waiting")?,
        };
        let waits = |field: &str| {
            l.get(field)
                .map_or(Some(Waits::default()), |w| Waits::decode(w))
        };
        let open = match l.get("r_at") {
            Some(at) => Some(OpenRow {
                at: at.parse().ok()?,
                arrivals_before: number(l, "r_before")?,
                admitted: number(l, "r_admitted")?,
                waiting: number(l, "r_waiting")?,
                active: number(l, "r_active")?,
                waits: waits("r_w")?,
            }),
            None => None,
        };
        let rows = |list: &[String]| {
            list.iter()
                .map(|r| Row::decode(r))
                .collect::<Option<Vec<_>>>()
        };
        let ledger = Ledger {
            // A room made before rooms kept ledgers: its own time of making.
            created_at: l
                .get("created_at")
                .or_else(|| own.get("created_at"))
                .map_or(Some(0), |at| at.parse().ok())?,
            counts,
            waits: waits("w")?,
            rows: Rows {
                hours: rows(&self.hours)?,
                minutes: VecDeque::from(rows(&self.minutes)?),
                open,
            },
        };
        let config = super::config::read(own, None)?;
        let opened = self
            .opened
            .unwrap_or_else(|| l.get("opened").is_some_and(|o| o == "1"));
        let draw = config
            .opens_at
            .zip(own.get("draw_commitment").filter(|c| !c.is_empty()))
            .map(|(opens_at, commitment)| DrawInfo {
                opens_at,
                commitment: commitment.clone(),
                seed: own.get("draw_seed").filter(|_| opened).cloned(),
                entrants: if self.room.is_some() {
                    self.entrants
                } else {
                    number(l, "entrants").unwrap_or(0)
                },
                priority_entrants: if self.room.is_some() {
                    self.priority_entrants
                } else {
                    number(l, "priority_entrants").unwrap_or(0)
                },
                drawn_at: opened.then_some(opens_at),
            });
        let facts = ReportFacts {
            opens_at: config.opens_at.map(|at| at.0),
            closed_at: l.get("closed_at").and_then(|at| at.parse().ok()),
            draw,
            sale: l
                .get("sale")
                .and_then(|sale| serde_json::from_str(sale).ok()),
            autotune: config.autotune.as_ref().map(|tune| {
                let effective = own
                    .get("tune_effective")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(config.admit_per_tick);
                let changes = self
                    .tune_changes
                    .as_ref()
                    .or_else(|| l.get("tune_changes"))
                    .map(String::as_str)
                    .unwrap_or_default();
                AutotuneReport {
                    admit_per_tick_effective: if tune.dry_run {
                        config.admit_per_tick
                    } else {
                        effective
                    },
                    changes: changes
                        .lines()
                        .filter_map(|json| serde_json::from_str::<WireChange>(json).ok())
                        .map(WireChange::into_change)
                        .collect(),
                }
            }),
        };
        Some((ledger, facts))
    }
}

impl Handle<op::ReadReport> for RedisStore {
    async fn handle(
        &self,
        op::ReadReport { room, created_at }: op::ReadReport,
    ) -> Result<Box<Report>, StoreError> {
        let reply = self.report_fields(&room, created_at).await?;
        let wire: WireReport =
            read(&reply).map_err(|_| StoreError::Unexpected("unreadable report".into()))?;
        if wire.missing {
            return Err(match created_at {
                Some(_) => StoreError::ReportNotFound(room),
                None => StoreError::RoomNotFound(room),
            });
        }
        let (ledger, facts) = wire
            .ledger()
            .ok_or_else(|| StoreError::Unexpected("unreadable report".into()))?;
        Ok(Box::new(ledger.report(room.as_str(), facts, wire.now)))
    }
}

impl Handle<op::ListReports> for RedisStore {
    async fn handle(&self, _: op::ListReports) -> Result<Vec<ReportEntry>, StoreError> {
        let mut entries = Vec::new();
        for room in self.reported_rooms().await? {
            for life in self.report_lives(&room).await? {
                let (made, closed) = life.split_once('|').unwrap_or((&life, ""));
                let Ok(made) = made.parse() else { continue };
                entries.push(ReportEntry {
                    room: room.to_string(),
                    created_at: Moment(made),
                    closed_at: closed.parse().ok().map(Moment),
                });
            }
        }
        ReportEntry::sort(&mut entries);
        Ok(entries)
    }
}
