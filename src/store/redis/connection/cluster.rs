//! A Redis Cluster, its connections made again when its view of who serves
//! which slots changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, RedisError};
use tokio::sync::{broadcast, mpsc};

use super::calls::Connection;
use super::endpoint::Endpoint;
use super::failure::unavailable;
use super::follow::{CheckGate, FOLLOW_EVERY, FOLLOW_FOR, Follow, VIEW_TIMEOUT};
use super::redis_url::Topology;
use crate::store::StoreError;
use crate::words::StoreEvent;

/// A Redis Cluster, its connections made again when the cluster's view of
/// who serves which slots changes (a replica promoted) after calls failed.
pub(in crate::store::redis) struct FollowedCluster {
    endpoint: Endpoint,
    /// The URL's seeds.
    url_seeds: Vec<(String, u16)>,
    /// The view the connections were made from, with the nodes it lists.
    pub(super) built: Mutex<ClusterView>,
    commands: RwLock<ClusterConnection>,
    subscriber: RwLock<ClusterConnection>,
    /// For writes that wait for replicas ([`DURABLE_CONNECTIONS`]).
    durable: RwLock<Vec<ClusterConnection>>,
    durable_turn: AtomicUsize,
    /// The room channels this node subscribed to.
    watched: Mutex<HashSet<String>>,
    pushes: mpsc::UnboundedSender<PushInfo>,
    events: broadcast::Sender<StoreEvent>,
    gate: CheckGate,
}

/// Who serves which slots, as a node of the cluster sees it (`CLUSTER
/// NODES`), and which nodes answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ClusterView {
    /// Each slot range and its master, failing or not: this changes when a
    /// replica is promoted, not when a master is first suspected.
    slots: Vec<((u16, u16), (String, u16))>,
    /// The nodes not marked failing: seeds for fresh connections.
    healthy: Vec<(String, u16)>,
    /// The fewest healthy replicas a master that serves slots has.
    pub(super) fewest_replicas: Option<usize>,
}

impl ClusterView {
    /// Reads `CLUSTER NODES`:
    /// `<id> <ip:port@bus[,host]> <flags> <master> <ping> <pong> <epoch> <link> <slots…>`.
    fn parse(text: &str) -> Self {
        let mut view = Self::default();
        // The masters that serve slots, and the healthy replicas of each.
        let mut serving = HashSet::new();
        let mut replicas: HashMap<&str, usize> = HashMap::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(id), Some(flags), Some(master)) =
                (fields.first(), fields.get(2), fields.get(3))
            else {
                continue;
            };
            if flags.contains("master") && fields.len() > 8 {
                serving.insert(*id);
            } else if flags.contains("slave") && !flags.contains("fail") {
                *replicas.entry(master).or_insert(0) += 1;
            }
        }
        view.fewest_replicas = serving
            .iter()
            .map(|id| replicas.get(id).copied().unwrap_or(0))
            .min();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(address), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            let address = address.split(['@', ',']).next().unwrap_or_default();
            let Some((host, port)) = address
                .rsplit_once(':')
                .and_then(|(host, port)| Some((host.to_owned(), port.parse::<u16>().ok()?)))
            else {
                continue;
            };
            if host.is_empty() {
                continue;
            }
            let failing = ["fail", "noaddr", "handshake"]
                .iter()
                .any(|flag| flags.contains(flag));
            if !failing {
                view.healthy.push((host.clone(), port));
            }
            if flags.contains("master") {
                for range in fields.iter().skip(8).filter(|r| !r.starts_with('[')) {
                    let bounds = match range.split_once('-') {
                        Some((a, b)) => a.parse().ok().zip(b.parse().ok()),
                        None => range.parse().ok().map(|slot| (slot, slot)),
                    };
                    if let Some(bounds) = bounds {
                        view.slots.push((bounds, (host.clone(), port)));
                    }
                }
            }
        }
        view.slots.sort();
        view.healthy.sort();
        view
    }
}

impl FollowedCluster {
    pub(super) async fn connect(
        endpoint: Endpoint,
        pushes: mpsc::UnboundedSender<PushInfo>,
        events: broadcast::Sender<StoreEvent>,
    ) -> Result<Arc<Self>, StoreError> {
        let Topology::Cluster(seeds) = &endpoint.url.topology else {
            unreachable!("a cluster link is made for a cluster URL")
        };
        let url_seeds = seeds.clone();
        let view = Self::view(&endpoint, &url_seeds).await.unwrap_or_default();
        let (commands, subscriber, durable) =
            Self::connections(&endpoint, &Self::seeds(&view, &url_seeds), &pushes)
                .await
                .map_err(unavailable)?;
        Ok(Arc::new(Self {
            endpoint,
            url_seeds,
            built: Mutex::new(view),
            commands: RwLock::new(commands),
            subscriber: RwLock::new(subscriber),
            durable: RwLock::new(durable),
            durable_turn: AtomicUsize::new(0),
            watched: Mutex::new(HashSet::new()),
            pushes,
            events,
            gate: CheckGate::default(),
        }))
    }

    /// The healthy nodes of `view`, or the URL's seeds when it has none: a
    /// stalled seed would hold up every fresh connection until it timed out.
    fn seeds(view: &ClusterView, url_seeds: &[(String, u16)]) -> Vec<(String, u16)> {
        if view.healthy.is_empty() {
            url_seeds.to_vec()
        } else {
            view.healthy.clone()
        }
    }

    /// The view of whichever of `nodes` answers first.
    async fn view(endpoint: &Endpoint, nodes: &[(String, u16)]) -> Option<ClusterView> {
        let asks = nodes.iter().map(|(host, port)| {
            Box::pin(async move {
                let ask = async {
                    let mut connection = endpoint
                        .node_client(host, *port)?
                        .get_multiplexed_async_connection()
                        .await?;
                    redis::cmd("CLUSTER")
                        .arg("NODES")
                        .query_async::<String>(&mut connection)
                        .await
                };
                match tokio::time::timeout(VIEW_TIMEOUT, ask).await {
                    Ok(Ok(text)) => Ok(ClusterView::parse(&text)),
                    _ => Err(()),
                }
            })
        });
        futures_util::future::select_ok(asks)
            .await
            .ok()
            .map(|(view, _)| view)
    }

    async fn connections(
        endpoint: &Endpoint,
        seeds: &[(String, u16)],
        pushes: &mpsc::UnboundedSender<PushInfo>,
    ) -> Result<(ClusterConnection, ClusterConnection, Vec<ClusterConnection>), RedisError> {
        let commands = endpoint.cluster_client(seeds, None)?;
        let subscriber = endpoint.cluster_client(seeds, Some(pushes.clone()))?;
        let durable = endpoint.cluster_client(seeds, None)?;
        let durable = futures_util::future::try_join_all(
            (0..endpoint.durable_connections).map(|_| durable.get_async_connection()),
        );
        futures_util::try_join!(
            commands.get_async_connection(),
            subscriber.get_async_connection(),
            durable
        )
    }

    pub(super) fn connection(self: &Arc<Self>) -> Connection {
        Connection::Cluster(self.commands.read().clone(), self.clone())
    }

    /// One of the connections for waited writes, in turn (the commands'
    /// when there are none).
    pub(super) fn durable_connection(self: &Arc<Self>) -> Connection {
        let durable = self.durable.read();
        let turn = self.durable_turn.fetch_add(1, Ordering::Relaxed);
        match durable.len() {
            0 => self.connection(),
            n => Connection::Cluster(durable[turn % n].clone(), self.clone()),
        }
    }

    pub(super) async fn watch(&self, channel: &str) -> Result<(), RedisError> {
        if !self.watched.lock().insert(channel.to_owned()) {
            return Ok(());
        }
        let mut subscriber = self.subscriber.read().clone();
        if let Err(error) = subscriber.ssubscribe(channel).await {
            self.watched.lock().remove(channel);
            return Err(error);
        }
        Ok(())
    }

    /// Asks the cluster for its view until it differs from the one the
    /// connections were made from (a replica was promoted), for a while;
    /// then makes fresh connections from it.
    async fn follow_the_cluster(&self) -> Result<(), RedisError> {
        let deadline = Instant::now() + FOLLOW_FOR;
        while Instant::now() < deadline {
            let built = self.built.lock().clone();
            // Every node known, the failing ones too: asked in parallel, the
            // first answer counts.
            let mut nodes = built.healthy.clone();
            nodes.extend(built.slots.iter().map(|(_, node)| node.clone()));
            nodes.extend(self.url_seeds.iter().cloned());
            nodes.sort();
            nodes.dedup();
            if let Some(view) = Self::view(&self.endpoint, &nodes).await
                && view.slots != built.slots
            {
                return self.reconnect(view).await;
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
        Ok(())
    }

    /// Makes fresh connections from `view`, subscribes every watched
    /// channel on them, and tells the hub that events may have been lost.
    async fn reconnect(&self, view: ClusterView) -> Result<(), RedisError> {
        let seeds = Self::seeds(&view, &self.url_seeds);
        let (commands, mut subscriber, durable) =
            Self::connections(&self.endpoint, &seeds, &self.pushes).await?;
        let channels: Vec<String> = self.watched.lock().iter().cloned().collect();
        for channel in &channels {
            subscriber.ssubscribe(channel).await?;
        }
        *self.commands.write() = commands;
        *self.subscriber.write() = subscriber;
        *self.durable.write() = durable;
        *self.built.lock() = view;
        tracing::warn!(
            channels = channels.len(),
            "the cluster moved slots to other masters; following them"
        );
        let _ = self.events.send(StoreEvent::Resumed);
        Ok(())
    }
}

impl Follow for FollowedCluster {
    fn check_soon(self: Arc<Self>) {
        if !self.gate.start() {
            return;
        }
        tokio::spawn(async move {
            if let Err(error) = self.follow_the_cluster().await {
                tracing::debug!(%error, "could not reconnect to the cluster yet");
            }
            self.gate.done();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_view_changes_when_a_replica_is_promoted_not_when_a_master_fails() {
        let before = before_text();
        let suspected = before.replace("myself,master - 0 0 1", "master,fail? - 0 0 1");
        let promoted = "\
a1 127.0.0.1:7000@17000 master,fail - 0 0 1 disconnected
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383
c3 127.0.0.1:7002@17002 myself,master - 0 0 3 connected 0-8191";
        let (before, suspected, promoted) = (
            ClusterView::parse(before),
            ClusterView::parse(&suspected),
            ClusterView::parse(promoted),
        );
        assert_eq!(before.slots, suspected.slots);
        assert_ne!(
            suspected.healthy, before.healthy,
            "a failing node is no seed"
        );
        assert_ne!(promoted.slots, before.slots);
        assert_eq!(promoted.slots[0], ((0, 8191), ("127.0.0.1".into(), 7002)));
        // a1 has its replica, b2 none; after the promotion nobody has one.
        assert_eq!(before.fewest_replicas, Some(0));
        assert_eq!(promoted.fewest_replicas, Some(0));
        let both = format!(
            "{}\nd4 127.0.0.1:7003@17003 slave b2 0 0 2 connected",
            before_text()
        );
        assert_eq!(ClusterView::parse(&both).fewest_replicas, Some(1));
    }

    fn before_text() -> &'static str {
        "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-8191
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383
c3 127.0.0.1:7002@17002 slave a1 0 0 1 connected"
    }
}
