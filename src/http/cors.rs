//! CORS (`--cors-origins`): pages on the listed origins may call the
//! visitor API from a browser, cookies included, and load the page's
//! scripts as modules (`static/waitroom-client.js` and what it imports);
//! nothing else is ever shared across origins.
//!
//! What is shared: paths under `/api/rooms/` (join, status, leave, the
//! challenge, the draw and its entries, the sale's reads and claims; the
//! socket too, though browsers do not ask CORS for a WebSocket) and under
//! `/static/`. Never the operator API (`/api/admin/…`), the admin page,
//! `/api/verify` (the protected site's server calls it, not a browser) or
//! the pages. A request from a listed origin to a shared path gets
//! `Access-Control-Allow-Origin` (its own origin, never `*`, which
//! credentials forbid) and `Access-Control-Allow-Credentials: true`, error
//! answers included (so the app can read a 401 or a 429's `Retry-After`);
//! its preflight is answered here with 204. Any other request is answered
//! exactly as without the flag, with no CORS header.
//!
//! Written here rather than with `actix-cors` (0.7.2, read for this; it
//! needs actix-web 4.15 or later and builds with ours, so it would fit): once
//! credentials are on, it puts `Access-Control-Allow-Credentials` on every
//! answer it wraps, to origins it refused too, so scoping it to the visitor
//! API would mean wrapping each resource in every feature's `routes` (the
//! admin API must carry no CORS header at all); and it answers a preflight
//! it refuses with a 400 of its own, where today an `OPTIONS` gets our 405
//! with `Allow`. What CORS needs here is an exact list and a path test.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{Error, HttpResponse, web};

use super::state::ServerSettings;

/// The paths a listed origin may call or load.
const SHARED_PREFIXES: &[&str] = &["/api/rooms/", "/static/"];

/// The methods the visitor API answers (the sale's `DELETE` of a hold included).
const ALLOWED_METHODS: &str = "GET, HEAD, POST, DELETE";

/// The request headers the visitor API reads besides the safelisted ones.
const ALLOWED_HEADERS: &str = "Authorization, Content-Type, Idempotency-Key";

/// Answer headers an app reads that CORS hides unless exposed: a 429's
/// wait, and the server's clock (the page's countdown corrects its own by it).
const EXPOSED_HEADERS: &str = "Retry-After, Date";

/// How long a browser may keep a preflight's answer, in seconds.
const PREFLIGHT_MAX_AGE_S: &str = "600";

/// Whether `path` is one a listed origin may reach.
pub fn is_shared(path: &str) -> bool {
    SHARED_PREFIXES
        .iter()
        .any(|prefix| path.starts_with(prefix))
}

/// The request's `Origin`, if it is one of `listed` and the path is shared.
fn allowed_origin(req: &ServiceRequest, listed: &[String]) -> Option<HeaderValue> {
    if listed.is_empty() || !is_shared(req.path()) {
        return None;
    }
    let origin = req.headers().get(header::ORIGIN)?;
    let text = origin.to_str().ok()?;
    listed
        .iter()
        .any(|allowed| allowed == text)
        .then(|| origin.clone())
}

fn is_preflight(req: &ServiceRequest) -> bool {
    req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

fn allow(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
}

/// A shared path's answer depends on the `Origin` once any origin is
/// listed: caches must keep one per origin.
fn vary_on_origin(headers: &mut HeaderMap) {
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// The middleware (see the module's documentation).
pub async fn cors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, Error> {
    let listed = req
        .app_data::<web::Data<ServerSettings>>()
        .map(|settings| settings.cors_origins.as_slice())
        .unwrap_or_default();
    let varies = !listed.is_empty() && is_shared(req.path());
    let origin = allowed_origin(&req, listed);
    if let Some(origin) = &origin
        && is_preflight(&req)
    {
        let mut answer = HttpResponse::build(StatusCode::NO_CONTENT);
        answer
            .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, ALLOWED_METHODS))
            .insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOWED_HEADERS))
            .insert_header((header::ACCESS_CONTROL_MAX_AGE, PREFLIGHT_MAX_AGE_S));
        let mut answer = answer.finish();
        allow(answer.headers_mut(), origin.clone());
        vary_on_origin(answer.headers_mut());
        return Ok(req.into_response(answer).map_into_right_body());
    }
    let mut response = next.call(req).await?;
    let headers = response.headers_mut();
    if let Some(origin) = origin {
        allow(headers, origin);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED_HEADERS),
        );
    }
    if varies {
        vary_on_origin(headers);
    }
    Ok(response.map_into_left_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_visitor_api_and_the_scripts_are_shared() {
        for shared in [
            "/api/rooms/demo/join",
            "/api/rooms/demo/status",
            "/api/rooms/demo/sale/claims",
            "/static/waitroom-client.js",
        ] {
            assert!(is_shared(shared), "{shared}");
        }
        for kept in [
            "/api/admin/rooms",
            "/api/admin/rooms/demo/passes/revoke",
            "/admin",
            "/api/verify",
            "/rooms/demo",
            "/api/roomsx",
            "/.well-known/jwks.json",
        ] {
            assert!(!is_shared(kept), "{kept}");
        }
    }
}
