//! Node CPU per credential a join signs or reads (issue 26, item 3: an
//! admitted join cost 140 µs of node CPU against 51 µs for one that waits;
//! the difference is mostly the pass it signs).
//!
//! `cargo bench --bench credentials` times, each over many calls, with the
//! process's CPU time per call beside the wall time: the pass signed for an
//! admission (Ed25519), the ticket every join signs (HS256), and reading
//! each back as `/api/verify` and a returning visitor do; ed25519-dalek's
//! signature and check (the signer and verifier before) beside them, alone:
//! without the claims, base64url and header that `issue_pass` and
//! `read_pass` also spend. The build before's own `issue_pass` and
//! `read_pass` are the figures to compare (run it in a worktree).

mod common;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::measure;
use waitroom::words::credentials::{Credentials, ticket_expiry};
use waitroom::words::{RoomId, VisitorId};

const NOW: u64 = 1_767_225_600_000;
const CALLS: usize = 200_000;

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` only checks that this builds.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let credentials = Credentials::from_secret("a-secret-of-the-shape-the-server-takes-0123456789");
    let room = RoomId::parse("drop").unwrap();
    let visitors: Vec<VisitorId> = (0..1_000).map(|_| VisitorId::random()).collect();
    let pass = credentials.issue_pass(&room, visitors[0], NOW, NOW + 600_000);
    let ticket = credentials.issue_ticket(&room, visitors[0], NOW);

    measure("issue_pass (Ed25519)", CALLS, |i| {
        let visitor = visitors[i % visitors.len()];
        std::hint::black_box(credentials.issue_pass(&room, visitor, NOW + i as u64, NOW + 600_000));
    });
    // The signer before (issue 26, item 3): ed25519-dalek's, its key
    // prepared once too, over the same signed parts.
    let signer_before = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let signed_parts: Vec<String> = visitors
        .iter()
        .enumerate()
        .map(|(i, visitor)| {
            let pass = credentials.issue_pass(&room, *visitor, NOW + i as u64, NOW + 600_000);
            pass.rsplit_once('.').unwrap().0.to_string()
        })
        .collect();
    measure(
        "ed25519-dalek's signature alone (the signer before)",
        CALLS,
        |i| {
            use ed25519_dalek::Signer;
            let signature = signer_before.sign(signed_parts[i % signed_parts.len()].as_bytes());
            std::hint::black_box(URL_SAFE_NO_PAD.encode(signature.to_bytes()));
        },
    );
    measure("issue_ticket (HS256)", CALLS, |i| {
        let visitor = visitors[i % visitors.len()];
        std::hint::black_box(credentials.issue_ticket_returning(
            &room,
            visitor,
            NOW,
            None,
            ticket_expiry(NOW, None),
        ));
    });
    measure("read_pass (Ed25519)", CALLS, |_| {
        assert!(std::hint::black_box(credentials.read_pass(&pass, Some(&room), NOW)).is_ok());
    });
    // The verifier before: ed25519-dalek's, its key prepared once too,
    // checking the same pass's signature.
    let public_x = serde_json::to_value(credentials.jwks()).unwrap()["keys"][0]["x"]
        .as_str()
        .unwrap()
        .to_string();
    let public: [u8; 32] = URL_SAFE_NO_PAD
        .decode(public_x)
        .unwrap()
        .try_into()
        .unwrap();
    let verifier_before = ed25519_dalek::VerifyingKey::from_bytes(&public).unwrap();
    let (signed, signature) = pass.rsplit_once('.').unwrap();
    measure(
        "ed25519-dalek's check alone (the verifier before)",
        CALLS,
        |_| {
            use ed25519_dalek::Verifier;
            let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
            let signature = ed25519_dalek::Signature::from_slice(&signature).unwrap();
            assert!(
                std::hint::black_box(verifier_before.verify(signed.as_bytes(), &signature)).is_ok()
            );
        },
    );
    measure("read_ticket (HS256)", CALLS, |_| {
        assert!(std::hint::black_box(credentials.read_ticket(&room, &ticket, NOW)).is_ok());
    });
}
