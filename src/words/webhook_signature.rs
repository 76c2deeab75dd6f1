//! The webhook's signature (api.md, "Step away: notifications"): the
//! `Waitroom-Signature` header, `t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
//! "<t>.<body>")>`, by which a receiver knows an event is the room's and
//! recent (the time is signed with the body, so an old request replayed
//! later is told apart by its `t`). The receivers' side is in
//! `integrations/webhook-receivers/`.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header the signature rides in.
pub const HEADER: &str = "Waitroom-Signature";

/// The header's value for `body`, sent at `t_unix_s`, under the room's
/// `notify_webhook_secret`.
pub fn signature(secret: &str, t_unix_s: u64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(t_unix_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("t={t_unix_s},v1={hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed apart from this code, with Python's standard library:
    ///
    /// ```text
    /// python3 -c 'import hmac, hashlib, sys
    /// secret, t, body = sys.argv[1].encode(), int(sys.argv[2]), sys.argv[3].encode()
    /// print(hmac.new(secret, b"%d." % t + body, hashlib.sha256).hexdigest())' \
    ///   "$SECRET" 1767225600 "$BODY"
    /// ```
    #[test]
    fn the_signature_is_hmac_sha256_of_the_time_a_dot_and_the_body() {
        let secret = "whsec-an-example-secret-of-32-characters+";
        let body = br#"{"id":"1767225600000-0","type":"near","room":"spring-sale","visitor":"42","position":17,"resume_url":"https://queue.example/r/spring-sale?code=abc","at":"2026-01-01T00:00:00Z","contact":"+15550100"}"#;
        assert_eq!(
            signature(secret, 1_767_225_600, body),
            "t=1767225600,v1=60b4a6b69d3cd4f61509182a380b9301fb1f0931c16987f67369891c7d76659b"
        );
        assert_eq!(
            signature("k", 0, b""),
            "t=0,v1=6b4a4b8b3c40f1e8f53a3d36682e5f99f7ad2ac1df1c93dfe336f329167641e7"
        );
    }

    #[test]
    fn the_time_and_the_body_are_both_signed() {
        let secret = "whsec-an-example-secret-of-32-characters+";
        let one = signature(secret, 100, b"{}");
        assert_ne!(one, signature(secret, 101, b"{}"));
        assert_ne!(one, signature(secret, 100, b"{ }"));
        assert_ne!(
            one,
            signature("another-secret-of-32-characters!!", 100, b"{}")
        );
        // "1" + "0.{}" is not "10" + ".{}": the dot is after the whole time.
        assert_ne!(signature(secret, 1, b"0.{}"), signature(secret, 10, b".{}"));
    }
}
