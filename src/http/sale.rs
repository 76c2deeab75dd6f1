//! The sale's HTTP endpoints: the visitor's (with their pass) and the operator's.

use actix_web::cookie::Cookie;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use serde::Deserialize;

use crate::http::error::{ApiError, ErrorCode};
use crate::http::extractors::{
    IdempotencyKey, LinkJudge, LinkedPass, Operator, Pass, PassChecker, PassHolder, PassRefusal,
    Room, SaleViewer, judge_linked_pass, pass_cookie,
};
use crate::http::pages::i18n::Catalogue;
use crate::http::pages::{branding, page_language, render, texts_json};
use crate::http::paths::{ClaimPath, RoomPath};
use crate::http::sale_views::SaleViews;
use crate::store::{SaleStore, SaleStoreExt, Store, StoreExt, set_up_sale};
use crate::words::RoomId;
use crate::words::clock::{Clock, rfc3339_ms};
use crate::words::language::Language;
use crate::words::page::PageBranding;
use crate::words::sale::{
    Claim, ClaimState, ClaimView, SaleRequest, SaleView, SeatState, Want, WantBody,
};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/rooms/{room}/sale").get(show))
        .service(web::resource("/api/rooms/{room}/sale/claims").post(hold))
        .service(web::resource("/api/rooms/{room}/sale/claims/{claim}/confirm").post(confirm))
        .service(web::resource("/api/rooms/{room}/sale/claims/{claim}").delete(release))
        .service(web::resource("/api/admin/rooms/{room}/sale").put(configure))
        .service(web::resource("/api/admin/rooms/{room}/sale/orders").get(orders))
        .service(web::resource("/rooms/{room}/sale").get(page));
}

fn claim_json(room: &RoomId, claim: &Claim) -> serde_json::Value {
    serde_json::to_value(claim.view(room)).expect("a claim always serializes")
}

/// `GET …/sale`: what is left, and the caller's own claims.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Sale)]
struct SaleShown<'a> {
    #[serde(flatten)]
    view: SaleView,
    /// The caller's own claims (with a valid pass; empty without).
    mine: Vec<ClaimView<'a>>,
    /// The server's clock (RFC 3339, milliseconds), to count holds down against.
    server_time: String,
}

/// `GET …/sale/orders`: confirmed claims in order of confirmation.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Orders<'a> {
    orders: Vec<ClaimView<'a>>,
}

#[utoipa::path(
    get,
    path = "/api/rooms/{room}/sale",
    tag = "sale",
    summary = "What is left of the room's sale",
    description = "May be served from a cache up to one second old; the caller's own claims (`mine`, with a valid pass) are read now. A pass of another room is taken for none; any other pass the sale refuses is refused here too.",
    params(RoomPath),
    security((), ("pass" = []), ("pass_cookie" = [])),
    responses(
        (status = 200, body = SaleShown, description = "The sale"),
        (status = 401, description = "invalid_pass pass_revoked"),
        (status = 404, description = "sale_not_found"),
        (status = 409, description = "room_closed"),
    ),
)]
async fn show(
    Room(room): Room,
    SaleViewer(viewer): SaleViewer,
    sale_views: web::Data<SaleViews>,
    sale: web::Data<dyn SaleStore>,
    clock: web::Data<dyn Clock>,
) -> Result<HttpResponse, ApiError> {
    let view = sale_views
        .get(sale.get_ref(), clock.get_ref(), &room)
        .await?;
    let mine = match viewer {
        Some(pass) => sale.claims_of(&room, pass.visitor).await?,
        None => Vec::new(),
    };
    let mut view = SaleView::clone(&view);
    // The view may be a second old; the visitor's own claims are read now,
    // and their seats shown as they are.
    for claim in &mine {
        let shown = match claim.state {
            ClaimState::Confirmed => SeatState::Sold,
            _ => SeatState::Held,
        };
        for seat in &claim.seats {
            view.seats.insert(seat.clone(), shown);
        }
    }
    let body = SaleShown {
        view,
        mine: mine.iter().map(|c| c.view(&room)).collect(),
        // The page counts holds down against the server's clock, not the device's.
        server_time: rfc3339_ms(clock.now_ms()),
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(body))
}

#[utoipa::path(
    post,
    path = "/api/rooms/{room}/sale/claims",
    tag = "sale",
    summary = "Hold units or seats for this pass's visitor, all or nothing",
    description = "A retry with the same `Idempotency-Key` (after a timeout or a 503) gets the first answer again, never a second hold.",
    params(
        RoomPath,
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 128 visible characters"),
    ),
    request_body(content = WantBody, content_type = "application/json"),
    security(("pass" = []), ("pass_cookie" = [])),
    responses(
        (status = 201, body = ClaimView, description = "The hold"),
        (status = 400, description = "invalid_claim invalid_quantity invalid_seats invalid_idempotency_key unknown_seat wrong_kind"),
        (status = 401, description = "missing_pass invalid_pass pass_expired pass_revoked"),
        (status = 404, description = "sale_not_found"),
        (status = 409, description = "sold_out seat_taken limit_reached room_closed"),
    ),
)]
async fn hold(
    req: HttpRequest,
    Pass { room, visitor, .. }: Pass,
    body: web::Json<serde_json::Value>,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    let want = Want::parse(&body)
        .map_err(|(problem, message)| ApiError::bad_request(problem.into(), message))?;
    let IdempotencyKey(key) = IdempotencyKey::extract(&req).await?;
    // A known user's limit counts every visit and device of theirs.
    let user = store.user_of(&room, visitor).await?;
    let claim = sale
        .claim_as(&room, visitor, user.as_deref(), &want, key.as_deref())
        .await?;
    tracing::info!(%room, %visitor, claim = %claim.claim_id, sequence = claim.sequence, units = claim.quantity, "held");
    Ok(HttpResponse::Created().json(claim_json(&room, &claim)))
}

#[utoipa::path(
    post,
    path = "/api/rooms/{room}/sale/claims/{claim}/confirm",
    tag = "sale",
    summary = "The payment went through: the hold becomes an order",
    params(ClaimPath),
    security(("pass" = []), ("pass_cookie" = [])),
    responses(
        (status = 200, body = ClaimView, description = "The order"),
        (status = 401, description = "missing_pass invalid_pass pass_revoked"),
        (status = 404, description = "sale_not_found claim_not_found"),
        (status = 409, description = "claim_released room_closed"),
        (status = 410, description = "hold_expired"),
    ),
)]
async fn confirm(
    PassHolder(Pass { room, visitor, .. }): PassHolder,
    path: web::Path<(String, String)>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    let (_, claim_id) = path.into_inner();
    let claim = sale.confirm(&room, visitor, &claim_id).await?;
    tracing::info!(%room, %visitor, claim = %claim.claim_id, "confirmed");
    Ok(HttpResponse::Ok().json(claim_json(&room, &claim)))
}

#[utoipa::path(
    delete,
    path = "/api/rooms/{room}/sale/claims/{claim}",
    tag = "sale",
    summary = "Give the hold back to stock",
    params(ClaimPath),
    security(("pass" = []), ("pass_cookie" = [])),
    responses(
        (status = 204, description = "Released"),
        (status = 401, description = "missing_pass invalid_pass pass_revoked"),
        (status = 404, description = "sale_not_found claim_not_found"),
        (status = 409, description = "already_confirmed room_closed"),
        (status = 410, description = "hold_expired"),
    ),
)]
async fn release(
    PassHolder(Pass { room, visitor, .. }): PassHolder,
    path: web::Path<(String, String)>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    let (_, claim_id) = path.into_inner();
    sale.release(&room, visitor, &claim_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    put,
    path = "/api/admin/rooms/{room}/sale",
    tag = "operator",
    summary = "Set up (or replace) the room's sale",
    params(RoomPath),
    request_body(content = SaleRequest, content_type = "application/json"),
    security(("admin" = [])),
    responses(
        (status = 200, body = SaleView, description = "The sale as set up"),
        (status = 400, description = "invalid_sale invalid_config"),
        (status = 409, description = "room_closed"),
    ),
)]
async fn configure(
    _: Operator,
    Room(room): Room,
    body: web::Json<serde_json::Value>,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    let request: SaleRequest =
        ApiError::parse_body(body.into_inner(), ErrorCode::InvalidSale, "the sale")?;
    let config = request
        .into_config()
        .map_err(|message| ApiError::bad_request(ErrorCode::InvalidSale, message))?;
    let view = set_up_sale(store.get_ref(), sale.get_ref(), &room, config).await?;
    Ok(HttpResponse::Ok().json(view))
}

#[utoipa::path(
    get,
    path = "/api/admin/rooms/{room}/sale/orders",
    tag = "operator",
    summary = "Confirmed orders, in order of confirmation",
    params(RoomPath),
    security(("admin" = [])),
    responses(
        (status = 200, body = Orders, description = "The orders"),
        (status = 404, description = "sale_not_found"),
    ),
)]
async fn orders(
    _: Operator,
    Room(room): Room,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    let orders = sale.orders(&room).await?;
    Ok(HttpResponse::Ok().json(Orders {
        orders: orders.iter().map(|c| c.view(&room)).collect(),
    }))
}

#[derive(Template)]
#[template(path = "sale.html")]
pub struct SalePage {
    pub t: &'static Catalogue,
    pub room_id: String,
    pub room_name: String,
    /// The `sale.` texts, for `static/sale*.js`.
    pub texts_json: String,
    /// The room's branding: title, headline, logo, colours, footer.
    pub page: PageBranding,
    pub room_style_url: Option<String>,
}

#[derive(Deserialize)]
struct PassQuery {
    wr_pass: Option<String>,
}

/// Only what a signed JWT is made of (base64url and dots): nothing that
/// could end a cookie value or a header.
fn plain_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The `wr_pass` cookie to set for a pass offered in the sale page's link,
/// if any: only a pass that `check_pass` accepts for this room now (what
/// `/api/verify` accepts), and only where it cannot displace the
/// visitor's own (`judge_linked_pass`). `Err` only when the store cannot
/// answer.
async fn pass_cookie_from_link(
    req: &HttpRequest,
    checker: &PassChecker,
    clock: &dyn Clock,
    room: &RoomId,
    offered: &str,
) -> Result<Option<Cookie<'static>>, ApiError> {
    if !plain_token(offered) {
        return Ok(None);
    }
    match judge_linked_pass(req, checker, LinkJudge::Sale, room, offered).await {
        LinkedPass::Take(pass) => Ok(Some(pass_cookie(
            offered.to_string(),
            pass.seconds_left(clock.now_ms()),
        ))),
        LinkedPass::Keep => Ok(None),
        LinkedPass::Refused(PassRefusal::Store(error)) => Err(error.into()),
        LinkedPass::Refused(_) => Ok(None),
    }
}

/// The sale page. A pass arriving in the URL (the waiting room's redirect)
/// moves into an HttpOnly cookie and out of the address bar: the answer is
/// a redirect to the bare page, with the cookie only when
/// `pass_cookie_from_link` allows it (anything else in the link is dropped
/// without a word: the page then shows the visitor's own pass, or none).
#[utoipa::path(
    get,
    path = "/rooms/{room}/sale",
    operation_id = "sale_page",
    tag = "pages",
    summary = "The sale page (HTML)",
    description = "A pass in the link (`?wr_pass=`) moves into the `wr_pass` cookie: the answer is then a 303 to the bare page.",
    params(RoomPath, ("wr_pass" = Option<String>, Query, description = "A pass from the waiting room's redirect"), ("lang" = Option<String>, Query, description = "The page's language (kept in the `wr_lang` cookie), as on the waiting page")),
    responses(
        (status = 200, description = "The page", content_type = "text/html"),
        (status = 303, description = "To the bare page, the pass moved into a cookie"),
        (status = 404, description = "room_not_found"),
        (status = 503, description = "store_unavailable"),
    ),
)]
async fn page(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<PassQuery>,
    checker: PassChecker,
    clock: web::Data<dyn Clock>,
    store: web::Data<dyn Store>,
) -> HttpResponse {
    let Some(room) = RoomId::parse(&path) else {
        return ApiError::RoomNotFound(path.to_string()).error_response();
    };
    if let Some(offered) = query.into_inner().wr_pass {
        // A `?lang=` beside the pass is kept in its cookie, as the page would.
        let language = page_language(&req, Language::default());
        let cookie =
            match pass_cookie_from_link(&req, &checker, clock.get_ref(), &room, &offered).await {
                Ok(cookie) => cookie,
                Err(error) => return error.error_response(),
            };
        if cookie.is_none() {
            tracing::debug!(%room, "a pass in the sale page's link was not taken");
        }
        let mut response = HttpResponse::SeeOther();
        response.insert_header((header::LOCATION, format!("/rooms/{room}/sale")));
        if let Some(cookie) = cookie {
            response.cookie(cookie);
        }
        return language.kept(response.finish());
    }
    let (room_name, room_language, page) = match store.room(&room).await {
        Ok(info) => (
            info.config.name,
            info.config.language,
            info.config.page.shown(),
        ),
        Err(_) => (
            room.to_string(),
            Language::default(),
            PageBranding::default(),
        ),
    };
    let language = page_language(&req, room_language);
    let t = language.t;
    let page_answer = render(&SalePage {
        t,
        room_id: room.to_string(),
        room_name,
        texts_json: texts_json(t, "sale."),
        room_style_url: branding::stylesheet_url(&room, &page),
        page: page.clone(),
    });
    language.kept(branding::with_policy(page_answer, &page))
}
