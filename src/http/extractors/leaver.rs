//! Who gives something up at `leave`: a visitor by their ticket, or
//! whoever holds a pass.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};

use super::pass::pass_error;
use super::room::Room;
use super::ticket::Ticket;
use super::{bearer, part};
use crate::http::error::ApiError;
use crate::words::credentials::{CredentialError, Credentials};
use crate::words::{RoomId, VisitorId};

/// Who gives something up at `leave`: a visitor by their ticket (their
/// place or their slot), or whoever holds a pass, by that pass as Bearer
/// (the pass alone, as an operator's revocation would). A Bearer that reads
/// as a pass of the path's room is one; anything else must be a ticket.
#[derive(Debug, Clone)]
pub enum Leaver {
    Visitor(Ticket),
    PassHolder {
        room: RoomId,
        visitor: VisitorId,
        /// The pass's `exp`, so only that admission is given up.
        pass_exp_s: u64,
    },
}

impl Leaver {
    fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        let room = Room::of(req)?;
        if let Some(token) = bearer(req)
            && let Ok(claims) = part::<Credentials>(req).pass_holder(token, &room)
        {
            let visitor = claims
                .sub
                .parse()
                .map_err(|_| pass_error(CredentialError::Invalid))?;
            return Ok(Leaver::PassHolder {
                room,
                visitor,
                pass_exp_s: claims.exp,
            });
        }
        Ticket::of(req).map(Leaver::Visitor)
    }
}

impl FromRequest for Leaver {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Leaver::of(req))
    }
}
