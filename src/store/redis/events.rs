//! The room events the scripts publish, read: JSON with a format version
//! (`v`), written by `room_event` in `lua/lib.lua`; and the pipe-delimited
//! events of the releases before it, so that during a rolling upgrade a
//! node of this release hears the nodes not yet upgraded. (A node of an
//! earlier release cannot read the JSON ones: until it is replaced its
//! sockets move only when they are read again; nothing stored is lost.
//! See docs/src/upgrading.md.)

use std::sync::Arc;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny};

use crate::words::DEFAULT_ABANDON_AFTER_S;
use crate::words::clock::Moment;
use crate::words::{Admission, LineSummary, Order, QueueMethod, RoomEvent, RoomFacts, RoomId};

/// The newest event format this node reads, and the one the scripts write
/// (given to them by `prelude.rs`).
pub(super) const EVENT_FORMAT: u32 = 1;

/// A place in the order as the scripts write it: the join sequence number,
/// `d<first 16 hex of the draw key>-<entry>`, or in the priority line
/// `p<priority>-<seq>` (joined) or `p<priority>-0-<first 16 hex of the draw
/// key>` (drawn).
pub(super) fn parse_order(text: &str) -> Option<Order> {
    if let Some(priority) = text.strip_prefix('p') {
        let mut parts = priority.split('-');
        let (priority, seq) = (parts.next()?, parts.next()?);
        let key = match parts.next() {
            Some(key) => u64::from_str_radix(key, 16).ok()?,
            None => 0,
        };
        return Some(Order::Priority {
            priority: priority.parse().ok()?,
            seq: seq.parse().ok()?,
            key,
        });
    }
    match text.strip_prefix('d') {
        Some(drawn) => {
            let (key, entry) = drawn.split_once('-')?;
            Some(Order::Drawn {
                key: u64::from_str_radix(key, 16).ok()?,
                entry: entry.parse().ok()?,
            })
        }
        None => text.parse().ok().map(Order::Joined),
    }
}

/// The room-wide part the scripts send: version, waiting, rate, tick time, paused.
pub(super) fn summary(
    version: u64,
    waiting: u64,
    rate: &str,
    tick_at: &str,
    paused: &str,
) -> LineSummary {
    LineSummary {
        version,
        waiting,
        rate_per_s: rate.parse().ok().filter(|r: &f64| *r > 0.0),
        paused: paused == "1",
        tick_at: tick_at.parse().ok(),
    }
}

/// A room event, whichever format it came in; `None` if unreadable.
pub(super) fn parse_event(room: RoomId, payload: &str) -> Option<RoomEvent> {
    if payload.starts_with('{') {
        parse_json_event(room, payload)
    } else {
        parse_pipe_event(room, payload)
    }
}

#[derive(Deserialize)]
struct Format {
    v: u32,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum WireEvent {
    Tick {
        line: WireLine,
        #[serde(deserialize_with = "list")]
        admitted: Vec<WireAdmission>,
        #[serde(deserialize_with = "list")]
        departed: Vec<String>,
    },
    Left {
        line: WireLine,
        order: String,
    },
    Entered {
        line: WireLine,
        visitor: String,
        order: String,
        /// '' for a new place.
        from: String,
        group: String,
        position: u64,
    },
    Drawn {
        line: WireLine,
    },
    Configured {
        line: WireLine,
        facts: WireFacts,
    },
    Closed {},
}

/// The line's summary as Lua has it (`line` in `lua/lib.lua`, in events and
/// places alike): the figures, and the room's stored strings for the rest.
#[derive(Deserialize)]
pub(super) struct WireLine {
    version: u64,
    waiting: u64,
    #[serde(default)]
    rate: String,
    #[serde(default)]
    tick_at: String,
    #[serde(default)]
    paused: String,
}

impl WireLine {
    pub(super) fn summary(&self) -> LineSummary {
        summary(
            self.version,
            self.waiting,
            &self.rate,
            &self.tick_at,
            &self.paused,
        )
    }
}

#[derive(Deserialize)]
struct WireAdmission {
    visitor: String,
    order: String,
    admitted_at: u64,
    expires_at: u64,
}

/// The room's facts as Lua has them (`facts` in `lua/lib.lua`).
#[derive(Deserialize)]
pub(super) struct WireFacts {
    queue_method: String,
    #[serde(default)]
    stock_left: String,
    sold_out: bool,
    #[serde(default)]
    opens_at: String,
    target_url: String,
    #[serde(default)]
    notice: String,
    /// Absent from the facts of a node that predates it (a rolling upgrade).
    #[serde(default = "default_abandon_after_s")]
    abandon_after_s: u64,
    /// '' or ms; absent from the facts of a node that predates it.
    #[serde(default)]
    closes_at: String,
}

fn default_abandon_after_s() -> u64 {
    DEFAULT_ABANDON_AFTER_S
}

impl WireFacts {
    /// The queue method, if this node knows it.
    pub(super) fn queue_method(&self) -> Option<QueueMethod> {
        QueueMethod::parse(&self.queue_method)
    }

    pub(super) fn into_facts(self, queue_method: QueueMethod) -> RoomFacts {
        RoomFacts {
            target_url: self.target_url,
            notice: Some(self.notice).filter(|n| !n.is_empty()),
            queue_method,
            stock_left: self.stock_left.parse().ok(),
            sold_out: self.sold_out,
            opens_at: self.opens_at.parse().ok().map(Moment),
            abandon_after_s: self.abandon_after_s,
            closes_at: self.closes_at.parse().ok().map(Moment),
        }
    }
}

/// A list, which Lua's cjson writes as `{}` when it is empty (an empty Lua
/// table is an object as much as an array).
pub(super) fn list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrEmpty<T> {
        List(Vec<T>),
        Empty(IgnoredAny),
    }
    Ok(match ListOrEmpty::deserialize(d)? {
        ListOrEmpty::List(items) => items,
        ListOrEmpty::Empty(_) => Vec::new(),
    })
}

fn parse_json_event(room: RoomId, payload: &str) -> Option<RoomEvent> {
    let format: Format = serde_json::from_str(payload).ok()?;
    if format.v > EVENT_FORMAT {
        return None;
    }
    Some(match serde_json::from_str(payload).ok()? {
        WireEvent::Tick {
            line,
            admitted,
            departed,
        } => RoomEvent::Tick {
            room,
            admitted: admitted
                .iter()
                .map(|a| {
                    Some(Admission {
                        visitor: a.visitor.parse().ok()?,
                        order: parse_order(&a.order)?,
                        admitted_at: a.admitted_at,
                        expires_at: a.expires_at,
                    })
                })
                .collect::<Option<Vec<_>>>()?
                .into(),
            departed: departed
                .iter()
                .map(|d| parse_order(d))
                .collect::<Option<Vec<_>>>()?
                .into(),
            line: line.summary(),
        },
        WireEvent::Left { line, order } => RoomEvent::Left {
            room,
            order: parse_order(&order)?,
            line: line.summary(),
        },
        WireEvent::Entered {
            line,
            visitor,
            order,
            from,
            group,
            position,
        } => RoomEvent::Entered {
            room,
            visitor: visitor.parse().ok()?,
            order: parse_order(&order)?,
            from: if from.is_empty() {
                None
            } else {
                Some(parse_order(&from)?)
            },
            group: group.into(),
            position,
            line: line.summary(),
        },
        WireEvent::Drawn { line } => RoomEvent::Drawn {
            room,
            line: line.summary(),
        },
        WireEvent::Configured { line, facts } => RoomEvent::Configured {
            room,
            line: line.summary(),
            facts: Arc::new({
                let queue_method = facts.queue_method()?;
                facts.into_facts(queue_method)
            }),
        },
        WireEvent::Closed {} => RoomEvent::Closed { room },
    })
}

/// Reads an event of the releases before the JSON format:
/// `kind|version|waiting|rate|tick_at|paused|…`.
fn parse_pipe_event(room: RoomId, payload: &str) -> Option<RoomEvent> {
    if payload == "closed" {
        return Some(RoomEvent::Closed { room });
    }
    let mut parts = payload.splitn(7, '|');
    let kind = parts.next()?;
    let version = parts.next()?.parse().ok()?;
    let waiting = parts.next()?.parse().ok()?;
    let (rate, tick_at, paused) = (parts.next()?, parts.next()?, parts.next()?);
    let line = summary(version, waiting, rate, tick_at, paused);
    let rest = parts.next()?;
    match kind {
        "tick" => {
            let (admitted, departed) = rest.split_once('|')?;
            let admitted = admitted
                .split(';')
                .filter(|a| !a.is_empty())
                .map(|a| {
                    let mut fields = a.split(',');
                    Some(Admission {
                        visitor: fields.next()?.parse().ok()?,
                        order: parse_order(fields.next()?)?,
                        admitted_at: fields.next()?.parse().ok()?,
                        expires_at: fields.next()?.parse().ok()?,
                    })
                })
                .collect::<Option<Vec<_>>>()?;
            let departed = departed
                .split(',')
                .filter(|d| !d.is_empty())
                .map(parse_order)
                .collect::<Option<Vec<Order>>>()?;
            Some(RoomEvent::Tick {
                room,
                admitted: admitted.into(),
                departed: departed.into(),
                line,
            })
        }
        "left" => Some(RoomEvent::Left {
            room,
            order: parse_order(rest)?,
            line,
        }),
        "drawn" => Some(RoomEvent::Drawn { room, line }),
        "configured" => {
            let (method, rest) = rest.split_once('|')?;
            let (stock_left, rest) = rest.split_once('|')?;
            let (sold_out, rest) = rest.split_once('|')?;
            let (opens_at, rest) = rest.split_once('|')?;
            let (length, facts) = rest.split_once('|')?;
            let length: usize = length.parse().ok()?;
            let (target_url, notice) = (facts.get(..length)?, facts.get(length..)?);
            Some(RoomEvent::Configured {
                room,
                line,
                facts: Arc::new(RoomFacts {
                    target_url: target_url.into(),
                    notice: Some(notice).filter(|n| !n.is_empty()).map(str::to_string),
                    queue_method: QueueMethod::parse(method)?,
                    stock_left: stock_left.parse().ok(),
                    sold_out: sold_out == "1",
                    opens_at: opens_at.parse().ok().map(Moment),
                    abandon_after_s: DEFAULT_ABANDON_AFTER_S,
                    closes_at: None,
                }),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::VisitorId;
    use crate::words::draw::EntryId;

    #[test]
    fn events_of_the_releases_before_json_are_still_read() {
        let room = RoomId::parse("r").unwrap();
        let visitor = VisitorId(7);
        let payload =
            format!("tick|3|40|0.4|1000|0|{visitor},5,1000,61000;{visitor},6,1000,61000|9,2");
        let Some(RoomEvent::Tick {
            admitted,
            departed,
            line,
            ..
        }) = parse_event(room.clone(), &payload)
        else {
            panic!("a tick")
        };
        assert_eq!(
            (admitted.len(), admitted[1].order, &departed[..]),
            (
                2,
                Order::Joined(6),
                &[Order::Joined(9), Order::Joined(2)][..]
            )
        );
        assert_eq!(
            (line.version, line.waiting, line.rate_per_s, line.tick_at),
            (3, 40, Some(0.4), Some(1000))
        );
        let Some(RoomEvent::Configured { facts, line, .. }) = parse_event(
            room.clone(),
            "configured|4|0|||1|random|3|0||22|https://x.example/?a|bDoors open | at 9",
        ) else {
            panic!("a config change")
        };
        assert_eq!(
            (
                facts.target_url.as_str(),
                facts.notice.as_deref(),
                line.rate_per_s,
                line.paused
            ),
            (
                "https://x.example/?a|b",
                Some("Doors open | at 9"),
                None,
                true
            )
        );
        assert_eq!(facts.queue_method, QueueMethod::Random);
        assert_eq!((facts.stock_left, facts.sold_out), (Some(3), false));
        let entry: EntryId = "00112233445566778899aabb".parse().unwrap();
        let Some(RoomEvent::Left { order, .. }) = parse_event(
            room.clone(),
            "left|5|3|||0|d00000000000000ff-00112233445566778899aabb",
        ) else {
            panic!("a departure from the draw")
        };
        assert_eq!(order, Order::Drawn { key: 255, entry });
        assert!(matches!(
            parse_event(room.clone(), "drawn|6|3|||0|"),
            Some(RoomEvent::Drawn { .. })
        ));
        assert!(parse_event(room, "tick|x").is_none());
    }

    #[test]
    fn events_are_read_from_the_scripts_json_with_empty_lists_as_lua_writes_them() {
        let room = RoomId::parse("r").unwrap();
        let visitor = VisitorId(7);
        let payload = format!(
            r#"{{"v":1,"kind":"tick","line":{{"version":3,"waiting":40,"rate":"0.4","tick_at":"1000","paused":"0"}},"admitted":[{{"visitor":"{visitor}","order":"6","admitted_at":1000,"expires_at":61000}}],"departed":{{}}}}"#
        );
        let Some(RoomEvent::Tick {
            admitted,
            departed,
            line,
            ..
        }) = parse_event(room.clone(), &payload)
        else {
            panic!("a tick")
        };
        assert_eq!((admitted.len(), admitted[0].order), (1, Order::Joined(6)));
        assert_eq!(admitted[0].visitor, visitor);
        assert!(departed.is_empty(), "{{}} is Lua's empty list");
        assert_eq!(
            (line.version, line.waiting, line.rate_per_s, line.tick_at),
            (3, 40, Some(0.4), Some(1000))
        );
        let configured = r#"{"v":1,"kind":"configured","line":{"version":4,"waiting":0,"rate":"","tick_at":"","paused":"1"},"facts":{"queue_method":"random","stock_left":"3","sold_out":false,"opens_at":"","target_url":"https://x.example/?a|b","notice":"Doors open | at 9"}}"#;
        let Some(RoomEvent::Configured { facts, line, .. }) = parse_event(room.clone(), configured)
        else {
            panic!("a config change")
        };
        assert_eq!(
            (
                facts.target_url.as_str(),
                facts.notice.as_deref(),
                line.paused
            ),
            ("https://x.example/?a|b", Some("Doors open | at 9"), true)
        );
        assert_eq!(facts.queue_method, QueueMethod::Random);
        assert_eq!((facts.stock_left, facts.sold_out), (Some(3), false));
        assert!(matches!(
            parse_event(room.clone(), r#"{"v":1,"kind":"closed"}"#),
            Some(RoomEvent::Closed { .. })
        ));
        assert!(
            parse_event(room.clone(), r#"{"v":2,"kind":"closed"}"#).is_none(),
            "a newer format than this node knows is not guessed at"
        );
        assert!(parse_event(room, r#"{"v":1,"kind":"tick"}"#).is_none());
    }
}
