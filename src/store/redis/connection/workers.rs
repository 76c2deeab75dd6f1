//! Each actix worker's own connection to one server.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::RedisFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::endpoint::RESPONSE_TIMEOUT;

/// Connections made on the threads that answer HTTP, one per thread, driven
/// by that thread's own runtime. With one shared connection a join's answer
/// crossed from its actix worker to the multiplexer's task on another
/// thread and back: those wake-ups were the biggest part of a node's CPU per
/// Redis join (BENCHMARKS.md, issue 14, item 3). Each reconnects by itself
/// (RESP3 tells it of a disconnect), and a call that finds its reconnect
/// attempts spent is sent again ([`again_if_it_never_ran`]), so the first
/// call after Redis returns succeeds; one that failed a call is dropped and
/// made again.
///
/// A connection is made in the background and no call waits for it: until
/// it is there, the thread's calls go on the shared connection. Waiting cost
/// every call its making's whole bound while it could not be made (a master
/// that accepts and never answers; a container network slow to resolve the
/// server's name): four store calls, eight seconds.
pub(in crate::store::redis) struct WorkerConnections {
    client: redis::Client,
    config: ConnectionManagerConfig,
    by_thread: Mutex<HashMap<ThreadId, Own>>,
}

/// What a thread has of a connection of its own.
enum Own {
    Making,
    Made(ConnectionManager),
    /// Its making failed then: not tried again for [`MAKE_AGAIN_AFTER`].
    Failed(Instant),
}

/// How long after a failed making a thread's calls leave it be.
const MAKE_AGAIN_AFTER: Duration = Duration::from_secs(1);

impl WorkerConnections {
    /// None made yet: each thread makes its own from `client` on its first call.
    pub(super) fn new(client: redis::Client, config: ConnectionManagerConfig) -> Self {
        Self {
            client,
            config,
            by_thread: Mutex::new(HashMap::new()),
        }
    }

    /// This thread's connection, if it has one; else `None`, and its making
    /// is started (unless under way, or failed less than
    /// [`MAKE_AGAIN_AFTER`] ago) on this thread's runtime. The making is
    /// held to [`RESPONSE_TIMEOUT`] whatever the retries inside it.
    pub(super) fn of_this_thread(self: &Arc<Self>) -> Option<ConnectionManager> {
        let thread = std::thread::current().id();
        {
            let mut by_thread = self.by_thread.lock();
            match by_thread.get(&thread) {
                Some(Own::Made(made)) => return Some(made.clone()),
                Some(Own::Making) => return None,
                Some(Own::Failed(at)) if at.elapsed() < MAKE_AGAIN_AFTER => return None,
                _ => {}
            }
            by_thread.insert(thread, Own::Making);
        }
        let workers = self.clone();
        tokio::spawn(async move {
            let making = workers
                .client
                .get_connection_manager_with_config(workers.config.clone());
            let own = match tokio::time::timeout(RESPONSE_TIMEOUT, making).await {
                Ok(Ok(made)) => Own::Made(made),
                Ok(Err(error)) => {
                    tracing::debug!(%error, "could not make this worker's own connection");
                    Own::Failed(Instant::now())
                }
                Err(_) => {
                    tracing::debug!("making this worker's own connection took too long");
                    Own::Failed(Instant::now())
                }
            };
            workers.by_thread.lock().insert(thread, own);
        });
        None
    }

    /// `answer`, forgetting this thread's connection if it fails with an
    /// error of the connection itself (not a script's refusal).
    pub(super) fn watch<'a, T: Send + 'a>(
        self: &Arc<Self>,
        answer: RedisFuture<'a, T>,
    ) -> RedisFuture<'a, T> {
        let workers = self.clone();
        Box::pin(async move {
            let answer = answer.await;
            if let Err(error) = &answer
                && (error.is_io_error()
                    || error.is_connection_dropped()
                    || error.is_connection_refusal()
                    || error.is_timeout())
            {
                workers
                    .by_thread
                    .lock()
                    .remove(&std::thread::current().id());
            }
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::connection::endpoint::manager_config;

    fn own(workers: &WorkerConnections) -> Option<&'static str> {
        let by_thread = workers.by_thread.lock();
        by_thread
            .get(&std::thread::current().id())
            .map(|own| match own {
                Own::Making => "making",
                Own::Made(_) => "made",
                Own::Failed(_) => "failed",
            })
    }

    /// A server that accepts and never answers (a stalled master): the
    /// calls never wait for this thread's connection, whose making gives
    /// up in the background and is not started again at once.
    #[tokio::test]
    async fn no_call_waits_for_its_workers_connection() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}/?protocol=resp3", silent.local_addr().unwrap());
        let workers = Arc::new(WorkerConnections::new(
            redis::Client::open(url).unwrap(),
            manager_config(),
        ));
        assert!(
            workers.of_this_thread().is_none(),
            "the shared one, meanwhile"
        );
        assert_eq!(own(&workers), Some("making"));
        assert!(workers.of_this_thread().is_none());
        while own(&workers) == Some("making") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(own(&workers), Some("failed"));
        assert!(workers.of_this_thread().is_none());
        assert_eq!(own(&workers), Some("failed"), "not made again at once");
    }
}
