//! Fan-out: turning what the hub decided under the registry's lock into
//! messages on sockets, after the lock is released. Each status is encoded
//! (and an admitted visitor's pass signed) and sent on its socket's home
//! worker (see [`super::home`]), a turn of statuses at a time, so that HTTP
//! requests on the same worker wait one turn at most.

use std::collections::HashMap;
use std::sync::Arc;

use actix_ws::CloseReason;

use super::home::Home;
use super::outlet::{Outlet, Refused};
use super::registry::{Registry, SocketId};
use crate::words::credentials::Credentials;
use crate::words::status::{Status, StatusInput, TicketReturn};
use crate::words::{LineSummary, PlaceState, RoomFacts, RoomId, VisitorId};

/// Fewest statuses worth sending from their homes; fewer (one socket's
/// first status, a small room's tick) are sent from the calling thread.
const AT_HOME_FROM: usize = 256;
/// Statuses a home encodes and sends before it lets its other tasks run.
const STATUSES_PER_TURN: usize = 128;

/// One socket's status, decided and numbered under the lock.
pub struct Pending {
    pub id: SocketId,
    pub outlet: Arc<Outlet>,
    pub sequence: u64,
    pub ticket: Arc<str>,
    pub visitor: VisitorId,
    pub state: PlaceState,
    pub priority: Option<Arc<str>>,
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

    /// Encodes and sends every status, each from its socket's home when the
    /// batch is big; the sockets that refused theirs are forgotten.
    pub fn deliver(self, credentials: &Arc<Credentials>, registry: &Arc<Registry>) {
        let Batch {
            room,
            line,
            facts,
            statuses,
            close_after,
        } = self;
        let shared = Arc::new(Shared {
            room,
            line,
            facts,
            close_after,
        });
        if statuses.len() < AT_HOME_FROM {
            registry.forget(&shared.room, shared.send(&statuses, credentials));
            return;
        }
        let mut by_home: HashMap<usize, (Arc<Home>, Vec<Pending>)> = HashMap::new();
        let mut homeless = Vec::new();
        for pending in statuses {
            match pending.outlet.home() {
                Some(home) => {
                    by_home
                        .entry(home.id())
                        .or_insert_with(|| (home.clone(), Vec::new()))
                        .1
                        .push(pending);
                }
                None => homeless.push(pending),
            }
        }
        registry.forget(&shared.room, shared.send(&homeless, credentials));
        for (home, statuses) in by_home.into_values() {
            let (shared, credentials, registry) =
                (shared.clone(), credentials.clone(), registry.clone());
            // A home that stopped took its sockets with it: nothing to send.
            let _ = home.run(Box::pin(async move {
                let mut refused = Vec::new();
                for turn in statuses.chunks(STATUSES_PER_TURN) {
                    refused.extend(shared.send(turn, &credentials));
                    tokio::task::yield_now().await;
                }
                registry.forget(&shared.room, refused);
            }));
        }
    }
}

/// What every status of a batch is built from, beside its socket's own.
struct Shared {
    room: RoomId,
    line: LineSummary,
    facts: Arc<RoomFacts>,
    close_after: Option<CloseReason>,
}

impl Shared {
    /// Encodes and sends `statuses`; returns the sockets that refused theirs.
    fn send(&self, statuses: &[Pending], credentials: &Credentials) -> Vec<(SocketId, Refused)> {
        let mut refused = Vec::new();
        for pending in statuses {
            let status = Status::build(
                StatusInput {
                    room: &self.room,
                    ticket: &pending.ticket,
                    ret: TicketReturn::ReadFromTicket,
                    visitor: pending.visitor,
                    state: pending.state,
                    line: &self.line,
                    facts: &self.facts,
                    priority: pending.priority.as_deref(),
                    notify: None,
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
    }
}

/// One message for many sockets (the store is down, say).
pub fn broadcast(text: &str, outlets: &[(SocketId, Arc<Outlet>)]) -> Vec<(SocketId, Refused)> {
    outlets
        .iter()
        .filter_map(|(id, outlet)| {
            outlet
                .send_text(text.to_string())
                .err()
                .map(|why| (*id, why))
        })
        .collect()
}
