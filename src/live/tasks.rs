//! Every task the application spawns, tracked: one shutdown signal reaches
//! them all, shutdown waits for them, and a background service that dies
//! before shutdown (returns or panics) is logged and marks the node unready.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

#[derive(Clone, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Services that ended before shutdown.
    failed: Arc<Mutex<Vec<&'static str>>>,
}

impl Tasks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancelled once, when the application shuts down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Spawns a service: a task meant to run until shutdown (the hub, the
    /// promoter). Its ending sooner is a failure the node reports.
    pub fn spawn_service<F>(&self, name: &'static str, service: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let tasks = self.clone();
        self.tracker.spawn(async move {
            let outcome = AssertUnwindSafe(service).catch_unwind().await;
            if tasks.shutdown.is_cancelled() {
                return;
            }
            match outcome {
                Ok(()) => tracing::error!(task = name, "a background task ended before shutdown"),
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    tracing::error!(task = name, panic = %message, "a background task panicked");
                }
            }
            tasks.failed.lock().push(name);
        });
    }

    /// Spawns a job that ends by itself (a resync), tracked for shutdown.
    pub fn spawn_job<F>(&self, job: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(job);
    }

    /// Spawns a socket's loop on the current thread (actix's sockets are
    /// bound to their worker thread), tracked for shutdown.
    pub fn spawn_local<F>(&self, task: F)
    where
        F: Future<Output = ()> + 'static,
    {
        self.tracker.spawn_local(task);
    }

    /// Shutdown waits for the returned token's life as for a task's: held
    /// by something that may spawn tasks later (a socket's handshake under
    /// way), so that they are waited for too.
    pub fn hold(&self) -> TaskTrackerToken {
        self.tracker.token()
    }

    /// Whether shutdown has begun. A task spawned now may be spawned after
    /// shutdown stopped waiting (its holder began afterwards): it should
    /// be run where it is, not spawned.
    pub fn stopping(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// The services that died, if any.
    pub fn failures(&self) -> Vec<&'static str> {
        self.failed.lock().clone()
    }

    /// Signals shutdown and waits (at most `grace`) for every task to end;
    /// says whether they all did.
    pub async fn shut_down(&self, grace: Duration) -> bool {
        self.shutdown.cancel();
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_service_that_dies_is_reported_and_shutdown_waits_for_the_rest() {
        let tasks = Tasks::new();
        tasks.spawn_service("panics", async { panic!("boom") });
        tasks.spawn_service("returns", async {});
        let token = tasks.shutdown_token();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        tasks.spawn_service("runs", async move {
            token.cancelled().await;
            let _ = done_tx.send(());
        });
        // Both failures are recorded by the time their tasks end.
        while tasks.failures().len() < 2 {
            tokio::task::yield_now().await;
        }
        let mut failed = tasks.failures();
        failed.sort_unstable();
        assert_eq!(failed, ["panics", "returns"]);
        assert!(tasks.shut_down(Duration::from_secs(5)).await);
        done_rx.await.expect("the running service saw the shutdown");
        assert_eq!(
            tasks.failures().len(),
            2,
            "ending at shutdown is no failure"
        );
    }
}
