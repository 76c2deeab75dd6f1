//! Logging through `tracing`: readable lines by default, JSON on request.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::{Level, Metadata};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, fmt};

use crate::startup::config::LogFormat;

/// Set once this process has shut its listener on the way down (see
/// `AppHandle::stop_accepting`).
static LISTENER_SHUT: AtomicBool = AtomicBool::new(false);

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ours = filter_fn(|event| !accept_error_after_our_shut(event));
    let result = match format {
        LogFormat::Text => tracing_subscriber::registry()
            .with(filter)
            .with(fmt::layer().with_filter(ours))
            .try_init(),
        LogFormat::Json => tracing_subscriber::registry()
            .with(filter)
            .with(fmt::layer().json().flatten_event(true).with_filter(ours))
            .try_init(),
    };
    // Already initialised (tests build many applications): keep the first.
    let _ = result;
}

/// Tells the log that the listener is being shut on purpose.
pub fn listener_shut() {
    LISTENER_SHUT.store(true, Ordering::Relaxed);
}

/// actix's accept loop logs an ERROR when `accept` fails on its listener.
/// Its `pause()` answers before the loop has stopped polling, so the shut
/// that follows it (to refuse new connections at once) sometimes wakes the
/// loop first, and `accept` fails with EINVAL: an error of our own making
/// that an operator alerting on ERROR would be paged for at every rolling
/// restart (about one stop in five). Once the listener is shut, the loop
/// has nothing left to accept, so none of its errors can matter. In tests,
/// which run many servers in one process, one server's stop quiets the
/// others' accept errors too.
fn accept_error_after_our_shut(event: &Metadata<'_>) -> bool {
    event.target() == "actix_server::accept"
        && *event.level() == Level::ERROR
        && LISTENER_SHUT.load(Ordering::Relaxed)
}
