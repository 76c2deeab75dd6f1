//! Logging through `tracing`: readable lines by default, JSON on request.

use tracing_subscriber::EnvFilter;

use crate::startup::config::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // Already initialised (tests build many applications): keep the first.
    let _ = result;
}
