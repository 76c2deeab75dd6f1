//! What every answer goes through, whatever route gave it:
//! - [`conventions`]: `HEAD` wherever `GET` is, `405` with `Allow` for a
//!   wrong method on a known path, and the JSON error body on every error
//!   that is not a page;
//! - [`security_headers`]: CSP, framing, referrer and sniffing headers;
//! - [`count_answers`]: `waitroom_http_responses_total` by status class;
//! - [`RedactedRootSpan`]: the request's log span, with the query string's
//!   values (tickets, passes, user tokens) redacted and the peer address as
//!   the client, and the line an error answer writes (a client error's
//!   through the rate limit of `http::refusal_log`).

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::{DefaultHeaders, Next};
use actix_web::{Error, HttpMessage, ResponseError, web};
use serde_json::json;
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RequestId, RootSpanBuilder};

use crate::http::error::ApiError;
use crate::http::refusal_log::RefusalLog;
use crate::words::clock::Clock;

/// The methods of actix's `405` answer (its resource's routes, in the
/// order they were registered), in `Allow`'s order here: `HEAD` after
/// `GET`, since `HEAD` is answered wherever `GET` is.
fn allowed_methods(actix_allow: &str) -> Vec<Method> {
    let mut allowed = Vec::new();
    let registered = actix_allow
        .split(',')
        .filter_map(|name| Method::from_bytes(name.trim().as_bytes()).ok());
    for method in registered {
        let implied = (method == Method::GET).then_some(Method::HEAD);
        for method in std::iter::once(method).chain(implied) {
            if !allowed.contains(&method) {
                allowed.push(method);
            }
        }
    }
    allowed
}

/// Counts every answer by its status class (`1xx` … `5xx`: a bounded
/// label set, whatever the path), for the rate of server errors.
pub async fn count_answers(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody + 'static>, Error> {
    let answer = next.call(req).await;
    let status = match &answer {
        Ok(response) => response.status(),
        Err(error) => error.as_response_error().status_code(),
    };
    let class = match status.as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    };
    metrics::counter!("waitroom_http_responses_total", "class" => class).increment(1);
    answer
}

/// HEAD, 405 and JSON error bodies (see the module's documentation).
///
/// `HEAD` is routed as `GET`: the handler runs as for a `GET`, and the
/// HTTP/1 codec, which saw the request's own method, sends the head with
/// the `Content-Length` the body would have, and no body.
///
/// Every path is an actix resource with a route per method (see each
/// feature's `routes`): a wrong method on it gets the resource's own `405`,
/// whose `Allow` lists the methods of its routes; here `HEAD` is added
/// after `GET`, and the JSON body given. Any other error answer whose body is neither JSON
/// nor a page (`text/html`: the waiting room's own 404 page) gets the
/// `{"error":{"code","message"}}` body, so an actix default (plain text or
/// empty) never reaches a client.
pub async fn conventions(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static, BoxBody>>, Error> {
    if req.method() == Method::HEAD {
        req.head_mut().method = Method::GET;
    }
    let response = next.call(req).await?;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return Ok(response.map_into_left_body());
    }
    if status == StatusCode::METHOD_NOT_ALLOWED
        && let Some(actix_allow) = response.headers().get(header::ALLOW)
    {
        let allowed = allowed_methods(actix_allow.to_str().unwrap_or(""));
        let (request, _) = response.into_parts();
        let refusal = ApiError::MethodNotAllowed { allowed }.error_response();
        return Ok(ServiceResponse::new(request, refusal).map_into_right_body());
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("application/json") || content_type.starts_with("text/html") {
        return Ok(response.map_into_left_body());
    }
    let message = match response.response().error() {
        Some(error) if status.is_client_error() => error.to_string(),
        _ if status.is_server_error() => ApiError::Internal.to_string(),
        _ => status.canonical_reason().unwrap_or("error").to_lowercase(),
    };
    let body = json!({"error": {"code": code_for(status), "message": message}}).to_string();
    Ok(response.map_body(|head, _| {
        head.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        EitherBody::right(BoxBody::new(body))
    }))
}

/// The code of an error body made for a status (an actix default's).
fn code_for(status: StatusCode) -> String {
    match status {
        StatusCode::INTERNAL_SERVER_ERROR => "internal".into(),
        StatusCode::SERVICE_UNAVAILABLE => "unavailable".into(),
        other => other
            .canonical_reason()
            .unwrap_or("error")
            .to_lowercase()
            .replace([' ', '-'], "_"),
    }
}

/// The Content-Security-Policy of every answer. The pages load their
/// scripts (ES modules) and their one stylesheet from `/static`, and talk
/// only to this origin (fetch and the WebSocket, which `'self'` covers);
/// nothing inline runs: the pages' `<script type="application/json">`
/// (their texts) is data, never executed, and the scripts set styles through the CSSOM
/// (`element.style`), which `style-src` does not govern. `data:` images
/// are for the empty favicon (`<link rel="icon" href="data:,">`).
/// `frame-ancestors 'none'` (with `X-Frame-Options: DENY` for browsers
/// before CSP 2): no page, the admin and sale pages included, can be framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Headers on every answer (a route's own value wins where it sets one):
/// the CSP above and `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer`
/// (a ticket, pass or user token can be in the address of the waiting,
/// sale and demo pages: no other site learns it from a link or redirect),
/// and `X-Content-Type-Options: nosniff`.
pub fn security_headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .add((header::X_FRAME_OPTIONS, "DENY"))
        .add((header::REFERRER_POLICY, "no-referrer"))
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
}

/// The request span of `TracingLogger`, without the secrets the default
/// one records: its `http.target` carries the query string as sent
/// (`?ticket=…` on sockets, `?wr_pass=…` on the sale and demo pages,
/// `?user=…` on the waiting page), here every value is `[redacted]`; and
/// its `http.client_ip` believes `Forwarded` and `X-Forwarded-For` from
/// anyone, here it is the peer address (the server has no list of trusted
/// proxies yet; behind a proxy, that proxy's address is logged). The
/// `Host` is the request's own header. The fields keep the default's names.
pub struct RedactedRootSpan;

impl RootSpanBuilder for RedactedRootSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        // What the span holds is made for every request (the route is
        // matched once more): not when the span would be thrown away.
        if !tracing::span_enabled!(tracing::Level::INFO) {
            return Span::none();
        }
        let method = request.method().as_str();
        let route = request.match_pattern().unwrap_or_else(|| "default".into());
        let header = |name| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
        };
        let client_ip = request
            .peer_addr()
            .map(|peer| peer.ip().to_string())
            .unwrap_or_default();
        let request_id = request
            .extensions()
            .get::<RequestId>()
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::info_span!(
            "HTTP request",
            http.method = %method,
            http.route = %route,
            http.flavor = ?request.version(),
            http.host = %header(header::HOST),
            http.client_ip = %client_ip,
            http.user_agent = %header(header::USER_AGENT),
            http.target = %redact_target(request.path(), request.query_string()),
            http.status_code = tracing::field::Empty,
            otel.name = %format!("{method} {route}"),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            request_id = %request_id,
            exception.message = tracing::field::Empty,
            exception.details = tracing::field::Empty,
        )
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        DefaultRootSpanBuilder::on_request_end(span, outcome);
        log_error_answer(outcome);
    }
}

/// The event tracing-actix-web writes for an error answer (its
/// `emit_event_on_error`, turned off in Cargo.toml), with client errors
/// passed through the application's `RefusalLog` (`http::refusal_log`): a flood of bad
/// requests writes one line per kind and window. Server errors are all
/// written.
fn log_error_answer<B>(outcome: &Result<ServiceResponse<B>, Error>) {
    let (error, status, request) = match outcome {
        Ok(response) => match response.response().error() {
            Some(error) => (error, response.status(), Some(response.request())),
            None => return,
        },
        Err(error) => (error, error.as_response_error().status_code(), None),
    };
    let details = error.as_response_error();
    if !status.is_client_error() {
        tracing::error!(
            "Error encountered while processing the incoming HTTP request: {details:?}"
        );
        return;
    }
    let kind = error
        .as_error::<ApiError>()
        .map(|error| error.code().into())
        .or_else(|| status.canonical_reason())
        .unwrap_or("client_error");
    let log_and_clock = request.and_then(|request| {
        let log = request.app_data::<web::Data<RefusalLog>>()?;
        let clock = request.app_data::<web::Data<dyn Clock>>()?;
        Some((log, clock))
    });
    let left_out = match log_and_clock {
        Some((log, clock)) => match log.admit(kind, clock.now_ms()) {
            Some(left_out) => left_out,
            None => return,
        },
        None => 0,
    };
    tracing::warn!(
        code = kind,
        left_out,
        "Error encountered while processing the incoming HTTP request: {details:?}"
    );
}

/// `path?query` with every value of the query replaced by `[redacted]`.
/// Keys stay when they look like names (`ticket`, `wr_pass`, `room`), so
/// the line still says what was sent; anything else in their place (a
/// token sent as a bare key, say) is redacted whole.
pub fn redact_target(path: &str, query: &str) -> String {
    if query.is_empty() {
        return path.to_string();
    }
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| {
            let (key, has_value) = match pair.split_once('=') {
                Some((key, _)) => (key, true),
                None => (pair, false),
            };
            let plain = !key.is_empty()
                && key.len() <= 32
                && key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            match (plain, has_value) {
                (true, true) => format!("{key}=[redacted]"),
                (true, false) => key.to_string(),
                (false, _) => "[redacted]".to_string(),
            }
        })
        .collect();
    format!("{path}?{}", pairs.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_redacted_and_names_kept() {
        assert_eq!(redact_target("/healthz", ""), "/healthz");
        assert_eq!(
            redact_target("/api/rooms/a/ws", "ticket=eyJhbGciOi.eyJzdWIi.c2ln"),
            "/api/rooms/a/ws?ticket=[redacted]"
        );
        assert_eq!(
            redact_target("/demo/target", "wr_pass=eyJ.x.y&room=demo"),
            "/demo/target?wr_pass=[redacted]&room=[redacted]"
        );
        assert_eq!(
            redact_target("/rooms/a", "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln&lang"),
            "/rooms/a?[redacted]&lang"
        );
        assert_eq!(
            redact_target("/rooms/a", "we%20ird=1&=2&&"),
            "/rooms/a?[redacted]&[redacted]&[redacted]&[redacted]"
        );
    }

    #[test]
    fn allow_lists_head_after_get() {
        let names = |actix_allow| {
            allowed_methods(actix_allow)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("GET, PATCH, DELETE"),
            ["GET", "HEAD", "PATCH", "DELETE"]
        );
        assert_eq!(names("POST"), ["POST"]);
        assert_eq!(names("GET"), ["GET", "HEAD"]);
    }
}
