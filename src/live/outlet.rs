//! The send side of one visitor's socket, shared by the hub's fan-outs and
//! the socket's own loop: every message it sends (statuses, other texts,
//! pings, pongs) goes as a frame into the socket's lane (see
//! [`super::lane`]), the one path to the connection. A send never waits:
//! the lane is bounded, and a client that lets it fill is too slow to read,
//! so its socket is asked to close with 1013 (the client reconnects and
//! resumes) instead of growing memory.

use std::sync::Arc;

use actix_ws::{CloseCode, CloseReason};
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
    /// The newest status this socket was sent (see [`Outlet::send_status`]).
    last_sequence: u64,
    /// Text messages offered so far: the socket's heartbeat pings only a
    /// socket that was sent none since its last beat.
    texts_sent: u64,
    /// Set once: nothing more is sent, and the loop closes with this reason.
    closing: Option<CloseReason>,
}

enum Wire {
    Lane(Arc<Lane>),
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
    pub fn new(lane: Arc<Lane>, home: Arc<Home>) -> Self {
        Self::with_wire(Wire::Lane(lane), Some(home))
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
        let sent = match &mut inner.wire {
            Wire::Lane(lane) => match message {
                Outgoing::Text(text) => lane.send_text(&text),
                Outgoing::Ping => lane.send_ping(),
                Outgoing::Pong(payload) => lane.send_pong(payload),
            },
            #[cfg(test)]
            Wire::Recording { sent, capacity } => {
                if sent.len() == *capacity {
                    Err(Refused::TooSlow)
                } else {
                    if let Outgoing::Text(text) = message {
                        sent.push(text);
                    }
                    Ok(())
                }
            }
        };
        let reason = match sent {
            Ok(()) => return Ok(()),
            // The relay ended: the connection is gone.
            Err(Refused::Closing) => close_reason(CloseCode::Away, "closed"),
            Err(Refused::TooSlow) => close_reason(CloseCode::Again, "too slow to read; reconnect"),
        };
        inner.closing = Some(reason);
        self.closing_asked.notify_one();
        sent
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane whose connection never comes (its handshake's answer is not
    /// written yet): every frame waits, as for a client that reads nothing.
    #[test]
    fn a_client_that_reads_nothing_is_refused_once_its_lane_is_full() {
        let outlet = Outlet::with_wire(Wire::Lane(Lane::new()), None);
        let taken = (1..=100)
            .take_while(|sequence| outlet.send_status(*sequence, "{}".into()).is_ok())
            .count();
        assert_eq!(taken, 32, "a lane holds 32 waiting frames");
        let closing = outlet.inner.lock().closing.clone();
        assert_eq!(closing.expect("asked to close").code, CloseCode::Again);
        assert_eq!(outlet.send_text("x".into()), Err(Refused::Closing));
        assert_eq!(outlet.send_ping(), Err(Refused::Closing));
    }

    #[test]
    fn a_socket_whose_relay_ended_is_closed_as_gone() {
        let lane = Lane::new();
        let outlet = Outlet::with_wire(Wire::Lane(lane.clone()), None);
        outlet.send_pong(b"p").unwrap();
        lane.close();
        assert_eq!(outlet.send_status(1, "{}".into()), Err(Refused::Closing));
        let closing = outlet.inner.lock().closing.clone();
        assert_eq!(closing.expect("asked to close").code, CloseCode::Away);
    }
}
