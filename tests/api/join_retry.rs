//! A join retried with its `Idempotency-Key` after an answer that never
//! came finds the place the first try made: a store that made the join and
//! then lost the answer (as a Redis call that timed out after Redis ran it,
//! or a `WAIT` that failed after the script) leaves no second place that
//! nobody holds, to take an admission and a slot in the cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use waitroom::startup::Stores;
use waitroom::store::{Store, StoreError};
use waitroom::words::clock::ManualClock;
use waitroom::words::op::{Answer, Op};
use waitroom::words::{RoomId, StoreEvent};
use waitroom_testkit::{FetchJson, START_MS, TestApp, error_of, test_settings};

/// A store whose first join is made and its answer then lost.
struct LosesTheFirstJoinsAnswer {
    store: Arc<dyn Store>,
    lost: AtomicBool,
}

#[async_trait]
impl Store for LosesTheFirstJoinsAnswer {
    async fn apply(&self, op: Op) -> Result<Answer, StoreError> {
        let join = matches!(op, Op::Join(_));
        let answer = self.store.apply(op).await?;
        if join && !self.lost.swap(true, Ordering::SeqCst) {
            return Err(StoreError::Unavailable("the answer was lost".into()));
        }
        Ok(answer)
    }
    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.store.subscribe()
    }
    async fn watch(&self, room: &RoomId) -> Result<(), StoreError> {
        self.store.watch(room).await
    }
}

async fn join(app: &TestApp, key: Option<&str>) -> reqwest::Response {
    let mut request = app.http.post(app.url("/api/rooms/line/join"));
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn a_join_retried_with_its_key_finds_the_place_its_lost_answer_made() {
    let clock = ManualClock::new(START_MS);
    let memory = Stores::memory(Arc::new(clock.clone()));
    let stores = Stores {
        admission: Arc::new(LosesTheFirstJoinsAnswer {
            store: memory.admission,
            lost: AtomicBool::new(false),
        }),
        sale: memory.sale,
    };
    let app = TestApp::spawn_with(test_settings(), stores, clock).await;
    app.create_room("line", json!({"paused": true})).await;
    let waiting = || async {
        app.admin(reqwest::Method::GET, "/api/admin/rooms/line")
            .fetch_json()
            .await["stats"]["waiting"]
            .clone()
    };

    let key = "5f0c1d9e-2b7a-4c3e-9a81-6d2f0b4e7c15";
    let (status, code) = error_of(join(&app, Some(key)).await).await;
    assert_eq!((status, code.as_str()), (503, "store_unavailable"));
    assert_eq!(waiting().await, 1, "the join was made all the same");
    let again: Value = join(&app, Some(key)).await.json().await.unwrap();
    assert_eq!(
        (&again["state"], &again["position"]),
        (&json!("waiting"), &json!(1))
    );
    assert_eq!(waiting().await, 1, "the retry found it: no second place");
    let ticket = again["ticket"].as_str().unwrap();
    let status: Value = app.status_api("line", ticket).await.json().await.unwrap();
    assert_eq!(status["position"], 1);

    // Another key, or none, is another visitor.
    let other: Value = join(&app, Some("another-key")).await.json().await.unwrap();
    assert_eq!(other["position"], 2);
    let keyless: Value = join(&app, None).await.json().await.unwrap();
    assert_eq!(keyless["position"], 3);
    let (status, code) = error_of(join(&app, Some("")).await).await;
    assert_eq!((status, code.as_str()), (400, "invalid_idempotency_key"));
    assert_eq!(waiting().await, 3);
}
