//! A visitor's ticket for the path's room, and where it came from.
//!
//! Every route reads it as `Authorization: Bearer` or from the room's
//! cookie. The WebSocket route also reads it from its subprotocol
//! (`Sec-WebSocket-Protocol: waitroom, waitroom.ticket.<ticket>`: a
//! browser's socket can carry no `Authorization`) and from `?ticket=` (the
//! socket's URL, as api.md fixes it). Nowhere else is a ticket read from the
//! URL: a URL is written to proxies' access logs.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, web};
use serde::Deserialize;

use super::room::Room;
use super::{bearer, part};
use crate::http::error::{ApiError, ErrorCode};
use crate::words::clock::Clock;
use crate::words::credentials::{CredentialError, Credentials};
use crate::words::{RoomId, VisitorId};

pub fn ticket_cookie_name(room: &RoomId) -> String {
    format!("wr_ticket_{room}")
}

/// The subprotocol a socket's client offers (and the server answers) to
/// say it speaks ours.
pub const SOCKET_PROTOCOL: &str = "waitroom";

/// What goes before the ticket in the subprotocol that carries it.
pub const TICKET_PROTOCOL_PREFIX: &str = "waitroom.ticket.";

/// Where a request's ticket came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketSource {
    /// `Authorization: Bearer`.
    Bearer,
    /// The room's cookie, which the browser adds by itself: the one source
    /// a page of another origin can make a browser send.
    Cookie,
    /// `?ticket=` (the WebSocket route only).
    Query,
    /// `Sec-WebSocket-Protocol: waitroom.ticket.<ticket>` (the WebSocket
    /// route only).
    Protocol,
}

/// A visitor's valid ticket for the path's room: from the Authorization
/// header or the room's cookie (and, for the WebSocket, see [`SocketTicket`]).
#[derive(Debug, Clone)]
pub struct Ticket {
    pub room: RoomId,
    pub visitor: VisitorId,
    /// The ticket to hand back: the one presented, or its renewal under
    /// the current secret if the previous one signed it.
    pub ticket: String,
    /// The ticket's `return`: where its visitor asked to go once admitted.
    pub ret: Option<String>,
    pub source: TicketSource,
}

/// A visitor's valid ticket for a WebSocket: also read from its
/// subprotocol and `?ticket=`.
#[derive(Debug, Clone)]
pub struct SocketTicket(pub Ticket);

#[derive(Deserialize)]
struct TicketQuery {
    ticket: Option<String>,
}

pub fn ticket_error(error: CredentialError) -> ApiError {
    let message = match error {
        CredentialError::WrongRoom => "this ticket is for another room",
        CredentialError::Expired => "the ticket has expired; join again to get a new one",
        _ => "the ticket is not valid; join again to get a new one",
    };
    ApiError::unauthorized(ErrorCode::InvalidTicket, message)
}

/// The ticket in the subprotocols a socket's client offers, if any.
pub fn protocol_ticket(req: &HttpRequest) -> Option<&str> {
    offered_protocols(req).find_map(|offered| {
        offered
            .strip_prefix(TICKET_PROTOCOL_PREFIX)
            .filter(|ticket| !ticket.is_empty())
    })
}

/// Every subprotocol a socket's client offers, in its order.
pub fn offered_protocols(req: &HttpRequest) -> impl Iterator<Item = &str> {
    req.headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|offered| !offered.is_empty())
}

fn query_ticket(req: &HttpRequest) -> Option<String> {
    web::Query::<TicketQuery>::from_query(req.query_string())
        .ok()
        .and_then(|q| q.into_inner().ticket)
}

fn cookie_ticket(req: &HttpRequest, room: &RoomId) -> Option<String> {
    req.cookie(&ticket_cookie_name(room))
        .map(|c| c.value().to_string())
}

impl Ticket {
    pub(super) fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        let room = Room::of(req)?;
        let presented = bearer(req)
            .map(|ticket| (ticket.to_string(), TicketSource::Bearer))
            .or_else(|| cookie_ticket(req, &room).map(|ticket| (ticket, TicketSource::Cookie)));
        Self::checked(
            req,
            room,
            presented,
            "send your ticket as a Bearer token or cookie",
        )
    }

    /// The presented ticket, if valid now.
    fn checked(
        req: &HttpRequest,
        room: RoomId,
        presented: Option<(String, TicketSource)>,
        missing: &'static str,
    ) -> Result<Self, ApiError> {
        let (presented, source) =
            presented.ok_or_else(|| ApiError::unauthorized(ErrorCode::MissingTicket, missing))?;
        let now = part::<dyn Clock>(req).now_ms();
        let renewed = part::<Credentials>(req)
            .renew_ticket(&room, &presented, now)
            .map_err(ticket_error)?;
        Ok(Ticket {
            room,
            visitor: renewed.visitor,
            ticket: renewed.ticket,
            ret: renewed.ret,
            source,
        })
    }
}

impl SocketTicket {
    /// The ticket given explicitly (Bearer, subprotocol, query, in that
    /// order) or else the cookie's.
    fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        let room = Room::of(req)?;
        let presented = bearer(req)
            .map(|ticket| (ticket.to_string(), TicketSource::Bearer))
            .or_else(|| {
                protocol_ticket(req).map(|ticket| (ticket.to_string(), TicketSource::Protocol))
            })
            .or_else(|| query_ticket(req).map(|ticket| (ticket, TicketSource::Query)))
            .or_else(|| cookie_ticket(req, &room).map(|ticket| (ticket, TicketSource::Cookie)));
        Ticket::checked(
            req,
            room,
            presented,
            "send your ticket as a Bearer token, the subprotocol `waitroom.ticket.<ticket>` \
             (beside `waitroom`), `?ticket=` or the room's cookie",
        )
        .map(SocketTicket)
    }
}

impl FromRequest for Ticket {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ticket::of(req))
    }
}

impl FromRequest for SocketTicket {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(SocketTicket::of(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn the_ticket_is_read_from_the_subprotocol_that_carries_it() {
        for offered in [
            vec!["waitroom, waitroom.ticket.a.b.c"],
            vec!["waitroom.ticket.a.b.c,waitroom"],
            vec!["waitroom", " waitroom.ticket.a.b.c "],
        ] {
            let mut req = TestRequest::default();
            for value in &offered {
                req = req.append_header((header::SEC_WEBSOCKET_PROTOCOL, *value));
            }
            let req = req.to_http_request();
            assert_eq!(protocol_ticket(&req), Some("a.b.c"), "{offered:?}");
            assert!(offered_protocols(&req).any(|p| p == SOCKET_PROTOCOL));
        }
        for offered in ["waitroom", "waitroom.ticket.", "chat, superchat", ""] {
            let req = TestRequest::default()
                .insert_header((header::SEC_WEBSOCKET_PROTOCOL, offered))
                .to_http_request();
            assert_eq!(protocol_ticket(&req), None, "{offered:?}");
        }
    }
}
