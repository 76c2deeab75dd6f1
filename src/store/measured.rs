//! Every store call, measured alike on every store: how long each
//! operation took (`waitroom_store_op_seconds{store, op}`), whether the
//! store answered at all (`waitroom_store_up{store}`), and the answers no
//! version of a store gives (`waitroom_store_errors_total{kind="unexpected"}`;
//! the Redis store counts its outages itself, by kind, where it can tell a
//! timeout from a lost connection: see `redis::connection::failure`).
//!
//! A wrapper rather than a timer in each store, so that the two stores are
//! measured the same way (the whole call, waits included) and a third would
//! be too. Labels are the store's name and the operation's (`Operation::NAME`):
//! a bounded set, and a new operation is measured with no line here.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::{SaleStore, Store, StoreError};
use crate::words::op::{Answer, Op, SaleAnswer, SaleOp};
use crate::words::sale::SaleError;
use crate::words::{RoomId, StoreEvent};

/// The metric every store's failures are counted in, by `store` and `kind`.
pub const STORE_ERRORS: &str = "waitroom_store_errors_total";
const OP_SECONDS: &str = "waitroom_store_op_seconds";
const UP: &str = "waitroom_store_up";

/// How a call ended, as the metrics see it.
enum Outcome {
    /// The store answered (a refusal is an answer).
    Answered,
    /// The store could not be reached or did not answer in time.
    Unavailable,
    /// An answer no version of the store gives.
    Unexpected,
}

trait Judged {
    fn outcome(&self) -> Outcome;
}

impl<T> Judged for Result<T, StoreError> {
    fn outcome(&self) -> Outcome {
        match self {
            Err(StoreError::Unavailable(_)) => Outcome::Unavailable,
            Err(StoreError::Unexpected(_)) => Outcome::Unexpected,
            _ => Outcome::Answered,
        }
    }
}

impl<T> Judged for Result<T, SaleError> {
    fn outcome(&self) -> Outcome {
        match self {
            Err(SaleError::Unavailable(_)) => Outcome::Unavailable,
            _ => Outcome::Answered,
        }
    }
}

/// Times `call` as `op` on the store called `store` and notes its outcome.
async fn measure<R: Judged>(
    store: &'static str,
    op: &'static str,
    call: impl Future<Output = R>,
) -> R {
    let started = Instant::now();
    let answer = call.await;
    metrics::histogram!(OP_SECONDS, "store" => store, "op" => op)
        .record(started.elapsed().as_secs_f64());
    match answer.outcome() {
        Outcome::Answered => metrics::gauge!(UP, "store" => store).set(1.0),
        Outcome::Unavailable => metrics::gauge!(UP, "store" => store).set(0.0),
        Outcome::Unexpected => {
            metrics::gauge!(UP, "store" => store).set(1.0);
            metrics::counter!(STORE_ERRORS, "store" => store, "kind" => "unexpected").increment(1);
        }
    }
    answer
}

/// Registers the error counter of each `kinds` at zero, so that an alert on
/// its increase sees the first error too (a series that appears at 1 has
/// no increase to show).
fn register_error_kinds(store: &'static str, kinds: &[&'static str]) {
    for kind in kinds {
        metrics::counter!(STORE_ERRORS, "store" => store, "kind" => *kind).increment(0);
    }
}

/// A store whose every call is measured (see the module's documentation).
pub struct Measured<S: ?Sized> {
    inner: Arc<S>,
    name: &'static str,
}

impl Measured<dyn Store> {
    pub fn store(inner: Arc<dyn Store>) -> Arc<dyn Store> {
        let name = inner.name();
        register_error_kinds(name, inner.failure_kinds());
        register_error_kinds(name, &["unexpected"]);
        metrics::gauge!(UP, "store" => name).set(1.0);
        Arc::new(Self { inner, name })
    }
}

impl Measured<dyn SaleStore> {
    /// `name`: the admission store's, as the sale lives in the same store.
    pub fn sale(inner: Arc<dyn SaleStore>, name: &'static str) -> Arc<dyn SaleStore> {
        Arc::new(Self { inner, name })
    }
}

#[async_trait]
impl Store for Measured<dyn Store> {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn apply(&self, op: Op) -> Result<Answer, StoreError> {
        measure(self.name, op.name(), self.inner.apply(op)).await
    }

    fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.inner.subscribe()
    }

    async fn watch(&self, room: &RoomId) -> Result<(), StoreError> {
        measure(self.name, "watch", self.inner.watch(room)).await
    }
}

#[async_trait]
impl SaleStore for Measured<dyn SaleStore> {
    async fn apply(&self, op: SaleOp) -> Result<SaleAnswer, SaleError> {
        measure(self.name, op.name(), self.inner.apply(op)).await
    }
}
