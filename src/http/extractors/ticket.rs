//! A visitor's ticket for the path's room.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
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

/// A visitor's valid ticket for the path's room: from the Authorization
/// header, the `ticket` query parameter (WebSockets), or the room's cookie.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub room: RoomId,
    pub visitor: VisitorId,
    /// The ticket to hand back: the one presented, or its renewal under
    /// the current secret if the previous one signed it.
    pub ticket: String,
    /// The ticket's `return`: where its visitor asked to go once admitted.
    pub ret: Option<String>,
}

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

impl Ticket {
    pub(super) fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        let room = Room::of(req)?;
        let presented = bearer(req)
            .map(str::to_string)
            .or_else(|| {
                web::Query::<TicketQuery>::from_query(req.query_string())
                    .ok()
                    .and_then(|q| q.into_inner().ticket)
            })
            .or_else(|| {
                req.cookie(&ticket_cookie_name(&room))
                    .map(|c| c.value().to_string())
            })
            .ok_or_else(|| {
                ApiError::unauthorized(
                    ErrorCode::MissingTicket,
                    "send your ticket as a Bearer token or cookie",
                )
            })?;
        let now = part::<dyn Clock>(req).now_ms();
        let renewed = part::<Credentials>(req)
            .renew_ticket(&room, &presented, now)
            .map_err(ticket_error)?;
        Ok(Ticket {
            room,
            visitor: renewed.visitor,
            ticket: renewed.ticket,
            ret: renewed.ret,
        })
    }
}

impl FromRequest for Ticket {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ticket::of(req))
    }
}
