//! After the drop: what a room's report counts and how. The room's ledger
//! ([`Ledger`]) of exact counts, the waits from joining (or the opening) to
//! admission in fixed buckets ([`Waits`]), and its rows over time
//! ([`Rows`]: one a minute, folded into hours after a week); and the report
//! an operator reads ([`Report`]), made of a ledger at any time, open room
//! or closed.
//!
//! Both stores keep the same ledger in their own atomic steps: the memory
//! store holds this one in its room's model; the Redis scripts keep the
//! same fields (lua/lib.lua's `ledger`) and the node reads them back into
//! one of these. Rows roll at the ticks that run, so the stores agree on
//! them too (`tests/stores/differential.rs`).

use super::autotune::AutotuneReport;
use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use super::clock::{Millis, Moment};
use super::draw::DrawInfo;
use super::operations::StoreError;
use super::wire_enum;

/// The upper bounds of the wait buckets (seconds), as `le` in api.md; one
/// more bucket, `+Inf`, holds every longer wait.
pub const WAIT_BOUNDS_S: [u64; 13] = [1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200];
/// Buckets, `+Inf` included.
pub const BUCKETS: usize = WAIT_BOUNDS_S.len() + 1;
/// A row's span while it is recent.
pub const MINUTE_MS: Millis = 60_000;
/// A row's span once folded.
pub const HOUR_MS: Millis = 3_600_000;
/// A day, for `--report-keep-days`.
pub const DAY_MS: Millis = 24 * HOUR_MS;
/// How long a closed room's report is kept, unless told otherwise.
pub const DEFAULT_REPORT_KEEP_DAYS: u64 = 30;
/// Minute rows older than this are folded into hour rows: a week of a
/// room's life is 10,080 rows at most, and each hour after it one.
pub const FOLD_AFTER_MS: Millis = 7 * 24 * HOUR_MS;

wire_enum! {
    /// Why the store's join step refused a new place, as the report counts
    /// it (`turned_away`): the API's error code of that refusal.
    #[derive(PartialOrd, Ord, Hash)]
    pub enum TurnedAway {
        RateLimited,
        RoomNotAccepting,
        PowRequired,
        PowInvalid,
    }
}

impl TurnedAway {
    /// The refusals counted as turning a visitor away (the room's stats'
    /// `turned_away`), by the store's error.
    pub fn of(error: &StoreError) -> Option<Self> {
        match error {
            StoreError::RateLimited { .. } => Some(Self::RateLimited),
            StoreError::NotAccepting => Some(Self::RoomNotAccepting),
            StoreError::PowRequired => Some(Self::PowRequired),
            StoreError::PowReused | StoreError::PowTooEasy => Some(Self::PowInvalid),
            _ => None,
        }
    }
}

/// The bucket a wait of `ms` falls in: the first whose bound it does not
/// pass (`le`).
pub fn bucket_of(ms: Millis) -> usize {
    WAIT_BOUNDS_S
        .iter()
        .position(|bound| ms <= bound * 1000)
        .unwrap_or(BUCKETS - 1)
}

/// Waits counted into the buckets (each bucket its own, not cumulative),
/// with the longest exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    pub counts: [u64; BUCKETS],
    pub max_ms: Millis,
}

impl Waits {
    pub fn record(&mut self, ms: Millis) {
        self.counts[bucket_of(ms)] += 1;
        self.max_ms = self.max_ms.max(ms);
    }

    pub fn add(&mut self, other: &Waits) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
        self.max_ms = self.max_ms.max(other.max_ms);
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile in seconds, interpolated linearly within its bucket
    /// (the `+Inf` bucket ends at the longest wait), never past the longest
    /// wait; `None` without waits. It lies in the same bucket as the true
    /// quantile, so it is off by at most that bucket's width.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let max_s = self.max_ms as f64 / 1000.0;
        let rank = q * total as f64;
        let mut below = 0u64;
        for (i, &count) in self.counts.iter().enumerate() {
            if count > 0 && (below + count) as f64 >= rank {
                let low = if i == 0 {
                    0.0
                } else {
                    WAIT_BOUNDS_S[i - 1] as f64
                };
                let high = WAIT_BOUNDS_S.get(i).map_or(max_s, |&b| b as f64);
                let within = ((rank - below as f64) / count as f64).clamp(0.0, 1.0);
                return Some((low + (high - low) * within).min(max_s));
            }
            below += count;
        }
        Some(max_s)
    }

    /// As the report shows them: cumulative buckets and the percentiles.
    pub fn seconds(&self) -> WaitSeconds {
        let mut running = 0;
        let buckets = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, count)| {
                running += count;
                Bucket {
                    le: WAIT_BOUNDS_S
                        .get(i)
                        .map_or_else(|| "+Inf".to_owned(), u64::to_string),
                    count: running,
                }
            })
            .collect();
        WaitSeconds {
            p50: self.quantile(0.5).map(round_ms),
            p90: self.quantile(0.9).map(round_ms),
            p99: self.quantile(0.99).map(round_ms),
            max: (self.total() > 0).then(|| self.max_ms as f64 / 1000.0),
            buckets,
        }
    }

    /// As a row of the store writes them: the counts, then the longest.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for count in self.counts {
            out.push_str(&count.to_string());
            out.push(',');
        }
        out.push_str(&self.max_ms.to_string());
        out
    }

    pub fn decode(text: &str) -> Option<Self> {
        let mut waits = Waits::default();
        let mut fields = text.split(',');
        for count in &mut waits.counts {
            *count = fields.next()?.parse().ok()?;
        }
        waits.max_ms = fields.next()?.parse().ok()?;
        fields.next().is_none().then_some(waits)
    }
}

fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

/// One row of the room's life: a minute, or an hour once folded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Row {
    /// Its start: the minute's (or hour's) first millisecond.
    pub at: Millis,
    pub span_ms: Millis,
    /// Places made, counted from the row's first tick to the next row's.
    pub arrivals: u64,
    /// Admitted from the line by its ticks.
    pub admitted: u64,
    /// Waiting and holding a pass at its last tick.
    pub waiting: u64,
    pub active: u64,
    /// The waits of its admissions.
    pub waits: Waits,
}

impl Row {
    fn is_empty(&self) -> bool {
        self.arrivals == 0 && self.admitted == 0 && self.waiting == 0 && self.active == 0
    }

    /// `at|span_ms|arrivals|admitted|waiting|active|waits`, as the Redis
    /// store keeps a row (lua/lib.lua's `ledger.row`).
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}",
            self.at,
            self.span_ms,
            self.arrivals,
            self.admitted,
            self.waiting,
            self.active,
            self.waits.encode()
        )
    }

    pub fn decode(text: &str) -> Option<Self> {
        let mut fields = text.split('|');
        let mut number = || fields.next()?.parse::<u64>().ok();
        let row = Row {
            at: number()?,
            span_ms: number()?,
            arrivals: number()?,
            admitted: number()?,
            waiting: number()?,
            active: number()?,
            waits: Waits::default(),
        };
        let waits = Waits::decode(fields.next()?)?;
        fields.next().is_none().then_some(Row { waits, ..row })
    }

    /// The hour these minute rows (of one hour, in order) make: sums, and
    /// the last row's waiting and active.
    fn fold(rows: &[Row]) -> Row {
        let mut hour = Row {
            at: rows[0].at - rows[0].at % HOUR_MS,
            span_ms: HOUR_MS,
            ..Row::default()
        };
        for row in rows {
            hour.arrivals += row.arrivals;
            hour.admitted += row.admitted;
            hour.waits.add(&row.waits);
            (hour.waiting, hour.active) = (row.waiting, row.active);
        }
        hour
    }
}

/// The row the ticks are filling: its minute, the arrivals count at its
/// start, and what it has so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenRow {
    pub at: Millis,
    pub arrivals_before: u64,
    pub admitted: u64,
    pub waiting: u64,
    pub active: u64,
    pub waits: Waits,
}

impl OpenRow {
    fn close(&self, arrivals: u64) -> Row {
        Row {
            at: self.at,
            span_ms: MINUTE_MS,
            arrivals: arrivals - self.arrivals_before,
            admitted: self.admitted,
            waiting: self.waiting,
            active: self.active,
            waits: self.waits,
        }
    }
}

/// A room's rows: hours (older than a week), minutes, and the open one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rows {
    pub hours: Vec<Row>,
    pub minutes: VecDeque<Row>,
    pub open: Option<OpenRow>,
}

impl Rows {
    /// A tick ran at `now` (and not idle): the open row takes its
    /// admissions' waits and the room's figures after it, first closing
    /// a row of an earlier minute (kept unless nothing happened in it) and
    /// folding the oldest hour of minutes past a week.
    pub fn tick(
        &mut self,
        now: Millis,
        arrivals: u64,
        waiting: u64,
        active: u64,
        waits: &[Millis],
    ) {
        let minute = now - now % MINUTE_MS;
        match &self.open {
            Some(open) if open.at >= minute => {}
            _ => {
                // The first row counts from the room's making.
                let mut arrivals_before = 0;
                if let Some(open) = self.open.take() {
                    let row = open.close(arrivals);
                    if !row.is_empty() {
                        self.minutes.push_back(row);
                    }
                    arrivals_before = arrivals;
                }
                self.fold(now);
                self.open = Some(OpenRow {
                    at: minute,
                    arrivals_before,
                    ..OpenRow::default()
                });
            }
        }
        let open = self.open.as_mut().expect("opened above");
        open.admitted += waits.len() as u64;
        for &wait in waits {
            open.waits.record(wait);
        }
        (open.waiting, open.active) = (waiting, active);
    }

    /// Folds the oldest hour's minutes into an hour row, if the oldest
    /// minute is past a week: one hour a roll at most, so a roll's work is
    /// bounded (60 rows), and a roll a minute keeps up.
    fn fold(&mut self, now: Millis) {
        let Some(first) = self.minutes.front() else {
            return;
        };
        if first.at + FOLD_AFTER_MS > now {
            return;
        }
        let hour_end = first.at - first.at % HOUR_MS + HOUR_MS;
        let count = self.minutes.iter().take_while(|r| r.at < hour_end).count();
        let rows: Vec<Row> = self.minutes.drain(..count).collect();
        self.hours.push(Row::fold(&rows));
    }

    /// Every row, oldest first, the open one closed as of `arrivals`.
    pub fn all(&self, arrivals: u64) -> Vec<Row> {
        let mut rows: Vec<Row> = self.hours.iter().chain(&self.minutes).cloned().collect();
        if let Some(open) = &self.open {
            rows.push(open.close(arrivals));
        }
        rows
    }
}

/// What a room's own steps count, exactly, whichever node served; the
/// report shows them as they are.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
pub struct Counts {
    /// Places made: in the line (or the draw, or the priority line),
    /// straight through, or bypassed.
    pub arrivals: u64,
    /// Admitted from the line by a tick.
    pub admitted: u64,
    /// Admitted by their join, with room to spare.
    pub passed_through: u64,
    pub bypassed: u64,
    /// Gave up their place or pass.
    pub left: u64,
    /// Lost their place for being away (`abandon_after_s`).
    pub abandoned: u64,
    pub no_shows: u64,
    pub sessions_lapsed: u64,
    /// Passes the origin took back.
    pub revoked: u64,
    /// Joins refused by a limit, by the refusal's error code.
    pub turned_away: BTreeMap<TurnedAway, u64>,
    pub peak_waiting: u64,
}

/// A room's ledger: its counts, its waits and its rows, from its making.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ledger {
    pub created_at: Millis,
    pub counts: Counts,
    pub waits: Waits,
    pub rows: Rows,
}

impl Ledger {
    pub fn new(created_at: Millis) -> Self {
        Self {
            created_at,
            ..Self::default()
        }
    }

    /// A new place; `waiting` after it, for the peak.
    pub fn arrived(&mut self, arrival: Arrival, waiting: u64) {
        self.counts.arrivals += 1;
        match arrival {
            Arrival::Line => {}
            Arrival::PassedThrough => self.counts.passed_through += 1,
            Arrival::Bypassed => self.counts.bypassed += 1,
        }
        self.counts.peak_waiting = self.counts.peak_waiting.max(waiting);
    }

    pub fn turned_away(&mut self, error: &StoreError) {
        if let Some(why) = TurnedAway::of(error) {
            *self.counts.turned_away.entry(why).or_default() += 1;
        }
    }

    /// A tick ran (not idle): its admissions from the line with their
    /// waits, those it swept, and the room after it.
    pub fn tick(&mut self, now: Millis, waits: &[Millis], swept: Swept) {
        self.counts.admitted += waits.len() as u64;
        self.counts.abandoned += swept.abandoned;
        self.counts.no_shows += swept.no_shows;
        for &wait in waits {
            self.waits.record(wait);
        }
        let arrivals = self.counts.arrivals;
        self.rows
            .tick(now, arrivals, swept.waiting, swept.active, waits);
    }

    /// The report of this ledger at `now` (`closed_at` if the room closed).
    pub fn report(&self, room: &str, facts: ReportFacts, now: Millis) -> Report {
        let rows = self.rows.all(self.counts.arrivals);
        let peak_joins_per_minute = rows
            .iter()
            .filter(|row| row.span_ms == MINUTE_MS)
            .map(|row| row.arrivals)
            .max()
            .unwrap_or(0);
        Report {
            room: room.to_owned(),
            created_at: Moment(self.created_at),
            closed_at: facts.closed_at.map(Moment),
            from: Moment(facts.opens_at.unwrap_or(self.created_at)),
            to: Moment(facts.closed_at.unwrap_or(now)),
            counts: self.counts.clone(),
            wait_seconds: self.waits.seconds(),
            peak_joins_per_minute,
            sale: facts.sale,
            draw: facts.draw,
            autotune: facts.autotune,
            minutes: rows.iter().map(Minute::of).collect(),
        }
    }
}

/// Where a new place was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// In the line, the draw or the priority line.
    Line,
    /// Admitted by the join, with room to spare.
    PassedThrough,
    /// Admitted outside the cap, from a bypass network.
    Bypassed,
}

/// What a tick swept, and the room after it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Swept {
    pub abandoned: u64,
    pub no_shows: u64,
    pub waiting: u64,
    pub active: u64,
}

/// What a report shows beside the ledger, from the room.
#[derive(Debug, Clone, Default)]
pub struct ReportFacts {
    pub opens_at: Option<Millis>,
    pub closed_at: Option<Millis>,
    pub draw: Option<DrawInfo>,
    /// A closed room's sale, as it was at the close (an open room's is
    /// read with its report).
    pub sale: Option<serde_json::Value>,
    /// The room's autotune, if it has one.
    pub autotune: Option<AutotuneReport>,
}

/// A room's report (api.md, "After the drop: the report").
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Report {
    pub room: String,
    pub created_at: Moment,
    /// When the room closed; null while it is open.
    pub closed_at: Option<Moment>,
    /// The opening (or the making, without one) to the close (or now).
    pub from: Moment,
    pub to: Moment,
    #[serde(flatten)]
    pub counts: Counts,
    pub wait_seconds: WaitSeconds,
    pub peak_joins_per_minute: u64,
    /// The room's sale, if it has one (read with the report).
    #[schema(value_type = Option<Object>)]
    pub sale: Option<serde_json::Value>,
    pub draw: Option<DrawInfo>,
    /// The rate autotune ended at and its changes, each with its reason;
    /// null without autotune.
    pub autotune: Option<AutotuneReport>,
    pub minutes: Vec<Minute>,
}

/// The waits from joining (or the opening) to admission, of those admitted
/// from the line.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WaitSeconds {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    pub buckets: Vec<Bucket>,
}

/// A cumulative bucket: waits of at most `le` seconds (`+Inf`: all).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Bucket {
    pub le: String,
    pub count: u64,
}

/// One row of the report's `minutes`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Minute {
    pub at: Moment,
    pub span_s: u64,
    pub arrivals: u64,
    pub admitted: u64,
    pub waiting: u64,
    pub active: u64,
    pub wait_p50: Option<f64>,
    pub wait_p90: Option<f64>,
}

impl Minute {
    fn of(row: &Row) -> Self {
        Minute {
            at: Moment(row.at),
            span_s: row.span_ms / 1000,
            arrivals: row.arrivals,
            admitted: row.admitted,
            waiting: row.waiting,
            active: row.active,
            wait_p50: row.waits.quantile(0.5).map(round_ms),
            wait_p90: row.waits.quantile(0.9).map(round_ms),
        }
    }
}

impl Report {
    /// `minutes` as CSV, with a header line.
    pub fn minutes_csv(&self) -> String {
        let mut out =
            String::from("at,span_s,arrivals,admitted,waiting,active,wait_p50,wait_p90\n");
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        for m in &self.minutes {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{}\n",
                super::clock::rfc3339(m.at.0),
                m.span_s,
                m.arrivals,
                m.admitted,
                m.waiting,
                m.active,
                opt(m.wait_p50),
                opt(m.wait_p90)
            ));
        }
        out
    }
}

/// A report kept, as `GET /api/admin/reports` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ReportEntry {
    pub room: String,
    pub created_at: Moment,
    pub closed_at: Option<Moment>,
}

impl ReportEntry {
    /// The order the list is in: by room, then time of making, then of
    /// closing, the open room last (rooms made in the same millisecond
    /// under one id are listed as they followed each other).
    pub fn sort(entries: &mut [ReportEntry]) {
        entries.sort_by(|a, b| {
            let key = |e: &ReportEntry| {
                (
                    e.room.clone(),
                    e.created_at,
                    e.closed_at.is_none(),
                    e.closed_at,
                )
            };
            key(a).cmp(&key(b))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_falls_in_the_first_bucket_it_does_not_pass() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1_000), 0);
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(bucket_of(7_200_000), 12);
        assert_eq!(bucket_of(7_200_001), 13);
    }

    #[test]
    fn a_quantile_lies_in_the_true_ones_bucket_and_never_past_the_longest() {
        let mut waits = Waits::default();
        // 100 waits of 1..=100 s: the true p50 is 50 s, p90 90 s.
        for s in 1..=100 {
            waits.record(s * 1000);
        }
        let p50 = waits.quantile(0.5).unwrap();
        let p90 = waits.quantile(0.9).unwrap();
        assert!((30.0..=60.0).contains(&p50), "{p50}");
        assert!((60.0..=120.0).contains(&p90), "{p90}");
        assert!(waits.quantile(1.0).unwrap() <= 100.0);
        assert_eq!(waits.seconds().max, Some(100.0));
        assert_eq!(Waits::default().quantile(0.5), None);
        // One long wait: the +Inf bucket ends at it.
        let mut long = Waits::default();
        long.record(9_000_000);
        assert_eq!(long.quantile(0.99), Some(9_000.0 * 0.99 + 7_200.0 * 0.01));
    }

    #[test]
    fn buckets_are_cumulative_and_end_with_everyone() {
        let mut waits = Waits::default();
        for ms in [500, 1_500, 1_500, 40_000] {
            waits.record(ms);
        }
        let buckets = waits.seconds().buckets;
        assert_eq!(buckets.len(), BUCKETS);
        assert_eq!((buckets[0].le.as_str(), buckets[0].count), ("1", 1));
        assert_eq!(buckets[1].count, 3);
        assert_eq!(buckets[5].count, 4);
        assert_eq!((buckets[13].le.as_str(), buckets[13].count), ("+Inf", 4));
    }

    #[test]
    fn rows_and_waits_read_back_as_written() {
        let mut row = Row {
            at: 120_000,
            span_ms: MINUTE_MS,
            arrivals: 7,
            admitted: 3,
            waiting: 4,
            active: 2,
            waits: Waits::default(),
        };
        row.waits.record(3_500);
        assert_eq!(Row::decode(&row.encode()), Some(row));
        assert_eq!(Row::decode("1|2|3"), None);
    }

    #[test]
    fn a_row_counts_a_minute_from_its_first_tick_and_empty_minutes_leave_none() {
        let mut rows = Rows::default();
        rows.tick(60_500, 3, 2, 1, &[1_000]);
        rows.tick(61_000, 5, 3, 1, &[]);
        // Nothing for two minutes, then a tick: the first row closes with
        // the arrivals since the room was made up to it.
        rows.tick(240_100, 9, 0, 0, &[]);
        rows.tick(300_000, 9, 0, 0, &[]);
        let all = rows.all(9);
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(
            (all[0].at, all[0].arrivals, all[0].admitted),
            (60_000, 9, 1)
        );
        assert_eq!((all[0].waiting, all[0].active), (3, 1));
        // The empty minute at 240 s is dropped at its close; 300 s is open.
        assert_eq!((all[1].at, all[1].arrivals), (300_000, 0));
    }

    #[test]
    fn minutes_older_than_a_week_fold_into_hours_an_hour_a_roll() {
        let mut rows = Rows::default();
        let mut arrivals = 0;
        // Eight days, a tick a minute, one arrival each.
        for minute in 0..(8 * 24 * 60) {
            arrivals += 1;
            rows.tick(minute * MINUTE_MS, arrivals, 1, 0, &[]);
        }
        assert!(
            rows.minutes.len() <= 7 * 24 * 60 + 1,
            "{}",
            rows.minutes.len()
        );
        assert_eq!(rows.hours.len(), 24);
        assert!(rows.hours.iter().all(|h| h.span_ms == HOUR_MS));
        // Each row counts up to the next row's first tick; the first from
        // the room's making, so the arrival before the first tick too.
        assert_eq!(rows.hours[0].arrivals, 61);
        assert!(rows.hours[1..].iter().all(|h| h.arrivals == 60));
        let all = rows.all(arrivals);
        assert_eq!(all.iter().map(|r| r.arrivals).sum::<u64>(), arrivals);
    }
}
