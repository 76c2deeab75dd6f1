//! `notify` mode's webhook receiver: on 127.0.0.1 (a port the kernel
//! picks), in a thread and a runtime of its own (as the `autotune` origin,
//! whose request reader it shares). Every POST is an event: its signature
//! is checked against the room's secret (a bad one is 401 and counted),
//! its `id` and `type` read; the receiver answers 500 to the first attempt
//! at a fixed share of the ids (chosen by a hash of the id, so the same
//! ones on every run), or to every attempt when it refuses all, and 200
//! otherwise. It counts the requests, the ids delivered (first 200), the
//! deliveries of an id already delivered (duplicates), and when each new
//! id was delivered.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use waitroom::words::webhook_signature::signature;

use crate::autotune::origin::read_head;
use crate::error::LoadError;
use crate::loopback::Loopback;

/// The longest event body read; a longer one ends the connection.
const MAX_BODY_BYTES: u64 = 64 * 1024;

/// What the receiver does with an attempt.
#[derive(Debug, Clone, Copy)]
pub struct Answers {
    /// Percent of the ids (0–100) whose first attempt is answered 500.
    pub fail_first_percent: u32,
    /// Answer 500 to everything (events stay in the outbox).
    pub refuse_all: bool,
}

/// What the receiver saw, so far.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Tally {
    pub requests: u64,
    /// Answered 500 on purpose (a retry is due).
    pub failed_on_purpose: u64,
    pub bad_signature: u64,
    pub bad_body: u64,
    /// Distinct ids answered 200, by event type.
    pub delivered_by_type: BTreeMap<String, u64>,
    /// 200s for an id already answered 200.
    pub duplicates: u64,
    /// When the latest new id was answered 200, from the receiver's start.
    #[serde(skip)]
    pub last_new: Option<Duration>,
}

impl Tally {
    pub fn delivered(&self) -> u64 {
        self.delivered_by_type.values().sum()
    }
    pub fn delivered_of(&self, kind: &str) -> u64 {
        self.delivered_by_type.get(kind).copied().unwrap_or(0)
    }
}

#[derive(Default)]
struct Seen {
    tally: Tally,
    /// By id: whether it has been answered 500 on purpose, and 200.
    ids: HashMap<String, (bool, bool)>,
}

struct Shared {
    secret: String,
    answers: Answers,
    started: Instant,
    seen: Mutex<Seen>,
}

pub struct Receiver {
    shared: Arc<Shared>,
    server: Loopback,
}

impl Receiver {
    pub fn start(secret: &str, answers: Answers) -> Result<Receiver, LoadError> {
        let shared = Arc::new(Shared {
            secret: secret.to_string(),
            answers,
            started: Instant::now(),
            seen: Mutex::default(),
        });
        let serving = shared.clone();
        let server = Loopback::start("webhook-receiver", move |stream| {
            connection(stream, serving.clone())
        })?;
        Ok(Receiver { shared, server })
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.server.addr)
    }

    pub fn started(&self) -> Instant {
        self.shared.started
    }

    pub fn tally(&self) -> Tally {
        self.shared.seen.lock().expect("not poisoned").tally.clone()
    }
}

async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    while let Some(head) = read_head(&mut reader).await {
        if head.body_bytes > MAX_BODY_BYTES {
            return;
        }
        let mut body = Vec::with_capacity(head.body_bytes as usize);
        if (&mut reader)
            .take(head.body_bytes)
            .read_to_end(&mut body)
            .await
            .ok()
            != Some(head.body_bytes as usize)
        {
            return;
        }
        let status = shared.answer(head.signature.as_deref(), &body);
        let reason = match status {
            200 => "OK",
            401 => "Unauthorized",
            400 => "Bad Request",
            _ => "Internal Server Error",
        };
        let text = format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\n{}\r\n",
            if head.close {
                "connection: close\r\n"
            } else {
                ""
            }
        );
        if writer.write_all(text.as_bytes()).await.is_err() || head.close {
            return;
        }
    }
}

/// Whether the header `t=<s>,v1=<hex>` signs `body` under `secret`.
pub fn signed(secret: &str, header: Option<&str>, body: &[u8]) -> bool {
    let Some(header) = header else {
        return false;
    };
    let Some(t) = header
        .split(',')
        .find_map(|part| part.strip_prefix("t="))
        .and_then(|t| t.parse::<u64>().ok())
    else {
        return false;
    };
    signature(secret, t, body) == header
}

/// FNV-1a: which ids fail first, the same on every run.
fn share_of(id: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in id.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % 100
}

#[derive(serde::Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: String,
}

impl Shared {
    fn answer(&self, signature: Option<&str>, body: &[u8]) -> u16 {
        let ok = signed(&self.secret, signature, body);
        let event = serde_json::from_slice::<Event>(body);
        let mut seen = self.seen.lock().expect("not poisoned");
        seen.tally.requests += 1;
        if !ok {
            seen.tally.bad_signature += 1;
            return 401;
        }
        let Ok(event) = event else {
            seen.tally.bad_body += 1;
            return 400;
        };
        if self.answers.refuse_all {
            seen.tally.failed_on_purpose += 1;
            return 500;
        }
        let fail_first = share_of(&event.id) < self.answers.fail_first_percent;
        let (failed, delivered) = seen.ids.get(&event.id).copied().unwrap_or_default();
        if fail_first && !failed {
            seen.ids.insert(event.id, (true, false));
            seen.tally.failed_on_purpose += 1;
            return 500;
        }
        if delivered {
            seen.tally.duplicates += 1;
        } else {
            seen.ids.insert(event.id, (failed, true));
            *seen.tally.delivered_by_type.entry(event.kind).or_default() += 1;
            seen.tally.last_new = Some(self.started.elapsed());
        }
        200
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_checked_and_a_fixed_share_fails_once() {
        let secret = "s".repeat(32);
        let body = br#"{"id":"v-admitted","type":"admitted"}"#;
        let header = signature(&secret, 1_700_000_000, body);
        assert!(signed(&secret, Some(&header), body));
        assert!(!signed(&secret, Some(&header), b"{}"));
        assert!(!signed("another", Some(&header), body));
        let shared = Shared {
            secret: secret.clone(),
            answers: Answers {
                fail_first_percent: 100,
                refuse_all: false,
            },
            started: Instant::now(),
            seen: Mutex::default(),
        };
        assert_eq!(shared.answer(Some(&header), body), 500);
        assert_eq!(shared.answer(Some(&header), body), 200);
        assert_eq!(shared.answer(Some(&header), body), 200);
        assert_eq!(shared.answer(None, body), 401);
        let tally = shared.seen.lock().unwrap().tally.clone();
        assert_eq!(
            (tally.requests, tally.failed_on_purpose, tally.duplicates),
            (4, 1, 1)
        );
        assert_eq!(
            (tally.delivered_of("admitted"), tally.bad_signature),
            (1, 1)
        );
        let shares: Vec<u32> = (0..1000).map(|i| share_of(&format!("{i}-x"))).collect();
        let under_2 = shares.iter().filter(|s| **s < 2).count();
        assert!((5..=40).contains(&under_2), "{under_2}");
    }
}
