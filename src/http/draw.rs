//! The draw as anyone may check it: the commitment before the opening, the
//! seed after it, and every entry in drawn order (api.md, "Scheduled rooms
//! and the draw").

use std::sync::Arc;

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use bytes::Bytes;

use super::error::ApiError;
use super::extractors::Room;
use super::paths::RoomPath;
use crate::store::{Store, StoreExt};
use crate::words::RoomId;
use crate::words::draw::{DrawInfo, DrawKey, EntryId};

/// Entries read from the store per step of the stream: a step is one short
/// store call, so a million entries never hold the store for long.
const ENTRIES_PER_READ: usize = 10_000;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/rooms/{room}/draw").get(draw))
        .service(web::resource("/api/rooms/{room}/draw/entries").get(entries));
}

#[utoipa::path(
    get,
    path = "/api/rooms/{room}/draw",
    tag = "draw",
    summary = "The room's draw: its commitment, and its seed once drawn",
    params(RoomPath),
    responses(
        (status = 200, body = DrawInfo, description = "The draw"),
        (status = 404, description = "no_draw"),
        (status = 409, description = "room_closed"),
    ),
)]
async fn draw(Room(room): Room, store: web::Data<dyn Store>) -> Result<HttpResponse, ApiError> {
    let draw = store.draw(&room).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(draw))
}

/// Every entry, one per line, in drawn order, streamed page by page.
#[utoipa::path(
    get,
    path = "/api/rooms/{room}/draw/entries",
    tag = "draw",
    summary = "Every entrant's entry id, one per line, in drawn order",
    params(RoomPath),
    responses(
        (status = 200, body = String, content_type = "text/plain", description = "One entry id per line, streamed"),
        (status = 404, description = "no_draw"),
        (status = 409, description = "not_drawn room_closed"),
    ),
)]
async fn entries(Room(room): Room, store: web::Data<dyn Store>) -> Result<HttpResponse, ApiError> {
    // The first page is read before answering, so a room before its
    // opening (or without a draw) gets its error, not an empty 200.
    let store = store.into_inner();
    let first = store.draw_entries(&room, None, ENTRIES_PER_READ).await?;
    let pages = futures_util::stream::unfold(Some((store, room, Ok(first))), |next| async move {
        let (store, room, page) = next?;
        let page = match page {
            Ok(page) => page,
            Err(error) => {
                // The status line went out with the first page: a cut
                // stream is all that can tell the client now.
                tracing::warn!(%room, %error, "draw entries stream cut short");
                return Some((Err(error), None));
            }
        };
        let body = lines(&page);
        let next = match page.last() {
            Some(last) if page.len() == ENTRIES_PER_READ => {
                match read_after(&store, &room, *last).await {
                    Ok(None) => None,
                    Ok(Some(page)) => Some((store, room, Ok(page))),
                    Err(error) => Some((store, room, Err(error))),
                }
            }
            _ => None,
        };
        Some((Ok::<_, ApiError>(body), next))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .streaming(pages))
}

async fn read_after(
    store: &Arc<dyn Store>,
    room: &RoomId,
    last: (DrawKey, EntryId),
) -> Result<Option<Vec<(DrawKey, EntryId)>>, ApiError> {
    let page = store
        .draw_entries(room, Some(last), ENTRIES_PER_READ)
        .await?;
    Ok((!page.is_empty()).then_some(page))
}

fn lines(page: &[(DrawKey, EntryId)]) -> Bytes {
    let mut out = String::with_capacity(page.len() * 25);
    for (_, entry) in page {
        out.push_str(&entry.to_string());
        out.push('\n');
    }
    Bytes::from(out)
}
