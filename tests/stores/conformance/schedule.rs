//! Scheduled changes (api.md, "Scheduled changes"), on every store: each
//! entry applies once, by the first operation at or after its time (a join
//! 1 ms after sees it), as an operator's change then; an operator's pause
//! holds the schedule; a replaced list keeps what was applied; an entry
//! that no longer applies is skipped with its error. The clock is driven.

use serde_json::{Value, json};
use waitroom::store::{StoreError, StoreExt};
use waitroom::words::clock::{Clock, Moment, rfc3339_ms};
use waitroom::words::{ConfigPatch, RoomId, VisitorId};

use super::Harness;

fn at(ms: u64) -> String {
    rfc3339_ms(ms)
}

/// A time as the API shows it.
fn as_shown(ms: u64) -> Value {
    serde_json::to_value(Moment(ms)).unwrap()
}

async fn schedule(h: &Harness, room: &RoomId, entries: Value) {
    let patch = ConfigPatch::from_json(json!({ "schedule": entries })).unwrap();
    h.store.configure(room, patch).await.unwrap();
}

async fn entries(h: &Harness, room: &RoomId) -> Vec<Value> {
    let info = h.store.room(room).await.unwrap();
    serde_json::to_value(&info.config.schedule)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn to(h: &Harness, ms: u64) {
    h.clock.advance_ms(ms - h.clock.now_ms());
}

pub async fn an_entry_applies_once_at_its_time_and_a_join_just_after_sees_it(h: &Harness) {
    let room = h.room("s", 1, None).await;
    let t0 = h.clock.now_ms();
    schedule(
        h,
        &room,
        json!([{"at": at(t0 + 10_000), "set": {"code_required": true, "notice": "Presale"}}]),
    )
    .await;
    let info = h.store.room(&room).await.unwrap();
    assert_eq!(info.stats.next_change_at.map(|m| m.0), Some(t0 + 10_000));
    let tick = h.store.tick(&room).await.unwrap();
    assert!(
        tick.next_due_in_ms <= 10_000,
        "the tick is due at the entry ({} ms)",
        tick.next_due_in_ms
    );
    assert_eq!(
        tick.change_in_ms,
        Some(10_000),
        "an idle room is asked then"
    );
    to(h, t0 + 9_999);
    h.store.join(&room, VisitorId::random()).await.unwrap();
    to(h, t0 + 10_001);
    // The first operation at or after the entry's time is this join.
    let refused = h.store.join(&room, VisitorId::random()).await.unwrap_err();
    assert!(matches!(refused, StoreError::CodeRequired), "{refused:?}");
    let info = h.store.room(&room).await.unwrap();
    assert!(info.config.code_required);
    assert_eq!(info.config.notice.as_deref(), Some("Presale"));
    assert_eq!(info.stats.next_change_at, None);
    let shown = entries(h, &room).await;
    assert_eq!(shown[0]["applied_at"], as_shown(t0 + 10_001));
    // Applied once: an operator's change since stays.
    h.patch(&room, r#"{"code_required": false}"#).await;
    to(h, t0 + 20_000);
    h.store.join(&room, VisitorId::random()).await.unwrap();
    assert!(!h.store.room(&room).await.unwrap().config.code_required);
}

pub async fn an_operators_pause_holds_the_schedule_until_they_unpause(h: &Harness) {
    let room = h.room("s", 1, None).await;
    let t0 = h.clock.now_ms();
    schedule(
        h,
        &room,
        json!([
            {"at": at(t0 + 10_000), "set": {"notice": "Opening soon"}},
            {"at": at(t0 + 20_000), "set": {"admit_per_tick": 7, "notice": "Open"}},
        ]),
    )
    .await;
    h.patch(&room, r#"{"paused": true}"#).await;
    assert_eq!(
        h.store.tick(&room).await.unwrap().change_in_ms,
        None,
        "held"
    );
    to(h, t0 + 30_000);
    h.store.join(&room, VisitorId::random()).await.unwrap();
    h.store.tick(&room).await.unwrap();
    let info = h.store.room(&room).await.unwrap();
    assert_eq!(info.config.notice, None, "held by the operator's pause");
    assert_eq!(info.stats.next_change_at.map(|m| m.0), Some(t0 + 10_000));
    h.patch(&room, r#"{"paused": false}"#).await;
    let info = h.store.room(&room).await.unwrap();
    assert_eq!(info.config.admit_per_tick, 7, "both applied, in order");
    assert_eq!(info.config.notice.as_deref(), Some("Open"));
    let shown = entries(h, &room).await;
    assert!(
        shown
            .iter()
            .all(|e| e["applied_at"] == as_shown(t0 + 30_000))
    );
}

pub async fn a_pause_the_schedule_sets_holds_nothing(h: &Harness) {
    let room = h.room("s", 1, None).await;
    let t0 = h.clock.now_ms();
    schedule(
        h,
        &room,
        json!([
            {"at": at(t0 + 10_000), "set": {"paused": true}},
            {"at": at(t0 + 20_000), "set": {"paused": false, "admit_per_tick": 3}},
        ]),
    )
    .await;
    to(h, t0 + 10_000);
    assert!(h.store.room(&room).await.unwrap().config.paused);
    to(h, t0 + 20_000);
    let info = h.store.room(&room).await.unwrap();
    assert!(!info.config.paused);
    assert_eq!(info.config.admit_per_tick, 3);
}

pub async fn an_entry_that_no_longer_applies_is_skipped_with_its_error(h: &Harness) {
    let room = h.room("s", 1, None).await;
    let t0 = h.clock.now_ms();
    schedule(
        h,
        &room,
        json!([
            {"at": at(t0 + 10_000), "set": {"session_idle_s": 300}},
            {"at": at(t0 + 10_000), "set": {"notice": "Sessions"}},
        ]),
    )
    .await;
    h.patch(&room, r#"{"pass_ttl_s": 120}"#).await;
    to(h, t0 + 10_000);
    let info = h.store.room(&room).await.unwrap();
    assert_eq!(info.config.session_idle_s, None);
    assert_eq!(
        info.config.notice.as_deref(),
        Some("Sessions"),
        "the next applies"
    );
    let shown = entries(h, &room).await;
    assert_eq!(shown[0]["applied_at"], Value::Null);
    assert!(
        shown[0]["error"].as_str().unwrap().contains("pass_ttl_s"),
        "{shown:?}"
    );
}

pub async fn a_replaced_list_keeps_what_was_applied_and_a_past_entry_applies_at_once(h: &Harness) {
    let room = h.room("s", 1, None).await;
    let t0 = h.clock.now_ms();
    let first = json!({"at": at(t0 + 1_000), "set": {"notice": "One"}});
    schedule(h, &room, json!([first])).await;
    to(h, t0 + 5_000);
    assert_eq!(
        entries(h, &room).await[0]["applied_at"],
        as_shown(t0 + 5_000)
    );
    to(h, t0 + 8_000);
    schedule(
        h,
        &room,
        json!([first, {"at": at(t0 + 2_000), "set": {"admit_per_tick": 4}}]),
    )
    .await;
    let info = h.store.room(&room).await.unwrap();
    assert_eq!(info.config.admit_per_tick, 4, "its time had passed");
    let shown = entries(h, &room).await;
    assert_eq!(shown[0]["applied_at"], as_shown(t0 + 5_000), "kept");
    assert_eq!(shown[1]["applied_at"], as_shown(t0 + 8_000));
    assert_eq!(
        info.config.notice.as_deref(),
        Some("One"),
        "not applied again"
    );
}

pub async fn an_entry_that_sets_the_opening_commits_the_draw_when_set(h: &Harness) {
    let room = h.room("s", 1, None).await;
    let t0 = h.clock.now_ms();
    schedule(
        h,
        &room,
        json!([{"at": at(t0 + 10_000), "set": {"opens_at": at(t0 + 60_000)}}]),
    )
    .await;
    let draw = h.store.room(&room).await.unwrap().draw.expect("committed");
    assert_eq!(draw.opens_at, Moment(t0 + 60_000));
    assert_eq!(draw.seed, None, "the seed waits for the opening");
    assert!(!draw.commitment.is_empty());
    to(h, t0 + 10_000);
    let (_, state) = h.join(&room).await;
    assert!(
        matches!(state, waitroom::words::PlaceState::PreQueue { .. }),
        "{state:?}"
    );
    to(h, t0 + 60_000);
    h.store.tick(&room).await.unwrap();
    let opened = h.store.room(&room).await.unwrap().draw.unwrap();
    assert_eq!(opened.commitment, draw.commitment, "the one committed to");
    let seed: waitroom::words::draw::DrawSeed = opened.seed.unwrap().parse().unwrap();
    assert_eq!(seed.commitment(), draw.commitment);
}
