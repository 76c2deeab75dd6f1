//! The visitor API: join, status, leave, and the checks a protected site
//! makes on a pass (`/api/verify`, the JWKS).

use std::time::Instant;

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, HttpResponse, web};
use serde::Deserialize;

use super::error::{ApiError, ErrorCode};
use super::extractors::{
    IdempotencyKey, Leaver, PassChecker, PassRefusal, Room, Ticket, Verified, bearer,
    check_pass_for_proxy, client_address, code_guesses, join_limit, pass_cookie,
    presented_pass_to_verify, ticket_cookie_name, ticket_error,
};
use super::limits::read_json_or_nothing;
use super::paths::RoomPath;
use super::state::Live;
use crate::store::{self, JoinOptions, PassTakenBack, SaleStore, Store, StoreExt};
use crate::words::clock::{Clock, Millis};
use crate::words::codes::CodeHash;
use crate::words::credentials::{
    CredentialError, Credentials, Jwks, read_user_token, ticket_expiry,
};
use crate::words::pow;
use crate::words::return_url;
use crate::words::status::{self, Status, StatusInput, TicketReturn};
use crate::words::{Place, PlaceState, RoomId, VisitorId};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/rooms/{room}/join").post(join))
        .service(web::resource("/api/rooms/{room}/challenge").get(challenge))
        .service(web::resource("/api/rooms/{room}/status").get(status_route))
        .service(web::resource("/api/rooms/{room}/leave").post(leave))
        .service(web::resource("/api/verify").get(verify))
        .service(web::resource("/.well-known/jwks.json").get(jwks));
}

/// A place's `Status`, with the visitor's ticket signed anew (valid for
/// `ticket_expiry` from now) in it and in the room's cookie, so a visitor
/// who keeps asking keeps a valid ticket.
pub(super) fn status_response(
    credentials: &Credentials,
    now: Millis,
    room: &RoomId,
    ret: Option<&str>,
    place: &Place,
) -> HttpResponse {
    let expires_at = ticket_expiry(now, place.facts.closes_at.map(|at| at.0));
    let ticket = credentials.issue_ticket_returning(room, place.visitor, now, ret, expires_at);
    let status = Status::build(
        StatusInput {
            room,
            ticket: &ticket,
            ret: TicketReturn::Known(ret),
            visitor: place.visitor,
            state: place.state,
            line: &place.line,
            facts: &place.facts,
            priority: place.priority.as_deref(),
            notify: Some(place.notify),
        },
        credentials,
    );
    let mut response = HttpResponse::Ok();
    response.insert_header((header::CACHE_CONTROL, "no-store"));
    response.cookie(
        Cookie::build(ticket_cookie_name(room), ticket.as_str())
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .max_age(CookieDuration::seconds(((expires_at - now) / 1000) as i64))
            .finish(),
    );
    if let (Some(pass), PlaceState::Admitted { expires_at, .. }) = (&status.pass, place.state) {
        response.cookie(pass_cookie(
            pass.as_str(),
            expires_at.saturating_sub(now) / 1000,
        ));
    }
    response
        .content_type(actix_web::mime::APPLICATION_JSON)
        .body(status.to_json())
}

/// The fields a join's body may carry (all optional; no body, or `null`,
/// is `{}`). Fields a newer page sends are ignored; a field of the wrong
/// type gets its own refusal (see [`Given`]).
#[derive(Default, Deserialize, utoipa::ToSchema)]
pub struct JoinBody {
    /// A solved proof-of-work challenge (the base64 ALTCHA payload), where
    /// the room asks for one.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pow: Given,
    /// A user token (HS256 JWT signed with the room's `user_key`).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    user: Given,
    /// A priority or invite code: a valid one puts the visitor in the
    /// priority line (and is spent if the join makes a new place).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    code: Given,
    /// Where a forward-auth gate turned the visitor away from (an absolute
    /// URL, as the gate's redirect gives it in its `return` query): at
    /// admission they are sent back there if it is on the room's target's
    /// origin. The query's `return` is read when the body has none; one
    /// that cannot be a return is ignored.
    #[serde(default, rename = "return")]
    #[schema(value_type = Option<String>)]
    ret: Given,
}

/// One text field of a join's body as it came.
#[derive(Default)]
enum Given {
    /// Left out, or `null`.
    #[default]
    Absent,
    Text(String),
    /// Any other JSON: the field's own refusal, not the body's.
    NotText,
}

impl<'de> Deserialize<'de> for Given {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Null => Given::Absent,
            serde_json::Value::String(text) => Given::Text(text),
            _ => Given::NotText,
        })
    }
}

impl JoinBody {
    /// The body as sent: empty or `null` is no field; anything but an
    /// object is refused (a JSON array would otherwise be read as the
    /// fields in order).
    fn read(body: &[u8]) -> Result<JoinBody, ApiError> {
        if body.is_empty() {
            return Ok(JoinBody::default());
        }
        let refused = |error: serde_json::Error| {
            ApiError::bad_request(
                ErrorCode::InvalidJson,
                format!("the join body must be a JSON object: {error}"),
            )
        };
        match serde_json::from_slice::<Option<serde_json::Map<String, serde_json::Value>>>(body)
            .map_err(refused)?
        {
            None => Ok(JoinBody::default()),
            Some(fields) => {
                serde_json::from_value(serde_json::Value::Object(fields)).map_err(refused)
            }
        }
    }
}

/// Joins the line, or returns the caller's place. A valid ticket (header or
/// cookie) keeps its place; an invalid or expired Bearer ticket is refused,
/// while such a cookie (say, from before a secret change) is replaced.
#[utoipa::path(
    post,
    path = "/api/rooms/{room}/join",
    tag = "visitor",
    summary = "Join the line, or get the caller's place",
    description = "Idempotent per ticket: with a valid ticket (Bearer, or the `wr_ticket_<room>` cookie this sets) the caller keeps their place; a double submit never creates two places. Without a ticket, a retry with the same `Idempotency-Key` (after a timeout or a 503, whose place the store may have made all the same) finds the place the first try made. An invalid or expired Bearer ticket is refused; such a cookie is replaced by a new place. The answer's ticket (also set as the cookie) lasts a week, or until the room's `closes_at` if later. The body is optional.",
    params(
        RoomPath,
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 128 visible characters, the same on every try of one join"),
    ),
    request_body(content = Option<JoinBody>, content_type = "application/json"),
    security((), ("ticket" = [])),
    responses(
        (status = 200, body = Status, description = "The caller's place; sets the ticket cookie (and `wr_pass` when admitted)"),
        (status = 400, description = "invalid_idempotency_key"),
        (status = 401, description = "invalid_ticket user_required invalid_user_token"),
        (status = 403, description = "room_not_accepting pow_required pow_invalid code_required invalid_code code_used"),
        (status = 409, description = "room_closed"),
        (status = 429, description = "rate_limited"),
    ),
)]
async fn join(
    req: HttpRequest,
    Room(room): Room,
    body: web::Payload,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    let answer = join_room(req, &room, body, store, credentials, clock, live).await;
    match &answer {
        Err(error) => turned_away(&room, error.code()),
        Ok((_, place)) if place.facts.sold_out && place.state == PlaceState::Closed => {
            turned_away(&room, ErrorCode::SoldOut);
        }
        Ok(_) => {}
    }
    answer.map(|(response, _)| response)
}

/// Counts a join that got no place in `waitroom_turned_away_total`, its
/// `reason` the error code (a bounded set: [`ErrorCode`]). Only a refusal
/// that shows the store knows the room ([`ROOM_KNOWN`]) carries the
/// `room` label; any other (no such room, the store unreachable, input
/// refused before the store was asked) is counted without it, so a made-up
/// room id never becomes a label.
fn turned_away(room: &RoomId, code: ErrorCode) {
    let reason: &'static str = code.into();
    if ROOM_KNOWN.contains(&code) {
        metrics::counter!("waitroom_turned_away_total", "room" => room.to_string(), "reason" => reason)
            .increment(1);
    } else {
        metrics::counter!("waitroom_turned_away_total", "reason" => reason).increment(1);
    }
}

/// Refusals of a room the store knows: it decided them, or was asked
/// whether the room exists first (`unless_no_such_room`, `known_user`).
const ROOM_KNOWN: &[ErrorCode] = &[
    ErrorCode::RoomNotAccepting,
    ErrorCode::RoomClosed,
    ErrorCode::SoldOut,
    ErrorCode::RateLimited,
    ErrorCode::PowRequired,
    ErrorCode::PowInvalid,
    ErrorCode::UserRequired,
    ErrorCode::InvalidUserToken,
    ErrorCode::CodeRequired,
    ErrorCode::InvalidCode,
    ErrorCode::CodeUsed,
];

/// The join itself: its answer, and the place it gave.
async fn join_room(
    req: HttpRequest,
    room: &RoomId,
    body: web::Payload,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
    live: web::Data<Live>,
) -> Result<(HttpResponse, Place), ApiError> {
    let room = room.clone();
    let started = Instant::now();
    // Read whole (the page sends `{}`), so the connection stays open for
    // the visitor's next request.
    let body = JoinBody::read(&read_json_or_nothing(&req, body).await?)?;
    let pow = match body.pow {
        Given::Absent => None,
        Given::Text(payload) => {
            match pow::check(&credentials.pow_keys(), &payload, &room, clock.now_ms()) {
                Ok(solved) => Some(solved),
                Err(why) => {
                    return Err(
                        unless_no_such_room(store.get_ref(), &room, pow_invalid(why)).await,
                    );
                }
            }
        }
        Given::NotText => {
            let refusal = pow_invalid("pow must be the solution as a string");
            return Err(unless_no_such_room(store.get_ref(), &room, refusal).await);
        }
    };
    let user = match body.user {
        Given::Absent => None,
        Given::Text(token) => known_user(store.get_ref(), clock.get_ref(), &room, &token).await?,
        Given::NotText => {
            let refusal = invalid_user_token("user must be the token as a string");
            return Err(unless_no_such_room(store.get_ref(), &room, refusal).await);
        }
    };
    let code = match body.code {
        Given::Absent => None,
        Given::Text(code) if code.is_empty() => None,
        Given::Text(code) => Some(CodeHash::of(&code)),
        Given::NotText => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidBody,
                "code must be the code as a string",
            ));
        }
    };
    let ret = join_return(&req, body.ret);
    let now = clock.now_ms();
    let existing = match bearer(&req) {
        Some(ticket) => Some(
            credentials
                .renew_ticket(&room, ticket, now)
                .map_err(ticket_error)?,
        ),
        None => req
            .cookie(&ticket_cookie_name(&room))
            .and_then(|c| credentials.renew_ticket(&room, c.value(), now).ok()),
    };
    let IdempotencyKey(key) = IdempotencyKey::extract(&req).await?;
    // Without a ticket, the visitor is new, or the one an earlier try of
    // this join with the same key made (which a store must then look for).
    let fresh = existing.is_none() && key.is_none();
    let new_visitor = || {
        key.as_deref().map_or_else(VisitorId::random, |key| {
            credentials.visitor_of_join(&room, key)
        })
    };
    // A `return` given now replaces the one the ticket carries; without
    // one, the ticket keeps its own.
    let (visitor, ret) = match (existing, ret) {
        (Some(existing), None) => (existing.visitor, existing.ret),
        (existing, ret) => (
            existing.map_or_else(new_visitor, |existing| existing.visitor),
            ret,
        ),
    };
    let options = JoinOptions {
        address: client_address(&req).known(),
        limit: join_limit(&req),
        user,
        pow,
        // Only with a code: a join without one is sent as it was.
        code_guesses: code.and_then(|_| code_guesses(&req)),
        code,
        fresh,
    };
    // A known user's place may belong to the visitor of another device:
    // the ticket the answer signs is for the place's visitor.
    let place = store.join_with(&room, visitor, &options).await?;
    live.wakeups.note(&room);
    metrics::histogram!("waitroom_join_seconds").record(started.elapsed().as_secs_f64());
    tracing::debug!(%room, %visitor, state = <&str>::from(status::State::of(&place.state)), "join");
    let response = status_response(&credentials, now, &room, ret.as_deref(), &place);
    Ok((response, place))
}

/// Where a forward-auth gate turned the visitor away from (`return`, in
/// the body or the query; the body wins), if it can be a return at all
/// (`return_url::parse_return`). Anything else is ignored, not refused:
/// whether it is honoured is decided at admission, against the room's
/// target then.
fn join_return(req: &HttpRequest, from_body: Given) -> Option<String> {
    let raw = match from_body {
        Given::Text(raw) => raw,
        Given::Absent | Given::NotText => {
            url::form_urlencoded::parse(req.query_string().as_bytes())
                .find(|(name, _)| name == "return")
                .map(|(_, value)| value.into_owned())?
        }
    };
    return_url::parse_return(&raw).map(String::from)
}

/// A proof-of-work challenge for the room's `pow_difficulty` (ALTCHA's
/// format), signed, for this room only, valid for a few minutes.
#[utoipa::path(
    get,
    path = "/api/rooms/{room}/challenge",
    tag = "visitor",
    summary = "A proof-of-work challenge to solve before joining",
    params(RoomPath),
    responses((status = 200, body = pow::ChallengeShape, description = "An ALTCHA challenge for this room, valid for five minutes")),
)]
async fn challenge(
    Room(room): Room,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
) -> Result<HttpResponse, ApiError> {
    let difficulty = store.room(&room).await?.config.pow_difficulty;
    let challenge = pow::challenge(credentials.pow_key(), &room, difficulty, clock.now_ms());
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(challenge))
}

/// A refusal decided before the store was asked, for a room that may not
/// exist: there, the answer is the 404, and `waitroom_turned_away_total`
/// gets no label for a made-up id (every refusal it counts is then of a
/// room the store knows).
async fn unless_no_such_room(store: &dyn Store, room: &RoomId, refusal: ApiError) -> ApiError {
    match store.room(room).await {
        Ok(_) => refusal,
        Err(error) => error.into(),
    }
}

fn pow_invalid(why: &str) -> ApiError {
    ApiError::Forbidden {
        code: ErrorCode::PowInvalid,
        message: format!("the proof of work was refused: {why}"),
    }
}

fn invalid_user_token(why: &str) -> ApiError {
    ApiError::unauthorized(
        ErrorCode::InvalidUserToken,
        format!("the user token was refused: {why}"),
    )
}

/// The user a join's token names, checked with the room's `user_key`; a
/// room without a key knows no users, so its joins ignore tokens.
async fn known_user(
    store: &dyn Store,
    clock: &dyn Clock,
    room: &RoomId,
    token: &str,
) -> Result<Option<String>, ApiError> {
    let Some(key) = store.room(room).await?.config.user_key else {
        return Ok(None);
    };
    read_user_token(token, key.expose(), room, clock.now_ms())
        .map(Some)
        .map_err(|error| {
            invalid_user_token(match error {
                CredentialError::WrongRoom => "it is for another room",
                CredentialError::Expired => "it has expired; sign in again",
                CredentialError::NotYetValid => "it is not valid yet (its nbf is ahead)",
                CredentialError::Invalid => {
                    "it is malformed, too long, not signed with this room's key, \
                     or names critical header parameters (crit) we do not understand"
                }
            })
        })
}

#[utoipa::path(
    get,
    path = "/api/rooms/{room}/status",
    tag = "visitor",
    summary = "The caller's state now (the polling fallback of the WebSocket)",
    description = "The ticket as Bearer or the `wr_ticket_<room>` cookie (never in the query). The answer hands out the place's ticket anew, lasting a week from now or until the room's `closes_at` if later, and sets it as the cookie.",
    params(RoomPath),
    security(("ticket" = [])),
    responses(
        (status = 200, body = Status, description = "The caller's place"),
        (status = 401, description = "missing_ticket invalid_ticket"),
    ),
)]
async fn status_route(
    ticket: Ticket,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    let place = store.status(&ticket.room, ticket.visitor).await?;
    live.wakeups.note(&ticket.room);
    Ok(status_response(
        &credentials,
        clock.now_ms(),
        &ticket.room,
        ticket.ret.as_deref(),
        &place,
    ))
}

#[utoipa::path(
    post,
    path = "/api/rooms/{room}/leave",
    tag = "visitor",
    summary = "Give up the place, or the admitted slot",
    description = "With the ticket (Bearer or the `wr_ticket_<room>` cookie, never in the query): gives up the place (or the slot, once admitted). With a pass of this room as Bearer: gives that pass up, as a revocation would.",
    params(RoomPath),
    security(("ticket" = []), ("pass" = [])),
    responses(
        (status = 204, description = "Given up (also when there was nothing to give up)"),
        (status = 401, description = "missing_ticket invalid_ticket invalid_pass"),
    ),
)]
async fn leave(
    leaver: Leaver,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    match leaver {
        Leaver::Visitor(ticket) => {
            store::give_up(
                store.get_ref(),
                sale.get_ref(),
                &ticket.room,
                ticket.visitor,
            )
            .await?
        }
        Leaver::PassHolder {
            room,
            visitor,
            pass_exp_s,
        } => {
            let taken = store::take_back_pass(
                store.get_ref(),
                sale.get_ref(),
                &room,
                visitor,
                Some(pass_exp_s),
                PassTakenBack::GivenUp,
            )
            .await?;
            tracing::debug!(%room, %visitor, taken, "pass given up");
        }
    }
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Debug, Deserialize)]
pub(super) struct VerifyQuery {
    pub(super) room: Option<String>,
}

/// The header a proxy may name the room with (besides `?room=`).
const ROOM_HEADER: &str = "X-Waitroom-Room";

/// The room a verify call asks about: `?room=` or `X-Waitroom-Room` (an
/// empty value counts as none). It is required, and where both are given
/// (or the header twice) they must agree: neither can override the other.
pub(super) fn room_to_verify(req: &HttpRequest, query: Option<String>) -> Result<RoomId, ApiError> {
    let mut named = Vec::new();
    for value in req.headers().get_all(ROOM_HEADER) {
        let value = value.to_str().map_err(|_| {
            ApiError::bad_request(
                ErrorCode::InvalidRoom,
                format!("{ROOM_HEADER} is not a room id"),
            )
        })?;
        named.push(value.trim().to_string());
    }
    named.extend(query);
    named.retain(|name| !name.is_empty());
    let Some(first) = named.first() else {
        return Err(ApiError::bad_request(
            ErrorCode::RoomRequired,
            format!("name the room the pass must be for: ?room=<room> or {ROOM_HEADER}"),
        ));
    };
    if named.iter().any(|name| name != first) {
        return Err(ApiError::bad_request(
            ErrorCode::RoomMismatch,
            format!("?room= and {ROOM_HEADER} name different rooms"),
        ));
    }
    RoomId::parse(first).ok_or_else(|| {
        ApiError::bad_request(
            ErrorCode::InvalidRoom,
            format!("{first:?} is not a room id (1 to 64 of a-z 0-9 -)"),
        )
    })
}

/// For the protected site or its proxy: 204 if the pass is valid now for the
/// named room, 401 if not (`check_pass`: the same check as the sale's, so a
/// pass given up with `leave` or of a closed room stops verifying at once;
/// while the store is unreachable, by signature, room and expiry alone,
/// answered with `X-Waitroom-Verified: signature`).
#[utoipa::path(
    get,
    path = "/api/verify",
    tag = "visitor",
    summary = "Is this pass valid now? (for the protected site or its proxy)",
    description = "The room is named by `?room=` or the `X-Waitroom-Room` header (if both, they must agree). The pass is `X-Waitroom-Pass` if sent; else the `wr_pass` cookie when the Bearer is not a pass (an origin token, an app's own token); else the Bearer, else the cookie. With the store unreachable, the pass is judged by its signature, room and expiry alone, and the answer says so with `X-Waitroom-Verified: signature`.",
    params(
        ("room" = Option<String>, Query, description = "The room the pass must be for"),
        ("X-Waitroom-Room" = Option<String>, Header, description = "The room the pass must be for"),
        ("X-Waitroom-Pass" = Option<String>, Header, description = "The pass, for an app whose `Authorization` is its own: it outranks the Bearer and the cookie"),
    ),
    security(("pass" = []), ("pass_cookie" = [])),
    responses(
        (status = 204, description = "The pass is valid now", headers(
            ("X-Waitroom-Visitor" = String, description = "The pass's visitor (`sub`)"),
            ("X-Waitroom-Verified" = String, description = "`signature` when the store could not be asked"),
        )),
        (status = 400, description = "room_required room_mismatch invalid_room invalid_query"),
        (status = 401, description = "missing_pass invalid_pass pass_expired pass_revoked room_closed room_not_found"),
    ),
)]
async fn verify(
    req: HttpRequest,
    query: web::Query<VerifyQuery>,
    checker: PassChecker,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    let room = room_to_verify(&req, query.into_inner().room)?;
    let pass = presented_pass_to_verify(&req).ok_or_else(|| {
        ApiError::unauthorized(
            ErrorCode::MissingPass,
            "send the pass in X-Waitroom-Pass, as a Bearer token or in the wr_pass cookie \
             (the cookie, when the Bearer is an origin token)",
        )
    })?;
    let (pass, verified) = check_pass_for_proxy(&checker, &live.hub, &room, &pass)
        .await
        .map_err(PassRefusal::into_verify_error)?;
    let mut answer = HttpResponse::NoContent();
    answer.insert_header(("X-Waitroom-Visitor", pass.claims.sub));
    if verified == Verified::BySignatureAlone {
        answer.insert_header(("X-Waitroom-Verified", "signature"));
    }
    Ok(answer.finish())
}

#[utoipa::path(
    get,
    path = "/.well-known/jwks.json",
    tag = "visitor",
    summary = "The public keys that sign passes (JWKS)",
    responses((status = 200, body = Jwks, description = "The current key, and the previous one during a rotation")),
)]
async fn jwks(credentials: web::Data<Credentials>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=300"))
        .json(credentials.jwks())
}
