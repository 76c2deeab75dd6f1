//! The conformance suite on a local three-master Redis Cluster, and room
//! events over sharded pub/sub.

use crate::conformance;
use waitroom_testkit::redis as redis_server;

use std::sync::Arc;
use std::time::Duration;

use redis_server::RedisCluster;
use waitroom::store::redis::RedisStore;
use waitroom::store::{Store, StoreExt};
use waitroom::words::clock::ManualClock;
use waitroom::words::{RoomConfig, RoomEvent, RoomId, StoreEvent, VisitorId};

async fn cluster_harness() -> conformance::Harness {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let clock = ManualClock::new(1_767_225_600_000);
    let store = Arc::new(
        RedisStore::connect(&cluster.url(), Some(Arc::new(clock.clone())))
            .await
            .expect("the store connects to the cluster"),
    );
    conformance::Harness {
        store: store.clone(),
        sale: store,
        clock,
        _backing: Some(Box::new(cluster)),
    }
}

conformance_suite!(cluster_harness);

#[tokio::test]
async fn room_events_reach_every_node_over_sharded_channels() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let clock = ManualClock::new(1_767_225_600_000);
    let url = cluster.url();
    let connect = || RedisStore::connect(&url, Some(Arc::new(clock.clone())));
    let (node_a, node_b) = (connect().await.unwrap(), connect().await.unwrap());
    // Rooms spread over the slots of all three masters.
    let rooms: Vec<RoomId> = (0..6)
        .map(|i| RoomId::parse(&format!("room-{i}")).unwrap())
        .collect();
    let mut events = node_b.subscribe();
    for room in &rooms {
        let mut one_per_tick = RoomConfig::new("R", "/x");
        one_per_tick.admit_per_tick = 1; // the first join passes through, the second waits
        node_a
            .create_room(room.clone(), one_per_tick)
            .await
            .unwrap();
        node_b.watch(room).await.unwrap();
        node_a.join(room, VisitorId::random()).await.unwrap();
        node_a.join(room, VisitorId::random()).await.unwrap();
    }
    clock.advance_ms(5_000);
    for room in &rooms {
        assert!(node_a.tick(room).await.unwrap().ran.is_some());
        assert!(
            node_b.tick(room).await.unwrap().ran.is_none(),
            "a tick runs once across nodes"
        );
    }
    let mut ticked = std::collections::HashSet::new();
    while ticked.len() < rooms.len() {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("every room's tick reaches node B")
            .unwrap();
        if let StoreEvent::Room(RoomEvent::Tick { room, admitted, .. }) = event {
            assert_eq!(admitted.len(), 1);
            ticked.insert(room);
        }
    }
}
