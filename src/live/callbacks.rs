//! The sender of notifications (design rule 16; api.md, "Step away:
//! notifications"): this node's side of the rooms' outboxes. It owns when
//! a room's events are claimed, sent to the room's webhook and by web
//! push, retried with backoff under the same `id`, held against takeover
//! while retried, and settled (delivered, gone or given up).
//!
//! Idle rooms cost nothing (rule 13): the sender learns that a room has
//! events from the promoter's tick answers (`Tick::outbox`, noted with
//! [`Callbacks::note`]); only then does a worker for that room run, asking
//! the store for the room's events about once a second until the room has
//! none left for this node, then it ends. Every node ticks every open room
//! it knows, so events a dead node left behind are noted on another node,
//! which claims them once their holder has been silent for the takeover
//! time.
//!
//! Timing decisions (when a retry is due, when an event is given up) follow
//! the store's clock ([`SharedClock`]), so tests drive them; waiting
//! between passes is tokio's.
//!
//! Logs name the room, the event's id, its kind and the outcome: never the
//! contact, the push endpoint, the body or the resume code.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use hyper::Method;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::outbound::{Call, Outbound};
use super::tasks::Tasks;
use super::webhook::{self, Delivery};
use crate::store::{Store, StoreError, StoreExt};
use crate::words::clock::{Millis, SharedClock};
use crate::words::credentials::Credentials;
use crate::words::notify::{EventBody, OutboxEvent, RETRY_FOR_MS};
use crate::words::op::{ClaimEvents, HoldEvents, SettleEvents};
use crate::words::push::{PushHosts, PushOutcome, push_outcome, push_request};
use crate::words::{RoomId, VisitorId};

/// The counter of notifications, by `room`, `kind` and `outcome`
/// (`delivered`, `retried`, `given_up`, `gone`).
pub const NOTIFICATIONS_TOTAL: &str = "waitroom_notifications_total";

/// How often a room with events is asked for them.
const CLAIM_EVERY_MS: Millis = 1_000;
/// Events claimed at once.
const CLAIM_LIMIT: usize = 50;
/// Attempts under way at once in one room.
const CONCURRENCY: usize = 16;
/// The first retry's wait, doubled at each retry up to [`BACKOFF_CAP_MS`].
const BACKOFF_MS: Millis = 1_000;
const BACKOFF_CAP_MS: Millis = 20_000;
/// How long a room's webhook settings are used before being read again.
const CONFIG_FRESH_MS: Millis = 5_000;
/// The longest a worker sleeps between passes.
const PASS_EVERY: Duration = Duration::from_secs(1);

/// What the sender needs; built once at start-up.
pub struct CallbacksParts {
    pub store: Arc<dyn Store>,
    pub clock: SharedClock,
    pub credentials: Arc<Credentials>,
    pub outbound: Outbound,
    pub push_hosts: PushHosts,
    pub tasks: Tasks,
    /// Silence after which another node takes an event over.
    pub takeover_ms: u64,
}

/// This node's sender: cheap to share; [`Callbacks::note`] is all the
/// promoter calls.
pub struct Callbacks {
    shared: Arc<Shared>,
    /// Rooms with a worker running, and whether they were noted since the
    /// worker last looked.
    workers: Mutex<HashMap<RoomId, Arc<Worker>>>,
    warned_no_public_url: AtomicBool,
}

struct Shared {
    store: Arc<dyn Store>,
    clock: SharedClock,
    credentials: Arc<Credentials>,
    outbound: Outbound,
    push_hosts: PushHosts,
    tasks: Tasks,
    takeover_ms: u64,
    /// This node's name as the outbox's consumer: random per start.
    consumer: Arc<str>,
}

#[derive(Default)]
struct Worker {
    noted: AtomicBool,
    wake: Notify,
}

impl Callbacks {
    pub fn new(parts: CallbacksParts) -> Arc<Self> {
        let consumer: Arc<str> = Arc::from(format!("node-{:016x}", rand::random::<u64>()));
        Arc::new(Self {
            shared: Arc::new(Shared {
                store: parts.store,
                clock: parts.clock,
                credentials: parts.credentials,
                outbound: parts.outbound,
                push_hosts: parts.push_hosts,
                tasks: parts.tasks,
                takeover_ms: parts.takeover_ms,
                consumer,
            }),
            workers: Mutex::default(),
            warned_no_public_url: AtomicBool::new(false),
        })
    }

    /// This node's consumer name in the outboxes.
    pub fn consumer(&self) -> &str {
        &self.shared.consumer
    }

    /// A tick answer said `room` has events: its worker looks at once,
    /// started if none runs.
    pub fn note(self: &Arc<Self>, room: &RoomId) {
        let mut workers = self.workers.lock();
        if let Some(worker) = workers.get(room) {
            worker.noted.store(true, Ordering::Release);
            worker.wake.notify_one();
            return;
        }
        if self.shared.tasks.stopping() {
            return;
        }
        if self.shared.credentials.public_url().is_none()
            && !self.warned_no_public_url.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                "no --public-url: notifications carry a relative resume_url, which a webhook or a push cannot open"
            );
        }
        let worker = Arc::new(Worker::default());
        workers.insert(room.clone(), worker.clone());
        let this = self.clone();
        let room = room.clone();
        self.shared.tasks.spawn_job(async move {
            this.clone().work(room, worker).await;
        });
    }

    /// Whether the worker may end: not if it was noted since it last
    /// looked (then it goes on), else it is removed under the lock, so a
    /// later note starts a new one.
    fn may_end(&self, room: &RoomId, worker: &Worker) -> bool {
        let mut workers = self.workers.lock();
        if worker.noted.swap(false, Ordering::AcqRel) {
            return false;
        }
        workers.remove(room);
        true
    }

    fn end(&self, room: &RoomId) {
        self.workers.lock().remove(room);
    }

    /// One room's worker: claims, sends, retries and settles until the room
    /// has nothing left for this node.
    async fn work(self: Arc<Self>, room: RoomId, worker: Arc<Worker>) {
        let shutdown = self.shared.tasks.shutdown_token();
        let mut state = RoomWork::default();
        let mut claim_now = true;
        loop {
            worker.noted.store(false, Ordering::Release);
            match self.shared.pass(&room, &mut state, claim_now).await {
                Ok(()) => {}
                Err(StoreError::RoomNotFound(_) | StoreError::RoomClosed(_)) => {
                    self.end(&room);
                    return;
                }
                Err(error) => {
                    tracing::warn!(%room, %error, "notifications: the outbox could not be read or written; retrying");
                }
            }
            if state.is_done() && self.may_end(&room, &worker) {
                return;
            }
            claim_now = false;
            tokio::select! {
                () = worker.wake.notified() => claim_now = true,
                () = tokio::time::sleep(PASS_EVERY) => {}
                () = shutdown.cancelled() => {
                    self.end(&room);
                    return;
                }
            }
        }
    }
}

/// What a worker keeps of its room between passes.
#[derive(Default)]
struct RoomWork {
    /// Events this node holds, by store entry.
    pending: HashMap<String, Pending>,
    /// Settles the store did not take yet.
    unsettled: Vec<String>,
    gone: Vec<VisitorId>,
    last_claim: Option<Millis>,
    /// The last claim filled its limit: there may be more.
    more: bool,
    webhook: Option<(Millis, Option<Webhook>)>,
}

impl RoomWork {
    fn is_done(&self) -> bool {
        self.pending.is_empty() && self.unsettled.is_empty() && !self.more
    }
}

#[derive(Clone)]
struct Webhook {
    url: String,
    secret: String,
}

struct Pending {
    event: OutboxEvent,
    /// Failed attempts so far.
    failures: u32,
    next_at: Millis,
    webhook_done: bool,
    push_done: bool,
    /// A channel was given up for good (an answer that will never change).
    gave_up: bool,
}

/// What one attempt at one event came to.
enum Attempt {
    /// Every channel meant for it is done.
    Done {
        push_gone: bool,
    },
    Retry,
}

impl Shared {
    async fn pass(
        &self,
        room: &RoomId,
        state: &mut RoomWork,
        claim_now: bool,
    ) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        if claim_now
            || state.more
            || state
                .last_claim
                .is_none_or(|last| now >= last + CLAIM_EVERY_MS)
        {
            let events = self
                .store
                .run(ClaimEvents {
                    room: room.clone(),
                    consumer: self.consumer.clone(),
                    takeover_ms: self.takeover_ms,
                    limit: CLAIM_LIMIT,
                })
                .await?;
            state.last_claim = Some(now);
            state.more = events.len() >= CLAIM_LIMIT;
            for event in events {
                state
                    .pending
                    .entry(event.entry.clone())
                    .or_insert_with(|| Pending {
                        event,
                        failures: 0,
                        next_at: now,
                        webhook_done: false,
                        push_done: false,
                        gave_up: false,
                    });
            }
        }
        let due: Vec<String> = state
            .pending
            .iter()
            .filter(|(_, pending)| pending.next_at <= now)
            .map(|(entry, _)| entry.clone())
            .collect();
        if !due.is_empty() {
            // Retries first held, so that no other node takes them over
            // while this one is still at them.
            let retries: Vec<String> = due
                .iter()
                .filter(|entry| state.pending[*entry].failures > 0)
                .cloned()
                .collect();
            if !retries.is_empty() {
                let kept = self
                    .store
                    .run(HoldEvents {
                        room: room.clone(),
                        consumer: self.consumer.clone(),
                        entries: retries.clone(),
                    })
                    .await?;
                for lost in retries.iter().filter(|entry| !kept.contains(entry)) {
                    // Another node took it over: it is theirs now.
                    state.pending.remove(lost);
                }
            }
            let webhook = self.webhook(room, state, now).await?;
            let mut attempts: Vec<Pending> = due
                .iter()
                .filter_map(|entry| state.pending.remove(entry))
                .collect();
            // Held while under way: a pass can outlast the takeover time
            // (a slow receiver, a claim's worth of events queued behind
            // CONCURRENCY), and a living node's events are not to be
            // taken over.
            let under_way: Vec<String> = attempts
                .iter()
                .map(|pending| pending.event.entry.clone())
                .chain(state.pending.keys().cloned())
                .collect();
            let sending = futures_util::stream::iter(attempts.drain(..))
                .map(|mut pending| {
                    let webhook = webhook.clone();
                    async move {
                        let attempt = self
                            .attempt(room, &mut pending, webhook.as_ref(), now)
                            .await;
                        (pending, attempt)
                    }
                })
                .buffer_unordered(CONCURRENCY)
                .collect::<Vec<(Pending, Attempt)>>();
            let results = self.holding(room, &under_way, sending).await;
            for (mut pending, attempt) in results {
                let event = &pending.event;
                let kind = event.kind.to_string();
                match attempt {
                    Attempt::Done { push_gone } => {
                        let outcome = if pending.gave_up {
                            "given_up"
                        } else if push_gone {
                            "gone"
                        } else {
                            "delivered"
                        };
                        count(room, &kind, outcome);
                        if pending.gave_up {
                            tracing::warn!(%room, event = %event.id, kind, outcome, "notification given up");
                        } else {
                            tracing::info!(%room, event = %event.id, kind, outcome, attempts = pending.failures + 1, "notification sent");
                        }
                        if push_gone {
                            state.gone.push(event.visitor);
                        }
                        state.unsettled.push(event.entry.clone());
                    }
                    Attempt::Retry if now.saturating_sub(event.at) > RETRY_FOR_MS => {
                        count(room, &kind, "given_up");
                        tracing::warn!(%room, event = %event.id, kind, outcome = "given_up", attempts = pending.failures + 1, "notification given up after its retries");
                        state.unsettled.push(event.entry.clone());
                    }
                    Attempt::Retry => {
                        count(room, &kind, "retried");
                        let backoff = BACKOFF_MS
                            .saturating_mul(1 << pending.failures.min(16))
                            .min(BACKOFF_CAP_MS);
                        pending.failures += 1;
                        pending.next_at = now + backoff;
                        tracing::info!(%room, event = %event.id, kind, outcome = "retried", attempts = pending.failures, retry_in_ms = backoff, "notification not delivered: retrying");
                        state.pending.insert(pending.event.entry.clone(), pending);
                    }
                }
            }
        }
        if !state.unsettled.is_empty() {
            self.store
                .run(SettleEvents {
                    room: room.clone(),
                    entries: state.unsettled.clone(),
                    push_gone: state.gone.clone(),
                })
                .await?;
            state.unsettled.clear();
            state.gone.clear();
        }
        Ok(())
    }

    /// Runs `work`, holding `entries` against takeover every third of the
    /// takeover time until it is done.
    async fn holding<T>(
        &self,
        room: &RoomId,
        entries: &[String],
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let every = Duration::from_millis((self.takeover_ms / 3).max(100));
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => return done,
                () = tokio::time::sleep(every) => {
                    let hold = HoldEvents {
                        room: room.clone(),
                        consumer: self.consumer.clone(),
                        entries: entries.to_vec(),
                    };
                    if let Err(error) = self.store.run(hold).await {
                        tracing::warn!(%room, %error, "notifications: events under way could not be held");
                    }
                }
            }
        }
    }

    /// The room's webhook, read again every few seconds.
    async fn webhook(
        &self,
        room: &RoomId,
        state: &mut RoomWork,
        now: Millis,
    ) -> Result<Option<Webhook>, StoreError> {
        if let Some((read_at, webhook)) = &state.webhook
            && now < read_at + CONFIG_FRESH_MS
        {
            return Ok(webhook.clone());
        }
        let config = self.store.room(room).await?.config;
        let webhook = match (config.notify_webhook_url, config.notify_webhook_secret) {
            (Some(url), Some(secret)) => Some(Webhook {
                url,
                secret: secret.expose().to_owned(),
            }),
            _ => None,
        };
        state.webhook = Some((now, webhook.clone()));
        Ok(webhook)
    }

    /// The resume link of an event: absolute on `--public-url`, else a path.
    fn resume_url(&self, room: &RoomId, event: &OutboxEvent) -> String {
        let code = self
            .credentials
            .resume_code(room, event.visitor, event.kind);
        let path = format!("/rooms/{room}/resume?code={code}");
        match self.credentials.public_url() {
            Some(public) => public.join(&path),
            None => path,
        }
    }

    /// One attempt at the channels of `pending` not yet done.
    async fn attempt(
        &self,
        room: &RoomId,
        pending: &mut Pending,
        webhook: Option<&Webhook>,
        now: Millis,
    ) -> Attempt {
        let Some(reach) = pending.event.reach.clone() else {
            // The place ended: nobody to call.
            return Attempt::Done { push_gone: false };
        };
        let resume_url = self.resume_url(room, &pending.event);
        let mut retry = false;
        let mut push_gone = false;
        match (&reach.contact, webhook) {
            (Some(contact), Some(webhook)) if !pending.webhook_done => {
                let mut body = EventBody::new(room, &pending.event, &resume_url);
                body.contact = Some(contact);
                let body = serde_json::to_vec(&body).expect("an event serializes");
                let delivery = webhook::deliver(
                    &self.outbound,
                    &webhook.url,
                    &webhook.secret,
                    &body,
                    now / 1000,
                )
                .await;
                match delivery {
                    Delivery::Delivered { .. } => pending.webhook_done = true,
                    Delivery::Retry { .. } => retry = true,
                }
            }
            // A contact but no webhook (taken off since): nowhere to send it.
            (Some(_), None) if !pending.webhook_done => {
                pending.webhook_done = true;
                pending.gave_up = true;
            }
            _ => pending.webhook_done = true,
        }
        match &reach.push {
            Some(subscription) if !pending.push_done => {
                let body = EventBody::new(room, &pending.event, &resume_url);
                let payload = serde_json::to_vec(&body).expect("an event serializes");
                match self.push(subscription, &payload, now).await {
                    PushOutcome::Delivered => pending.push_done = true,
                    PushOutcome::Gone => {
                        pending.push_done = true;
                        push_gone = true;
                    }
                    PushOutcome::Retry => retry = true,
                    PushOutcome::KeyRefused | PushOutcome::GiveUp => {
                        pending.push_done = true;
                        pending.gave_up = true;
                    }
                }
            }
            _ => pending.push_done = true,
        }
        if retry {
            Attempt::Retry
        } else {
            Attempt::Done { push_gone }
        }
    }

    /// One push, signed with each VAPID key in turn while the push service
    /// refuses the key. A call with no answer is to be retried.
    async fn push(
        &self,
        subscription: &crate::words::notify::PushSubscription,
        payload: &[u8],
        now: Millis,
    ) -> PushOutcome {
        let subject = self.credentials.public_url().map_or_else(
            || "mailto:waitroom@localhost".to_owned(),
            |url| url.join(""),
        );
        let mut outcome = PushOutcome::KeyRefused;
        for key in self.credentials.vapid_keys() {
            let request =
                match push_request(subscription, &self.push_hosts, key, &subject, payload, now) {
                    Ok(request) => request,
                    Err(error) => {
                        tracing::warn!(%error, "push request could not be made");
                        return PushOutcome::GiveUp;
                    }
                };
            let headers: Vec<(&str, &str)> = request
                .headers
                .iter()
                .map(|(name, value)| (*name, value.as_str()))
                .collect();
            let call = Call {
                method: Method::POST,
                url: request.url.as_str(),
                headers: &headers,
                body: Bytes::from(request.body),
            };
            let sent = self.outbound.send(call, webhook::TIMEOUT).await;
            outcome = match sent.outcome {
                Ok(status) => push_outcome(status),
                Err(why) => {
                    tracing::debug!(%why, "push not delivered: to be retried");
                    PushOutcome::Retry
                }
            };
            if outcome != PushOutcome::KeyRefused {
                return outcome;
            }
        }
        outcome
    }
}

fn count(room: &RoomId, kind: &str, outcome: &'static str) {
    metrics::counter!(
        NOTIFICATIONS_TOTAL,
        "room" => room.to_string(),
        "kind" => kind.to_owned(),
        "outcome" => outcome
    )
    .increment(1);
}
