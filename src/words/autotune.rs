//! Admission that follows the origin (api.md, "Admission that follows the
//! origin"): a room's `autotune` setting ([`Autotune`]), the health samples
//! a node takes of the origin ([`Sample`]), and the rule every tick applies
//! to the samples the store holds ([`Tuning::decide`]), so that whichever
//! node's tick decides, the decision is the same (design rule 15). Taking
//! a sample (an HTTP request) is the live layer's; keeping the samples and
//! deciding in the tick's atomic step, the stores'.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::clock::{Millis, Moment};
use super::wire_enum;

/// Samples the store keeps per room.
pub const SAMPLES_KEPT: usize = 60;
/// At most one sample a second per room, whichever nodes tick.
pub const SAMPLE_EVERY_MS: Millis = 1_000;
/// Changes the store keeps per room, for the admin chart and the report.
pub const CHANGES_KEPT: usize = 100;
/// Healthy samples since the last change that raise the rate.
pub const HEALTHY_TO_RAISE: usize = 3;
/// A stored sample's failure when it had none.
pub const NO_FAILURE: &str = "ok";

/// A room's `autotune` (api.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Autotune {
    /// What a node GETs after a tick it ran (http or https, no user info).
    pub health_url: String,
    /// Above this p95 latency the rate is cut.
    #[serde(default = "default_target")]
    pub latency_target_ms: u64,
    /// Above this share of failed samples the rate is cut.
    #[serde(default = "default_error_rate")]
    pub error_rate_max: f64,
    #[serde(default = "one")]
    pub min_per_tick: u32,
    /// `None`: the room's `admit_per_tick`, following its changes.
    #[serde(default)]
    pub max_per_tick: Option<u32>,
    /// Says what it would do, and leaves the rate at `admit_per_tick`.
    #[serde(default)]
    pub dry_run: bool,
}

fn default_target() -> u64 {
    1_000
}

fn default_error_rate() -> f64 {
    0.05
}

fn one() -> u32 {
    1
}

impl Autotune {
    /// The highest rate it may set, for a room admitting `admit_per_tick`.
    pub fn max(&self, admit_per_tick: u32) -> u32 {
        self.max_per_tick.unwrap_or(admit_per_tick)
    }

    /// A sample slower than this failed (`timeout`): twice the target.
    pub fn timeout_ms(&self) -> u64 {
        self.latency_target_ms.saturating_mul(2)
    }

    /// What is wrong with it, for a room admitting `admit_per_tick`: the
    /// field at fault (`autotune.min_per_tick`) and why.
    pub fn validate(&self, admit_per_tick: u32) -> Result<(), (&'static str, String)> {
        super::health_url::check(&self.health_url)
            .map_err(|why| ("autotune.health_url", format!("autotune.{why}")))?;
        if !(10..=60_000).contains(&self.latency_target_ms) {
            return Err((
                "autotune.latency_target_ms",
                "autotune.latency_target_ms must be between 10 and 60000".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.error_rate_max) {
            return Err((
                "autotune.error_rate_max",
                "autotune.error_rate_max must be between 0 and 1".into(),
            ));
        }
        let max = self.max(admit_per_tick);
        if !(1..=100_000).contains(&max) {
            return Err((
                "autotune.max_per_tick",
                "autotune.max_per_tick must be between 1 and 100000".into(),
            ));
        }
        if self.min_per_tick < 1 || self.min_per_tick > max {
            return Err((
                "autotune.min_per_tick",
                format!(
                    "autotune.min_per_tick must be at least 1 and at most max_per_tick ({max}, admit_per_tick when unset)"
                ),
            ));
        }
        Ok(())
    }
}

/// A health sample a tick hands to its node to take: what to GET, and
/// when it counts as failed (`timeout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub url: String,
    pub timeout_ms: u64,
    /// The rate's epoch when the check was handed out: its sample counts
    /// only if no change came since (`Tuning::epoch`).
    pub epoch: u64,
}

impl Autotune {
    pub fn check(&self, epoch: u64) -> HealthCheck {
        HealthCheck {
            url: self.health_url.clone(),
            timeout_ms: self.timeout_ms(),
            epoch,
        }
    }
}

/// One GET of the health URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// The rate's epoch its probe was handed out in: a decision reads the
    /// samples of the epoch since the last change only (an epoch, not a
    /// time: a probe handed out before a change and answered after it
    /// describes the rate before, and a sample recorded in the very
    /// millisecond of a change is
    /// neither lost nor read twice).
    pub epoch: u64,
    /// From the request to its status, or to its failure.
    pub latency_ms: u64,
    /// `None`: answered 2xx or 3xx within the timeout.
    pub failure: Option<Failure>,
}

/// How a sample failed, as the reason names it: only `failed`, `timeout`
/// or the HTTP status (never the origin's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// No answer (refused, reset, a name that did not resolve, an address
    /// the node may not call).
    Failed,
    /// No status within twice the latency target.
    Timeout,
    /// A status of 400 or more.
    Status(u16),
}

impl Failure {
    pub fn name(self) -> String {
        match self {
            Failure::Failed => "failed".into(),
            Failure::Timeout => "timeout".into(),
            Failure::Status(status) => status.to_string(),
        }
    }
}

impl Sample {
    fn healthy(&self, target_ms: u64) -> bool {
        self.failure.is_none() && self.latency_ms <= target_ms
    }

    /// The sample as the Redis store keeps it: `<at> <latency> <failure>`
    /// (`-`, `failed`, `timeout` or the status).
    pub fn stored(&self) -> String {
        let failure = self
            .failure
            .map_or_else(|| NO_FAILURE.to_string(), Failure::name);
        format!("{} {} {failure}", self.epoch, self.latency_ms)
    }

    pub fn from_stored(text: &str) -> Option<Self> {
        let mut parts = text.split(' ');
        let epoch = parts.next()?.parse().ok()?;
        let latency_ms = parts.next()?.parse().ok()?;
        let failure = match parts.next()? {
            NO_FAILURE => None,
            "failed" => Some(Failure::Failed),
            "timeout" => Some(Failure::Timeout),
            status => Some(Failure::Status(status.parse().ok()?)),
        };
        Some(Self {
            epoch,
            latency_ms,
            failure,
        })
    }
}

wire_enum! {
    /// What the last tick's decision was (api.md's `autotune.state`).
    #[derive(Default)]
    pub enum TuneState {
        /// The rate was cut (or, at `min_per_tick`, would have been).
        Cut,
        /// The rate was raised.
        Raised,
        /// Nothing to change: too few samples, or at a bound.
        Held,
        /// Nobody waits: no probe, no decision.
        #[default]
        Idle,
    }
}

/// A change of the effective rate, with its reason, for the chart and
/// the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Change {
    pub at: Moment,
    pub from: u32,
    pub to: u32,
    pub reason: String,
}

/// What a room's autotune holds between ticks: the rate it set, its last
/// decision, and the samples and changes kept. The memory store keeps it in
/// the room's model; the Redis store in the room's record and two lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tuning {
    /// The rate autotune set (`dry_run`: the rate it would have set).
    pub effective: u32,
    /// Changes of the rate so far (a cut at the floor and a reset by the
    /// config count too): the samples a decision reads are this epoch's.
    /// The samples the next decision reads are those after this count.
    pub epoch: u64,
    /// The last decision.
    pub last: Decision,
    /// When a probe was last handed out (at most one a second).
    pub probed_at: Option<Millis>,
    pub samples: VecDeque<Sample>,
    pub changes: VecDeque<Change>,
}

/// One tick's decision (api.md's `autotune` in stats).
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Decision {
    pub state: TuneState,
    /// In words: `p95 2310 ms > 1000 ms`.
    pub reason: String,
    pub p95_ms: Option<u64>,
    pub error_rate: Option<f64>,
    /// Samples since the last change.
    pub samples: u64,
    pub at: Option<Moment>,
}

/// Autotune in a room's stats: the last decision (api.md) and the last
/// changes, newest last, for the admin chart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AutotuneStats {
    #[serde(flatten)]
    pub decision: Decision,
    pub changes: Vec<Change>,
}

/// Autotune in a room's report: the rate it ended at, and every change
/// kept (the last [`CHANGES_KEPT`]), with its reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AutotuneReport {
    pub admit_per_tick_effective: u32,
    pub changes: Vec<Change>,
}

/// Changes shown in stats (the report has every change kept).
pub const CHANGES_SHOWN: usize = 20;

impl AutotuneStats {
    pub fn of(tuning: &Tuning) -> Self {
        let skip = tuning.changes.len().saturating_sub(CHANGES_SHOWN);
        Self {
            decision: tuning.last.clone(),
            changes: tuning.changes.iter().skip(skip).cloned().collect(),
        }
    }
}

/// Which way a change went (`waitroom_autotune_changes_total{direction}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Down,
    Up,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Down => "down",
            Direction::Up => "up",
        }
    }
}

impl Tuning {
    /// A room's tuning starting at `admit_per_tick`.
    pub fn new(admit_per_tick: u32) -> Self {
        Self {
            effective: admit_per_tick,
            ..Self::default()
        }
    }

    /// The rate the room's ticks admit at.
    pub fn rate(&self, autotune: Option<&Autotune>, admit_per_tick: u32) -> u32 {
        match autotune {
            Some(tune) if !tune.dry_run => self.effective,
            _ => admit_per_tick,
        }
    }

    /// The room's config changed: a new `admit_per_tick` (or autotune set
    /// anew) starts the rate there; the bounds are kept in any case.
    pub fn configured(
        &mut self,
        before: (Option<&Autotune>, u32),
        after: (Option<&Autotune>, u32),
    ) {
        let (tune, admit_per_tick) = after;
        if before.1 != admit_per_tick || before.0.is_none() {
            self.effective = admit_per_tick;
            self.epoch += 1;
        }
        if let Some(tune) = tune {
            self.effective = self
                .effective
                .clamp(tune.min_per_tick, tune.max(admit_per_tick));
        } else {
            self.effective = admit_per_tick;
            self.last = Decision::default();
        }
    }

    /// Records a sample of a probe handed out in `epoch`, keeping the last
    /// [`SAMPLES_KEPT`]; one of an epoch past (the rate changed while it
    /// was on its way) is dropped. Whether it was kept.
    pub fn record(&mut self, epoch: u64, latency_ms: u64, failure: Option<Failure>) -> bool {
        if epoch != self.epoch {
            return false;
        }
        if self.samples.len() == SAMPLES_KEPT {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            epoch,
            latency_ms,
            failure,
        });
        true
    }

    /// Whether the tick that ran at `now` may hand out a probe (and marks
    /// it handed out): the room has autotune and a line, and no probe was
    /// handed out in the last second.
    pub fn take_probe(&mut self, line: bool, now: Millis) -> bool {
        let free = self.probed_at.is_none_or(|at| now >= at + SAMPLE_EVERY_MS);
        if line && free {
            self.probed_at = Some(now);
        }
        line && free
    }

    /// The tick's decision at `now` (api.md): from the samples recorded
    /// since the last change, cut to 70% (never below `min_per_tick`) if
    /// their p95 is over the target or too many failed, raise by a tenth
    /// of `max_per_tick` (at least 1, never above it) once 3 are all
    /// healthy. Which way the rate moved, if it did.
    pub fn decide(
        &mut self,
        tune: &Autotune,
        admit_per_tick: u32,
        line: bool,
        now: Millis,
    ) -> Option<Direction> {
        let at = Some(Moment(now));
        if !line {
            self.last = Decision {
                state: TuneState::Idle,
                reason: "nobody waits".into(),
                at,
                ..Decision::default()
            };
            return None;
        }
        let since: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.epoch == self.epoch)
            .collect();
        let (min, max) = (tune.min_per_tick, tune.max(admit_per_tick));
        let count = since.len() as u64;
        let mut decision = Decision {
            state: TuneState::Held,
            samples: count,
            at,
            ..Decision::default()
        };
        if since.is_empty() {
            decision.reason = "no sample since the last change".into();
            self.last = decision;
            return None;
        }
        let p95 = p95(since.iter().map(|s| s.latency_ms));
        let failures: Vec<String> = since
            .iter()
            .filter_map(|s| s.failure.map(Failure::name))
            .collect();
        let error_rate = failures.len() as f64 / count as f64;
        decision.p95_ms = Some(p95);
        // Three decimals, as the Redis store keeps it (cjson writes 14 digits).
        decision.error_rate = Some((error_rate * 1000.0).round() / 1000.0);
        let target = tune.latency_target_ms;
        let to = if p95 > target || error_rate > tune.error_rate_max {
            decision.state = TuneState::Cut;
            decision.reason = if error_rate > tune.error_rate_max {
                let mut names = failures.clone();
                names.dedup();
                format!(
                    "errors {:.0}% > {:.0}% ({})",
                    error_rate * 100.0,
                    tune.error_rate_max * 100.0,
                    names.join(", ")
                )
            } else {
                format!("p95 {p95} ms > {target} ms")
            };
            (self.effective * 7 / 10).max(min)
        } else if since.len() >= HEALTHY_TO_RAISE && since.iter().all(|s| s.healthy(target)) {
            decision.state = TuneState::Raised;
            decision.reason = format!("{count} healthy samples, p95 {p95} ms <= {target} ms");
            (self.effective + (max / 10).max(1)).min(max)
        } else {
            decision.reason = format!(
                "p95 {p95} ms <= {target} ms; {HEALTHY_TO_RAISE} healthy samples raise the rate"
            );
            self.effective
        };
        let from = self.effective;
        if to == from {
            if decision.state == TuneState::Cut {
                // Unhealthy at the floor: the samples so far are spent, so
                // that a recovery raises after 3 healthy ones, as after a cut.
                self.epoch += 1;
            }
            if decision.state != TuneState::Held {
                decision.reason = format!(
                    "{} (at {} {to})",
                    decision.reason,
                    if decision.state == TuneState::Cut {
                        "min_per_tick"
                    } else {
                        "max_per_tick"
                    }
                );
                decision.state = TuneState::Held;
            }
            self.last = decision;
            return None;
        }
        if self.changes.len() == CHANGES_KEPT {
            self.changes.pop_front();
        }
        self.changes.push_back(Change {
            at: Moment(now),
            from,
            to,
            reason: decision.reason.clone(),
        });
        self.effective = to;
        self.epoch += 1;
        self.last = decision;
        Some(if to < from {
            Direction::Down
        } else {
            Direction::Up
        })
    }
}

/// The nearest-rank 95th percentile.
fn p95(values: impl Iterator<Item = u64>) -> u64 {
    let mut values: Vec<u64> = values.collect();
    values.sort_unstable();
    let rank = (values.len() * 95).div_ceil(100).max(1);
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tune() -> Autotune {
        Autotune {
            health_url: "https://shop.example/health".into(),
            latency_target_ms: 1_000,
            error_rate_max: 0.05,
            min_per_tick: 2,
            max_per_tick: None,
            dry_run: false,
        }
    }

    #[test]
    fn a_slow_origin_cuts_to_seventy_percent_down_to_the_floor() {
        let tune = tune();
        let mut tuning = Tuning::new(20);
        tuning.record(tuning.epoch, 2_310, None);
        assert_eq!(tuning.decide(&tune, 20, true, 1_500), Some(Direction::Down));
        assert_eq!(tuning.effective, 14);
        assert_eq!(tuning.last.reason, "p95 2310 ms > 1000 ms");
        assert_eq!(tuning.decide(&tune, 20, true, 2_000), None, "no new sample");
        assert_eq!(tuning.last.state, TuneState::Held);
        for at in 0..10 {
            tuning.record(tuning.epoch, 5_000, None);
            tuning.decide(&tune, 20, true, 3_500 + at * 1000);
        }
        assert_eq!(tuning.effective, 2, "never below min_per_tick");
        assert!(tuning.last.reason.ends_with("(at min_per_tick 2)"));
    }

    #[test]
    fn failures_cut_named_only_by_kind_or_status() {
        let tune = tune();
        let mut tuning = Tuning::new(10);
        tuning.record(tuning.epoch, 10, Some(Failure::Status(503)));
        tuning.record(tuning.epoch, 2_000, Some(Failure::Timeout));
        tuning.record(tuning.epoch, 5, None);
        assert_eq!(tuning.decide(&tune, 10, true, 4), Some(Direction::Down));
        assert_eq!(tuning.last.reason, "errors 67% > 5% (503, timeout)");
        assert_eq!(tuning.effective, 7);
    }

    #[test]
    fn three_healthy_samples_raise_by_a_tenth_up_to_the_top() {
        let tune = Autotune {
            max_per_tick: Some(30),
            ..tune()
        };
        let mut tuning = Tuning::new(10);
        tuning.record(tuning.epoch, 100, None);
        tuning.record(tuning.epoch, 100, None);
        assert_eq!(
            tuning.decide(&tune, 10, true, 3),
            None,
            "two are not enough"
        );
        tuning.record(tuning.epoch, 100, None);
        assert_eq!(tuning.decide(&tune, 10, true, 5), Some(Direction::Up));
        assert_eq!(tuning.effective, 13);
        for at in 0..30 {
            tuning.record(tuning.epoch, 100, None);
            tuning.decide(&tune, 10, true, 10 + at);
        }
        assert_eq!(tuning.effective, 30, "never above max_per_tick");
    }

    #[test]
    fn nobody_waiting_is_idle_and_the_rate_follows_admit_per_tick() {
        let tune = tune();
        let mut tuning = Tuning::new(10);
        assert_eq!(tuning.decide(&tune, 10, false, 5), None);
        assert_eq!(tuning.last.state, TuneState::Idle);
        tuning.effective = 4;
        tuning.configured((Some(&tune), 10), (Some(&tune), 40));
        assert_eq!(tuning.effective, 40, "a new admit_per_tick is the rate");
        let dry = Autotune {
            dry_run: true,
            ..tune
        };
        assert_eq!(tuning.rate(Some(&dry), 40), 40);
        tuning.effective = 12;
        assert_eq!(tuning.rate(Some(&dry), 40), 40, "dry run: the rate stays");
    }

    #[test]
    fn probes_are_handed_out_once_a_second_and_only_to_a_line() {
        let mut tuning = Tuning::new(10);
        assert!(!tuning.take_probe(false, 0));
        assert!(tuning.take_probe(true, 100));
        assert!(!tuning.take_probe(true, 1_099));
        assert!(tuning.take_probe(true, 1_100));
    }

    #[test]
    fn a_sample_of_a_probe_handed_out_before_a_change_is_dropped() {
        let tune = tune();
        let mut tuning = Tuning::new(10);
        let before = tuning.epoch;
        tuning.record(before, 5_000, None);
        assert_eq!(tuning.decide(&tune, 10, true, 1), Some(Direction::Down));
        assert!(
            !tuning.record(before, 5_000, None),
            "on its way across the cut"
        );
        assert_eq!(tuning.decide(&tune, 10, true, 2), None);
        assert_eq!(tuning.last.reason, "no sample since the last change");
        assert!(tuning.record(tuning.epoch, 5_000, None));
        assert_eq!(tuning.decide(&tune, 10, true, 3), Some(Direction::Down));
    }

    #[test]
    fn samples_read_back_as_stored() {
        for failure in [
            None,
            Some(Failure::Failed),
            Some(Failure::Timeout),
            Some(Failure::Status(503)),
        ] {
            let s = Sample {
                epoch: 17,
                latency_ms: 250,
                failure,
            };
            assert_eq!(Sample::from_stored(&s.stored()), Some(s));
        }
    }
}
