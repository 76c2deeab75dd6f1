//! One server, fixed or the master Sentinel names: its connections, made
//! again when the master moved, and each actix worker's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use redis::aio::ConnectionManager;
use redis::sentinel::SentinelClient;
use redis::{PushInfo, RedisError};
use tokio::sync::{broadcast, mpsc};

use super::calls::Connection;
use super::endpoint::{Endpoint, manager_config};
use super::failure::unavailable;
use super::follow::{CheckGate, FOLLOW_EVERY, FOLLOW_FOR, Follow, VIEW_TIMEOUT};
use super::redis_url::{Topology, with_resp3};
use super::workers::WorkerConnections;
use crate::store::StoreError;
use crate::store::redis::keys::EVENTS_PATTERN;
use crate::words::StoreEvent;

/// One server: at a fixed address, or wherever the Sentinels say the
/// master is now.
pub(in crate::store::redis) struct FollowedServer {
    endpoint: Endpoint,
    sentinel: Option<tokio::sync::Mutex<SentinelClient>>,
    current: RwLock<Arc<ServerConnections>>,
    durable_turn: AtomicUsize,
    pushes: mpsc::UnboundedSender<PushInfo>,
    events: broadcast::Sender<StoreEvent>,
    gate: CheckGate,
}

/// The connections to one server.
struct ServerConnections {
    /// The master's address, as the Sentinels gave it (none for a fixed URL).
    address: Option<String>,
    shared: ConnectionManager,
    subscriber: ConnectionManager,
    workers: Arc<WorkerConnections>,
    /// For writes that wait for replicas ([`DURABLE_CONNECTIONS`]).
    durable: Vec<ConnectionManager>,
}

impl FollowedServer {
    pub(super) async fn connect(
        endpoint: Endpoint,
        pushes: mpsc::UnboundedSender<PushInfo>,
        events: broadcast::Sender<StoreEvent>,
    ) -> Result<Arc<Self>, StoreError> {
        let sentinel = endpoint
            .sentinel()
            .transpose()
            .map_err(unavailable)?
            .map(tokio::sync::Mutex::new);
        let found = Self::master_client(&endpoint, sentinel.as_ref())
            .await
            .map_err(unavailable)?;
        let connections = Self::connections_to(found, &pushes, endpoint.durable_connections)
            .await
            .map_err(unavailable)?;
        Ok(Arc::new(Self {
            endpoint,
            sentinel,
            current: RwLock::new(Arc::new(connections)),
            durable_turn: AtomicUsize::new(0),
            pushes,
            events,
            gate: CheckGate::default(),
        }))
    }

    /// A client for the master: the URL's server, or the one the Sentinels name.
    async fn master_client(
        endpoint: &Endpoint,
        sentinel: Option<&tokio::sync::Mutex<SentinelClient>>,
    ) -> Result<(redis::Client, Option<String>), RedisError> {
        match (sentinel, &endpoint.url.topology) {
            (Some(sentinel), _) => {
                let client = sentinel.lock().await.async_get_client().await?;
                let address = client.get_connection_info().addr().to_string();
                Ok((client, Some(address)))
            }
            (None, Topology::Server(url)) => Ok((endpoint.client(&with_resp3(url))?, None)),
            (None, _) => unreachable!("a server link is made for a server URL or Sentinels"),
        }
    }

    async fn connections_to(
        (client, address): (redis::Client, Option<String>),
        pushes: &mpsc::UnboundedSender<PushInfo>,
        durable: usize,
    ) -> Result<ServerConnections, RedisError> {
        let config = manager_config();
        let shared = client
            .get_connection_manager_with_config(config.clone())
            .await?;
        let durable = futures_util::future::try_join_all(
            (0..durable).map(|_| client.get_connection_manager_with_config(config.clone())),
        )
        .await?;
        let mut subscriber = client
            .get_connection_manager_with_config(
                config
                    .clone()
                    .set_push_sender(pushes.clone())
                    .set_automatic_resubscription(),
            )
            .await?;
        subscriber.psubscribe(EVENTS_PATTERN).await?;
        Ok(ServerConnections {
            address,
            shared,
            subscriber,
            durable,
            workers: Arc::new(WorkerConnections::new(client, config)),
        })
    }

    pub(super) async fn connection(self: &Arc<Self>) -> Connection {
        let current = self.current.read().clone();
        let on_worker = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
        });
        if on_worker && let Some(connection) = current.workers.of_this_thread() {
            return Connection::Worker(connection, current.workers.clone(), self.clone());
        }
        Connection::Server(current.shared.clone(), self.clone())
    }

    /// One of the connections for waited writes, in turn (the shared one
    /// when there are none).
    pub(super) fn durable_connection(self: &Arc<Self>) -> Connection {
        let current = self.current.read().clone();
        let turn = self.durable_turn.fetch_add(1, Ordering::Relaxed);
        let manager = match current.durable.len() {
            0 => current.shared.clone(),
            n => current.durable[turn % n].clone(),
        };
        Connection::Server(manager, self.clone())
    }

    /// How many replicas the master has connected now, if it says.
    pub(super) async fn replicas(self: &Arc<Self>) -> Option<usize> {
        let mut shared = self.current.read().shared.clone();
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut shared)
            .await
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
    }

    /// Pings through the subscriber until Redis answers: each attempt
    /// makes its manager reconnect (and resubscribe).
    pub(super) async fn ping_subscriber_until_it_answers(self: Arc<Self>) {
        loop {
            let mut subscriber = self.current.read().subscriber.clone();
            let pong: Result<String, _> = redis::cmd("PING").query_async(&mut subscriber).await;
            if pong.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Asks the Sentinels where the master is, again and again for a while
    /// (a failover takes them a few seconds); once it moved, connects there
    /// and tells the hub to read its sockets' places again.
    async fn follow_the_master(&self) -> Result<(), RedisError> {
        let deadline = Instant::now() + FOLLOW_FOR;
        loop {
            // redis-rs checks the master it is told of (ROLE): a stalled one
            // would hold the question until its timeout, past the promotion.
            let asked = tokio::time::timeout(
                VIEW_TIMEOUT,
                Self::master_client(&self.endpoint, self.sentinel.as_ref()),
            )
            .await;
            if let Ok(Ok((client, address))) = asked
                && address != self.current.read().address
            {
                let connections = Self::connections_to(
                    (client, address.clone()),
                    &self.pushes,
                    self.endpoint.durable_connections,
                )
                .await?;
                *self.current.write() = Arc::new(connections);
                tracing::warn!(
                    master = address.as_deref().unwrap_or_default(),
                    "the Sentinels name a new master; following it"
                );
                let _ = self.events.send(StoreEvent::Resumed);
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
    }
}

impl Follow for FollowedServer {
    fn check_soon(self: Arc<Self>) {
        // A fixed address has nowhere else to be: its managers reconnect.
        if self.sentinel.is_none() || !self.gate.start() {
            return;
        }
        tokio::spawn(async move {
            if let Err(error) = self.follow_the_master().await {
                tracing::debug!(%error, "could not ask the Sentinels for the master");
            }
            self.gate.done();
        });
    }
}
