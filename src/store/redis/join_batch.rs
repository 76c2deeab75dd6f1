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
use redis::{RedisError, Script, Value};
use tokio::sync::oneshot;

use super::connection::{
    Effect, Link, RESPONSE_TIMEOUT, ScriptCall, WAIT_TIMEOUT, timed_out, unexpected,
};
use super::keys::{channel, room_keys};
use super::replies::{JoinShared, WireJoinShared, read};
use crate::words::RoomId;
use crate::words::clock::SharedClock;

/// The longest a call of joins may take: its connection made, the script
/// loaded and run (each held to [`RESPONSE_TIMEOUT`]), the replicas waited
/// for.
const CALL_PATIENCE: std::time::Duration = RESPONSE_TIMEOUT
    .saturating_mul(3)
    .saturating_add(WAIT_TIMEOUT);

/// What a join's reply starts with when the script refused it, before the
/// refusal's code and detail (a place, JSON, starts with `{`).
pub(super) const REFUSED: &str = "!";

/// The most joins one call carries: a call holds Redis for its whole run,
/// so a long queue goes as several calls, other commands between them.
pub(super) const MOST_PER_CALL: usize = 64;

/// The histogram of how many joins each call carried: how much of a
/// call's fixed cost a node's joins share (a call of one pays it alone).
pub const JOINS_PER_CALL: &str = "waitroom_redis_joins_per_call";

/// Declares a join's values once: the struct the node fills, their order
/// in the one argument each join is sent as (`Join::packed`), and the Lua
/// that reads them back by name (`prelude::join_reader`).
macro_rules! join_values {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        /// One join, its values as the script reads them: the options it
        /// has, `""` for the others.
        #[derive(Default)]
        pub(super) struct Join {
            $($(#[$doc])* pub $field: String),*
        }

        /// The names of a join's values, in the order they are sent.
        pub(super) const JOIN_VALUES: &[&str] = &[$(stringify!($field)),*];

        impl Join {
            fn values(&self) -> Vec<&str> {
                vec![$(self.$field.as_str()),*]
            }
        }
    };
}

join_values! {
    visitor,
    /// `1` when the node made the visitor for this join (`JoinOptions::fresh`):
    /// the script need not look for a record of theirs.
    fresh,
    /// Joins per minute per client address (`client`: its block).
    per_minute,
    /// Until when the proof-of-work solution `pow_id` holds (ms), and the
    /// difficulty its challenge was made at.
    pow_until,
    commitment,
    entry,
    key,
    pow_difficulty,
    code,
    /// The client's address, for the room's bypass networks.
    address,
    client,
    /// The client's budget of wrong codes, `<per minute> <block>`.
    code_guesses,
    pow_id,
    /// The known user: it may hold any character, so it comes last.
    user,
}

impl Join {
    /// The join as one argument: its values in [`JOIN_VALUES`]' order,
    /// each but the last ended by a newline. A join without options (the
    /// commonest by far) is its [`SHORT_FORM`] values alone, in that
    /// order, each after a newline but the first, the empty ones at the
    /// end left out: the script reads up to three values where it would
    /// read fourteen.
    fn packed(&self) -> String {
        let values = self.values();
        let without_options = JOIN_VALUES
            .iter()
            .zip(&values)
            .all(|(name, value)| value.is_empty() || SHORT_FORM.contains(name));
        if without_options {
            let mut short: Vec<&str> = SHORT_FORM
                .iter()
                .map(|name| {
                    let at = JOIN_VALUES.iter().position(|value| value == name);
                    at.map_or("", |at| values[at])
                })
                .collect();
            while short.len() > 1 && short.last() == Some(&"") {
                short.pop();
            }
            return short.join("\n");
        }
        debug_assert!(
            values[..values.len() - 1]
                .iter()
                .all(|value| !value.contains('\n'))
        );
        values.join("\n")
    }
}

/// The values a join without options is sent with, in this order.
pub(super) const SHORT_FORM: [&str; 3] = ["visitor", "fresh", "address"];

/// The script's answer for one join.
pub(super) enum Joined {
    /// A new place at the back of the general line: its join number, its
    /// position (everyone waiting once it joined) and the line's version;
    /// the rest is what the call's places share.
    AtTheBack {
        seq: u64,
        position: u64,
        version: u64,
        shared: Arc<JoinShared>,
    },
    /// Any other place: JSON, as `place()` in `lua/lib.lua` makes it.
    Place(String),
    /// The refusal's code and detail.
    Refused(String),
}

/// The script's answer for one join, or the error the whole call failed with.
type Reply = Result<Joined, RedisError>;

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
            metrics::histogram!(JOINS_PER_CALL).record(joins.len() as f64);
            // Bounded: the room's next joins wait for this call, so one that
            // never ends would leave them waiting for good.
            let sent = tokio::time::timeout(CALL_PATIENCE, self.send(&room, &joins))
                .await
                .unwrap_or_else(|_| Err(timed_out("a call of the room's joins")));
            match sent {
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

    async fn send(&self, room: &RoomId, joins: &[Join]) -> Result<Vec<Joined>, RedisError> {
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
        read_answers(reply)
    }
}

/// The script's answers: what the call's places share, then each join's.
fn read_answers(reply: Value) -> Result<Vec<Joined>, RedisError> {
    let Value::Array(answers) = reply else {
        return Err(unexpected("the join script answered no list"));
    };
    let mut answers = answers.into_iter();
    let shared: String = redis::from_redis_value(answers.next().unwrap_or(Value::Nil))?;
    let shared = read::<WireJoinShared>(&shared)
        .map_err(|_| unexpected("the join script's shared answer is unreadable"))?;
    let back = shared.back;
    let shared = Arc::new(shared.into_shared());
    answers
        .map(|answer| match answer {
            Value::Int(seq) => {
                let (Some((offset, version)), Ok(seq)) = (back, u64::try_from(seq)) else {
                    return Err(unexpected("a join number without what it stands for"));
                };
                let position = seq
                    .checked_add_signed(offset)
                    .ok_or_else(|| unexpected("a place at the back with no position"))?;
                Ok(Joined::AtTheBack {
                    seq,
                    position,
                    version,
                    shared: shared.clone(),
                })
            }
            numbers @ Value::Array(_) => {
                let [seq, position, version] = redis::from_redis_value::<[u64; 3]>(numbers)?;
                Ok(Joined::AtTheBack {
                    seq,
                    position,
                    version,
                    shared: shared.clone(),
                })
            }
            text => {
                let text: String = redis::from_redis_value(text)?;
                Ok(match text.strip_prefix(REFUSED) {
                    Some(refusal) => Joined::Refused(refusal.to_owned()),
                    None => Joined::Place(text),
                })
            }
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::{Order, PlaceState, VisitorId};

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    const SHARED: &str = r#"{"rate":"2.5","tick_at":"1000","paused":"0","facts":{"queue_method":"fifo","stock_left":"","sold_out":false,"opens_at":"","target_url":"https:\/\/x.example\/","notice":"hi","abandon_after_s":300}}"#;

    #[test]
    fn a_place_at_the_back_is_three_numbers_and_the_calls_shared_part() {
        let answers = read_answers(Value::Array(vec![
            bulk(SHARED),
            Value::Array(vec![Value::Int(12), Value::Int(4), Value::Int(7)]),
            bulk("!NOTACCEPTING"),
            bulk(r#"{"state":"l"}"#),
        ]))
        .unwrap();
        let [at_the_back, refused, other] = <[Joined; 3]>::try_from(answers).ok().unwrap();
        let Joined::AtTheBack {
            seq,
            position,
            version,
            shared,
        } = at_the_back
        else {
            panic!("not a place at the back");
        };
        let visitor = VisitorId(9);
        let place = shared.place_at_the_back(visitor, seq, position, version);
        assert_eq!(place.visitor, visitor);
        assert!(matches!(
            place.state,
            PlaceState::Waiting {
                order: Order::Joined(12),
                position: 4
            }
        ));
        assert_eq!((place.line.version, place.line.waiting), (7, 4));
        assert_eq!(place.line.rate_per_s, Some(2.5));
        assert_eq!(place.line.tick_at, Some(1000));
        assert_eq!(place.facts.notice.as_deref(), Some("hi"));
        assert_eq!(place.facts.abandon_after_s, 300);
        assert!(matches!(refused, Joined::Refused(r) if r == "NOTACCEPTING"));
        assert!(matches!(other, Joined::Place(p) if p == r#"{"state":"l"}"#));
    }

    #[test]
    fn a_place_at_the_back_may_be_its_join_number_alone() {
        let shared = SHARED.replace(r#""paused":"0","#, r#""paused":"0","back":[-3,7],"#);
        let answers = read_answers(Value::Array(vec![
            bulk(&shared),
            Value::Int(12),
            Value::Array(vec![Value::Int(13), Value::Int(11), Value::Int(8)]),
        ]))
        .unwrap();
        let [alone, whole] = <[Joined; 2]>::try_from(answers).ok().unwrap();
        assert!(matches!(
            alone,
            Joined::AtTheBack {
                seq: 12,
                position: 9,
                version: 7,
                ..
            }
        ));
        assert!(matches!(
            whole,
            Joined::AtTheBack {
                seq: 13,
                position: 11,
                version: 8,
                ..
            }
        ));
        // A join number without the shared part's `back` stands for nothing.
        assert!(read_answers(Value::Array(vec![bulk(SHARED), Value::Int(12)])).is_err());
    }

    #[test]
    fn an_answer_that_is_not_the_scripts_is_an_error_not_a_place() {
        assert!(read_answers(bulk("{}")).is_err());
        assert!(read_answers(Value::Array(vec![bulk("not json")])).is_err());
        assert!(
            read_answers(Value::Array(vec![
                bulk(SHARED),
                Value::Array(vec![Value::Int(1), Value::Int(2)]),
            ]))
            .is_err()
        );
    }

    #[test]
    fn a_join_without_options_is_its_visitor_and_address_alone() {
        let mut join = Join {
            visitor: "ab12".into(),
            ..Join::default()
        };
        assert_eq!(join.packed(), "ab12");
        join.address = "4:7f000001".into();
        assert_eq!(join.packed(), "ab12\n\n4:7f000001");
        join.fresh = "1".into();
        assert_eq!(join.packed(), "ab12\n1\n4:7f000001");
        join.address = String::new();
        assert_eq!(join.packed(), "ab12\n1");
        join.address = "4:7f000001".into();
        join.user = "user\nwith a newline".into();
        assert_eq!(
            join.packed(),
            format!(
                "ab12\n1{}4:7f000001{}user\nwith a newline",
                "\n".repeat(8),
                "\n".repeat(4)
            )
        );
        let code_only = Join {
            visitor: "ab12".into(),
            code: "c0de".into(),
            ..Join::default()
        };
        assert_eq!(
            code_only.packed(),
            format!("ab12{}c0de{}", "\n".repeat(8), "\n".repeat(5))
        );
    }
}
