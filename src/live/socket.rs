//! One visitor's socket loop, as actix-ws sessions are written: it reads the
//! client's messages, answers pings, pings a quiet socket in turn and gives
//! up on one that does not answer (see [`Heartbeat`]), ends when the hub or
//! shutdown asks (1012, so that the client reconnects elsewhere), and
//! closes with a code on anything it will not take. It
//! holds the socket's registration, so the hub forgets the socket however
//! the loop ends.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_ws::{AggregatedMessage, AggregatedMessageStream, CloseCode, CloseReason, Session};
use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::outlet::{Outlet, SERVICE_RESTART, close_reason};
use super::registry::Registration;

/// The largest message a client may send (frames and fragmented messages alike).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024;
/// The heartbeat's beat unless set (`--socket-ping-ms`).
pub const DEFAULT_PING_EVERY: Duration = Duration::from_secs(10);
/// How many beats a ping may go unanswered.
const SILENCE_BEATS: u32 = 3;
/// How long what we sent may go unacknowledged (set on the connection by
/// the relay as `TCP_USER_TIMEOUT`): the default beat's silence limit.
pub const SILENCE_LIMIT: Duration = Duration::from_secs(30);
/// How long a closing socket may take to send its close frame.
const CLOSE_LINGER: Duration = Duration::from_secs(2);

pub struct SocketLoop {
    /// Sends the close frame only, which ends the socket's relay; every
    /// other frame goes through the outlet.
    pub session: Session,
    pub messages: AggregatedMessageStream,
    pub outlet: Arc<Outlet>,
    pub registration: Registration,
    /// Set by the frame guard when a frame declared more than the limit.
    pub oversized: Arc<AtomicBool>,
    pub shutdown: CancellationToken,
    /// The heartbeat's beat: a quiet socket is pinged this often.
    pub ping_every: Duration,
}

/// What a client may send: its `type`, and only `ping` is understood.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientMessage {
    Ping,
}

/// A client's message whose `type` is not one of [`ClientMessage`]'s.
#[derive(Deserialize)]
struct UnknownMessage {
    #[serde(rename = "type")]
    kind: String,
}

impl SocketLoop {
    /// The loop's future. Its parts are taken apart before the `async`
    /// block, which holds each of them once: an `async fn` taking `self`
    /// keeps the argument and the parts moved out of it side by side, so
    /// every socket's task would carry its parts twice (a third more bytes
    /// per waiting socket).
    pub fn run(self) -> impl Future<Output = ()> {
        let SocketLoop {
            session,
            mut messages,
            outlet,
            registration,
            oversized,
            shutdown,
            ping_every,
        } = self;
        async move {
            let mut beats = tokio::time::interval(ping_every);
            beats.tick().await;
            let mut heartbeat = Heartbeat::new(ping_every);
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
                        heartbeat.heard();
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
                    _ = beats.tick() => match heartbeat.beat(Instant::now(), outlet.texts_sent()) {
                        Beat::Busy => {}
                        Beat::Ping => {
                            let _ = outlet.send_ping();
                        }
                        Beat::GiveUp => {
                            break Some(Some(close_reason(CloseCode::Away, "no answer to pings")));
                        }
                    },
                    () = shutdown.cancelled() => {
                        break Some(Some(close_reason(CloseCode::Restart, SERVICE_RESTART)));
                    }
                }
            };
            // The hub forgets the socket before the client hears the close, so
            // its place in the node's count is free by then.
            drop(registration);
            outlet.close(close_reason(CloseCode::Normal, "closed"));
            if let Some(reason) = ending {
                // Boxed, as it runs once at the end: unboxed, its timer and the
                // close's send would be part of every socket loop's task, about
                // 200 bytes of each waiting socket.
                let _ = Box::pin(tokio::time::timeout(CLOSE_LINGER, session.close(reason))).await;
            }
        }
    }
}

/// Decides at each beat (every `ping_every`) whether to ping the client
/// and when to give up on it.
///
/// A socket that was sent something since the last beat is not pinged:
/// the kernel ends its connection if what we sent goes unacknowledged for
/// `SILENCE_LIMIT` (the relay sets `TCP_USER_TIMEOUT`), which is what a
/// pong would have told us, since browsers answer pings below the page.
/// Pinging every socket of a busy room cost the node about as much CPU as
/// its statuses (BENCHMARKS.md, issue 14 item 4). A quiet socket is pinged
/// at every beat, and closed once a ping has gone unanswered for
/// `SILENCE_BEATS` beats.
#[derive(Debug)]
struct Heartbeat {
    /// When the oldest ping nothing was heard after was sent.
    unanswered_since: Option<Instant>,
    /// The outlet's text count at the last beat.
    texts_at_last_beat: u64,
    /// How long a ping may go unanswered.
    silence_limit: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Beat {
    /// Messages are flowing to the client: no ping needed.
    Busy,
    Ping,
    /// A ping went unanswered for the silence limit.
    GiveUp,
}

impl Heartbeat {
    fn new(ping_every: Duration) -> Self {
        Self {
            unanswered_since: None,
            texts_at_last_beat: 0,
            silence_limit: ping_every * SILENCE_BEATS,
        }
    }

    /// Anything the client sent (a pong, a message) answers every ping.
    fn heard(&mut self) {
        self.unanswered_since = None;
    }

    fn beat(&mut self, now: Instant, texts_sent: u64) -> Beat {
        if self
            .unanswered_since
            .is_some_and(|since| now.duration_since(since) >= self.silence_limit)
        {
            return Beat::GiveUp;
        }
        let busy = texts_sent != self.texts_at_last_beat;
        self.texts_at_last_beat = texts_sent;
        if busy {
            return Beat::Busy;
        }
        self.unanswered_since.get_or_insert(now);
        Beat::Ping
    }
}

/// The answer to a client's text message: a pong, or an error.
fn reply(text: &str) -> String {
    if let Ok(ClientMessage::Ping) = serde_json::from_str(text) {
        return r#"{"type":"pong"}"#.to_string();
    }
    match serde_json::from_str::<UnknownMessage>(text) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_is_answered_and_anything_else_named() {
        assert_eq!(reply(r#"{"type":"ping"}"#), r#"{"type":"pong"}"#);
        assert_eq!(
            reply(r#"{"type":"ping","sent_at":1}"#),
            r#"{"type":"pong"}"#
        );
        let unknown: serde_json::Value =
            serde_json::from_str(&reply(r#"{"type":"pong"}"#)).unwrap();
        assert_eq!(unknown["code"], "unknown_type");
        assert!(unknown["message"].as_str().unwrap().contains("\"pong\""));
        for text in ["not json", "{}", r#"{"type":5}"#] {
            let refused: serde_json::Value = serde_json::from_str(&reply(text)).unwrap();
            assert_eq!(refused["code"], "invalid_message", "{text}");
        }
    }

    /// Beats every `DEFAULT_PING_EVERY` from `start`, with the outlet's text count
    /// at each; returns what each beat decided.
    fn beats(heartbeat: &mut Heartbeat, start: Instant, texts: &[u64]) -> Vec<Beat> {
        texts
            .iter()
            .enumerate()
            .map(|(i, &sent)| heartbeat.beat(start + DEFAULT_PING_EVERY * (i as u32 + 1), sent))
            .collect()
    }

    #[test]
    fn a_socket_that_is_sent_statuses_is_not_pinged_nor_given_up() {
        let mut heartbeat = Heartbeat::new(DEFAULT_PING_EVERY);
        let texts: Vec<u64> = (1..=30).map(|beat| beat * 10).collect();
        let decided = beats(&mut heartbeat, Instant::now(), &texts);
        assert!(
            decided.iter().all(|beat| *beat == Beat::Busy),
            "{decided:?}"
        );
    }

    #[test]
    fn a_quiet_socket_is_pinged_every_beat_and_given_up_after_the_silence_limit() {
        let mut heartbeat = Heartbeat::new(DEFAULT_PING_EVERY);
        let decided = beats(&mut heartbeat, Instant::now(), &[0; 5]);
        // Pinged at 10, 20 and 30 s; the first ping is 30 s old at 40 s.
        assert_eq!(
            decided,
            [
                Beat::Ping,
                Beat::Ping,
                Beat::Ping,
                Beat::GiveUp,
                Beat::GiveUp
            ]
        );
    }

    #[test]
    fn an_answer_resets_the_silence() {
        let start = Instant::now();
        let mut heartbeat = Heartbeat::new(DEFAULT_PING_EVERY);
        assert_eq!(beats(&mut heartbeat, start, &[0, 0, 0]), [Beat::Ping; 3]);
        heartbeat.heard();
        let later = start + DEFAULT_PING_EVERY * 3;
        assert_eq!(
            beats(&mut heartbeat, later, &[0, 0, 0, 0]),
            [Beat::Ping, Beat::Ping, Beat::Ping, Beat::GiveUp]
        );
    }

    #[test]
    fn an_unanswered_ping_is_given_up_on_even_once_statuses_flow() {
        let mut heartbeat = Heartbeat::new(DEFAULT_PING_EVERY);
        // Quiet at the first beat (pinged at 10 s), then sent a status
        // every beat: the ping still needs its answer by 40 s.
        let decided = beats(&mut heartbeat, Instant::now(), &[0, 1, 2, 3, 4]);
        assert_eq!(
            decided,
            [
                Beat::Ping,
                Beat::Busy,
                Beat::Busy,
                Beat::GiveUp,
                Beat::GiveUp
            ]
        );
    }
}
