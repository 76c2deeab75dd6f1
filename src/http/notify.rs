//! Step away, we'll call you (api.md): `POST` and `DELETE
//! /api/rooms/{room}/notify`, a waiting visitor's request to be notified
//! by the room's webhook (a contact) or web push (a subscription), checked
//! here (its form, where the subscription points) and kept by the store
//! with its limits.

use actix_web::{HttpRequest, HttpResponse, web};

use super::error::{ApiError, ErrorCode};
use super::extractors::{Ticket, client_block, join_limit};
use super::limits::read_json_or_nothing;
use super::paths::RoomPath;
use super::state::ClientRules;
use crate::store::{Store, StoreExt};
use crate::words::notify::{Ask, NotifyBody, NotifyRefused};
use crate::words::op::Notify;
use crate::words::push::check_subscription;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/api/rooms/{room}/notify")
            .post(ask)
            .delete(cancel),
    );
}

fn refused(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidNotify, why.to_string())
}

#[utoipa::path(
    post,
    path = "/api/rooms/{room}/notify",
    tag = "visitor",
    summary = "Ask to be called back when the turn is near, and keep the place while away",
    description = "With the ticket (Bearer or the `wr_ticket_<room>` cookie). `contact` (up to 200 characters, for the room's webhook) and/or `push` (the browser's PushSubscription JSON), and `ahead` (1–1000, default 20). Counts against the address's join limit; at most `--notify-per-ip` places of one address hold a request.",
    params(RoomPath),
    request_body = NotifyBody,
    security(("ticket" = [])),
    responses(
        (status = 204, description = "Kept: the place's `Status` now says `notify` true"),
        (status = 400, description = "invalid_json invalid_notify"),
        (status = 401, description = "missing_ticket invalid_ticket"),
        (status = 409, description = "not_waiting too_many_notifications"),
        (status = 429, description = "rate_limited"),
    ),
)]
async fn ask(
    req: HttpRequest,
    ticket: Ticket,
    body: web::Payload,
    store: web::Data<dyn Store>,
    rules: web::Data<ClientRules>,
) -> Result<HttpResponse, ApiError> {
    let body = read_json_or_nothing(&req, body).await?;
    let body: NotifyBody = serde_json::from_slice(&body).map_err(|error| {
        ApiError::bad_request(
            ErrorCode::InvalidJson,
            format!("the body must be a JSON object with contact, push or ahead: {error}"),
        )
    })?;
    let room = store.room(&ticket.room).await?;
    let request = body
        .check(room.config.notify_webhook_url.is_some())
        .map_err(refused)?;
    if let Some(push) = &request.push {
        check_subscription(&rules.push_hosts, push)
            .map_err(|why| refused(NotifyRefused::Push(why)))?;
    }
    let ask = Ask {
        request,
        client: client_block(&req).to_string(),
        per_client: rules.notify_per_ip,
        join_limit: join_limit(&req),
    };
    store
        .run(Notify {
            room: ticket.room.clone(),
            visitor: ticket.visitor,
            ask: Some(Box::new(ask)),
        })
        .await?;
    tracing::info!(room = %ticket.room, visitor = %ticket.visitor, "a visitor asked to be notified");
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    delete,
    path = "/api/rooms/{room}/notify",
    tag = "visitor",
    summary = "No longer be notified: the place is kept only while the visitor is here",
    params(RoomPath),
    security(("ticket" = [])),
    responses(
        (status = 204, description = "Cancelled (also when nothing was asked)"),
        (status = 401, description = "missing_ticket invalid_ticket"),
    ),
)]
async fn cancel(ticket: Ticket, store: web::Data<dyn Store>) -> Result<HttpResponse, ApiError> {
    store
        .run(Notify {
            room: ticket.room.clone(),
            visitor: ticket.visitor,
            ask: None,
        })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
