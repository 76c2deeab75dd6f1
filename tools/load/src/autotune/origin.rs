//! The test origin of `autotune` mode: a shop whose checkout has a known
//! capacity, on 127.0.0.1 (a port the kernel picks), in a thread and a
//! runtime of its own, so that the visitors' work in this process does not
//! hold up its clock.
//!
//! Its capacity is a queue in front of `workers` workers: each request
//! holds a worker for `service` (a timer, not work: what is modelled is a
//! shop's checkout, not this machine's CPU), and waits for one in arrival
//! order (tokio's semaphore is fair). So a request's latency is its wait
//! in the queue plus the service time, and the origin serves at most
//! `workers / service` requests a second, however many come. `/health`
//! goes through the same queue and takes the same service time: its
//! latency is what a checkout sees at that moment. Past `queue_max`
//! requests waiting, a request is answered 503 at once (an origin shedding
//! load), and counted.
//!
//! `/checkout` (any method) and `/health` answer 200 `ok`; any other path
//! 404. HTTP/1.1 with keep-alive; a request's body (by `Content-Length`) is
//! read and ignored.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::error::LoadError;
use crate::loopback::Loopback;

/// The longest request head read; a longer one ends the connection.
const MAX_HEAD_BYTES: u64 = 16 * 1024;
/// The longest request body read (and ignored).
const MAX_BODY_BYTES: u64 = 64 * 1024;

/// What the origin can take.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Capacity {
    /// Requests served at once.
    pub workers: u32,
    /// How long each holds its worker.
    #[serde(serialize_with = "millis")]
    pub service: Duration,
    /// Requests that may wait for a worker; past them a request is shed (503).
    pub queue_max: usize,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

impl Capacity {
    /// Requests a second it serves at most, on paper.
    pub fn per_s(&self) -> f64 {
        self.workers as f64 / self.service.as_secs_f64()
    }
}

/// Which endpoint a request was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Checkout,
    Health,
}

/// One request the origin answered, its times from the origin's start.
#[derive(Debug, Clone, Copy)]
pub struct Record {
    pub kind: Kind,
    /// When its head had been read.
    pub arrived: Duration,
    /// How long it waited for a worker.
    pub waited: Duration,
    /// From its arrival to its answer (wait and service).
    pub latency: Duration,
    /// Answered 503 at once: the queue was full.
    pub shed: bool,
}

impl Record {
    /// When its answer went out.
    pub fn answered(&self) -> Duration {
        self.arrived + self.latency
    }
}

/// What the origin's connections share.
struct Shared {
    capacity: Capacity,
    workers: Semaphore,
    waiting: AtomicUsize,
    started: Instant,
    records: Mutex<Vec<Record>>,
}

/// One held up on a gauge while it lives (also when its future is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shared {
    /// Serves one request of `kind`: its turn in the queue, then the
    /// service time; the status it is answered with.
    async fn serve(&self, kind: Kind) -> u16 {
        let arrived = Instant::now();
        let since_start = arrived.duration_since(self.started);
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.capacity.queue_max {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            self.keep(Record {
                kind,
                arrived: since_start,
                waited: Duration::ZERO,
                latency: arrived.elapsed(),
                shed: true,
            });
            return 503;
        }
        let waiting = Waiting(&self.waiting);
        let permit = self.workers.acquire().await.expect("never closed");
        drop(waiting);
        let waited = arrived.elapsed();
        tokio::time::sleep(self.capacity.service).await;
        drop(permit);
        self.keep(Record {
            kind,
            arrived: since_start,
            waited,
            latency: arrived.elapsed(),
            shed: false,
        });
        200
    }

    fn keep(&self, record: Record) {
        self.records.lock().expect("not poisoned").push(record);
    }
}

/// The origin, serving until stopped (or dropped).
pub struct Origin {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    server: Loopback,
}

impl Origin {
    /// Starts the origin on 127.0.0.1, in a thread of its own.
    pub fn start(capacity: Capacity) -> Result<Origin, LoadError> {
        let shared = Arc::new(Shared {
            capacity,
            workers: Semaphore::new(capacity.workers as usize),
            waiting: AtomicUsize::new(0),
            started: Instant::now(),
            records: Mutex::new(Vec::new()),
        });
        let serving = shared.clone();
        let server = Loopback::start("test-origin", move |stream| {
            connection(stream, serving.clone())
        })?;
        Ok(Origin {
            addr: server.addr,
            shared,
            server,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The moment its records count from.
    pub fn started(&self) -> Instant {
        self.shared.started
    }

    /// Requests waiting for a worker now.
    pub fn waiting(&self) -> usize {
        self.shared.waiting.load(Ordering::Relaxed)
    }

    /// Every request answered so far, taken out (the next call gives those after).
    pub fn take_records(&self) -> Vec<Record> {
        std::mem::take(&mut *self.shared.records.lock().expect("not poisoned"))
    }

    /// Stops serving: open connections are cut.
    pub fn stop(mut self) {
        self.server.halt();
    }
}

/// A request's head, as far as the origin (and `notify` mode's webhook
/// receiver) reads it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub path: String,
    pub body_bytes: u64,
    /// The client asked to close after the answer (or spoke HTTP/1.0).
    pub close: bool,
    /// The `Waitroom-Signature` header, if sent.
    pub signature: Option<String>,
}

/// Reads one request's head; `None` at the end of the connection or on a
/// head it cannot read.
pub(crate) async fn read_head<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> Option<Head> {
    let mut limited = reader.take(MAX_HEAD_BYTES);
    let mut line = String::new();
    // Blank lines before a request are allowed (RFC 9112, 2.2).
    while line.trim().is_empty() {
        line.clear();
        if limited.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
    }
    let mut parts = line.split_whitespace();
    let (_method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let path = target.split('?').next().unwrap_or_default().to_string();
    let mut head = Head {
        path,
        body_bytes: 0,
        close: version == "HTTP/1.0",
        signature: None,
    };
    loop {
        line.clear();
        if limited.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let header = line.trim_end();
        if header.is_empty() {
            return Some(head);
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            head.body_bytes = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case("connection") {
            head.close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case(waitroom::words::webhook_signature::HEADER) {
            head.signature = Some(value.to_string());
        }
    }
}

/// One connection: request after request, each served in turn.
async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    while let Some(head) = read_head(&mut reader).await {
        if head.body_bytes > MAX_BODY_BYTES {
            return;
        }
        let mut body = (&mut reader).take(head.body_bytes);
        if tokio::io::copy(&mut body, &mut tokio::io::sink())
            .await
            .ok()
            != Some(head.body_bytes)
        {
            return;
        }
        let status = match head.path.as_str() {
            "/checkout" => shared.serve(Kind::Checkout).await,
            "/health" => shared.serve(Kind::Health).await,
            _ => 404,
        };
        if writer
            .write_all(answer(status, head.close).as_bytes())
            .await
            .is_err()
            || head.close
        {
            return;
        }
    }
}

fn answer(status: u16, close: bool) -> String {
    let (reason, body) = match status {
        200 => ("OK", "ok"),
        503 => ("Service Unavailable", "busy"),
        _ => ("Not Found", "no such path"),
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n{}\r\n{body}",
        body.len(),
        if close { "connection: close\r\n" } else { "" }
    )
}

/// Measures what the origin takes: `clients` clients each sending
/// checkouts one after another for `for_how_long` (enough of them to keep
/// every worker busy); the requests a second answered after the first
/// second (the queue filling), from the origin's own records, which this
/// takes out.
pub async fn measure_capacity(origin: &Origin, clients: usize, for_how_long: Duration) -> f64 {
    let http = crate::common::http_client(clients);
    let url = origin.url("/checkout");
    let started = Instant::now();
    let until = started + for_how_long;
    let mut senders = Vec::new();
    for _ in 0..clients {
        let (http, url) = (http.clone(), url.clone());
        senders.push(tokio::spawn(async move {
            while Instant::now() < until {
                let _ = http
                    .get(&url)
                    .send()
                    .await
                    .and_then(|r| r.error_for_status());
            }
        }));
    }
    for sender in senders {
        let _ = sender.await;
    }
    let from = started.duration_since(origin.started()) + Duration::from_secs(1);
    let to = until.duration_since(origin.started());
    let served = origin
        .take_records()
        .iter()
        .filter(|r| !r.shed && r.answered() >= from && r.answered() < to)
        .count();
    served as f64 / (to - from).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity(workers: u32, service_ms: u64, queue_max: usize) -> Capacity {
        Capacity {
            workers,
            service: Duration::from_millis(service_ms),
            queue_max,
        }
    }

    #[tokio::test]
    async fn heads_are_read_with_their_body_length_and_whether_to_close() {
        let text = b"\r\nPOST /checkout?x=1 HTTP/1.1\r\nHost: o\r\nContent-Length: 3\r\n\r\nabc\
            GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
        let mut reader = BufReader::new(&text[..]);
        let first = read_head(&mut reader).await.unwrap();
        assert_eq!(
            first,
            Head {
                path: "/checkout".into(),
                body_bytes: 3,
                close: false,
                signature: None
            }
        );
        let mut body = [0u8; 3];
        reader.read_exact(&mut body).await.unwrap();
        let second = read_head(&mut reader).await.unwrap();
        assert_eq!((second.path.as_str(), second.close), ("/health", true));
        assert_eq!(read_head(&mut reader).await, None);
        let old = read_head(&mut BufReader::new(&b"GET / HTTP/1.0\r\n\r\n"[..])).await;
        assert!(old.unwrap().close);
    }

    #[test]
    fn capacity_is_workers_over_service_time() {
        assert_eq!(capacity(4, 100, 10).per_s(), 40.0);
        assert_eq!(capacity(1, 250, 10).per_s(), 4.0);
    }

    /// Waits until `check` holds of the origin (a test's ordering, not its figures).
    async fn until(origin: &Origin, check: impl Fn(&Origin) -> bool) {
        while !check(origin) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    fn send(http: &reqwest::Client, url: String) -> tokio::task::JoinHandle<u16> {
        let http = http.clone();
        tokio::spawn(async move {
            http.post(url)
                .body("{}")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    }

    #[tokio::test]
    async fn requests_queue_for_the_workers_and_the_health_check_waits_with_them() {
        let origin = Origin::start(capacity(1, 50, 100)).unwrap();
        let http = crate::common::http_client(4);
        let checkouts: Vec<_> = (0..3)
            .map(|_| send(&http, origin.url("/checkout")))
            .collect();
        // One in service, two waiting: the check comes after them.
        until(&origin, |o| o.waiting() == 2).await;
        let health = http.get(origin.url("/health")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        for checkout in checkouts {
            assert_eq!(checkout.await.unwrap(), 200);
        }
        let missing = http.get(origin.url("/nothing")).send().await.unwrap();
        assert_eq!(missing.status(), 404);
        let records = origin.take_records();
        assert_eq!(records.len(), 4);
        let health = records.iter().find(|r| r.kind == Kind::Health).unwrap();
        // Two checkouts' service at least was ahead of it on the one worker.
        assert!(health.waited >= Duration::from_millis(100), "{health:?}");
        assert!(health.latency >= health.waited + Duration::from_millis(50));
        assert!(origin.take_records().is_empty(), "taken out");
        origin.stop();
    }

    #[tokio::test]
    async fn past_its_queue_the_origin_sheds_requests() {
        let origin = Origin::start(capacity(1, 1_000, 1)).unwrap();
        let http = crate::common::http_client(4);
        let served = send(&http, origin.url("/checkout"));
        until(&origin, |o| o.shared.workers.available_permits() == 0).await;
        let queued = send(&http, origin.url("/checkout"));
        until(&origin, |o| o.waiting() == 1).await;
        // The one worker busy and the one place in the queue taken.
        for _ in 0..2 {
            assert_eq!(send(&http, origin.url("/checkout")).await.unwrap(), 503);
        }
        assert_eq!((served.await.unwrap(), queued.await.unwrap()), (200, 200));
        let records = origin.take_records();
        assert_eq!(records.iter().filter(|r| r.shed).count(), 2);
        assert_eq!(records.iter().filter(|r| !r.shed).count(), 2);
    }
}
