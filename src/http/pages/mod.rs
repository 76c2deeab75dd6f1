//! Server-rendered pages: the waiting room, the demo's protected page, and
//! the static assets they use (embedded in the binary, so it runs anywhere).
//! Their texts come from the catalogues of `i18n`, in the language
//! [`page_language`] picks for the request (a `?lang=` kept in a cookie).

pub mod branding;
pub mod i18n;
pub mod operator_templates;

use actix_web::cookie::time::Duration as CookieDuration;
use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use serde::Deserialize;

use crate::http::error::ApiError;
use crate::http::extractors::{PASS_COOKIE, ticket_cookie_name};
use crate::http::paths::RoomPath;
use crate::store::{Store, StoreError, StoreExt};
use crate::words::clock::{Clock, rfc3339};
use crate::words::credentials::{CredentialError, Credentials};
use crate::words::language::Language;
use crate::words::notify::DEFAULT_NOTIFY_RETURN_S;
use crate::words::page::PageBranding;
use crate::words::{DEFAULT_ABANDON_AFTER_S, RoomId};
use i18n::Catalogue;
use operator_templates::{OperatorTemplates, PageVars, RoomPageVars, RoomVars};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/rooms/{room}").get(room_page))
        .service(web::resource("/rooms/{room}/style.css").get(branding::room_stylesheet))
        .service(web::resource("/demo/target").get(demo_target))
        .service(web::resource("/static/{file}").get(asset))
        .service(web::resource("/").get(index));
}

/// The texts of the page `prefix` names, as JSON for its script
/// (`<script id="wr-texts" type="application/json">`, read by `lib-i18n.js`).
pub fn texts_json(t: &Catalogue, prefix: &str) -> String {
    script_json(&t.page_texts(prefix))
}

/// The cookie that keeps a visitor's `?lang=` for the pages that follow.
pub const LANGUAGE_COOKIE: &str = "wr_lang";

/// How long the language cookie is kept: a choice made once holds for the
/// next sale too.
const LANGUAGE_COOKIE_DAYS: i64 = 365;

/// The language a visitor page speaks, and whether the answer keeps it in
/// the `wr_lang` cookie (it does when the address said `?lang=`).
pub struct PageLanguage {
    pub t: &'static Catalogue,
    keep: Option<Language>,
}

impl PageLanguage {
    /// `response` with the cookie that keeps a `?lang=` choice.
    pub fn kept(&self, mut response: HttpResponse) -> HttpResponse {
        if let Some(language) = self.keep {
            let cookie = Cookie::build(LANGUAGE_COOKIE, language.code())
                .path("/")
                .same_site(SameSite::Lax)
                .max_age(CookieDuration::days(LANGUAGE_COOKIE_DAYS))
                .finish();
            if let Err(error) = response.add_cookie(&cookie) {
                tracing::warn!(%error, "the language cookie could not be set");
            }
        }
        response
    }
}

/// The language of a visitor page for this request, where the room speaks
/// `room_language` (`i18n::choose` says in which order the request is heard).
pub fn page_language(req: &HttpRequest, room_language: Language) -> PageLanguage {
    let query = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(name, _)| name == "lang")
        .map(|(_, value)| value.into_owned());
    let cookie = req.cookie(LANGUAGE_COOKIE);
    let asked = i18n::Asked {
        query: query.as_deref(),
        cookie: cookie.as_ref().map(|c| c.value()),
        accept_language: accept_language(req),
    };
    PageLanguage {
        t: i18n::choose(&asked, room_language),
        keep: asked.query_language(),
    }
}

pub fn accept_language(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
}

/// Renders a template as an uncached HTML page.
pub fn render(page: &impl Template) -> HttpResponse {
    match page.render() {
        Ok(html) => html_page(html),
        Err(error) => {
            tracing::error!(%error, "template failed to render");
            ApiError::Internal.error_response()
        }
    }
}

/// A rendered page, uncached.
fn html_page(html: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(html)
}

#[derive(Template)]
#[template(path = "room.html")]
pub struct RoomPage {
    pub t: &'static Catalogue,
    pub room_id: String,
    pub room_name: String,
    pub texts_json: String,
    /// Where a visitor signs in for a room that takes known users: the
    /// origin of the room's target (or this site, for a path).
    pub site_url: String,
    /// The note saying how long an away visitor keeps the place; the
    /// script keeps it true when the operator changes it.
    pub keep_open: String,
    pub abandon_after_s: u64,
    /// The browser sends this room's ticket cookie (which the page's script
    /// cannot read): the visitor is coming back, so the script asks where
    /// their place stands before joining.
    pub returning: bool,
    /// The room has a webhook to notify through (`notify_webhook_url`
    /// set; never the URL itself): the page asks for a contact.
    pub notify_contact: bool,
    /// How long a visitor has to come back once called (`notify_return_s`):
    /// the away note says it once they asked to be notified.
    pub notify_return_s: u64,
    /// The tab's title, the line at the top and the introduction: the
    /// room's `page` ones, else the defaults.
    pub title: String,
    pub headline: String,
    pub intro: String,
    /// The operator's page fields (logo, message, footer).
    pub page: PageBranding,
    /// The room's colours (`branding::stylesheet_url`), if it sets any.
    pub room_style_url: Option<String>,
}

impl RoomPage {
    /// What an operator's template is given: this page's own values
    /// (docs/src/branding.md lists them), under the policy `csp`.
    fn template_vars<'a>(&'a self, csp: &'a str) -> RoomPageVars<'a> {
        RoomPageVars {
            room: RoomVars {
                id: &self.room_id,
                name: &self.room_name,
            },
            page: PageVars::from(&self.page),
            lang: self.t.lang(),
            texts: self
                .t
                .page_texts("room.")
                .into_iter()
                .map(|(key, text)| (key.strip_prefix("room.").unwrap_or(key), text))
                .collect(),
            texts_json: &self.texts_json,
            title: &self.title,
            headline: &self.headline,
            intro: &self.intro,
            keep_open: &self.keep_open,
            abandon_after_s: self.abandon_after_s,
            returning: self.returning,
            site_url: &self.site_url,
            script_url: "/static/room.js",
            style_url: "/static/style.css",
            room_style_url: self.room_style_url.as_deref(),
            csp,
        }
    }
}

/// How long a place is kept while its visitor is away, in `t`'s words:
/// whole minutes (rounded down: the place is kept at least that long),
/// or seconds under a minute. `static/room.js` says it the same way.
pub fn kept_away(t: &Catalogue, seconds: u64) -> String {
    if seconds >= 60 {
        t.fill("room.kept_minutes", "n", seconds / 60)
    } else {
        t.fill("room.kept_seconds", "n", seconds)
    }
}

/// The site behind a room: the origin of an absolute target, else `/`.
fn site_of(target_url: &str) -> String {
    url::Url::parse(target_url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .map(|url| url.origin().ascii_serialization() + "/")
        .unwrap_or_else(|| "/".into())
}

#[derive(Template)]
#[template(path = "room_missing.html")]
pub struct RoomMissingPage {
    pub t: &'static Catalogue,
    pub room_id: String,
}

#[derive(Template)]
#[template(path = "demo_target.html")]
pub struct DemoTargetPage {
    pub valid: bool,
    pub visitor: String,
    pub room: String,
    pub expires_at: String,
}

/// JSON that is safe inside a `<script>` element.
pub fn script_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|_| "{}".into())
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[utoipa::path(
    get,
    path = "/rooms/{room}",
    tag = "pages",
    summary = "The waiting-room page (HTML)",
    description = "Joins, shows the position, ETA and progress live over the WebSocket (polling as a fallback), and sends the visitor on when admitted. Query: `lang`, `user`, `code`, as api.md says. The language is `?lang=` (kept in the `wr_lang` cookie), else that cookie, else `Accept-Language`, else the room's `language`.",
    params(RoomPath),
    responses(
        (status = 200, description = "The page", content_type = "text/html"),
        (status = 404, description = "No such room (an HTML page)", content_type = "text/html"),
    ),
)]
async fn room_page(
    req: HttpRequest,
    path: web::Path<String>,
    store: web::Data<dyn Store>,
    templates: web::Data<OperatorTemplates>,
    clock: web::Data<dyn Clock>,
) -> HttpResponse {
    let missing = || {
        let language = page_language(&req, Language::default());
        let mut response = render(&RoomMissingPage {
            t: language.t,
            room_id: path.to_string(),
        });
        *response.status_mut() = actix_web::http::StatusCode::NOT_FOUND;
        language.kept(response)
    };
    let Some(room) = RoomId::parse(&path) else {
        return missing();
    };
    let notify_return_s = DEFAULT_NOTIFY_RETURN_S;
    let (room_name, site_url, abandon_after_s, room_language, page, notify) =
        match store.room(&room).await {
            Ok(info) => (
                info.config.name,
                site_of(&info.config.target_url),
                info.config.abandon_after_s,
                info.config.language,
                info.config.page.shown(),
                (
                    info.config.notify_webhook_url.is_some(),
                    info.config.notify_return_s,
                ),
            ),
            Err(StoreError::RoomNotFound(_) | StoreError::RoomClosed(_)) => return missing(),
            // The page itself still loads; its script retries the join.
            Err(error) => {
                tracing::warn!(%room, %error, "store unavailable while rendering the room page");
                (
                    room.to_string(),
                    "/".into(),
                    DEFAULT_ABANDON_AFTER_S,
                    Language::default(),
                    PageBranding::default(),
                    (false, notify_return_s),
                )
            }
        };
    let (notify_contact, notify_return_s) = notify;
    let language = page_language(&req, room_language);
    let t = language.t;
    let built_in = RoomPage {
        t,
        room_id: room.to_string(),
        texts_json: texts_json(t, "room."),
        site_url,
        keep_open: t.fill("room.keep_open", "time", kept_away(t, abandon_after_s)),
        abandon_after_s,
        returning: req.cookie(&ticket_cookie_name(&room)).is_some(),
        notify_contact,
        notify_return_s,
        title: page
            .title
            .clone()
            .unwrap_or_else(|| format!("{room_name} · {}", t.text("room.page_title"))),
        headline: page.headline.clone().unwrap_or_else(|| room_name.clone()),
        intro: page
            .message
            .clone()
            .unwrap_or_else(|| t.text("room.intro").to_string()),
        room_style_url: branding::stylesheet_url(&room, &page),
        room_name,
        page,
    };
    let csp = branding::content_security_policy(&built_in.page);
    let operators = templates.render(&room, &built_in.template_vars(&csp), clock.now_ms());
    let response = match operators {
        Some(html) => html_page(html),
        None => render(&built_in),
    };
    language.kept(branding::with_policy(response, &built_in.page))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct DemoQuery {
    wr_pass: Option<String>,
}

/// Stands in for the protected site in the demo: it verifies the pass
/// offline, as any site with the JWKS would.
#[utoipa::path(
    get,
    path = "/demo/target",
    tag = "pages",
    summary = "The demo's protected page (HTML): checks the pass offline",
    params(DemoQuery),
    responses((status = 200, description = "The page", content_type = "text/html")),
)]
async fn demo_target(
    req: HttpRequest,
    query: web::Query<DemoQuery>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
) -> HttpResponse {
    // A valid pass the browser holds is never displaced by one in a link.
    let now = clock.now_ms();
    let read = |pass: &str| credentials.read_pass(pass, None, now);
    let claims = match req.cookie(PASS_COOKIE).map(|c| read(c.value())) {
        Some(Ok(claims)) => Ok(claims),
        _ => query
            .into_inner()
            .wr_pass
            .ok_or(CredentialError::Invalid)
            .and_then(|pass| read(&pass)),
    };
    render(&match claims {
        Ok(claims) => DemoTargetPage {
            valid: true,
            visitor: claims.sub,
            room: claims.room,
            expires_at: rfc3339(claims.exp * 1000),
        },
        Err(_) => DemoTargetPage {
            valid: false,
            visitor: String::new(),
            room: String::new(),
            expires_at: String::new(),
        },
    })
}

// Page scripts are ES modules (`<script type="module">`); the lib-*.js ones
// are shared by the three pages (lib-i18n.js hands them their texts), the
// room*.js, sale*.js and admin*.js ones make up each page, its state in
// its *-state.js; waitroom-client.js is the waiting page's client of the
// API, also for apps on other origins (see `http::cors`). The catalogues (static/i18n/) are not served: each page
// gets its part inline as JSON data (see `texts_json`).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "lib-api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/lib-api.js"),
    ),
    (
        "lib-dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/lib-dom.js"),
    ),
    (
        "lib-socket.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/lib-socket.js"),
    ),
    (
        "lib-i18n.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/lib-i18n.js"),
    ),
    (
        "room.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/room.js"),
    ),
    (
        "waitroom-client.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/waitroom-client.js"),
    ),
    (
        "refusals.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/refusals.js"),
    ),
    (
        "room-notify.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/room-notify.js"),
    ),
    (
        "notify-sw.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/notify-sw.js"),
    ),
    (
        "room-state.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/room-state.js"),
    ),
    (
        "pow-worker.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/pow-worker.js"),
    ),
    (
        "admin-chart.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/admin-chart.js"),
    ),
    (
        "admin.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/admin.js"),
    ),
    (
        "admin-drop.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/admin-drop.js"),
    ),
    (
        "admin-preview.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/admin-preview.js"),
    ),
    (
        "admin-state.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/admin-state.js"),
    ),
    (
        "sale.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale.js"),
    ),
    (
        "sale-actions.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-actions.js"),
    ),
    (
        "sale-api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-api.js"),
    ),
    (
        "sale-countdown.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-countdown.js"),
    ),
    (
        "sale-flow.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-flow.js"),
    ),
    (
        "sale-quantity.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-quantity.js"),
    ),
    (
        "sale-refresh.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-refresh.js"),
    ),
    (
        "sale-seats.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-seats.js"),
    ),
    (
        "sale-state.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-state.js"),
    ),
    (
        "sale-view.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/sale-view.js"),
    ),
    (
        "demo-target.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../static/demo-target.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../../static/style.css"),
    ),
];

/// The service worker of the waiting page's "Notify me" (it shows a
/// push's notification and opens its resume link), and the pages it
/// serves: every room's (`/rooms/…`), the resume links among them.
pub const SERVICE_WORKER: &str = "notify-sw.js";
pub const SERVICE_WORKER_SCOPE: &str = "/rooms/";

#[utoipa::path(
    get,
    path = "/static/{file}",
    tag = "pages",
    summary = "A static asset of the pages (scripts, styles)",
    params(("file" = String, Path, description = "The asset's name", example = "style.css")),
    responses(
        (status = 200, description = "The asset", content(("text/javascript"), ("text/css"))),
        (status = 404, description = "not_found"),
    ),
)]
async fn asset(path: web::Path<String>) -> HttpResponse {
    match ASSETS.iter().find(|(name, _, _)| *name == path.as_str()) {
        // The notifications' service worker, whose scope is the waiting
        // pages (`/rooms/`), above its own directory: it says it may be.
        // Checked afresh (the browser looks for a new one every day anyway).
        Some((name, content_type, body)) if *name == SERVICE_WORKER => HttpResponse::Ok()
            .content_type(*content_type)
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .insert_header(("Service-Worker-Allowed", SERVICE_WORKER_SCOPE))
            .body(*body),
        Some((_, content_type, body)) => HttpResponse::Ok()
            .content_type(*content_type)
            .insert_header((header::CACHE_CONTROL, "public, max-age=300"))
            .body(*body),
        None => ApiError::NotFound(format!("no static file called {:?}", path.as_str()))
            .error_response(),
    }
}

#[utoipa::path(
    get,
    path = "/",
    tag = "pages",
    summary = "To the admin page",
    responses((status = 303, description = "To `/admin`")),
)]
async fn index() -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/admin"))
        .finish()
}
