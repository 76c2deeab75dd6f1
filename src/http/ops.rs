//! Operations endpoints: liveness, readiness (the node is not shutting
//! down, the store answers and no background task has died), and
//! Prometheus metrics.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use actix_web::{HttpResponse, web};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::http::error::{ApiError, ErrorBody, ErrorCode, ErrorDetail};
use crate::http::state::{Live, Ops};
use crate::live::promoter::WAIT_SECONDS;
use crate::store::redis::JOINS_PER_CALL;
use crate::store::{Store, StoreExt};
use crate::words::report::WAIT_BOUNDS_S;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/healthz").get(healthz))
        .service(web::resource("/readyz").get(readyz))
        .service(web::resource("/metrics").get(metrics_text));
}

/// The process-wide metrics recorder, installed on first use (tests build
/// many applications in one process; there is one recorder).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let seconds = [
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0,
            ];
            // A tick runs late by up to an outage's length, not by milliseconds.
            let lag = [
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                300.0,
            ];
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
                .and_then(|builder| {
                    builder.set_buckets_for_metric(
                        Matcher::Full("waitroom_tick_lag_seconds".into()),
                        &lag,
                    )
                })
                .and_then(|builder| {
                    builder.set_buckets_for_metric(
                        Matcher::Full(WAIT_SECONDS.into()),
                        &WAIT_BOUNDS_S.map(|s| s as f64),
                    )
                })
                .and_then(|builder| {
                    builder.set_buckets_for_metric(
                        Matcher::Full(JOINS_PER_CALL.into()),
                        &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 63.0, 64.0],
                    )
                })
                .expect("non-empty buckets")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed");
            }
            describe();
            handle
        })
        .clone()
}

fn describe() {
    metrics::describe_gauge!("waitroom_waiting", "visitors waiting in line, by room");
    metrics::describe_gauge!(
        "waitroom_active",
        "visitors holding an unexpired pass, by room"
    );
    metrics::describe_counter!(
        "waitroom_admitted_total",
        "visitors admitted from the line by ticks, by room"
    );
    metrics::describe_gauge!(
        "waitroom_sockets_open",
        "visitor WebSockets open on this node"
    );
    metrics::describe_histogram!("waitroom_join_seconds", "time to answer a join");
    metrics::describe_histogram!(
        JOINS_PER_CALL,
        "joins one call of the join script carried to Redis (at most 64)"
    );
    metrics::describe_histogram!(
        WAIT_SECONDS,
        "waits from joining (or the opening) to admission from the line, by room, recorded once per admission by the node whose tick admitted it (buckets as the room's report's)"
    );
    metrics::describe_histogram!(
        "waitroom_tick_seconds",
        "time of one room's tick in the store"
    );
    metrics::describe_histogram!(
        "waitroom_memory_store_op_seconds",
        "time one operation of the memory store holds its room's lock"
    );
    metrics::describe_gauge!(
        "waitroom_max_active",
        "the room's cap on visitors holding a pass (rooms with a cap only), by room"
    );
    metrics::describe_gauge!(
        "waitroom_eta_seconds",
        "the estimated wait the page shows the last in line, by room (NaN: paused or no rate yet)"
    );
    metrics::describe_gauge!(
        "waitroom_room_paused",
        "1 while the operator has paused the room's admission, by room"
    );
    metrics::describe_gauge!(
        "waitroom_room_opened",
        "0 before the room's opens_at (a pre-queue, admitting nobody), 1 after, by room"
    );
    metrics::describe_counter!(
        "waitroom_turned_away_total",
        "joins that got no place, by reason (the error code); by room where the store knows the room"
    );
    metrics::describe_histogram!(
        "waitroom_store_op_seconds",
        "time of one store call, by store and operation"
    );
    metrics::describe_counter!(
        "waitroom_store_errors_total",
        "store calls that failed, by store and kind"
    );
    metrics::describe_gauge!(
        "waitroom_store_up",
        "1 if the last store call was answered, 0 if the store was unreachable"
    );
    metrics::describe_gauge!(
        "waitroom_socket_limit",
        "visitor WebSockets this node accepts before answering 503 (--max-sockets, or the open-files limit less a reserve)"
    );
    metrics::describe_histogram!(
        "waitroom_tick_lag_seconds",
        "how late this node asked for a due tick that then ran"
    );
    metrics::describe_counter!(
        "waitroom_http_responses_total",
        "HTTP answers by status class"
    );
    // At zero from the start, so that the first 5xx is an increase.
    for class in ["1xx", "2xx", "3xx", "4xx", "5xx"] {
        metrics::counter!("waitroom_http_responses_total", "class" => class).increment(0);
    }
}

/// `/healthz` and `/readyz` when all is well.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Health {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    status: &'static str,
}

#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    summary = "The process is up",
    responses((status = 200, body = Health, description = "`{\"status\":\"ok\"}`")),
)]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Health { status: "ok" })
}

#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Ready for visitors: not draining, no background task failed, the store answers",
    responses(
        (status = 200, body = Health, description = "`{\"status\":\"ready\"}`"),
        (status = 503, description = "draining task_failed store_unavailable"),
    ),
)]
async fn readyz(
    ops: web::Data<Ops>,
    live: web::Data<Live>,
    store: web::Data<dyn Store>,
) -> HttpResponse {
    if ops.draining.load(Ordering::Relaxed) {
        return unready(
            ErrorCode::Draining,
            "this node is shutting down; send new visitors to another",
        );
    }
    let failed = live.tasks.failures();
    if !failed.is_empty() {
        return unready(
            ErrorCode::TaskFailed,
            &format!("background tasks stopped: {}", failed.join(", ")),
        );
    }
    match store.ping().await {
        Ok(()) => HttpResponse::Ok().json(Health { status: "ready" }),
        Err(error) => unready(ErrorCode::StoreUnavailable, &error.to_string()),
    }
}

fn unready(code: ErrorCode, message: &str) -> HttpResponse {
    HttpResponse::ServiceUnavailable().json(ErrorBody {
        error: ErrorDetail {
            code,
            message: message.into(),
        },
    })
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics (text format)",
    responses(
        (status = 200, body = String, content_type = "text/plain", description = "The metrics"),
        (status = 404, description = "not_found"),
    ),
)]
async fn metrics_text(ops: web::Data<Ops>) -> Result<HttpResponse, ApiError> {
    if ops.metrics_elsewhere {
        return Err(ApiError::NotFound("no such endpoint".into()));
    }
    Ok(metrics_page(&ops))
}

/// `/metrics` on the `--metrics-listen` address.
pub async fn metrics_only(ops: web::Data<Ops>) -> HttpResponse {
    metrics_page(&ops)
}

fn metrics_page(ops: &Ops) -> HttpResponse {
    let mut body = ops.metrics.render();
    body.push_str(&process_metrics());
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(body)
}

/// Resident memory and open files, read from /proc where there is one.
fn process_metrics() -> String {
    let mut out = String::new();
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm")
        && let Some(pages) = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u64>().ok())
    {
        out.push_str("# HELP process_resident_memory_bytes Resident memory size in bytes.\n");
        out.push_str("# TYPE process_resident_memory_bytes gauge\n");
        out.push_str(&format!("process_resident_memory_bytes {}\n", pages * 4096));
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        out.push_str("# HELP process_open_fds Number of open file descriptors.\n");
        out.push_str("# TYPE process_open_fds gauge\n");
        out.push_str(&format!("process_open_fds {}\n", entries.count()));
    }
    if let Ok((soft, _)) = rlimit::getrlimit(rlimit::Resource::NOFILE) {
        out.push_str("# HELP process_max_fds Maximum number of open file descriptors.\n");
        out.push_str("# TYPE process_max_fds gauge\n");
        out.push_str(&format!("process_max_fds {soft}\n"));
    }
    out
}
