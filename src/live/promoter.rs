//! The promoter: ticks every room and keeps this node's visitors present.
//! It runs on every node; the store decides whether a tick is due, so nodes
//! ticking together admit once and no node is special.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::hub::Hub;
use super::tasks::Tasks;
use crate::store::{Store, StoreError, TickReport};
use crate::words::RoomId;

/// How often each room is asked whether a tick is due: the most a tick can
/// be late.
const POLL_EVERY: Duration = Duration::from_millis(50);
/// How often this node tells the store its socket holders are still here;
/// well inside the smallest allowed `abandon_after_s` (15 s).
const PRESENCE_EVERY: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct Promoter {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
}

impl Promoter {
    pub fn new(store: Arc<dyn Store>, hub: Arc<Hub>) -> Self {
        Self { store, hub }
    }

    /// Runs every room's tick that is due now.
    pub async fn tick_all(&self) -> Result<Vec<(RoomId, TickReport)>, StoreError> {
        let mut reports = Vec::new();
        for room in self.store.room_ids().await? {
            let started = Instant::now();
            match self.store.tick(&room).await {
                Ok(Some(report)) => {
                    let labels = [("room", room.to_string())];
                    metrics::histogram!("waitroom_tick_seconds")
                        .record(started.elapsed().as_secs_f64());
                    metrics::gauge!("waitroom_waiting", &labels).set(report.waiting as f64);
                    metrics::gauge!("waitroom_active", &labels).set(report.active as f64);
                    metrics::counter!("waitroom_admitted_total", &labels)
                        .increment(report.admitted);
                    if report.admitted > 0 || report.abandoned > 0 {
                        tracing::debug!(%room, admitted = report.admitted, abandoned = report.abandoned, waiting = report.waiting, "tick");
                    }
                    reports.push((room, report));
                }
                Ok(None) | Err(StoreError::RoomNotFound(_)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(reports)
    }

    /// Marks every visitor with a socket on this node present, one batch per room.
    pub async fn refresh_presence(&self) {
        for (room, visitors) in self.hub.registry().present_visitors() {
            if visitors.is_empty() {
                continue;
            }
            match self.store.touch(&room, &visitors).await {
                Ok(()) => {}
                Err(StoreError::RoomNotFound(_)) => self.hub.room_lost(&room),
                Err(error) => tracing::warn!(%room, %error, "could not refresh presence"),
            }
        }
    }

    pub async fn run(self, tasks: Tasks) {
        let shutdown = tasks.shutdown_token();
        let mut ticks = tokio::time::interval(POLL_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut presence = tokio::time::interval(PRESENCE_EVERY);
        presence.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // Said once when ticks start failing and once when they recover, not
        // twenty times a second while the store is away.
        let mut failing = false;
        loop {
            tokio::select! {
                _ = ticks.tick() => match self.tick_all().await {
                    Ok(_) if failing => {
                        failing = false;
                        tracing::info!("ticks are running again");
                    }
                    Ok(_) => {}
                    Err(error) if !failing => {
                        failing = true;
                        tracing::warn!(%error, "ticks are failing; retrying until the store answers");
                    }
                    Err(_) => {}
                },
                _ = presence.tick() => self.refresh_presence().await,
                () = shutdown.cancelled() => break,
            }
        }
    }
}
