//! Sessions (api.md, "Sessions: a pass that lasts while the visitor is
//! active"), on every store: a pass lasts while verify, gate or sale calls
//! accept it (`arrive`), lapses `session_idle_s` (and at most a tenth more)
//! after the last, never sooner, and never outlives `pass_ttl_s`; the cap
//! counts a lapsed pass until the sweep frees it, and nothing revives it.
//! Each scenario's times are exact: the clock is driven.

use waitroom::store::{JoinOptions, StoreExt};
use waitroom::words::clock::Clock;
use waitroom::words::op::ReadReport;
use waitroom::words::{PlaceState, RoomId, VisitorId};

use super::{Harness, is_admitted, position};

/// The room's visitors pass straight through (one a tick, `cap` at most)
/// and their passes last 600 s at most, their sessions `idle_s`.
async fn room(h: &Harness, cap: Option<u64>, idle_s: u64) -> RoomId {
    let room = h.room("r", 1, cap).await;
    h.patch(
        &room,
        &format!(r#"{{"pass_ttl_s": 600, "session_idle_s": {idle_s}, "abandon_after_s": 3600}}"#),
    )
    .await;
    room
}

/// Moves the clock on to `ms` after `t0`.
fn at(h: &Harness, t0: u64, ms: u64) {
    h.clock.advance_ms(t0 + ms - h.clock.now_ms());
}

fn lapsed(state: PlaceState) -> bool {
    matches!(state, PlaceState::Lapsed { .. })
}

async fn lapses(h: &Harness, room: &RoomId) -> u64 {
    h.store.room(room).await.unwrap().stats.sessions_lapsed
}

async fn reported_lapses(h: &Harness, room: &RoomId) -> u64 {
    let report = h
        .store
        .run(ReadReport {
            room: room.clone(),
            created_at: None,
        })
        .await
        .unwrap();
    report.counts.sessions_lapsed
}

fn expiry(state: PlaceState) -> u64 {
    match state {
        PlaceState::Admitted { expires_at, .. } => expires_at,
        other => panic!("expected admitted, got {other:?}"),
    }
}

pub async fn a_session_lasts_while_its_pass_is_used_and_lapses_once_idle(h: &Harness) {
    let room = room(h, Some(1), 60).await;
    let t0 = h.clock.now_ms();
    let (holder, state) = h.join(&room).await;
    let expires_at = expiry(state);
    assert_eq!(expires_at, t0 + 600_000, "the hard limit is pass_ttl_s");
    let (next, _) = h.join(&room).await;
    assert_eq!(position(h.state(&room, next).await), 1, "the cap holds");

    // Used every 30 s for five minutes: far past session_idle_s, still on.
    for step in 1..=10 {
        at(h, t0, step * 30_000);
        let state = h.arrive(&room, holder).await;
        assert_eq!(expiry(state), expires_at, "the pass is the same pass");
    }
    // Idle from 300 s: on for at least 60 s, and at most a tenth more.
    at(h, t0, 300_000 + 65_999);
    assert!(
        is_admitted(h.state(&room, holder).await),
        "a status read renews nothing, and 66 s have not passed"
    );
    let tick = h.store.tick(&room).await.unwrap().ran;
    assert_eq!(tick.map_or(0, |t| t.admitted), 0, "the slot is still held");
    at(h, t0, 300_000 + 66_000);
    assert_eq!(
        h.state(&room, holder).await,
        PlaceState::Lapsed { expires_at },
        "lapsed: told expired, with the pass's own expiry"
    );
    assert!(
        lapsed(h.arrive(&room, holder).await),
        "a lapsed session is not renewed"
    );
    assert_eq!(
        h.tick(&room).await,
        1,
        "its slot went to the next (at 371 s)"
    );
    assert!(is_admitted(h.state(&room, next).await));
    assert_eq!(lapses(h, &room).await, 1);
    assert_eq!(reported_lapses(h, &room).await, 1, "the report counts it");
    assert_eq!(h.store.room(&room).await.unwrap().stats.active, 1);

    // Told so until the pass's expiry, as any expired pass after it.
    at(h, t0, 599_999);
    assert!(lapsed(h.state(&room, holder).await));
    at(h, t0, 600_000);
    assert_eq!(h.state(&room, holder).await, PlaceState::Expired);
    assert_eq!(
        lapses(h, &room).await,
        2,
        "counted once; and the next, admitted at 371 s and never used, lapsed at 431 s"
    );
}

/// A call that finds at least `session_idle_s` left writes nothing: the
/// session then ends up to a tenth of it later than the idle time after
/// that call's, never sooner.
pub async fn a_renewal_writes_at_most_once_a_tenth_of_the_idle_time(h: &Harness) {
    let room = room(h, None, 60).await;
    let t0 = h.clock.now_ms();
    let (holder, _) = h.join(&room).await;
    at(h, t0, 1_000);
    assert!(
        is_admitted(h.arrive(&room, holder).await),
        "renewed to 67 s"
    );
    at(h, t0, 6_000);
    assert!(
        is_admitted(h.arrive(&room, holder).await),
        "61 s left: nothing written"
    );
    at(h, t0, 66_999);
    assert!(is_admitted(h.state(&room, holder).await));
    at(h, t0, 67_000);
    assert!(
        lapsed(h.state(&room, holder).await),
        "61 s after the last call, which wrote nothing"
    );
}

pub async fn an_unused_pass_lapses_from_its_admission_and_a_bypassed_one_too(h: &Harness) {
    let room = room(h, Some(1), 30).await;
    h.patch(&room, r#"{"bypass_networks": ["10.0.0.0/8"]}"#)
        .await;
    let t0 = h.clock.now_ms();
    let (unused, state) = h.join(&room).await;
    assert!(is_admitted(state));
    let staff = VisitorId::random();
    let options = JoinOptions {
        address: Some("10.1.2.3".parse().unwrap()),
        ..JoinOptions::default()
    };
    let place = h.store.join_with(&room, staff, &options).await.unwrap();
    assert!(is_admitted(place.state));
    assert_eq!(h.store.room(&room).await.unwrap().stats.bypassed_active, 1);

    at(h, t0, 29_999);
    assert!(is_admitted(h.state(&room, unused).await));
    assert!(is_admitted(h.state(&room, staff).await));
    at(h, t0, 30_000);
    assert!(
        lapsed(h.state(&room, unused).await),
        "the idle clock starts at the admission"
    );
    assert!(
        lapsed(h.state(&room, staff).await),
        "bypassed passes lapse too"
    );
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!(
        (stats.sessions_lapsed, stats.active, stats.bypassed_active),
        (2, 0, 0)
    );
}

pub async fn a_shorter_arrival_grace_reclaims_a_no_show_before_it_lapses(h: &Harness) {
    let room = room(h, Some(1), 60).await;
    h.patch(&room, r#"{"arrival_grace_s": 30}"#).await;
    let t0 = h.clock.now_ms();
    let (never, _) = h.join(&room).await;
    at(h, t0, 30_000);
    let report = h.store.tick(&room).await.unwrap().ran.unwrap();
    assert_eq!(report.no_shows, 1);
    assert_eq!(h.state(&room, never).await, PlaceState::Left);
    at(h, t0, 61_000);
    h.store.tick(&room).await.unwrap();
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!(
        (stats.no_shows, stats.sessions_lapsed),
        (1, 0),
        "a no-show, not a lapse"
    );
}

pub async fn the_hard_limit_holds_however_active_the_visitor(h: &Harness) {
    let room = room(h, None, 60).await;
    let t0 = h.clock.now_ms();
    let (holder, _) = h.join(&room).await;
    for step in 1..60 {
        at(h, t0, step * 10_000);
        assert!(is_admitted(h.arrive(&room, holder).await));
    }
    at(h, t0, 599_999);
    assert!(is_admitted(h.arrive(&room, holder).await));
    at(h, t0, 600_000);
    assert_eq!(
        h.arrive(&room, holder).await,
        PlaceState::Expired,
        "pass_ttl_s ends it"
    );
    assert_eq!(lapses(h, &room).await, 0, "an expiry is no lapse");
}

/// The cap counts a lapsed pass until the sweep frees its slot; from the
/// lapse on, no call renews it, so once another holds the slot, nothing
/// puts a second holder over the cap.
pub async fn a_lapsed_session_frees_its_slot_and_no_renewal_revives_it(h: &Harness) {
    let room = room(h, Some(1), 60).await;
    let t0 = h.clock.now_ms();
    let (holder, _) = h.join(&room).await;
    let (next, _) = h.join(&room).await;
    at(h, t0, 60_000);
    assert!(
        lapsed(h.arrive(&room, holder).await),
        "at the lapse, not renewed"
    );
    assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().admitted, 1);
    assert!(is_admitted(h.state(&room, next).await));
    for _ in 0..3 {
        assert!(lapsed(h.arrive(&room, holder).await));
    }
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!((stats.active, stats.sessions_lapsed), (1, 1));
}

/// A pass of another admission of the same visitor (a stale copy, an
/// `exp` that is not the one they hold) is refused by the caller, and
/// renews nothing here.
pub async fn another_admissions_pass_renews_nothing(h: &Harness) {
    let room = room(h, None, 60).await;
    let t0 = h.clock.now_ms();
    let (holder, state) = h.join(&room).await;
    let exp = expiry(state) / 1000;
    at(h, t0, 30_000);
    let place = h.store.arrive(&room, holder, exp - 1).await.unwrap();
    assert!(is_admitted(place.state), "the place is read all the same");
    at(h, t0, 60_000);
    assert!(lapsed(h.state(&room, holder).await));
}

/// api.md's `session_idle_s` changed live: on, off, lowered and raised.
/// Off, every pass lasts until its expiry (a session's lapse is no longer
/// kept); on, a pass admitted before runs until its first call, whose
/// session starts then; lowered or raised, each pass's next call moves its
/// lapse, and an idle pass keeps the lapse it had.
pub async fn sessions_change_live_on_and_off_up_and_down(h: &Harness) {
    let room = h.room("r", 10, None).await;
    h.patch(&room, r#"{"pass_ttl_s": 3600, "abandon_after_s": 3600}"#)
        .await;
    let t0 = h.clock.now_ms();
    let (before, _) = h.join(&room).await;
    at(h, t0, 10_000);
    h.patch(&room, r#"{"session_idle_s": 60}"#).await;
    at(h, t0, 100_000);
    assert!(
        is_admitted(h.state(&room, before).await),
        "admitted before: no session yet"
    );
    assert!(
        is_admitted(h.arrive(&room, before).await),
        "its session starts at 100 s"
    );
    at(h, t0, 165_999);
    assert!(is_admitted(h.state(&room, before).await));
    at(h, t0, 166_000);
    assert!(lapsed(h.state(&room, before).await));

    // Off: a session that would lapse at 236 s lasts until its expiry.
    let (kept, _) = h.join(&room).await;
    at(h, t0, 170_000);
    h.arrive(&room, kept).await;
    h.patch(&room, r#"{"session_idle_s": null}"#).await;
    at(h, t0, 1_000_000);
    assert!(is_admitted(h.state(&room, kept).await), "sessions off");
    assert!(is_admitted(h.arrive(&room, kept).await));

    // Lowered from 600 s to 60 s: the next call brings the lapse in.
    h.patch(&room, r#"{"session_idle_s": 600}"#).await;
    let t1 = h.clock.now_ms();
    let (lowered, _) = h.join(&room).await;
    let (idle, _) = h.join(&room).await;
    at(h, t1, 1_000);
    h.arrive(&room, lowered).await; // lapse at 661 s
    h.patch(&room, r#"{"session_idle_s": 60}"#).await;
    at(h, t1, 10_000);
    assert!(
        is_admitted(h.arrive(&room, lowered).await),
        "brought in to 76 s"
    );
    at(h, t1, 75_999);
    assert!(is_admitted(h.state(&room, lowered).await));
    at(h, t1, 76_000);
    assert!(lapsed(h.state(&room, lowered).await));
    assert!(
        is_admitted(h.state(&room, idle).await),
        "an idle pass keeps the lapse it had (600 s)"
    );

    // Raised from 60 s to 600 s: the next call moves the lapse out.
    let (raised, _) = h.join(&room).await;
    let t2 = h.clock.now_ms();
    h.patch(&room, r#"{"session_idle_s": 600}"#).await;
    at(h, t2, 50_000);
    assert!(is_admitted(h.arrive(&room, raised).await));
    at(h, t2, 649_999);
    assert!(is_admitted(h.state(&room, raised).await));
    assert!(
        lapsed(h.state(&room, idle).await),
        "never used: lapsed 600 s after its admission"
    );
}

/// A mass lapse is swept a slice a call, and the cap counts each lapsed
/// pass until then; but no pass the sweep has not reached yet is taken
/// for a live one: every place read after the first slice says lapsed.
pub async fn a_lapse_the_sweep_has_not_reached_is_told_all_the_same(h: &Harness) {
    use waitroom::words::constants::SWEEP_SLICE;
    let room = h.room("r", 100_000, None).await;
    h.patch(
        &room,
        r#"{"pass_ttl_s": 600, "session_idle_s": 30, "abandon_after_s": 3600}"#,
    )
    .await;
    let t0 = h.clock.now_ms();
    let mut holders = Vec::new();
    for _ in 0..2 * SWEEP_SLICE {
        let (holder, state) = h.join(&room).await;
        assert!(is_admitted(state));
        holders.push(holder);
    }
    at(h, t0, 30_000);
    // One call sweeps one slice; it reads every place after it.
    let places = h.store.places(&room, &holders).await.unwrap();
    let live = places.iter().filter(|p| !lapsed(p.state)).count();
    assert_eq!(live, 0, "every session lapsed, swept or not");
    assert_eq!(
        h.store.room(&room).await.unwrap().stats.active,
        0,
        "the next call swept the rest"
    );
    assert_eq!(lapses(h, &room).await, 2 * SWEEP_SLICE);
}
