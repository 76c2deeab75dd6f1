//! The conformance suite on the Redis store: each scenario on its own
//! `redis-server`, time driven by hand.

mod conformance;
use waitroom_testkit::redis as redis_server;

use std::sync::Arc;

use redis_server::RedisServer;
use waitroom::store::redis::RedisStore;
use waitroom::words::clock::ManualClock;

async fn redis_harness() -> conformance::Harness {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_767_225_600_000);
    let store = Arc::new(
        RedisStore::connect(&server.url(), Some(Arc::new(clock.clone())))
            .await
            .expect("the store connects"),
    );
    conformance::Harness {
        store: store.clone(),
        sale: store,
        clock,
        _backing: Some(Box::new(server)),
    }
}

conformance_suite!(redis_harness);
