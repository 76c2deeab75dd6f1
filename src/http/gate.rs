//! `GET /api/gate`: forward auth for proxies that hand the auth answer
//! itself to the visitor (Caddy's `forward_auth`, Traefik's `ForwardAuth`,
//! Envoy's `ext_authz`, HAProxy through a Lua action). 204 lets the request
//! through; a 302 sends the visitor to the room's page with `return=` the
//! URL they asked for, or, on their first request back (the pass in the
//! URL as `wr_pass`), to the same URL without it, the pass now a cookie.
//!
//! An app or API client that asks for JSON (`Accept`, see [`prefers_json`])
//! is refused with a 401 it can act on instead of the 302: the refusal's
//! code, the room, and where to join and wait ([`GateRefusal`]).
//!
//! The pass is read and checked as `/api/verify` reads and checks it
//! (`presented_pass_to_verify`, `X-Waitroom-Pass` first; `check_pass_for_proxy`:
//! with the store down, by signature, room and expiry alone).

use actix_web::http::header::{self, Accept, Header, Quality};
use actix_web::mime::Mime;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use url::Url;

use super::error::{ApiError, ErrorCode, ErrorDetail};
use super::extractors::{
    LinkJudge, LinkedPass, PassChecker, PassRefusal, Verified, check_pass_for_proxy,
    judge_linked_pass, pass_cookie, presented_pass_to_verify,
};
use super::state::Live;
use super::visitor::{VerifyQuery, room_to_verify};
use crate::store::{Store, StoreError, StoreExt};
use crate::words::RoomId;
use crate::words::clock::Clock;
use crate::words::credentials::Credentials;
use crate::words::return_url::{
    MAX_RETURN_BYTES, PASS_PARAMETER, on_target_origin, parse_return, without_pass,
};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/gate").get(gate))
        .service(web::resource("/api/gate/{original:.*}").get(envoy_gate));
}

/// How the proxy asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asking {
    /// `/api/gate`: the original URL in `X-Forwarded-*` (or
    /// `X-Original-URL`), the room in `X-Waitroom-Room` or `?room=`.
    Plain,
    /// `/api/gate/<original path>?<original query>`, as Envoy's `ext_authz`
    /// asks (it appends the visitor's path to `path_prefix` and sends their
    /// `Host`): the query is the visitor's, so the room comes from
    /// `X-Waitroom-Room` alone; and Envoy lets only a 200 through, so a
    /// valid pass gets 200 rather than 204.
    Envoy,
}

/// Forward auth for proxies that pass the answer to the visitor (Caddy,
/// Traefik): 204 for a valid pass, else a 302 to the room's page (or, to a
/// caller that asks for JSON, the 401 [`GateRefusal`]).
#[utoipa::path(
    get,
    path = "/api/gate",
    tag = "visitor",
    summary = "Forward auth: let a visitor with a valid pass through, send anyone else to the room",
    description = "The room is named by `?room=` or `X-Waitroom-Room`; the original URL comes from `X-Forwarded-Proto`, `X-Forwarded-Host` and `X-Forwarded-Uri` (or `X-Original-URL`). The pass is `X-Waitroom-Pass` if sent; else the `wr_pass` cookie when the Bearer is not a pass (an app's own token); else the Bearer, else the cookie. A valid pass gets 204. A valid `wr_pass` in the original URL (the visitor's first request back) gets a 302 to the same URL without it, setting the `wr_pass` cookie. Anyone else gets a 302 to the room's page with `return=` the original URL, absolute on `--public-url` (else the forwarded host); or, when `Accept` prefers JSON (`application/json` named with a q above 0, and above `text/html`'s, or equal to it while `text/html` is not named itself: `*/*` alone keeps the 302), a 401 with the refusal's code, the room, and the join and page URLs. With the store unreachable, the pass is judged by its signature, room and expiry alone.",
    params(
        ("room" = Option<String>, Query, description = "The room the pass must be for"),
        ("X-Waitroom-Room" = Option<String>, Header, description = "The room the pass must be for"),
        ("X-Forwarded-Proto" = Option<String>, Header, description = "The original request's scheme"),
        ("X-Forwarded-Host" = Option<String>, Header, description = "The original request's host"),
        ("X-Forwarded-Uri" = Option<String>, Header, description = "The original request's path and query"),
        ("X-Original-URL" = Option<String>, Header, description = "The original URL, instead of the three above"),
        ("X-Waitroom-Pass" = Option<String>, Header, description = "The pass, for an app whose `Authorization` is its own: it outranks the Bearer and the cookie"),
        ("Accept" = Option<String>, Header, description = "One that prefers `application/json` gets a refusal as the 401 JSON answer instead of the 302"),
    ),
    security(("pass" = []), ("pass_cookie" = [])),
    responses(
        (status = 204, description = "The pass is valid now", headers(
            ("X-Waitroom-Visitor" = String, description = "The pass's visitor (`sub`)"),
        )),
        (status = 302, description = "To the room's page, or to the original URL with the pass taken out into the cookie", headers(
            ("Location" = String, description = "Where to go"),
        )),
        (status = 401, description = "missing_pass invalid_pass pass_expired pass_revoked", body = GateRefusal, headers(
            ("X-Waitroom-Refused" = String, description = "The refusal's code"),
        )),
        (status = 400, description = "room_required room_mismatch invalid_room invalid_query public_url_unknown"),
        (status = 404, description = "room_not_found"),
    ),
)]
async fn gate(
    req: HttpRequest,
    query: web::Query<VerifyQuery>,
    checker: PassChecker,
    live: web::Data<Live>,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
) -> Result<HttpResponse, ApiError> {
    let room = room_to_verify(&req, query.into_inner().room)?;
    let forwarded = Forwarded::of(&req, Asking::Plain);
    let gate = Gate {
        checker,
        live,
        store,
        credentials,
        clock,
    };
    gate.answer(&req, room, forwarded, Asking::Plain).await
}

/// The gate as Envoy's `ext_authz` asks: the visitor's path after
/// `/api/gate`, the room in `X-Waitroom-Room`, 200 (not 204) for a pass.
#[utoipa::path(
    get,
    path = "/api/gate/{original}",
    tag = "visitor",
    summary = "Forward auth as Envoy's ext_authz asks",
    description = "As `/api/gate`, for Envoy, which appends the visitor's path (and query) to `path_prefix` and lets only a 200 through: the room comes from `X-Waitroom-Room` alone, the original host from `Host`, and a valid pass gets 200. A caller whose `Accept` prefers JSON is refused with the 401 JSON answer, as at `/api/gate`.",
    params(
        ("original" = String, Path, description = "The visitor's original path"),
        ("X-Waitroom-Room" = String, Header, description = "The room the pass must be for"),
        ("X-Waitroom-Pass" = Option<String>, Header, description = "The pass, for an app whose `Authorization` is its own: it outranks the Bearer and the cookie"),
        ("Accept" = Option<String>, Header, description = "One that prefers `application/json` gets a refusal as the 401 JSON answer instead of the 302"),
    ),
    security(("pass" = []), ("pass_cookie" = [])),
    responses(
        (status = 200, description = "The pass is valid now"),
        (status = 302, description = "To the room's page, or to the original URL with the pass taken out into the cookie"),
        (status = 401, description = "missing_pass invalid_pass pass_expired pass_revoked", body = GateRefusal, headers(
            ("X-Waitroom-Refused" = String, description = "The refusal's code"),
        )),
        (status = 400, description = "room_required invalid_room public_url_unknown"),
        (status = 404, description = "room_not_found"),
    ),
)]
async fn envoy_gate(
    req: HttpRequest,
    checker: PassChecker,
    live: web::Data<Live>,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
) -> Result<HttpResponse, ApiError> {
    let room = room_to_verify(&req, None)?;
    let forwarded = Forwarded::of(&req, Asking::Envoy);
    let gate = Gate {
        checker,
        live,
        store,
        credentials,
        clock,
    };
    gate.answer(&req, room, forwarded, Asking::Envoy).await
}

/// Says why the gate turned a request away (`pass_revoked`, `missing_pass`,
/// …), for whoever reads the proxy's logs; the visitor just follows the
/// 302, and an app reads the code from the JSON body.
const REFUSAL_HEADER: &str = "X-Waitroom-Refused";

/// What the gate reads.
struct Gate {
    checker: PassChecker,
    live: web::Data<Live>,
    store: web::Data<dyn Store>,
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
}

impl Gate {
    async fn answer(
        self,
        req: &HttpRequest,
        room: RoomId,
        forwarded: Forwarded,
        asking: Asking,
    ) -> Result<HttpResponse, ApiError> {
        let (original, room_read) = self.original_url(&room, &forwarded).await?;
        if let Some(url) = &original
            && let Some(offered) = pass_in(url)
            && let Some(answer) = self.take_linked_pass(req, &room, url, offered).await?
        {
            return Ok(answer);
        }
        let refused = match presented_pass_to_verify(req) {
            None => ApiError::unauthorized(
                ErrorCode::MissingPass,
                "send the pass in X-Waitroom-Pass, as a Bearer token or in the wr_pass cookie; \
                 without one, join the room (join_url) and wait for it",
            ),
            Some(pass) => {
                match check_pass_for_proxy(&self.checker, &self.live.hub, &room, &pass).await {
                    Ok((pass, verified)) => {
                        let mut answer = match asking {
                            Asking::Plain => HttpResponse::NoContent(),
                            Asking::Envoy => HttpResponse::Ok(),
                        };
                        answer.insert_header(("X-Waitroom-Visitor", pass.claims.sub));
                        if verified == Verified::BySignatureAlone {
                            answer.insert_header(("X-Waitroom-Verified", "signature"));
                        }
                        return Ok(answer.finish());
                    }
                    Err(refusal) => unless_no_such_room(refusal)?,
                }
            }
        };

        // To the room's page; an unknown room is a 404, while with the store
        // down the page is the right place all the same (it keeps retrying).
        if !room_read {
            match self.store.room(&room).await {
                Ok(_) | Err(StoreError::Unavailable(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let waiting_room = waiting_room_base(&self.credentials, &forwarded)?;
        let page = room_page(&waiting_room, &room, original);
        let code = <&str>::from(refused.code());
        if !wants_json(req) {
            return Ok(HttpResponse::Found()
                .insert_header((header::LOCATION, page))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .insert_header((REFUSAL_HEADER, code))
                .finish());
        }
        // Every refusal that reaches here is a 401 (`into_verify_error`).
        Ok(HttpResponse::build(refused.status_code())
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((REFUSAL_HEADER, code))
            .json(GateRefusal {
                error: refused.detail(),
                join_url: format!("{waiting_room}/api/rooms/{room}/join"),
                room,
                page_url: page,
            }))
    }

    /// The URL the visitor asked the proxy for, if the room's page may
    /// send them back to it; and whether the room was read meanwhile (it
    /// exists, or the store is down).
    async fn original_url(
        &self,
        room: &RoomId,
        forwarded: &Forwarded,
    ) -> Result<(Option<Url>, bool), ApiError> {
        match forwarded.original_url() {
            Some((url, Named::OnTheSite)) => Ok((Some(url), false)),
            Some((url, Named::ByItself)) => match self.store.room(room).await {
                Ok(info) => {
                    let public_url = self.credentials.public_url();
                    let on_target = on_target_origin(&url, &info.config.target_url, public_url);
                    Ok((on_target.then_some(url), true))
                }
                // Where the target is cannot be told: no URL to send anyone to.
                Err(StoreError::Unavailable(_)) => Ok((None, true)),
                Err(error) => Err(error.into()),
            },
            None => Ok((None, false)),
        }
    }

    /// The visitor's first request back from the room: the pass in the
    /// URL. A valid one becomes the cookie, unless the browser holds a
    /// valid pass of this room already (which stays); either way the URL
    /// loses it, by the redirect answered here. `None` when the link's pass
    /// is not one of this room now: the cookie or Bearer may be.
    async fn take_linked_pass(
        &self,
        req: &HttpRequest,
        room: &RoomId,
        url: &Url,
        offered: String,
    ) -> Result<Option<HttpResponse>, ApiError> {
        let judge = LinkJudge::Proxy(&self.live.hub);
        let cookie = match judge_linked_pass(req, &self.checker, judge, room, &offered).await {
            LinkedPass::Take(pass) => {
                let mut cookie = pass_cookie(offered, pass.seconds_left(self.clock.now_ms()));
                cookie.set_secure(url.scheme() == "https");
                Some(cookie)
            }
            LinkedPass::Keep => None,
            LinkedPass::Refused(refusal) => {
                unless_no_such_room(refusal)?;
                return Ok(None);
            }
        };
        let mut answer = HttpResponse::Found();
        answer
            .insert_header((header::LOCATION, without_pass(url.clone()).to_string()))
            .insert_header((header::CACHE_CONTROL, "no-store"));
        if let Some(cookie) = cookie {
            answer.cookie(cookie);
        }
        Ok(Some(answer.finish()))
    }
}

/// A refusal of the pass, unless it says the room does not exist (the 404).
fn unless_no_such_room(refusal: PassRefusal) -> Result<ApiError, ApiError> {
    match refusal {
        PassRefusal::RoomNotFound(room) => Err(StoreError::RoomNotFound(room).into()),
        PassRefusal::Store(error) => Err(error.into()),
        other => Ok(other.into_verify_error()),
    }
}

/// The first `wr_pass` of the URL's query.
fn pass_in(url: &Url) -> Option<String> {
    url.query_pairs()
        .find(|(name, _)| name == PASS_PARAMETER)
        .map(|(_, value)| value.into_owned())
        .filter(|pass| !pass.is_empty())
}

/// The waiting room's base URL, absolute: `--public-url`, or else the
/// forwarded host (`scheme://host`).
fn waiting_room_base(credentials: &Credentials, forwarded: &Forwarded) -> Result<String, ApiError> {
    match credentials.public_url() {
        // Joining nothing: the base itself, without its trailing slash.
        Some(public) => Ok(public.join("")),
        None => forwarded.site().ok_or_else(|| {
            ApiError::bad_request(
                ErrorCode::PublicUrlUnknown,
                "the gate cannot tell where the waiting room is: start waitroom with \
                 --public-url, or have the proxy send X-Forwarded-Host",
            )
        }),
    }
}

/// The room's waiting page under the waiting room's base, with `return=`
/// the original URL (without any pass) when there is one.
fn room_page(waiting_room: &str, room: &RoomId, original: Option<Url>) -> String {
    let mut page = format!("{waiting_room}/rooms/{room}");
    if let Some(original) = original.map(without_pass)
        && original.as_str().len() <= MAX_RETURN_BYTES
    {
        page.push_str("?return=");
        page.extend(url::form_urlencoded::byte_serialize(
            original.as_str().as_bytes(),
        ));
    }
    page
}

/// The gate's refusal to an app or API client that asked for JSON: the
/// error as every error answer carries it, and what to do about it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct GateRefusal {
    /// Why: `missing_pass`, `invalid_pass`, `pass_expired`, `pass_revoked`
    /// (a closed room is no room to the store: the 404 `room_not_found`).
    pub error: ErrorDetail,
    /// The room the pass must be for.
    pub room: RoomId,
    /// The room's join endpoint (`POST`), absolute: a client joins here and
    /// follows its place (the client module's `joinFromGate`).
    pub join_url: String,
    /// The room's waiting page, absolute, with `return=` the URL asked for
    /// when there is one: the `Location` a browser would have been sent to.
    pub page_url: String,
}

/// Whether the caller is refused in JSON rather than redirected: an app or
/// API client that asks for it. An `Accept` that cannot be read is a
/// browser's answer (the 302), as is no `Accept` at all.
fn wants_json(req: &HttpRequest) -> bool {
    Accept::parse(req).is_ok_and(|accept| prefers_json(&accept))
}

/// The rule (docs/src/proxies/index.md): JSON when `application/json` is
/// named with a q above 0, and its q is above that of `text/html`, or
/// equal to it while `text/html` is not named itself. `text/html`'s q is
/// that of the most specific entry that covers it (`text/html`, else
/// `text/*`, else `*/*`, else 0). So `*/*` alone (curl, `fetch`) and a
/// browser's `text/html,…,*/*;q=0.8` keep the 302, while axios's
/// `application/json, text/plain, */*` gets JSON: it names JSON, and
/// matches HTML only through `*/*`. A tie with a named `text/html` goes to
/// the browser.
fn prefers_json(accept: &Accept) -> bool {
    // A `Name` compares with text without regard to case.
    fn is(m: &Mime, type_: &str, subtype: &str) -> bool {
        m.type_() == type_ && m.subtype() == subtype && m.suffix().is_none()
    }
    let best = |wanted: fn(&Mime) -> bool| {
        accept
            .iter()
            .filter(|entry| wanted(&entry.item))
            .map(|entry| entry.quality)
            .max()
    };
    let Some(json) = best(|m| is(m, "application", "json")).filter(|q| *q > Quality::ZERO) else {
        return false;
    };
    let html_named = best(|m| is(m, "text", "html"));
    let html = html_named
        .or_else(|| best(|m| is(m, "text", "*")))
        .or_else(|| best(|m| is(m, "*", "*")))
        .unwrap_or(Quality::ZERO);
    json > html || (json == html && html_named.is_none())
}

/// Where the URL the visitor asked for is: on the site the proxy names
/// (`X-Forwarded-Host`, or Envoy's `Host`), or wherever an absolute
/// `X-Original-URL` says, which must then be on the room's target's origin
/// before anything is sent there (as a `return` must).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    OnTheSite,
    ByItself,
}

/// What the proxy says about the request it asks about.
struct Forwarded {
    proto: Option<String>,
    host: Option<String>,
    uri: Option<String>,
    original_url: Option<String>,
}

impl Forwarded {
    fn of(req: &HttpRequest, asking: Asking) -> Self {
        let first = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.split(',').next())
                .map(|value| value.trim().to_string())
                .filter(|value| !value.is_empty())
        };
        // Envoy names neither: the host is the visitor's `Host`, and the
        // path is what follows `/api/gate`.
        let envoy_host = || (asking == Asking::Envoy).then(|| first("Host")).flatten();
        let envoy_uri = || {
            (asking == Asking::Envoy).then(|| {
                // As sent (not percent-decoded, as the match would be).
                let path = req.path().strip_prefix("/api/gate").unwrap_or("/");
                match req.query_string() {
                    "" => path.to_string(),
                    query => format!("{path}?{query}"),
                }
            })
        };
        Self {
            proto: first("X-Forwarded-Proto").map(|proto| proto.to_ascii_lowercase()),
            host: first("X-Forwarded-Host")
                .or_else(envoy_host)
                .filter(|host| plain_host(host)),
            // Not split on commas: a URI may hold them.
            uri: req
                .headers()
                .get("X-Forwarded-Uri")
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
                .or_else(envoy_uri),
            original_url: req
                .headers()
                .get("X-Original-URL")
                .and_then(|value| value.to_str().ok())
                .map(str::to_string),
        }
    }

    /// `scheme://host` of the protected site, if the proxy named its host.
    fn site(&self) -> Option<String> {
        let proto = match self.proto.as_deref() {
            Some(proto @ ("http" | "https")) => proto,
            Some(_) => return None,
            None => "http",
        };
        let host = self.host.as_deref()?;
        Some(format!("{proto}://{host}"))
    }

    /// The URL the visitor asked for, if the proxy said it plainly enough
    /// (a malformed one is ignored), and whether it came whole in
    /// `X-Original-URL`, which names its own host.
    fn original_url(&self) -> Option<(Url, Named)> {
        let url = self.url_asked_for()?;
        let named = if self.uri.is_none() && !self.original_url.as_deref()?.starts_with('/') {
            Named::ByItself
        } else {
            Named::OnTheSite
        };
        Some((url, named))
    }

    fn url_asked_for(&self) -> Option<Url> {
        let within_site = |path: &str| {
            if !path.starts_with('/') || path.starts_with("//") {
                return None;
            }
            let site = self.site()?;
            let url = Url::parse(&format!("{site}{path}")).ok()?;
            // The path cannot have moved the host.
            (Url::parse(&site).ok()?.origin() == url.origin()).then_some(url)
        };
        if let Some(uri) = &self.uri {
            return within_site(uri);
        }
        let original = self.original_url.as_deref()?;
        if original.starts_with('/') {
            return within_site(original);
        }
        parse_return(original)?;
        Url::parse(original).ok()
    }
}

/// A host (and port) alone: nothing that could carry a path, userinfo or
/// a second URL into the `Location` built from it.
fn plain_host(host: &str) -> bool {
    host.len() <= 255
        && host.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::HeaderValue;
    use actix_web::test::TestRequest;

    fn wants_json_with(accept: &[&[u8]]) -> bool {
        let mut req = TestRequest::default();
        for value in accept {
            req = req.append_header((header::ACCEPT, HeaderValue::from_bytes(value).unwrap()));
        }
        wants_json(&req.to_http_request())
    }

    #[test]
    fn json_only_where_accept_prefers_it_to_html() {
        let cases: [(&str, &str, bool); 19] = [
            (
                "Chrome's navigation",
                "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,\
                 image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
                false,
            ),
            (
                "Firefox's and Safari's navigation",
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
                false,
            ),
            ("curl's, and fetch's default", "*/*", false),
            (
                "axios's and Angular's default",
                "application/json, text/plain, */*",
                true,
            ),
            (
                "jQuery's for JSON",
                "application/json, text/javascript, */*; q=0.01",
                true,
            ),
            ("JSON alone", "application/json", true),
            ("JSON refused", "application/json;q=0, */*", false),
            ("JSON refused, alone", "application/json;q=0", false),
            (
                "JSON below HTML",
                "application/json;q=0.5, text/html",
                false,
            ),
            (
                "a tie with HTML named",
                "application/json, text/html",
                false,
            ),
            (
                "a tie with HTML named first",
                "text/html, application/json",
                false,
            ),
            ("HTML below JSON", "text/html;q=0.9, application/json", true),
            ("a tie with text/*", "application/json, text/*", true),
            ("text/* above JSON", "application/json;q=0.8, text/*", false),
            ("*/* above JSON", "application/json;q=0.5, */*", false),
            (
                "HTML refused",
                "application/json;q=0.1, text/html;q=0",
                true,
            ),
            (
                "the least JSON, nothing else",
                "application/json;q=0.001",
                true,
            ),
            (
                "case and parameters",
                "Application/JSON; charset=utf-8",
                true,
            ),
            ("a suffix is not JSON", "application/problem+json", false),
        ];
        for (who, accept, json) in cases {
            assert_eq!(
                wants_json_with(&[accept.as_bytes()]),
                json,
                "{who}: {accept}"
            );
        }
    }

    #[test]
    fn no_accept_or_an_unreadable_one_keeps_the_redirect() {
        assert!(!wants_json_with(&[]));
        assert!(wants_json_with(&[b"application/json"]));
        assert!(
            !wants_json_with(&[b"application/json", b"text/\xff"]),
            "a value that is not text makes the whole header unreadable"
        );
    }
}
