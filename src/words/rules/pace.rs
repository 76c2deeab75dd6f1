//! A room's pace: the token bucket a tick refills, the tick schedule, and
//! the admission rate achieved over the last minute (what an ETA divides by).

use std::collections::VecDeque;

use crate::words::RoomConfig;
use crate::words::clock::Millis;
use crate::words::constants::RATE_WINDOW_MS;

pub(super) struct Pace {
    created_at: Millis,
    /// Tokens left for this tick period: refilled to `admit_per_tick` by each
    /// tick, spent on the head of the line first, then on pass-through arrivals.
    pub(super) tokens: u32,
    /// The tick schedule's anchor: ticks are due at `last_tick + k * tick_ms`.
    pub(super) last_tick: Millis,
    /// When a tick last actually ran.
    pub(super) last_tick_ran: Option<Millis>,
    /// Admissions per second over the rate window, as of the last tick.
    achieved_rate: f64,
    /// (time, admitted) over the rate window, oldest first.
    admissions: VecDeque<(Millis, u64)>,
    /// When the pace last changed (the room made, the rate or the tick
    /// set, admission resumed, the opening): until a whole rate window has
    /// passed since, the achieved rate says more of the old pace than of
    /// this one, and an ETA divides by the configured rate instead.
    rate_since: Millis,
}

impl Pace {
    pub(super) fn new(config: &RoomConfig, now: Millis) -> Self {
        Self {
            created_at: now,
            tokens: config.admit_per_tick,
            last_tick: now,
            last_tick_ran: None,
            achieved_rate: 0.0,
            admissions: VecDeque::new(),
            rate_since: now,
        }
    }

    /// The pace changed at `at`: ETAs use the configured rate for a window.
    pub(super) fn changed_at(&mut self, at: Millis) {
        self.rate_since = at;
    }

    /// Starts the tick due at `now`: the bucket full again (`per_tick`: the
    /// room's rate, autotune's where it sets one), the cadence kept (a late
    /// tick does not shift every later one).
    pub(super) fn start_tick(&mut self, config: &RoomConfig, per_tick: u32, now: Millis) {
        self.last_tick += (now - self.last_tick) / config.tick_ms * config.tick_ms;
        self.tokens = per_tick;
    }

    /// Ends the tick that admitted `count`.
    pub(super) fn end_tick(&mut self, config: &RoomConfig, now: Millis, count: u64) {
        self.record_admissions(now, count);
        self.last_tick_ran = Some(now);
        self.achieved_rate = self.measure_rate(config, now);
    }

    pub(super) fn record_admissions(&mut self, now: Millis, count: u64) {
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

    pub(super) fn admitted_since(&self, since_exclusive: Millis) -> u64 {
        self.admissions
            .iter()
            .filter(|(at, _)| *at > since_exclusive)
            .map(|(_, n)| n)
            .sum()
    }

    /// Admissions per second over the window ending at `last_tick`.
    fn measure_rate(&self, config: &RoomConfig, last_tick: Millis) -> f64 {
        let window_start = last_tick
            .saturating_sub(RATE_WINDOW_MS)
            .max(self.created_at);
        let span_ms = (last_tick - window_start).max(config.tick_ms);
        let admitted = self
            .admissions
            .iter()
            .filter(|(at, _)| *at > window_start && *at <= last_tick)
            .map(|(_, n)| n)
            .sum::<u64>();
        admitted as f64 * 1000.0 / span_ms as f64
    }

    /// The rate an ETA divides by: none while paused; the configured rate
    /// (`per_tick`: autotune's where it sets one) until a tick has run a
    /// whole rate window after the pace last changed (design.md, rule 4);
    /// then the rate achieved (none if nothing got in).
    pub(super) fn rate_per_s(&self, config: &RoomConfig, per_tick: u32) -> Option<f64> {
        if config.paused {
            return None;
        }
        match self.last_tick_ran {
            Some(ran) if ran >= self.rate_since + RATE_WINDOW_MS => {
                (self.achieved_rate > 0.0).then_some(self.achieved_rate)
            }
            _ => Some(per_tick as f64 * 1000.0 / config.tick_ms as f64),
        }
    }

    /// When the room next needs its tick asked for: the tick period from
    /// the last, or a period from now if that is past.
    pub(super) fn next_due_in_ms(&self, config: &RoomConfig, now: Millis) -> Millis {
        match (self.last_tick + config.tick_ms).saturating_sub(now) {
            // Due but with nothing to do: ask again a period from now.
            0 => config.tick_ms,
            wait => wait,
        }
    }
}
