//! Step away, we'll call you (api.md, "Step away: notifications"): what a
//! visitor asks to be notified with, the events a store writes to its
//! outbox in the step that causes them, the message each receiver gets,
//! and the resume code a notification's link carries.
//!
//! The contact and the push subscription are the visitor's: they are kept
//! with the place and go when it ends; an event in the outbox names only
//! the visitor, so a sender reads them at the last moment, and an event
//! whose place has ended is not sent (nobody is left to call back).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::words::clock::{Millis, rfc3339};
use crate::words::{RoomId, VisitorId, wire_enum};

/// `ahead` when the visitor names none: `near` fires with 20 or fewer ahead.
pub const DEFAULT_AHEAD: u32 = 20;
pub const MAX_AHEAD: u32 = 1_000;
/// The longest contact a visitor may leave (an e-mail address, a phone
/// number, a chat handle: the room's webhook knows which).
pub const MAX_CONTACT_CHARS: usize = 200;
/// The longest push endpoint and key a subscription may carry: the
/// browsers' push services hand out endpoints of a few hundred characters.
pub const MAX_ENDPOINT_CHARS: usize = 1_024;
pub const MAX_PUSH_KEY_CHARS: usize = 256;
/// Room config defaults (api.md): come back within 15 minutes of `near`;
/// an admitted visitor who was notified keeps the pass from no-show
/// reclaiming for 10 minutes.
pub const DEFAULT_NOTIFY_RETURN_S: u64 = 900;
pub const DEFAULT_NOTIFY_HOLD_S: u64 = 600;
/// How long an event is retried before it is given up (api.md: 10 minutes).
pub const RETRY_FOR_MS: u64 = 10 * 60 * 1000;

wire_enum! {
    /// Which moment an event announces.
    pub enum EventKind {
        /// `ahead` or fewer are ahead: time to come back.
        Near,
        /// Their turn: the pass is theirs.
        Admitted,
    }
}

/// A browser's `PushSubscription.toJSON()`: where to push and the keys to
/// encrypt for (RFC 8291). Only its form is checked here; where it may
/// point is the sender's rule (`--push-hosts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushSubscription {
    pub endpoint: String,
    pub keys: PushKeys,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushKeys {
    /// The browser's P-256 public key, base64url.
    pub p256dh: String,
    /// The 16-byte authentication secret, base64url.
    pub auth: String,
}

/// What a visitor asked for, checked: at least one way to reach them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyRequest {
    #[serde(default)]
    pub contact: Option<String>,
    #[serde(default)]
    pub push: Option<PushSubscription>,
    /// `near` fires when this many or fewer are ahead.
    pub ahead: u32,
}

/// The contact is the visitor's: it is never logged.
impl fmt::Debug for NotifyRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotifyRequest")
            .field("contact", &self.contact.as_ref().map(|_| "[redacted]"))
            .field("push", &self.push.as_ref().map(|_| "[redacted]"))
            .field("ahead", &self.ahead)
            .finish()
    }
}

/// The body of `POST /api/rooms/{room}/notify`, as sent.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifyBody {
    /// Up to 200 characters: how the room's webhook reaches the visitor.
    #[serde(default)]
    pub contact: Option<String>,
    /// The browser's `PushSubscription` JSON (`endpoint`, `keys.p256dh`,
    /// `keys.auth`; `expirationTime` is ignored).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub push: Option<PushSubscriptionBody>,
    /// Notify when this many or fewer are ahead (1–1000, default 20).
    #[serde(default)]
    pub ahead: Option<u32>,
}

/// A subscription as the browser's `toJSON()` writes it.
#[derive(Debug, Deserialize)]
pub struct PushSubscriptionBody {
    pub endpoint: String,
    pub keys: PushKeys,
    #[serde(default, rename = "expirationTime")]
    pub _expiration_time: Option<serde_json::Value>,
}

/// Why a notify request is refused (400 `invalid_notify`, with the words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyRefused {
    #[error("send a contact, a push subscription, or both")]
    NothingToNotify,
    #[error("contact must be 1 to {MAX_CONTACT_CHARS} characters, with no control characters")]
    Contact,
    #[error("ahead must be between 1 and {MAX_AHEAD}")]
    Ahead,
    #[error("push: {0}")]
    Push(&'static str),
    #[error("this room has no webhook to send a contact to: subscribe to push instead")]
    NoWebhook,
}

impl NotifyBody {
    /// The request, if it is one; `webhook`: whether the room has a
    /// webhook (a contact goes nowhere without one).
    pub fn check(self, webhook: bool) -> Result<NotifyRequest, NotifyRefused> {
        let ahead = self.ahead.unwrap_or(DEFAULT_AHEAD);
        if !(1..=MAX_AHEAD).contains(&ahead) {
            return Err(NotifyRefused::Ahead);
        }
        let contact = match self.contact {
            Some(contact) => {
                let chars = contact.chars().count();
                if chars == 0 || chars > MAX_CONTACT_CHARS || contact.chars().any(char::is_control)
                {
                    return Err(NotifyRefused::Contact);
                }
                if !webhook {
                    return Err(NotifyRefused::NoWebhook);
                }
                Some(contact)
            }
            None => None,
        };
        let push = self.push.map(check_subscription).transpose()?;
        if contact.is_none() && push.is_none() {
            return Err(NotifyRefused::NothingToNotify);
        }
        Ok(NotifyRequest {
            contact,
            push,
            ahead,
        })
    }
}

/// The subscription's form: an endpoint URL of bounded length, and keys
/// of base64url characters. Where the endpoint may point is checked by the
/// sender's rules before the store keeps it.
fn check_subscription(body: PushSubscriptionBody) -> Result<PushSubscription, NotifyRefused> {
    if body.endpoint.is_empty() || body.endpoint.len() > MAX_ENDPOINT_CHARS {
        return Err(NotifyRefused::Push(
            "endpoint must be a URL of up to 1024 characters",
        ));
    }
    let base64url = |key: &str| {
        !key.is_empty()
            && key.len() <= MAX_PUSH_KEY_CHARS
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
    };
    if !base64url(&body.keys.p256dh) || !base64url(&body.keys.auth) {
        return Err(NotifyRefused::Push(
            "keys.p256dh and keys.auth must be base64url",
        ));
    }
    Ok(PushSubscription {
        endpoint: body.endpoint,
        keys: body.keys,
    })
}

/// One event of a room's outbox, as the store hands it to the node that
/// sends it: the same `id` at every attempt, on every node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEvent {
    /// The store's id of the event: stable, unique in its room.
    pub id: String,
    pub kind: EventKind,
    pub visitor: VisitorId,
    /// The visitor's position when the event was written (`near`).
    pub position: Option<u64>,
    /// When the step that caused it ran.
    pub at: Millis,
    /// How many times the event was handed out before (0: the first).
    pub deliveries: u64,
    /// Where to reach the visitor, read in the step that hands the event
    /// out; `None` when the place has ended since (nothing is sent).
    pub reach: Option<NotifyRequest>,
}

/// The message every receiver gets (api.md's event body); `contact` only
/// in the webhook's.
#[derive(Serialize)]
pub struct EventBody<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub room: &'a RoomId,
    pub visitor: VisitorId,
    pub position: Option<u64>,
    pub resume_url: &'a str,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact: Option<&'a str>,
}

impl<'a> EventBody<'a> {
    pub fn new(room: &'a RoomId, event: &'a OutboxEvent, resume_url: &'a str) -> Self {
        Self {
            id: &event.id,
            kind: event.kind,
            room,
            visitor: event.visitor,
            position: event.position,
            resume_url,
            at: rfc3339(event.at),
            contact: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> NotifyBody {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_request_needs_a_way_to_reach_the_visitor_and_sane_bounds() {
        let ok = body(r#"{"contact":"+15550100","ahead":5}"#)
            .check(true)
            .unwrap();
        assert_eq!(ok.contact.as_deref(), Some("+15550100"));
        assert_eq!(ok.ahead, 5);
        assert_eq!(
            body(r#"{"contact":"a"}"#).check(true).unwrap().ahead,
            DEFAULT_AHEAD
        );
        assert_eq!(body("{}").check(true), Err(NotifyRefused::NothingToNotify));
        assert_eq!(
            body(r#"{"contact":"a","ahead":0}"#).check(true),
            Err(NotifyRefused::Ahead)
        );
        assert_eq!(
            body(r#"{"contact":"a","ahead":1001}"#).check(true),
            Err(NotifyRefused::Ahead)
        );
        assert_eq!(
            body(r#"{"contact":""}"#).check(true),
            Err(NotifyRefused::Contact)
        );
        let long = format!(r#"{{"contact":"{}"}}"#, "é".repeat(201));
        assert_eq!(body(&long).check(true), Err(NotifyRefused::Contact));
        assert_eq!(
            body(r#"{"contact":"a\nb"}"#).check(true),
            Err(NotifyRefused::Contact)
        );
        assert_eq!(
            body(r#"{"contact":"a"}"#).check(false),
            Err(NotifyRefused::NoWebhook)
        );
        let push = r#"{"push":{"endpoint":"https://fcm.googleapis.com/x","keys":{"p256dh":"BN_x-1","auth":"a_b"},"expirationTime":null}}"#;
        assert!(body(push).check(false).unwrap().push.is_some());
        let bad_key = r#"{"push":{"endpoint":"https://x/","keys":{"p256dh":"a b","auth":"x"}}}"#;
        assert!(matches!(
            body(bad_key).check(false),
            Err(NotifyRefused::Push(_))
        ));
        assert!(serde_json::from_str::<NotifyBody>(r#"{"contact":"a","extra":1}"#).is_err());
    }

    #[test]
    fn the_debug_form_never_shows_the_contact() {
        let request = body(r#"{"contact":"secret@example.com"}"#)
            .check(true)
            .unwrap();
        assert!(!format!("{request:?}").contains("secret"));
    }
}
