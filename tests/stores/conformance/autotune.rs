//! Admission that follows the origin (api.md), on every store: a due tick
//! hands out the health probe (one a second at most, and only to a room
//! with a line), and decides the rate from the samples the store keeps,
//! in its own step: cut to 70% past the target or the error rate, raised
//! by a tenth of the top after three healthy samples, within the bounds;
//! `dry_run` never changes the rate; a new `admit_per_tick` sets it. A
//! sample counts for the epoch its probe was handed out in: a tick hands
//! out its probe before it decides, so the probe of a tick that changed
//! the rate is answered in vain, and the next tick's is the one that counts.

use std::cell::Cell;

use waitroom::store::StoreExt;
use waitroom::words::autotune::{Direction, Failure, TuneState};
use waitroom::words::op::RecordSample;
use waitroom::words::{RoomId, VisitorId};

use super::{Harness, TICK_MS};

async fn tuned_room(h: &Harness, per_tick: u32, tune: &str) -> RoomId {
    let room = h.room("t", per_tick, None).await;
    h.patch(
        &room,
        &format!(
            r#"{{"autotune": {{"health_url": "https://shop.example/health", "latency_target_ms": 1000, {tune}}}, "abandon_after_s": 86400}}"#
        ),
    )
    .await;
    for _ in 0..500 {
        h.store.join(&room, VisitorId::random()).await.unwrap();
    }
    room
}

thread_local! {
    /// The epoch of the last probe a tick handed out in this test (each
    /// test runs on a thread of its own).
    static PROBED: Cell<u64> = const { Cell::new(0) };
}

/// The answer to the last probe a tick handed out, recorded in the
/// millisecond of that tick (as a driven clock has it).
async fn sample(h: &Harness, room: &RoomId, latency_ms: u64, failure: Option<Failure>) {
    h.store
        .run(RecordSample {
            room: room.clone(),
            epoch: PROBED.get(),
            latency_ms,
            failure,
        })
        .await
        .unwrap();
}

async fn effective(h: &Harness, room: &RoomId) -> u32 {
    h.store
        .room(room)
        .await
        .unwrap()
        .stats
        .admit_per_tick_effective
}

/// Runs a due tick: (admitted, handed the probe, changed the rate).
async fn tick(h: &Harness, room: &RoomId) -> (u64, bool, Option<Direction>) {
    h.clock.advance_ms(TICK_MS);
    let ran = h.store.tick(room).await.unwrap().ran.expect("due");
    if let Some(check) = &ran.probe {
        assert_eq!(check.url, "https://shop.example/health");
        assert_eq!(check.timeout_ms, 2_000, "twice the target");
        PROBED.set(check.epoch);
    }
    (ran.admitted, ran.probe.is_some(), ran.tuned)
}

pub async fn a_slow_origin_cuts_the_rate_and_a_healthy_one_raises_it(h: &Harness) {
    let room = tuned_room(h, 10, r#""min_per_tick": 2"#).await;
    let (admitted, probe, tuned) = tick(h, &room).await;
    assert_eq!((admitted, probe, tuned), (10, true, None));
    sample(h, &room, 2_310, None).await;
    let (admitted, _, tuned) = tick(h, &room).await;
    assert_eq!(tuned, Some(Direction::Down));
    assert_eq!(admitted, 7, "the cut tick admits at the cut rate");
    let info = h.store.room(&room).await.unwrap();
    assert_eq!(info.stats.admit_per_tick_effective, 7);
    let tune = info.stats.autotune.unwrap();
    assert_eq!(tune.decision.state, TuneState::Cut);
    assert_eq!(tune.decision.reason, "p95 2310 ms > 1000 ms");
    assert_eq!(tune.changes.len(), 1);
    assert_eq!((tune.changes[0].from, tune.changes[0].to), (10, 7));
    // The ETA divides by the effective rate: 7 every 5 s.
    let (visitor, _) = h.join(&room).await;
    let line = h.store.status(&room, visitor).await.unwrap().line;
    assert_eq!(line.rate_per_s, Some(7.0 * 1000.0 / TICK_MS as f64));
    // The cut tick's own probe was handed out before the cut: its answer
    // is dropped, and the next tick decides nothing.
    sample(h, &room, 9_000, None).await;
    assert_eq!(tick(h, &room).await.2, None, "a sample of the rate before");
    let tune = h.store.room(&room).await.unwrap().stats.autotune.unwrap();
    assert_eq!(tune.decision.reason, "no sample since the last change");
    // Failures cut too, named by kind or status.
    sample(h, &room, 3, Some(Failure::Status(503))).await;
    assert_eq!(tick(h, &room).await.2, Some(Direction::Down));
    let tune = h.store.room(&room).await.unwrap().stats.autotune.unwrap();
    assert_eq!(tune.decision.reason, "errors 100% > 5% (503)");
    assert_eq!(effective(h, &room).await, 4);
    for _ in 0..6 {
        tick(h, &room).await;
        sample(h, &room, 5_000, Some(Failure::Timeout)).await;
    }
    assert_eq!(effective(h, &room).await, 2, "never below min_per_tick");
    // A probe handed out after the last cut at the floor.
    while tick(h, &room).await.2.is_some() {}
    tick(h, &room).await;
    // Three healthy samples raise by a tenth of the top (at least 1).
    for n in 0..3 {
        sample(h, &room, 100, None).await;
        let (_, _, tuned) = tick(h, &room).await;
        assert_eq!(tuned, (n == 2).then_some(Direction::Up), "sample {n}");
    }
    assert_eq!(effective(h, &room).await, 3);
    let tune = h.store.room(&room).await.unwrap().stats.autotune.unwrap();
    assert_eq!(tune.decision.state, TuneState::Raised);
    assert_eq!(tune.decision.samples, 3);
}

pub async fn the_rate_never_leaves_its_bounds_and_follows_admit_per_tick(h: &Harness) {
    let room = tuned_room(h, 10, r#""min_per_tick": 5, "max_per_tick": 12"#).await;
    for _ in 0..16 {
        tick(h, &room).await;
        sample(h, &room, 100, None).await;
    }
    assert_eq!(effective(h, &room).await, 12, "never above max_per_tick");
    for _ in 0..16 {
        tick(h, &room).await;
        sample(h, &room, 9_000, None).await;
    }
    assert_eq!(effective(h, &room).await, 5, "never below min_per_tick");
    h.patch(&room, r#"{"admit_per_tick": 9}"#).await;
    assert_eq!(
        effective(h, &room).await,
        9,
        "a new admit_per_tick is the rate"
    );
}

pub async fn a_dry_run_says_what_it_would_do_and_never_changes_the_rate(h: &Harness) {
    let room = tuned_room(h, 10, r#""dry_run": true"#).await;
    tick(h, &room).await;
    // A cut every other tick: each cut tick's probe is answered in vain.
    for n in 0..7 {
        sample(h, &room, 4_000, Some(Failure::Failed)).await;
        let (admitted, _, tuned) = tick(h, &room).await;
        assert_eq!(admitted, 10, "the rate stays");
        let cut = (n % 2 == 0).then_some(Direction::Down);
        assert_eq!(tuned, cut, "what it would have done, tick {n}");
    }
    let info = h.store.room(&room).await.unwrap();
    assert_eq!(info.stats.admit_per_tick_effective, 10);
    let tune = info.stats.autotune.unwrap();
    assert_eq!(tune.decision.state, TuneState::Cut);
    assert_eq!(tune.changes.last().unwrap().to, 1, "10, 7, 4, 2, 1");
}

pub async fn probes_go_to_a_line_at_most_once_a_second(h: &Harness) {
    let room = h.room("t", 1, None).await;
    h.patch(
        &room,
        r#"{"tick_ms": 100, "autotune": {"health_url": "https://shop.example/health"}}"#,
    )
    .await;
    h.clock.advance_ms(100);
    let idle = h.store.tick(&room).await.unwrap();
    assert!(
        idle.ran.is_none_or(|ran| ran.probe.is_none()),
        "no line, no probe"
    );
    h.patch(&room, r#"{"abandon_after_s": 86400}"#).await;
    for _ in 0..100 {
        h.store.join(&room, VisitorId::random()).await.unwrap();
    }
    let mut probes = 0;
    for _ in 0..30 {
        h.clock.advance_ms(100);
        if let Some(ran) = h.store.tick(&room).await.unwrap().ran {
            probes += u64::from(ran.probe.is_some());
        }
    }
    assert_eq!(probes, 3, "three seconds of ticks, one probe a second");
}

pub async fn the_report_keeps_the_rate_and_its_changes_after_the_close(h: &Harness) {
    let room = tuned_room(h, 10, r#""min_per_tick": 2"#).await;
    tick(h, &room).await;
    sample(h, &room, 2_000, None).await;
    tick(h, &room).await;
    tick(h, &room).await;
    sample(h, &room, 3, Some(Failure::Failed)).await;
    tick(h, &room).await;
    let report = |h: &Harness| {
        let room = room.clone();
        let store = h.store.clone();
        async move {
            store
                .run(waitroom::words::op::ReadReport {
                    room,
                    created_at: None,
                })
                .await
                .unwrap()
                .autotune
                .expect("the room has autotune")
        }
    };
    let open = report(h).await;
    assert_eq!(open.admit_per_tick_effective, 4);
    let moves: Vec<(u32, u32)> = open.changes.iter().map(|c| (c.from, c.to)).collect();
    assert_eq!(moves, [(10, 7), (7, 4)]);
    assert_eq!(open.changes[1].reason, "errors 100% > 5% (failed)");
    h.store
        .run(waitroom::words::op::CloseRoom {
            room: room.clone(),
            sale: None,
        })
        .await
        .unwrap();
    assert_eq!(report(h).await, open, "kept with the closed room's report");
}
