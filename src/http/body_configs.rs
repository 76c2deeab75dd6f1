//! How actix's extractors read what a request carries (a JSON body, a
//! form, a query string, path segments): their limits, and their failures
//! (bad JSON, an oversized body, a bad query string) mapped onto our error
//! body instead of actix's plain-text defaults.

use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError, UrlencodedError};
use actix_web::{HttpRequest, web};

use super::error::{ApiError, ErrorCode};
use super::limits::{JSON_LIMIT, is_body_timeout};

/// JSON routes read a JSON media type (actix's check: `…/json` or
/// `…+json`), and refuse any other, or none, with a 415.
pub fn json_config() -> web::JsonConfig {
    json_config_up_to(JSON_LIMIT)
}

/// [`json_config`] for a route that reads larger bodies (up to `limit`
/// bytes): set on that route's resource only.
pub fn json_config_up_to(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default().limit(limit).error_handler(
        move |err: JsonPayloadError, _: &HttpRequest| {
            match err {
                JsonPayloadError::Overflow { .. }
                | JsonPayloadError::OverflowKnownLength { .. } => {
                    ApiError::PayloadTooLarge { limit }
                }
                // A wrong (or missing) media type is 415, not the 400
                // of a malformed body.
                JsonPayloadError::ContentType => ApiError::UnsupportedMediaType(
                    "send the body as Content-Type: application/json",
                ),
                JsonPayloadError::Payload(e) if is_body_timeout(&e) => ApiError::BodyTimeout,
                JsonPayloadError::Deserialize(e) => ApiError::bad_request(
                    ErrorCode::InvalidJson,
                    format!("the JSON body is not valid: {e}"),
                ),
                other => ApiError::bad_request(
                    ErrorCode::InvalidJson,
                    format!("the JSON body could not be read: {other}"),
                ),
            }
            .into()
        },
    )
}

pub fn form_config() -> web::FormConfig {
    web::FormConfig::default().limit(JSON_LIMIT).error_handler(
        |err: UrlencodedError, _: &HttpRequest| {
            match err {
                UrlencodedError::Payload(e) if is_body_timeout(&e) => ApiError::BodyTimeout,
                UrlencodedError::ContentType => ApiError::UnsupportedMediaType(
                    "send the form as Content-Type: application/x-www-form-urlencoded",
                ),
                other => ApiError::bad_request(
                    ErrorCode::InvalidForm,
                    format!("the form is not valid: {other}"),
                ),
            }
            .into()
        },
    )
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|err: QueryPayloadError, _: &HttpRequest| {
        ApiError::bad_request(
            ErrorCode::InvalidQuery,
            format!("the query string is not valid: {err}"),
        )
        .into()
    })
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|err: PathError, _: &HttpRequest| {
        ApiError::bad_request(
            ErrorCode::InvalidPath,
            format!("the path is not valid: {err}"),
        )
        .into()
    })
}
