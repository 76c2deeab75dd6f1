//! After the drop: a room's report (`GET /api/admin/rooms/{room}/report`,
//! JSON or `?format=csv`) and the list of reports kept
//! (`GET /api/admin/reports`). The store makes the report of its ledger
//! (`words::report`); this adds the room's sale, read with it.

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use serde::Deserialize;

use crate::http::error::ApiError;
use crate::http::extractors::{Operator, Room};
use crate::http::paths::RoomPath;
use crate::store::{SaleStore, SaleStoreExt, Store, StoreExt};
use crate::words::RoomId;
use crate::words::clock::Moment;
use crate::words::report::{Report, ReportEntry};
use crate::words::sale::{SaleError, SaleKind};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/admin/rooms/{room}/report").get(report))
        .service(web::resource("/api/admin/reports").get(reports));
}

/// How the report is wanted.
#[derive(Debug, Clone, Copy, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Json,
    /// `minutes` as CSV, with a header line.
    Csv,
}

/// The report's query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReportQuery {
    /// `json` (the default) or `csv`.
    #[serde(default)]
    #[param(inline)]
    format: Format,
    /// The room made at this time (RFC 3339), as `GET /api/admin/reports`
    /// lists it: an earlier room under this id. Without it, the room under
    /// this id now, or closed last.
    #[param(value_type = Option<String>, format = DateTime)]
    created_at: Option<Moment>,
}

/// The room's sale as its report shows it: what was sold, and what is left.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct SaleSummary {
    kind: SaleKind,
    /// Confirmed orders.
    orders: u64,
    /// Units (or seats) in them.
    sold: u64,
    /// Units (or seats) still free.
    left: u64,
}

/// The sale of the room under `room` now, if it has one, as its report
/// shows it.
async fn sale_summary(
    sale: &dyn SaleStore,
    room: &RoomId,
) -> Result<Option<serde_json::Value>, ApiError> {
    let view = match sale.sale(room).await {
        Ok(view) => view,
        Err(SaleError::NoSale) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let orders = sale.orders(room).await?;
    let summary = SaleSummary {
        kind: view.kind,
        orders: orders.len() as u64,
        sold: orders
            .iter()
            .map(|order| order.quantity.max(order.seats.len() as u64))
            .sum(),
        left: view.stock_left,
    };
    Ok(Some(
        serde_json::to_value(summary).map_err(|_| ApiError::Internal)?,
    ))
}

/// The report of the room made at `created_at` (or the one under `room`
/// now), with its sale: an open room's read now (a closed room's report
/// keeps the sale as it was at the close).
pub async fn read(
    store: &dyn Store,
    sale: &dyn SaleStore,
    room: &RoomId,
    created_at: Option<Moment>,
) -> Result<Report, ApiError> {
    let mut report = store
        .run(crate::words::op::ReadReport {
            room: room.clone(),
            created_at: created_at.map(|at| at.0),
        })
        .await?;
    if report.closed_at.is_none() {
        report.sale = sale_summary(sale, room).await?;
    }
    Ok(*report)
}

/// Closes the room, its report keeping its sale as it is now.
pub async fn close(store: &dyn Store, sale: &dyn SaleStore, room: &RoomId) -> Result<(), ApiError> {
    let sale = sale_summary(sale, room).await?.map(|sale| sale.to_string());
    store
        .run(crate::words::op::CloseRoom {
            room: room.clone(),
            sale,
        })
        .await?;
    Ok(())
}

#[utoipa::path(
    get,
    path = "/api/admin/rooms/{room}/report",
    tag = "operator",
    summary = "The room's report: exact counts, waits, and its minutes",
    description = "Counts kept by the store's own atomic steps, whichever node served. Waits run from the join (for the pre-queue, the opening) to the admission, for those admitted from the line; the percentiles are interpolated within fixed buckets, so each lies in the true one's bucket (off by at most its width), and `max` is exact. A closed room's report is kept `--report-keep-days`.",
    params(RoomPath, ReportQuery),
    security(("admin" = [])),
    responses(
        (status = 200, description = "The report (JSON), or with `format=csv` its minutes as CSV", content((Report = "application/json"), (String = "text/csv"))),
        (status = 400, description = "invalid_query"),
        (status = 404, description = "room_not_found report_not_found"),
    ),
)]
async fn report(
    _: Operator,
    Room(room): Room,
    query: web::Query<ReportQuery>,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    let report = read(store.get_ref(), sale.get_ref(), &room, query.created_at).await?;
    Ok(match query.format {
        Format::Json => HttpResponse::Ok().json(report),
        Format::Csv => HttpResponse::Ok()
            .content_type("text/csv; charset=utf-8")
            .insert_header((
                header::CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"{}-{}.csv\"",
                    room, report.created_at.0
                ),
            ))
            .body(report.minutes_csv()),
    })
}

/// `GET /api/admin/reports`.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Reports {
    reports: Vec<ReportEntry>,
}

#[utoipa::path(
    get,
    path = "/api/admin/reports",
    tag = "operator",
    summary = "Every report kept: the open rooms', and the closed ones' for --report-keep-days",
    security(("admin" = [])),
    responses((status = 200, body = Reports, description = "By room, then time of making")),
)]
async fn reports(_: Operator, store: web::Data<dyn Store>) -> Result<HttpResponse, ApiError> {
    let reports = store.run(crate::words::op::ListReports {}).await?;
    Ok(HttpResponse::Ok().json(Reports { reports }))
}
