//! What every answer goes through, whatever route gave it:
//! - [`conventions`]: `HEAD` wherever `GET` is, `405` with `Allow` for a
//!   wrong method on a known path, and the JSON error body on every error
//!   that is not a page;
//! - [`security_headers`]: CSP, framing, referrer and sniffing headers;
//! - [`RedactedRootSpan`]: the request's log span, with the query string's
//!   values (tickets, passes, user tokens) redacted and the peer address as
//!   the client, and the line an error answer writes (a client error's
//!   through the rate limit of `http::refusal_log`).

use std::sync::LazyLock;

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ResourceDef, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::{DefaultHeaders, Next};
use actix_web::{Error, HttpMessage, ResponseError, web};
use serde_json::json;
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RequestId, RootSpanBuilder};

use crate::http::AppState;
use crate::http::error::ApiError;

/// Every route of the application and the methods it answers (`HEAD` is
/// implied by `GET`). A unit test below checks it against the route
/// attributes in `src/http`, so a new route cannot be forgotten here; one
/// that were would only lose its 405 (it would answer 404 to a wrong
/// method), never a request it serves.
const ROUTES: &[(&str, &[&str])] = &[
    // visitor.rs
    ("/api/rooms/{room}/join", &["POST"]),
    ("/api/rooms/{room}/challenge", &["GET"]),
    ("/api/rooms/{room}/status", &["GET"]),
    ("/api/rooms/{room}/leave", &["POST"]),
    ("/api/verify", &["GET"]),
    ("/.well-known/jwks.json", &["GET"]),
    // draw.rs
    ("/api/rooms/{room}/draw", &["GET"]),
    ("/api/rooms/{room}/draw/entries", &["GET"]),
    // sockets.rs
    ("/api/rooms/{room}/ws", &["GET"]),
    // admin/api.rs
    ("/api/admin/rooms", &["GET", "POST"]),
    ("/api/admin/rooms/{room}", &["GET", "PATCH", "DELETE"]),
    ("/api/admin/rooms/{room}/passes/revoke", &["POST"]),
    // admin/page.rs
    ("/admin", &["GET"]),
    ("/admin/login", &["POST"]),
    ("/admin/logout", &["POST"]),
    ("/admin/rooms", &["POST"]),
    ("/admin/rooms/{room}", &["POST"]),
    ("/admin/rooms/{room}/close", &["POST"]),
    ("/admin/rooms/{room}/sale", &["POST"]),
    // sale.rs
    ("/api/rooms/{room}/sale", &["GET"]),
    ("/api/rooms/{room}/sale/claims", &["POST"]),
    ("/api/rooms/{room}/sale/claims/{claim}/confirm", &["POST"]),
    ("/api/rooms/{room}/sale/claims/{claim}", &["DELETE"]),
    ("/api/admin/rooms/{room}/sale", &["PUT"]),
    ("/api/admin/rooms/{room}/sale/orders", &["GET"]),
    ("/rooms/{room}/sale", &["GET"]),
    // pages/
    ("/rooms/{room}", &["GET"]),
    ("/demo/target", &["GET"]),
    ("/static/{file}", &["GET"]),
    ("/", &["GET"]),
    // ops.rs
    ("/healthz", &["GET"]),
    ("/readyz", &["GET"]),
    ("/metrics", &["GET"]),
];

static ROUTE_DEFS: LazyLock<Vec<(ResourceDef, &'static [&'static str])>> = LazyLock::new(|| {
    ROUTES
        .iter()
        .map(|(pattern, methods)| (ResourceDef::new(*pattern), *methods))
        .collect()
});

/// The methods some route answers on `path`, in `Allow`'s order (`HEAD`
/// after `GET`); empty for a path no route knows.
fn allowed_methods(path: &str) -> Vec<Method> {
    let mut allowed = Vec::new();
    let matching = ROUTE_DEFS.iter().filter(|(def, _)| def.is_match(path));
    for name in matching.flat_map(|(_, methods)| methods.iter()) {
        let method = Method::from_bytes(name.as_bytes()).expect("a method name");
        let implied = (method == Method::GET).then_some(Method::HEAD);
        for method in std::iter::once(method).chain(implied) {
            if !allowed.contains(&method) {
                allowed.push(method);
            }
        }
    }
    allowed
}

/// HEAD, 405 and JSON error bodies (see the module's documentation).
///
/// `HEAD` is routed as `GET`: the handler runs as for a `GET`, and the
/// HTTP/1 codec, which saw the request's own method, sends the head with
/// the `Content-Length` the body would have, and no body.
///
/// A `404` for a path some route answers with other methods becomes a
/// `405` with `Allow`. Any other error answer whose body is neither JSON
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
    if status == StatusCode::NOT_FOUND {
        let allowed = allowed_methods(response.request().path());
        if !allowed.is_empty() && !allowed.contains(response.request().method()) {
            let (request, _) = response.into_parts();
            let refusal = ApiError::MethodNotAllowed { allowed }.error_response();
            return Ok(ServiceResponse::new(request, refusal).map_into_right_body());
        }
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
        .map(ApiError::code)
        .or_else(|| status.canonical_reason())
        .unwrap_or("client_error");
    let state = request.and_then(|request| request.app_data::<web::Data<AppState>>());
    let left_out = match state {
        Some(state) => match state.refusal_log.admit(kind, state.clock.now_ms()) {
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
    use std::collections::BTreeSet;
    use std::path::Path;

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
        let names = |path| {
            allowed_methods(path)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("/api/admin/rooms/a"),
            ["GET", "HEAD", "PATCH", "DELETE"]
        );
        assert_eq!(names("/api/rooms/a/join"), ["POST"]);
        assert_eq!(names("/rooms/a/sale"), ["GET", "HEAD"]);
        assert!(names("/rooms/a/b/c").is_empty());
    }

    /// Every `#[get("…")]`-style route attribute under `src/http`.
    fn routes_in_source(dir: &Path, found: &mut BTreeSet<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                routes_in_source(&path, found);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let line = line.trim();
                for method in ["get", "post", "put", "patch", "delete", "head", "options"] {
                    let start = format!("#[{method}(\"");
                    if let Some(rest) = line.strip_prefix(&start) {
                        let pattern = rest.split('"').next().unwrap();
                        found.insert((pattern.to_string(), method.to_uppercase()));
                    }
                }
            }
        }
    }

    #[test]
    fn the_route_table_is_every_route_of_the_source() {
        let mut in_source = BTreeSet::new();
        routes_in_source(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http"),
            &mut in_source,
        );
        let in_table: BTreeSet<(String, String)> = ROUTES
            .iter()
            .flat_map(|(pattern, methods)| {
                methods.iter().map(|m| (pattern.to_string(), m.to_string()))
            })
            .collect();
        assert_eq!(
            in_table, in_source,
            "ROUTES in src/http/middleware.rs must list every route"
        );
    }
}
