//! The demo room (`--demo-room`): room `demo`, admitting 2 visitors every
//! 5 s, with simulated visitors arriving a little slower than that, so a
//! person who opens the page sees a line that moves; admitted, they reach a
//! seat sale of waitroom's own (rows A to E, 8 seats each, 4 per visitor).
//! With an opening (`--demo-opens-in`), the room is a scheduled drop: the
//! simulated crowd gathers in the pre-queue and is drawn with the person
//! watching.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::live::promoter::Wakeups;
use crate::store::SaleStore;
use crate::store::SaleStoreExt;
use crate::store::{Store, StoreError, StoreExt};
use crate::words::clock::Moment;
use crate::words::sale::{Inventory, SaleConfig};
use crate::words::{PlaceState, RoomConfig, RoomId, VisitorId};

pub const DEMO_ROOM: &str = "demo";
/// Simulated visitors already waiting when the demo starts.
const INITIAL_LINE: usize = 12;

/// Where admitted visitors go unless `--demo-target` says otherwise.
pub const DEMO_TARGET: &str = "/rooms/demo/sale";

pub async fn create(
    store: &dyn Store,
    sale: &dyn SaleStore,
    opens_at: Option<Moment>,
    target: Option<&str>,
) -> Result<RoomId, String> {
    let id = RoomId::parse(DEMO_ROOM).expect("a valid slug");
    let mut config = RoomConfig::new("Demo sale", target.unwrap_or(DEMO_TARGET));
    config.admit_per_tick = 2;
    config.tick_ms = 5_000;
    config.pass_ttl_s = 300;
    config.opens_at = opens_at;
    config.notice = Some(
        "This is a demo: the visitors ahead of you are simulated, and the seats are not real."
            .into(),
    );
    // A bad --demo-target stops the node at start, saying why.
    config
        .validate()
        .map_err(|reason| format!("--demo-target: {reason}"))?;
    match store.create_room(id.clone(), config).await {
        Ok(_) => {}
        // Another node of the deployment made it (and its sale) already.
        Err(StoreError::RoomExists(_)) => return Ok(id),
        Err(error) => return Err(error.to_string()),
    }
    let seats = ('A'..='E')
        .flat_map(|row| (1..=8).map(move |n| format!("{row}{n}")))
        .collect();
    let sale_config = SaleConfig {
        inventory: Inventory::Seats(seats),
        per_user_limit: 4,
        hold_ttl_s: 120,
    };
    sale.configure_sale(&id, sale_config)
        .await
        .map_err(|e| e.to_string())?;
    Ok(id)
}

/// Joins simulated visitors (0 to 3 per tick, 1.5 on average against 2
/// admitted) and keeps them present, until shutdown; like real visitors,
/// they wake the promoter.
pub async fn simulate_visitors(
    store: Arc<dyn Store>,
    wakeups: Arc<Wakeups>,
    room: RoomId,
    shutdown: CancellationToken,
) {
    let mut crowd: Vec<VisitorId> = Vec::new();
    for _ in 0..INITIAL_LINE {
        join(store.as_ref(), &room, &mut crowd).await;
    }
    wakeups.note(&room);
    let mut every_tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = every_tick.tick() => {
                let arrivals = rand::rng().random_range(0..=3);
                for _ in 0..arrivals {
                    join(store.as_ref(), &room, &mut crowd).await;
                }
                // Forget those no longer waiting, keep the rest present.
                let mut still_waiting = Vec::with_capacity(crowd.len());
                for visitor in crowd.drain(..) {
                    if let Ok(place) = store.status(&room, visitor).await
                        && matches!(
                            place.state,
                            PlaceState::Waiting { .. } | PlaceState::PreQueue { .. }
                        )
                    {
                        still_waiting.push(visitor);
                    }
                }
                crowd = still_waiting;
                wakeups.note(&room);
            }
            () = shutdown.cancelled() => break,
        }
    }
}

async fn join(store: &dyn Store, room: &RoomId, crowd: &mut Vec<VisitorId>) {
    let visitor = VisitorId::random();
    if store.join(room, visitor).await.is_ok() {
        crowd.push(visitor);
    }
}
