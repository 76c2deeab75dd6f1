//! The visitor API: join, status, leave, and the checks a protected site
//! makes on a pass (`/api/verify`, the JWKS).

use std::time::Instant;

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use serde::Deserialize;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::words::credentials::CredentialError;
use crate::words::status::{self, Status, StatusInput};
use crate::words::{Place, PlaceState, RoomId, VisitorId};

/// How long the ticket cookie lives; the place itself lasts as long as the
/// visitor stays present.
const TICKET_COOKIE_DAYS: i64 = 1;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(join)
        .service(status_route)
        .service(leave)
        .service(verify)
        .service(jwks);
}

pub fn room_from_path(raw: &str) -> Result<RoomId, ApiError> {
    RoomId::parse(raw).ok_or_else(|| ApiError::RoomNotFound(raw.to_string()))
}

pub fn ticket_cookie_name(room: &RoomId) -> String {
    format!("wr_ticket_{room}")
}

/// The token in `Authorization: Bearer …`, if any.
/// The token in `Authorization: Bearer …`, if any.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

#[derive(Debug, Deserialize)]
pub struct TicketQuery {
    pub ticket: Option<String>,
}

/// The ticket a request carries: the Authorization header, then the `ticket`
/// query parameter, then the room's cookie.
pub fn presented_ticket(req: &HttpRequest, room: &RoomId) -> Option<String> {
    if let Some(ticket) = bearer(req) {
        return Some(ticket.to_string());
    }
    if let Ok(query) = web::Query::<TicketQuery>::from_query(req.query_string())
        && let Some(ticket) = query.into_inner().ticket
    {
        return Some(ticket);
    }
    req.cookie(&ticket_cookie_name(room))
        .map(|c| c.value().to_string())
}

fn ticket_error(error: CredentialError) -> ApiError {
    let message = match error {
        CredentialError::WrongRoom => "this ticket is for another room",
        _ => "the ticket is not valid; join again to get a new one",
    };
    ApiError::unauthorized("invalid_ticket", message)
}

/// The visitor a request's ticket names; 401 without a valid one.
pub fn require_visitor(
    req: &HttpRequest,
    state: &AppState,
    room: &RoomId,
) -> Result<(VisitorId, String), ApiError> {
    let ticket = presented_ticket(req, room).ok_or_else(|| {
        ApiError::unauthorized(
            "missing_ticket",
            "send your ticket as a Bearer token or cookie",
        )
    })?;
    let visitor = state
        .credentials
        .read_ticket(room, &ticket)
        .map_err(ticket_error)?;
    Ok((visitor, ticket))
}

fn status_response(state: &AppState, room: &RoomId, ticket: &str, place: &Place) -> HttpResponse {
    let status = Status::build(
        StatusInput {
            room,
            ticket,
            visitor: place.visitor,
            state: place.state,
            line: &place.line,
            target_url: &place.target_url,
        },
        &state.credentials,
    );
    let mut response = HttpResponse::Ok();
    response.insert_header((header::CACHE_CONTROL, "no-store"));
    response.cookie(
        Cookie::build(ticket_cookie_name(room), ticket.to_string())
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .max_age(CookieDuration::days(TICKET_COOKIE_DAYS))
            .finish(),
    );
    if let (Some(pass), PlaceState::Admitted { expires_at, .. }) = (&status.pass, place.state) {
        let seconds_left = expires_at.saturating_sub(state.clock.now_ms()) / 1000;
        response.cookie(
            Cookie::build("wr_pass", pass.clone())
                .path("/")
                .http_only(true)
                .same_site(SameSite::Lax)
                .max_age(CookieDuration::seconds(seconds_left as i64))
                .finish(),
        );
    }
    response.json(status)
}

/// Joins the line, or returns the caller's place. A valid ticket (header or
/// cookie) keeps its place; an invalid Bearer ticket is refused, while an
/// invalid cookie (say, from before a secret change) is replaced.
#[post("/api/rooms/{room}/join")]
async fn join(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    let room = room_from_path(&path)?;
    let existing = match bearer(&req) {
        Some(ticket) => Some((
            state
                .credentials
                .read_ticket(&room, ticket)
                .map_err(ticket_error)?,
            ticket.to_string(),
        )),
        None => req.cookie(&ticket_cookie_name(&room)).and_then(|c| {
            Some((
                state.credentials.read_ticket(&room, c.value()).ok()?,
                c.value().to_string(),
            ))
        }),
    };
    let (visitor, ticket) = existing.unwrap_or_else(|| {
        let visitor = VisitorId::random();
        (
            visitor,
            state
                .credentials
                .issue_ticket(&room, visitor, state.clock.now_ms()),
        )
    });
    let place = state.store.join(&room, visitor).await?;
    metrics::histogram!("waitroom_join_seconds").record(started.elapsed().as_secs_f64());
    tracing::debug!(%room, %visitor, state = status::state_name(&place.state), "join");
    Ok(status_response(&state, &room, &ticket, &place))
}

#[get("/api/rooms/{room}/status")]
async fn status_route(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let room = room_from_path(&path)?;
    let (visitor, ticket) = require_visitor(&req, &state, &room)?;
    let place = state.store.status(&room, visitor).await?;
    Ok(status_response(&state, &room, &ticket, &place))
}

#[post("/api/rooms/{room}/leave")]
async fn leave(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let room = room_from_path(&path)?;
    let (visitor, _) = require_visitor(&req, &state, &room)?;
    state.store.leave(&room, visitor).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Debug, Deserialize)]
struct VerifyQuery {
    room: Option<String>,
}

/// For the protected site or its proxy: 204 if the pass is valid now. The
/// store is asked too, so a pass given up with `leave` stops verifying.
#[get("/api/verify")]
async fn verify(
    req: HttpRequest,
    query: web::Query<VerifyQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let pass = bearer(&req)
        .map(str::to_string)
        .or_else(|| req.cookie("wr_pass").map(|c| c.value().to_string()))
        .ok_or_else(|| {
            ApiError::unauthorized(
                "missing_pass",
                "send the pass as a Bearer token or wr_pass cookie",
            )
        })?;
    let named_room = req
        .headers()
        .get("X-Waitroom-Room")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| query.into_inner().room);
    let room = match named_room {
        Some(raw) => Some(RoomId::parse(&raw).ok_or_else(|| {
            ApiError::unauthorized("invalid_pass", "the pass is not for this room")
        })?),
        None => None,
    };
    let claims = state
        .credentials
        .read_pass(&pass, room.as_ref(), state.clock.now_ms())
        .map_err(|error| match error {
            CredentialError::Expired => {
                ApiError::unauthorized("pass_expired", "the pass has expired")
            }
            CredentialError::WrongRoom => {
                ApiError::unauthorized("invalid_pass", "the pass is not for this room")
            }
            CredentialError::Invalid => {
                ApiError::unauthorized("invalid_pass", "the pass is not valid")
            }
        })?;
    let room = RoomId::parse(&claims.room)
        .ok_or_else(|| ApiError::unauthorized("invalid_pass", "the pass is not valid"))?;
    let visitor: VisitorId = claims
        .sub
        .parse()
        .map_err(|_| ApiError::unauthorized("invalid_pass", "the pass is not valid"))?;
    let still_admitted = match state.store.status(&room, visitor).await {
        Ok(place) => {
            matches!(place.state, PlaceState::Admitted { expires_at, .. } if expires_at / 1000 == claims.exp)
        }
        Err(crate::store::StoreError::RoomNotFound(_)) => false,
        Err(other) => return Err(other.into()),
    };
    if !still_admitted {
        return Err(ApiError::unauthorized(
            "pass_revoked",
            "the pass was given up or replaced",
        ));
    }
    Ok(HttpResponse::NoContent()
        .insert_header(("X-Waitroom-Visitor", claims.sub))
        .finish())
}

#[get("/.well-known/jwks.json")]
async fn jwks(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=300"))
        .json(state.credentials.jwks())
}
