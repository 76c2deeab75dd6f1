//! The sale's HTTP endpoints: the visitor's (with their pass) and the operator's.

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use askama::Template;
use serde::Deserialize;
use serde_json::json;

use crate::http::AppState;
use crate::http::admin::authorize;
use crate::http::error::ApiError;
use crate::http::pages::render;
use crate::http::visitor::{bearer, room_from_path};
use crate::words::clock::rfc3339_ms;
use crate::words::credentials::{CredentialError, PassClaims};
use crate::words::sale::{Claim, SaleRequest, Want};
use crate::words::{RoomId, VisitorId};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(show)
        .service(hold)
        .service(confirm)
        .service(release)
        .service(configure)
        .service(orders)
        .service(page);
}

/// An `Idempotency-Key` is the client's; keep it short.
const MAX_IDEMPOTENCY_KEY: usize = 128;

fn presented_pass(req: &HttpRequest) -> Option<String> {
    bearer(req)
        .map(str::to_string)
        .or_else(|| req.cookie("wr_pass").map(|c| c.value().to_string()))
}

fn pass_error(error: CredentialError) -> ApiError {
    match error {
        CredentialError::Expired => ApiError::unauthorized("pass_expired", "your pass has expired"),
        CredentialError::WrongRoom => {
            ApiError::unauthorized("invalid_pass", "this pass is for another room")
        }
        CredentialError::Invalid => ApiError::unauthorized("invalid_pass", "the pass is not valid"),
    }
}

fn visitor_of(claims: PassClaims) -> Result<VisitorId, ApiError> {
    claims
        .sub
        .parse()
        .map_err(|_| pass_error(CredentialError::Invalid))
}

/// The visitor behind the request's pass for this room. A claim needs a
/// pass valid now; confirming or releasing a hold made in time does not
/// (`valid_now: false`): the hold has its own expiry.
fn pass_visitor(
    req: &HttpRequest,
    state: &AppState,
    room: &RoomId,
    valid_now: bool,
) -> Result<VisitorId, ApiError> {
    let pass = presented_pass(req).ok_or_else(|| {
        ApiError::unauthorized(
            "missing_pass",
            "send your pass as a Bearer token or wr_pass cookie",
        )
    })?;
    let claims = if valid_now {
        state
            .credentials
            .read_pass(&pass, Some(room), state.clock.now_ms())
    } else {
        state.credentials.pass_holder(&pass, room)
    };
    visitor_of(claims.map_err(pass_error)?)
}

fn claim_json(room: &RoomId, claim: &Claim) -> serde_json::Value {
    serde_json::to_value(claim.view(room)).expect("a claim always serializes")
}

#[get("/api/rooms/{room}/sale")]
async fn show(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let room = room_from_path(&path)?;
    let view = state.sale.sale(&room).await?;
    let mine = match pass_visitor(&req, &state, &room, false) {
        Ok(visitor) => state.sale.claims_of(&room, visitor).await?,
        Err(_) => Vec::new(),
    };
    let mut body = serde_json::to_value(&view).expect("a sale always serializes");
    body["mine"] = mine.iter().map(|c| claim_json(&room, c)).collect();
    // The page counts holds down against the server's clock, not the device's.
    body["server_time"] = rfc3339_ms(state.clock.now_ms()).into();
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(body))
}

#[post("/api/rooms/{room}/sale/claims")]
async fn hold(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<serde_json::Value>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let room = room_from_path(&path)?;
    let visitor = pass_visitor(&req, &state, &room, true)?;
    let want =
        Want::parse(&body).map_err(|(code, message)| ApiError::bad_request(code, message))?;
    let key = match req.headers().get("Idempotency-Key") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .filter(|k| !k.is_empty() && k.len() <= MAX_IDEMPOTENCY_KEY)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_idempotency_key",
                        "Idempotency-Key must be 1 to 128 visible characters",
                    )
                })?,
        ),
    };
    let claim = state.sale.claim(&room, visitor, &want, key).await?;
    tracing::info!(%room, %visitor, claim = %claim.claim_id, sequence = claim.sequence, units = claim.quantity, "held");
    Ok(HttpResponse::Created().json(claim_json(&room, &claim)))
}

#[post("/api/rooms/{room}/sale/claims/{claim}/confirm")]
async fn confirm(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (room, claim_id) = path.into_inner();
    let room = room_from_path(&room)?;
    let visitor = pass_visitor(&req, &state, &room, false)?;
    let claim = state.sale.confirm(&room, visitor, &claim_id).await?;
    tracing::info!(%room, %visitor, claim = %claim.claim_id, "confirmed");
    Ok(HttpResponse::Ok().json(claim_json(&room, &claim)))
}

#[delete("/api/rooms/{room}/sale/claims/{claim}")]
async fn release(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (room, claim_id) = path.into_inner();
    let room = room_from_path(&room)?;
    let visitor = pass_visitor(&req, &state, &room, false)?;
    state.sale.release(&room, visitor, &claim_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Sets up or replaces a room's sale (claims and all).
pub async fn set_up_sale(
    state: &AppState,
    room: &RoomId,
    request: SaleRequest,
) -> Result<serde_json::Value, ApiError> {
    state.store.room(room).await?;
    let config = request
        .into_config()
        .map_err(|message| ApiError::bad_request("invalid_sale", message))?;
    let view = state.sale.configure_sale(room, config).await?;
    tracing::info!(%room, kind = view.kind, stock_left = view.stock_left, "sale set up");
    Ok(serde_json::to_value(view).expect("a sale always serializes"))
}

#[put("/api/admin/rooms/{room}/sale")]
async fn configure(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<serde_json::Value>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authorize(&req, &state, true)?;
    let room = room_from_path(&path)?;
    let request: SaleRequest = ApiError::parse_body(body.into_inner(), "invalid_sale", "the sale")?;
    Ok(HttpResponse::Ok().json(set_up_sale(&state, &room, request).await?))
}

#[get("/api/admin/rooms/{room}/sale/orders")]
async fn orders(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authorize(&req, &state, false)?;
    let room = room_from_path(&path)?;
    let orders = state.sale.orders(&room).await?;
    let orders: Vec<serde_json::Value> = orders.iter().map(|c| claim_json(&room, c)).collect();
    Ok(HttpResponse::Ok().json(json!({ "orders": orders })))
}

#[derive(Template)]
#[template(path = "sale.html")]
pub struct SalePage {
    pub room_id: String,
    pub room_name: String,
}

#[derive(Deserialize)]
struct PassQuery {
    wr_pass: Option<String>,
}

/// The sale page. A pass arriving in the URL (the waiting room's redirect)
/// moves into an HttpOnly cookie and out of the address bar.
#[get("/rooms/{room}/sale")]
async fn page(
    path: web::Path<String>,
    query: web::Query<PassQuery>,
    state: web::Data<AppState>,
) -> HttpResponse {
    if let Some(pass) = query.into_inner().wr_pass {
        let cookie = Cookie::build("wr_pass", pass)
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .finish();
        return HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/rooms/{}/sale", path.as_str())))
            .cookie(cookie)
            .finish();
    }
    let Some(room) = RoomId::parse(&path) else {
        return HttpResponse::NotFound().body("no such room");
    };
    let room_name = match state.store.room(&room).await {
        Ok(info) => info.config.name,
        Err(_) => room.to_string(),
    };
    render(&SalePage {
        room_id: room.to_string(),
        room_name,
    })
}
