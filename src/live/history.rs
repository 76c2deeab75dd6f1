//! Each room's recent figures, kept in this node's memory for the admin
//! page's chart: a bounded ring per room of what the promoter's tick
//! answers said (`Tick::figures`), one sample per [`SAMPLE_EVERY_MS`] at
//! most, the last [`SAMPLES_KEPT`] of them (an hour).
//!
//! Every node keeps its own: every node asks for a busy room's ticks and
//! every answer carries the room's figures, whichever node's tick ran, so
//! any node can draw the chart. Nothing is stored: a node that starts has
//! no history yet, and an empty room, asked only once per idle heartbeat,
//! gets a sample that often.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::store::RoomFigures;
use crate::words::RoomId;
use crate::words::clock::{Clock, Millis};

/// The least time between two samples of a room.
pub const SAMPLE_EVERY_MS: Millis = 10_000;
/// Samples kept per room: an hour of them. A sample is 48 bytes, so a
/// room's ring holds under 18 KB, whatever its traffic.
pub const SAMPLES_KEPT: usize = 360;

/// A room's figures at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the tick answer came, by the node's clock (Unix ms).
    pub at: Millis,
    pub waiting: u64,
    pub active: u64,
    pub admitted_last_minute: u64,
    pub max_active: Option<u64>,
}

/// Every room's ring on this node. Rooms come and go with the promoter's
/// knowledge of them, so the whole is bounded by the rooms the store has.
pub struct RoomHistory {
    clock: Arc<dyn Clock>,
    rooms: Mutex<HashMap<RoomId, VecDeque<Sample>>>,
}

impl RoomHistory {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            rooms: Mutex::default(),
        }
    }

    /// The history's clock, read by the promoter as it asks for a tick.
    pub fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }

    /// Notes what a tick answer said of `room`, asked for at `at` (read
    /// before the call, so an answer is never dated after a tick it did not
    /// see): kept when the ring is empty or its newest sample is
    /// [`SAMPLE_EVERY_MS`] older; the oldest goes once [`SAMPLES_KEPT`] are
    /// held. An answer to an older ask that arrives late is dropped.
    pub fn record(&self, room: &RoomId, at: Millis, figures: &RoomFigures) {
        let mut rooms = self.rooms.lock();
        let ring = rooms.entry(room.clone()).or_default();
        if ring
            .back()
            .is_some_and(|last| at < last.at + SAMPLE_EVERY_MS)
        {
            return;
        }
        if ring.len() == SAMPLES_KEPT {
            ring.pop_front();
        }
        ring.push_back(Sample {
            at,
            waiting: figures.waiting,
            active: figures.active,
            admitted_last_minute: figures.admitted_last_minute,
            max_active: figures.max_active,
        });
    }

    /// The room's samples, oldest first; none for a room not seen yet.
    pub fn samples(&self, room: &RoomId) -> Vec<Sample> {
        self.rooms
            .lock()
            .get(room)
            .map(|ring| ring.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Drops a room closed or gone, so a room made again under its id
    /// starts with no history of the old one.
    pub fn forget(&self, room: &RoomId) {
        self.rooms.lock().remove(room);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::clock::ManualClock;

    fn figures(waiting: u64) -> RoomFigures {
        RoomFigures {
            waiting,
            active: 2,
            max_active: Some(5),
            admitted_last_minute: 7,
            ..RoomFigures::default()
        }
    }

    #[test]
    fn one_sample_per_period_and_never_more_than_an_hour() {
        let clock = ManualClock::new(1_000_000);
        let history = RoomHistory::new(Arc::new(clock.clone()));
        let room = RoomId::parse("r").unwrap();
        let record = |waiting| history.record(&room, history.now_ms(), &figures(waiting));
        record(1);
        clock.advance_ms(SAMPLE_EVERY_MS - 1);
        record(2);
        assert_eq!(history.samples(&room).len(), 1, "too soon for another");
        for n in 0..SAMPLES_KEPT as u64 + 40 {
            clock.advance_ms(SAMPLE_EVERY_MS);
            record(n);
        }
        let late = history.now_ms() - 2 * SAMPLE_EVERY_MS;
        history.record(&room, late, &figures(99));
        let samples = history.samples(&room);
        assert_eq!(samples.len(), SAMPLES_KEPT);
        assert_eq!(samples.last().unwrap().at, clock.now_ms());
        assert_eq!(
            samples.last().unwrap().at - samples[0].at,
            (SAMPLES_KEPT as u64 - 1) * SAMPLE_EVERY_MS
        );
        assert!(samples.windows(2).all(|w| w[0].at < w[1].at));
        history.forget(&room);
        assert!(history.samples(&room).is_empty());
    }

    #[test]
    fn a_sample_is_48_bytes_as_the_bound_says() {
        assert_eq!(std::mem::size_of::<Sample>(), 48);
    }
}
