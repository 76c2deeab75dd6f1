//! The operator API of priority codes: add a group of codes (given, or
//! generated and shown once), list the groups (never their codes), remove
//! one. The codes are hashed here: the store keeps only their SHA-256.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::http::body_configs::json_config_up_to;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::extractors::{Operator, Room};
use crate::http::paths::RoomPath;
use crate::store::{Store, StoreExt};
use crate::words::chance::OsChance;
use crate::words::codes::{
    self, CodeHash, GroupSummary, MAX_CODES_PER_GROUP, MAX_GENERATED, MAX_PRIORITY, NewGroup,
};

/// The largest body the codes route reads: 10,000 codes of up to 100 bytes.
pub const CODES_BODY_LIMIT: usize = 1024 * 1024;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/api/admin/rooms/{room}/codes")
            .app_data(json_config_up_to(CODES_BODY_LIMIT))
            .get(list_codes)
            .post(add_codes),
    )
    .service(web::resource("/api/admin/rooms/{room}/codes/{group}").delete(remove_codes));
}

/// A group of codes to add: `codes` given, or `generate` made here.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddCodes {
    /// The group's name: 1 to 64 of `a-z`, `0-9`, `-`, `_`.
    group: String,
    /// Lower is admitted first; default 1.
    #[serde(default = "one")]
    priority: u32,
    /// Places each code makes; default 1.
    #[serde(default = "one")]
    uses: u32,
    /// The codes (1 to 128 characters each, no spaces, at least 64 bits by
    /// their length and kinds of characters), up to 10,000.
    codes: Option<Vec<String>>,
    /// How many codes to generate instead (22 URL-safe characters each).
    generate: Option<usize>,
}

fn one() -> u32 {
    1
}

/// The group added, with its codes if they were generated (shown this once).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct AddedCodes {
    group: String,
    priority: u32,
    uses: u32,
    /// Codes in the group.
    added: u64,
    /// The generated codes, in this answer only; empty for given codes.
    codes: Vec<String>,
}

/// Every group of a room's codes.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CodeGroups {
    groups: Vec<GroupSummary>,
}

/// The path of one group.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct GroupPath {
    /// The room's id.
    #[allow(dead_code)]
    room: String,
    /// The group's name.
    group: String,
}

/// Checks an `AddCodes`: the group to add (codes hashed), and the codes to
/// show once if they were generated.
fn new_group(body: AddCodes) -> Result<(NewGroup, Vec<String>), ApiError> {
    let invalid = |message: String| ApiError::bad_request(ErrorCode::InvalidBody, message);
    codes::check_group_name(&body.group).map_err(invalid)?;
    if body.priority > MAX_PRIORITY {
        return Err(invalid(format!(
            "priority must be 0 to {MAX_PRIORITY} (lower is admitted first)"
        )));
    }
    if body.uses == 0 {
        return Err(invalid("uses must be at least 1".into()));
    }
    let (plain, shown) = match (body.codes, body.generate) {
        (Some(given), None) => {
            // A refusal names the code by its place in the list, never by
            // its text: the answer may end up in a log.
            for (index, code) in given.iter().enumerate() {
                codes::check_given_code(code)
                    .and_then(|()| codes::check_code_strength(code))
                    .map_err(|why| invalid(format!("codes[{index}] {why}")))?;
            }
            (given, false)
        }
        (None, Some(count)) => {
            if count == 0 || count > MAX_GENERATED {
                return Err(invalid(format!("generate must be 1 to {MAX_GENERATED}")));
            }
            (codes::generate(&OsChance, count), true)
        }
        _ => {
            return Err(invalid(
                "send either \"codes\": [\"…\"] or \"generate\": <how many>, not both".into(),
            ));
        }
    };
    if plain.is_empty() || plain.len() > MAX_CODES_PER_GROUP {
        return Err(invalid(format!(
            "a group holds 1 to {MAX_CODES_PER_GROUP} codes; this one has {}",
            plain.len()
        )));
    }
    let hashes = plain.iter().map(|code| CodeHash::of(code)).collect();
    let group = NewGroup {
        group: body.group,
        priority: body.priority,
        uses: body.uses,
        codes: hashes,
    };
    Ok((group, if shown { plain } else { Vec::new() }))
}

/// Adds a group of codes to a room.
#[utoipa::path(
    post,
    path = "/api/admin/rooms/{room}/codes",
    tag = "operator",
    summary = "Add a group of priority codes",
    description = "Given codes (`codes`) or generated ones (`generate`: how many; 22 URL-safe characters each, returned in this answer only). A code's holder waits in the priority line: lower `priority` first. Each code makes `uses` places. Up to 10,000 codes a group; bodies up to 1 MiB. The store keeps each code's SHA-256, never the code.",
    params(RoomPath),
    request_body(content = AddCodes, content_type = "application/json"),
    security(("admin" = [])),
    responses(
        (status = 201, body = AddedCodes, description = "The group added"),
        (status = 400, description = "invalid_body invalid_json"),
        (status = 409, description = "group_exists limit_reached room_closed"),
        (status = 413, description = "payload_too_large"),
    ),
)]
async fn add_codes(
    _: Operator,
    Room(room): Room,
    body: web::Json<serde_json::Value>,
    store: web::Data<dyn Store>,
) -> Result<HttpResponse, ApiError> {
    let body: AddCodes = ApiError::parse_body(
        body.into_inner(),
        ErrorCode::InvalidBody,
        "the group of codes",
    )?;
    let (group, shown) = new_group(body)?;
    let added = store.add_codes(&room, group).await?;
    tracing::info!(%room, group = %added.group, priority = added.priority, uses = added.uses, total = added.total, generated = !shown.is_empty(), "codes added");
    Ok(HttpResponse::Created()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(AddedCodes {
            group: added.group,
            priority: added.priority,
            uses: added.uses,
            added: added.total,
            codes: shown,
        }))
}

/// Every group of a room's codes, with how many were used.
#[utoipa::path(
    get,
    path = "/api/admin/rooms/{room}/codes",
    tag = "operator",
    summary = "The room's groups of codes (never the codes)",
    params(RoomPath),
    security(("admin" = [])),
    responses(
        (status = 200, body = CodeGroups, description = "Every group: total codes, and those used at least once"),
        (status = 409, description = "room_closed"),
    ),
)]
async fn list_codes(
    _: Operator,
    Room(room): Room,
    store: web::Data<dyn Store>,
) -> Result<HttpResponse, ApiError> {
    let groups = store.code_groups(&room).await?;
    Ok(HttpResponse::Ok().json(CodeGroups { groups }))
}

/// Removes a group: its unused codes stop working at once.
#[utoipa::path(
    delete,
    path = "/api/admin/rooms/{room}/codes/{group}",
    tag = "operator",
    summary = "Remove a group of codes",
    description = "Its unused codes stop working at once (403 `invalid_code`); places already made with them stay.",
    params(GroupPath),
    security(("admin" = [])),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "group_not_found room_not_found"),
        (status = 409, description = "room_closed"),
    ),
)]
async fn remove_codes(
    _: Operator,
    Room(room): Room,
    path: web::Path<GroupPath>,
    store: web::Data<dyn Store>,
) -> Result<HttpResponse, ApiError> {
    store.remove_codes(&room, &path.group).await?;
    tracing::info!(%room, group = %path.group, "codes removed");
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<(NewGroup, Vec<String>), ApiError> {
        new_group(serde_json::from_str(json).unwrap())
    }

    const STRONG_A: &str = "fan-3f9c1a7e5b2d4c6f";
    const STRONG_B: &str = "fan-8a0e1b3d5f7a9c2e";

    #[test]
    fn a_group_is_given_codes_or_generates_them() {
        let given = format!(r#"{{"group":"fans","codes":["{STRONG_A}","{STRONG_B}"]}}"#);
        let (group, shown) = parse(&given).unwrap();
        assert_eq!((group.priority, group.uses, group.codes.len()), (1, 1, 2));
        assert!(shown.is_empty(), "given codes are not shown back");
        let (group, shown) = parse(r#"{"group":"staff","priority":0,"generate":3}"#).unwrap();
        assert_eq!((group.codes.len(), shown.len()), (3, 3));
        assert_eq!(group.codes[0], CodeHash::of(&shown[0]));
        for bad in [
            r#"{"group":"fans"}"#,
            r#"{"group":"fans","codes":["a"],"generate":2}"#,
            r#"{"group":"Fans","codes":["a"]}"#,
            r#"{"group":"fans","codes":[]}"#,
            r#"{"group":"fans","generate":10001}"#,
            r#"{"group":"fans","uses":0,"codes":["a"]}"#,
            r#"{"group":"fans","codes":["a b"]}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_weak_given_code_is_refused_by_its_index_never_its_text() {
        let body =
            format!(r#"{{"group":"fans","codes":["{STRONG_A}","STAFF-7Q2K","{STRONG_B}"]}}"#);
        let Err(ApiError::BadRequest { message, .. }) = parse(&body) else {
            panic!("a code of about 61 bits is refused");
        };
        assert!(
            message.starts_with("codes[1] is too easy to guess"),
            "{message}"
        );
        assert!(!message.contains("STAFF"), "{message}");
    }
}
