//! Step away, we'll call you (api.md), on every store: a waiting visitor
//! who asked keeps the place however long they are away, until `near`
//! (sent once, from the line's head, when `ahead` or fewer are ahead)
//! gives them `notify_return_s` to come back; `admitted` follows at their
//! turn, and the pass waits `notify_hold_s` for them. Each event is written
//! to the outbox in the step that caused it and handed to one consumer at
//! a time until one settles it; what the visitor left goes with the place.

use std::sync::Arc;

use waitroom::store::{StoreError, StoreExt};
use waitroom::words::notify::{Ask, EventKind, NotifyRequest, OutboxEvent};
use waitroom::words::op::{ClaimEvents, HoldEvents, Notify, Resume, SettleEvents, Touch};
use waitroom::words::{PlaceState, RoomId, VisitorId};

use super::{Harness, position};

fn ask(contact: &str, ahead: u32, client: &str) -> Box<Ask> {
    Box::new(Ask {
        request: NotifyRequest {
            contact: Some(contact.into()),
            push: None,
            ahead,
        },
        client: client.into(),
        per_client: 2,
        join_limit: None,
    })
}

async fn notify(
    h: &Harness,
    room: &RoomId,
    visitor: VisitorId,
    ask: Option<Box<Ask>>,
) -> Result<bool, StoreError> {
    let place = h
        .store
        .run(Notify {
            room: room.clone(),
            visitor,
            ask,
        })
        .await?;
    Ok(place.notify)
}

async fn claim(h: &Harness, room: &RoomId, consumer: &str, takeover_ms: u64) -> Vec<OutboxEvent> {
    h.store
        .run(ClaimEvents {
            room: room.clone(),
            consumer: Arc::from(consumer),
            takeover_ms,
            limit: 10,
        })
        .await
        .unwrap()
}

async fn settle(h: &Harness, room: &RoomId, events: &[OutboxEvent]) {
    let entries = events.iter().map(|e| e.entry.clone()).collect();
    h.store
        .run(SettleEvents {
            room: room.clone(),
            entries,
            push_gone: Vec::new(),
        })
        .await
        .unwrap();
}

/// A line of `n`, admitting 2 a tick, where a silent visitor is dropped
/// after 60 s; everyone but `away` is kept present.
async fn line(h: &Harness, n: usize) -> (RoomId, Vec<VisitorId>) {
    let room = h.room("n", 2, None).await;
    h.patch(&room, r#"{"abandon_after_s": 60, "notify_return_s": 120}"#)
        .await;
    let mut visitors = Vec::new();
    for _ in 0..n {
        visitors.push(h.join(&room).await.0);
    }
    (room, visitors)
}

async fn tick_keeping(h: &Harness, room: &RoomId, present: &[VisitorId]) {
    h.store
        .run(Touch {
            room: room.clone(),
            visitors: present.to_vec(),
        })
        .await
        .unwrap();
    h.tick(room).await;
}

pub async fn a_visitor_who_asked_is_kept_while_away_until_near_then_must_come_back(h: &Harness) {
    let (room, visitors) = line(h, 30).await;
    let away = visitors[20];
    assert!(
        notify(h, &room, away, Some(ask("+15550100", 5, "203.0.113.7/32")))
            .await
            .unwrap()
    );
    assert!(
        h.store.status(&room, away).await.unwrap().notify,
        "status says so"
    );
    let present: Vec<_> = visitors.iter().copied().filter(|v| *v != away).collect();
    // 2 a tick: 20 ahead → 5 ahead after 8 ticks (40 s), well past nothing;
    // then 16 ticks (80 s) in all, longer than abandon_after_s.
    let mut near = None;
    for _ in 0..16 {
        tick_keeping(h, &room, &present).await;
        let events = claim(h, &room, "a", 60_000).await;
        if let Some(event) = events.iter().find(|e| e.kind == EventKind::Near) {
            assert!(near.is_none(), "near is sent once");
            near = Some(event.clone());
            settle(h, &room, &events).await;
        }
        if near.is_none() {
            let state = h.store.status(&room, away).await.unwrap().state;
            // Kept while away, however long (a status read is a sign of
            // presence, but none can lower the mark that keeps the place).
            assert!(matches!(state, PlaceState::Waiting { .. }), "{state:?}");
        }
    }
    let near = near.expect("near was sent");
    assert_eq!(near.visitor, away);
    assert_eq!(near.id, format!("{away}-near"));
    assert!(near.position.unwrap() <= 6, "5 or fewer ahead: {near:?}");
    let reach = near.reach.unwrap();
    assert_eq!(reach.contact.as_deref(), Some("+15550100"));
    assert_eq!(reach.ahead, 5);
}

pub async fn after_near_an_absent_visitor_lapses_at_the_return_time(h: &Harness) {
    let room = h.room("n", 1, None).await;
    h.patch(&room, r#"{"abandon_after_s": 60, "notify_return_s": 60}"#)
        .await;
    let first = h.join(&room).await.0;
    let away = h.join(&room).await.0;
    let behind = h.join(&room).await.0;
    assert!(!h.store.status(&room, first).await.unwrap().notify);
    notify(h, &room, away, Some(ask("c", 20, "b")))
        .await
        .unwrap();
    // Nobody is admitted (paused): `away` is near at the first tick.
    h.patch(&room, r#"{"paused": true}"#).await;
    h.clock.advance_ms(5_000);
    h.store.tick(&room).await.unwrap();
    let events = claim(h, &room, "a", 60_000).await;
    assert!(
        events
            .iter()
            .any(|e| e.kind == EventKind::Near && e.visitor == away),
        "{events:?}"
    );
    for _ in 0..11 {
        h.clock.advance_ms(5_000);
        h.store
            .run(Touch {
                room: room.clone(),
                visitors: vec![behind],
            })
            .await
            .unwrap();
        h.store.tick(&room).await.unwrap();
    }
    // Read without a sign of presence: the room's count.
    let waiting = h.store.room(&room).await.unwrap().stats.waiting;
    assert_eq!(waiting, 2, "55 s after near: still kept");
    h.clock.advance_ms(10_000);
    h.store
        .run(Touch {
            room: room.clone(),
            visitors: vec![behind],
        })
        .await
        .unwrap();
    h.store.tick(&room).await.unwrap();
    assert_eq!(
        h.state(&room, away).await,
        PlaceState::Away,
        "65 s after near: gone"
    );
    assert!(matches!(
        h.state(&room, behind).await,
        PlaceState::Waiting { .. }
    ));
}

pub async fn the_turn_comes_as_admitted_and_the_pass_waits_for_the_visitor(h: &Harness) {
    let room = h.room("n", 1, None).await;
    h.patch(&room, r#"{"arrival_grace_s": 30, "notify_hold_s": 300}"#)
        .await;
    let _first = h.join(&room).await.0;
    let called = h.join(&room).await.0;
    let plain = h.join(&room).await.0;
    notify(h, &room, called, Some(ask("c", 1, "b")))
        .await
        .unwrap();
    h.tick(&room).await;
    h.tick(&room).await;
    let events = claim(h, &room, "a", 60_000).await;
    let admitted: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::Admitted)
        .collect();
    assert_eq!(admitted.len(), 1, "{events:?}");
    assert_eq!(admitted[0].visitor, called);
    assert_eq!(admitted[0].position, None);
    assert!(
        h.store.status(&room, called).await.unwrap().notify,
        "the pass holds the request"
    );
    // 60 s later the plain pass is a no-show; the called one waits 300 s.
    for _ in 0..12 {
        h.store
            .run(Touch {
                room: room.clone(),
                visitors: vec![plain],
            })
            .await
            .unwrap();
        h.tick(&room).await;
    }
    assert!(crate::conformance::is_admitted(
        h.state(&room, called).await
    ));
}

pub async fn an_event_is_handed_to_one_consumer_until_settled_or_taken_over(h: &Harness) {
    let room = h.room("n", 1, None).await;
    let _first = h.join(&room).await.0;
    let called = h.join(&room).await.0;
    notify(h, &room, called, Some(ask("c", 1, "b")))
        .await
        .unwrap();
    h.tick(&room).await;
    let a = claim(h, &room, "a", 60_000).await;
    assert_eq!(a.len(), 1, "its event: {a:?}");
    assert!(claim(h, &room, "b", 60_000).await.is_empty(), "a holds it");
    assert!(claim(h, &room, "a", 60_000).await.is_empty(), "handed once");
    let entries = vec![a[0].entry.clone()];
    let held = h
        .store
        .run(HoldEvents {
            room: room.clone(),
            consumer: Arc::from("a"),
            entries: entries.clone(),
        })
        .await
        .unwrap();
    assert_eq!(held, entries, "still a's");
    let not_b = h
        .store
        .run(HoldEvents {
            room: room.clone(),
            consumer: Arc::from("b"),
            entries: entries.clone(),
        })
        .await
        .unwrap();
    assert!(not_b.is_empty(), "b holds nothing");
    // `a` went silent: with no takeover time, `b` takes it, same id.
    let b = claim(h, &room, "b", 0).await;
    assert_eq!(b.len(), 1);
    assert_eq!(
        (b[0].id.clone(), b[0].entry.clone()),
        (a[0].id.clone(), a[0].entry.clone())
    );
    settle(h, &room, &b).await;
    assert!(claim(h, &room, "c", 0).await.is_empty(), "settled");
    assert_eq!(h.store.tick(&room).await.unwrap().outbox, 0);
}

pub async fn what_the_visitor_left_goes_with_the_place(h: &Harness) {
    let room = h.room("n", 1, None).await;
    let _first = h.join(&room).await.0;
    let called = h.join(&room).await.0;
    notify(h, &room, called, Some(ask("secret-contact", 1, "b")))
        .await
        .unwrap();
    h.tick(&room).await;
    assert_eq!(h.store.tick(&room).await.unwrap().outbox, 1, "near waits");
    h.store.leave(&room, called).await.unwrap();
    assert!(
        claim(h, &room, "a", 0).await.is_empty(),
        "nobody left to call"
    );
    assert_eq!(
        h.store.tick(&room).await.unwrap().outbox,
        0,
        "and it was settled"
    );
    assert!(!h.store.status(&room, called).await.unwrap().notify);
}

pub async fn only_a_waiting_visitor_asks_and_an_address_holds_a_few(h: &Harness) {
    let room = h.room("n", 1, None).await;
    let (through, _) = h.join(&room).await;
    let refused = notify(h, &room, through, Some(ask("c", 1, "b"))).await;
    assert!(
        matches!(refused, Err(StoreError::NotWaiting)),
        "{refused:?}"
    );
    let unknown = notify(h, &room, VisitorId::random(), Some(ask("c", 1, "b"))).await;
    assert!(
        matches!(unknown, Err(StoreError::NotWaiting)),
        "{unknown:?}"
    );
    let waiting: Vec<_> = futures_util::future::join_all((0..3).map(|_| h.join(&room))).await;
    let [a, b, c] = [waiting[0].0, waiting[1].0, waiting[2].0];
    notify(h, &room, a, Some(ask("c", 1, "block")))
        .await
        .unwrap();
    notify(h, &room, b, Some(ask("c", 1, "block")))
        .await
        .unwrap();
    notify(h, &room, a, Some(ask("other", 3, "block")))
        .await
        .expect("asking again is no new place");
    let third = notify(h, &room, c, Some(ask("c", 1, "block"))).await;
    assert!(
        matches!(third, Err(StoreError::TooManyNotifications)),
        "{third:?}"
    );
    notify(h, &room, c, Some(ask("c", 1, "another-block")))
        .await
        .unwrap();
    // A cancel frees the block's place.
    assert!(!notify(h, &room, b, None).await.unwrap());
    notify(h, &room, c, Some(ask("c", 1, "block")))
        .await
        .unwrap();
    assert!(h.store.status(&room, c).await.unwrap().notify);
    let _ = position(h.state(&room, c).await);
}

pub async fn a_resume_code_is_spent_once(h: &Harness) {
    let room = h.room("n", 1, None).await;
    let _first = h.join(&room).await.0;
    let called = h.join(&room).await.0;
    notify(h, &room, called, Some(ask("c", 1, "b")))
        .await
        .unwrap();
    let resume = |kind| {
        h.store.run(Resume {
            room: room.clone(),
            visitor: called,
            kind,
        })
    };
    let place = resume(EventKind::Near).await.unwrap();
    assert!(matches!(place.state, PlaceState::Waiting { .. }));
    assert!(matches!(
        resume(EventKind::Near).await,
        Err(StoreError::ResumeUsed)
    ));
    assert!(
        resume(EventKind::Admitted).await.is_ok(),
        "each event's code is its own"
    );
    let stranger = h
        .store
        .run(Resume {
            room: room.clone(),
            visitor: VisitorId::random(),
            kind: EventKind::Near,
        })
        .await
        .unwrap();
    assert_eq!(stranger.state, PlaceState::Expired);
}
