//! The webhook receivers the docs print (`integrations/webhook-receivers/`,
//! included verbatim by `docs/src/notifications-webhook.md`), run as they
//! are: Python's and Node's, each in a process of its own on a port the
//! test gives it, sent events signed by our own signer. Each must accept a
//! signed event (our `deliver`, as a node sends it), answer its id again
//! as a duplicate, and refuse a forged signature, a changed body, a
//! missing header and a time more than 5 minutes off, in either direction.
//!
//! Needs `python3` and `node`: a missing one fails the test, saying so.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use waitroom::live::outbound::{Outbound, OutboundPolicy};
use waitroom::live::webhook::{Delivery, deliver};
use waitroom::words::webhook_signature::{HEADER, signature};
use waitroom_testkit::ports::spawn_listening;
use waitroom_testkit::repo;

const SECRET: &str = "whsec-the-receivers-secret-of-32-chars+";
const DOC: &str = "docs/src/notifications-webhook.md";
/// How long a receiver may take to listen.
const STARTUP: Duration = Duration::from_secs(20);

/// A receiver's process, killed with the test.
struct Receiver {
    child: Child,
    port: u16,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// `program script <port>`, counted as started once the kernel shows
    /// the port listening in this child's hands (so the test talks to its
    /// own child, not to whatever else holds a port).
    fn start(program: &str, script: &str) -> Receiver {
        let runs = Command::new(program)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        assert!(runs, "`{program}` is needed for this test: install it");
        let script = repo(script);
        let (child, port) = spawn_listening(program, STARTUP, |port| {
            let mut command = Command::new(program);
            command
                .arg(&script)
                .arg(port.to_string())
                .env("WEBHOOK_SECRET", SECRET)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            command
        });
        Receiver { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/waitroom", self.port)
    }

    /// POSTs `body` with `signed` as its signature (none: no header): the
    /// status and the JSON answer.
    async fn post(&self, body: &[u8], signed: Option<String>) -> (u16, Value) {
        let mut request = reqwest::Client::new()
            .post(self.url())
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(signed) = signed {
            request = request.header(HEADER, signed);
        }
        let response = request.send().await.expect("the receiver answers");
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON answer"))
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn event(id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": id,
        "type": "admitted",
        "room": "spring-sale",
        "visitor": "42",
        "position": null,
        "resume_url": "https://queue.example/r/spring-sale?code=abc",
        "at": "2026-01-01T00:00:00Z",
        "contact": "+15550100",
    }))
    .unwrap()
}

async fn check(receiver: Receiver) {
    let outbound = Outbound::new(OutboundPolicy {
        allow_networks: vec!["127.0.0.0/8".parse().unwrap()],
    });
    let first = event("1767225600000-0");
    let delivery = deliver(&outbound, &receiver.url(), SECRET, &first, now_s()).await;
    assert!(
        matches!(delivery, Delivery::Delivered { status: 200, .. }),
        "{delivery:?}"
    );
    // The retry of a delivered event: the same id, signed anew.
    let again = receiver
        .post(&first, Some(signature(SECRET, now_s(), &first)))
        .await;
    assert_eq!(again, (200, json!({"duplicate": true})));

    let second = event("1767225600000-1");
    let refused = [
        ("no signature", None),
        (
            "another secret",
            Some(signature(
                "whsec-not-the-receivers-secret-32-chars",
                now_s(),
                &second,
            )),
        ),
        ("another body", Some(signature(SECRET, now_s(), &first))),
        (
            "6 minutes old",
            Some(signature(SECRET, now_s() - 360, &second)),
        ),
        (
            "6 minutes ahead",
            Some(signature(SECRET, now_s() + 360, &second)),
        ),
        (
            "no t",
            Some(signature(SECRET, now_s(), &second).replacen("t=", "x=", 1)),
        ),
        (
            "v1 cut short",
            Some(signature(SECRET, now_s(), &second)[..40].to_string()),
        ),
    ];
    for (what, signed) in refused {
        let (status, _) = receiver.post(&second, signed).await;
        assert_eq!(status, 401, "{what}");
    }
    // The refusals recorded nothing: the event, signed, is new.
    let fresh = receiver
        .post(&second, Some(signature(SECRET, now_s() - 240, &second)))
        .await;
    assert_eq!(fresh, (200, json!({"duplicate": false})));
}

#[tokio::test]
async fn the_python_receiver_accepts_signed_events_once_and_refuses_forged_or_stale_ones() {
    check(Receiver::start(
        "python3",
        "integrations/webhook-receivers/receiver.py",
    ))
    .await;
}

#[tokio::test]
async fn the_node_receiver_accepts_signed_events_once_and_refuses_forged_or_stale_ones() {
    check(Receiver::start(
        "node",
        "integrations/webhook-receivers/receiver.js",
    ))
    .await;
}

#[test]
fn the_docs_print_the_receivers_that_run_here() {
    let doc = std::fs::read_to_string(repo(DOC)).expect(DOC);
    for (lang, file) in [("python", "receiver.py"), ("js", "receiver.js")] {
        let include =
            format!("```{lang}\n{{{{#include ../../integrations/webhook-receivers/{file}}}}}\n```");
        assert!(doc.contains(&include), "{DOC} includes {file}: {include}");
    }
}
