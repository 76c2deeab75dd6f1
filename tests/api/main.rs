//! The HTTP API of one node, end to end: the visitor and operator APIs,
//! a drop's schedule and autotune on the admin page, the gate, codes, the
//! sale, origin tokens and CORS, HTTP conventions, the API description,
//! slow readers, the promoter's schedule, the guarded outbound probe of
//! origins' health, a room's webhook and the receivers' examples, web
//! push's key and messages, and the metrics with their dashboard and alerts.

mod admin_drop;
mod api;
mod autotune;
mod codes;
mod gate;
mod http_conventions;
mod join_retry;
mod notify;
mod notify_delivery;
mod observability;
mod openapi;
mod origin_access;
mod outbound;
mod promoter;
mod push;
mod report;
mod sale;
mod schedule;
mod sessions;
mod slow_readers;
mod webhook;
mod webhook_receivers;
