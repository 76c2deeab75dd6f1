//! Priority codes on every store: the priority line before the general
//! one, uses, refusals, removal, `code_required`, moving lines, the opening.

use std::time::Duration;

use waitroom::store::{JoinOptions, StoreError};
use waitroom::words::clock::Clock;
use waitroom::words::codes::{CodeHash, NewGroup};
use waitroom::words::join_limit::JoinLimit;
use waitroom::words::{Order, Place, PlaceState, RoomEvent, RoomId, StoreEvent, VisitorId};

use super::{Harness, is_admitted, position};
use waitroom::store::StoreExt;

async fn add(h: &Harness, room: &RoomId, group: &str, priority: u32, uses: u32, codes: &[&str]) {
    let new = NewGroup {
        group: group.into(),
        priority,
        uses,
        codes: codes.iter().map(|c| CodeHash::of(c)).collect(),
    };
    let added = h.store.add_codes(room, new).await.unwrap();
    assert_eq!(added.total, codes.len() as u64);
}

fn with_code(code: &str) -> JoinOptions {
    JoinOptions {
        code: Some(CodeHash::of(code)),
        ..JoinOptions::default()
    }
}

async fn join_code(h: &Harness, room: &RoomId, code: &str) -> Result<Place, StoreError> {
    h.store
        .join_with(room, VisitorId::random(), &with_code(code))
        .await
}

/// A room admitting `per_tick` whose bucket is spent, so that every join waits.
async fn busy_room(h: &Harness, per_tick: u32) -> RoomId {
    let room = h.room("r", per_tick, None).await;
    for _ in 0..per_tick {
        assert!(is_admitted(h.join(&room).await.1));
    }
    room
}

pub async fn code_holders_are_admitted_first_lower_priority_first(h: &Harness) {
    let room = busy_room(h, 2).await;
    add(h, &room, "fans", 2, 1, &["F1", "F2"]).await;
    add(h, &room, "staff", 1, 1, &["S1"]).await;
    let (general, state) = h.join(&room).await;
    assert_eq!(position(state), 1);
    let fan1 = join_code(h, &room, "F1").await.unwrap();
    assert_eq!(position(fan1.state), 1);
    assert_eq!(fan1.priority.as_deref(), Some("fans"));
    // Everyone in the priority line counts ahead of the general line.
    assert_eq!(position(h.state(&room, general).await), 2);
    let fan2 = join_code(h, &room, "F2").await.unwrap();
    let staff = join_code(h, &room, "S1").await.unwrap();
    assert_eq!(position(staff.state), 1, "a lower priority goes first");
    assert_eq!(position(h.state(&room, fan1.visitor).await), 2);
    assert_eq!(position(h.state(&room, fan2.visitor).await), 3);
    assert_eq!(position(h.state(&room, general).await), 4);
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!((stats.priority_waiting, stats.waiting), (3, 4));
    let general_place = h.store.status(&room, general).await.unwrap();
    assert_eq!(general_place.priority, None);

    assert_eq!(h.tick(&room).await, 2);
    assert!(is_admitted(h.state(&room, staff.visitor).await));
    assert!(is_admitted(h.state(&room, fan1.visitor).await));
    assert_eq!(position(h.state(&room, fan2.visitor).await), 1);
    assert_eq!(position(h.state(&room, general).await), 2);
    let admitted = h.store.status(&room, fan1.visitor).await.unwrap();
    assert_eq!(admitted.priority, None, "an admitted visitor is in no line");
    assert_eq!(h.tick(&room).await, 2);
    assert!(is_admitted(h.state(&room, fan2.visitor).await));
    assert!(is_admitted(h.state(&room, general).await));
    assert_eq!(h.store.room(&room).await.unwrap().stats.priority_waiting, 0);
}

pub async fn a_code_makes_as_many_places_as_its_uses(h: &Harness) {
    let room = busy_room(h, 1).await;
    add(h, &room, "fans", 1, 2, &["TWICE"]).await;
    join_code(h, &room, "TWICE").await.unwrap();
    join_code(h, &room, "TWICE").await.unwrap();
    assert!(matches!(
        join_code(h, &room, "TWICE").await,
        Err(StoreError::CodeUsed)
    ));
    let groups = h.store.code_groups(&room).await.unwrap();
    assert_eq!((groups[0].total, groups[0].used), (1, 1));
    assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 2);
}

pub async fn an_unknown_code_is_refused_and_changes_nothing(h: &Harness) {
    let room = busy_room(h, 1).await;
    add(h, &room, "fans", 1, 1, &["GOOD"]).await;
    assert!(matches!(
        join_code(h, &room, "BAD").await,
        Err(StoreError::InvalidCode)
    ));
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!((stats.waiting, stats.turned_away), (0, 0));
    // A room without any code refuses one too.
    let other = h.room("s", 1, None).await;
    assert!(matches!(
        join_code(h, &other, "GOOD").await,
        Err(StoreError::InvalidCode)
    ));
}

pub async fn a_removed_group_stops_its_codes_at_once(h: &Harness) {
    let room = busy_room(h, 1).await;
    add(h, &room, "fans", 1, 1, &["A", "B"]).await;
    let held = join_code(h, &room, "A").await.unwrap();
    assert!(matches!(
        h.store
            .add_codes(
                &room,
                NewGroup {
                    group: "fans".into(),
                    priority: 1,
                    uses: 1,
                    codes: vec![CodeHash::of("C")],
                }
            )
            .await,
        Err(StoreError::GroupExists(name)) if name == "fans"
    ));
    h.store.remove_codes(&room, "fans").await.unwrap();
    assert!(matches!(
        join_code(h, &room, "B").await,
        Err(StoreError::InvalidCode)
    ));
    assert!(matches!(
        h.store.remove_codes(&room, "fans").await,
        Err(StoreError::GroupNotFound(name)) if name == "fans"
    ));
    assert!(h.store.code_groups(&room).await.unwrap().is_empty());
    // A place made with a removed group's code stays where it is.
    assert_eq!(position(h.state(&room, held.visitor).await), 1);
    // The name can be used again, and the old codes do not come back.
    add(h, &room, "fans", 1, 1, &["D"]).await;
    assert!(matches!(
        join_code(h, &room, "B").await,
        Err(StoreError::InvalidCode)
    ));
    join_code(h, &room, "D").await.unwrap();
}

pub async fn code_required_refuses_joins_without_a_valid_code(h: &Harness) {
    let room = h.room("r", 1, None).await;
    h.patch(&room, r#"{"code_required": true}"#).await;
    assert!(h.store.room(&room).await.unwrap().config.code_required);
    add(h, &room, "invite", 1, 1, &["INV"]).await;
    assert!(matches!(
        h.store.join(&room, VisitorId::random()).await,
        Err(StoreError::CodeRequired)
    ));
    assert!(matches!(
        join_code(h, &room, "NOPE").await,
        Err(StoreError::InvalidCode)
    ));
    let invited = join_code(h, &room, "INV").await.unwrap();
    assert!(
        is_admitted(invited.state),
        "an empty room lets a code holder through"
    );
    // A place made is the holder's: joining again needs no code.
    let again = h.store.join(&room, invited.visitor).await.unwrap();
    assert!(is_admitted(again.state));
}

pub async fn a_visitor_waiting_in_the_general_line_moves_ahead_with_a_code(h: &Harness) {
    let room = busy_room(h, 1).await;
    add(h, &room, "fans", 1, 2, &["MOVE"]).await;
    let (first, _) = h.join(&room).await;
    let (mover, state) = h.join(&room).await;
    let (last, _) = h.join(&room).await;
    assert_eq!(position(state), 2);
    h.store.watch(&room).await.unwrap();
    let mut events = h.store.subscribe();
    let moved = h
        .store
        .join_with(&room, mover, &with_code("MOVE"))
        .await
        .unwrap();
    assert_eq!(moved.visitor, mover);
    assert_eq!(position(moved.state), 1);
    assert_eq!(moved.priority.as_deref(), Some("fans"));
    assert_eq!(position(h.state(&room, first).await), 2);
    assert_eq!(position(h.state(&room, last).await), 3);
    let event = loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the move is published")
            .unwrap();
        if let StoreEvent::Room(event @ RoomEvent::Entered { .. }) = event {
            break event;
        }
    };
    let RoomEvent::Entered {
        visitor,
        order,
        from,
        group,
        position: entered_at,
        ..
    } = event
    else {
        unreachable!()
    };
    assert_eq!((visitor, &*group, entered_at), (mover, "fans", 1));
    assert!(matches!(order, Order::Priority { priority: 1, .. }));
    assert!(matches!(from, Some(Order::Joined(_))));
    // In the priority line already: the code is not spent again.
    h.store
        .join_with(&room, mover, &with_code("MOVE"))
        .await
        .unwrap();
    assert_eq!(h.store.code_groups(&room).await.unwrap()[0].used, 1);
    join_code(h, &room, "MOVE").await.unwrap();
    assert!(matches!(
        join_code(h, &room, "MOVE").await,
        Err(StoreError::CodeUsed)
    ));
    assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 4);
}

pub async fn a_second_device_of_the_same_user_spends_nothing(h: &Harness) {
    let room = busy_room(h, 1).await;
    add(h, &room, "fans", 1, 1, &["ONCE"]).await;
    let as_alice = |code: &str| JoinOptions {
        user: Some("alice".into()),
        code: Some(CodeHash::of(code)),
        ..JoinOptions::default()
    };
    let phone = h
        .store
        .join_with(&room, VisitorId::random(), &as_alice("ONCE"))
        .await
        .unwrap();
    let laptop = h
        .store
        .join_with(&room, VisitorId::random(), &as_alice("ONCE"))
        .await
        .unwrap();
    assert_eq!(laptop.visitor, phone.visitor);
    assert_eq!(position(laptop.state), 1);
    assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 1);
}

pub async fn code_holders_before_the_opening_are_drawn_first_lower_priority_first(h: &Harness) {
    let room = h.room("r", 1, None).await;
    let opens_at = waitroom::words::clock::rfc3339(h.clock.now_ms() + 60_000);
    h.patch(&room, &format!(r#"{{"opens_at": "{opens_at}"}}"#))
        .await;
    add(h, &room, "fans", 2, 3, &["FAN"]).await;
    add(h, &room, "staff", 1, 2, &["STAFF"]).await;
    let mut general = Vec::new();
    let mut entry_of = std::collections::HashMap::new();
    for _ in 0..4 {
        let (visitor, state) = h.join(&room).await;
        let PlaceState::PreQueue { entry } = state else {
            panic!("the pre-queue, not {state:?}")
        };
        entry_of.insert(visitor, entry);
        general.push(visitor);
    }
    let mut holders = Vec::new();
    for code in ["FAN", "STAFF", "FAN", "STAFF", "FAN"] {
        let place = join_code(h, &room, code).await.unwrap();
        let PlaceState::PreQueue { entry } = place.state else {
            panic!(
                "a code holder waits for the draw too, not {:?}",
                place.state
            )
        };
        assert!(place.priority.is_some());
        entry_of.insert(place.visitor, entry);
        holders.push((place.visitor, if code == "STAFF" { 1 } else { 2 }));
    }
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!((stats.pre_queue, stats.priority_waiting), (9, 5));
    let draw = h.store.draw(&room).await.unwrap();
    assert_eq!((draw.entrants, draw.priority_entrants), (9, 5));

    // Paused, so that the opening's tick admits nobody yet.
    h.patch(&room, r#"{"paused": true}"#).await;
    h.clock.advance_ms(60_000);
    h.store.tick(&room).await.unwrap();
    let draw = h.store.draw(&room).await.unwrap();
    let seed: waitroom::words::draw::DrawSeed = draw.seed.unwrap().parse().unwrap();
    let key = |visitor: &VisitorId| seed.key_of(&entry_of[visitor]);
    // The published order: code holders by (priority, HMAC), then the rest by HMAC.
    let mut expected: Vec<VisitorId> = holders.iter().map(|(v, _)| *v).collect();
    let priority_of: std::collections::HashMap<VisitorId, u32> = holders.iter().copied().collect();
    expected.sort_by_key(|v| (priority_of[v], key(v)));
    let mut rest = general.clone();
    rest.sort_by_key(|v| key(v));
    expected.extend(rest);
    for (index, visitor) in expected.iter().enumerate() {
        assert_eq!(
            position(h.state(&room, *visitor).await),
            index as u64 + 1,
            "{index}"
        );
    }
    let listed = h.store.draw_entries(&room, None, 100).await.unwrap();
    let listed: Vec<_> = listed.iter().map(|(_, entry)| *entry).collect();
    let wanted: Vec<_> = expected.iter().map(|v| entry_of[v]).collect();
    assert_eq!(listed, wanted, "draw/entries lists the code holders first");
    // Paged two at a time, across the code holders' end, the same list.
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = h.store.draw_entries(&room, after, 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().copied();
        paged.extend(page.iter().map(|(_, entry)| *entry));
    }
    assert_eq!(paged, wanted);
    h.patch(&room, r#"{"paused": false}"#).await;
    for visitor in &expected[..5] {
        h.tick(&room).await;
        assert!(is_admitted(h.state(&room, *visitor).await));
    }
}

/// Issue 40, item 3: wrong codes spend the client's code-guess budget (a
/// GCRA, here 3 a minute: all at once, then one per 20 s), in the join's
/// own step; past it a join with a code is refused before the code is
/// looked at, the right one too, and counted as turned away. Unknown and
/// used codes both count; a right code, another address, or a join
/// without a code spend nothing and are not held back.
pub async fn wrong_codes_spend_the_addresss_guesses_and_past_them_no_code_is_looked_at(
    h: &Harness,
) {
    let room = busy_room(h, 1).await;
    add(h, &room, "fans", 1, 1, &["RIGHT", "ONCE", "LATER"]).await;
    let guessing = |client: &str, code: &str| JoinOptions {
        code: Some(CodeHash::of(code)),
        code_guesses: Some(JoinLimit {
            client: client.into(),
            per_minute: 3,
        }),
        ..JoinOptions::default()
    };
    let join = |client: &'static str, code: &'static str| {
        let options = guessing(client, code);
        let store = h.store.clone();
        let room = room.clone();
        async move { store.join_with(&room, VisitorId::random(), &options).await }
    };
    let guesser = "203.0.113.7/32";
    join(guesser, "ONCE").await.unwrap();
    // A right code spends no guess.
    for _ in 0..2 {
        assert!(matches!(
            join(guesser, "WRONG").await,
            Err(StoreError::InvalidCode)
        ));
    }
    assert!(matches!(
        join(guesser, "ONCE").await,
        Err(StoreError::CodeUsed)
    ));
    let refused = join(guesser, "WRONG").await;
    assert!(
        matches!(refused, Err(StoreError::RateLimited { retry_after_s: 20 })),
        "three wrong codes at once, then one per 20 s: {refused:?}"
    );
    let right = join(guesser, "RIGHT").await;
    assert!(
        matches!(right, Err(StoreError::RateLimited { .. })),
        "past the budget the right code is not looked at either: {right:?}"
    );
    assert!(
        join("2001:db8::/64", "RIGHT").await.is_ok(),
        "each address has its own guesses"
    );
    assert!(
        h.store.join(&room, VisitorId::random()).await.is_ok(),
        "a join without a code is not held back"
    );
    let stats = h.store.room(&room).await.unwrap().stats;
    assert_eq!(stats.turned_away, 2, "the two refused past the budget");
    assert_eq!((stats.waiting, stats.priority_waiting), (3, 2));

    // A visitor waiting in the general line moves with a code only while
    // their address has guesses left.
    let (general, _) = h.join(&room).await;
    let mover = guessing(guesser, "LATER");
    assert!(matches!(
        h.store.join_with(&room, general, &mover).await,
        Err(StoreError::RateLimited { .. })
    ));
    h.clock.advance_ms(19_999);
    assert!(matches!(
        join(guesser, "WRONG").await,
        Err(StoreError::RateLimited { retry_after_s: 1 })
    ));
    h.clock.advance_ms(1);
    let moved = h.store.join_with(&room, general, &mover).await.unwrap();
    assert_eq!(moved.priority.as_deref(), Some("fans"), "one guess back");
    assert!(matches!(
        join(guesser, "WRONG").await,
        Err(StoreError::InvalidCode)
    ));
    assert!(matches!(
        join(guesser, "WRONG").await,
        Err(StoreError::RateLimited { .. })
    ));
    assert_eq!(h.store.room(&room).await.unwrap().stats.turned_away, 5);
}
