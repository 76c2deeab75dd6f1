//! A socket's outgoing lane: the one queue of bytes in front of its
//! connection, and the one way a status (any message we send) reaches it.
//! Two writers share it. The socket's outlet puts each text message, ping
//! and pong here as a whole WebSocket frame, written at once when nothing
//! waits before it. The connection's relay puts here the one frame
//! actix-ws still sends (the close) and writes whatever had to wait.
//!
//! Why: at a tick every socket gets a status, and through actix-ws's
//! `Session` each would cost a channel send, a wake-up of the relay's task
//! and its poll before the write; on 2 cores that makes the fan-out
//! 1.5–1.7× the cost of writing the same frames straight to the same
//! connections (BENCHMARKS.md, "the fan-out against its floor"). A ping
//! or pong through actix-ws takes the same hop and wake-up: here it is one
//! more frame.
//! actix-ws still carries the handshake, everything the client sends, and
//! the close frame: the session's close ends actix-ws's response body,
//! which tells the relay the socket is done.
//!
//! Frames are encoded by actix-http's own WebSocket `Parser`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use actix_http::ws::{OpCode, Parser};
use bytes::{Buf, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::net::TcpStream;

/// Why a message was not taken (by the lane, or by the socket's outlet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The client is too slow to read: its queue is full.
    TooSlow,
    /// The socket is closing already.
    Closing,
}

/// Frames the outlet may leave waiting on a client that does not read
/// (what actix-ws bounded its own queue at).
const QUEUED_FRAMES_LIMIT: usize = 32;

thread_local! {
    static FRAME: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

#[derive(Default)]
pub struct Lane {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The connection, once the handshake's answer is written.
    io: Option<Arc<TcpStream>>,
    /// Bytes waiting, oldest first; the front may be a frame's rest.
    queued: VecDeque<Bytes>,
    /// Woken when the fan-out leaves bytes waiting.
    relay: Option<Waker>,
    /// The relay ended: nothing more is taken.
    closed: bool,
}

impl Lane {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Sends one text message as a frame: written now if nothing waits
    /// before it and the connection takes it, else queued for the relay.
    pub fn send_text(&self, text: &str) -> Result<(), Refused> {
        self.send(text.as_bytes(), OpCode::Text)
    }

    /// Sends a ping frame with an empty payload.
    pub fn send_ping(&self) -> Result<(), Refused> {
        self.send(b"", OpCode::Ping)
    }

    /// Sends a pong frame echoing a ping's `payload`.
    pub fn send_pong(&self, payload: &[u8]) -> Result<(), Refused> {
        self.send(payload, OpCode::Pong)
    }

    fn send(&self, payload: &[u8], opcode: OpCode) -> Result<(), Refused> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(Refused::Closing);
        }
        if state.queued.len() >= QUEUED_FRAMES_LIMIT {
            return Err(Refused::TooSlow);
        }
        FRAME.with_borrow_mut(|frame| {
            // Encoded in this thread's buffer: most frames are written at
            // once, and only what has to wait is copied.
            frame.clear();
            Parser::write_message(frame, payload, opcode, true, false);
            let mut unwritten = &frame[..];
            if state.queued.is_empty()
                && let Some(io) = &state.io
            {
                match io.try_write(unwritten) {
                    Ok(written) => unwritten = &unwritten[written..],
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    // The relay finds the same error on its next write.
                    Err(_) => {}
                }
            }
            if !unwritten.is_empty() {
                state.queued.push_back(Bytes::copy_from_slice(unwritten));
                if let Some(relay) = &state.relay {
                    relay.wake_by_ref();
                }
            }
        });
        Ok(())
    }

    /// The relay's part: starts writing to `io` once the handshake's answer
    /// is out; what was sent meanwhile goes first.
    pub fn attach(&self, io: Arc<TcpStream>) {
        self.state.lock().io = Some(io);
    }

    /// The relay's part: queues a chunk from actix-ws, the close frame
    /// (bounded by actix-ws's own queue, which the relay stops draining
    /// while bytes wait here).
    pub fn push(&self, chunk: Bytes) {
        self.state.lock().queued.push_back(chunk);
    }

    /// The relay's part: writes what waits. Ready once nothing does (or the
    /// connection failed); pending while the connection is full.
    pub fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut state = self.state.lock();
        let State {
            io, queued, relay, ..
        } = &mut *state;
        if !relay.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *relay = Some(cx.waker().clone());
        }
        let Some(io) = io else {
            return Poll::Ready(Ok(()));
        };
        while let Some(front) = queued.front_mut() {
            std::task::ready!(io.poll_write_ready(cx))?;
            match io.try_write(front) {
                Ok(written) if written == front.len() => {
                    queued.pop_front();
                }
                Ok(written) => front.advance(written),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
        if queued.capacity() > 0 {
            // A socket that is mostly idle keeps no queue. Every socket's
            // first status waits here for the handshake's answer, and the
            // queue it grew (128 bytes) was kept for the socket's life.
            *queued = VecDeque::new();
        }
        Poll::Ready(Ok(()))
    }

    /// The relay's part: the connection is done with; later sends are
    /// refused, and the lane lets go of it, so the relay's drop closes it.
    pub fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        state.io = None;
        state.queued.clear();
        state.relay = None;
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    async fn connected() -> (Arc<TcpStream>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, server) = tokio::join!(client, listener.accept());
        (Arc::new(server.unwrap().0), client.unwrap())
    }

    /// Reads one unmasked server frame of a short text.
    async fn read_text(client: &mut TcpStream) -> String {
        let mut header = [0u8; 2];
        client.read_exact(&mut header).await.unwrap();
        assert_eq!(header[0], 0x81, "a final text frame");
        let mut payload = vec![0u8; usize::from(header[1])];
        client.read_exact(&mut payload).await.unwrap();
        String::from_utf8(payload).unwrap()
    }

    #[tokio::test]
    async fn frames_sent_before_the_connection_wait_and_go_first_in_order() {
        let (io, mut client) = connected().await;
        let lane = Lane::new();
        lane.send_text("one").unwrap();
        lane.attach(io);
        lane.send_text("two").unwrap();
        lane.push(Bytes::from_static(b"\x81\x05three"));
        poll_fn(|cx| lane.poll_flush(cx)).await.unwrap();
        lane.send_text("four").unwrap();
        for expected in ["one", "two", "three", "four"] {
            assert_eq!(read_text(&mut client).await, expected);
        }
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_is_refused_once_frames_wait() {
        let (io, _client) = connected().await;
        let lane = Lane::new();
        lane.attach(io);
        let big = "x".repeat(60_000);
        let taken = (0..10_000)
            .take_while(|_| lane.send_text(&big).is_ok())
            .count();
        assert!(
            taken > QUEUED_FRAMES_LIMIT,
            "the kernel's buffers take some"
        );
        assert_eq!(lane.send_text("x"), Err(Refused::TooSlow));
        lane.close();
        assert_eq!(lane.send_text("x"), Err(Refused::Closing));
    }
}
