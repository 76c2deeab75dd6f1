//! Server CPU per proof-of-work verification and per challenge issued
//! (issue 12).
//!
//! `cargo bench --bench pow_verify` makes challenges with
//! `waitroom::words::pow::challenge` and solves them with
//! `altcha_lib_rs::solve_challenge` (untimed), then times
//! `waitroom::words::pow::check` over them, every solution a distinct one,
//! in several rounds. It prints wall time per call (mean, p50, p99, each call
//! timed alone) and the process's CPU time per call (user + system from
//! getrusage over the whole timed loop, divided by its calls), so the CPU
//! figure holds on a machine where other work takes the cores. The work of a
//! verification (one SHA-256 and one HMAC-SHA-256, the JSON and base64) does
//! not depend on the difficulty, so the solutions are of difficulty 1.

use std::time::{Duration, Instant};

use waitroom::words::RoomId;
use waitroom::words::pow;

/// The shape of the key the server derives from --secret (64 hex digits).
const KEY: &str = "5f2b8c0e9a1d4f6b3c7e8a2d5f0b9c1e4a7d2f6b8c3e0a5d9f1b4c7e2a6d8f0b";
const NOW: u64 = 1_767_225_600_000;
const SOLUTIONS: usize = 2_000;
const ROUNDS: usize = 250;
const CHALLENGES: usize = 500_000;

/// User + system CPU of the whole process so far.
fn process_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given and reads nothing else.
    let usage = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()), 0);
        usage.assume_init()
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Times `call` `count` times; prints wall mean/p50/p99 and CPU per call.
fn measure(what: &str, count: usize, mut call: impl FnMut(usize)) {
    let mut each = Vec::with_capacity(count);
    let cpu_before = process_cpu();
    let started = Instant::now();
    for i in 0..count {
        let one = Instant::now();
        call(i);
        each.push(one.elapsed());
    }
    let wall = started.elapsed();
    let cpu = process_cpu() - cpu_before;
    each.sort_unstable();
    println!(
        "{what}: {count} calls in {:.3} s wall, {:.3} s CPU: CPU {:.2} µs per call; \
         wall per call mean {:.2} µs, p50 {:.2} µs, p99 {:.2} µs, max {:.1} µs",
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        micros(cpu) / count as f64,
        micros(wall) / count as f64,
        micros(percentile(&each, 0.50)),
        micros(percentile(&each, 0.99)),
        micros(each[count - 1]),
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` only checks that this builds.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let room = RoomId::parse("drop").unwrap();

    // Untimed: distinct solutions, as a browser would send them.
    let solving = Instant::now();
    let payloads: Vec<String> = (0..SOLUTIONS)
        .map(|_| {
            let challenge = pow::challenge(KEY, &room, 1, NOW);
            let number = altcha_lib_rs::solve_challenge(
                &challenge.challenge,
                &challenge.salt,
                Some(challenge.algorithm),
                Some(challenge.maxnumber),
                0,
            )
            .unwrap();
            let payload = serde_json::json!({
                "algorithm": "SHA-256", "challenge": challenge.challenge, "number": number,
                "salt": challenge.salt, "signature": challenge.signature,
            });
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                payload.to_string(),
            )
        })
        .collect();
    println!(
        "solved {SOLUTIONS} challenges of difficulty 1 (maxnumber {}) in {:.1} s, untimed",
        pow::max_number(1),
        solving.elapsed().as_secs_f64()
    );

    // A warm-up round, then the timed ones.
    for payload in &payloads {
        pow::check(&[KEY], payload, &room, NOW).unwrap();
    }
    measure(
        &format!("pow::check ({SOLUTIONS} distinct solutions × {ROUNDS} rounds)"),
        SOLUTIONS * ROUNDS,
        |i| {
            let solved = pow::check(&[KEY], &payloads[i % SOLUTIONS], &room, NOW);
            assert!(std::hint::black_box(solved).is_ok());
        },
    );
    measure("pow::challenge (difficulty 10)", CHALLENGES, |_| {
        std::hint::black_box(pow::challenge(KEY, &room, 10, NOW));
    });
}
