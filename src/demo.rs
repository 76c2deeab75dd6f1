//! The demo room (`--demo-room`): room `demo`, admitting 2 visitors every
//! 5 s, with simulated visitors arriving a little slower than that, so a
//! person who opens the page sees a line that moves.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;

use crate::admission::model::{RoomConfig, RoomId, VisitorId};
use crate::admission::store::{Store, StoreError};

pub const DEMO_ROOM: &str = "demo";
/// Simulated visitors already waiting when the demo starts.
const INITIAL_LINE: usize = 12;

pub async fn create(store: &dyn Store) -> Result<RoomId, StoreError> {
    let id = RoomId::parse(DEMO_ROOM).expect("a valid slug");
    let mut config = RoomConfig::new("Demo sale", "/demo/target");
    config.admit_per_tick = 2;
    config.tick_ms = 5_000;
    config.pass_ttl_s = 120;
    match store.create_room(id.clone(), config).await {
        Ok(_) | Err(StoreError::RoomExists(_)) => Ok(id),
        Err(error) => Err(error),
    }
}

/// Joins simulated visitors (0 to 3 per tick, 1.5 on average against 2
/// admitted) and keeps them present, until shutdown.
pub async fn simulate_visitors(
    store: Arc<dyn Store>,
    room: RoomId,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut crowd: Vec<VisitorId> = Vec::new();
    for _ in 0..INITIAL_LINE {
        join(store.as_ref(), &room, &mut crowd).await;
    }
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
                        && matches!(place.state, crate::admission::model::PlaceState::Waiting { .. })
                    {
                        still_waiting.push(visitor);
                    }
                }
                crowd = still_waiting;
            }
            _ = shutdown.changed() => break,
        }
    }
}

async fn join(store: &dyn Store, room: &RoomId, crowd: &mut Vec<VisitorId>) {
    let visitor = VisitorId::random();
    if store.join(room, visitor).await.is_ok() {
        crowd.push(visitor);
    }
}
