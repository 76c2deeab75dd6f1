//! The operator API: create, read, change and close rooms; read a room's
//! last hour of figures as this node kept them (the admin chart); revoke
//! passes (the one route the protected site's origin token opens too).

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{Object, Schema, Type};

use crate::http::error::{ApiError, ErrorCode};
use crate::http::extractors::{Operator, PassRevoker, Room};
use crate::http::paths::RoomPath;
use crate::http::state::Live;
use crate::live::history::{SAMPLE_EVERY_MS, SAMPLES_KEPT, Sample};
use crate::store::{self, PassTakenBack, SaleStore, Store, StoreExt};
use crate::words::clock::{Clock, Moment, rfc3339_ms};
use crate::words::config::Fault;
use crate::words::credentials::{CredentialError, Credentials};
use crate::words::{ConfigPatch, RoomConfig, RoomId, RoomInfo, VisitorId};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/admin/rooms").get(list).post(create))
        .service(
            web::resource("/api/admin/rooms/{room}")
                .get(show)
                .patch(change)
                .delete(close),
        )
        .service(web::resource("/api/admin/rooms/{room}/history").get(history))
        .service(web::resource("/api/admin/rooms/{room}/passes/revoke").post(revoke_pass));
}

/// Reads the body of `POST /api/admin/rooms`: `id`, `name`, `target_url`,
/// and any config field (a [`ConfigPatch`], which refuses unknown ones: a
/// typo is a 400, not a silently ignored setting).
pub fn parse_new_room(mut body: serde_json::Value) -> Result<(RoomId, RoomConfig), ApiError> {
    let invalid = |message: String| ApiError::bad_request(ErrorCode::InvalidRoom, message);
    let fields = body
        .as_object_mut()
        .ok_or_else(|| invalid("the room must be a JSON object".into()))?;
    let id = fields
        .remove("id")
        .ok_or_else(|| invalid("id is required".into()))?;
    let id: RoomId = serde_json::from_value(id).map_err(|e| invalid(format!("id: {e}")))?;
    let patch = ConfigPatch::from_json(body).map_err(|error| invalid(error.message))?;
    if patch.get("name").is_none() || patch.get("target_url").is_none() {
        return Err(invalid("name and target_url are required".into()));
    }
    // A value of the wrong type is the body's fault, as an unknown field
    // is; a value that breaks a rule is the config's.
    let config = patch.new_room().map_err(|error| match error.fault {
        Fault::Unreadable => invalid(error.message),
        Fault::Rule => error.into(),
    })?;
    Ok((id, config))
}

/// `GET /api/admin/rooms`: every room.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Rooms {
    rooms: Vec<RoomInfo>,
}

/// The body of `POST /api/admin/rooms` as the description shows it: `id`,
/// `name` and `target_url`, and any other field of a [`ConfigPatch`], which
/// is what [`parse_new_room`] reads it as.
struct NewRoom;

impl utoipa::PartialSchema for NewRoom {
    fn schema() -> RefOr<Schema> {
        let RefOr::T(Schema::Object(mut object)) = ConfigPatch::schema() else {
            unreachable!("a room patch is described as an object");
        };
        let string = || RefOr::T(Schema::Object(Object::with_type(Type::String)));
        object.properties.insert("id".into(), RoomId::schema());
        object.properties.insert("name".into(), string());
        object.properties.insert("target_url".into(), string());
        object.required = vec!["id".into(), "name".into(), "target_url".into()];
        RefOr::T(Schema::Object(object))
    }
}

impl utoipa::ToSchema for NewRoom {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        ConfigPatch::schemas(schemas);
    }
}

#[utoipa::path(
    get,
    path = "/api/admin/rooms",
    tag = "operator",
    summary = "Every room with its config and live stats",
    security(("admin" = [])),
    responses((status = 200, body = Rooms, description = "The rooms")),
)]
async fn list(_: Operator, store: web::Data<dyn Store>) -> Result<HttpResponse, ApiError> {
    let rooms = store.rooms().await?;
    Ok(HttpResponse::Ok().json(Rooms { rooms }))
}

#[utoipa::path(
    post,
    path = "/api/admin/rooms",
    tag = "operator",
    summary = "Create a room",
    request_body(content = NewRoom, content_type = "application/json"),
    security(("admin" = [])),
    responses(
        (status = 201, body = RoomInfo, description = "The room created", headers(("Location" = String, description = "The room's path in this API"))),
        (status = 400, description = "invalid_room invalid_config"),
        (status = 409, description = "room_exists"),
    ),
)]
async fn create(
    _: Operator,
    body: web::Json<serde_json::Value>,
    store: web::Data<dyn Store>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    let (id, config) = parse_new_room(body.into_inner())?;
    let info = store.create_room(id, config).await?;
    // Asked at once, so that its ticks (and its schedule's entries, if it
    // has any) follow from now, not from the next refresh of the rooms.
    live.wakeups.note(&info.id);
    tracing::info!(room = %info.id, "room created");
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/api/admin/rooms/{}", info.id)))
        .json(info))
}

/// `GET /api/admin/rooms/{room}`'s query.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ShowQuery {
    /// Previews the config as the schedule will make it then (RFC 3339):
    /// every entry due by then applied, in order (one that would not apply
    /// passed over); the stats are now's.
    #[param(value_type = Option<String>, format = DateTime)]
    at: Option<Moment>,
}

#[utoipa::path(
    get,
    path = "/api/admin/rooms/{room}",
    tag = "operator",
    summary = "One room, its config and stats",
    params(RoomPath, ShowQuery),
    security(("admin" = [])),
    responses(
        (status = 200, body = RoomInfo, description = "The room"),
        (status = 400, description = "invalid_query"),
    ),
)]
async fn show(
    _: Operator,
    Room(room): Room,
    query: web::Query<ShowQuery>,
    store: web::Data<dyn Store>,
) -> Result<HttpResponse, ApiError> {
    let mut info = store.room(&room).await?;
    if let Some(at) = query.at {
        info.config = info.config.preview(at.0);
    }
    Ok(HttpResponse::Ok().json(info))
}

#[utoipa::path(
    patch,
    path = "/api/admin/rooms/{room}",
    tag = "operator",
    summary = "Change any subset of a room's config",
    description = "Every node applies it by the next tick. `null` removes a field that may be absent (`max_active`, `notice`, `opens_at`, …).",
    params(RoomPath),
    request_body(content = ConfigPatch, content_type = "application/json"),
    security(("admin" = [])),
    responses(
        (status = 200, body = RoomInfo, description = "The room as changed"),
        (status = 400, description = "invalid_config"),
        (status = 409, description = "room_closed edit_conflict"),
    ),
)]
async fn change(
    _: Operator,
    Room(room): Room,
    body: web::Json<serde_json::Value>,
    store: web::Data<dyn Store>,
    live: web::Data<Live>,
) -> Result<HttpResponse, ApiError> {
    let patch: ConfigPatch =
        ApiError::parse_body(body.into_inner(), ErrorCode::InvalidConfig, "the change")?;
    let info = store.configure(&room, patch).await?;
    live.wakeups.note(&room);
    tracing::info!(%room, config = ?info.config, "room configured");
    Ok(HttpResponse::Ok().json(info))
}

#[utoipa::path(
    delete,
    path = "/api/admin/rooms/{room}",
    tag = "operator",
    summary = "Close the room; connected visitors get `state: closed`",
    params(RoomPath),
    security(("admin" = [])),
    responses(
        (status = 204, description = "Closed"),
        (status = 409, description = "room_closed"),
    ),
)]
async fn close(
    _: Operator,
    Room(room): Room,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    super::report::close(store.get_ref(), sale.get_ref(), &room).await?;
    tracing::info!(%room, "room closed");
    Ok(HttpResponse::NoContent().finish())
}

/// `GET /api/admin/rooms/{room}/history`: the room's recent figures as
/// this node's promoter saw them in its tick answers.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct History {
    room: RoomId,
    /// The node's clock as it answered (RFC 3339, with milliseconds): a
    /// page puts the samples on its own clock by it.
    now: String,
    /// The least time between two samples, in seconds.
    every_s: u64,
    /// The most samples kept (`every_s` × this: an hour).
    kept: usize,
    /// Oldest first.
    samples: Vec<HistorySample>,
}

/// A room's figures at one moment.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct HistorySample {
    /// When (RFC 3339, with milliseconds).
    at: String,
    waiting: u64,
    active: u64,
    admitted_last_minute: u64,
    /// The cap then; null for none.
    max_active: Option<u64>,
}

impl From<Sample> for HistorySample {
    fn from(sample: Sample) -> Self {
        Self {
            at: rfc3339_ms(sample.at),
            waiting: sample.waiting,
            active: sample.active,
            admitted_last_minute: sample.admitted_last_minute,
            max_active: sample.max_active,
        }
    }
}

#[utoipa::path(
    get,
    path = "/api/admin/rooms/{room}/history",
    tag = "operator",
    summary = "The room's last hour of figures, as this node kept them",
    description = "Waiting, active, admitted in the last minute and the cap, one sample every `every_s` seconds at most (a room nobody uses: one per idle heartbeat), at most `kept` of them, oldest first. Each node keeps its own, in memory, from the ticks it asks for: a node just started has none yet.",
    params(RoomPath),
    security(("admin" = [])),
    responses(
        (status = 200, body = History, description = "The samples"),
        (status = 404, description = "room_not_found"),
    ),
)]
async fn history(
    _: Operator,
    Room(room): Room,
    store: web::Data<dyn Store>,
    live: web::Data<Live>,
    clock: web::Data<dyn Clock>,
) -> Result<HttpResponse, ApiError> {
    // Asked of the store, so an unknown room is a 404 like elsewhere, not
    // an empty history.
    store.room(&room).await?;
    let samples = live
        .history
        .samples(&room)
        .into_iter()
        .map(HistorySample::from)
        .collect();
    Ok(HttpResponse::Ok().json(History {
        room,
        now: rfc3339_ms(clock.now_ms()),
        every_s: SAMPLE_EVERY_MS / 1000,
        kept: SAMPLES_KEPT,
        samples,
    }))
}

/// What `POST /api/admin/rooms/{room}/passes/revoke` takes back: a pass,
/// or whatever pass a visitor holds. Exactly one of the two.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Revocation {
    /// The pass (JWT) to revoke.
    pass: Option<String>,
    /// Whatever pass this visitor (a pass's `sub`) holds.
    visitor: Option<String>,
}

/// Takes back a pass: `/api/verify` refuses it from now on (401
/// `pass_revoked`) and its slot under `max_active` is free at once, on
/// every node. Revoking a pass no longer held is not an error.
#[utoipa::path(
    post,
    path = "/api/admin/rooms/{room}/passes/revoke",
    tag = "operator",
    summary = "Revoke a pass",
    description = "`/api/verify` refuses it from then on (401 `pass_revoked`) and its slot under `max_active` is free at once. Revoking a pass no longer held is not an error.",
    params(RoomPath),
    request_body(content = Revocation, content_type = "application/json"),
    security(("admin" = []), ("origin" = [])),
    responses(
        (status = 204, description = "Revoked"),
        (status = 400, description = "invalid_revocation invalid_pass invalid_visitor"),
        (status = 409, description = "room_closed"),
    ),
)]
async fn revoke_pass(
    revoker: PassRevoker,
    Room(room): Room,
    body: web::Json<serde_json::Value>,
    credentials: web::Data<Credentials>,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    let revocation: Revocation = ApiError::parse_body(
        body.into_inner(),
        ErrorCode::InvalidRevocation,
        "the revocation",
    )?;
    let (visitor, pass_exp_s) = match (&revocation.pass, &revocation.visitor) {
        (Some(pass), None) => {
            let claims = credentials.pass_holder(pass, &room).map_err(|error| {
                let why = match error {
                    CredentialError::WrongRoom => "the pass is for another room",
                    _ => "the pass is not one this deployment signed",
                };
                ApiError::bad_request(ErrorCode::InvalidPass, why)
            })?;
            let visitor = claims.sub.parse().map_err(|_| {
                ApiError::bad_request(ErrorCode::InvalidPass, "the pass names no visitor")
            })?;
            (visitor, Some(claims.exp))
        }
        (None, Some(visitor)) => {
            let visitor: VisitorId = visitor.parse().map_err(|_| {
                ApiError::bad_request(ErrorCode::InvalidVisitor, "visitor must be a pass's sub")
            })?;
            (visitor, None)
        }
        _ => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidRevocation,
                "send either {\"pass\": \"<jwt>\"} or {\"visitor\": \"<sub>\"}",
            ));
        }
    };
    let taken = store::take_back_pass(
        store.get_ref(),
        sale.get_ref(),
        &room,
        visitor,
        pass_exp_s,
        PassTakenBack::Revoked,
    )
    .await?;
    let by = match revoker {
        PassRevoker::Operator => "operator",
        PassRevoker::Origin => "origin",
    };
    tracing::info!(%room, %visitor, taken, by, "pass revoked");
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_room_takes_config_and_refuses_unknown_fields() {
        let parse = |json: &str| parse_new_room(serde_json::from_str(json).unwrap());
        let (id, config) = parse(
            r#"{"id":"a","name":"A","target_url":"https://x.example/","admit_per_tick":3,"max_active":null}"#,
        )
        .unwrap();
        assert_eq!(
            (id.as_str(), config.admit_per_tick, config.max_active),
            ("a", 3, None)
        );
        let typo = parse(r#"{"id":"a","name":"A","target_url":"/x","admit_per_tik":3}"#);
        assert!(typo.unwrap_err().to_string().contains("admit_per_tik"));
        assert!(parse(r#"{"id":"Bad Id","name":"A","target_url":"/x"}"#).is_err());
        assert!(parse(r#"{"id":"a","target_url":"/x"}"#).is_err());
        assert!(parse(r#"[1]"#).is_err());
    }
}
