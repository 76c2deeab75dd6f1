//! Web push's public part: `GET /api/push/key`, the VAPID public key a
//! page subscribes with (the browser's `applicationServerKey`). The key
//! derives from `--secret` (`words::push`), so every node answers the same.

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use serde::Serialize;

use crate::words::credentials::Credentials;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/push/key").get(key));
}

/// The VAPID public key.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PushKey {
    /// The uncompressed P-256 point (65 bytes), base64url without padding.
    #[schema(
        example = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    )]
    pub public_key: String,
}

/// Cached for five minutes, as the JWKS is: a page that subscribes with
/// the key of before a rotation is still served, since the sender tries
/// the previous key too while `--previous-secret` is set.
#[utoipa::path(
    get,
    path = "/api/push/key",
    tag = "visitor",
    summary = "The key a browser subscribes to web push with (VAPID)",
    responses((status = 200, body = PushKey, description = "The current VAPID public key: the browser's `applicationServerKey`")),
)]
async fn key(credentials: web::Data<Credentials>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=300"))
        .json(PushKey {
            public_key: credentials.vapid_key().public_key().to_owned(),
        })
}
