//! A connection for one call, whichever topology it reaches, noting the
//! failures its link must follow.

use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::failure::{again_if_it_never_ran, master_may_have_moved};
use super::follow::Follow;
use super::workers::WorkerConnections;

/// A connection for one call (a cheap handle to a shared one).
#[derive(Clone)]
pub(in crate::store::redis) enum Connection {
    /// One server (or the master Sentinel names) through a reconnecting
    /// manager, noting its failures for the link to follow.
    Server(ConnectionManager, Arc<dyn Follow>),
    /// An actix worker's own connection to the server: forgotten on a
    /// connection-level error, so that the worker's next call makes a
    /// fresh one.
    Worker(ConnectionManager, Arc<WorkerConnections>, Arc<dyn Follow>),
    Cluster(ClusterConnection, Arc<dyn Follow>),
}

impl Connection {
    pub(super) fn follower(&self) -> Arc<dyn Follow> {
        match self {
            Connection::Server(_, server) | Connection::Worker(_, _, server) => server.clone(),
            Connection::Cluster(_, cluster) => cluster.clone(),
        }
    }
}

/// `answer`, noting how it ended: a failure of the kind a moved master
/// causes sets off a check of where the master is.
fn noted<'a, T: Send + 'a>(
    follow: Arc<dyn Follow>,
    answer: RedisFuture<'a, T>,
) -> RedisFuture<'a, T> {
    Box::pin(async move {
        let answer = answer.await;
        if let Err(error) = &answer
            && master_may_have_moved(error)
        {
            follow.check_soon();
        }
        answer
    })
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let follow = self.follower();
        let send = move |mut c: ConnectionManager| async move { c.send_packed_command(cmd).await };
        let answer: RedisFuture<'a, Value> = match &*self {
            Connection::Server(c, _) => Box::pin(again_if_it_never_ran(c, send)),
            Connection::Cluster(c, _) => {
                let mut c = c.clone();
                Box::pin(async move { c.req_packed_command(cmd).await })
            }
            Connection::Worker(c, workers, _) => {
                workers.watch(Box::pin(again_if_it_never_ran(c, send)))
            }
        };
        noted(follow, answer)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let follow = self.follower();
        let send = move |mut c: ConnectionManager| async move {
            c.send_packed_commands(cmd, offset, count).await
        };
        let answer: RedisFuture<'a, Vec<Value>> = match &*self {
            Connection::Server(c, _) => Box::pin(again_if_it_never_ran(c, send)),
            Connection::Cluster(c, _) => {
                let mut c = c.clone();
                Box::pin(async move { c.req_packed_commands(cmd, offset, count).await })
            }
            Connection::Worker(c, workers, _) => {
                workers.watch(Box::pin(again_if_it_never_ran(c, send)))
            }
        };
        noted(follow, answer)
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Server(c, _) | Connection::Worker(c, _, _) => c.get_db(),
            Connection::Cluster(c, _) => c.get_db(),
        }
    }
}
