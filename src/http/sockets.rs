//! The WebSocket endpoint. The handshake is an ordinary route: the ticket is
//! checked by its extractor, the node's socket cap and the handshake headers
//! before anything else, and the socket is registered and given its place
//! before the `101`, so every refusal is a plain HTTP error with its JSON
//! body. actix-ws then carries the socket: it reads what the client sends
//! and closes it, while everything we send takes the connection's lane
//! (`live::lane`); its loop is `live::socket`.

use std::sync::Arc;

use actix_web::dev::Payload as RawPayload;
use actix_web::{FromRequest, HttpMessage, HttpRequest, HttpResponse, web};

use super::error::{ApiError, ErrorCode};
use super::extractors::Ticket;
use super::state::Live;
use crate::live::frame_guard::FrameGuard;
use crate::live::home::Home;
use crate::live::lane::Lane;
use crate::live::outlet::Outlet;
use crate::live::socket::{MAX_MESSAGE_BYTES, SocketLoop};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/rooms/{room}/ws").get(connect));
}

async fn connect(
    req: HttpRequest,
    body: web::Payload,
    ticket: Ticket,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    if live.hub.registry().open_sockets() >= live.socket_limit {
        return Err(ApiError::TooManySockets);
    }
    let (guarded, oversized) = FrameGuard::new(body, MAX_MESSAGE_BYTES);
    let mut guarded: RawPayload = RawPayload::Stream {
        payload: Box::pin(guarded),
    };
    let body = web::Payload::from_request(&req, &mut guarded)
        .await
        .map_err(|_| ApiError::Internal)?;
    let (response, session, messages) = actix_ws::handle(&req, body).map_err(|error| {
        ApiError::bad_request(
            ErrorCode::NotAWebsocket,
            format!("WebSocket handshake failed: {error}"),
        )
    })?;
    // The server's upgrade path offers the connection's lane. A handshake
    // that actix's HTTP/1 parser did not take for an upgrade (an `Upgrade`
    // header naming more than `websocket`, a chunked body) stays with the
    // HTTP dispatcher, which would never hand it the client's frames.
    let Some(lane) = req.extensions().get::<Arc<Lane>>().cloned() else {
        return Err(ApiError::bad_request(
            ErrorCode::NotAWebsocket,
            "WebSocket handshake failed: send `Upgrade: websocket` alone, and no body",
        ));
    };
    let outlet = Arc::new(Outlet::new(lane, Home::here(&live.tasks)));
    let registration = live
        .hub
        .connect(
            &ticket.room,
            ticket.visitor,
            Arc::from(ticket.ticket),
            outlet.clone(),
        )
        .await?;
    live.wakeups.note(&ticket.room);
    let messages = messages
        .max_frame_size(MAX_MESSAGE_BYTES)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE_BYTES);
    live.tasks.spawn_local(
        SocketLoop {
            session,
            messages,
            outlet,
            registration,
            oversized,
            shutdown: live.tasks.shutdown_token(),
        }
        .run(),
    );
    Ok(response)
}
