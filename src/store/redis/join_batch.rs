//! Joins to one room go to Redis together: those that reach this node while
//! its call for the room's last joins is on its way wait for it, then go as
//! one call of `lua/join.lua`, which answers each as it would be answered
//! alone. Redis then runs a call's fixed part (the script's start, the
//! room's read, the time, the pass sweep) once for all of them, which is
//! most of what a lone join costs it. Nothing waits for a batch to fill: a
//! join that finds no call on its way goes at once.
//!
//! Written here because what is batched is one script's arguments, which
//! no Redis client batches for us (a pipeline saves round trips, not
//! Redis's work per call).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use redis::{RedisError, Script};
use tokio::sync::oneshot;

use super::connection::{Effect, Link, ScriptCall, unexpected};
use super::keys::{channel, room_keys};
use crate::words::RoomId;
use crate::words::clock::SharedClock;

/// The values each join gives the script, in one argument, each but the
/// last ended by a newline (`read_join` in `lua/join.lua`): one argument
/// per join, not one per value, since Redis makes a string of each.
pub(super) const JOIN_FIELDS: usize = 12;

/// What a join's reply starts with when the script refused it, before the
/// refusal's code and detail (a place, JSON, starts with `{`).
pub(super) const REFUSED: &str = "!";

/// The most joins one call carries: a call holds Redis for its whole run,
/// so a long queue goes as several calls, other commands between them.
pub(super) const MOST_PER_CALL: usize = 64;

/// One join as the script reads it: its fields, the last (the known user,
/// which may hold any character) the only one that may hold a newline.
pub(super) struct Join {
    pub fields: [String; JOIN_FIELDS],
}

impl Join {
    fn packed(&self) -> String {
        debug_assert!(
            self.fields[..JOIN_FIELDS - 1]
                .iter()
                .all(|field| !field.contains('\n'))
        );
        self.fields.join("\n")
    }
}

/// The script's answer for one join: the place (JSON) or its refusal
/// (`!` and the refusal's code), or the error the whole call failed with.
type Reply = Result<String, RedisError>;

type Waiting = (Join, oneshot::Sender<Reply>);

pub(super) struct JoinBatches {
    link: Arc<Link>,
    script: Script,
    clock: Option<SharedClock>,
    /// The joins waiting per room whose call is on its way; a room is here
    /// exactly while a task sends its joins.
    rooms: Mutex<HashMap<RoomId, Vec<Waiting>>>,
}

impl JoinBatches {
    pub(super) fn new(link: Arc<Link>, script: Script, clock: Option<SharedClock>) -> Arc<Self> {
        Arc::new(Self {
            link,
            script,
            clock,
            rooms: Mutex::new(HashMap::new()),
        })
    }

    /// Sends `join` with the others of its room, and waits for its answer.
    pub(super) async fn join(self: &Arc<Self>, room: &RoomId, join: Join) -> Reply {
        let (answer, answered) = oneshot::channel();
        let idle = {
            let mut rooms = self.rooms.lock();
            match rooms.get_mut(room) {
                Some(waiting) => {
                    waiting.push((join, answer));
                    false
                }
                None => {
                    rooms.insert(room.clone(), vec![(join, answer)]);
                    true
                }
            }
        };
        if idle {
            // A task of its own, not this caller's: a caller that goes away
            // (its client did) must not leave the room's queue unsent.
            tokio::spawn(self.clone().send_all(room.clone()));
        }
        answered
            .await
            .unwrap_or_else(|_| Err(unexpected("a join's call ended without its answer")))
    }

    /// Sends the room's waiting joins, a call at a time, until none wait.
    async fn send_all(self: Arc<Self>, room: RoomId) {
        let mut sending = Sending {
            batches: &self,
            room: &room,
            done: false,
        };
        loop {
            let batch: Vec<Waiting> = {
                let mut rooms = self.rooms.lock();
                let Some(waiting) = rooms.get_mut(&room) else {
                    sending.done = true;
                    return;
                };
                if waiting.is_empty() {
                    rooms.remove(&room);
                    sending.done = true;
                    return;
                }
                let count = waiting.len().min(MOST_PER_CALL);
                waiting.drain(..count).collect()
            };
            let (joins, answers): (Vec<Join>, Vec<_>) = batch.into_iter().unzip();
            match self.send(&room, &joins).await {
                Ok(replies) if replies.len() == answers.len() => {
                    for (answer, reply) in answers.into_iter().zip(replies) {
                        let _ = answer.send(Ok(reply));
                    }
                }
                Ok(_) => {
                    for answer in answers {
                        let _ = answer.send(Err(unexpected(
                            "the join script answered another number of joins",
                        )));
                    }
                }
                Err(error) => {
                    for answer in answers {
                        let _ = answer.send(Err(error.clone()));
                    }
                }
            }
        }
    }

    async fn send(&self, room: &RoomId, joins: &[Join]) -> Result<Vec<String>, RedisError> {
        let keys = room_keys(room);
        let now = self
            .clock
            .as_ref()
            .map(|clock| clock.now_ms().to_string())
            .unwrap_or_default();
        let args = std::iter::once(now)
            .chain(joins.iter().map(Join::packed))
            .collect();
        let channel = channel(room);
        let reply = self
            .link
            .run(ScriptCall {
                script: &self.script,
                keys: &keys,
                args,
                channel: Some(&channel),
                effect: Effect::Writes,
            })
            .await?;
        Ok(redis::from_redis_value(reply)?)
    }
}

/// Takes the room out of the queue if its sending task ends any other way
/// than by finding it empty (a panic): its waiting joins are then answered
/// with an error, and the next join starts a new task instead of waiting
/// for one that is gone.
struct Sending<'a> {
    batches: &'a JoinBatches,
    room: &'a RoomId,
    done: bool,
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.batches.rooms.lock().remove(self.room);
        }
    }
}
