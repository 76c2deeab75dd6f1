//! Web push (api.md, "Step away: notifications"; RFC 8030): where a push
//! endpoint may point (`--push-hosts`), the deployment's VAPID key
//! (RFC 8292), and the request that carries one event to a browser's push
//! service, its body encrypted for that browser alone (RFC 8291,
//! `aes128gcm`). No I/O here: the delivery loop sends the request through
//! the guarded client (`live::outbound`, design rule 17) and reads the
//! answer with [`push_outcome`].
//!
//! Crates: `ece-native` for RFC 8188's record (the HKDF of the content key
//! and nonce, AES-128-GCM, the header); RFC 8291's key agreement over it
//! (an ECDH on P-256, two HMACs) and RFC 8292's ES256 token are written
//! here over `p256`, which the tree already had for jsonwebtoken's ES256.
//! Not `web-push-native` (ece-native's sibling, which does this too):
//! it keeps the salt and the ephemeral key to itself, so RFC 8291's own
//! test vector could not be checked against the code that runs, and its
//! VAPID brings a second JWT library (jwt-simple). Not `web-push`: it
//! brings its own HTTP client and OpenSSL. Not `ece`: OpenSSL or NSS.
//!
//! Key rotation: the VAPID key derives from `--secret`, so it changes
//! with it. A browser's subscription is bound to the key it was made
//! under (its `applicationServerKey`), and the push service refuses a
//! message signed by another with 403 (RFC 8292, section 4.2; some answer
//! 401). The subscription does not say which key it was made under, so
//! the sender tries the current key and, when the push service refuses
//! it ([`PushOutcome::KeyRefused`]), the previous one
//! (`Credentials::vapid_keys`, current first): a second request only for
//! subscriptions made before a rotation, and only while it lasts.

use std::fmt;

use base64::Engine;
use base64::alphabet::URL_SAFE;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::{PublicKey, SecretKey};
use rand::RngCore;
use sha2::Sha256;
use url::{Host, Url};

use crate::words::clock::Millis;
use crate::words::notify::PushSubscription;

/// `--push-hosts`' default: the push services of Chrome and Edge's
/// Chromium (FCM), Firefox (autopush), Safari (Apple) and legacy Edge
/// (WNS), each with its subdomains.
pub const DEFAULT_PUSH_HOSTS: &str =
    "fcm.googleapis.com,updates.push.services.mozilla.com,push.apple.com,notify.windows.com";

/// How long a push service keeps a message for a browser that is offline
/// (the `TTL` header): as long as an event is retried (api.md: 10 minutes);
/// a "come back" later than that is no use.
pub const PUSH_TTL_S: u64 = 600;

/// How long a VAPID token is good for: RFC 8292 allows 24 hours at most;
/// 12 leaves room for a push service's clock being ahead of ours.
pub const VAPID_TOKEN_S: u64 = 12 * 60 * 60;

/// The record size written in the body's header. A push service need take
/// no more than 4096 bytes of body (RFC 8030, section 7.2), and the message
/// is one record (RFC 8291, section 4), so it never reaches this size.
const RECORD_SIZE: u32 = 4096;

/// Salt (16), record size (4), key id length (1), the sender's key (65).
const HEADER_BYTES: usize = 86;

/// The largest payload that fits in 4096 bytes of body: the header, a
/// padding delimiter and the AEAD tag are added to it.
pub const MAX_PAYLOAD_BYTES: usize = RECORD_SIZE as usize - HEADER_BYTES - 1 - 16;

type HmacSha256 = Hmac<Sha256>;

/// Browsers write the keys unpadded; some libraries pad them.
const BASE64URL_ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

// --- Where an endpoint may point -------------------------------------------

/// One entry of `--push-hosts`: a domain name, which also admits its
/// subdomains (whole labels: `fcm.googleapis.com` admits
/// `a.fcm.googleapis.com`, never `xfcm.googleapis.com`), or an IP address,
/// admitted alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushHost(Host<String>);

/// Reads one `--push-hosts` entry the way a URL's host is read (lowercase,
/// IDN to punycode, IPv6 in brackets), so it compares with what
/// [`check_endpoint`] reads from an endpoint.
pub fn parse_push_host(given: &str) -> Result<PushHost, String> {
    let given = given.trim();
    let refuse = |why: &str| Err(format!("{given:?} is not a push host: {why}"));
    if given.is_empty() {
        return refuse("empty");
    }
    if given.contains(['/', ':', '@', '*']) && !given.starts_with('[') {
        return refuse(
            "write a host name alone, like fcm.googleapis.com (no scheme, port or path)",
        );
    }
    let host = match Host::parse(given) {
        Ok(host) => host,
        Err(error) => return refuse(&error.to_string()),
    };
    if let Host::Domain(name) = &host
        && (name.starts_with('.') || name.ends_with('.') || name.contains(".."))
    {
        return refuse("a host name neither starts nor ends with a dot");
    }
    Ok(PushHost(host))
}

/// The hosts push endpoints may be on (`--push-hosts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushHosts(Vec<PushHost>);

impl PushHosts {
    pub fn new(hosts: Vec<PushHost>) -> Self {
        Self(hosts)
    }

    /// The entries, as `Settings::push_hosts` holds them.
    pub fn into_hosts(self) -> Vec<PushHost> {
        self.0
    }

    fn admits(&self, host: &Host<&str>) -> bool {
        self.0
            .iter()
            .any(|PushHost(allowed)| match (allowed, host) {
                (Host::Domain(allowed), Host::Domain(host)) => {
                    host == allowed
                        || host
                            .strip_suffix(allowed.as_str())
                            .is_some_and(|sub| sub.ends_with('.'))
                }
                (Host::Ipv4(allowed), Host::Ipv4(host)) => allowed == host,
                (Host::Ipv6(allowed), Host::Ipv6(host)) => allowed == host,
                _ => false,
            })
    }
}

impl Default for PushHosts {
    fn default() -> Self {
        Self(
            DEFAULT_PUSH_HOSTS
                .split(',')
                .map(|host| parse_push_host(host).expect("the default push hosts parse"))
                .collect(),
        )
    }
}

/// Where a push may be sent: the endpoint as a URL, or why not (the HTTP
/// layer answers 400 with it). https on a host `--push-hosts` admits, on
/// the default port; plain http only on a loopback host that
/// `--push-hosts` names (tests' stand-in push services), on any port. No
/// user info (it would be sent as credentials), no fragment, and a host
/// written as a push service writes it: no IP address unless the list
/// names it, no trailing dot. Whatever the name resolves to is the
/// outbound client's to judge when it connects (no private address unless
/// `--outbound-allow-networks` names it), since a name can resolve
/// elsewhere tomorrow.
pub fn check_endpoint(hosts: &PushHosts, endpoint: &str) -> Result<Url, &'static str> {
    let url = Url::parse(endpoint).map_err(|_| "endpoint is not a URL")?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("endpoint must not carry a user or password");
    }
    if url.fragment().is_some() {
        return Err("endpoint must not have a fragment");
    }
    let host = url.host().ok_or("endpoint names no host")?;
    if let Host::Domain(name) = host
        && (name.is_empty() || name.ends_with('.'))
    {
        return Err("endpoint's host must not end with a dot");
    }
    if !hosts.admits(&host) {
        return Err("endpoint is not on a push service this server sends to (--push-hosts)");
    }
    match url.scheme() {
        "https" if url.port().is_none() || is_loopback(&host) => Ok(url),
        "https" => Err("endpoint must be on the https port"),
        "http" if is_loopback(&host) => Ok(url),
        _ => Err("endpoint must be https"),
    }
}

/// 127.0.0.0/8, ::1 or `localhost`: this machine, where a test runs its
/// stand-in push service.
fn is_loopback(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(name) => *name == "localhost",
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// A subscription as sent by the page, checked before it is kept: its
/// endpoint ([`check_endpoint`]) and keys that encrypt (a P-256 point and
/// a 16-byte secret), so a bad one is a 400 now, not a failure later.
pub fn check_subscription(
    hosts: &PushHosts,
    subscription: &PushSubscription,
) -> Result<Url, &'static str> {
    let url = check_endpoint(hosts, &subscription.endpoint)?;
    BrowserKeys::read(subscription)?;
    Ok(url)
}

// --- The VAPID key -------------------------------------------------------------

/// The deployment's VAPID key pair: P-256, derived from the secret
/// (`Credentials`), so every node signs with the same key and browsers
/// subscribe with its public half (`GET /api/push/key`).
pub struct VapidKey {
    signing: SigningKey,
    /// The uncompressed point (65 bytes), base64url without padding: what
    /// the page passes as `applicationServerKey` and the `k` of the header.
    public_key: String,
}

/// The private half is never shown.
impl fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VapidKey")
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

impl VapidKey {
    /// The key whose private scalar is `bytes`, if they are one (1 to the
    /// group order less one: all but about 2^-32 of 32-byte strings).
    pub fn from_scalar(bytes: &[u8; 32]) -> Option<Self> {
        let signing = SigningKey::from_slice(bytes).ok()?;
        let public_key =
            URL_SAFE_NO_PAD.encode(signing.verifying_key().to_encoded_point(false).as_bytes());
        Some(Self {
            signing,
            public_key,
        })
    }

    /// The first of `candidate(0)`, `candidate(1)`, … that is a key: the
    /// derivation from the secret, counted on in the unlikely case a
    /// derived value is out of range.
    pub fn first_valid(mut candidate: impl FnMut(u32) -> [u8; 32]) -> Self {
        (0..)
            .find_map(|counter| Self::from_scalar(&candidate(counter)))
            .expect("a valid scalar comes within a few tries")
    }

    /// The public key, base64url (65 bytes: 0x04, x, y).
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// The `Authorization` header's value for a push to `audience` (the
    /// endpoint's origin): `vapid t=<ES256 JWT>, k=<public key>` (RFC 8292,
    /// section 3). `subject` is how the push service's operator reaches
    /// ours: the deployment's public URL (`--public-url`) or a `mailto:`.
    pub fn authorization(&self, audience: &str, subject: &str, now: Millis) -> String {
        let token = self.token(audience, subject, now);
        format!("vapid t={token}, k={}", self.public_key)
    }

    fn token(&self, audience: &str, subject: &str, now: Millis) -> String {
        #[derive(serde::Serialize)]
        struct Claims<'a> {
            aud: &'a str,
            exp: u64,
            sub: &'a str,
        }
        let claims = Claims {
            aud: audience,
            exp: now / 1000 + VAPID_TOKEN_S,
            sub: subject,
        };
        let mut token = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(
            serde_json::to_vec(&claims).expect("claims serialize"),
            &mut token,
        );
        // RFC 6979's deterministic nonce; r and s, 32 bytes each (JWS's form).
        let signature: Signature = self.signing.sign(token.as_bytes());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature.to_bytes(), &mut token);
        token
    }
}

// --- The request ---------------------------------------------------------------

/// One push, ready to send: POST `body` to `url` with `headers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRequest {
    pub url: Url,
    /// `Authorization`, `Content-Encoding`, `Content-Type`, `TTL`, `Urgency`.
    pub headers: Vec<(&'static str, String)>,
    /// The payload, encrypted for the subscription's browser.
    pub body: Vec<u8>,
}

/// Why no request could be made for a subscription: it is no use retrying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    #[error("push subscription refused: {0}")]
    Subscription(&'static str),
    #[error("push payload of more than {MAX_PAYLOAD_BYTES} bytes")]
    PayloadTooLarge,
}

/// The request that pushes `payload` (the event's JSON) to the browser of
/// `subscription`, signed with `vapid` (`subject`: see
/// [`VapidKey::authorization`]): urgency high (the visitor is waiting for
/// it), kept by the push service for [`PUSH_TTL_S`]. Each call encrypts
/// anew (a fresh salt and ephemeral key).
pub fn push_request(
    subscription: &PushSubscription,
    hosts: &PushHosts,
    vapid: &VapidKey,
    subject: &str,
    payload: &[u8],
    now: Millis,
) -> Result<PushRequest, PushError> {
    let url = check_endpoint(hosts, &subscription.endpoint).map_err(PushError::Subscription)?;
    let browser = BrowserKeys::read(subscription).map_err(PushError::Subscription)?;
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(PushError::PayloadTooLarge);
    }
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let body = encrypt(payload, &browser, salt, &ephemeral_key());
    let audience = url.origin().ascii_serialization();
    let headers = vec![
        (
            "Authorization",
            vapid.authorization(&audience, subject, now),
        ),
        ("Content-Encoding", "aes128gcm".to_owned()),
        ("Content-Type", "application/octet-stream".to_owned()),
        ("TTL", PUSH_TTL_S.to_string()),
        ("Urgency", "high".to_owned()),
    ];
    Ok(PushRequest { url, headers, body })
}

/// A fresh key pair for one message (RFC 8291, section 3.1).
fn ephemeral_key() -> SecretKey {
    loop {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        if let Ok(key) = SecretKey::from_slice(&bytes) {
            return key;
        }
    }
}

/// What a browser's subscription encrypts for.
struct BrowserKeys {
    /// `p256dh`: the browser's ECDH public key.
    public: PublicKey,
    /// `auth`: the secret shared with the browser alone.
    auth: [u8; 16],
}

impl BrowserKeys {
    fn read(subscription: &PushSubscription) -> Result<Self, &'static str> {
        let p256dh = BASE64URL_ANY_PADDING
            .decode(&subscription.keys.p256dh)
            .map_err(|_| "keys.p256dh is not base64url")?;
        // Uncompressed, as the Push API hands it out (RFC 8291, section 3.1).
        if p256dh.len() != 65 {
            return Err("keys.p256dh must be an uncompressed P-256 point (65 bytes)");
        }
        let public = PublicKey::from_sec1_bytes(&p256dh)
            .map_err(|_| "keys.p256dh is not a point on P-256")?;
        let auth = BASE64URL_ANY_PADDING
            .decode(&subscription.keys.auth)
            .map_err(|_| "keys.auth is not base64url")?
            .try_into()
            .map_err(|_| "keys.auth must be 16 bytes")?;
        Ok(Self { public, auth })
    }
}

/// RFC 8291, section 3.4, with the salt and the sender's key given (a test
/// fixes them to the RFC's own example): the shared secret of an ECDH
/// between the sender's key and the browser's, combined with the browser's
/// `auth` into the input key of an RFC 8188 `aes128gcm` body of one
/// record, whose key id is the sender's public key.
fn encrypt(payload: &[u8], browser: &BrowserKeys, salt: [u8; 16], sender: &SecretKey) -> Vec<u8> {
    let sender_public = sender.public_key().to_encoded_point(false);
    let browser_public = browser.public.to_encoded_point(false);
    let shared = p256::ecdh::diffie_hellman(sender.to_nonzero_scalar(), browser.public.as_affine());
    // PRK_key = HMAC-SHA-256(auth_secret, ecdh_secret)
    let mut mac = HmacSha256::new_from_slice(&browser.auth).expect("HMAC takes any key length");
    mac.update(shared.raw_secret_bytes());
    let prk_key = mac.finalize().into_bytes();
    // IKM = HMAC-SHA-256(PRK_key, "WebPush: info" || 0x00 || ua_public || as_public || 0x01)
    let mut mac = HmacSha256::new_from_slice(&prk_key).expect("HMAC takes any key length");
    mac.update(b"WebPush: info\0");
    mac.update(browser_public.as_bytes());
    mac.update(sender_public.as_bytes());
    mac.update(&[1]);
    let ikm = mac.finalize().into_bytes();
    ece_native::encrypt(
        ikm,
        salt,
        sender_public.as_bytes(),
        std::iter::once(payload.to_vec()),
        RECORD_SIZE,
    )
    .expect("a payload of at most MAX_PAYLOAD_BYTES is one record")
}

// --- The answer ------------------------------------------------------------------

/// What a push service's answer means for the event and the subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// 2xx: the push service has it (201 Created, as RFC 8030 answers).
    Delivered,
    /// 404 or 410: the subscription has expired or the browser dropped it;
    /// drop it too (api.md), and send it nothing more.
    Gone,
    /// 401 or 403: the push service refused the VAPID key (RFC 8292: the
    /// subscription was made under another). Try the next of
    /// `Credentials::vapid_keys`; after the last, give up.
    KeyRefused,
    /// 429 or 5xx: try again later, within the event's retry window.
    Retry,
    /// Any other answer (400, 413, …): this request will never be taken.
    GiveUp,
}

pub fn push_outcome(status: u16) -> PushOutcome {
    match status {
        200..=299 => PushOutcome::Delivered,
        404 | 410 => PushOutcome::Gone,
        401 | 403 => PushOutcome::KeyRefused,
        429 | 500..=599 => PushOutcome::Retry,
        _ => PushOutcome::GiveUp,
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};

    use super::*;
    use crate::words::notify::PushKeys;

    fn b64(text: &str) -> Vec<u8> {
        BASE64URL_ANY_PADDING.decode(text).unwrap()
    }

    fn vapid(n: u8) -> VapidKey {
        VapidKey::from_scalar(&[n; 32]).unwrap()
    }

    fn hosts(list: &str) -> PushHosts {
        PushHosts::new(
            list.split(',')
                .map(|h| parse_push_host(h).unwrap())
                .collect(),
        )
    }

    /// A browser's side of a subscription: its key pair and auth secret.
    struct Browser {
        private: SecretKey,
        auth: [u8; 16],
    }

    impl Browser {
        fn new() -> Self {
            Self {
                private: ephemeral_key(),
                auth: rand::random(),
            }
        }

        fn subscription(&self, endpoint: &str) -> PushSubscription {
            PushSubscription {
                endpoint: endpoint.into(),
                keys: PushKeys {
                    p256dh: URL_SAFE_NO_PAD
                        .encode(self.private.public_key().to_encoded_point(false).as_bytes()),
                    auth: URL_SAFE_NO_PAD.encode(self.auth),
                },
            }
        }

        /// What a browser does with a push's body (RFC 8291, section 3.4,
        /// from its side): the sender's key from the header's key id.
        fn decrypt(&self, body: &[u8]) -> Vec<u8> {
            assert_eq!(
                u32::from_be_bytes(body[16..20].try_into().unwrap()),
                RECORD_SIZE
            );
            assert_eq!(
                body[20], 65,
                "the key id is the sender's uncompressed point"
            );
            let sender = PublicKey::from_sec1_bytes(&body[21..86]).unwrap();
            let shared =
                p256::ecdh::diffie_hellman(self.private.to_nonzero_scalar(), sender.as_affine());
            let mut mac = HmacSha256::new_from_slice(&self.auth).unwrap();
            mac.update(shared.raw_secret_bytes());
            let prk = mac.finalize().into_bytes();
            let mut mac = HmacSha256::new_from_slice(&prk).unwrap();
            mac.update(b"WebPush: info\0");
            mac.update(self.private.public_key().to_encoded_point(false).as_bytes());
            mac.update(&body[21..86]);
            mac.update(&[1]);
            ece_native::decrypt(mac.finalize().into_bytes(), body.to_vec()).unwrap()
        }
    }

    #[test]
    fn the_body_is_rfc_8291s_own_example_given_its_salt_and_keys() {
        // RFC 8291, section 5 (Appendix A's intermediate values aside).
        let browser = BrowserKeys {
            public: PublicKey::from_sec1_bytes(&b64(
                "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
            ))
            .unwrap(),
            auth: b64("BTBZMqHH6r4Tts7J_aSIgg").try_into().unwrap(),
        };
        let sender =
            SecretKey::from_slice(&b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")).unwrap();
        let salt = b64("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let body = encrypt(
            b"When I grow up, I want to be a watermelon",
            &browser,
            salt,
            &sender,
        );
        assert_eq!(
            URL_SAFE_NO_PAD.encode(&body),
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        );
    }

    #[test]
    fn a_push_request_carries_the_headers_and_a_body_only_its_browser_reads() {
        let browser = Browser::new();
        let vapid = vapid(1);
        let key = vapid.public_key().to_owned();
        let subscription = browser.subscription("https://fcm.googleapis.com/fcm/send/abc");
        let request = push_request(
            &subscription,
            &PushHosts::default(),
            &vapid,
            "https://queue.example",
            br#"{"type":"near"}"#,
            1_767_225_600_000,
        )
        .unwrap();
        assert_eq!(
            request.url.as_str(),
            "https://fcm.googleapis.com/fcm/send/abc"
        );
        let header = |name: &str| {
            request
                .headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
                .unwrap()
        };
        assert_eq!(header("Content-Encoding"), "aes128gcm");
        assert_eq!(header("Content-Type"), "application/octet-stream");
        assert_eq!(header("TTL"), "600");
        assert_eq!(header("Urgency"), "high");
        let authorization = header("Authorization");
        assert!(authorization.starts_with("vapid t="), "{authorization}");
        assert!(
            authorization.ends_with(&format!(", k={key}")),
            "{authorization}"
        );
        assert_eq!(browser.decrypt(&request.body), br#"{"type":"near"}"#);
        // Another browser's keys do not open it.
        let again = push_request(
            &subscription,
            &PushHosts::default(),
            &vapid,
            "https://queue.example",
            br#"{"type":"near"}"#,
            1_767_225_600_000,
        )
        .unwrap();
        assert_ne!(again.body, request.body, "a fresh salt and key each time");
        let stranger = Browser::new();
        let stolen = Browser {
            private: stranger.private,
            auth: browser.auth,
        };
        assert!(std::panic::catch_unwind(|| stolen.decrypt(&request.body)).is_err());
    }

    #[test]
    fn a_push_request_refuses_bad_subscriptions_and_oversized_payloads() {
        let vapid = vapid(1);
        let browser = Browser::new();
        let request = |subscription: &PushSubscription, payload: &[u8]| {
            push_request(
                subscription,
                &PushHosts::default(),
                &vapid,
                "mailto:ops@example.com",
                payload,
                0,
            )
        };
        let good = browser.subscription("https://fcm.googleapis.com/x");
        assert!(request(&good, &[b'x'; MAX_PAYLOAD_BYTES]).is_ok());
        assert_eq!(
            request(&good, &[b'x'; MAX_PAYLOAD_BYTES + 1]),
            Err(PushError::PayloadTooLarge)
        );
        let elsewhere = browser.subscription("https://push.example.com/x");
        assert!(matches!(
            request(&elsewhere, b"x"),
            Err(PushError::Subscription(_))
        ));
        for (p256dh, auth) in [
            ("BAAA", URL_SAFE_NO_PAD.encode(browser.auth)),
            // 65 bytes, but no point of the curve.
            (
                URL_SAFE_NO_PAD.encode([4u8; 65]).as_str(),
                URL_SAFE_NO_PAD.encode(browser.auth),
            ),
            (good.keys.p256dh.as_str(), URL_SAFE_NO_PAD.encode([0u8; 15])),
            (good.keys.p256dh.as_str(), "not base64!".to_owned()),
        ] {
            let mut bad = good.clone();
            bad.keys.p256dh = p256dh.to_owned();
            bad.keys.auth = auth;
            assert!(
                check_subscription(&PushHosts::default(), &bad).is_err(),
                "{p256dh} {}",
                bad.keys.auth
            );
            assert!(matches!(
                request(&bad, b"x"),
                Err(PushError::Subscription(_))
            ));
        }
        // Padded keys, as some libraries write them, are read too.
        let mut padded = good.clone();
        padded.keys.auth = format!("{}==", padded.keys.auth);
        assert!(check_subscription(&PushHosts::default(), &padded).is_ok());
    }

    #[test]
    fn the_vapid_token_is_an_es256_jwt_for_the_endpoints_origin() {
        let vapid = vapid(1);
        let point = b64(vapid.public_key());
        assert_eq!((point.len(), point[0]), (65, 4));
        let now = 1_767_225_600_000;
        let authorization =
            vapid.authorization("https://fcm.googleapis.com", "https://q.example", now);
        let token = authorization
            .strip_prefix("vapid t=")
            .and_then(|rest| rest.split_once(", k="))
            .map(|(token, _)| token)
            .unwrap();
        let key = DecodingKey::from_ec_components(
            &URL_SAFE_NO_PAD.encode(&point[1..33]),
            &URL_SAFE_NO_PAD.encode(&point[33..]),
        )
        .unwrap();
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(&["https://fcm.googleapis.com"]);
        validation.validate_exp = false;
        let claims = jsonwebtoken::decode::<serde_json::Value>(token, &key, &validation)
            .unwrap()
            .claims;
        assert_eq!(claims["sub"], "https://q.example");
        assert_eq!(claims["exp"], now / 1000 + 12 * 3600);
        // Another key's token does not verify.
        let theirs = self::vapid(2).authorization("https://fcm.googleapis.com", "x", now);
        let theirs = theirs
            .strip_prefix("vapid t=")
            .unwrap()
            .split_once(", k=")
            .unwrap()
            .0;
        assert!(jsonwebtoken::decode::<serde_json::Value>(theirs, &key, &validation).is_err());
    }

    #[test]
    fn a_vapid_key_is_any_scalar_in_range_and_never_shows_its_private_half() {
        // Out-of-range scalars are skipped: zero, and the group order and above.
        assert!(VapidKey::from_scalar(&[0; 32]).is_none());
        assert!(VapidKey::from_scalar(&[0xff; 32]).is_none());
        let mut asked = Vec::new();
        let found = VapidKey::first_valid(|counter| {
            asked.push(counter);
            if counter < 2 { [0xff; 32] } else { [7; 32] }
        });
        assert_eq!(asked, [0, 1, 2]);
        assert_eq!(
            found.public_key(),
            VapidKey::from_scalar(&[7; 32]).unwrap().public_key()
        );
        assert!(!format!("{found:?}").contains("signing"));
    }

    #[test]
    fn endpoints_must_be_https_on_a_listed_push_service() {
        let defaults = PushHosts::default();
        for ok in [
            "https://fcm.googleapis.com/fcm/send/abc:def",
            "https://a.fcm.googleapis.com/x",
            "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
            "https://web.push.apple.com/QGuQyavXut",
            "https://wns2-by3p.notify.windows.com/w/?token=BQYAAA",
            "HTTPS://FCM.GOOGLEAPIS.COM/x",
            "https://fcm.googleapis.com:443/x",
            // IDNA maps the fullwidth dot to a dot: the same host.
            "https://fcm\u{ff0e}googleapis.com/x",
        ] {
            assert!(check_endpoint(&defaults, ok).is_ok(), "{ok}");
        }
        assert_eq!(
            check_endpoint(&defaults, "HTTPS://FCM.googleapis.COM:443/X")
                .unwrap()
                .as_str(),
            "https://fcm.googleapis.com/X"
        );
        for refused in [
            "",
            "fcm.googleapis.com/x",
            "http://fcm.googleapis.com/x",
            "ftp://fcm.googleapis.com/x",
            "wss://fcm.googleapis.com/x",
            "https://xfcm.googleapis.com/x",
            "https://googleapis.com/x",
            "https://evilfcm.googleapis.com.attacker.example/x",
            "https://fcm.googleapis.com.attacker.example/x",
            "https://fcm.googleapis.com./x",
            "https://user@fcm.googleapis.com/x",
            "https://user:pw@fcm.googleapis.com/x",
            "https://:pw@fcm.googleapis.com/x",
            "https://fcm.googleapis.com@attacker.example/x",
            "https://fcm.googleapis.com:443@attacker.example/x",
            "https://attacker.example#@fcm.googleapis.com/",
            "https://attacker.example\\@fcm.googleapis.com/",
            "https://attacker.example/?fcm.googleapis.com",
            "https://fcm.googleapis.com%2eattacker.example/x",
            "https://fcm.googleapis.com:8443/x",
            "https://fcm.googleapis.com:80/x",
            "https://fcm.googleapis.com/x#frag",
            "https://142.250.74.10/x",
            "https://[2a00:1450:4001::200a]/x",
            "https://127.0.0.1/x",
            "https://0x7f000001/x",
            "http://localhost/x",
            "http://127.0.0.1:8080/x",
            // A look-alike: a Greek omicron is punycoded, and not listed.
            "https://fcm.googleapis.c\u{3bf}m/x",
            "https://xn--fcm-googleapis-com/x",
        ] {
            assert!(check_endpoint(&defaults, refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn plain_http_is_for_a_listed_loopback_host_alone() {
        let test = hosts("127.0.0.1,localhost,[::1],push.example.com");
        for ok in [
            "http://127.0.0.1:40123/push/1",
            "http://localhost:40123/push/1",
            "http://[::1]:40123/push/1",
            "https://127.0.0.1:40123/push/1",
            "https://push.example.com/x",
        ] {
            assert!(check_endpoint(&test, ok).is_ok(), "{ok}");
        }
        for refused in [
            // Loopback, but not named.
            "http://127.0.0.2:40123/x",
            "http://[::ffff:127.0.0.1]:1/x",
            // Named, but not loopback.
            "http://push.example.com/x",
            "https://push.example.com:8443/x",
            "http://sub.localhost/x",
            "http://u:p@127.0.0.1:1/x",
        ] {
            assert!(check_endpoint(&test, refused).is_err(), "{refused}");
        }
        // 127.1 is 127.0.0.1 written short: the same host when listed.
        assert!(check_endpoint(&test, "http://127.0.0.1:1/x").is_ok());
        assert_eq!(
            check_endpoint(&hosts("127.0.0.1"), "http://127.1:1/x")
                .unwrap()
                .host_str(),
            Some("127.0.0.1")
        );
    }

    #[test]
    fn push_hosts_read_as_url_hosts_and_refuse_anything_else() {
        assert_eq!(
            parse_push_host(" FCM.googleapis.com "),
            parse_push_host("fcm.googleapis.com")
        );
        assert_eq!(
            parse_push_host("bücher.example").unwrap(),
            parse_push_host("xn--bcher-kva.example").unwrap()
        );
        assert!(parse_push_host("127.0.0.1").is_ok());
        assert!(parse_push_host("[::1]").is_ok());
        for refused in [
            "",
            "https://fcm.googleapis.com",
            "fcm.googleapis.com/",
            "fcm.googleapis.com:443",
            "*.googleapis.com",
            ".googleapis.com",
            "googleapis.com.",
            "a..b",
            "user@host",
            "::1",
            "a b",
        ] {
            assert!(parse_push_host(refused).is_err(), "{refused:?}");
        }
        // An IDN entry admits the endpoint written either way.
        let listed = hosts("bücher.example");
        assert!(check_endpoint(&listed, "https://push.bücher.example/x").is_ok());
        assert!(check_endpoint(&listed, "https://push.xn--bcher-kva.example/x").is_ok());
    }

    #[test]
    fn a_push_services_answer_says_what_to_do_next() {
        for (status, outcome) in [
            (200, PushOutcome::Delivered),
            (201, PushOutcome::Delivered),
            (202, PushOutcome::Delivered),
            (404, PushOutcome::Gone),
            (410, PushOutcome::Gone),
            (401, PushOutcome::KeyRefused),
            (403, PushOutcome::KeyRefused),
            (429, PushOutcome::Retry),
            (500, PushOutcome::Retry),
            (503, PushOutcome::Retry),
            (400, PushOutcome::GiveUp),
            (413, PushOutcome::GiveUp),
            (301, PushOutcome::GiveUp),
        ] {
            assert_eq!(push_outcome(status), outcome, "{status}");
        }
    }
}
