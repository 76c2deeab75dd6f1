//! The send side of one visitor's socket, shared by the hub's fan-outs and
//! the socket's own loop: text messages go into the socket's lane (see
//! [`super::lane`]) when the connection has one, control frames through
//! its actix-ws `Session`. A send never waits: both queues are bounded, and
//! a client that lets one fill is too slow to read, so its socket is asked
//! to close with 1013 (the client reconnects and resumes) instead of
//! growing memory.

use std::sync::Arc;

use actix_ws::{CloseCode, CloseReason, Closed, Session};
use futures_util::FutureExt;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::home::Home;
use super::lane::Lane;
pub use super::lane::Refused;

pub struct Outlet {
    inner: Mutex<Inner>,
    /// The worker thread the socket lives on, where its statuses are best
    /// sent from (none in unit tests).
    home: Option<Arc<Home>>,
    /// Wakes the socket's loop once a close is asked for.
    closing_asked: Notify,
}

struct Inner {
    wire: Wire,
    /// Where text messages go, when the socket has a lane (see
    /// [`super::lane`]); else they go through the session.
    lane: Option<Arc<Lane>>,
    /// The newest status this socket was sent (see [`Outlet::send_status`]).
    last_sequence: u64,
    /// Text messages offered so far: the socket's heartbeat pings only a
    /// socket that was sent none since its last beat.
    texts_sent: u64,
    /// Set once: nothing more is sent, and the loop closes with this reason.
    closing: Option<CloseReason>,
}

enum Wire {
    Session(Session),
    /// Keeps what was sent, up to a number of messages: the hub's unit tests
    /// run without sockets.
    #[cfg(test)]
    Recording {
        sent: Vec<String>,
        capacity: usize,
    },
}

/// The reason given with close code 1012, when the node stops: the client
/// reconnects (to another node) and keeps its place.
pub const SERVICE_RESTART: &str = "service restart";

pub fn close_reason(code: CloseCode, description: &str) -> CloseReason {
    CloseReason {
        code,
        description: Some(description.to_string()),
    }
}

impl Outlet {
    pub fn new(session: Session, home: Arc<Home>, lane: Option<Arc<Lane>>) -> Self {
        let outlet = Self::with_wire(Wire::Session(session), Some(home));
        outlet.inner.lock().lane = lane;
        outlet
    }

    #[cfg(test)]
    pub fn recording(capacity: usize) -> Self {
        let wire = Wire::Recording {
            sent: Vec::new(),
            capacity,
        };
        Self::with_wire(wire, None)
    }

    fn with_wire(wire: Wire, home: Option<Arc<Home>>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                wire,
                lane: None,
                last_sequence: 0,
                texts_sent: 0,
                closing: None,
            }),
            home,
            closing_asked: Notify::new(),
        }
    }

    pub fn home(&self) -> Option<&Arc<Home>> {
        self.home.as_ref()
    }

    /// Sends a status numbered `sequence` by its room. Statuses are encoded
    /// outside the hub's lock, so two can reach here out of order; an older
    /// one than the socket already has is dropped, since the newer one says
    /// everything it would.
    pub fn send_status(&self, sequence: u64, text: String) -> Result<(), Refused> {
        let mut inner = self.inner.lock();
        if sequence <= inner.last_sequence {
            return Ok(());
        }
        inner.last_sequence = sequence;
        self.push(&mut inner, Outgoing::Text(text))
    }

    /// Sends a text message that is no status (an error, a pong).
    pub fn send_text(&self, text: String) -> Result<(), Refused> {
        self.push(&mut self.inner.lock(), Outgoing::Text(text))
    }

    pub fn send_ping(&self) -> Result<(), Refused> {
        self.push(&mut self.inner.lock(), Outgoing::Ping)
    }

    pub fn send_pong(&self, payload: &[u8]) -> Result<(), Refused> {
        self.push(&mut self.inner.lock(), Outgoing::Pong(payload))
    }

    /// How many text messages (statuses among them) the socket was offered.
    pub fn texts_sent(&self) -> u64 {
        self.inner.lock().texts_sent
    }

    /// Asks the socket's loop to close with `reason`, after what is queued.
    /// The first reason given wins.
    pub fn close(&self, reason: CloseReason) {
        let mut inner = self.inner.lock();
        if inner.closing.is_none() {
            inner.closing = Some(reason);
            self.closing_asked.notify_one();
        }
    }

    /// Waits until a close is asked for, and says why.
    pub async fn closing(&self) -> CloseReason {
        loop {
            if let Some(reason) = self.inner.lock().closing.clone() {
                return reason;
            }
            self.closing_asked.notified().await;
        }
    }

    fn push(&self, inner: &mut Inner, message: Outgoing<'_>) -> Result<(), Refused> {
        if inner.closing.is_some() {
            return Err(Refused::Closing);
        }
        if matches!(message, Outgoing::Text(_)) {
            inner.texts_sent += 1;
        }
        let sent = match (&mut inner.wire, &inner.lane, message) {
            (_, Some(lane), Outgoing::Text(text)) => match lane.send_text(&text) {
                Ok(()) => Some(Ok(())),
                Err(Refused::TooSlow) => None,
                Err(Refused::Closing) => Some(Err(Closed)),
            },
            (Wire::Session(session), _, message) => try_send(session, message),
            #[cfg(test)]
            (Wire::Recording { sent, capacity }, _, message) => {
                if sent.len() == *capacity {
                    None
                } else {
                    if let Outgoing::Text(text) = message {
                        sent.push(text);
                    }
                    Some(Ok(()))
                }
            }
        };
        match sent {
            Some(Ok(())) => Ok(()),
            Some(Err(Closed)) => {
                inner.closing = Some(close_reason(CloseCode::Away, "closed"));
                self.closing_asked.notify_one();
                Err(Refused::Closing)
            }
            None => {
                inner.closing = Some(close_reason(
                    CloseCode::Again,
                    "too slow to read; reconnect",
                ));
                self.closing_asked.notify_one();
                Err(Refused::TooSlow)
            }
        }
    }

    /// The text messages a recording outlet took, oldest first.
    #[cfg(test)]
    pub fn recorded(&self) -> (Vec<String>, Option<CloseReason>) {
        let inner = self.inner.lock();
        let Wire::Recording { sent, .. } = &inner.wire else {
            return (Vec::new(), inner.closing.clone());
        };
        (sent.clone(), inner.closing.clone())
    }
}

enum Outgoing<'a> {
    Text(String),
    Ping,
    Pong(&'a [u8]),
}

/// Queues one message if the session's queue has room now: `None` if it
/// is full. actix-ws's sends wait for room; polling once and giving up is
/// what turns its bounded queue into a bound on a slow client.
///
/// The poll is unconstrained by tokio's cooperative budget: a task that
/// has done its 128 operations sees every channel as full until it
/// yields, and a task telling hundreds of sockets in a row (the draw's
/// positions) would otherwise close all but the first 128 as too slow.
fn try_send(session: &mut Session, message: Outgoing<'_>) -> Option<Result<(), Closed>> {
    match message {
        Outgoing::Text(text) => tokio::task::unconstrained(session.text(text)).now_or_never(),
        Outgoing::Ping => tokio::task::unconstrained(session.ping(b"")).now_or_never(),
        Outgoing::Pong(payload) => tokio::task::unconstrained(session.pong(payload)).now_or_never(),
    }
}

#[cfg(test)]
mod tests {
    use actix_web::FromRequest;
    use actix_web::http::header;
    use actix_web::test::TestRequest;

    use super::*;

    /// A session as a WebSocket handshake makes it, with its response
    /// (whose body drains the session's queue) kept but never read.
    async fn session() -> (Session, actix_web::HttpResponse) {
        let (request, mut payload) = TestRequest::default()
            .insert_header((header::UPGRADE, "websocket"))
            .insert_header((header::CONNECTION, "upgrade"))
            .insert_header((header::SEC_WEBSOCKET_VERSION, "13"))
            .insert_header((header::SEC_WEBSOCKET_KEY, "dGhlIHNhbXBsZSBub25jZQ=="))
            .to_http_parts();
        let body = actix_web::web::Payload::from_request(&request, &mut payload)
            .await
            .expect("a payload");
        let (response, session, _messages) = actix_ws::handle(&request, body).expect("handshake");
        (session, response)
    }

    /// tokio gives a task a budget of operations per poll and then makes
    /// every channel look full until it yields; a fan-out task telling
    /// hundreds of sockets (the draw's) must not read that as slow clients.
    #[tokio::test]
    async fn a_task_that_tells_many_sockets_is_not_refused_by_its_budget() {
        let mut outlets = Vec::new();
        let mut responses = Vec::new();
        for _ in 0..500 {
            let (session, response) = session().await;
            outlets.push(Outlet::with_wire(Wire::Session(session), None));
            responses.push(response);
        }
        let refused = tokio::spawn(async move {
            outlets
                .iter()
                .filter(|outlet| outlet.send_status(1, "{}".into()).is_err())
                .count()
        })
        .await
        .unwrap();
        assert_eq!(refused, 0);
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_is_refused_once_its_queue_is_full() {
        let (session, _response) = session().await;
        let outlet = Outlet::with_wire(Wire::Session(session), None);
        let taken = (1..=100)
            .take_while(|sequence| outlet.send_status(*sequence, "{}".into()).is_ok())
            .count();
        assert_eq!(taken, 32, "actix-ws queues 32 messages per session");
        assert_eq!(outlet.send_text("x".into()), Err(Refused::Closing));
    }
}
