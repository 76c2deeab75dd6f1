//! One visitor's WebSocket: authenticated before the upgrade, then a loop
//! that forwards the hub's messages, answers pings, watches for silence, and
//! closes with a code on anything it will not take.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{HttpRequest, HttpResponse, get, rt, web};
use actix_ws::{CloseCode, CloseReason, Message, ProtocolError, Session};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};

use super::hub::{Hub, Outbound, SocketId};
use crate::admission::model::RoomId;
use crate::app::AppState;
use crate::error::ApiError;
use crate::visitor::{require_visitor, room_from_path};

pub const MAX_FRAME_BYTES: usize = 4 * 1024;
const PING_EVERY: Duration = Duration::from_secs(10);
const SILENCE_LIMIT: Duration = Duration::from_secs(30);
/// How long one write may wait on a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

#[get("/api/rooms/{room}/ws")]
pub async fn connect(
    req: HttpRequest,
    body: web::Payload,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let room = room_from_path(&path)?;
    let (visitor, ticket) = require_visitor(&req, &state, &room)?;
    if state.hub.open_sockets() >= state.socket_limit {
        return Err(ApiError::TooManySockets);
    }
    state.store.watch(&room).await?;
    let (id, outbound) = state.hub.register(&room, visitor, Arc::from(ticket));
    if let Err(error) = state
        .hub
        .load(state.store.as_ref(), &room, id, visitor)
        .await
    {
        state.hub.unregister(&room, id);
        return Err(error.into());
    }
    let (response, session, stream) = match actix_ws::handle(&req, body) {
        Ok(parts) => parts,
        Err(error) => {
            state.hub.unregister(&room, id);
            return Err(ApiError::bad_request(
                "not_a_websocket",
                format!("WebSocket handshake failed: {error}"),
            ));
        }
    };
    let stream = stream.max_frame_size(MAX_FRAME_BYTES);
    rt::spawn(session_loop(
        session,
        stream,
        outbound,
        state.hub.clone(),
        room,
        id,
        state.shutdown.clone(),
    ));
    Ok(response)
}

#[derive(Deserialize)]
struct ClientMessage {
    #[serde(rename = "type")]
    kind: String,
}

async fn session_loop(
    mut session: Session,
    mut stream: actix_ws::MessageStream,
    mut outbound: mpsc::Receiver<Outbound>,
    hub: Arc<Hub>,
    room: RoomId,
    id: SocketId,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut heartbeat = tokio::time::interval(PING_EVERY);
    heartbeat.tick().await;
    let mut last_heard = Instant::now();
    let close: Option<CloseReason> = loop {
        tokio::select! {
            message = outbound.recv() => match message {
                Some(Outbound::Text(text)) => {
                    match tokio::time::timeout(WRITE_TIMEOUT, session.text(text)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => break None,
                        Err(_) => break Some(reason(CloseCode::Again, "too slow to read")),
                    }
                }
                Some(Outbound::Close(code, why)) => break Some(reason(code, why)),
                // The hub dropped us: our queue was full.
                None => break Some(reason(CloseCode::Again, "too slow to read; reconnect")),
            },
            frame = stream.recv() => {
                last_heard = Instant::now();
                match frame {
                    Some(Ok(Message::Text(text))) => {
                        let reply = match serde_json::from_str::<ClientMessage>(&text) {
                            Ok(message) if message.kind == "ping" => r#"{"type":"pong"}"#.to_string(),
                            Ok(message) => error_message("unknown_type", &format!("messages of type {:?} are not understood", message.kind)),
                            Err(_) => error_message("invalid_message", "send JSON like {\"type\":\"ping\"}"),
                        };
                        if session.text(reply).await.is_err() {
                            break None;
                        }
                    }
                    Some(Ok(Message::Ping(bytes))) => {
                        if session.pong(&bytes).await.is_err() {
                            break None;
                        }
                    }
                    Some(Ok(Message::Pong(_) | Message::Nop)) => {}
                    Some(Ok(Message::Binary(_) | Message::Continuation(_))) => {
                        break Some(reason(CloseCode::Unsupported, "binary frames are not accepted"));
                    }
                    Some(Ok(Message::Close(_))) | None => break None,
                    Some(Err(ProtocolError::Overflow)) => {
                        break Some(reason(CloseCode::Size, "frames are limited to 4 KiB"));
                    }
                    Some(Err(error)) => {
                        tracing::debug!(%error, "websocket protocol error");
                        break Some(reason(CloseCode::Protocol, "protocol error"));
                    }
                }
            }
            _ = heartbeat.tick() => {
                if last_heard.elapsed() > SILENCE_LIMIT {
                    break Some(reason(CloseCode::Away, "no answer to pings"));
                }
                if session.ping(b"").await.is_err() {
                    break None;
                }
            }
            _ = shutdown.changed() => break Some(reason(CloseCode::Away, "server shutting down")),
        }
    };
    hub.unregister(&room, id);
    let _ = session.close(close).await;
}

fn reason(code: CloseCode, description: &str) -> CloseReason {
    CloseReason {
        code,
        description: Some(description.to_string()),
    }
}

fn error_message(code: &str, message: &str) -> String {
    serde_json::json!({"type": "error", "code": code, "message": message}).to_string()
}
