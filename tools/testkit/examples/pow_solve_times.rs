//! How long headless Chromium takes to solve the proof of work at each
//! difficulty (issue 12).
//!
//! `cargo run --release -p waitroom-testkit --example pow_solve_times`
//! starts the app (memory store) and a room per difficulty, opens one
//! headless Chromium session on a page of the app (`/healthz`: same origin,
//! no scripts of its own), and for each difficulty runs the page's own steps
//! in the page: fetch `/api/rooms/<room>/challenge`, solve it in
//! `new Worker('/static/pow-worker.js')`, which answers `{number, took}`.
//! Each solution is then sent to the server as a join (`{"pow": ...}`),
//! which must answer 200, so every time counted is of an accepted solution.
//!
//! Prints per difficulty `maxnumber`, the worker's `took` (median, p10, p90,
//! max, in ms), the page's time from fetching the challenge to the answer,
//! and the worker's rate (numbers tried per ms, over all solves), from which
//! the expected time (half of `maxnumber`) and the worst (all of it) follow.
//!
//! Options: `--solves N` (15), `--difficulties 1,2,5,10,20`, and
//! `--batched` to also time a worker that asks `crypto.subtle` for 1,000
//! digests at a time (`Promise.all`) instead of awaiting each, given to the
//! page as a blob (with the page's Content-Security-Policy set aside for the
//! session, which would refuse it): a comparison, not what the waiting page
//! runs.
//! Needs Debian's `chromium` and `chromium-driver` (see `browser.rs`).

use std::time::Duration;

use fantoccini::Client;
use fantoccini::wd::TimeoutConfiguration;
use serde_json::{Value, json};
use waitroom_testkit::TestApp;
use waitroom_testkit::browser::Driver;

/// Fetches a challenge, solves it in a worker, answers what it took and the
/// payload a join carries (base64 of ALTCHA's payload JSON).
const SOLVE: &str = r#"
const [room, workerUrl, done] = arguments;
(async () => {
  const started = performance.now();
  const res = await fetch('/api/rooms/' + room + '/challenge', { cache: 'no-store' });
  if (!res.ok) throw new Error('challenge answered ' + res.status);
  const c = await res.json();
  const worker = new Worker(workerUrl);
  const answer = await new Promise((resolve, reject) => {
    worker.onmessage = (e) => resolve(e.data);
    worker.onerror = (e) => reject(new Error('worker: ' + e.message));
    worker.postMessage({ challenge: c.challenge, salt: c.salt, maxnumber: c.maxnumber });
  });
  worker.terminate();
  const total = performance.now() - started;
  const payload = btoa(JSON.stringify({
    algorithm: c.algorithm, challenge: c.challenge, number: answer.number,
    salt: c.salt, signature: c.signature,
  }));
  done({ ok: true, took: answer.took, number: answer.number, maxnumber: c.maxnumber, total, payload });
})().catch((e) => done({ ok: false, error: String(e) }));
"#;

/// The comparison worker: the shipped one's loop, 1,000 digests per await.
const BATCHED_WORKER: &str = r#"
self.onmessage = async function (event) {
  const c = event.data;
  const encoder = new TextEncoder();
  const started = Date.now();
  const batch = 1000;
  for (let first = 0; first <= c.maxnumber; first += batch) {
    const last = Math.min(first + batch - 1, c.maxnumber);
    const pending = [];
    for (let n = first; n <= last; n++) {
      pending.push(crypto.subtle.digest('SHA-256', encoder.encode(c.salt + n)));
    }
    const digests = await Promise.all(pending);
    for (let i = 0; i < digests.length; i++) {
      if (hex(digests[i]) === c.challenge) {
        self.postMessage({ number: first + i, took: Date.now() - started });
        return;
      }
    }
  }
  self.postMessage({ number: null, took: Date.now() - started });
};
function hex(buffer) {
  const bytes = new Uint8Array(buffer);
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
  return out;
}
"#;

struct Options {
    solves: usize,
    difficulties: Vec<u32>,
    batched: bool,
}

fn options() -> Options {
    let mut options = Options {
        solves: 15,
        difficulties: vec![1, 2, 5, 10, 20],
        batched: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--solves" => options.solves = args.next().and_then(|n| n.parse().ok()).unwrap(),
            "--difficulties" => {
                options.difficulties = args
                    .next()
                    .unwrap()
                    .split(',')
                    .map(|d| d.trim().parse().unwrap())
                    .collect()
            }
            "--batched" => options.batched = true,
            other => panic!("unknown option {other} (--solves N, --difficulties 1,2,5, --batched)"),
        }
    }
    options
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    if std::env::var_os("RUST_LOG").is_none() {
        // SAFETY: no other thread runs yet.
        unsafe { std::env::set_var("RUST_LOG", "warn") };
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(options()));
}

async fn run(options: Options) {
    let chromium = std::process::Command::new(waitroom_testkit::browser::tool(
        "WAITROOM_CHROMIUM",
        "/usr/bin/chromium",
    ))
    .arg("--version")
    .output()
    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    .unwrap_or_default();
    println!(
        "{chromium}, headless; {} solves per difficulty",
        options.solves
    );

    let app = TestApp::spawn().await;
    let driver = Driver::start().await;
    let browser = driver.browser(800, 600, json!({})).await;
    browser
        .update_timeouts(TimeoutConfiguration::new(
            Some(Duration::from_secs(600)),
            None,
            None,
        ))
        .await
        .unwrap();
    browser.goto(&app.url("/healthz")).await.unwrap();
    let mut workers = vec![("shipped", "/static/pow-worker.js".to_string())];
    if options.batched {
        // The app's Content-Security-Policy (worker-src 'self') rightly
        // refuses a blob worker: have Chromium set it aside for this session
        // (chromedriver's CDP passthrough), then load the page again.
        let session = browser.session_id().await.unwrap().unwrap();
        let bypass = app
            .http
            .post(format!(
                "{}/session/{session}/goog/cdp/execute",
                driver.url()
            ))
            .json(&json!({"cmd": "Page.setBypassCSP", "params": {"enabled": true}}))
            .send()
            .await
            .unwrap();
        assert!(
            bypass.status().is_success(),
            "Page.setBypassCSP: {bypass:?}"
        );
        browser.refresh().await.unwrap();
        let url = browser
            .execute(
                "return URL.createObjectURL(new Blob([arguments[0]], { type: 'text/javascript' }));",
                vec![json!(BATCHED_WORKER)],
            )
            .await
            .unwrap();
        workers.push(("batched", url.as_str().unwrap().to_string()));
    }

    for &difficulty in &options.difficulties {
        let room = format!("pow-{difficulty}");
        app.create_room(&room, json!({"pow_difficulty": difficulty}))
            .await;
        for (name, worker) in &workers {
            measure(
                &app,
                &browser,
                &room,
                difficulty,
                name,
                worker,
                options.solves,
            )
            .await;
        }
    }
    browser.close().await.unwrap();
}

async fn measure(
    app: &TestApp,
    browser: &Client,
    room: &str,
    difficulty: u32,
    name: &str,
    worker: &str,
    solves: usize,
) {
    let mut took = Vec::new();
    let mut total = Vec::new();
    let (mut numbers, mut took_sum, mut maxnumber) = (0.0, 0.0, 0);
    for _ in 0..solves {
        let answer: Value = browser
            .execute_async(SOLVE, vec![json!(room), json!(worker)])
            .await
            .unwrap();
        assert_eq!(answer["ok"], true, "solving in the page: {answer}");
        assert!(answer["number"].is_u64(), "no number found: {answer}");
        let joined = app
            .http
            .post(app.url(&format!("/api/rooms/{room}/join")))
            .json(&json!({"pow": answer["payload"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(joined.status(), 200, "the server refused a solution");
        took.push(answer["took"].as_f64().unwrap());
        total.push(answer["total"].as_f64().unwrap());
        numbers += answer["number"].as_f64().unwrap();
        took_sum += answer["took"].as_f64().unwrap();
        maxnumber = answer["maxnumber"].as_u64().unwrap();
    }
    took.sort_by(f64::total_cmp);
    total.sort_by(f64::total_cmp);
    let rate = numbers / took_sum; // numbers tried per ms
    println!(
        "difficulty {difficulty:>2} ({name} worker), maxnumber {maxnumber}: {solves} accepted solves; \
         worker took median {:.0} ms, p10 {:.0}, p90 {:.0}, max {:.0}; \
         page (challenge fetched → answer) median {:.0} ms; \
         {rate:.1} numbers/ms, so expected {:.2} s (half of maxnumber), at most {:.2} s",
        percentile(&took, 0.5),
        percentile(&took, 0.1),
        percentile(&took, 0.9),
        took[took.len() - 1],
        percentile(&total, 0.5),
        maxnumber as f64 / 2.0 / rate / 1000.0,
        maxnumber as f64 / rate / 1000.0,
    );
}
