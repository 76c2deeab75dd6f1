//! Fan-out: turning what the hub decided under the registry's lock into
//! messages on sockets, after the lock is released. Each status is encoded
//! (and an admitted visitor's pass signed) here, spread over the machine's
//! cores when a room has many sockets, so HTTP workers registering sockets
//! never wait on it.

use std::sync::Arc;

use actix_ws::CloseReason;

use super::outlet::{Outlet, Refused};
use super::registry::SocketId;
use crate::words::credentials::Credentials;
use crate::words::status::{Status, StatusInput};
use crate::words::{LineSummary, PlaceState, RoomFacts, RoomId, VisitorId};

/// Fewest sockets worth a fan-out thread of their own.
const SOCKETS_PER_THREAD: usize = 2048;

/// One socket's status, decided and numbered under the lock.
pub struct Pending {
    pub id: SocketId,
    pub outlet: Arc<Outlet>,
    pub sequence: u64,
    pub ticket: Arc<str>,
    pub visitor: VisitorId,
    pub state: PlaceState,
}

/// The statuses of one room after one event, and what they share.
pub struct Batch {
    pub room: RoomId,
    pub line: LineSummary,
    pub facts: Arc<RoomFacts>,
    pub statuses: Vec<Pending>,
    /// Closes every socket of the batch once its status is sent.
    pub close_after: Option<CloseReason>,
}

impl Batch {
    pub fn new(room: RoomId, line: LineSummary, facts: Arc<RoomFacts>) -> Self {
        Self {
            room,
            line,
            facts,
            statuses: Vec::new(),
            close_after: None,
        }
    }

    /// Encodes and sends every status; returns the sockets that refused theirs.
    pub fn deliver(self, credentials: &Credentials) -> Vec<(SocketId, Refused)> {
        let send = |part: &[Pending]| {
            let mut refused = Vec::new();
            for pending in part {
                let status = Status::build(
                    StatusInput {
                        room: &self.room,
                        ticket: &pending.ticket,
                        visitor: pending.visitor,
                        state: pending.state,
                        line: &self.line,
                        facts: &self.facts,
                    },
                    credentials,
                );
                if let Err(why) = pending
                    .outlet
                    .send_status(pending.sequence, status.to_json())
                {
                    refused.push((pending.id, why));
                }
                if let Some(reason) = &self.close_after {
                    pending.outlet.close(reason.clone());
                }
            }
            refused
        };
        on_cores(&self.statuses, send)
    }
}

/// One message for many sockets (the store is down, say).
pub fn broadcast(text: &str, outlets: &[(SocketId, Arc<Outlet>)]) -> Vec<(SocketId, Refused)> {
    on_cores(outlets, |part| {
        part.iter()
            .filter_map(|(id, outlet)| {
                outlet
                    .send_text(text.to_string())
                    .err()
                    .map(|why| (*id, why))
            })
            .collect()
    })
}

/// Runs `work` over `items`, split over the machine's cores when there are
/// enough to be worth a thread each.
fn on_cores<T: Sync, R: Send>(items: &[T], work: impl Fn(&[T]) -> Vec<R> + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |cores| cores.get())
        .min(items.len() / SOCKETS_PER_THREAD);
    if threads <= 1 {
        return work(items);
    }
    let work = &work;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(items.len().div_ceil(threads))
            .map(|part| scope.spawn(move || work(part)))
            .collect();
        parts
            .into_iter()
            .flat_map(|part| part.join().expect("a fan-out thread panicked"))
            .collect()
    })
}
