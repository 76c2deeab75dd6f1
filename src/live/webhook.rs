//! The room's webhook (api.md, "Step away: notifications"): one event's
//! delivery, a signed POST of its JSON body through the guarded client
//! ([`Outbound`], design rule 17). Whether and when to try again is the
//! caller's (the outbox's backoff, up to 10 minutes, the same `id`): this
//! says only whether this attempt delivered.
//!
//! The body holds the visitor's contact, so it is never logged, nor is the
//! secret, nor the URL's path and query (a receiver's token often rides
//! there): the logs name the webhook's host, the status or the failure,
//! and the latency.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::live::outbound::{Call, CallFailure, Outbound};
use crate::words::webhook_signature::{self, signature};

/// How long a receiver has for the whole call (api.md: none within 5 s is
/// retried).
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The webhook's `User-Agent`.
pub const USER_AGENT: &str = concat!("waitroom/", env!("CARGO_PKG_VERSION"), " (webhook)");

/// One attempt's result, with what the logs say of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The receiver answered 2xx: the event is delivered.
    Delivered { status: u16, latency_ms: u64 },
    /// Anything else: try again later, with the same body and `id`.
    Retry { why: Undelivered, latency_ms: u64 },
}

/// Why an attempt did not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undelivered {
    /// An answer that is not 2xx (a 3xx included: it is not followed).
    Status(u16),
    /// No answer: refused address, timeout, connection or TLS failure.
    Failed(CallFailure),
}

impl Delivery {
    pub fn delivered(&self) -> bool {
        matches!(self, Delivery::Delivered { .. })
    }
}

impl fmt::Display for Undelivered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Undelivered::Status(status) => write!(f, "answered {status}"),
            Undelivered::Failed(failure) => failure.fmt(f),
        }
    }
}

/// POSTs `body` (an event's JSON, `contact` included) to `url`, signed
/// with `secret` at `now_unix_s`, within [`TIMEOUT`].
pub async fn deliver(
    outbound: &Outbound,
    url: &str,
    secret: &str,
    body: &[u8],
    now_unix_s: u64,
) -> Delivery {
    let signed = signature(secret, now_unix_s, body);
    let headers = [
        ("content-type", "application/json"),
        (webhook_signature::HEADER, signed.as_str()),
        ("user-agent", USER_AGENT),
    ];
    let call = Call::post(url, &headers, Bytes::copy_from_slice(body));
    let sent = outbound.send(call, TIMEOUT).await;
    let latency_ms = sent.latency_ms;
    let host = url::Url::parse(url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_default();
    let delivery = match sent.outcome {
        Ok(status) if (200..300).contains(&status) => Delivery::Delivered { status, latency_ms },
        Ok(status) => Delivery::Retry {
            why: Undelivered::Status(status),
            latency_ms,
        },
        Err(failure) => Delivery::Retry {
            why: Undelivered::Failed(failure),
            latency_ms,
        },
    };
    match &delivery {
        Delivery::Delivered { status, .. } => {
            tracing::debug!(host, status, latency_ms, "webhook delivered");
        }
        Delivery::Retry { why, .. } => {
            tracing::warn!(host, %why, latency_ms, "webhook not delivered: to be retried");
        }
    }
    delivery
}
