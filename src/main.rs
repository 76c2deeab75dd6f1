#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use waitroom::Application;
use waitroom::startup::config::{Mode, Settings};
use waitroom::startup::healthcheck;
use waitroom::startup::telemetry;
use waitroom::words::clock::SystemClock;

#[tokio::main]
async fn main() -> ExitCode {
    let settings = Settings::parse();
    if settings.mode == Some(Mode::Healthcheck) {
        // No logging set up: a container runtime keeps this output as the
        // check's result, so one plain line says it all.
        return match healthcheck::check(&settings.listen) {
            Ok(()) => ExitCode::SUCCESS,
            Err(reason) => {
                eprintln!("unhealthy: {reason}");
                ExitCode::FAILURE
            }
        };
    }
    telemetry::init(settings.log_format);
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(
            open_files = limit,
            "raised the open-files limit to the hard limit"
        ),
        Err(error) => tracing::warn!(%error, "could not raise the open-files limit"),
    }
    let demo = settings.demo_room;
    let app = match Application::build(settings, Arc::new(SystemClock)).await {
        Ok(app) => app,
        Err(error) => {
            tracing::error!(%error, "waitroom could not start");
            return ExitCode::FAILURE;
        }
    };
    let base = format!("http://127.0.0.1:{}", app.port());
    if demo {
        tracing::info!(url = %format!("{base}/rooms/demo"), "demo room ready: open this in a browser");
    }
    tracing::info!(admin = %format!("{base}/admin"), "waitroom listening");
    match app.run_until_stopped().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "server failed");
            ExitCode::FAILURE
        }
    }
}
