//! One visitor's WebSocket. The handshake request is an ordinary route:
//! authenticated, registered with the hub and given its place before the
//! `101` answer, so every refusal is a plain HTTP error. The `101` carries a
//! [`Handover`]; the upgrade path ([`super::upgrade`]) then takes the TCP
//! connection from actix's HTTP dispatcher and runs [`serve`] on it: a loop
//! that flushes what the hub could not write at once, answers pings, watches
//! for silence, and closes with a code on anything it will not take.
//!
//! Owning the connection is what keeps a waiting socket small and its
//! updates cheap: no HTTP buffers (16 KiB per connection in the dispatcher)
//! stay behind it, and the hub writes statuses straight to the kernel.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_codec::Decoder;
use actix_http::ws::{self, CloseCode, Frame, OpCode, Parser, ProtocolError};
use actix_web::web::BytesMut;
use actix_web::{HttpRequest, HttpResponse, get, web};
use serde::Deserialize;
use socket2::SockRef;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::connection::{Connection, Ending, reason};
use super::hub::{Hub, SocketId};
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::visitor::{require_visitor, room_from_path};
use crate::words::RoomId;

pub const MAX_FRAME_BYTES: usize = 4 * 1024;
const PING_EVERY: Duration = Duration::from_secs(10);
const SILENCE_LIMIT: Duration = Duration::from_secs(30);
/// How long queued bytes may wait on a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a closing socket waits for the client to finish its side.
const CLOSE_LINGER: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 1024;

/// A socket registered with the hub whose handshake answer is on its way;
/// leaving the hub when dropped, however the connection ends.
pub struct Handover {
    registration: Registration,
    shutdown: watch::Receiver<bool>,
}

struct Registration {
    hub: Arc<Hub>,
    room: RoomId,
    id: SocketId,
    connection: Arc<Connection>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.unregister(&self.room, self.id);
    }
}

#[get("/api/rooms/{room}/ws")]
pub async fn connect(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let room = room_from_path(&path)?;
    let (visitor, ticket) = require_visitor(&req, &state, &room)?;
    let mut handshake = ws::handshake(req.head()).map_err(|error| {
        ApiError::bad_request(
            "not_a_websocket",
            format!("WebSocket handshake failed: {error}"),
        )
    })?;
    if state.hub.open_sockets() >= state.socket_limit {
        return Err(ApiError::TooManySockets);
    }
    state.store.watch(&room).await?;
    let (id, connection) = state.hub.register(&room, visitor, Arc::from(ticket));
    let registration = Registration {
        hub: state.hub.clone(),
        room,
        id,
        connection,
    };
    state
        .hub
        .load(state.store.as_ref(), &registration.room, id, visitor)
        .await?;
    let mut response = HttpResponse::from(handshake.finish().map_into_boxed_body());
    response.extensions_mut().insert(Handover {
        registration,
        shutdown: state.shutdown.clone(),
    });
    Ok(response)
}

#[derive(Deserialize)]
struct ClientMessage {
    #[serde(rename = "type")]
    kind: String,
}

/// Runs an accepted socket on its TCP connection until either side closes
/// it. `early` holds bytes the client sent right behind its handshake.
pub async fn serve(handover: Handover, stream: TcpStream, early: BytesMut) {
    let Handover {
        registration,
        mut shutdown,
    } = handover;
    let connection = registration.connection.clone();
    // Statuses are single small frames: send each at once.
    let _ = stream.set_nodelay(true);
    connection.attach(stream);
    let Some(stream) = connection.stream() else {
        return;
    };
    let mut codec = ws::Codec::new().max_size(MAX_FRAME_BYTES);
    let mut received = early;
    let mut heartbeat = tokio::time::interval(PING_EVERY);
    heartbeat.tick().await;
    let mut last_heard = Instant::now();
    // Frames that arrived with the handshake are read before anything else.
    let mut readable_now = !received.is_empty();
    let ending = loop {
        if let Some(ending) = connection.ending() {
            break ending;
        }
        if readable_now {
            readable_now = false;
            match read_frames(stream, &mut received, &mut codec, &connection) {
                Ok(Read::Open) => last_heard = Instant::now(),
                Ok(Read::Blocked) => {}
                Ok(Read::Ended(ending)) => break ending,
                Err(_) => break Ending::Broken,
            }
            continue;
        }
        let flushing = connection.has_pending();
        tokio::select! {
            () = connection.woken() => {}
            ready = stream.writable(), if flushing => {
                if ready.is_err() || connection.flush().is_err() {
                    break Ending::Broken;
                }
            }
            ready = stream.readable() => {
                if ready.is_err() {
                    break Ending::Broken;
                }
                readable_now = true;
            }
            _ = heartbeat.tick() => {
                if last_heard.elapsed() > SILENCE_LIMIT {
                    break closing(CloseCode::Away, "no answer to pings");
                }
                if connection.pending_since().is_some_and(|since| since.elapsed() > WRITE_TIMEOUT) {
                    break closing(CloseCode::Again, "too slow to read");
                }
                // Refused means ending: the next turn of the loop sees how.
                let _ = connection.send(OpCode::Ping, b"");
            }
            _ = shutdown.changed() => break closing(CloseCode::Away, "server shutting down"),
        }
    };
    // The hub forgets the socket before it hears the close, so the socket's
    // place in the node's count is free as soon as the client learns of it.
    drop(registration);
    let queued = connection.finish(&ending);
    if let Ending::Close(close) = ending {
        let mut last = BytesMut::from(&queued[..]);
        Parser::write_close(&mut last, close, false);
        linger(stream, last).await;
    }
}

fn closing(code: CloseCode, description: &str) -> Ending {
    Ending::Close(Some(reason(code, description)))
}

enum Read {
    /// Frames were read and answered; the socket stays open.
    Open,
    /// Nothing to read after all.
    Blocked,
    /// The socket ends.
    Ended(Ending),
}

/// Reads what the kernel holds and answers every whole frame in it.
fn read_frames(
    stream: &TcpStream,
    received: &mut BytesMut,
    codec: &mut ws::Codec,
    connection: &Connection,
) -> io::Result<Read> {
    let mut read_any = !received.is_empty();
    loop {
        received.reserve(READ_CHUNK);
        match stream.try_read_buf(received) {
            Ok(0) => return Ok(Read::Ended(Ending::Broken)),
            Ok(_) => read_any = true,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
            Err(error) => return Err(error),
        }
    }
    if !read_any {
        return Ok(Read::Blocked);
    }
    loop {
        let frame = match codec.decode(received) {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(ProtocolError::Overflow) => {
                return Ok(Read::Ended(closing(
                    CloseCode::Size,
                    "frames are limited to 4 KiB",
                )));
            }
            Err(error) => {
                tracing::debug!(%error, "websocket protocol error");
                return Ok(Read::Ended(closing(CloseCode::Protocol, "protocol error")));
            }
        };
        let answered = match frame {
            Frame::Text(text) => {
                let reply = match serde_json::from_slice::<ClientMessage>(&text) {
                    Ok(message) if message.kind == "ping" => r#"{"type":"pong"}"#.to_string(),
                    Ok(message) => error_message(
                        "unknown_type",
                        &format!("messages of type {:?} are not understood", message.kind),
                    ),
                    Err(_) => {
                        error_message("invalid_message", "send JSON like {\"type\":\"ping\"}")
                    }
                };
                connection.send(OpCode::Text, reply.as_bytes())
            }
            Frame::Ping(payload) => connection.send(OpCode::Pong, &payload),
            Frame::Pong(_) => Ok(()),
            Frame::Binary(_) | Frame::Continuation(_) => {
                return Ok(Read::Ended(closing(
                    CloseCode::Unsupported,
                    "binary frames are not accepted",
                )));
            }
            // Answered with a close frame of our own, without a code.
            Frame::Close(_) => return Ok(Read::Ended(Ending::Close(None))),
        };
        if answered.is_err() {
            // Closing already (too slow, or the hub closed it): the loop sees why.
            break;
        }
    }
    if received.is_empty() {
        // Nothing partial kept: give the buffer back between frames.
        *received = BytesMut::new();
    }
    Ok(Read::Open)
}

/// Writes the last bytes, ends our side, and waits (briefly) for the
/// client to end its own, so that unread bytes do not reset the
/// connection under the close frame.
async fn linger(stream: &TcpStream, mut last: BytesMut) {
    let finish = async {
        while !last.is_empty() {
            if stream.writable().await.is_err() {
                return;
            }
            match stream.try_write(&last) {
                Ok(written) => {
                    let _ = last.split_to(written);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
        let _ = SockRef::from(stream).shutdown(std::net::Shutdown::Write);
        let mut discard = [0u8; 512];
        loop {
            if stream.readable().await.is_err() {
                return;
            }
            match stream.try_read(&mut discard) {
                Ok(0) => return,
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_LINGER, finish).await;
}

fn error_message(code: &str, message: &str) -> String {
    serde_json::json!({"type": "error", "code": code, "message": message}).to_string()
}
