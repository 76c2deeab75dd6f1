//! Scheduled rooms: the pre-queue, the opening and the draw, on every store.

use std::time::Duration;

use waitroom::store::StoreError;
use waitroom::words::clock::Clock;
use waitroom::words::draw::{DrawKey, DrawSeed, EntryId, draw_key};
use waitroom::words::{PlaceState, RoomEvent, RoomId, StoreEvent};

use super::{Harness, TICK_MS, is_admitted, position};
use waitroom::store::StoreExt;

/// The opening, a minute after the harness's start.
const OPENS_IN_MS: u64 = 60_000;

async fn scheduled(h: &Harness, per_tick: u32) -> RoomId {
    let room = h.room("r", per_tick, None).await;
    let opens_at = waitroom::words::clock::rfc3339(h.clock.now_ms() + OPENS_IN_MS);
    h.patch(&room, &format!(r#"{{"opens_at": "{opens_at}"}}"#))
        .await;
    room
}

fn entry_of(state: PlaceState) -> EntryId {
    match state {
        PlaceState::PreQueue { entry } => entry,
        other => panic!("expected the pre-queue, got {other:?}"),
    }
}

/// Moves the clock to the opening (and past it by `past_ms`).
fn open(h: &Harness, since_start_ms: u64, past_ms: u64) {
    h.clock.advance_ms(OPENS_IN_MS - since_start_ms + past_ms);
}

/// The published recipe: entrants sorted by HMAC-SHA256(seed, entry).
fn drawn_order(seed: &str, entries: &[EntryId]) -> Vec<EntryId> {
    let seed: DrawSeed = seed.parse().expect("64 hex characters");
    let mut keyed: Vec<(DrawKey, EntryId)> = entries.iter().map(|e| (seed.key_of(e), *e)).collect();
    keyed.sort();
    keyed.into_iter().map(|(_, e)| e).collect()
}

pub async fn before_the_opening_everyone_waits_unordered_and_nobody_is_admitted(h: &Harness) {
    let room = scheduled(h, 2).await;
    let draw = h.store.draw(&room).await.unwrap();
    assert_eq!((draw.seed, draw.entrants, draw.drawn_at), (None, 0, None));
    let mut entries = Vec::new();
    for _ in 0..6 {
        // A full bucket and an empty line: still no pass-through.
        let (_, state) = h.join(&room).await;
        entries.push(entry_of(state));
    }
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!((stats.pre_queue, stats.waiting, stats.active), (6, 6, 0));
    assert_eq!(
        h.tick(&room).await,
        0,
        "nobody is admitted before the opening"
    );
    h.patch(&room, r#"{"queue_method": "passthrough"}"#).await;
    let (_, passing) = h.join(&room).await;
    entries.push(entry_of(passing));
    assert_eq!(h.tick(&room).await, 0, "pass-through included");
    let draw = h.store.draw(&room).await.unwrap();
    assert_eq!(draw.entrants, 7);
    let mut unique = entries.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 7, "every entrant has an entry of their own");
}

pub async fn the_opening_reveals_the_order_fixed_at_each_join(h: &Harness) {
    let room = scheduled(h, 2).await;
    h.patch(&room, r#"{"abandon_after_s": 86400}"#).await;
    let commitment = h.store.draw(&room).await.unwrap().commitment;
    let mut entrants = Vec::new();
    for _ in 0..8 {
        let (visitor, state) = h.join(&room).await;
        entrants.push((visitor, entry_of(state)));
        h.clock.advance_ms(1_000);
    }
    h.store.watch(&room).await.unwrap(); // a cluster's sharded channel
    let mut events = h.store.subscribe();
    open(h, 8_000, 0);
    // At the opening the order exists at once, before any tick.
    let draw = h.store.draw(&room).await.unwrap();
    let seed = draw.seed.clone().expect("revealed at the opening");
    assert_eq!(draw.commitment, commitment, "the commitment never changed");
    assert_eq!(seed.parse::<DrawSeed>().unwrap().commitment(), commitment);
    assert_eq!(draw.drawn_at, Some(draw.opens_at));
    let order = drawn_order(&seed, &entrants.iter().map(|(_, e)| *e).collect::<Vec<_>>());
    for (visitor, entry) in &entrants {
        let expected = order.iter().position(|e| e == entry).unwrap() as u64 + 1;
        let state = h.state(&room, *visitor).await;
        assert_eq!(position(state), expected, "entry {entry}");
        match state {
            PlaceState::Waiting { order, .. } => assert_eq!(order.entry(), Some(*entry)),
            other => panic!("{other:?}"),
        }
    }
    // The tick at the opening announces it, then admits the drawn head.
    let tick = h.store.tick(&room).await.unwrap();
    assert_eq!(tick.ran.map(|r| r.admitted), Some(2));
    // The opening's event comes before any tick's.
    let drawn = loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the opening is published")
            .unwrap();
        match event {
            StoreEvent::Room(RoomEvent::Drawn { line, .. }) => break line,
            StoreEvent::Room(RoomEvent::Tick { .. }) => panic!("a tick before the opening's event"),
            _ => {}
        }
    };
    assert_eq!(drawn.waiting, 8);
    for (visitor, entry) in &entrants {
        let first_two = order[..2].contains(entry);
        assert_eq!(is_admitted(h.state(&room, *visitor).await), first_two);
    }
    // After the opening, arrivals line up behind the drawn, in join order.
    let (late, state) = h.join(&room).await;
    assert_eq!(position(state), 7);
    assert_eq!(h.store.room(&room).await.unwrap().stats.pre_queue, 0);
    h.clock.advance_ms(TICK_MS);
    assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().admitted, 2);
    for (visitor, entry) in &entrants {
        let first_four = order[..4].contains(entry);
        assert_eq!(is_admitted(h.state(&room, *visitor).await), first_four);
    }
    assert_eq!(position(h.state(&room, late).await), 5);
}

pub async fn the_draw_lists_every_entrant_in_drawn_order(h: &Harness) {
    let plain = h.room("plain", 1, None).await;
    assert!(matches!(
        h.store.draw(&plain).await,
        Err(StoreError::NoDraw)
    ));
    let room = scheduled(h, 1).await;
    let mut entrants = Vec::new();
    for _ in 0..7 {
        let (visitor, state) = h.join(&room).await;
        entrants.push((visitor, entry_of(state)));
    }
    assert!(matches!(
        h.store.draw_entries(&room, None, 100).await,
        Err(StoreError::NotDrawn)
    ));
    // One leaves before the opening (no entrant), one after (still one).
    h.store.leave(&room, entrants[0].0).await.unwrap();
    open(h, 0, 1);
    h.store.leave(&room, entrants[1].0).await.unwrap();
    let draw = h.store.draw(&room).await.unwrap();
    assert_eq!(draw.entrants, 6);
    let expected = drawn_order(
        draw.seed.as_deref().unwrap(),
        &entrants[1..].iter().map(|(_, e)| *e).collect::<Vec<_>>(),
    );
    // Read two at a time, as the HTTP stream pages.
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = h.store.draw_entries(&room, after, 2).await.unwrap();
        let Some(last) = page.last().copied() else {
            break;
        };
        listed.extend(page.iter().map(|(_, entry)| *entry));
        after = Some(last);
    }
    assert_eq!(listed, expected);
    // Every listed key is the published HMAC of its entry.
    let seed: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&draw.seed.as_ref().unwrap()[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    for (key, entry) in h.store.draw_entries(&room, None, 100).await.unwrap() {
        assert_eq!(key, draw_key(&seed, entry.to_string().as_bytes()));
    }
}

pub async fn an_opening_stays_once_passed_and_draws_even_while_paused(h: &Harness) {
    let room = scheduled(h, 1).await;
    h.patch(&room, r#"{"abandon_after_s": 86400}"#).await;
    let commitment = h.store.draw(&room).await.unwrap().commitment;
    let (visitor, _) = h.join(&room).await;
    // Moved before the opening: the commitment stays.
    let later = waitroom::words::clock::rfc3339(h.clock.now_ms() + 2 * OPENS_IN_MS);
    h.patch(
        &room,
        &format!(r#"{{"opens_at": "{later}", "paused": true}}"#),
    )
    .await;
    assert_eq!(h.store.draw(&room).await.unwrap().commitment, commitment);
    let removal: waitroom::words::ConfigPatch =
        serde_json::from_str(r#"{"opens_at": null}"#).unwrap();
    assert!(
        matches!(
            h.store.configure(&room, removal.clone()).await,
            Err(StoreError::InvalidConfig(_))
        ),
        "a pre-queue keeps its opening"
    );
    h.clock.advance_ms(2 * OPENS_IN_MS);
    assert!(h.store.tick(&room).await.unwrap().ran.is_some());
    assert_eq!(
        position(h.state(&room, visitor).await),
        1,
        "drawn while paused"
    );
    assert!(
        matches!(
            h.store.configure(&room, removal).await,
            Err(StoreError::InvalidConfig(_))
        ),
        "the opening has passed"
    );
    assert_eq!(h.tick(&room).await, 0, "paused: no admission");
}

/// An opening set on a room whose line holds people would put the draw's
/// entrants, who came later, ahead of them: refused, the line as it was.
pub async fn a_room_whose_line_holds_people_gets_no_opening(h: &Harness) {
    let room = h.room("r", 1, None).await;
    let mut waiting = Vec::new();
    for _ in 0..4 {
        let (visitor, state) = h.join(&room).await;
        if !is_admitted(state) {
            waiting.push(visitor);
        }
    }
    assert!(waiting.len() >= 3, "a line formed");
    let opens_at = waitroom::words::clock::rfc3339(h.clock.now_ms() + OPENS_IN_MS);
    let opening: waitroom::words::ConfigPatch =
        serde_json::from_str(&format!(r#"{{"opens_at": "{opens_at}"}}"#)).unwrap();
    match h.store.configure(&room, opening).await {
        Err(StoreError::InvalidConfig(error)) => {
            assert!(error.to_string().contains("wait in the line"), "{error}")
        }
        other => panic!("an opening was set over a line: {other:?}"),
    }
    let info = h.store.room(&room).await.unwrap();
    assert_eq!((info.config.opens_at, info.stats.pre_queue), (None, 0));
    for (ahead, visitor) in waiting.iter().enumerate() {
        assert_eq!(position(h.state(&room, *visitor).await), ahead as u64 + 1);
    }
}

pub async fn silent_entrants_leave_the_pre_queue(h: &Harness) {
    let room = scheduled(h, 1).await;
    h.patch(&room, r#"{"abandon_after_s": 15}"#).await;
    let (silent, _) = h.join(&room).await;
    let (present, state) = h.join(&room).await;
    let kept = entry_of(state);
    h.clock.advance_ms(10_000);
    h.store.touch(&room, &[present]).await.unwrap();
    h.clock.advance_ms(10_000);
    let report = h
        .store
        .tick(&room)
        .await
        .unwrap()
        .ran
        .expect("a tick is due");
    assert_eq!((report.abandoned, report.admitted), (1, 0));
    assert!(matches!(h.state(&room, silent).await, PlaceState::Away));
    assert_eq!(h.store.room(&room).await.unwrap().stats.pre_queue, 1);
    open(h, 20_000, 0);
    assert_eq!(position(h.state(&room, present).await), 1);
    let listed = h.store.draw_entries(&room, None, 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
        vec![kept],
        "gone before the opening: no entrant"
    );
}

pub async fn the_tick_says_to_come_back_at_the_opening(h: &Harness) {
    let room = scheduled(h, 1).await;
    // Ticks ten minutes apart: the opening, a minute away, comes first.
    h.patch(&room, r#"{"tick_ms": 600000, "abandon_after_s": 86400}"#)
        .await;
    let (visitor, _) = h.join(&room).await;
    let tick = h.store.tick(&room).await.unwrap();
    assert!(tick.busy);
    assert!(tick.next_due_in_ms <= OPENS_IN_MS, "{tick:?}");
    open(h, 0, 0);
    h.store.watch(&room).await.unwrap();
    let mut events = h.store.subscribe();
    let tick = h.store.tick(&room).await.unwrap();
    assert!(tick.ran.is_some(), "the opening is announced between ticks");
    assert_eq!(
        tick.ran.unwrap().admitted,
        0,
        "and admits nobody out of turn"
    );
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the opening is published")
            .unwrap();
        if let StoreEvent::Room(RoomEvent::Drawn { .. }) = event {
            break;
        }
    }
    assert_eq!(position(h.state(&room, visitor).await), 1);
    let again = h.store.tick(&room).await.unwrap();
    assert!(again.ran.is_none(), "announced once");
}

pub async fn an_empty_pre_queue_is_told_to_come_back_at_the_opening(h: &Harness) {
    let room = scheduled(h, 1).await;
    // Three seconds before the opening, with a tick due and nobody to
    // admit: the next is asked for at the opening, not a period later.
    h.clock.advance_ms(OPENS_IN_MS - 3_000);
    let tick = h.store.tick(&room).await.unwrap();
    assert_eq!(tick.next_due_in_ms, 3_000, "{tick:?}");
}

pub async fn places_tell_the_drawn_positions(h: &Harness) {
    let room = scheduled(h, 1).await;
    h.patch(&room, r#"{"abandon_after_s": 86400}"#).await;
    let mut visitors = Vec::new();
    for _ in 0..5 {
        visitors.push(h.join(&room).await.0);
    }
    let before = h.store.places(&room, &visitors).await.unwrap();
    assert!(
        before
            .iter()
            .all(|p| matches!(p.state, PlaceState::PreQueue { .. }))
    );
    open(h, 0, 1);
    let places = h.store.places(&room, &visitors).await.unwrap();
    let mut positions: Vec<u64> = places.iter().map(|p| position(p.state)).collect();
    for (visitor, from_batch) in visitors.iter().zip(&positions) {
        assert_eq!(position(h.state(&room, *visitor).await), *from_batch);
    }
    positions.sort();
    assert_eq!(positions, vec![1, 2, 3, 4, 5]);
}
