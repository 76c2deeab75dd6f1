//! The room a path's `{room}` names.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};

use crate::http::error::ApiError;
use crate::words::RoomId;

/// The room named by the path's `{room}`; 404 when it is no room id.
#[derive(Debug, Clone)]
pub struct Room(pub RoomId);

impl Room {
    pub(super) fn of(req: &HttpRequest) -> Result<RoomId, ApiError> {
        let raw = req.match_info().get("room").unwrap_or_default();
        RoomId::parse(raw).ok_or_else(|| ApiError::RoomNotFound(raw.to_string()))
    }
}

impl FromRequest for Room {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Room::of(req).map(Room))
    }
}
