//! Credentials as extractors. A handler that needs a room from its path, a
//! visitor's ticket, a pass, or an operator takes one as an argument, so no
//! handler can forget the check, and each check is written once. A pass is
//! checked by `check_pass` alone, whoever asks (the sale, `/api/verify`, the
//! sale page).

use std::future::{Ready, ready};
use std::net::IpAddr;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use ipnet::IpNet;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::AppState;
use super::error::ApiError;
use crate::store::StoreError;
use crate::words::credentials::{AdminSession, CredentialError, PassClaims, constant_time_eq};
use crate::words::join_limit;
use crate::words::{PlaceState, RoomId, VisitorId};

pub const ADMIN_SESSION_COOKIE: &str = "wr_admin";
pub const CSRF_HEADER: &str = "X-CSRF-Token";
pub const PASS_COOKIE: &str = "wr_pass";

pub fn state(req: &HttpRequest) -> &AppState {
    req.app_data::<web::Data<AppState>>()
        .expect("the application registers its state")
}

/// The token in `Authorization: Bearer …` (the scheme in any case), if any.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

pub fn ticket_cookie_name(room: &RoomId) -> String {
    format!("wr_ticket_{room}")
}

/// The pass a request carries: the Bearer token, or the `wr_pass` cookie.
pub fn presented_pass(req: &HttpRequest) -> Option<String> {
    bearer(req)
        .map(str::to_string)
        .or_else(|| req.cookie(PASS_COOKIE).map(|c| c.value().to_string()))
}

/// The room named by the path's `{room}`; 404 when it is no room id.
#[derive(Debug, Clone)]
pub struct Room(pub RoomId);

impl Room {
    fn of(req: &HttpRequest) -> Result<RoomId, ApiError> {
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

/// A visitor's valid ticket for the path's room: from the Authorization
/// header, the `ticket` query parameter (WebSockets), or the room's cookie.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub room: RoomId,
    pub visitor: VisitorId,
    /// The ticket to hand back: the one presented, or its renewal under
    /// the current secret if the previous one signed it.
    pub ticket: String,
}

#[derive(Deserialize)]
struct TicketQuery {
    ticket: Option<String>,
}

pub fn ticket_error(error: CredentialError) -> ApiError {
    let message = match error {
        CredentialError::WrongRoom => "this ticket is for another room",
        _ => "the ticket is not valid; join again to get a new one",
    };
    ApiError::unauthorized("invalid_ticket", message)
}

impl Ticket {
    fn of(req: &HttpRequest) -> Result<Self, ApiError> {
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
                    "missing_ticket",
                    "send your ticket as a Bearer token or cookie",
                )
            })?;
        let state = state(req);
        let (visitor, ticket) = state
            .credentials
            .renew_ticket(&room, &presented, state.clock.now_ms())
            .map_err(ticket_error)?;
        Ok(Ticket {
            room,
            visitor,
            ticket,
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
            && let Ok(claims) = state(req).credentials.pass_holder(token, &room)
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

pub fn pass_error(error: CredentialError) -> ApiError {
    match error {
        CredentialError::Expired => ApiError::unauthorized("pass_expired", "the pass has expired"),
        CredentialError::WrongRoom => {
            ApiError::unauthorized("invalid_pass", "the pass is not for this room")
        }
        CredentialError::Invalid | CredentialError::NotYetValid => {
            ApiError::unauthorized("invalid_pass", "the pass is not valid")
        }
    }
}

fn missing_pass() -> ApiError {
    ApiError::unauthorized(
        "missing_pass",
        "send your pass as a Bearer token or wr_pass cookie",
    )
}

/// Whether a pass past its `exp` may still act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Valid now: `/api/verify`, claims, the sale page's cookie.
    Enforced,
    /// Confirming or releasing a hold made while the pass was valid: the
    /// hold has an expiry of its own. Everything else is still checked.
    Ignored,
}

/// Why a pass was refused.
#[derive(Debug)]
pub enum PassRefusal {
    /// Signature, room or expiry.
    Credential(CredentialError),
    /// Given up with `leave`, replaced by a later admission, or issued by a
    /// room that has since been closed and created again.
    Revoked,
    /// The room is closed.
    RoomClosed(RoomId),
    /// No such room in the store.
    RoomNotFound(RoomId),
    Store(StoreError),
}

impl PassRefusal {
    /// The answer to the visitor (the sale): a closed room is 409 `room_closed`.
    pub fn into_api_error(self) -> ApiError {
        match self {
            PassRefusal::Credential(error) => pass_error(error),
            PassRefusal::Revoked => revoked(),
            PassRefusal::RoomClosed(room) => ApiError::Conflict {
                code: "room_closed",
                message: format!("room {:?} is closed: its sale is over", room.as_str()),
            },
            PassRefusal::RoomNotFound(room) => StoreError::RoomNotFound(room).into(),
            PassRefusal::Store(error) => error.into(),
        }
    }

    /// The answer to a proxy (`/api/verify`): every refusal is a 401, which
    /// nginx's `auth_request` turns into its `error_page 401`.
    pub fn into_verify_error(self) -> ApiError {
        match self {
            PassRefusal::RoomClosed(room) => ApiError::unauthorized(
                "room_closed",
                format!(
                    "room {:?} is closed: its passes no longer count",
                    room.as_str()
                ),
            ),
            PassRefusal::RoomNotFound(room) => ApiError::unauthorized(
                "room_not_found",
                format!("there is no room {:?}", room.as_str()),
            ),
            other => other.into_api_error(),
        }
    }
}

fn revoked() -> ApiError {
    ApiError::unauthorized(
        "pass_revoked",
        "the pass was given up, revoked, reclaimed unused, or replaced",
    )
}

/// The one check of a pass, for `/api/verify`, the sale and the sale page
/// alike (a proxy's question through `check_pass_for_proxy`), so a pass
/// means the same thing everywhere: the signature, the
/// room and (with `Expiry::Enforced`) the expiry, then the store: the
/// visitor's place in that room must be the very admission the pass was
/// issued for (`Admitted` with the same expiry). So a pass given up with
/// `leave`, replaced by a later admission, of a closed room, or of a room
/// since created again under the same id is refused on every node at once.
///
/// With `Expiry::Ignored`, a pass whose expiry has passed is accepted while
/// the store has forgotten its visitor (which is what a pass running out
/// does), never once the visitor left or came back to the line. What a
/// predecessor room sold is wiped when its id is created again, so such a
/// pass names nothing of it.
pub async fn check_pass(
    state: &AppState,
    room: &RoomId,
    pass: &str,
    expiry: Expiry,
) -> Result<Pass, PassRefusal> {
    let pass = read_signed_pass(state, room, pass, expiry)?;
    confirm_with_store(state, &pass, expiry).await?;
    Ok(pass)
}

/// How a proxy's question about a pass was answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Verified {
    /// Every check of `check_pass`, the store's included.
    Fully,
    /// The store could not be reached: by signature, room and expiry alone.
    BySignatureAlone,
}

/// The check a proxy's question gets (`/api/verify`, and any gate that
/// answers for the protected site): `check_pass`, except that while the
/// store is unreachable a pass is judged by its signature, room and expiry
/// alone, so admitted visitors keep their access during the outage (a
/// revocation made meanwhile cannot be seen). A forged, another room's or
/// expired pass is refused all the same. The arrival it could not record is
/// noted, so that the room's arrival grace is counted again from the
/// store's return.
pub async fn check_pass_for_proxy(
    state: &AppState,
    room: &RoomId,
    pass: &str,
) -> Result<(Pass, Verified), PassRefusal> {
    let pass = read_signed_pass(state, room, pass, Expiry::Enforced)?;
    match confirm_with_store(state, &pass, Expiry::Enforced).await {
        Ok(()) => Ok((pass, Verified::Fully)),
        Err(PassRefusal::Store(StoreError::Unavailable(reason))) => {
            state.hub.arrival_gaps().failed_in(room);
            metrics::counter!("waitroom_verified_by_signature_total").increment(1);
            tracing::debug!(%room, %reason, "store unreachable: pass verified by its signature alone");
            Ok((pass, Verified::BySignatureAlone))
        }
        Err(refusal) => Err(refusal),
    }
}

/// What a pass says, if it is ours (current secret, or the previous one
/// during a rotation), for this room, and (with `Expiry::Enforced`)
/// unexpired: no store involved.
fn read_signed_pass(
    state: &AppState,
    room: &RoomId,
    pass: &str,
    expiry: Expiry,
) -> Result<Pass, PassRefusal> {
    let claims = match expiry {
        Expiry::Enforced => state
            .credentials
            .read_pass(pass, Some(room), state.clock.now_ms()),
        Expiry::Ignored => state.credentials.pass_holder(pass, room),
    }
    .map_err(PassRefusal::Credential)?;
    let visitor: VisitorId = claims
        .sub
        .parse()
        .map_err(|_| PassRefusal::Credential(CredentialError::Invalid))?;
    Ok(Pass {
        room: room.clone(),
        visitor,
        claims,
    })
}

/// The store's half of `check_pass`: the visitor still holds the very
/// admission the pass was issued for.
async fn confirm_with_store(
    state: &AppState,
    pass: &Pass,
    expiry: Expiry,
) -> Result<(), PassRefusal> {
    let room = &pass.room;
    // Read through `arrive`: a pass checked here has reached the protected
    // site, so it is not reclaimed as a no-show (`arrival_grace_s`).
    let place = match state.store.arrive(room, pass.visitor).await {
        Ok(place) => place.state,
        Err(StoreError::RoomNotFound(room)) => return Err(PassRefusal::RoomNotFound(room)),
        Err(StoreError::RoomClosed(room)) => return Err(PassRefusal::RoomClosed(room)),
        Err(error) => return Err(PassRefusal::Store(error)),
    };
    let ran_out = pass.claims.exp * 1000 <= state.clock.now_ms();
    let accepted = match place {
        PlaceState::Admitted { expires_at, .. } => expires_at / 1000 == pass.claims.exp,
        PlaceState::Closed => return Err(PassRefusal::RoomClosed(room.clone())),
        // The store forgets a visitor whose pass ran out; a pass still
        // running whose visitor it does not know is from another life of
        // the room.
        PlaceState::Expired => ran_out && expiry == Expiry::Ignored,
        PlaceState::PreQueue { .. } | PlaceState::Waiting { .. } | PlaceState::Left => false,
    };
    if accepted {
        Ok(())
    } else {
        Err(PassRefusal::Revoked)
    }
}

/// A pass for the path's room, valid now (see `check_pass`).
#[derive(Debug, Clone)]
pub struct Pass {
    pub room: RoomId,
    pub visitor: VisitorId,
    pub claims: PassClaims,
}

/// A pass for the path's room that passes `check_pass` with its expiry
/// ignored: a hold made in time may be confirmed or released after the pass
/// runs out (the hold has an expiry of its own), but not with a pass given
/// up, replaced, or of a closed room.
#[derive(Debug, Clone)]
pub struct PassHolder(pub Pass);

impl Pass {
    async fn of(req: HttpRequest, expiry: Expiry) -> Result<Self, ApiError> {
        let room = Room::of(&req)?;
        let pass = presented_pass(&req).ok_or_else(missing_pass)?;
        check_pass(state(&req), &room, &pass, expiry)
            .await
            .map_err(PassRefusal::into_api_error)
    }
}

impl FromRequest for Pass {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        Box::pin(Pass::of(req.clone(), Expiry::Enforced))
    }
}

impl FromRequest for PassHolder {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Pass::of(req, Expiry::Ignored).await.map(PassHolder) })
    }
}

/// How long an operator session lives without being used.
pub const ADMIN_IDLE: Duration = Duration::from_secs(30 * 60);

/// The operator session a request's cookie names: signed, within both its
/// deadlines, and not ended by a logout on any node. A session found here is
/// marked in use, and [`refresh_admin_session`] pushes its idle deadline on.
pub async fn admin_session(req: &HttpRequest) -> Result<Option<AdminSession>, ApiError> {
    let state = state(req);
    let Some(cookie) = req.cookie(ADMIN_SESSION_COOKIE) else {
        return Ok(None);
    };
    let now = state.clock.now_ms();
    let Some(session) = state.credentials.read_admin_session(cookie.value(), now) else {
        return Ok(None);
    };
    if state.store.admin_session_ended(&session.id).await? {
        return Ok(None);
    }
    req.extensions_mut().insert(SessionInUse(session.clone()));
    Ok(Some(session))
}

/// The cookie that carries an operator session, valid for [`ADMIN_IDLE`] from now.
pub fn admin_session_cookie(state: &AppState, session: &AdminSession) -> Cookie<'static> {
    let now = state.clock.now_ms();
    let idle_until = now + ADMIN_IDLE.as_millis() as u64;
    Cookie::build(
        ADMIN_SESSION_COOKIE,
        state.credentials.issue_admin_session(session, idle_until),
    )
    .path("/")
    .http_only(true)
    .same_site(SameSite::Strict)
    .max_age(CookieDuration::seconds(
        (session.expires_at.saturating_sub(now) / 1000) as i64,
    ))
    .finish()
}

/// A session used by this request (see [`admin_session`]).
#[derive(Clone)]
struct SessionInUse(AdminSession);

/// After an answer to a request that used an operator session, refreshes
/// the session's cookie: using it is what keeps it from going idle.
pub async fn refresh_admin_session(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut response = next.call(req).await?;
    let in_use = response
        .request()
        .extensions()
        .get::<SessionInUse>()
        .cloned();
    let already_set = response
        .response()
        .cookies()
        .any(|cookie| cookie.name() == ADMIN_SESSION_COOKIE);
    if let Some(SessionInUse(session)) = in_use
        && !already_set
    {
        let cookie = admin_session_cookie(state(response.request()), &session);
        let _ = response.response_mut().add_cookie(&cookie);
    }
    Ok(response)
}

/// The address a request came from: the peer, or the client a trusted
/// proxy names (see `client_address`).
pub fn client_address(req: &HttpRequest) -> IpAddr {
    let peer = req
        .peer_addr()
        .map(|address| address.ip())
        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let forwarded_for: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|value| value.to_str().ok())
        .collect();
    state(req).trusted_proxies.client(peer, &forwarded_for)
}

/// The block of addresses a request's client counts in, for the join and
/// login limits: its IPv4 address, or its IPv6 network of
/// `--join-rate-ipv6-prefix` bits (see `words::join_limit::client_block`).
pub fn client_block(req: &HttpRequest) -> IpNet {
    join_limit::client_block(client_address(req), state(req).join_rate_ipv6_prefix)
}

fn too_many_attempts(wait: Duration) -> ApiError {
    ApiError::TooManyAttempts {
        retry_after_s: wait.as_secs().max(1),
    }
}

/// An operator: the Bearer admin token, or the admin page's session. With a
/// session, a request that may change state (any method but GET and HEAD)
/// must carry the session's CSRF token in `X-CSRF-Token`. Wrong tokens are
/// counted per address; past the limit, 429 (see `login_guard`).
#[derive(Debug, Clone, Copy)]
pub struct Operator;

impl Operator {
    async fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        let state = state(req);
        if let Some(token) = bearer(req) {
            let address = client_address(req);
            let block = client_block(req);
            state
                .login_guard
                .may_try(block)
                .map_err(too_many_attempts)?;
            if constant_time_eq(token, &state.admin_token) {
                return Ok(Operator);
            }
            if let Some(left_out) = state
                .refusal_log
                .admit("wrong_admin_token", state.clock.now_ms())
            {
                tracing::warn!(%address, left_out, "a wrong admin token");
            }
            state.login_guard.failed(block).map_err(too_many_attempts)?;
            return Err(ApiError::unauthorized(
                "invalid_admin_token",
                "the admin token is not valid",
            ));
        }
        let Some(session) = admin_session(req).await? else {
            return Err(ApiError::unauthorized(
                "missing_admin_token",
                "send the admin token as Authorization: Bearer <token>",
            ));
        };
        let reads_only = matches!(*req.method(), Method::GET | Method::HEAD);
        if !reads_only {
            let sent = req
                .headers()
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !state.credentials.csrf_matches(&session, sent) {
                return Err(ApiError::unauthorized(
                    "invalid_csrf_token",
                    "missing or wrong X-CSRF-Token",
                ));
            }
        }
        Ok(Operator)
    }
}

impl FromRequest for Operator {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Operator::of(&req).await })
    }
}

/// A form of the admin page carries its session's CSRF token.
pub trait CsrfProtected {
    fn csrf(&self) -> &str;
}

/// A form posted from the admin page by a logged-in operator, with the
/// session's CSRF token; and that session. Refused forms send the operator
/// back to the page with the reason.
pub struct OperatorForm<T>(pub T, pub AdminSession);

impl<T: CsrfProtected + DeserializeOwned + 'static> FromRequest for OperatorForm<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let form = web::Form::<T>::from_request(req, payload);
        let req = req.clone();
        Box::pin(async move {
            let refused = |message: &str| ApiError::AdminFormRefused(message.to_string());
            let form = form
                .await
                .map_err(|error| refused(&format!("The form is not valid: {error}")))?
                .into_inner();
            let Some(session) = admin_session(&req).await? else {
                return Err(refused("Your session expired; log in again."));
            };
            if !state(&req).credentials.csrf_matches(&session, form.csrf()) {
                return Err(refused("The form expired; please try again."));
            }
            Ok(OperatorForm(form, session))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer abc", "bearer abc", "BEARER  abc "] {
            let req = TestRequest::default()
                .insert_header((header::AUTHORIZATION, value))
                .to_http_request();
            assert_eq!(bearer(&req), Some("abc"), "{value:?}");
        }
        for value in ["Basic abc", "Bearer", "Bearerabc", "Bearer  "] {
            let req = TestRequest::default()
                .insert_header((header::AUTHORIZATION, value))
                .to_http_request();
            assert_eq!(bearer(&req), None, "{value:?}");
        }
    }
}
