//! Operators: the JSON operator API and the admin page, and the one rule
//! that guards both (the admin token, or a signed session with its CSRF token).

pub mod api;
pub mod page;

use actix_web::HttpRequest;
use actix_web::http::header;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::words::credentials::constant_time_eq;

pub const SESSION_COOKIE: &str = "wr_admin";
pub const CSRF_HEADER: &str = "X-CSRF-Token";

/// The operator's session cookie, if it is valid now.
pub fn session(req: &HttpRequest, state: &AppState) -> Option<String> {
    let cookie = req.cookie(SESSION_COOKIE)?;
    state
        .credentials
        .admin_session_valid(cookie.value(), state.clock.now_ms())
        .then(|| cookie.value().to_string())
}

/// Admits the Bearer admin token, or a session (whose CSRF token must come
/// along in `X-CSRF-Token` for anything that changes state).
pub fn authorize(req: &HttpRequest, state: &AppState, changes_state: bool) -> Result<(), ApiError> {
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = bearer {
        return if constant_time_eq(token.trim(), &state.admin_token) {
            Ok(())
        } else {
            Err(ApiError::unauthorized(
                "invalid_admin_token",
                "the admin token is not valid",
            ))
        };
    }
    let Some(session) = session(req, state) else {
        return Err(ApiError::unauthorized(
            "missing_admin_token",
            "send the admin token as Authorization: Bearer <token>",
        ));
    };
    if changes_state {
        let sent = req
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !constant_time_eq(sent, &state.credentials.csrf_for_session(&session)) {
            return Err(ApiError::unauthorized(
                "invalid_csrf_token",
                "missing or wrong X-CSRF-Token",
            ));
        }
    }
    Ok(())
}
