//! One visitor's socket loop, as actix-ws sessions are written: it reads the
//! client's messages, answers pings, pings in turn and watches for silence,
//! ends when the hub or shutdown asks, and closes with a code on anything it
//! will not take. It holds the socket's registration, so the hub forgets the
//! socket however the loop ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use actix_ws::{AggregatedMessage, AggregatedMessageStream, CloseCode, CloseReason, Session};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::outlet::{Outlet, close_reason};
use super::registry::Registration;

/// The largest message a client may send (frames and fragmented messages alike).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024;
const PING_EVERY: Duration = Duration::from_secs(10);
const SILENCE_LIMIT: Duration = Duration::from_secs(30);
/// How long a closing socket may take to send its close frame.
const CLOSE_LINGER: Duration = Duration::from_secs(2);

pub struct SocketLoop {
    pub session: Session,
    pub messages: AggregatedMessageStream,
    pub outlet: Arc<Outlet>,
    pub registration: Registration,
    /// Set by the frame guard when a frame declared more than the limit.
    pub oversized: Arc<AtomicBool>,
    pub shutdown: CancellationToken,
}

#[derive(Deserialize)]
struct ClientMessage {
    #[serde(rename = "type")]
    kind: String,
}

impl SocketLoop {
    pub async fn run(self) {
        let SocketLoop {
            session,
            mut messages,
            outlet,
            registration,
            oversized,
            shutdown,
        } = self;
        let mut heartbeat = tokio::time::interval(PING_EVERY);
        heartbeat.tick().await;
        let mut last_heard = Instant::now();
        let ending: Option<Option<CloseReason>> = loop {
            tokio::select! {
                message = messages.recv() => {
                    let message = match message {
                        None => break None,
                        Some(Ok(message)) => message,
                        Some(Err(error)) => {
                            if oversized.load(Ordering::Relaxed)
                                || matches!(error, actix_ws::ProtocolError::Overflow)
                            {
                                break Some(Some(close_reason(CloseCode::Size, "messages are limited to 4 KiB")));
                            }
                            tracing::debug!(%error, "websocket protocol error");
                            break Some(Some(close_reason(CloseCode::Protocol, "protocol error")));
                        }
                    };
                    last_heard = Instant::now();
                    // A refused answer means the socket is closing: the
                    // outlet's close wakes this loop.
                    let _ = match message {
                        AggregatedMessage::Text(text) => outlet.send_text(reply(&text)),
                        AggregatedMessage::Ping(payload) => outlet.send_pong(&payload),
                        AggregatedMessage::Pong(_) => Ok(()),
                        AggregatedMessage::Binary(_) => {
                            break Some(Some(close_reason(CloseCode::Unsupported, "binary frames are not accepted")));
                        }
                        // Answered with a close frame of our own, without a code.
                        AggregatedMessage::Close(_) => break Some(None),
                    };
                }
                reason = outlet.closing() => break Some(Some(reason)),
                _ = heartbeat.tick() => {
                    if last_heard.elapsed() > SILENCE_LIMIT {
                        break Some(Some(close_reason(CloseCode::Away, "no answer to pings")));
                    }
                    let _ = outlet.send_ping();
                }
                () = shutdown.cancelled() => {
                    break Some(Some(close_reason(CloseCode::Away, "server shutting down")));
                }
            }
        };
        // The hub forgets the socket before the client hears the close, so
        // its place in the node's count is free by then.
        drop(registration);
        outlet.close(close_reason(CloseCode::Normal, "closed"));
        if let Some(reason) = ending {
            let _ = tokio::time::timeout(CLOSE_LINGER, session.close(reason)).await;
        }
    }
}

/// The answer to a client's text message: a pong, or an error.
fn reply(text: &str) -> String {
    match serde_json::from_str::<ClientMessage>(text) {
        Ok(message) if message.kind == "ping" => r#"{"type":"pong"}"#.to_string(),
        Ok(message) => error_message(
            "unknown_type",
            &format!("messages of type {:?} are not understood", message.kind),
        ),
        Err(_) => error_message("invalid_message", "send JSON like {\"type\":\"ping\"}"),
    }
}

fn error_message(code: &str, message: &str) -> String {
    serde_json::json!({"type": "error", "code": code, "message": message}).to_string()
}
