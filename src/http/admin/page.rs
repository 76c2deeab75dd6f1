//! The admin page: log in with the admin token, then watch and steer rooms
//! through plain HTML forms, each carrying the session's CSRF token. Its
//! texts are the `admin.` ones of the catalogues, in English or Korean.

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use crate::http::error::{ApiError, ErrorBody, FormTrouble};
use crate::http::extractors::{
    ADMIN_SESSION_COOKIE as SESSION_COOKIE, CsrfProtected, OperatorForm, admin_session,
    admin_session_cookie, client_address, client_block,
};
use crate::http::pages::i18n::{self, Catalogue};
use crate::http::pages::{accept_language, render, texts_json};
use crate::http::paths::RoomPath;
use crate::http::refusal_log::RefusalLog;
use crate::http::state::{AdminAccess, Live};
use crate::store::{self, SaleStore, Store, StoreExt};
use crate::words::clock::{Clock, Millis, rfc3339, rfc3339_ms};
use crate::words::credentials::{AdminSession, Credentials};
use crate::words::credentials::{constant_time_eq, random_secret};
use crate::words::login_limit::Attempt;
use crate::words::page::PageBranding;
use crate::words::{ConfigError, RoomId, RoomInfo};

use super::drop_view::{self, AutotuneView, Timeline};
use super::room_form::{ConfigForm, FormInput, create_inputs, edit_inputs};

const LOGIN_CSRF_COOKIE: &str = "wr_csrf";
const SESSION_HOURS: u64 = 12;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/admin").get(page))
        .service(web::resource("/admin/login").post(login))
        .service(web::resource("/admin/logout").post(logout))
        .service(web::resource("/admin/rooms").post(create_room))
        .service(web::resource("/admin/rooms/{room}").post(change_room))
        .service(web::resource("/admin/rooms/{room}/close").post(close_room))
        .service(web::resource("/admin/rooms/{room}/sale").post(set_up_sale));
}

#[derive(Template)]
#[template(path = "admin_login.html")]
pub struct AdminLoginPage {
    pub t: &'static Catalogue,
    pub csrf: String,
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "admin.html")]
pub struct AdminPage {
    pub t: &'static Catalogue,
    /// The `admin.` texts, for `static/admin*.js`.
    pub texts_json: String,
    pub csrf: String,
    pub rooms: Vec<AdminRoomRow>,
    pub message: Option<String>,
    pub error: Option<String>,
    /// The create form's field the last refusal named, if it was that form's.
    pub create_refusal: FieldRefusal,
    /// The create form's inputs.
    pub create_inputs: Vec<FormInput>,
    /// The closed rooms' reports kept: room, made at, closed at (RFC 3339).
    pub reports: Vec<(String, String, String)>,
}

/// The field of one form that the server's last refusal named, shown next
/// to it: `aria-invalid`, and `aria-describedby` pointing at the message.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FieldRefusal {
    /// The form's id (`edit-<room>`, `create-room`), its fields' ids'
    /// prefix (`edit-<room>-admit_per_tick`; the create form's: `create-`).
    prefix: String,
    /// The form field's name (`admit_per_tick`, `page_title`).
    field: Option<String>,
    message: String,
}

impl FieldRefusal {
    /// A refusal of `field` as the config names it (`page.title` is the
    /// form's `page_title`).
    fn new(prefix: String, field: &str, message: &str) -> Self {
        Self {
            prefix,
            field: Some(field.replace('.', "_")),
            message: message.into(),
        }
    }

    /// Whether the refusal names `field`.
    pub fn names(&self, field: &str) -> bool {
        self.field.as_deref() == Some(field)
    }

    /// The attributes of `field` when the refusal names it (written out
    /// unescaped: the prefix is a room id's `[a-z0-9-]` and the field a
    /// config field's name); `autofocus` takes the operator to it.
    pub fn attributes(&self, field: &str) -> String {
        if self.names(field) {
            format!(
                r#" aria-invalid="true" aria-describedby="{}" autofocus"#,
                self.message_id()
            )
        } else {
            String::new()
        }
    }

    /// The id of the message shown next to the field.
    pub fn message_id(&self) -> String {
        format!(
            "{}-{}-error",
            self.prefix,
            self.field.as_deref().unwrap_or_default()
        )
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

pub struct AdminRoomRow {
    pub id: String,
    pub name: String,
    pub target_url: String,
    /// Empty for no cap.
    pub max_active: String,
    pub paused: bool,
    pub waiting: u64,
    pub active: u64,
    pub admitted_total: u64,
    pub admitted_last_minute: u64,
    pub oldest_wait_seconds: u64,
    pub turned_away: u64,
    pub no_shows: u64,
    pub sessions_lapsed: u64,
    /// Whether a user key is set; its value is never shown.
    pub user_key_set: bool,
    pub priority_waiting: u64,
    /// RFC 3339, empty for no scheduled opening.
    pub opens_at: String,
    pub pre_queue: u64,
    pub bypassed: u64,
    pub bypassed_active: u64,
    /// The room's page branding, each field empty for the default.
    pub page: PageBranding,
    /// The draw, with `opens_at`: commitment, seed (empty before the
    /// opening) and entrants.
    pub draw: Option<(String, String, u64)>,
    /// The edit form's inputs.
    pub inputs: Vec<FormInput>,
    /// The edit form's field the last refusal named, if it was this room's.
    pub refusal: FieldRefusal,
    /// The schedule's entries in time order; none without a schedule.
    pub timeline: Option<Timeline>,
    /// Autotune's rate, decision and changes; none with autotune off.
    pub autotune: Option<AutotuneView>,
    /// The node's clock as the page was made (RFC 3339, with
    /// milliseconds): the chart puts autotune's changes on the browser's
    /// clock by it until the room's history says it again.
    pub now: String,
}

impl AdminRoomRow {
    /// The row of a room, at `now` (the store's clock).
    fn of(info: RoomInfo, t: &'static Catalogue, now: Millis) -> Self {
        let RoomInfo {
            id,
            config,
            stats,
            user_key_set,
            notify_webhook_secret_set: _,
            draw,
        } = info;
        let timeline = drop_view::timeline(
            t,
            &config.schedule,
            stats.next_change_at,
            config.paused,
            now,
        );
        let autotune = config.autotune.as_ref().map(|tune| {
            drop_view::autotune(
                t,
                config.admit_per_tick,
                stats.admit_per_tick_effective,
                tune.dry_run,
                stats.autotune.as_ref(),
            )
        });
        Self {
            id: id.to_string(),
            timeline,
            autotune,
            now: rfc3339_ms(now),
            inputs: edit_inputs(t, &config),
            name: config.name,
            target_url: config.target_url,
            max_active: config.max_active.map(|m| m.to_string()).unwrap_or_default(),
            paused: config.paused,
            waiting: stats.waiting,
            active: stats.active,
            admitted_total: stats.admitted_total,
            admitted_last_minute: stats.admitted_last_minute,
            oldest_wait_seconds: stats.oldest_wait_seconds,
            turned_away: stats.turned_away,
            no_shows: stats.no_shows,
            sessions_lapsed: stats.sessions_lapsed,
            user_key_set,
            priority_waiting: stats.priority_waiting,
            opens_at: config.opens_at.map(|at| rfc3339(at.0)).unwrap_or_default(),
            pre_queue: stats.pre_queue,
            bypassed: stats.bypassed,
            bypassed_active: stats.bypassed_active,
            page: config.page,
            draw: draw.map(|d| (d.commitment, d.seed.unwrap_or_default(), d.entrants)),
            refusal: FieldRefusal::default(),
        }
    }
}

/// What the page says after a form that went through, or why a form was
/// not read: words of the catalogue (`admin.done_…`, `admin.refused_…`),
/// never text. A link anyone can make can only show what the page would
/// have said itself; a refusal's own text (a field's limits) is shown by
/// the form's answer, never carried in a URL.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct Notice {
    /// `room_created`, `room_updated`, `room_closed` or `sale_set_up`.
    done: Option<String>,
    /// `form_expired` or `form_unreadable`.
    refused: Option<String>,
    /// The room `done` is about.
    room: Option<String>,
}

/// The outcomes a form's answer names in `/admin?done=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
enum Done {
    RoomCreated,
    RoomUpdated,
    RoomClosed,
    SaleSetUp,
}

impl Done {
    /// `/admin?done=…&room=…`, where the page says it.
    fn answer(self, room: &RoomId) -> HttpResponse {
        let word: &'static str = self.into();
        let query = serde_urlencoded::to_string([("done", word), ("room", room.as_str())])
            .unwrap_or_default();
        HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/admin?{query}")))
            .finish()
    }
}

impl Notice {
    /// What the page says: a known word for a room whose id is an id;
    /// anything else in the query says nothing.
    fn said(&self, t: &Catalogue) -> (Option<String>, Option<String>) {
        let message = self
            .done
            .as_deref()
            .and_then(|done| done.parse::<Done>().ok())
            .zip(self.room.as_deref().and_then(RoomId::parse))
            .map(|(done, room)| done.said(t, &room));
        let error = self
            .refused
            .as_deref()
            .and_then(|refused| refused.parse::<FormTrouble>().ok())
            .map(|trouble| trouble_said(t, trouble).to_string());
        (message, error)
    }
}

impl Done {
    fn said(self, t: &Catalogue, room: &RoomId) -> String {
        match self {
            Done::RoomCreated => t.fill("admin.done_room_created", "room", room),
            Done::RoomUpdated => t.fill("admin.done_room_updated", "room", room),
            Done::RoomClosed => t.fill("admin.done_room_closed", "room", room),
            Done::SaleSetUp => t.fill("admin.done_sale_set_up", "room", room),
        }
    }
}

/// Why a form was not read, in the operator's words.
fn trouble_said(t: &Catalogue, trouble: FormTrouble) -> &str {
    match trouble {
        FormTrouble::FormExpired => t.text("admin.refused_form_expired"),
        FormTrouble::FormUnreadable => t.text("admin.refused_form_unreadable"),
        FormTrouble::SessionExpired => t.text("admin.refused_session_expired"),
    }
}

/// Why a form was refused, and the field it is about (none: the form as
/// a whole).
struct Refusal {
    field: Option<String>,
    message: String,
}

impl From<ConfigError> for Refusal {
    fn from(error: ConfigError) -> Self {
        Self {
            field: Some(error.field).filter(|field| !field.is_empty()),
            message: error.message,
        }
    }
}

impl From<String> for Refusal {
    fn from(message: String) -> Self {
        Self {
            field: None,
            message,
        }
    }
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Self {
        error.to_string().into()
    }
}

impl From<crate::store::StoreError> for Refusal {
    fn from(error: crate::store::StoreError) -> Self {
        match error {
            crate::store::StoreError::InvalidConfig(error) => error.into(),
            other => ApiError::from(other).to_string().into(),
        }
    }
}

/// A room form's refusal, shown next to its field: in whose form (none for
/// the create form) and why.
struct Refused {
    room: Option<String>,
    refusal: Refusal,
}

#[utoipa::path(
    get,
    path = "/admin",
    operation_id = "admin_page",
    tag = "pages",
    summary = "The operator's page (HTML); the login form without a session",
    params(Notice),
    responses(
        (status = 200, description = "The page, or the login form", content_type = "text/html"),
        (status = 503, description = "store_unavailable"),
    ),
)]
async fn page(
    req: HttpRequest,
    notice: web::Query<Notice>,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
) -> Result<HttpResponse, ApiError> {
    let Some(session) = admin_session(&req).await? else {
        return Ok(login_page(&req, None, actix_web::http::StatusCode::OK));
    };
    let (message, error) = notice.said(operator_catalogue(&req));
    let flash = Flash {
        message,
        error: error.map(|error| Refused {
            room: None,
            refusal: error.into(),
        }),
    };
    admin_page(&req, store.get_ref(), &credentials, &session, flash).await
}

/// What the page shows above the rooms.
struct Flash {
    message: Option<String>,
    error: Option<Refused>,
}

/// The admin page, with what it has to say.
async fn admin_page(
    req: &HttpRequest,
    store: &dyn Store,
    credentials: &Credentials,
    session: &AdminSession,
    flash: Flash,
) -> Result<HttpResponse, ApiError> {
    let t = operator_catalogue(req);
    // Read before the rooms: an entry due by then that the read did not
    // apply is one an operator's pause holds.
    let now = req
        .app_data::<web::Data<dyn Clock>>()
        .map_or(0, |clock| clock.now_ms());
    let rooms = store.rooms().await?;
    let mut rooms: Vec<AdminRoomRow> = rooms
        .into_iter()
        .map(|info| AdminRoomRow::of(info, t, now))
        .collect();
    let mut create_refusal = FieldRefusal::default();
    let error = flash.error.map(|Refused { room, refusal }| {
        if let Some(field) = &refusal.field {
            match room {
                Some(room) => {
                    if let Some(row) = rooms.iter_mut().find(|row| row.id == room) {
                        row.refusal =
                            FieldRefusal::new(format!("edit-{}", row.id), field, &refusal.message);
                    }
                }
                None => {
                    create_refusal = FieldRefusal::new("create".into(), field, &refusal.message)
                }
            }
        }
        refusal.message
    });
    let reports = store
        .run(crate::words::op::ListReports {})
        .await?
        .into_iter()
        .filter_map(|entry| {
            let closed_at = entry.closed_at?;
            Some((
                entry.room,
                rfc3339_ms(entry.created_at.0),
                rfc3339(closed_at.0),
            ))
        })
        .collect();
    let csrf = credentials.csrf_for_session(session);
    let mut page = render(&AdminPage {
        t,
        texts_json: texts_json(t, "admin."),
        csrf,
        rooms,
        message: flash.message,
        error,
        create_refusal,
        create_inputs: create_inputs(t),
        reports,
    });
    // The preview of a room's page shows its logo, wherever it is.
    page.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(ADMIN_CONTENT_SECURITY_POLICY),
    );
    Ok(page)
}

/// The policy of every answer, with images from any `https://` origin:
/// the admin page previews each room's logo (`page.logo_url`).
pub(super) const ADMIN_CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data: https:; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The catalogue of an operator page: English or Korean, as the browser asks.
pub(super) fn operator_catalogue(req: &HttpRequest) -> &'static Catalogue {
    i18n::negotiate_admin(accept_language(req))
}

/// The login form, with a double-submit CSRF cookie (there is no session yet).
pub(super) fn login_page(
    req: &HttpRequest,
    error: Option<String>,
    status: actix_web::http::StatusCode,
) -> HttpResponse {
    let csrf = req
        .cookie(LOGIN_CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .filter(|v| v.len() >= 32)
        .unwrap_or_else(random_secret);
    let mut response = render(&AdminLoginPage {
        t: operator_catalogue(req),
        csrf: csrf.clone(),
        error,
    });
    *response.status_mut() = status;
    let cookie = Cookie::build(LOGIN_CSRF_COOKIE, csrf)
        .path("/admin")
        .http_only(true)
        .same_site(SameSite::Strict)
        .finish();
    let _ = response.add_cookie(&cookie);
    response
}

#[derive(Deserialize, utoipa::ToSchema)]
struct LoginForm {
    token: String,
    csrf: String,
}

#[utoipa::path(
    post,
    path = "/admin/login",
    tag = "pages",
    summary = "Log in to the admin page with the admin token",
    description = "`csrf` must match the login form's cookie. Wrong tokens are counted per client address; past the limit, 429 until the lockout ends.",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Logged in: to `/admin`, with the session cookie"),
        (status = 400, description = "The form expired (the login form again, HTML), or the form could not be read (`invalid_form`, JSON)", content(("text/html"), (ErrorBody = "application/json"))),
        (status = 408, description = "body_timeout"),
        (status = 415, description = "unsupported_media_type"),
        (status = 401, description = "A wrong token (the login form again)", content_type = "text/html"),
        (status = 429, description = "Too many wrong tokens from this address (the login form again)", content_type = "text/html"),
    ),
)]
async fn login(
    req: HttpRequest,
    form: web::Form<LoginForm>,
    admin: web::Data<AdminAccess>,
    refusal_log: web::Data<RefusalLog>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
    store: web::Data<dyn Store>,
) -> HttpResponse {
    let expected = req
        .cookie(LOGIN_CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .unwrap_or_default();
    let t = operator_catalogue(&req);
    if expected.is_empty() || !constant_time_eq(&form.csrf, &expected) {
        return login_page(
            &req,
            Some(t.text("admin.login_form_expired").into()),
            actix_web::http::StatusCode::BAD_REQUEST,
        );
    }
    let address = client_address(&req);
    let attempt = match constant_time_eq(form.token.trim(), &admin.token) {
        true => Attempt::Right,
        false => Attempt::Wrong,
    };
    let counted = admin
        .login_guard
        .attempt(
            store.get_ref(),
            client_block(&req),
            attempt,
            clock.now_ms(),
            &refusal_log,
        )
        .await;
    if let Err(wait_s) = counted {
        let message = t.fill("admin.login_too_many", "n", wait_s.max(1));
        return login_page(
            &req,
            Some(message),
            actix_web::http::StatusCode::TOO_MANY_REQUESTS,
        );
    }
    if attempt == Attempt::Wrong {
        if let Some(left_out) = refusal_log.admit("wrong_admin_login", clock.now_ms()) {
            tracing::warn!(%address, left_out, "admin login with a wrong token");
        }
        return login_page(
            &req,
            Some(t.text("admin.login_wrong_token").into()),
            actix_web::http::StatusCode::UNAUTHORIZED,
        );
    }
    let now = clock.now_ms();
    let session = AdminSession::new(now + SESSION_HOURS * 3_600_000);
    let cookie = admin_session_cookie(&credentials, now, &session);
    tracing::info!(%address, "admin logged in");
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/admin"))
        .cookie(cookie)
        .finish()
}

#[derive(Deserialize, utoipa::ToSchema)]
struct CsrfForm {
    csrf: String,
}

#[utoipa::path(
    post,
    path = "/admin/logout",
    tag = "pages",
    summary = "Log out of the admin page",
    description = "A form of the admin page, with its session cookie and CSRF token. Answers 303 back to `/admin`, which shows the login form.",
    request_body(content = CsrfForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Back to the admin page"),
        (status = 503, description = "store_unavailable"),
    ),
)]
async fn logout(
    OperatorForm(_, session): OperatorForm<CsrfForm>,
    store: web::Data<dyn Store>,
) -> Result<HttpResponse, ApiError> {
    // Ended in the store, so the old cookie stops working on every node.
    store
        .end_admin_session(&session.id, session.expires_at)
        .await?;
    tracing::info!("admin logged out");
    let mut gone = Cookie::build(SESSION_COOKIE, "").path("/").finish();
    gone.make_removal();
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/admin"))
        .cookie(gone)
        .finish())
}

/// A form's answer: to the page saying what was done, or the page itself
/// (400) with the refusal, next to the field it names in whose form it is
/// (`room`; none for the create form).
async fn outcome(
    result: Result<(Done, RoomId), Refusal>,
    room: Option<&str>,
    form: FormContext<'_>,
) -> Result<HttpResponse, ApiError> {
    let refusal = match result {
        Ok((done, room)) => return Ok(done.answer(&room)),
        Err(refusal) => refusal,
    };
    let flash = Flash {
        message: None,
        error: Some(Refused {
            room: room.map(str::to_string),
            refusal,
        }),
    };
    let mut page = admin_page(form.req, form.store, form.credentials, form.session, flash).await?;
    *page.status_mut() = actix_web::http::StatusCode::BAD_REQUEST;
    Ok(page)
}

/// What a form's answer needs to show the page again.
struct FormContext<'a> {
    req: &'a HttpRequest,
    store: &'a dyn Store,
    credentials: &'a Credentials,
    session: &'a AdminSession,
}

#[utoipa::path(
    post,
    path = "/admin/rooms",
    tag = "pages",
    summary = "Create a room from the admin page",
    description = "A form of the admin page, with its session cookie and CSRF token. Answers 303 back to `/admin` with the outcome as a word of the catalogue (`?done=…&room=…`), or 400 with the page itself showing the refusal next to its field.",
    request_body(content = ConfigForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Back to the admin page"),
        (status = 400, description = "The page again, with the refusal", content_type = "text/html"),
        (status = 503, description = "store_unavailable"),
    ),
)]
async fn create_room(
    req: HttpRequest,
    OperatorForm(form, session): OperatorForm<ConfigForm>,
    store: web::Data<dyn Store>,
    live: web::Data<Live>,
    credentials: web::Data<Credentials>,
) -> Result<HttpResponse, ApiError> {
    let result = async {
        let raw_id = form.text("id").unwrap_or("").trim();
        let id = RoomId::parse(raw_id)
            .ok_or_else(|| ConfigError::new("id", "id must be 1 to 64 of a-z, 0-9 and -"))?;
        let config = form.patch()?.new_room()?;
        let info = store.create_room(id, config).await?;
        live.wakeups.note(&info.id);
        tracing::info!(room = %info.id, "room created from the admin page");
        Ok((Done::RoomCreated, info.id))
    }
    .await;
    let form = FormContext {
        req: &req,
        store: store.get_ref(),
        credentials: &credentials,
        session: &session,
    };
    outcome(result, None, form).await
}

#[utoipa::path(
    post,
    path = "/admin/rooms/{room}",
    tag = "pages",
    summary = "Change a room from the admin page",
    description = "A form of the admin page, with its session cookie and CSRF token. Answers 303 back to `/admin` with the outcome as a word of the catalogue (`?done=…&room=…`), or 400 with the page itself showing the refusal next to its field.",
    params(RoomPath),
    request_body(content = ConfigForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Back to the admin page"),
        (status = 400, description = "The page again, with the refusal", content_type = "text/html"),
        (status = 503, description = "store_unavailable"),
    ),
)]
async fn change_room(
    req: HttpRequest,
    path: web::Path<String>,
    OperatorForm(form, session): OperatorForm<ConfigForm>,
    store: web::Data<dyn Store>,
    live: web::Data<Live>,
    credentials: web::Data<Credentials>,
) -> Result<HttpResponse, ApiError> {
    let result = async {
        let id = RoomId::parse(&path).ok_or_else(|| Refusal::from("no such room".to_string()))?;
        let patch = form.patch()?;
        let info = store.configure(&id, patch).await?;
        live.wakeups.note(&id);
        tracing::info!(room = %info.id, config = ?info.config, "room configured from the admin page");
        Ok((Done::RoomUpdated, info.id))
    }
    .await;
    let form = FormContext {
        req: &req,
        store: store.get_ref(),
        credentials: &credentials,
        session: &session,
    };
    outcome(result, Some(&path), form).await
}

#[utoipa::path(
    post,
    path = "/admin/rooms/{room}/close",
    tag = "pages",
    summary = "Close a room from the admin page",
    description = "A form of the admin page, with its session cookie and CSRF token. Answers 303 back to `/admin` with the outcome as a word of the catalogue (`?done=…&room=…`), or 400 with the page itself showing the refusal next to its field.",
    params(RoomPath),
    request_body(content = CsrfForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Back to the admin page"),
        (status = 400, description = "The page again, with the refusal", content_type = "text/html"),
        (status = 503, description = "store_unavailable"),
    ),
)]
async fn close_room(
    req: HttpRequest,
    path: web::Path<String>,
    OperatorForm(_, session): OperatorForm<CsrfForm>,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
    credentials: web::Data<Credentials>,
) -> Result<HttpResponse, ApiError> {
    let result = async {
        let id = RoomId::parse(&path).ok_or_else(|| Refusal::from("no such room".to_string()))?;
        super::report::close(store.get_ref(), sale.get_ref(), &id).await?;
        tracing::info!(room = %id, "room closed from the admin page");
        Ok((Done::RoomClosed, id))
    }
    .await;
    let form = FormContext {
        req: &req,
        store: store.get_ref(),
        credentials: &credentials,
        session: &session,
    };
    outcome(result, None, form).await
}

#[derive(Deserialize, utoipa::ToSchema)]
struct SaleForm {
    csrf: String,
    stock: Option<String>,
    seats: Option<String>,
    per_user_limit: Option<String>,
    hold_ttl_s: Option<String>,
}

/// A number of the sale form: empty is none.
fn number<T: std::str::FromStr>(field: &str, value: &Option<String>) -> Result<Option<T>, String> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(raw) => raw
            .parse()
            .map(Some)
            .map_err(|_| format!("{field} must be a whole number")),
    }
}

impl SaleForm {
    fn request(&self) -> Result<crate::words::sale::SaleRequest, String> {
        let seats: Vec<String> = self
            .seats
            .as_deref()
            .unwrap_or("")
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        Ok(crate::words::sale::SaleRequest {
            stock: number("stock", &self.stock)?,
            seats: (!seats.is_empty()).then_some(seats),
            per_user_limit: number("per_user_limit", &self.per_user_limit)?,
            hold_ttl_s: number("hold_ttl_s", &self.hold_ttl_s)?,
        })
    }
}

#[utoipa::path(
    post,
    path = "/admin/rooms/{room}/sale",
    tag = "pages",
    summary = "Set up a room's sale from the admin page",
    description = "A form of the admin page, with its session cookie and CSRF token. Answers 303 back to `/admin` with the outcome as a word of the catalogue (`?done=…&room=…`), or 400 with the page itself showing the refusal next to its field.",
    params(RoomPath),
    request_body(content = SaleForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Back to the admin page"),
        (status = 400, description = "The page again, with the refusal", content_type = "text/html"),
        (status = 503, description = "store_unavailable"),
    ),
)]
async fn set_up_sale(
    req: HttpRequest,
    path: web::Path<String>,
    OperatorForm(form, session): OperatorForm<SaleForm>,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
    credentials: web::Data<Credentials>,
) -> Result<HttpResponse, ApiError> {
    let result = async {
        let id = RoomId::parse(&path).ok_or_else(|| Refusal::from("no such room".to_string()))?;
        let config = form.request()?.into_config()?;
        store::set_up_sale(store.get_ref(), sale.get_ref(), &id, config)
            .await
            .map_err(|e| ApiError::from(e).to_string())?;
        Ok((Done::SaleSetUp, id))
    }
    .await;
    let form = FormContext {
        req: &req,
        store: store.get_ref(),
        credentials: &credentials,
        session: &session,
    };
    outcome(result, None, form).await
}

impl CsrfProtected for CsrfForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

impl CsrfProtected for SaleForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

#[cfg(test)]
mod notice_tests {
    use super::*;

    #[test]
    fn the_query_names_words_never_text() {
        let t = i18n::english();
        let notice = |done: &str, refused: &str, room: &str| Notice {
            done: Some(done.into()),
            refused: Some(refused.into()),
            room: Some(room.into()),
        };
        assert_eq!(
            notice("room_closed", "form_expired", "drop").said(t),
            (
                Some("Room drop closed.".to_string()),
                Some("The form expired; please try again.".to_string())
            )
        );
        for (done, refused, room) in [
            (
                "Your account is locked: call +1 555",
                "Send your token to x",
                "drop",
            ),
            ("room_closed", "", "not a room id!"),
        ] {
            assert_eq!(notice(done, refused, room).said(t), (None, None), "{done}");
        }
    }
}

#[cfg(test)]
mod policy_tests {
    use super::ADMIN_CONTENT_SECURITY_POLICY;
    use crate::http::middleware::CONTENT_SECURITY_POLICY;

    #[test]
    fn the_admin_policy_only_widens_images() {
        assert_eq!(
            ADMIN_CONTENT_SECURITY_POLICY,
            CONTENT_SECURITY_POLICY.replace("img-src 'self' data:", "img-src 'self' data: https:")
        );
    }
}
