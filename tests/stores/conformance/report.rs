//! After the drop: the room's report, on every store. Each scenario's
//! answer is known: the counts exactly, the waits to the millisecond (the
//! clock is driven), the rows by the minute.

use waitroom::store::{JoinOptions, PassTakenBack, StoreError, StoreExt};
use waitroom::words::clock::{Clock, Moment};
use waitroom::words::join_limit::JoinLimit;
use waitroom::words::op::{ListReports, ReadReport};
use waitroom::words::report::{Report, ReportEntry, TurnedAway};
use waitroom::words::{RoomId, VisitorId};

use super::{Harness, TICK_MS, is_admitted};

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 3_600_000;

async fn report(h: &Harness, room: &RoomId) -> Report {
    *h.store
        .run(ReadReport {
            room: room.clone(),
            created_at: None,
        })
        .await
        .unwrap()
}

async fn reports(h: &Harness) -> Vec<ReportEntry> {
    h.store.run(ListReports {}).await.unwrap()
}

/// Two pass straight through, five join the line, one is turned away by
/// the address's join limit, one leaves the line; two ticks admit four
/// (waits of 5 s and 10 s); the origin takes a pass back and a holder
/// leaves.
async fn known_drop(h: &Harness) -> RoomId {
    let room = h.room("r", 2, None).await;
    h.patch(&room, r#"{"pass_ttl_s": 3600, "abandon_after_s": 3600}"#)
        .await;
    let (a, state) = h.join(&room).await;
    assert!(is_admitted(state));
    assert!(is_admitted(h.join(&room).await.1));
    let mut line = Vec::new();
    for _ in 0..4 {
        line.push(h.join(&room).await.0);
    }
    let limited = JoinOptions {
        limit: Some(JoinLimit {
            client: "203.0.113.9".into(),
            per_minute: 1,
        }),
        ..JoinOptions::default()
    };
    h.store
        .join_with(&room, VisitorId::random(), &limited)
        .await
        .unwrap();
    let refused = h
        .store
        .join_with(&room, VisitorId::random(), &limited)
        .await;
    assert!(
        matches!(refused, Err(StoreError::RateLimited { .. })),
        "{refused:?}"
    );
    h.store.leave(&room, line[3]).await.unwrap();
    assert_eq!(h.tick(&room).await, 2);
    assert_eq!(h.tick(&room).await, 2);
    assert!(
        h.store
            .revoke_pass(&room, line[0], None, PassTakenBack::Revoked)
            .await
            .unwrap()
    );
    h.store.leave(&room, a).await.unwrap();
    room
}

/// A pass its holder gives up (`leave` with the pass) counts as left, as
/// a place given up does; one the site or an operator takes back, as
/// revoked.
pub async fn a_pass_given_up_counts_as_left_and_one_taken_back_as_revoked(h: &Harness) {
    let room = h.room("r", 2, None).await;
    let (holder, state) = h.join(&room).await;
    assert!(is_admitted(state));
    let (revoked, state) = h.join(&room).await;
    assert!(is_admitted(state));
    for (visitor, why) in [
        (holder, PassTakenBack::GivenUp),
        (revoked, PassTakenBack::Revoked),
    ] {
        assert!(
            h.store
                .revoke_pass(&room, visitor, None, why)
                .await
                .unwrap()
        );
    }
    let r = report(h, &room).await;
    assert_eq!((r.counts.left, r.counts.revoked), (1, 1));
}

pub async fn the_report_counts_a_known_drop_exactly(h: &Harness) {
    let made_at = h.clock.now_ms();
    let room = known_drop(h).await;
    let r = report(h, &room).await;
    assert_eq!(r.room, "r");
    assert_eq!((r.created_at, r.closed_at), (Moment(made_at), None));
    assert_eq!(r.from, Moment(made_at));
    assert_eq!(r.to, Moment(made_at + 2 * TICK_MS));
    assert_eq!(
        (
            r.counts.arrivals,
            r.counts.admitted,
            r.counts.passed_through,
            r.counts.bypassed
        ),
        (7, 4, 2, 0)
    );
    assert_eq!(
        (
            r.counts.left,
            r.counts.abandoned,
            r.counts.no_shows,
            r.counts.revoked
        ),
        (2, 0, 0, 1)
    );
    assert_eq!(r.counts.sessions_lapsed, 0);
    assert_eq!(
        r.counts.turned_away.into_iter().collect::<Vec<_>>(),
        [(TurnedAway::RateLimited, 1)]
    );
    assert_eq!(r.counts.peak_waiting, 5);
    assert_eq!(r.peak_joins_per_minute, 7);
    let w = &r.wait_seconds;
    let cumulative: Vec<(&str, u64)> = w.buckets.iter().map(|b| (b.le.as_str(), b.count)).collect();
    assert_eq!(
        &cumulative[..5],
        [("1", 0), ("2", 0), ("5", 2), ("10", 4), ("30", 4)]
    );
    assert_eq!(cumulative.last(), Some(&("+Inf", 4)));
    assert_eq!((w.p50, w.p90, w.max), (Some(5.0), Some(9.0), Some(10.0)));
    assert_eq!(r.minutes.len(), 1, "{:?}", r.minutes);
    let m = &r.minutes[0];
    assert_eq!(m.at, Moment(made_at - made_at % MINUTE_MS));
    assert_eq!((m.span_s, m.arrivals, m.admitted), (60, 7, 4));
    assert_eq!(
        (m.waiting, m.active),
        (0, 6),
        "as the last tick left the room"
    );
    assert_eq!((m.wait_p50, m.wait_p90), (Some(5.0), Some(9.0)));
    assert!(r.draw.is_none() && r.sale.is_none());
}

pub async fn a_closed_rooms_report_is_kept_and_a_room_made_again_starts_its_own(h: &Harness) {
    let first_made = h.clock.now_ms();
    let room = known_drop(h).await;
    h.clock.advance_ms(1_000);
    h.store.close_room(&room).await.unwrap();
    let closed_at = h.clock.now_ms();
    let kept = report(h, &room).await;
    assert_eq!(kept.closed_at, Some(Moment(closed_at)));
    assert_eq!(kept.to, Moment(closed_at));
    assert_eq!(
        (kept.counts.arrivals, kept.counts.admitted, kept.counts.left),
        (7, 4, 2)
    );
    assert_eq!(kept.counts.peak_waiting, 5);
    assert_eq!(
        reports(h).await,
        [ReportEntry {
            room: "r".into(),
            created_at: Moment(first_made),
            closed_at: Some(Moment(closed_at)),
        }]
    );

    h.clock.advance_ms(1_000);
    let second_made = h.clock.now_ms();
    h.room("r", 1, None).await;
    h.join(&room).await;
    let now = report(h, &room).await;
    assert_eq!(
        (
            now.created_at,
            now.counts.arrivals,
            now.counts.passed_through
        ),
        (Moment(second_made), 1, 1)
    );
    let earlier = h
        .store
        .run(ReadReport {
            room: room.clone(),
            created_at: Some(first_made),
        })
        .await
        .unwrap();
    assert_eq!(
        (earlier.counts.arrivals, earlier.closed_at),
        (7, Some(Moment(closed_at)))
    );
    let listed = reports(h).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(
        listed[1].closed_at, None,
        "the open room's, after the closed one"
    );

    let unknown_time = h
        .store
        .run(ReadReport {
            room: room.clone(),
            created_at: Some(first_made + 1),
        })
        .await;
    assert!(
        matches!(unknown_time, Err(StoreError::ReportNotFound(_))),
        "{unknown_time:?}"
    );
    let unknown_room = h
        .store
        .run(ReadReport {
            room: RoomId::parse("nowhere").unwrap(),
            created_at: None,
        })
        .await;
    assert!(
        matches!(unknown_room, Err(StoreError::RoomNotFound(_))),
        "{unknown_room:?}"
    );
}

pub async fn a_pre_queue_entrants_wait_runs_from_the_opening(h: &Harness) {
    let room = h.room("r", 5, None).await;
    let opens_at = h.clock.now_ms() + 60_000;
    let at = waitroom::words::clock::rfc3339(opens_at);
    h.patch(
        &room,
        &format!(r#"{{"opens_at": "{at}", "abandon_after_s": 3600}}"#),
    )
    .await;
    let (early, _) = h.join(&room).await;
    h.clock.advance_ms(60_000 + 3_000);
    h.store.touch(&room, &[early]).await.unwrap();
    let tick = h.store.tick(&room).await.unwrap();
    assert_eq!(
        tick.ran.as_ref().map(|r| r.waits_ms.clone()),
        Some(vec![3_000])
    );
    let r = report(h, &room).await;
    assert_eq!((r.counts.arrivals, r.counts.admitted), (1, 1));
    assert_eq!(
        r.wait_seconds.max,
        Some(3.0),
        "from the opening, not the join"
    );
    assert_eq!(r.from, Moment(opens_at));
    let draw = r.draw.expect("the draw's audit");
    assert_eq!(draw.entrants, 1);
    assert!(draw.seed.is_some(), "revealed at the opening");
}

pub async fn rows_are_a_minute_each_from_the_first_tick_to_the_next_rows(h: &Harness) {
    let made_at = h.clock.now_ms();
    let room = h.room("r", 1, None).await;
    h.patch(&room, r#"{"paused": true, "abandon_after_s": 3600}"#)
        .await;
    for _ in 0..3 {
        h.join(&room).await;
    }
    h.tick(&room).await;
    // The next minute's first tick closes the first row; the join after it
    // is the second row's.
    h.clock.advance_ms(MINUTE_MS);
    h.tick(&room).await;
    h.join(&room).await;
    h.tick(&room).await;
    let r = report(h, &room).await;
    let rows: Vec<(Moment, u64, u64)> = r
        .minutes
        .iter()
        .map(|m| (m.at, m.arrivals, m.waiting))
        .collect();
    let first = made_at - made_at % MINUTE_MS;
    assert_eq!(
        rows,
        [(Moment(first), 3, 3), (Moment(first + MINUTE_MS), 1, 4)]
    );
    assert_eq!(r.peak_joins_per_minute, 3);
    assert_eq!(r.counts.peak_waiting, 4);
    let csv = r.minutes_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "at,span_s,arrivals,admitted,waiting,active,wait_p50,wait_p90"
    );
    assert_eq!(lines.len(), 3);
    assert!(lines[1].ends_with(",60,3,0,3,0,,"), "{}", lines[1]);
}

pub async fn rows_older_than_a_week_fold_into_hours(h: &Harness) {
    let room = h.room("r", 1, None).await;
    h.patch(&room, r#"{"paused": true, "abandon_after_s": 3600}"#)
        .await;
    let (waiting, _) = h.join(&room).await;
    // A tick an hour for eight days: a row each.
    for _ in 0..192 {
        h.clock.advance_ms(HOUR_MS);
        h.store.touch(&room, &[waiting]).await.unwrap();
        assert!(h.store.tick(&room).await.unwrap().ran.is_some());
    }
    let r = report(h, &room).await;
    let hours = r.minutes.iter().filter(|m| m.span_s == 3_600).count();
    let minutes = r.minutes.iter().filter(|m| m.span_s == 60).count();
    assert_eq!(
        (hours, minutes),
        (24, 168),
        "one hour folded a roll, past a week"
    );
    assert!(
        r.minutes.windows(2).all(|w| w[0].at < w[1].at),
        "oldest first"
    );
    assert_eq!(r.minutes.iter().map(|m| m.arrivals).sum::<u64>(), 1);
    assert!(r.minutes.iter().all(|m| m.waiting == 1));
}
