//! A notification's resume link (api.md, "Step away: notifications"):
//! `GET /rooms/{room}/resume?code=…` serves a page with one button and
//! spends nothing (link scanners and previews open links too); `POST` to
//! the same address spends the code and gives this browser the place (the
//! `wr_ticket_<room>` cookie), then sends it to the waiting page.
//!
//! The code is a credential: it stays in the query (never the path, whose
//! route the logs write), the request span writes the query's values
//! redacted (`middleware::redact_target`), and nothing here logs it.
//! A credential in a link never replaces one the browser holds: a browser
//! with a valid ticket for another visitor of the room is refused.

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use serde::Deserialize;

use super::error::{ApiError, ErrorBody, ErrorCode};
use super::extractors::ticket_cookie_name;
use super::pages::i18n::Catalogue;
use super::pages::{PageLanguage, RoomMissingPage, page_language, render};
use super::paths::RoomPath;
use crate::store::{Store, StoreError, StoreExt};
use crate::words::clock::Clock;
use crate::words::credentials::{Credentials, ticket_expiry};
use crate::words::language::Language;
use crate::words::notify::EventKind;
use crate::words::op::Resume;
use crate::words::{RoomId, VisitorId};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/rooms/{room}/resume")
            .get(resume_page)
            .post(resume),
    );
}

/// The query of a resume link.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResumeQuery {
    /// The one-time resume code of the notification.
    code: Option<String>,
}

/// What the resume page says: the button to press, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Says {
    /// A valid link: press the button to take the place here.
    Button,
    /// Not a link we made (`invalid_resume`).
    Invalid,
    /// Spent already, by another browser (`resume_used`).
    Used,
    /// This browser holds another visitor's place in the room (`place_held`).
    Held,
    /// Anything else went wrong (the store, say): try again.
    Failed,
}

impl Says {
    fn of(error: &ApiError) -> Self {
        match error.code() {
            ErrorCode::InvalidResume => Says::Invalid,
            ErrorCode::ResumeUsed => Says::Used,
            ErrorCode::PlaceHeld => Says::Held,
            _ => Says::Failed,
        }
    }
}

#[derive(Template)]
#[template(path = "resume.html")]
struct ResumePage {
    t: &'static Catalogue,
    room_id: String,
    room_name: String,
    says: Says,
    /// The form's action: this very address (the code in its query).
    action: Option<String>,
    /// The error's code, for scripts and tests (`data-code`).
    code: Option<ErrorCode>,
}

fn invalid() -> ApiError {
    ApiError::bad_request(
        ErrorCode::InvalidResume,
        "this link is not valid for this room; open the one you were sent, or join again",
    )
}

fn place_held() -> ApiError {
    ApiError::Conflict {
        code: ErrorCode::PlaceHeld,
        message: "this browser already holds another place in this room, and a link never \
                  replaces it; open the link on the device that asked to be notified"
            .into(),
    }
}

/// Whether the caller asked for JSON rather than a page (an app's fetch).
fn wants_json(req: &HttpRequest) -> bool {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    accept.contains("application/json") && !accept.contains("text/html")
}

/// The room, its name and language, or the unknown-room page.
async fn room_of(
    req: &HttpRequest,
    path: &str,
    store: &web::Data<dyn Store>,
) -> Result<(RoomId, String, Language), HttpResponse> {
    let missing = || {
        let language = page_language(req, Language::default());
        let mut response = render(&RoomMissingPage {
            t: language.t,
            room_id: path.to_string(),
        });
        *response.status_mut() = StatusCode::NOT_FOUND;
        language.kept(response)
    };
    let Some(room) = RoomId::parse(path) else {
        return Err(missing());
    };
    match store.room(&room).await {
        Ok(info) => Ok((room, info.config.name, info.config.language)),
        Err(StoreError::RoomNotFound(_) | StoreError::RoomClosed(_)) => Err(missing()),
        // The page still says something useful; the POST will tell.
        Err(error) => {
            tracing::warn!(%room, %error, "store unavailable while rendering the resume page");
            let name = room.to_string();
            Ok((room, name, Language::default()))
        }
    }
}

/// The code's place and event, if the code is one of ours for this room.
fn read_code(
    credentials: &Credentials,
    room: &RoomId,
    query: &ResumeQuery,
) -> Result<(VisitorId, EventKind), ApiError> {
    query
        .code
        .as_deref()
        .and_then(|code| credentials.read_resume_code(room, code))
        .ok_or_else(invalid)
}

/// The page, its status and what it says.
fn page(
    language: &PageLanguage,
    room: &RoomId,
    room_name: &str,
    says: Says,
    action: Option<String>,
    status: StatusCode,
    code: Option<ErrorCode>,
) -> HttpResponse {
    let mut response = render(&ResumePage {
        t: language.t,
        room_id: room.to_string(),
        room_name: room_name.to_string(),
        says,
        action,
        code,
    });
    *response.status_mut() = status;
    response
}

/// A refusal: the error body for a caller that asked for JSON, else the
/// page saying it in the visitor's words.
fn refusal(
    req: &HttpRequest,
    language: &PageLanguage,
    room: &RoomId,
    room_name: &str,
    error: ApiError,
) -> HttpResponse {
    if wants_json(req) {
        return error.error_response();
    }
    let response = page(
        language,
        room,
        room_name,
        Says::of(&error),
        None,
        error.status_code(),
        Some(error.code()),
    );
    language.kept(response)
}

fn to_room(room: &RoomId) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/rooms/{room}")))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// The address the page's form posts to: this one, its code in the query.
fn action(room: &RoomId, code: &str) -> String {
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("code", code)
        .finish();
    format!("/rooms/{room}/resume?{query}")
}

#[utoipa::path(
    get,
    path = "/rooms/{room}/resume",
    tag = "pages",
    summary = "A notification's resume link (HTML): one button, nothing spent",
    description = "Link scanners and previews open links too: this page spends nothing. Its button POSTs to the same address. A code that is not one of ours for the room is a 400 page (`invalid_resume`).",
    params(RoomPath, ResumeQuery),
    responses(
        (status = 200, description = "The page with its button", content_type = "text/html"),
        (status = 400, description = "invalid_resume (a page)", content_type = "text/html"),
        (status = 404, description = "No such room (a page)", content_type = "text/html"),
    ),
)]
async fn resume_page(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<ResumeQuery>,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
) -> HttpResponse {
    let (room, room_name, room_language) = match room_of(&req, &path, &store).await {
        Ok(found) => found,
        Err(missing) => return missing,
    };
    let language = page_language(&req, room_language);
    if let Err(error) = read_code(&credentials, &room, &query) {
        return refusal(&req, &language, &room, &room_name, error);
    }
    let code = query.code.as_deref().unwrap_or_default();
    let response = page(
        &language,
        &room,
        &room_name,
        Says::Button,
        Some(action(&room, code)),
        StatusCode::OK,
        None,
    );
    language.kept(response)
}

#[utoipa::path(
    post,
    path = "/rooms/{room}/resume",
    tag = "pages",
    summary = "Spend a notification's resume code: this browser takes the place",
    description = "Answers 303 to the waiting page and sets the visitor's `wr_ticket_<room>` cookie. A browser already holding that visitor's ticket gets the 303 and spends nothing; one holding a valid ticket for another visitor of the room is refused (`place_held`: a link never replaces a place the browser holds). Errors are pages, or the error body for `Accept: application/json`.",
    params(RoomPath, ResumeQuery),
    responses(
        (status = 303, description = "To `/rooms/{room}`, the ticket cookie set"),
        (status = 400, description = "invalid_resume (a page, or JSON)", content(("text/html"), (ErrorBody = "application/json"))),
        (status = 404, description = "No such room (a page)", content_type = "text/html"),
        (status = 409, description = "place_held (a page, or JSON)", content(("text/html"), (ErrorBody = "application/json"))),
        (status = 410, description = "resume_used (a page, or JSON)", content(("text/html"), (ErrorBody = "application/json"))),
    ),
)]
async fn resume(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<ResumeQuery>,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
) -> HttpResponse {
    let (room, room_name, room_language) = match room_of(&req, &path, &store).await {
        Ok(found) => found,
        Err(missing) => return missing,
    };
    let language = page_language(&req, room_language);
    let refused = |error| refusal(&req, &language, &room, &room_name, error);
    let (visitor, kind) = match read_code(&credentials, &room, &query) {
        Ok(read) => read,
        Err(error) => return refused(error),
    };
    let now = clock.now_ms();
    // The ticket this browser holds for the room, if valid: its own place
    // goes on; another visitor's is never replaced by a link.
    if let Some(held) = req.cookie(&ticket_cookie_name(&room))
        && let Ok(holder) = credentials.read_ticket(&room, held.value(), now)
    {
        return if holder == visitor {
            to_room(&room)
        } else {
            refused(place_held())
        };
    }
    let place = match store
        .run(Resume {
            room: room.clone(),
            visitor,
            kind,
        })
        .await
    {
        Ok(place) => place,
        Err(error) => return refused(error.into()),
    };
    tracing::info!(%room, %visitor, %kind, "a visitor came back through a notification's link");
    let expires_at = ticket_expiry(now, place.facts.closes_at.map(|at| at.0));
    let ticket = credentials.issue_ticket_returning(&room, visitor, now, None, expires_at);
    let mut response = to_room(&room);
    let cookie = Cookie::build(ticket_cookie_name(&room), ticket)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .max_age(CookieDuration::seconds(
            (expires_at.saturating_sub(now) / 1000) as i64,
        ))
        .finish();
    if let Err(error) = response.add_cookie(&cookie) {
        tracing::error!(%error, "the ticket cookie could not be set");
        return ApiError::Internal.error_response();
    }
    response
}
