//! The WebSocket endpoint. The handshake is an ordinary route: the ticket is
//! checked by its extractor, the page's origin where the ticket is the
//! cookie's, the node's socket cap and the handshake headers before
//! anything else, and the socket is registered and given its place
//! before the `101`, so every refusal is a plain HTTP error with its JSON
//! body. actix-ws then carries the socket: it reads what the client sends
//! and closes it, while everything we send takes the connection's lane
//! (`live::lane`); its loop is `live::socket`.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::Payload as RawPayload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpMessage, HttpRequest, HttpResponse, web};
use url::Url;

use super::error::{ApiError, ErrorCode};
use super::extractors::{SOCKET_PROTOCOL, SocketTicket, TicketSource};
use super::paths::RoomPath;
use super::state::{Live, ServerSettings};
use crate::live::frame_guard::FrameGuard;
use crate::live::home::Home;
use crate::live::lane::Lane;
use crate::live::outlet::Outlet;
use crate::live::socket::{MAX_MESSAGE_BYTES, SocketLoop};
use crate::words::credentials::Credentials;

/// Where the route leaves actix-ws's response body (the close frame) for
/// the server's upgrade path, which offers it in the request's extensions
/// with the lane. The `101` itself goes back through the middleware with
/// no body: the request's log span (`TracingLogger`) is kept by the
/// response body it wraps, so a socket whose body went that way kept its
/// span, formatted fields and all, for its whole life: 1,463 bytes of
/// heap per held socket in heaptrack (BENCHMARKS.md, issue 26 item 4).
#[derive(Clone, Default)]
pub struct SocketBody(Rc<Cell<Option<BoxBody>>>);

impl SocketBody {
    fn put(&self, body: BoxBody) {
        self.0.set(Some(body));
    }

    /// The body the route left, once.
    pub fn take(&self) -> Option<BoxBody> {
        self.0.take()
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/rooms/{room}/ws").get(connect));
}

#[utoipa::path(
    get,
    path = "/api/rooms/{room}/ws",
    tag = "visitor",
    summary = "The visitor's WebSocket: pushes `Status` messages",
    description = "A WebSocket handshake (`Upgrade: websocket`, no body). The ticket: as Bearer, as the subprotocol `waitroom.ticket.<ticket>` offered beside `waitroom` (`Sec-WebSocket-Protocol: waitroom, waitroom.ticket.<ticket>`; the answer names `waitroom`), as `?ticket=`, or the `wr_ticket_<room>` cookie. With the cookie, a request that carries `Origin` must come from the waiting room's own origin (`--public-url`'s, else the request's host) or one in `--cors-origins`: else 403 `origin_not_allowed`. Every message the server sends is a `Status` (`type` = `status`) or another type clients ignore; clients may send `{\"type\":\"ping\"}`. Oversized or binary frames close the socket.",
    params(
        RoomPath,
        ("ticket" = Option<String>, Query, description = "The visitor's ticket (or send it as Bearer, the subprotocol `waitroom.ticket.<ticket>`, or the room's cookie). A URL is written to proxies' access logs: prefer the subprotocol"),
        ("Sec-WebSocket-Protocol" = Option<String>, Header, description = "`waitroom, waitroom.ticket.<ticket>`: the ticket, where a browser can send no Authorization header; the answer names `waitroom`"),
    ),
    security(("ticket" = [])),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol (with `Sec-WebSocket-Protocol: waitroom` when it was offered)"),
        (status = 400, description = "not_a_websocket upgrade_refused"),
        (status = 401, description = "missing_ticket invalid_ticket"),
        (status = 403, description = "origin_not_allowed"),
        (status = 503, description = "too_many_sockets"),
    ),
)]
async fn connect(
    req: HttpRequest,
    body: web::Payload,
    SocketTicket(ticket): SocketTicket,
    live: web::Data<Live>,
    settings: web::Data<ServerSettings>,
    credentials: web::Data<Credentials>,
) -> Result<HttpResponse, ApiError> {
    check_origin(&req, ticket.source, &settings, &credentials)?;
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
    // Browsers fail a handshake whose offered subprotocols got no answer.
    let (response, session, messages) =
        actix_ws::handle_with_protocols(&req, body, &[SOCKET_PROTOCOL]).map_err(|error| {
            ApiError::bad_request(
                ErrorCode::NotAWebsocket,
                format!("WebSocket handshake failed: {error}"),
            )
        })?;
    // The server's upgrade path offers the connection's lane. A handshake
    // that actix's HTTP/1 parser did not take for an upgrade (an `Upgrade`
    // header naming more than `websocket`, a chunked body) stays with the
    // HTTP dispatcher, which would never hand it the client's frames.
    let offered = {
        let extensions = req.extensions();
        extensions
            .get::<Arc<Lane>>()
            .cloned()
            .zip(extensions.get::<SocketBody>().cloned())
    };
    let Some((lane, socket_body)) = offered else {
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
    let (response, body) = response.into_parts();
    socket_body.put(body);
    live.tasks.spawn_local(
        SocketLoop {
            session,
            messages,
            outlet,
            registration,
            oversized,
            shutdown: live.tasks.shutdown_token(),
            ping_every: live.socket_ping,
        }
        .run(),
    );
    Ok(response.set_body(BoxBody::new(())))
}

/// A socket whose ticket the browser added by itself (the cookie) opens
/// only for a page of the waiting room's own origin or of one that
/// `--cors-origins` lists. The cookie goes with every socket a page of the
/// same site opens (a sibling subdomain's too: `SameSite` is about sites),
/// and the socket's messages carry the place's ticket and its pass. A
/// request without `Origin` comes from no browser's page, and a ticket
/// given explicitly (Bearer, subprotocol, query) was the page's own to give.
fn check_origin(
    req: &HttpRequest,
    source: TicketSource,
    settings: &ServerSettings,
    credentials: &Credentials,
) -> Result<(), ApiError> {
    if source != TicketSource::Cookie {
        return Ok(());
    }
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return Ok(());
    };
    let allowed = origin.to_str().is_ok_and(|origin| {
        settings.cors_origins.iter().any(|listed| listed == origin)
            || is_own_origin(req, origin, settings, credentials)
    });
    if allowed {
        return Ok(());
    }
    Err(ApiError::Forbidden {
        code: ErrorCode::OriginNotAllowed,
        message: "a page of this origin may not open the socket with the visitor's cookie: \
                  only the waiting room's own pages and the origins in --cors-origins may; \
                  others send the ticket (the subprotocol `waitroom.ticket.<ticket>`)"
            .into(),
    })
}

/// Whether `origin` is the waiting room's own: `--public-url`'s, or else
/// the scheme and host the request was made to. The host and scheme are
/// the request's (`Host`, or what a proxy put in `Forwarded` or
/// `X-Forwarded-*`): a page's script cannot set those headers on a socket,
/// and the ticket cookie, which has no `Domain`, is sent to that host only.
/// With `--secure-cookies` the server is reached over HTTPS, whatever the
/// proxy says.
fn is_own_origin(
    req: &HttpRequest,
    origin: &str,
    settings: &ServerSettings,
    credentials: &Credentials,
) -> bool {
    let Some(origin) = Url::parse(origin)
        .ok()
        .map(|url| url.origin())
        .filter(url::Origin::is_tuple)
    else {
        return false;
    };
    if let Some(public) = credentials.public_url() {
        return origin == *public.origin();
    }
    let info = req.connection_info();
    let scheme = if settings.secure_cookies {
        "https"
    } else {
        info.scheme()
    };
    Url::parse(&format!("{scheme}://{}", info.host())).is_ok_and(|own| own.origin() == origin)
}
