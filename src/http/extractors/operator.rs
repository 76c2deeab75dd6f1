//! An operator: the admin token, or the admin page's session with its
//! CSRF token; the session's cookie and its idle deadline. And who may
//! revoke a pass: an operator, or the protected site's origin token.

use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use super::client::{client_address, client_block};
use super::room::Room;
use super::{bearer, part};
use crate::http::error::{ApiError, ErrorCode, FormTrouble};
use crate::http::refusal_log::RefusalLog;
use crate::http::state::{AdminAccess, TokenHolder};
use crate::store::{Store, StoreExt};
use crate::words::RoomId;
use crate::words::clock::{Clock, Millis};
use crate::words::credentials::{AdminSession, Credentials};
use crate::words::login_limit::Attempt;

pub const ADMIN_SESSION_COOKIE: &str = "wr_admin";
pub const CSRF_HEADER: &str = "X-CSRF-Token";

/// How long an operator session lives without being used.
pub const ADMIN_IDLE: Duration = Duration::from_secs(30 * 60);

/// The operator session a request's cookie names: signed, within both its
/// deadlines, and not ended by a logout on any node. A session found here is
/// marked in use, and [`refresh_admin_session`] pushes its idle deadline on.
pub async fn admin_session(req: &HttpRequest) -> Result<Option<AdminSession>, ApiError> {
    let Some(cookie) = req.cookie(ADMIN_SESSION_COOKIE) else {
        return Ok(None);
    };
    let now = part::<dyn Clock>(req).now_ms();
    let Some(session) = part::<Credentials>(req).read_admin_session(cookie.value(), now) else {
        return Ok(None);
    };
    if part::<dyn Store>(req)
        .admin_session_ended(&session.id)
        .await?
    {
        return Ok(None);
    }
    req.extensions_mut().insert(SessionInUse(session.clone()));
    Ok(Some(session))
}

/// The cookie that carries an operator session, valid for [`ADMIN_IDLE`] from `now`.
pub fn admin_session_cookie(
    credentials: &Credentials,
    now: Millis,
    session: &AdminSession,
) -> Cookie<'static> {
    let idle_until = now + ADMIN_IDLE.as_millis() as u64;
    Cookie::build(
        ADMIN_SESSION_COOKIE,
        credentials.issue_admin_session(session, idle_until),
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
    // Parsing the answer's cookies costs every visitor's answer: only
    // after a session was used.
    if let Some(SessionInUse(session)) = in_use
        && !response
            .response()
            .cookies()
            .any(|cookie| cookie.name() == ADMIN_SESSION_COOKIE)
    {
        let req = response.request();
        let now = part::<dyn Clock>(req).now_ms();
        let cookie = admin_session_cookie(part::<Credentials>(req), now, &session);
        let _ = response.response_mut().add_cookie(&cookie);
    }
    Ok(response)
}

/// Whose token a request's Bearer is, the admin token or an origin token
/// (`--origin-token`). Every token is an attempt counted against the
/// client's block, like an admin login (`login_guard`): a token that is
/// neither spends one of the block's wrong tokens; past them, 429, the
/// right token included, so guessing either kind of token gets nowhere.
/// The right and the wrong token take the same path to the same store
/// call, so a locked-out guesser learns nothing from the answer's time.
async fn token_holder(req: &HttpRequest, token: &str) -> Result<TokenHolder, ApiError> {
    let access = part::<AdminAccess>(req);
    let holder = access.holder_of(token);
    let attempt = match holder {
        Some(_) => Attempt::Right,
        None => Attempt::Wrong,
    };
    let now = part::<dyn Clock>(req).now_ms();
    let log = part::<RefusalLog>(req);
    access
        .login_guard
        .attempt(part::<dyn Store>(req), client_block(req), attempt, now, log)
        .await
        .map_err(|retry_after_s| ApiError::TooManyAttempts { retry_after_s })?;
    holder.ok_or_else(|| {
        if let Some(left_out) = log.admit("wrong_admin_token", now) {
            let address = client_address(req);
            tracing::warn!(%address, left_out, "a wrong admin or origin token");
        }
        ApiError::unauthorized(ErrorCode::InvalidAdminToken, "the admin token is not valid")
    })
}

/// An origin token on a route that is not one of its two. 403, not 401:
/// the token is right and the answer says so, so the site's developer
/// learns that this call needs the admin token rather than retrying with
/// the same one; and it is not counted as a guess.
fn origin_token_refused(req: &HttpRequest) -> ApiError {
    tracing::debug!(path = %req.path(), "an origin token on an operator route");
    ApiError::Forbidden {
        code: ErrorCode::OriginTokenNotAllowed,
        message: "an origin token may only revoke passes and call /api/verify; \
                  this route needs the admin token"
            .into(),
    }
}

/// An origin token limited to other rooms than the path's: 403, as a
/// route the token does not open.
fn origin_token_elsewhere(room: &RoomId) -> ApiError {
    ApiError::Forbidden {
        code: ErrorCode::OriginTokenNotAllowed,
        message: format!(
            "this origin token is limited to other rooms than {:?}",
            room.as_str()
        ),
    }
}

/// An operator: the Bearer admin token, or the admin page's session. With a
/// session, a request that may change state (any method but GET and HEAD)
/// must carry the session's CSRF token in `X-CSRF-Token`. Wrong tokens are
/// counted per address; past the limit, 429 (see `login_guard`). An origin
/// token is refused with 403 `origin_token_not_allowed`.
#[derive(Debug, Clone, Copy)]
pub struct Operator;

impl Operator {
    async fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        if let Some(token) = bearer(req) {
            return match token_holder(req, token).await? {
                TokenHolder::Operator => Ok(Operator),
                TokenHolder::Origin(_) => Err(origin_token_refused(req)),
            };
        }
        let Some(session) = admin_session(req).await? else {
            return Err(ApiError::unauthorized(
                ErrorCode::MissingAdminToken,
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
            if !part::<Credentials>(req).csrf_matches(&session, sent) {
                return Err(ApiError::unauthorized(
                    ErrorCode::InvalidCsrfToken,
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

/// Who may revoke a pass: an operator (as [`Operator`]) or the protected
/// site with one of its origin tokens, the one operator route an origin
/// token opens (in the path's room, where the token is limited to rooms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassRevoker {
    Operator,
    Origin,
}

impl FromRequest for PassRevoker {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            if let Some(token) = bearer(&req) {
                return match token_holder(&req, token).await? {
                    TokenHolder::Operator => Ok(PassRevoker::Operator),
                    TokenHolder::Origin(index) => {
                        let room = Room::of(&req)?;
                        if part::<AdminAccess>(&req).origin_covers(index, &room) {
                            Ok(PassRevoker::Origin)
                        } else {
                            Err(origin_token_elsewhere(&room))
                        }
                    }
                };
            }
            // No Bearer: the admin page's session, with its CSRF check.
            Operator::of(&req)
                .await
                .map(|Operator| PassRevoker::Operator)
        })
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
            let refused = ApiError::AdminFormRefused;
            let form = form
                .await
                .map_err(|error| {
                    tracing::debug!(%error, "an admin form that could not be read");
                    refused(FormTrouble::FormUnreadable)
                })?
                .into_inner();
            let Some(session) = admin_session(&req).await? else {
                return Err(refused(FormTrouble::SessionExpired));
            };
            if !part::<Credentials>(&req).csrf_matches(&session, form.csrf()) {
                return Err(refused(FormTrouble::FormExpired));
            }
            Ok(OperatorForm(form, session))
        })
    }
}
