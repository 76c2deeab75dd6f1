//! How a failed call is told apart and counted: the store unavailable
//! (by kind, for the metrics), a master that may have moved, a call that
//! never ran and may be sent again.

use std::future::Future;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::store::StoreError;

/// What a write whose replicas did not confirm it in time fails with.
pub(super) const REPLICAS_UNCONFIRMED: &str = "replicas did not confirm the write";

pub(in crate::store::redis) fn unavailable(error: RedisError) -> StoreError {
    count_failure(&error);
    StoreError::Unavailable(error.to_string())
}

/// The kinds of failure `waitroom_store_errors_total{store="redis"}` tells
/// apart, each registered at zero when the store connects.
pub(in crate::store::redis) const FAILURE_KINDS: &[&str] =
    &["timeout", "connection", "failover", "replicas", "other"];

/// Counts a call that failed on Redis (once per call a caller sees fail;
/// the attempts `again_if_it_never_ran` repeats are not counted), by kind.
pub(in crate::store::redis) fn count_failure(error: &RedisError) {
    let kind = if error.is_timeout() {
        "timeout"
    } else if error.to_string().contains(REPLICAS_UNCONFIRMED) {
        "replicas"
    } else if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.kind() == ErrorKind::ClusterConnectionNotFound
    {
        "connection"
    } else if matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::TryAgain
                | ServerErrorKind::BusyLoading
                | ServerErrorKind::Moved
                | ServerErrorKind::Ask
        )
    ) {
        "failover"
    } else {
        "other"
    };
    metrics::counter!(crate::store::measured::STORE_ERRORS, "store" => "redis", "kind" => kind)
        .increment(1);
}

/// Whether an error is how a call fails when its server is gone, stalled
/// or no longer the master: worth asking where the master is now.
pub(super) fn master_may_have_moved(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || matches!(
            error.kind(),
            ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Server(ServerErrorKind::ReadOnly)
                | ErrorKind::Server(ServerErrorKind::MasterDown)
                | ErrorKind::Server(ServerErrorKind::ClusterDown)
        )
}

/// Sends a request, and again when an attempt is known not to have run:
/// - it could not even connect. A manager whose reconnect attempts ran out
///   while Redis was away keeps that failure as its connection until a call
///   finds it: that call, the first after Redis returns, fails without
///   having reached Redis (and sets the manager reconnecting), so it is sent
///   once more, whatever it does;
/// - Redis answered that it is still loading its data after a restart (it
///   ran nothing): sent again after a pause, for up to a second.
///
/// A connection that broke while a request was out is not retried: the
/// request may have run.
pub(super) async fn again_if_it_never_ran<T, Sent>(
    connection: &ConnectionManager,
    send: impl Fn(ConnectionManager) -> Sent,
) -> Result<T, RedisError>
where
    Sent: Future<Output = Result<T, RedisError>>,
{
    const LOADING_PAUSE: Duration = Duration::from_millis(100);
    const LOADING_ATTEMPTS: usize = 10;
    let mut reconnected = false;
    let mut loading = 0;
    loop {
        match send(connection.clone()).await {
            Err(error) if error.is_connection_refusal() && !reconnected => reconnected = true,
            Err(error)
                if error.kind() == ErrorKind::Server(ServerErrorKind::BusyLoading)
                    && loading < LOADING_ATTEMPTS =>
            {
                loading += 1;
                tokio::time::sleep(LOADING_PAUSE).await;
            }
            answer => return answer,
        }
    }
}

/// A call that took longer than it may: an error of the kind a response
/// timeout is (so a store that does not answer is `store_unavailable`).
pub(in crate::store::redis) fn timed_out(what: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} took too long"),
    ))
}

pub(in crate::store::redis) fn unexpected(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Client, what))
}
