//! The write side of one visitor's WebSocket, shared by the hub and the
//! socket's own task. The hub writes each status frame straight to the
//! kernel from its fan-out (one `write` per socket per tick, no task woken);
//! only what the kernel does not take at once is queued, bounded, for the
//! socket's task to flush. A client whose queue would pass the bound is too
//! slow to read and is closed.

use std::io;
use std::sync::OnceLock;
use std::time::Instant;

use actix_http::ws::{CloseCode, CloseReason, OpCode, Parser};
use actix_web::web::BytesMut;
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// Bytes queued for a socket, beyond what its kernel buffer holds, before
/// the client counts as too slow to read: some fifty statuses.
pub const MAX_PENDING_BYTES: usize = 16 * 1024;

pub struct Connection {
    /// Set once the handshake's answer is written; frames sent before go to `pending`.
    stream: OnceLock<TcpStream>,
    outgoing: Mutex<Outgoing>,
    /// Wakes the socket's task: there is something to flush, or to close.
    wake: Notify,
}

#[derive(Default)]
struct Outgoing {
    pending: Vec<u8>,
    /// When `pending` last went from empty to not.
    pending_since: Option<Instant>,
    /// Set once: no more frames are taken, and the task ends the socket.
    closing: Option<Ending>,
}

/// How a socket ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The connection is broken or the client hung up: nothing more to write.
    Broken,
    /// With a close frame: this code and reason, or none (answering a
    /// client's close).
    Close(Option<CloseReason>),
}

/// Why a connection took nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The client is too slow to read: this message would pass the bound.
    TooSlow,
    /// The socket is ending already.
    Closing,
}

impl Connection {
    pub fn new() -> Self {
        Self {
            stream: OnceLock::new(),
            outgoing: Mutex::new(Outgoing::default()),
            wake: Notify::new(),
        }
    }

    /// Sends one message (text, ping or pong) as a frame: written now if
    /// the kernel takes it, queued otherwise.
    pub fn send(&self, op: OpCode, payload: &[u8]) -> Result<(), Refused> {
        let mut frame = BytesMut::with_capacity(payload.len() + 4);
        Parser::write_message(&mut frame, payload, op, true, false);
        self.send_frame(&frame)
    }

    /// Sends one whole, encoded frame.
    pub fn send_frame(&self, frame: &[u8]) -> Result<(), Refused> {
        let mut out = self.outgoing.lock();
        if out.closing.is_some() {
            return Err(Refused::Closing);
        }
        let mut rest = frame;
        if out.pending.is_empty()
            && let Some(stream) = self.stream.get()
        {
            match stream.try_write(frame) {
                Ok(written) => rest = &frame[written..],
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    out.closing = Some(Ending::Broken);
                    self.wake.notify_one();
                    return Err(Refused::Closing);
                }
            }
            if rest.is_empty() {
                return Ok(());
            }
        }
        if out.pending.len() + rest.len() > MAX_PENDING_BYTES {
            out.closing = Some(Ending::Close(Some(reason(
                CloseCode::Again,
                "too slow to read; reconnect",
            ))));
            self.wake.notify_one();
            return Err(Refused::TooSlow);
        }
        if out.pending.is_empty() {
            out.pending_since = Some(Instant::now());
        }
        out.pending.extend_from_slice(rest);
        self.wake.notify_one();
        Ok(())
    }

    /// Asks the socket's task to close with `reason`, after what is queued.
    /// The first reason given wins.
    pub fn close(&self, reason: CloseReason) {
        let mut out = self.outgoing.lock();
        if out.closing.is_none() {
            out.closing = Some(Ending::Close(Some(reason)));
            self.wake.notify_one();
        }
    }

    pub(super) fn attach(&self, stream: TcpStream) {
        if self.stream.set(stream).is_ok() {
            self.wake.notify_one();
        }
    }

    pub(super) fn stream(&self) -> Option<&TcpStream> {
        self.stream.get()
    }

    pub(super) async fn woken(&self) {
        self.wake.notified().await
    }

    pub(super) fn has_pending(&self) -> bool {
        !self.outgoing.lock().pending.is_empty()
    }

    /// When the oldest queued byte was queued, if any is.
    pub(super) fn pending_since(&self) -> Option<Instant> {
        self.outgoing.lock().pending_since
    }

    /// Writes what is queued, as far as the kernel takes it.
    pub(super) fn flush(&self) -> io::Result<()> {
        let Some(stream) = self.stream.get() else {
            return Ok(());
        };
        let mut out = self.outgoing.lock();
        while !out.pending.is_empty() {
            match stream.try_write(&out.pending) {
                Ok(written) => {
                    out.pending.drain(..written);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) => return Err(error),
            }
        }
        // A socket that once fell behind keeps no buffer once it caught up.
        out.pending = Vec::new();
        out.pending_since = None;
        Ok(())
    }

    /// Whether the socket was asked to end, and how.
    pub(super) fn ending(&self) -> Option<Ending> {
        self.outgoing.lock().closing.clone()
    }

    /// Marks the connection ending (so the hub stops writing) and returns
    /// what is still queued, for the task to write before its close frame.
    pub(super) fn finish(&self, ending: &Ending) -> Vec<u8> {
        let mut out = self.outgoing.lock();
        out.closing.get_or_insert_with(|| ending.clone());
        std::mem::take(&mut out.pending)
    }

    /// What was queued and never written: the frames sent before a stream
    /// was attached. For tests of the hub, which run without sockets.
    #[cfg(test)]
    pub fn queued(&self) -> (Vec<u8>, Option<Ending>) {
        let out = self.outgoing.lock();
        (out.pending.clone(), out.closing.clone())
    }
}

impl Default for Connection {
    fn default() -> Self {
        Self::new()
    }
}

pub fn reason(code: CloseCode, description: &str) -> CloseReason {
    CloseReason {
        code,
        description: Some(description.to_string()),
    }
}
