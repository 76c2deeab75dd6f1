//! The API description: an OpenAPI 3.1 document at `GET /api/openapi.json`,
//! built from the code itself: the wire types' schemas (`ToSchema`, derived
//! on the types the handlers serialize) and each handler's
//! `#[utoipa::path(...)]`, gathered in [`ApiDoc`]. `tests/api/openapi.rs`
//! checks that every route the app registers is described with its methods
//! (and nothing else is), that the committed copy `docs/openapi.json` is
//! what this serves, that the document validates, and runs schemathesis
//! against a live node.
//!
//! Describing a route: a `#[utoipa::path(...)]` on its handler, and the
//! handler's name in `paths(...)` below.
//!
//! Error answers are written in the path attribute by their codes alone: a
//! response of status 400 or more without a body, whose description lists
//! error codes (`(status = 409, description = "sold_out seat_taken")`),
//! becomes the `Error` body with `code` one of those ([`error_answers`]).
//! One whose JSON body is a schema of its own that carries the error and
//! more (the gate's `GateRefusal`) lists its codes the same way, and is
//! that `Error` body with its own schema besides.
//! The answers every route of a kind can give are added here once, as the
//! extractors give them: 404 `room_not_found` on `/api/` paths with a
//! `{room}`, the body's refusals (400, 408, 413, 415) on routes that read
//! one, the operator's 401, 403 (an origin token) and 429 on
//! `/api/admin/`, and 503
//! `store_unavailable` on `/api/`.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use serde_json::{Value, json};
use utoipa::OpenApi;

use super::error::ErrorCode;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/openapi.json").get(serve));
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "waitroom",
        description = "A real-time virtual waiting room: the visitor API, the draw, the sale behind the gate, the operator API, pages and operations. Error answers are `{\"error\":{\"code\",\"message\"}}`; each lists the codes it can carry.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0"),
    ),
    paths(
        super::visitor::join,
        super::visitor::challenge,
        super::visitor::status_route,
        super::visitor::leave,
        super::visitor::verify,
        super::visitor::jwks,
        super::push::key,
        super::notify::ask,
        super::notify::cancel,
        super::resume::resume_page,
        super::resume::resume,
        super::gate::gate,
        super::gate::envoy_gate,
        super::sockets::connect,
        super::draw::draw,
        super::draw::entries,
        super::sale::show,
        super::sale::hold,
        super::sale::confirm,
        super::sale::release,
        super::sale::configure,
        super::sale::orders,
        super::sale::page,
        super::admin::api::list,
        super::admin::api::create,
        super::admin::api::show,
        super::admin::api::change,
        super::admin::api::close,
        super::admin::api::history,
        super::admin::api::revoke_pass,
        super::admin::report::report,
        super::admin::report::reports,
        super::admin::report_page::page,
        super::admin::codes::add_codes,
        super::admin::codes::list_codes,
        super::admin::codes::remove_codes,
        super::admin::page::page,
        super::admin::page::login,
        super::admin::page::logout,
        super::admin::page::create_room,
        super::admin::page::change_room,
        super::admin::page::close_room,
        super::admin::page::set_up_sale,
        super::pages::room_page,
        super::pages::branding::room_stylesheet,
        super::pages::demo_target,
        super::pages::asset,
        super::pages::index,
        super::ops::healthz,
        super::ops::readyz,
        super::ops::metrics_text,
        serve,
    ),
    components(schemas(super::error::ErrorBody)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "visitor", description = "Joining, the place, leaving; the checks a protected site makes on a pass"),
        (name = "draw", description = "A scheduled room's draw, checkable by anyone"),
        (name = "sale", description = "The sale behind the gate (the caller's pass as Bearer or `wr_pass` cookie)"),
        (name = "operator", description = "The operator API (the admin token as Bearer)"),
        (name = "pages", description = "Server-rendered HTML pages and the admin page's forms"),
        (name = "operations", description = "Liveness, readiness, metrics, this description"),
    ),
)]
pub struct ApiDoc;

struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme,
        };
        let bearer = |description: &str| {
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(description))
                    .build(),
            )
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin",
            bearer("The admin token (`--admin-token`). The admin page's session cookie (`wr_admin`, with `X-CSRF-Token` on changes) is accepted too. Wrong tokens are counted per client address: past the limit, 429 `too_many_attempts` with `Retry-After`."),
        );
        components.add_security_scheme(
            "origin",
            bearer("An origin token (`--origin-token`): the protected site's token, which may revoke passes and call `/api/verify`, and nothing else (every other operator route answers 403 `origin_token_not_allowed`)."),
        );
        components.add_security_scheme(
            "ticket",
            bearer("The visitor's ticket, as `join` returned it (and every `Status` since: keep the newest). Also accepted: the `wr_ticket_<room>` cookie that `join` and `status` set, and, on the WebSocket only, the subprotocol `waitroom.ticket.<ticket>` and the `ticket` query parameter. A ticket expires (its `exp`: a week after it was handed out, or the room's `closes_at` if later); every answer that sets the cookie hands out one that lasts longer."),
        );
        components.add_security_scheme(
            "pass",
            bearer("A pass (the JWT an admitted visitor carries)."),
        );
        components.add_security_scheme(
            "pass_cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                super::extractors::PASS_COOKIE,
                "A pass in the `wr_pass` cookie.",
            ))),
        );
    }
}

/// The description as served: `ApiDoc` with the error answers filled in.
pub fn description() -> &'static Value {
    static DESCRIPTION: OnceLock<Value> = OnceLock::new();
    DESCRIPTION.get_or_init(|| {
        let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the description serializes");
        error_answers(&mut doc);
        doc
    })
}

/// The description, as `GET /api/openapi.json` serves it
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "operations",
    description = "This OpenAPI 3.1 description.",
    responses((status = 200, description = "The description", content_type = "application/json", body = Object)),
)]
async fn serve() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=300"))
        .json(description())
}

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// Turns each operation's error answers, written as lists of codes, into
/// the `Error` body restricted to those codes, after adding the answers
/// every route of a kind gives; and makes its operation id unique.
fn error_answers(doc: &mut Value) {
    let paths = doc["paths"]
        .as_object_mut()
        .expect("the description has paths");
    let mut operation_ids = BTreeSet::new();
    for (path, item) in paths.iter_mut() {
        for method in METHODS {
            let Some(operation) = item.get_mut(method) else {
                continue;
            };
            // A handler's name is unique in its module only (`show`, `page`):
            // its tag before it makes it unique in the description.
            let id = format!(
                "{}_{}",
                operation["tags"][0].as_str().unwrap_or("api"),
                operation["operationId"].as_str().unwrap_or_default()
            );
            assert!(operation_ids.insert(id.clone()), "two operations are {id}");
            operation["operationId"] = id.into();
            let reads_json = operation["requestBody"]["content"]
                .get("application/json")
                .is_some();
            let responses = operation["responses"]
                .as_object_mut()
                .expect("every operation has responses");
            let mut add = |status: u16, codes: &str| {
                let entry = responses
                    .entry(status.to_string())
                    .or_insert_with(|| json!({"description": ""}));
                let old = entry["description"].as_str().unwrap_or_default();
                entry["description"] = format!("{old} {codes}").trim().into();
            };
            if path.starts_with("/api/") {
                if path.contains("{room}") {
                    add(404, "room_not_found");
                }
                if path != "/api/openapi.json" {
                    add(503, "store_unavailable");
                }
            }
            if path.starts_with("/api/admin/") {
                add(
                    401,
                    "missing_admin_token invalid_admin_token invalid_csrf_token",
                );
                add(429, "too_many_attempts");
                if !path.ends_with("/passes/revoke") {
                    add(403, "origin_token_not_allowed");
                }
            }
            if reads_json {
                add(400, "invalid_json invalid_body");
                add(408, "body_timeout");
                add(413, "payload_too_large");
                add(415, "unsupported_media_type");
            }
            for (status, response) in responses.iter_mut() {
                let status: u16 = status.parse().expect("responses are keyed by status");
                if status < 400 {
                    continue;
                }
                let codes = response["description"].as_str().unwrap_or("");
                if response.get("content").is_none() {
                    *response = error_answer(status, codes);
                } else if let Some(more) = body_beside_the_error(response) {
                    let mut answer = error_answer(status, codes);
                    answer["content"]["application/json"]["schema"]["allOf"]
                        .as_array_mut()
                        .expect("an error answer is an allOf")
                        .push(json!({ "$ref": more }));
                    if let Some(headers) = response.get("headers") {
                        answer["headers"] = headers.clone();
                    }
                    *response = answer;
                }
            }
        }
    }
}

/// The schema of an error answer's JSON body of its own, which carries the
/// error and more: a reference to anything but `Error`, as its only content.
fn body_beside_the_error(response: &Value) -> Option<String> {
    let content = response["content"].as_object()?;
    let schema = content.get("application/json")?.get("schema")?;
    let more = schema["$ref"].as_str()?;
    (content.len() == 1 && more != "#/components/schemas/Error").then(|| more.to_string())
}

/// The error answer whose description `codes` lists its codes.
fn error_answer(status: u16, codes: &str) -> Value {
    let codes: BTreeSet<&str> = codes.split_whitespace().collect();
    for code in &codes {
        assert!(
            code.parse::<ErrorCode>().is_ok(),
            "the description names {code:?} as an error code; ErrorCode has no such code"
        );
    }
    assert!(
        !codes.is_empty(),
        "an error answer ({status}) names no code"
    );
    let list = codes
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut answer = json!({
        "description": format!("Error: {list}"),
        "content": {"application/json": {"schema": {
            "allOf": [
                {"$ref": "#/components/schemas/Error"},
                {"type": "object", "properties": {"error": {
                    "type": "object",
                    "properties": {"code": {"enum": codes}},
                }}},
            ],
        }}},
    });
    if status == 429 || status == 503 {
        // Every 429 carries it; a 503 of the store or the socket cap too.
        answer["headers"] = json!({"Retry-After": {
            "description": "Seconds to wait before trying again",
            "required": status == 429,
            "schema": {"type": "integer", "minimum": 1},
        }});
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "ErrorCode has no such code")]
    fn an_error_answer_names_only_codes_that_exist() {
        error_answer(409, "sold_out no_such_code");
    }

    #[test]
    fn an_error_answer_is_the_error_body_with_its_codes() {
        let answer = error_answer(429, "rate_limited");
        let schema = &answer["content"]["application/json"]["schema"]["allOf"];
        assert_eq!(schema[0]["$ref"], "#/components/schemas/Error");
        assert_eq!(
            schema[1]["properties"]["error"]["properties"]["code"]["enum"],
            json!(["rate_limited"])
        );
        assert_eq!(answer["headers"]["Retry-After"]["required"], true);
    }

    #[test]
    fn an_error_answer_with_a_body_of_its_own_is_the_error_body_and_that_body() {
        for path in ["/api/gate", "/api/gate/{original}"] {
            let answer = &description()["paths"][path]["get"]["responses"]["401"];
            let schema = &answer["content"]["application/json"]["schema"]["allOf"];
            assert_eq!(schema[0]["$ref"], "#/components/schemas/Error", "{path}");
            assert_eq!(
                schema[1]["properties"]["error"]["properties"]["code"]["enum"],
                json!([
                    "invalid_pass",
                    "missing_pass",
                    "pass_expired",
                    "pass_revoked"
                ]),
                "{path}"
            );
            assert_eq!(
                schema[2]["$ref"], "#/components/schemas/GateRefusal",
                "{path}"
            );
            assert!(
                answer["headers"]["X-Waitroom-Refused"].is_object(),
                "{path}"
            );
        }
    }
}
