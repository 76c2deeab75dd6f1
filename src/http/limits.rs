//! What one request may cost the node: a request body must arrive within a
//! bounded time (the headers already must, within 5 s), so a client that
//! trickles a body a byte at a time cannot hold a connection, and its file,
//! for as long as it likes; and a request that asks to switch protocols
//! has no body, since nothing would ever read it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_http::BoxedPayloadStream;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::Method;
use actix_web::http::header::{self, HeaderMap};
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::{Error, HttpMessage, HttpRequest, mime, web};
use futures_util::Stream;
use std::future::Future;
use tokio::time::Sleep;

use super::error::{ApiError, ErrorCode};
use super::state::ServerSettings;

/// The largest JSON (or form) body a route reads.
pub const JSON_LIMIT: usize = 16 * 1024;

/// Puts a deadline on the body of every request that declares one.
pub async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let timeout = req
        .app_data::<web::Data<ServerSettings>>()
        .map(|settings| settings.body_timeout);
    if let Some(timeout) = timeout
        && declares_body(req.headers())
    {
        let payload = req.take_payload();
        let guarded: BoxedPayloadStream = Box::pin(BodyDeadline {
            inner: payload,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            expired: false,
        });
        req.set_payload(Payload::from(guarded));
    }
    next.call(req).await
}

/// Marks a request that asked to switch protocols (`Connection: upgrade`
/// with `Upgrade`). The server hands such a request to the application
/// together with its connection (`startup::server`), and feeds its body
/// from the connection only after a `101`, which only the WebSocket route
/// gives: a route that read the body first would wait forever.
#[derive(Debug, Clone, Copy)]
pub struct AsksToUpgrade;

/// Refuses, with 400 `upgrade_refused`, a request that asks to switch
/// protocols and would need its body read: any method but `GET`, or a
/// declared body. Other upgrade requests go on, the header ignored; only
/// the WebSocket route switches.
pub async fn refuse_upgrade_with_body(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let asks_to_upgrade = req.extensions().contains::<AsksToUpgrade>();
    if asks_to_upgrade && (req.method() != Method::GET || declares_body(req.headers())) {
        let refusal = ApiError::bad_request(
            ErrorCode::UpgradeRefused,
            "only GET /api/rooms/{room}/ws switches protocols; send this request without `Upgrade`",
        );
        // An answer, not an error, so the outer middleware add their headers.
        return Ok(req.error_response(refusal).map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

fn declares_body(headers: &HeaderMap) -> bool {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    length.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// Reads a whole request body of at most [`JSON_LIMIT`] bytes, for routes
/// that take a JSON body or none: a declared body in another media type
/// (or none named) is 415, as on the other JSON routes, while a request
/// without a body needs no `Content-Type`.
pub async fn read_json_or_nothing(
    req: &HttpRequest,
    body: web::Payload,
) -> Result<Bytes, ApiError> {
    if declares_body(req.headers()) && !names_json(req) {
        return Err(ApiError::UnsupportedMediaType(
            "send the body as Content-Type: application/json, or send none",
        ));
    }
    match body.to_bytes_limited(JSON_LIMIT).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error))
            if error
                .as_error::<PayloadError>()
                .is_some_and(is_body_timeout) =>
        {
            Err(ApiError::BodyTimeout)
        }
        Ok(Err(error)) => Err(ApiError::bad_request(
            ErrorCode::InvalidBody,
            format!("the request body could not be read: {error}"),
        )),
        Err(_) => Err(ApiError::PayloadTooLarge { limit: JSON_LIMIT }),
    }
}

/// Whether the request's media type is JSON, as actix's `Json` reads it
/// (`…/json` or `…+json`).
fn names_json(req: &HttpRequest) -> bool {
    matches!(
        req.mime_type(),
        Ok(Some(mime)) if mime.subtype() == mime::JSON || mime.suffix() == Some(mime::JSON)
    )
}

/// The error a body that missed its deadline ends with.
pub fn is_body_timeout(error: &PayloadError) -> bool {
    matches!(error, PayloadError::Io(e) if e.kind() == io::ErrorKind::TimedOut)
}

struct BodyDeadline {
    inner: Payload,
    deadline: Pin<Box<Sleep>>,
    expired: bool,
}

impl Stream for BodyDeadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.expired {
            return Poll::Ready(None);
        }
        if let Poll::Ready(next) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(next);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.expired = true;
            let late = io::Error::new(io::ErrorKind::TimedOut, "the request body took too long");
            return Poll::Ready(Some(Err(PayloadError::Io(late))));
        }
        Poll::Pending
    }
}
