//! The public sale view (`GET /api/rooms/{room}/sale`), served from a cache
//! on each node, read from the store at most once a second per room (api.md
//! allows a second's age). A seat map is read whole, so the read costs the
//! store work proportional to the seats, and every visitor's sale page asks
//! for it: without the cache that was one such read per request.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::store::SaleStore;
use crate::store::SaleStoreExt;
use crate::words::RoomId;
use crate::words::clock::{Clock, Millis};
use crate::words::sale::{SaleError, SaleView};

/// How old a view served may be.
pub const MAX_AGE_MS: Millis = 1_000;
/// Rooms whose views are kept before the map is pruned of those not asked
/// for lately (pruned again when it has doubled since).
const MIN_PRUNE: usize = 64;

#[derive(Default)]
pub struct SaleViews {
    /// Each room's last view; a room's slot is locked while its view is
    /// read, so requests that find it stale together wait for one read.
    rooms: Mutex<Rooms>,
}

#[derive(Default)]
struct Rooms {
    slots: HashMap<RoomId, Arc<tokio::sync::Mutex<Option<Read>>>>,
    prune_at: usize,
}

#[derive(Clone)]
struct Read {
    at: Millis,
    view: Arc<SaleView>,
}

impl SaleViews {
    /// The room's sale as `SaleStore::sale` reads it, at most `MAX_AGE_MS`
    /// old by `clock`.
    pub async fn get(
        &self,
        sales: &dyn SaleStore,
        clock: &dyn Clock,
        room: &RoomId,
    ) -> Result<Arc<SaleView>, SaleError> {
        let slot = self.slot(room, clock.now_ms());
        let mut last = slot.lock().await;
        let now = clock.now_ms();
        if let Some(read) = last.as_ref().filter(|read| now < read.at + MAX_AGE_MS) {
            return Ok(read.view.clone());
        }
        match sales.sale(room).await {
            Ok(view) => {
                let view = Arc::new(view);
                *last = Some(Read {
                    at: now,
                    view: view.clone(),
                });
                Ok(view)
            }
            Err(error) => {
                // No slot is kept for a room without a sale (made-up ids
                // would grow the map); one that had a sale is asked again.
                drop(last);
                self.rooms.lock().slots.remove(room);
                Err(error)
            }
        }
    }

    fn slot(&self, room: &RoomId, now: Millis) -> Arc<tokio::sync::Mutex<Option<Read>>> {
        let mut rooms = self.rooms.lock();
        if let Some(slot) = rooms.slots.get(room) {
            return slot.clone();
        }
        if rooms.slots.len() >= rooms.prune_at {
            // Views of rooms nobody asked about for a minute: gone (a slot
            // being read is in use, so kept).
            rooms.slots.retain(|_, slot| {
                slot.try_lock().map_or(true, |last| {
                    last.as_ref().is_some_and(|read| now < read.at + 60_000)
                })
            });
            rooms.prune_at = (2 * rooms.slots.len()).max(MIN_PRUNE);
        }
        rooms.slots.entry(room.clone()).or_default().clone()
    }
}
