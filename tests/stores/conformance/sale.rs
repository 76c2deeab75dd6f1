//! Sale scenarios every store must pass, on a driven clock.

use waitroom::store::{JoinOptions, PassTakenBack, StoreError, give_up, take_back_pass};
use waitroom::words::sale::{ClaimState, SaleError, SaleRequest, SeatState, Want};
use waitroom::words::{RoomConfig, RoomId, VisitorId};

use super::Harness;
use waitroom::store::SaleStoreExt;
use waitroom::store::StoreExt;

async fn sale(h: &Harness, json: &str) -> RoomId {
    let room = RoomId::parse("shop").unwrap();
    let request: SaleRequest = serde_json::from_str(json).unwrap();
    h.sale
        .configure_sale(&room, request.into_config().unwrap())
        .await
        .unwrap();
    room
}

fn seats(list: &[&str]) -> Want {
    Want::Seats(list.iter().map(|s| s.to_string()).collect())
}

pub async fn stock_is_claimed_exactly(h: &Harness) {
    let room = sale(h, r#"{"stock": 5}"#).await;
    let mut held = 0;
    for _ in 0..8 {
        match h
            .sale
            .claim(&room, VisitorId::random(), &Want::Quantity(1), None)
            .await
        {
            Ok(claim) => {
                held += 1;
                assert_eq!(claim.sequence, held, "claims are numbered 1, 2, 3…");
                assert_eq!(claim.state, ClaimState::Held);
            }
            Err(SaleError::SoldOut) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(held, 5);
    assert_eq!(h.sale.sale(&room).await.unwrap().stock_left, 0);
}

pub async fn the_per_user_limit_counts_held_and_confirmed_units(h: &Harness) {
    let room = sale(h, r#"{"stock": 10, "per_user_limit": 3}"#).await;
    let visitor = VisitorId::random();
    let first = h
        .sale
        .claim(&room, visitor, &Want::Quantity(2), None)
        .await
        .unwrap();
    h.sale
        .confirm(&room, visitor, &first.claim_id)
        .await
        .unwrap();
    assert!(matches!(
        h.sale.claim(&room, visitor, &Want::Quantity(2), None).await,
        Err(SaleError::LimitReached(3))
    ));
    h.sale
        .claim(&room, visitor, &Want::Quantity(1), None)
        .await
        .unwrap();
    assert!(matches!(
        h.sale.claim(&room, visitor, &Want::Quantity(1), None).await,
        Err(SaleError::LimitReached(_))
    ));
    assert_eq!(h.sale.sale(&room).await.unwrap().stock_left, 7);
    assert_eq!(h.sale.claims_of(&room, visitor).await.unwrap().len(), 2);
}

pub async fn a_repeated_idempotency_key_returns_the_first_claim(h: &Harness) {
    let room = sale(h, r#"{"stock": 10, "per_user_limit": 5}"#).await;
    let visitor = VisitorId::random();
    let first = h
        .sale
        .claim(&room, visitor, &Want::Quantity(2), Some("click-1"))
        .await
        .unwrap();
    let again = h
        .sale
        .claim(&room, visitor, &Want::Quantity(2), Some("click-1"))
        .await
        .unwrap();
    assert_eq!(again, first, "a double submit takes nothing more");
    assert_eq!(h.sale.sale(&room).await.unwrap().stock_left, 8);
    let other = h
        .sale
        .claim(&room, visitor, &Want::Quantity(1), Some("click-2"))
        .await
        .unwrap();
    assert_ne!(other.claim_id, first.claim_id);
    // Keys are per visitor: someone else's "click-1" is their own.
    let stranger = h
        .sale
        .claim(
            &room,
            VisitorId::random(),
            &Want::Quantity(1),
            Some("click-1"),
        )
        .await
        .unwrap();
    assert_ne!(stranger.claim_id, first.claim_id);
}

pub async fn seat_claims_are_all_or_nothing(h: &Harness) {
    let room = sale(
        h,
        r#"{"seats": ["A1", "A2", "A3", "A4"], "per_user_limit": 4}"#,
    )
    .await;
    let first = h
        .sale
        .claim(&room, VisitorId::random(), &seats(&["A1", "A2"]), None)
        .await
        .unwrap();
    assert_eq!(first.seats, ["A1", "A2"]);
    match h
        .sale
        .claim(&room, VisitorId::random(), &seats(&["A3", "A2"]), None)
        .await
    {
        Err(SaleError::SeatTaken(seat)) => assert_eq!(seat, "A2"),
        other => panic!("expected seat_taken, got {other:?}"),
    }
    let view = h.sale.sale(&room).await.unwrap();
    assert_eq!(
        view.seats["A3"],
        SeatState::Free,
        "a refused claim takes no seat"
    );
    assert_eq!(view.seats["A1"], SeatState::Held);
    assert_eq!(view.stock_left, 2);
    assert_eq!(view.kind, waitroom::words::sale::SaleKind::Seats);
}

pub async fn claims_for_what_is_not_for_sale_are_refused(h: &Harness) {
    let room = sale(h, r#"{"seats": ["A1", "A2"], "per_user_limit": 1}"#).await;
    assert!(matches!(
        h.sale.claim(&room, VisitorId::random(), &seats(&["Z9"]), None).await,
        Err(SaleError::UnknownSeat(seat)) if seat == "Z9"
    ));
    assert!(matches!(
        h.sale
            .claim(&room, VisitorId::random(), &Want::Quantity(1), None)
            .await,
        Err(SaleError::WrongKind(_))
    ));
    assert!(matches!(
        h.sale
            .claim(&room, VisitorId::random(), &seats(&["A1", "A2"]), None)
            .await,
        Err(SaleError::LimitReached(1))
    ));
    let nowhere = RoomId::parse("nowhere").unwrap();
    assert!(matches!(
        h.sale.sale(&nowhere).await,
        Err(SaleError::NoSale)
    ));
    assert!(matches!(
        h.sale
            .claim(&nowhere, VisitorId::random(), &Want::Quantity(1), None)
            .await,
        Err(SaleError::NoSale)
    ));
}

pub async fn unconfirmed_holds_return_to_stock_by_themselves(h: &Harness) {
    let room = sale(h, r#"{"stock": 1, "hold_ttl_s": 10}"#).await;
    let (late, next) = (VisitorId::random(), VisitorId::random());
    let hold = h
        .sale
        .claim(&room, late, &Want::Quantity(1), None)
        .await
        .unwrap();
    assert!(matches!(
        h.sale.claim(&room, next, &Want::Quantity(1), None).await,
        Err(SaleError::SoldOut)
    ));
    h.clock.advance_ms(9_999);
    assert_eq!(h.sale.sale(&room).await.unwrap().stock_left, 0);
    h.clock.advance_ms(1);
    assert_eq!(
        h.sale.sale(&room).await.unwrap().stock_left,
        1,
        "the hold ran out"
    );
    assert!(matches!(
        h.sale.confirm(&room, late, &hold.claim_id).await,
        Err(SaleError::HoldExpired)
    ));
    let again = h
        .sale
        .claim(&room, next, &Want::Quantity(1), None)
        .await
        .unwrap();
    assert_eq!(again.sequence, 2);
    assert!(h.sale.claims_of(&room, late).await.unwrap().is_empty());
}

pub async fn confirming_makes_orders_in_confirmation_order(h: &Harness) {
    let room = sale(h, r#"{"seats": ["A1", "A2", "A3"]}"#).await;
    let (a, b) = (VisitorId::random(), VisitorId::random());
    let first = h.sale.claim(&room, a, &seats(&["A1"]), None).await.unwrap();
    let second = h.sale.claim(&room, b, &seats(&["A3"]), None).await.unwrap();
    h.clock.advance_ms(1_000);
    let confirmed = h.sale.confirm(&room, b, &second.claim_id).await.unwrap();
    assert_eq!(
        (confirmed.state, confirmed.confirmed_at.is_some()),
        (ClaimState::Confirmed, true)
    );
    assert_eq!(
        h.sale.confirm(&room, b, &second.claim_id).await.unwrap(),
        confirmed,
        "confirming twice is harmless"
    );
    h.sale.confirm(&room, a, &first.claim_id).await.unwrap();
    let orders = h.sale.orders(&room).await.unwrap();
    let order_ids: Vec<&str> = orders.iter().map(|o| o.claim_id.as_str()).collect();
    assert_eq!(
        order_ids,
        [second.claim_id.as_str(), first.claim_id.as_str()]
    );
    assert_eq!(
        h.sale.sale(&room).await.unwrap().seats["A3"],
        SeatState::Sold
    );
    // A confirmed hold never expires back to stock.
    h.clock.advance_ms(3_600_000);
    assert_eq!(
        h.sale.sale(&room).await.unwrap().seats["A1"],
        SeatState::Sold
    );
}

pub async fn releasing_gives_back_and_only_the_owner_may(h: &Harness) {
    let room = sale(h, r#"{"stock": 2}"#).await;
    let (owner, stranger) = (VisitorId::random(), VisitorId::random());
    let hold = h
        .sale
        .claim(&room, owner, &Want::Quantity(1), None)
        .await
        .unwrap();
    assert!(matches!(
        h.sale.release(&room, stranger, &hold.claim_id).await,
        Err(SaleError::ClaimNotFound)
    ));
    assert!(matches!(
        h.sale.confirm(&room, stranger, &hold.claim_id).await,
        Err(SaleError::ClaimNotFound)
    ));
    h.sale.release(&room, owner, &hold.claim_id).await.unwrap();
    h.sale.release(&room, owner, &hold.claim_id).await.unwrap();
    assert_eq!(h.sale.sale(&room).await.unwrap().stock_left, 2);
    assert!(matches!(
        h.sale.confirm(&room, owner, &hold.claim_id).await,
        Err(SaleError::Released)
    ));
    let kept = h
        .sale
        .claim(&room, owner, &Want::Quantity(1), None)
        .await
        .unwrap();
    h.sale.confirm(&room, owner, &kept.claim_id).await.unwrap();
    assert!(matches!(
        h.sale.release(&room, owner, &kept.claim_id).await,
        Err(SaleError::AlreadyConfirmed)
    ));
}

pub async fn a_room_created_again_starts_without_its_predecessors_sale(h: &Harness) {
    let room = h.room("shop", 1, None).await;
    sale(h, r#"{"seats": ["A1", "A2", "A3"], "per_user_limit": 3}"#).await;
    let visitor = VisitorId::random();
    let bought = h
        .sale
        .claim(&room, visitor, &seats(&["A1"]), Some("k1"))
        .await
        .unwrap();
    h.sale
        .confirm(&room, visitor, &bought.claim_id)
        .await
        .unwrap();
    let held = h
        .sale
        .claim(&room, visitor, &seats(&["A2"]), None)
        .await
        .unwrap();

    // Creating a room that is open changes nothing of its sale.
    assert!(matches!(
        h.store
            .create_room(room.clone(), RoomConfig::new("again", "/x"))
            .await,
        Err(StoreError::RoomExists(_))
    ));
    assert_eq!(h.sale.orders(&room).await.unwrap().len(), 1);

    // Closed and created again: nothing of the old sale is left.
    h.store.close_room(&room).await.unwrap();
    h.room("shop", 1, None).await;
    assert!(matches!(h.sale.sale(&room).await, Err(SaleError::NoSale)));
    assert!(matches!(h.sale.orders(&room).await, Err(SaleError::NoSale)));
    assert!(matches!(
        h.sale.confirm(&room, visitor, &held.claim_id).await,
        Err(SaleError::NoSale)
    ));
    assert!(matches!(
        h.sale.claims_of(&room, visitor).await,
        Err(SaleError::NoSale)
    ));
    assert!(matches!(
        h.sale.claim(&room, visitor, &seats(&["A3"]), None).await,
        Err(SaleError::NoSale)
    ));
}

pub async fn a_sold_out_sale_closes_the_line_and_holds_keep_it_open(h: &Harness) {
    use waitroom::words::PlaceState;
    let room = h.room("shop", 1, None).await;
    h.patch(&room, r#"{"paused": true}"#).await;
    sale(h, r#"{"stock": 1, "hold_ttl_s": 60}"#).await;
    let (waiting, _) = h.join(&room).await;
    let buyer = VisitorId::random();

    let hold = h
        .sale
        .claim(&room, buyer, &Want::Quantity(1), None)
        .await
        .unwrap();
    let stock = h.sale.stock(&room).await.unwrap();
    assert_eq!((stock.left, stock.held, stock.sold_out()), (0, 1, false));
    h.store.announce_stock(&room, stock).await.unwrap();
    let place = h.store.status(&room, waiting).await.unwrap();
    assert!(
        matches!(place.state, PlaceState::Waiting { .. }),
        "a hold may come back"
    );
    assert_eq!(place.facts.stock_left, Some(0));

    h.clock.advance_ms(61_000); // the hold expires: the unit is back
    let stock = h.sale.stock(&room).await.unwrap();
    assert_eq!((stock.left, stock.held), (1, 0));
    h.store.announce_stock(&room, stock).await.unwrap();
    assert_eq!(
        h.store
            .status(&room, waiting)
            .await
            .unwrap()
            .facts
            .stock_left,
        Some(1)
    );

    let bought = h
        .sale
        .claim(&room, buyer, &Want::Quantity(1), None)
        .await
        .unwrap();
    h.sale
        .confirm(&room, buyer, &bought.claim_id)
        .await
        .unwrap();
    assert_ne!(hold.claim_id, bought.claim_id);
    let stock = h.sale.stock(&room).await.unwrap();
    assert!(stock.sold_out());
    h.store.announce_stock(&room, stock).await.unwrap();
    let place = h.store.status(&room, waiting).await.unwrap();
    assert!(matches!(place.state, PlaceState::Closed), "the line closes");
    assert!(place.facts.sold_out);
    let late = h.store.join(&room, VisitorId::random()).await.unwrap();
    assert!(
        matches!(late.state, PlaceState::Closed),
        "new arrivals the same"
    );
    h.patch(&room, r#"{"paused": false}"#).await;
    assert_eq!(h.tick(&room).await, 0, "nobody is admitted to nothing");
    assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 1);

    h.patch(&room, r#"{"close_when_sold_out": false}"#).await;
    let place = h.store.status(&room, waiting).await.unwrap();
    assert!(
        matches!(place.state, PlaceState::Waiting { .. }),
        "a room that does not close for a sold-out sale keeps its line"
    );
}

pub async fn a_known_users_limit_counts_every_visit_and_device(h: &Harness) {
    let room = h.room("shop", 100, None).await;
    sale(h, r#"{"stock": 10, "per_user_limit": 2}"#).await;
    let as_user = |user: &str| JoinOptions {
        user: Some(user.into()),
        ..JoinOptions::default()
    };
    // What the sale route does: the user whose place the pass's visitor holds.
    let claim = |visitor: VisitorId, units: u64| async move {
        let user = h.store.user_of(&room_id(), visitor).await.unwrap();
        h.sale
            .claim_as(
                &room_id(),
                visitor,
                user.as_deref(),
                &Want::Quantity(units),
                None,
            )
            .await
    };

    let first_visit = VisitorId::random();
    h.store
        .join_with(&room, first_visit, &as_user("alice"))
        .await
        .unwrap();
    assert_eq!(
        h.store
            .user_of(&room, first_visit)
            .await
            .unwrap()
            .as_deref(),
        Some("alice")
    );
    let bought = claim(first_visit, 2).await.unwrap();
    h.sale
        .confirm(&room, first_visit, &bought.claim_id)
        .await
        .unwrap();
    h.store.leave(&room, first_visit).await.unwrap();

    let second_visit = VisitorId::random();
    let place = h
        .store
        .join_with(&room, second_visit, &as_user("alice"))
        .await
        .unwrap();
    assert_eq!(place.visitor, second_visit, "a new visit: a new visitor");
    assert!(
        matches!(
            claim(second_visit, 1).await,
            Err(SaleError::LimitReached(2))
        ),
        "the limit counts the user's units of every visit"
    );

    // Another user, and a visitor without one, count alone.
    let bob = VisitorId::random();
    h.store
        .join_with(&room, bob, &as_user("bob"))
        .await
        .unwrap();
    let held = claim(bob, 2).await.unwrap();
    let anonymous = VisitorId::random();
    h.store.join(&room, anonymous).await.unwrap();
    assert_eq!(h.store.user_of(&room, anonymous).await.unwrap(), None);
    claim(anonymous, 2).await.unwrap();
    // A hold given back gives the user's units back.
    h.sale.release(&room, bob, &held.claim_id).await.unwrap();
    let other_device = h
        .store
        .join_with(&room, VisitorId::random(), &as_user("bob"))
        .await
        .unwrap();
    assert_eq!(
        other_device.visitor, bob,
        "bob's place, from another device"
    );
    claim(bob, 2).await.unwrap();
}

pub async fn a_pass_taken_back_gives_its_holds_back(h: &Harness) {
    use waitroom::words::PlaceState;
    let room = h.room("shop", 100, None).await;
    sale(
        h,
        r#"{"seats": ["A1", "A2", "A3", "A4", "A5"], "per_user_limit": 3}"#,
    )
    .await;
    let (store, sales) = (h.store.as_ref(), h.sale.as_ref());
    let (revoked, state) = h.join(&room).await;
    let PlaceState::Admitted { expires_at, .. } = state else {
        panic!("admitted, got {state:?}")
    };
    let bought = h
        .sale
        .claim(&room, revoked, &seats(&["A1"]), None)
        .await
        .unwrap();
    h.sale
        .confirm(&room, revoked, &bought.claim_id)
        .await
        .unwrap();
    let held = h
        .sale
        .claim(&room, revoked, &seats(&["A2", "A3"]), None)
        .await
        .unwrap();

    // Another admission's pass takes nothing, holds included.
    assert!(
        !take_back_pass(
            store,
            sales,
            &room,
            revoked,
            Some(expires_at / 1000 + 1),
            PassTakenBack::Revoked,
        )
        .await
        .unwrap()
    );
    assert_eq!(
        h.sale.sale(&room).await.unwrap().seats["A2"],
        SeatState::Held
    );

    assert!(
        take_back_pass(
            store,
            sales,
            &room,
            revoked,
            Some(expires_at / 1000),
            PassTakenBack::Revoked,
        )
        .await
        .unwrap()
    );
    let view = h.sale.sale(&room).await.unwrap();
    assert_eq!(
        (view.seats["A1"], view.seats["A2"], view.seats["A3"]),
        (SeatState::Sold, SeatState::Free, SeatState::Free),
        "the holds went back with the pass; the order stays"
    );
    assert!(matches!(
        h.sale.confirm(&room, revoked, &held.claim_id).await,
        Err(SaleError::Released)
    ));
    let mine = h.sale.claims_of(&room, revoked).await.unwrap();
    let mine: Vec<(&str, ClaimState)> = mine
        .iter()
        .map(|c| (c.claim_id.as_str(), c.state))
        .collect();
    assert_eq!(mine, [(bought.claim_id.as_str(), ClaimState::Confirmed)]);

    // Leaving gives them back the same way, and someone else may take them.
    let (leaver, _) = h.join(&room).await;
    h.sale
        .claim(&room, leaver, &seats(&["A2"]), None)
        .await
        .unwrap();
    give_up(store, sales, &room, leaver).await.unwrap();
    let (next, _) = h.join(&room).await;
    h.sale
        .claim(&room, next, &seats(&["A2", "A3"]), None)
        .await
        .unwrap();
    // A room without a sale gives nothing back, and that is no error.
    let bare = h.room("bare", 100, None).await;
    let (visitor, _) = h.join(&bare).await;
    assert!(
        take_back_pass(store, sales, &bare, visitor, None, PassTakenBack::Revoked)
            .await
            .unwrap()
    );
}

fn room_id() -> RoomId {
    RoomId::parse("shop").unwrap()
}

/// A mass expiry of holds is given back a slice at a time (a sweep never
/// grows with the sale), and a hold the slice has not reached yet already
/// counts as expired for whatever touches it: its owner's confirm, its
/// owner's next claim (the per-user limit) and a claim of its seat.
pub async fn a_mass_expiry_of_holds_is_given_back_a_slice_at_a_time(h: &Harness) {
    use waitroom::words::constants::SWEEP_SLICE;
    let count = 4 * SWEEP_SLICE + SWEEP_SLICE / 2;
    let names: Vec<String> = (0..count).map(|i| format!("S{i}")).collect();
    let room = sale(
        h,
        &serde_json::json!({"seats": names, "per_user_limit": 1, "hold_ttl_s": 10}).to_string(),
    )
    .await;
    let mut holds = Vec::new();
    for seat in &names {
        let visitor = VisitorId::random();
        let claim = h.sale.claim(&room, visitor, &seats(&[seat]), None).await;
        holds.push((claim.unwrap().claim_id, visitor, seat.clone()));
    }
    // Holds of one expiry are swept in their ids' order: the last ids last.
    holds.sort();
    h.clock.advance_ms(10_000);

    let (last_id, last_owner, _) = holds[holds.len() - 1].clone();
    assert!(
        matches!(
            h.sale.confirm(&room, last_owner, &last_id).await,
            Err(SaleError::HoldExpired)
        ),
        "a hold past its expiry is not confirmed, swept or not"
    );
    let (_, owner, _) = holds[holds.len() - 2].clone();
    let (_, _, their_seat) = holds[holds.len() - 3].clone();
    let again = h
        .sale
        .claim(&room, owner, &seats(&[&their_seat]), None)
        .await;
    assert!(
        again.is_ok(),
        "the owner's expired hold counts no more against the limit, and the seat \
         another expired hold kept is free: {again:?}"
    );

    let mut answers = Vec::new();
    let mut more = Vec::new();
    loop {
        let stock = h.sale.stock(&room).await.unwrap();
        answers.push((stock.left, stock.held));
        more.push(stock.sweep_left);
        if stock.held <= 1 || answers.len() > 10 {
            break;
        }
    }
    assert_eq!(
        more,
        [true, true, false],
        "a stock read says when its slice was full"
    );
    // The confirm's call swept a slice and settled one; the claim's call a
    // slice and two, and held one seat again; each call after it sweeps one
    // slice more, and nothing is lost: all but the new hold are back.
    assert_eq!(
        answers,
        [
            (3 * SWEEP_SLICE + 2, count - 3 * SWEEP_SLICE - 2),
            (4 * SWEEP_SLICE + 2, count - 4 * SWEEP_SLICE - 2),
            (count - 1, 1),
        ]
    );
    assert_eq!(h.sale.claims_of(&room, last_owner).await.unwrap(), []);
    assert!(h.sale.orders(&room).await.unwrap().is_empty());
}

/// Whatever touches a hold past its expiry that the sweep has not reached
/// settles it first, the same on every store: a repeated claim's answer,
/// a release, the visitor's claims, the release of all their holds, a
/// stranger's confirm and the owner's; and nothing is lost once swept.
pub async fn holds_the_sweep_has_not_reached_are_settled_by_what_touches_them(h: &Harness) {
    use waitroom::words::constants::SWEEP_SLICE;
    let count = 5 * SWEEP_SLICE + 20;
    let room = sale(
        h,
        &format!(r#"{{"stock": {count}, "per_user_limit": 1, "hold_ttl_s": 10}}"#),
    )
    .await;
    let mut holds = Vec::new();
    for _ in 0..count {
        let visitor = VisitorId::random();
        let claim = h
            .sale
            .claim(&room, visitor, &Want::Quantity(1), Some("k"))
            .await;
        holds.push((claim.unwrap().claim_id, visitor));
    }
    // Holds of one expiry are swept in their ids' order: the last ids last,
    // and every call below sweeps a slice before it does its own work.
    holds.sort();
    let last = |n: usize| holds[holds.len() - n].clone();
    h.clock.advance_ms(10_000);

    let (id, owner) = last(1);
    let replay = h
        .sale
        .claim(&room, owner, &Want::Quantity(1), Some("k"))
        .await;
    assert_eq!(
        replay.unwrap().state,
        ClaimState::Expired,
        "a repeated claim"
    );
    let (id2, owner) = last(2);
    assert!(
        h.sale.release(&room, owner, &id2).await.is_ok(),
        "a release"
    );
    let (_, owner) = last(3);
    assert_eq!(h.sale.claims_of(&room, owner).await.unwrap(), [], "claims");
    let (_, owner) = last(4);
    assert_eq!(h.sale.release_holds_of(&room, owner).await.unwrap(), 0);
    let (id5, owner) = last(5);
    assert!(matches!(
        h.sale.confirm(&room, VisitorId::random(), &id5).await,
        Err(SaleError::ClaimNotFound)
    ));
    assert!(matches!(
        h.sale.confirm(&room, owner, &id5).await,
        Err(SaleError::HoldExpired)
    ));
    assert_ne!(id, id5);

    let mut calls = 0;
    let stock = loop {
        calls += 1;
        let stock = h.sale.stock(&room).await.unwrap();
        if stock.held == 0 || calls > 10 {
            break stock;
        }
    };
    assert_eq!((stock.left, stock.held), (count, 0), "nothing lost");
}

/// A claim the stock would refuse while expired holds wait for the sweep
/// gives back as many of them as it needs first (its quantity may be more
/// than the slice).
pub async fn a_claim_the_stock_lacks_gives_back_expired_holds_first(h: &Harness) {
    use waitroom::words::constants::SWEEP_SLICE;
    let count = SWEEP_SLICE + 10;
    let room = sale(
        h,
        &format!(r#"{{"stock": {count}, "per_user_limit": 1000, "hold_ttl_s": 10}}"#),
    )
    .await;
    for _ in 0..count {
        let claim = h
            .sale
            .claim(&room, VisitorId::random(), &Want::Quantity(1), None)
            .await;
        assert!(claim.is_ok());
    }
    h.clock.advance_ms(10_000);
    let big = h
        .sale
        .claim(
            &room,
            VisitorId::random(),
            &Want::Quantity(SWEEP_SLICE + 5),
            None,
        )
        .await;
    assert!(big.is_ok(), "the slice and five more given back: {big:?}");
    let stock = h.sale.stock(&room).await.unwrap();
    assert_eq!(
        (stock.left, stock.held),
        (5, 1),
        "the last five swept after"
    );
}
