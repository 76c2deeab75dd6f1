//! A room's notifications (api.md, "Step away"): who asked to be called
//! back and how, whose `near` is still to come (in the line's order, so a
//! tick looks only at the head: design rule 3), the addresses holding
//! them (`--notify-per-ip`), and the outbox: the events written in the
//! step that caused them, each handed to one consumer (a node) at a time
//! and taken over by another once its holder has been silent for the
//! takeover time (design rule 16), until one says it is settled.
//!
//! As the Redis store keeps them: `lua/notify.lua` and `lua/outbox.lua`,
//! with the events in a Stream and its consumer group.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::words::clock::Millis;
use crate::words::notify::{EventKind, NotifyRequest, OutboxEvent};
use crate::words::{Order, VisitorId};

/// A waiting visitor who asked keeps the place while away: the presence
/// the sweep reads is set this far ahead (in ms since the epoch: the year
/// 33,000, a double's exact integer in Lua, as every score there).
pub const HELD_PRESENCE: Millis = 1_000_000_000_000_000;

/// One visitor's request, kept with their place.
#[derive(Debug, Clone)]
pub(super) struct Asked {
    pub request: NotifyRequest,
    /// The client's address block it counts against (`--notify-per-ip`),
    /// as the join limit writes it.
    pub block: String,
    /// Where they wait while `near` is still to come.
    pub pending_near: Option<Order>,
    /// The resume codes spent, by kind.
    pub spent: Vec<EventKind>,
}

/// An event of the outbox as it is kept.
#[derive(Debug, Clone)]
struct Kept {
    event: OutboxEvent,
    /// The consumer holding it, and since when (its last claim or hold).
    holder: Option<(String, Millis)>,
}

#[derive(Debug, Default)]
pub(super) struct Callbacks {
    asked: HashMap<VisitorId, Asked>,
    /// Those whose `near` is to come, in the line's order.
    near: BTreeSet<(Order, VisitorId)>,
    /// The largest `ahead` anyone in the room asked for: nobody deeper in
    /// the line can be near, so the tick's walk stops there (the default
    /// 20 makes it a walk of the line's first 21 places).
    reach: u32,
    per_block: HashMap<String, HashSet<VisitorId>>,
    /// The outbox, by its entries' sequence.
    outbox: BTreeMap<u64, Kept>,
    next_entry: u64,
}

impl Callbacks {
    pub fn asked(&self, visitor: VisitorId) -> Option<&Asked> {
        self.asked.get(&visitor)
    }

    /// Anyone asked: what a tick has to look at.
    pub fn any(&self) -> bool {
        !self.asked.is_empty()
    }

    /// Whether the visitor may ask: one of the address's places holding
    /// a request already, or fewer than `per_block` of them.
    pub fn may_ask(&self, visitor: VisitorId, block: &str, per_block: u32) -> bool {
        self.per_block
            .get(block)
            .is_none_or(|holders| holders.contains(&visitor) || holders.len() < per_block as usize)
    }

    /// Keeps (or replaces) the visitor's request; `order`: where they wait,
    /// if `near` is to come for them (none in a `random` room). Asking
    /// again after `near` changes how they are reached, not when.
    pub fn ask(
        &mut self,
        visitor: VisitorId,
        request: NotifyRequest,
        block: String,
        order: Option<Order>,
    ) {
        let (spent, near_done) = match self.forget(visitor) {
            Some(before) => (before.spent, before.pending_near.is_none()),
            None => (Vec::new(), false),
        };
        let pending_near = if near_done { None } else { order };
        self.reach = self.reach.max(request.ahead);
        if let Some(order) = pending_near {
            self.near.insert((order, visitor));
        }
        self.per_block
            .entry(block.clone())
            .or_default()
            .insert(visitor);
        self.asked.insert(
            visitor,
            Asked {
                request,
                block,
                pending_near,
                spent,
            },
        );
    }

    /// Drops what the visitor asked (cancelled, or the place ended): the
    /// contact and subscription go with it.
    pub fn forget(&mut self, visitor: VisitorId) -> Option<Asked> {
        let asked = self.asked.remove(&visitor)?;
        if let Some(order) = asked.pending_near {
            self.near.remove(&(order, visitor));
        }
        if let Some(holders) = self.per_block.get_mut(&asked.block) {
            holders.remove(&visitor);
            if holders.is_empty() {
                self.per_block.remove(&asked.block);
            }
        }
        Some(asked)
    }

    /// The visitor left the line (admitted): no `near` for them.
    pub fn left_line(&mut self, visitor: VisitorId) {
        if let Some(asked) = self.asked.get_mut(&visitor)
            && let Some(order) = asked.pending_near.take()
        {
            self.near.remove(&(order, visitor));
        }
    }

    /// The visitor's place moved (into the priority line): their `near`
    /// follows it. Whether it is still to come.
    pub fn moved(&mut self, visitor: VisitorId, to: Order) -> bool {
        let Some(asked) = self.asked.get_mut(&visitor) else {
            return false;
        };
        let Some(from) = asked.pending_near.replace(to) else {
            return false;
        };
        self.near.remove(&(from, visitor));
        self.near.insert((to, visitor));
        true
    }

    /// How deep in the line anyone may be near (`reach`).
    pub fn reach(&self) -> u32 {
        self.reach
    }

    /// Those whose `near` is to come, head first.
    pub fn awaiting_near(&self) -> impl Iterator<Item = (Order, VisitorId)> + '_ {
        self.near.iter().copied()
    }

    /// `near` was sent: it is not to come again.
    pub fn near_sent(&mut self, visitor: VisitorId, order: Order) {
        self.near.remove(&(order, visitor));
        if let Some(asked) = self.asked.get_mut(&visitor) {
            asked.pending_near = None;
        }
    }

    /// Spends the visitor's resume code of `kind`: whether it was unspent.
    pub fn spend(&mut self, visitor: VisitorId, kind: EventKind) -> Option<bool> {
        let asked = self.asked.get_mut(&visitor)?;
        if asked.spent.contains(&kind) {
            return Some(false);
        }
        asked.spent.push(kind);
        Some(true)
    }

    /// The push service said the subscription is gone: it is dropped, and
    /// with no contact left the request with it.
    pub fn drop_push(&mut self, visitor: VisitorId) {
        let Some(asked) = self.asked.get_mut(&visitor) else {
            return;
        };
        asked.request.push = None;
        if asked.request.contact.is_none() {
            self.forget(visitor);
        }
    }

    /// Writes an event to the outbox; its id names the visitor and the
    /// kind, the same at every attempt and on every node.
    pub fn write(
        &mut self,
        kind: EventKind,
        visitor: VisitorId,
        position: Option<u64>,
        at: Millis,
    ) {
        self.next_entry += 1;
        let event = OutboxEvent {
            id: event_id(visitor, kind),
            entry: self.next_entry.to_string(),
            kind,
            visitor,
            position,
            at,
            reach: None,
        };
        self.outbox.insert(
            self.next_entry,
            Kept {
                event,
                holder: None,
            },
        );
    }

    /// Events in the outbox, sent or not yet settled.
    pub fn pending(&self) -> u64 {
        self.outbox.len() as u64
    }

    /// Up to `limit` events for `consumer`: first those whose holder (any,
    /// itself included) has been silent `takeover_ms`, then those never
    /// handed out, each in the outbox's order (as a Stream's consumer
    /// group hands them: `XAUTOCLAIM`, then `XREADGROUP`). Each comes with
    /// how to reach its visitor now; one whose place ended is settled
    /// here (nobody is left to call back) and not handed.
    pub fn claim(
        &mut self,
        consumer: &str,
        takeover_ms: Millis,
        limit: usize,
        now: Millis,
    ) -> Vec<OutboxEvent> {
        let stale: Vec<u64> = self
            .outbox
            .iter()
            .filter(|(_, kept)| {
                kept.holder
                    .as_ref()
                    .is_some_and(|(_, since)| since + takeover_ms <= now)
            })
            .map(|(entry, _)| *entry)
            .take(limit)
            .collect();
        let mut handed = Vec::new();
        let fresh: Vec<u64> = self
            .outbox
            .iter()
            .filter(|(_, kept)| kept.holder.is_none())
            .map(|(entry, _)| *entry)
            .collect();
        for entry in stale.into_iter().chain(fresh).take(limit) {
            let Some(kept) = self.outbox.get_mut(&entry) else {
                continue;
            };
            let Some(asked) = self.asked.get(&kept.event.visitor) else {
                self.outbox.remove(&entry);
                continue;
            };
            kept.holder = Some((consumer.to_string(), now));
            let mut event = kept.event.clone();
            event.reach = Some(asked.request.clone());
            handed.push(event);
        }
        handed
    }

    /// `consumer` is still at these events (retrying): nobody takes them
    /// over for another takeover time. The entries still its own.
    pub fn hold(&mut self, consumer: &str, entries: &[String], now: Millis) -> Vec<String> {
        entries
            .iter()
            .filter(|entry| {
                let kept = entry
                    .parse::<u64>()
                    .ok()
                    .and_then(|entry| self.outbox.get_mut(&entry));
                match kept {
                    Some(Kept {
                        holder: Some((holder, since)),
                        ..
                    }) if holder == consumer => {
                        *since = now;
                        true
                    }
                    _ => false,
                }
            })
            .cloned()
            .collect()
    }

    /// Delivered, or given up: out of the outbox.
    pub fn settle(&mut self, entries: &[String]) {
        for entry in entries {
            if let Ok(entry) = entry.parse::<u64>() {
                self.outbox.remove(&entry);
            }
        }
    }
}

/// An event's id: stable across attempts and nodes, unique in its room.
pub fn event_id(visitor: VisitorId, kind: EventKind) -> String {
    format!("{visitor}-{kind}")
}
