//! Node CPU per credential a join signs or reads (issue 26, item 3: an
//! admitted join cost 140 µs of node CPU against 51 µs for one that waits;
//! the difference is mostly the pass it signs).
//!
//! `cargo bench --bench credentials` times, each over many calls, with the
//! process's CPU time per call beside the wall time: the pass signed for an
//! admission (Ed25519), the ticket every join signs (HS256), and reading
//! each back as `/api/verify` and a returning visitor do; the paths before
//! through jsonwebtoken beside them.

mod common;

use common::measure;
use waitroom::words::credentials::Credentials;
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
    let ticket = credentials.issue_ticket_returning(&room, visitors[0], NOW, None);

    measure("issue_pass (Ed25519)", CALLS, |i| {
        let visitor = visitors[i % visitors.len()];
        std::hint::black_box(credentials.issue_pass(&room, visitor, NOW + i as u64, NOW + 600_000));
    });
    // The path before (issue 26, item 3): jsonwebtoken's `encode`, which
    // rebuilds the Ed25519 key from PKCS#8 at every call; same claims.
    let before_key = {
        use ed25519_dalek::pkcs8::EncodePrivateKey;
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        jsonwebtoken::EncodingKey::from_ed_der(key.to_pkcs8_der().unwrap().as_bytes())
    };
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("kid-of-twelve-bytes".into());
    measure(
        "jsonwebtoken::encode of a pass (the path before)",
        CALLS,
        |i| {
            let visitor = visitors[i % visitors.len()];
            let claims = serde_json::json!({
                "sub": visitor.to_string(), "room": "drop", "iat": NOW / 1000,
                "exp": (NOW + 600_000) / 1000, "jti": format!("{visitor}.{}", NOW + i as u64),
            });
            std::hint::black_box(jsonwebtoken::encode(&header, &claims, &before_key).unwrap());
        },
    );
    measure("issue_ticket (HS256)", CALLS, |i| {
        let visitor = visitors[i % visitors.len()];
        std::hint::black_box(credentials.issue_ticket_returning(&room, visitor, NOW, None));
    });
    measure("read_pass (Ed25519)", CALLS, |_| {
        assert!(std::hint::black_box(credentials.read_pass(&pass, Some(&room), NOW)).is_ok());
    });
    // The path before: jsonwebtoken's `decode`, with the key its `kid`
    // names, which builds the Ed25519 key from its bytes at every call.
    let public_x = serde_json::to_value(credentials.jwks()).unwrap()["keys"][0]["x"]
        .as_str()
        .unwrap()
        .to_string();
    let before_key = jsonwebtoken::DecodingKey::from_ed_components(&public_x).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.validate_exp = false;
    validation.required_spec_claims = ["exp".to_string(), "sub".to_string()].into();
    measure(
        "jsonwebtoken::decode of a pass (the path before)",
        CALLS,
        |_| {
            let kid = jsonwebtoken::decode_header(&pass).unwrap().kid.unwrap();
            assert!(!kid.is_empty());
            let read = jsonwebtoken::decode::<serde_json::Value>(&pass, &before_key, &validation);
            assert!(std::hint::black_box(read).is_ok());
        },
    );
    measure("read_ticket (HS256)", CALLS, |_| {
        assert!(std::hint::black_box(credentials.read_ticket(&room, &ticket)).is_ok());
    });
}
