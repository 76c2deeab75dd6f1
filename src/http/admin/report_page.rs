//! The admin page's view of a room's report (`GET /admin/rooms/{room}/report`):
//! the numbers, the wait histogram, arrivals and admissions over time, the
//! draw's audit and the sale, a CSV download, and a print stylesheet, so
//! the page is one an operator can send on. Drawn on the server (SVG), so
//! it prints, and reads without JavaScript.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::page::{ADMIN_CONTENT_SECURITY_POLICY, operator_catalogue};
use super::report::read;
use crate::http::error::ApiError;
use crate::http::extractors::{Room, admin_session};
use crate::http::pages::i18n::Catalogue;
use crate::http::pages::render;
use crate::store::{SaleStore, Store};
use crate::words::clock::{Moment, rfc3339};
use crate::words::report::{Minute, Report};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/admin/rooms/{room}/report").get(page));
}

/// The chart's drawing area, in the SVG's own units.
const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 200.0;

#[derive(Template)]
#[template(path = "admin_report.html")]
struct ReportPage {
    t: &'static Catalogue,
    r: Report,
    /// RFC 3339 of the report's times.
    created_at: String,
    from: String,
    to: String,
    closed_at: Option<String>,
    /// The CSV of this report's rows.
    csv_url: String,
    /// The histogram's bars: label, count, x, y, height.
    bars: Vec<(String, u64, f64, f64, f64)>,
    /// The over-time chart's lines (SVG points) and its largest value.
    arrivals_line: String,
    admitted_line: String,
    chart_max: u64,
    /// The first and last row's time, the chart's ends.
    chart_from: String,
    chart_to: String,
    /// The turned-away counts, by code.
    turned_away: Vec<(String, u64)>,
    turned_away_total: u64,
    /// The sale's figures, if the room has one.
    sale: Option<(String, u64, u64, u64)>,
    wait: WaitFigures,
}

/// The waits' figures as text (empty without waits).
struct WaitFigures {
    p50: String,
    p90: String,
    p99: String,
    max: String,
}

fn seconds(value: Option<f64>) -> String {
    value.map(|s| format!("{s:.1} s")).unwrap_or_default()
}

/// The histogram's bars, each bucket's own count (not cumulative).
fn bars(report: &Report) -> Vec<(String, u64, f64, f64, f64)> {
    let buckets = &report.wait_seconds.buckets;
    let mut below = 0;
    let counts: Vec<(String, u64)> = buckets
        .iter()
        .map(|b| {
            let own = b.count - below;
            below = b.count;
            let label = match buckets.iter().position(|x| x.le == b.le) {
                Some(0) => format!("≤ {} s", b.le),
                _ if b.le == "+Inf" => format!("> {} s", buckets[buckets.len() - 2].le),
                _ => format!("≤ {} s", b.le),
            };
            (label, own)
        })
        .collect();
    let most = counts.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let slot = WIDTH / counts.len() as f64;
    counts
        .into_iter()
        .enumerate()
        .map(|(i, (label, n))| {
            let height = HEIGHT * n as f64 / most as f64;
            (label, n, i as f64 * slot + 4.0, HEIGHT - height, height)
        })
        .collect()
}

/// A line through the rows' values, as SVG points, scaled to `most`.
fn line(rows: &[Minute], most: u64, value: impl Fn(&Minute) -> u64) -> String {
    let step = if rows.len() > 1 {
        WIDTH / (rows.len() - 1) as f64
    } else {
        0.0
    };
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let y = HEIGHT - HEIGHT * value(row) as f64 / most.max(1) as f64;
            format!("{:.1},{:.1}", i as f64 * step, y)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl ReportPage {
    fn new(t: &'static Catalogue, room: &str, r: Report) -> Self {
        let chart_max = r
            .minutes
            .iter()
            .map(|m| m.arrivals.max(m.admitted))
            .max()
            .unwrap_or(0);
        let time = |m: Option<&Minute>| m.map(|m| rfc3339(m.at.0)).unwrap_or_default();
        let w = &r.wait_seconds;
        Self {
            t,
            created_at: rfc3339(r.created_at.0),
            from: rfc3339(r.from.0),
            to: rfc3339(r.to.0),
            closed_at: r.closed_at.map(|at| rfc3339(at.0)),
            csv_url: format!(
                "/api/admin/rooms/{room}/report?format=csv&created_at={}",
                rfc3339_query(r.created_at)
            ),
            bars: bars(&r),
            arrivals_line: line(&r.minutes, chart_max, |m| m.arrivals),
            admitted_line: line(&r.minutes, chart_max, |m| m.admitted),
            chart_max,
            chart_from: time(r.minutes.first()),
            chart_to: time(r.minutes.last()),
            turned_away: r
                .counts
                .turned_away
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            turned_away_total: r.counts.turned_away.values().sum(),
            sale: r.sale.as_ref().map(|s| {
                let n = |k: &str| s[k].as_u64().unwrap_or(0);
                (
                    s["kind"].as_str().unwrap_or_default().to_owned(),
                    n("orders"),
                    n("sold"),
                    n("left"),
                )
            }),
            wait: WaitFigures {
                p50: seconds(w.p50),
                p90: seconds(w.p90),
                p99: seconds(w.p99),
                max: seconds(w.max),
            },
            r,
        }
    }
}

/// A time for a query string: RFC 3339 with milliseconds, `+` never
/// appearing (UTC is written `Z`).
fn rfc3339_query(at: Moment) -> String {
    crate::words::clock::rfc3339_ms(at.0)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// The room made at this time (RFC 3339), as the reports list it.
    #[param(value_type = Option<String>, format = DateTime)]
    created_at: Option<Moment>,
}

#[utoipa::path(
    get,
    path = "/admin/rooms/{room}/report",
    operation_id = "admin_report_page",
    tag = "pages",
    summary = "A room's report as a page to read, print or send on (HTML); the login form without a session",
    params(crate::http::paths::RoomPath, PageQuery),
    responses(
        (status = 200, description = "The report, or the login form", content_type = "text/html"),
        (status = 400, description = "invalid_query"),
        (status = 404, description = "room_not_found report_not_found"),
    ),
)]
async fn page(
    req: HttpRequest,
    Room(room): Room,
    query: web::Query<PageQuery>,
    store: web::Data<dyn Store>,
    sale: web::Data<dyn SaleStore>,
) -> Result<HttpResponse, ApiError> {
    if admin_session(&req).await?.is_none() {
        return Ok(super::page::login_page(
            &req,
            None,
            actix_web::http::StatusCode::OK,
        ));
    }
    let report = read(store.get_ref(), sale.get_ref(), &room, query.created_at).await?;
    let t = operator_catalogue(&req);
    let mut page = render(&ReportPage::new(t, room.as_str(), report));
    page.headers_mut().insert(
        actix_web::http::header::CONTENT_SECURITY_POLICY,
        actix_web::http::header::HeaderValue::from_static(ADMIN_CONTENT_SECURITY_POLICY),
    );
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::report::Ledger;

    #[test]
    fn the_bars_are_each_buckets_own_count_the_tallest_full_height() {
        let mut ledger = Ledger::new(0);
        for ms in [500, 1_500, 1_500, 40_000] {
            ledger.waits.record(ms);
        }
        let report = ledger.report("r", Default::default(), 60_000);
        let bars = bars(&report);
        assert_eq!(bars.len(), 14);
        assert_eq!((bars[0].0.as_str(), bars[0].1), ("≤ 1 s", 1));
        assert_eq!((bars[1].1, bars[1].4), (2, HEIGHT));
        assert_eq!(bars[5].1, 1);
        assert_eq!(bars[13].0, "> 7200 s");
    }
}
