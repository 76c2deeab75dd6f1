//! Each actix worker's own connection to one server.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::ThreadId;

use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, RedisFuture};

use super::endpoint::RESPONSE_TIMEOUT;
use super::failure::timed_out;

/// Connections made on the threads that answer HTTP, one per thread, driven
/// by that thread's own runtime. With one shared connection a join's answer
/// crossed from its actix worker to the multiplexer's task on another
/// thread and back: those wake-ups were the biggest part of a node's CPU per
/// Redis join (BENCHMARKS.md, issue 14, item 3). Each reconnects by itself
/// (RESP3 tells it of a disconnect), and a call that finds its reconnect
/// attempts spent is sent again ([`again_if_it_never_ran`]), so the first
/// call after Redis returns succeeds; one that failed a call is dropped and
/// made again on the worker's next call.
pub(in crate::store::redis) struct WorkerConnections {
    client: redis::Client,
    config: ConnectionManagerConfig,
    by_thread: Mutex<HashMap<ThreadId, Arc<tokio::sync::OnceCell<ConnectionManager>>>>,
}

impl WorkerConnections {
    /// None made yet: each thread makes its own from `client` on its first call.
    pub(super) fn new(client: redis::Client, config: ConnectionManagerConfig) -> Self {
        Self {
            client,
            config,
            by_thread: Mutex::new(HashMap::new()),
        }
    }

    /// This thread's connection, made on first use. Its making is held to
    /// [`RESPONSE_TIMEOUT`] whatever the retries inside it: a master that
    /// was stopped (not killed) accepts the connection and never answers
    /// its handshake, and a caller waiting on it would wait past the
    /// promotion of its replica.
    pub(super) async fn of_this_thread(&self) -> Result<ConnectionManager, RedisError> {
        let cell = self
            .by_thread
            .lock()
            .entry(std::thread::current().id())
            .or_default()
            .clone();
        if let Some(made) = cell.get() {
            return Ok(made.clone());
        }
        let made = cell.get_or_try_init(|| {
            self.client
                .get_connection_manager_with_config(self.config.clone())
        });
        match tokio::time::timeout(RESPONSE_TIMEOUT, made).await {
            Ok(made) => made.cloned(),
            Err(_) => Err(timed_out("making this thread's connection")),
        }
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
