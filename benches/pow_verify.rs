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

mod common;

use std::time::Instant;

use common::measure;

use waitroom::words::RoomId;
use waitroom::words::pow;

/// The shape of the key the server derives from --secret (64 hex digits).
const KEY: &str = "5f2b8c0e9a1d4f6b3c7e8a2d5f0b9c1e4a7d2f6b8c3e0a5d9f1b4c7e2a6d8f0b";
const NOW: u64 = 1_767_225_600_000;
const SOLUTIONS: usize = 2_000;
const ROUNDS: usize = 250;
const CHALLENGES: usize = 500_000;

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
