//! The `Idempotency-Key` a client repeats when it retries a call whose
//! answer it never got (a timeout, a 503 after which the store may have
//! made the write anyway): read and checked here for every route that
//! takes one.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};

use crate::http::error::{ApiError, ErrorCode};

/// The header's name.
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// An `Idempotency-Key` is the client's; keep it short.
const MAX_IDEMPOTENCY_KEY: usize = 128;

/// The call's `Idempotency-Key`, if it sent one: 1 to 128 visible
/// characters, or the call is refused (400 `invalid_idempotency_key`).
#[derive(Debug, Clone)]
pub struct IdempotencyKey(pub Option<String>);

impl FromRequest for IdempotencyKey {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let Some(value) = req.headers().get(IDEMPOTENCY_KEY) else {
            return ready(Ok(IdempotencyKey(None)));
        };
        ready(
            value
                .to_str()
                .ok()
                .filter(|key| !key.is_empty() && key.len() <= MAX_IDEMPOTENCY_KEY)
                .map(|key| IdempotencyKey(Some(key.to_string())))
                .ok_or_else(|| {
                    ApiError::bad_request(
                        ErrorCode::InvalidIdempotencyKey,
                        "Idempotency-Key must be 1 to 128 visible characters",
                    )
                }),
        )
    }
}
