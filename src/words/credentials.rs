//! Everything signed: visitor tickets (HS256), passes (EdDSA JWTs, verifiable
//! offline through the JWKS) and operator sessions. Every key derives from the
//! deployment's one secret, so all nodes of a deployment agree. Also the one
//! thing signed by others: user tokens, minted by a room's site with the
//! room's `user_key`.

use aws_lc_rs::signature::{ED25519, Ed25519KeyPair, KeyPair, ParsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::words::clock::Millis;
use crate::words::notify::EventKind;
use crate::words::push::VapidKey;
use crate::words::return_url::PublicUrl;
use crate::words::{RoomId, VisitorId};

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialError {
    #[error("malformed or forged")]
    Invalid,
    #[error("issued for another room")]
    WrongRoom,
    #[error("expired")]
    Expired,
    /// Its `nbf` (a user token's) is still ahead.
    #[error("not valid yet")]
    NotYetValid,
}

/// The longest user token read: a JWT with a user id is a few hundred bytes.
pub const MAX_USER_TOKEN_BYTES: usize = 4096;
/// The longest user id kept.
const MAX_USER_ID_BYTES: usize = 256;
/// How far ahead of our clock a user token's `nbf` may be: the site's
/// clock and ours may differ a little, and a site commonly sets `nbf` to
/// the moment it signs (jsonwebtoken's default leeway is the same).
pub const USER_TOKEN_NBF_LEEWAY_MS: Millis = 60_000;

#[derive(Debug, Deserialize)]
struct UserClaims {
    sub: String,
    room: String,
    exp: u64,
    nbf: Option<u64>,
}

/// Reads a user token: an HS256 JWT the room's site signed with the room's
/// `user_key`, claims `sub` (the user's id), `room`, `exp` and, if given,
/// `nbf` (both checked against our clock, so tests can drive it). A token
/// whose header has `crit` is refused: it names extensions the token must
/// not be accepted without understanding, and we understand none
/// (RFC 7515, 4.1.11). Returns the user's id.
pub fn read_user_token(
    token: &str,
    user_key: &str,
    room: &RoomId,
    now: Millis,
) -> Result<String, CredentialError> {
    if token.len() > MAX_USER_TOKEN_BYTES {
        return Err(CredentialError::Invalid);
    }
    let mut validation = Validation::new(Algorithm::HS256);
    validation.validate_exp = false;
    validation.required_spec_claims = ["exp".to_string(), "sub".to_string()].into();
    let token = jsonwebtoken::decode::<UserClaims>(
        token,
        &DecodingKey::from_secret(user_key.as_bytes()),
        &validation,
    )
    .map_err(|_| CredentialError::Invalid)?;
    if token.header.crit.is_some() {
        return Err(CredentialError::Invalid);
    }
    let claims = token.claims;
    if claims.room != room.as_str() {
        return Err(CredentialError::WrongRoom);
    }
    if claims.exp.saturating_mul(1000) <= now {
        return Err(CredentialError::Expired);
    }
    if claims
        .nbf
        .is_some_and(|nbf| nbf.saturating_mul(1000) > now + USER_TOKEN_NBF_LEEWAY_MS)
    {
        return Err(CredentialError::NotYetValid);
    }
    if claims.sub.is_empty() || claims.sub.len() > MAX_USER_ID_BYTES {
        return Err(CredentialError::Invalid);
    }
    Ok(claims.sub)
}

/// How long a ticket is good for at least, from its issue or its last
/// renewal: far longer than a place waits for a visitor who is away
/// (`abandon_after_s` is at most a day), while a ticket copied out of a log
/// or an address stops opening the place.
pub const TICKET_LIFETIME_MS: Millis = 7 * 24 * 60 * 60 * 1000;

/// When a ticket issued or renewed at `now` expires: a week on, or the
/// room's `closes_at` if that is later (the line drains after its
/// `closes_at`, and its tickets must last until it has).
pub fn ticket_expiry(now: Millis, closes_at: Option<Millis>) -> Millis {
    (now + TICKET_LIFETIME_MS).max(closes_at.unwrap_or(0))
}

/// A visitor's ticket: who they are, in which room, until when.
#[derive(Debug, Serialize, Deserialize)]
struct TicketClaims {
    sub: String,
    room: String,
    iat: u64,
    /// Seconds since the epoch. Absent from the tickets of the releases
    /// before it, which count as expiring `TICKET_LIFETIME_MS` after their
    /// `iat`, so a rolling upgrade keeps every place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exp: Option<u64>,
    /// Where the visitor asked to go back to once admitted (a forward-auth
    /// gate's `return`): kept signed here, not in the store, so that any
    /// node admitting them on any later tick knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ret: Option<String>,
}

/// One operator's logged-in session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSession {
    /// Random: names the session, so that logout can end it everywhere.
    pub id: String,
    /// When it ends however busy the operator is.
    pub expires_at: Millis,
}

impl AdminSession {
    pub fn new(expires_at: Millis) -> Self {
        Self {
            id: format!("{:032x}", rand::random::<u128>()),
            expires_at,
        }
    }
}

/// `GET /.well-known/jwks.json`: the public keys that verify passes.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// One Ed25519 public key, as RFC 8037 writes it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Jwk {
    #[schema(value_type = String, example = "OKP")]
    pub kty: &'static str,
    #[schema(value_type = String, example = "Ed25519")]
    pub crv: &'static str,
    #[schema(value_type = String, example = "EdDSA")]
    pub alg: &'static str,
    #[serde(rename = "use")]
    #[schema(value_type = String, example = "sig")]
    pub usage: &'static str,
    pub kid: String,
    /// The public key, base64url without padding.
    pub x: String,
}

/// The claims of a pass. Any JWT library reads them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PassClaims {
    /// The visitor id.
    pub sub: String,
    pub room: String,
    /// Seconds since the epoch.
    pub iat: u64,
    pub exp: u64,
    /// This admission's id: the visitor and the moment (ms) they were
    /// admitted, so one admission's pass has one id however often it is
    /// signed, and a later admission of the same visitor another.
    #[serde(default)]
    pub jti: String,
}

/// A valid ticket, read: whose it is, the ticket to hand back, the
/// `return` it carries (where its visitor asked to go once admitted) and
/// when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidTicket {
    pub visitor: VisitorId,
    pub ticket: String,
    pub ret: Option<String>,
    pub expires_at: Millis,
}

/// What a ticket's signature vouches for, whatever the time.
struct SignedTicket {
    visitor: VisitorId,
    /// The current secret signed it (not the previous one).
    current: bool,
    ret: Option<String>,
    expires_at: Millis,
}

/// Every key one secret derives.
struct Keys {
    ticket_encoding: EncodingKey,
    ticket_decoding: DecodingKey,
    /// The pass key, prepared once (see `sign_pass` and `verify_pass`).
    pass_signing: Ed25519KeyPair,
    pass_verifying: ParsedPublicKey,
    pass_public_x: String,
    pass_kid: String,
    /// The first part of every pass this key signs: its header (EdDSA,
    /// this key's `kid`), the same for each, so encoded once.
    pass_header: String,
    pow_key: String,
    /// Signs operator session cookies and their CSRF tokens.
    admin_session_key: [u8; 32],
    /// Signs web pushes (RFC 8292); browsers subscribe with its public half.
    vapid: VapidKey,
    /// Signs the resume codes of notifications' links.
    resume_key: [u8; 32],
    /// Makes the visitor of a join without a ticket from its
    /// `Idempotency-Key` (`visitor_of_join`).
    join_key: [u8; 32],
}

/// The keys of the deployment's secret, and during a key rotation those of
/// the previous one: what the previous secret signed (tickets, passes,
/// operator sessions, proof-of-work challenges) is still accepted, while
/// everything new is signed with the current one.
pub struct Credentials {
    current: Keys,
    previous: Option<Keys>,
    /// `--public-url`: what a ticket's signed `return` is judged against
    /// when the room's target is a path.
    public_url: Option<PublicUrl>,
}

/// A pass as `jsonwebtoken::encode` would make it, with a key prepared once.
/// Written here because jsonwebtoken takes no prepared signer: its `encode`
/// rebuilds the Ed25519 key from PKCS#8 on every call, which derives the
/// public key again (a scalar multiplication as costly as the signature),
/// about half of what signing a pass cost (BENCHMARKS.md, "Signing a pass").
/// The parts are its own: the header is its `Header`, each part serde JSON
/// in unpadded base64url (a unit test compares the two byte for byte).
/// The signature is aws-lc's: a pass costs 0.46× the CPU ed25519-dalek's
/// takes on this project's machine (aws-lc's base-point multiplication is
/// s2n-bignum's assembly; BENCHMARKS.md, "aws-lc's Ed25519"). Ed25519 is
/// deterministic, so both sign the same bytes (a unit test checks ours
/// against ed25519-dalek's).
fn sign_pass(header: &str, claims: &PassClaims, key: &Ed25519KeyPair) -> String {
    // A pass's claims are about 150 bytes: room for them at once.
    let mut json = Vec::with_capacity(256);
    serde_json::to_writer(&mut json, claims).expect("claims serialize");
    let claims = json;
    // Header, claims and signature (64 bytes: 86 in base64url), in one buffer.
    let mut pass = String::with_capacity(header.len() + claims.len() * 4 / 3 + 92);
    pass.push_str(header);
    pass.push('.');
    URL_SAFE_NO_PAD.encode_string(claims, &mut pass);
    let signature = key.sign(pass.as_bytes());
    pass.push('.');
    URL_SAFE_NO_PAD.encode_string(signature.as_ref(), &mut pass);
    pass
}

/// A pass's header part, as jsonwebtoken writes its `Header` for EdDSA
/// with a `kid`.
fn pass_header(kid: &str) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_string());
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).expect("a header serializes"))
}

/// A pass's claims, if the keys its `kid` names (`keys_of`) signed it.
/// Written here for `sign_pass`'s reason: jsonwebtoken takes no prepared
/// verifier, and its `decode` rebuilds the Ed25519 key from its bytes at
/// every call (the point's decompression), reads the header again and the
/// claims twice (BENCHMARKS.md, "Signing a pass"). It checks what `decode`
/// checked of a pass, in the same order: three base64url parts; a header
/// naming EdDSA (any other algorithm, `none` and HS256 among them, is
/// refused before a key is chosen) and a known `kid`; the signature over
/// the first two parts as sent; then claims that read as `PassClaims`
/// (`sub` and `exp` among them). (`decode` also refused an `aud` claim,
/// which no pass we sign carries.)
fn verify_pass<'k>(
    pass: &str,
    keys_of: impl FnOnce(&str) -> Option<&'k Keys>,
) -> Result<PassClaims, CredentialError> {
    fn invalid<E>(_: E) -> CredentialError {
        CredentialError::Invalid
    }
    let (signed, signature) = pass.rsplit_once('.').ok_or(CredentialError::Invalid)?;
    let (header, claims) = signed.split_once('.').ok_or(CredentialError::Invalid)?;
    let header: Header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).map_err(invalid)?)
        .map_err(invalid)?;
    if header.alg != Algorithm::EdDSA {
        return Err(CredentialError::Invalid);
    }
    let keys = header
        .kid
        .as_deref()
        .and_then(keys_of)
        .ok_or(CredentialError::Invalid)?;
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(invalid)?;
    keys.pass_verifying
        .verify_sig(signed.as_bytes(), &signature)
        .map_err(invalid)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).map_err(invalid)?).map_err(invalid)
}

/// A resume code's MAC: 16 bytes of HMAC-SHA256, enough against forgery
/// and short enough for a link in a text message.
fn resume_mac(key: &[u8; 32], room: &RoomId, visitor: VisitorId, kind: EventKind) -> [u8; 16] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(format!("resume|{room}|{visitor}|{kind}").as_bytes());
    let full: [u8; 32] = mac.finalize().into_bytes().into();
    full[..16].try_into().expect("16 of 32 bytes")
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn derive(secret: &[u8], purpose: &str) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(b"waitroom/v1/");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().into()
}

impl Keys {
    fn derive_from(secret: &str) -> Self {
        let secret = secret.as_bytes();
        let ticket_key = derive(secret, "ticket");
        let signing = Ed25519KeyPair::from_seed_unchecked(&derive(secret, "pass-ed25519"))
            .expect("any 32 bytes are an Ed25519 seed");
        let public = signing.public_key().as_ref().to_vec();
        let verifying =
            ParsedPublicKey::new(&ED25519, &public).expect("our own key's public half parses");
        let pass_public_x = URL_SAFE_NO_PAD.encode(&public);
        let pass_kid = URL_SAFE_NO_PAD.encode(&Sha256::digest(&public)[..12]);
        Self {
            ticket_encoding: EncodingKey::from_secret(&ticket_key),
            ticket_decoding: DecodingKey::from_secret(&ticket_key),
            pass_signing: signing,
            pass_verifying: verifying,
            pass_public_x,
            pass_header: pass_header(&pass_kid),
            pass_kid,
            admin_session_key: derive(secret, "admin-session"),
            resume_key: derive(secret, "resume"),
            join_key: derive(secret, "join"),
            pow_key: to_hex(&derive(secret, "pow")),
            vapid: VapidKey::first_valid(|counter| match counter {
                0 => derive(secret, "vapid"),
                n => derive(secret, &format!("vapid/{n}")),
            }),
        }
    }

    fn admin_mac(&self, parts: &[&str]) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.admin_session_key).expect("any key length");
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(b"\0");
        }
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }
}

impl Credentials {
    pub fn from_secret(secret: &str) -> Self {
        Self::rotating(secret, None)
    }

    /// Signs with `current`; also accepts what `previous` signed, during a
    /// key rotation (until it is dropped from the configuration).
    pub fn rotating(current: &str, previous: Option<&str>) -> Self {
        Self {
            current: Keys::derive_from(current),
            previous: previous.map(Keys::derive_from),
            public_url: None,
        }
    }

    /// With the deployment's public URL (`--public-url`).
    pub fn with_public_url(mut self, public_url: Option<PublicUrl>) -> Self {
        self.public_url = public_url;
        self
    }

    pub fn public_url(&self) -> Option<&PublicUrl> {
        self.public_url.as_ref()
    }

    /// The VAPID key browsers subscribe with now (`GET /api/push/key`).
    pub fn vapid_key(&self) -> &VapidKey {
        &self.current.vapid
    }

    /// The VAPID keys a push may be signed with, current first: a
    /// subscription made before a rotation is bound to the previous one
    /// (`words::push`, "Key rotation").
    pub fn vapid_keys(&self) -> impl Iterator<Item = &VapidKey> {
        self.accepted().map(|keys| &keys.vapid)
    }

    /// The keys something may have been signed with: current first.
    fn accepted(&self) -> impl Iterator<Item = &Keys> {
        std::iter::once(&self.current).chain(self.previous.as_ref())
    }

    /// The resume code of a notification's link (api.md, "Step away"):
    /// `<visitor>.<kind>.<MAC>`, the MAC over the room, the visitor and the
    /// event's kind, so a code names one place and one event and cannot be
    /// made for another; the store spends it once (`op::Resume`).
    pub fn resume_code(&self, room: &RoomId, visitor: VisitorId, kind: EventKind) -> String {
        let mac = resume_mac(&self.current.resume_key, room, visitor, kind);
        format!("{visitor}.{kind}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// The visitor a join without a ticket stands for when the client sent
    /// an `Idempotency-Key`: the same room and key make the same visitor, so
    /// a join retried after an answer that never came (a timeout, a 503
    /// whose write the store made anyway) finds the place the first one
    /// made instead of making a second that nobody holds. 64 bits of an
    /// HMAC under the secret: a client cannot choose the visitor its key
    /// makes, and distinct keys collide no more than random visitors do.
    /// The key travels only with the join, as the ticket does, so it
    /// exposes the place no more than the ticket the join is answered with.
    pub fn visitor_of_join(&self, room: &RoomId, key: &str) -> VisitorId {
        let mut mac =
            HmacSha256::new_from_slice(&self.current.join_key).expect("HMAC takes any key length");
        mac.update(format!("join|{room}|{key}").as_bytes());
        let full: [u8; 32] = mac.finalize().into_bytes().into();
        VisitorId(u64::from_be_bytes(
            full[..8].try_into().expect("8 of 32 bytes"),
        ))
    }

    /// The place and event a resume code names, if one of our keys made it
    /// for this room.
    pub fn read_resume_code(&self, room: &RoomId, code: &str) -> Option<(VisitorId, EventKind)> {
        let mut parts = code.splitn(3, '.');
        let visitor: VisitorId = parts.next()?.parse().ok()?;
        let kind: EventKind = parts.next()?.parse().ok()?;
        let sent = URL_SAFE_NO_PAD.decode(parts.next()?).ok()?;
        self.accepted()
            .any(|keys| {
                let mac = resume_mac(&keys.resume_key, room, visitor, kind);
                subtle::ConstantTimeEq::ct_eq(&mac[..], &sent[..]).into()
            })
            .then_some((visitor, kind))
    }

    /// The HMAC key that signs proof-of-work challenges.
    pub fn pow_key(&self) -> &str {
        &self.current.pow_key
    }

    /// The keys a challenge may have been signed with: current first.
    pub fn pow_keys(&self) -> Vec<&str> {
        self.accepted().map(|keys| keys.pow_key.as_str()).collect()
    }

    /// A ticket good for `TICKET_LIFETIME_MS` from `now`.
    pub fn issue_ticket(&self, room: &RoomId, visitor: VisitorId, now: Millis) -> String {
        self.issue_ticket_returning(room, visitor, now, None, now + TICKET_LIFETIME_MS)
    }

    /// A ticket valid until `expires_at` (see `ticket_expiry`) that also
    /// carries where to send the visitor back to once admitted (see
    /// `return_url::destination`, which decides whether it may).
    pub fn issue_ticket_returning(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        now: Millis,
        ret: Option<&str>,
        expires_at: Millis,
    ) -> String {
        let claims = TicketClaims {
            sub: visitor.to_string(),
            room: room.to_string(),
            iat: now / 1000,
            exp: Some(expires_at / 1000),
            ret: ret.map(str::to_string),
        };
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &self.current.ticket_encoding,
        )
        .expect("HS256 encoding cannot fail")
    }

    /// The visitor a ticket names, if it is ours, for this room and not
    /// expired at `now`.
    pub fn read_ticket(
        &self,
        room: &RoomId,
        ticket: &str,
        now: Millis,
    ) -> Result<VisitorId, CredentialError> {
        self.read_ticket_signed(room, ticket)
            .and_then(|signed| unexpired(signed, now))
            .map(|signed| signed.visitor)
    }

    /// Whose ticket this is, expired or not: for telling one browser's
    /// visitor from another's, never for letting anyone in.
    pub fn ticket_holder(&self, room: &RoomId, ticket: &str) -> Result<VisitorId, CredentialError> {
        self.read_ticket_signed(room, ticket)
            .map(|signed| signed.visitor)
    }

    /// The `return` a ticket of this room carries, if any (expired or not:
    /// a socket that opened with it is asking).
    pub fn ticket_return(&self, room: &RoomId, ticket: &str) -> Option<String> {
        self.read_ticket_signed(room, ticket)
            .ok()
            .and_then(|signed| signed.ret)
    }

    /// The visitor a ticket names if it is valid at `now`, the ticket to
    /// hand back (the same one, or, for a ticket signed with the previous
    /// secret, the same place's ticket signed with the current one and
    /// expiring when it did, so that a visitor who keeps coming back
    /// outlives the rotation), its `return` and its expiry.
    pub fn renew_ticket(
        &self,
        room: &RoomId,
        ticket: &str,
        now: Millis,
    ) -> Result<ValidTicket, CredentialError> {
        let signed = unexpired(self.read_ticket_signed(room, ticket)?, now)?;
        let ticket = if signed.current {
            ticket.to_string()
        } else {
            self.issue_ticket_returning(
                room,
                signed.visitor,
                now,
                signed.ret.as_deref(),
                signed.expires_at,
            )
        };
        Ok(ValidTicket {
            visitor: signed.visitor,
            ticket,
            ret: signed.ret,
            expires_at: signed.expires_at,
        })
    }

    /// What a ticket's signature (the current secret's or the previous
    /// one's) vouches for, if it is for this room; its expiry not checked.
    fn read_ticket_signed(
        &self,
        room: &RoomId,
        ticket: &str,
    ) -> Result<SignedTicket, CredentialError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        let (claims, current) = self
            .accepted()
            .enumerate()
            .find_map(|(index, keys)| {
                jsonwebtoken::decode::<TicketClaims>(ticket, &keys.ticket_decoding, &validation)
                    .ok()
                    .map(|data| (data.claims, index == 0))
            })
            .ok_or(CredentialError::Invalid)?;
        if claims.room != room.as_str() {
            return Err(CredentialError::WrongRoom);
        }
        let visitor = claims.sub.parse().map_err(|_| CredentialError::Invalid)?;
        let expires_at = match claims.exp {
            Some(exp) => exp.saturating_mul(1000),
            None => claims
                .iat
                .saturating_mul(1000)
                .saturating_add(TICKET_LIFETIME_MS),
        };
        Ok(SignedTicket {
            visitor,
            current,
            ret: claims.ret,
            expires_at,
        })
    }

    /// Signs a pass. Ed25519 is deterministic, so every node issues the very
    /// same pass for the same admission.
    pub fn issue_pass(
        &self,
        room: &RoomId,
        visitor: VisitorId,
        admitted_at: Millis,
        expires_at: Millis,
    ) -> String {
        let claims = PassClaims {
            sub: visitor.to_string(),
            room: room.to_string(),
            iat: admitted_at / 1000,
            exp: expires_at / 1000,
            jti: format!("{visitor}.{admitted_at}"),
        };
        sign_pass(
            &self.current.pass_header,
            &claims,
            &self.current.pass_signing,
        )
    }

    /// Checks a pass's signature (by the key its `kid` names: the current
    /// secret's, or the previous one's during a rotation), room and expiry
    /// against our clock (not the library's, so tests can drive time).
    pub fn read_pass(
        &self,
        pass: &str,
        room: Option<&RoomId>,
        now: Millis,
    ) -> Result<PassClaims, CredentialError> {
        let claims = verify_pass(pass, |kid| {
            self.accepted().find(|keys| keys.pass_kid == kid)
        })?;
        if room.is_some_and(|room| room.as_str() != claims.room) {
            return Err(CredentialError::WrongRoom);
        }
        if claims.exp * 1000 <= now {
            return Err(CredentialError::Expired);
        }
        Ok(claims)
    }

    /// Whose pass this is, for acts that outlive the pass itself (confirming
    /// or releasing a hold made while it was valid): signature and room only.
    pub fn pass_holder(&self, pass: &str, room: &RoomId) -> Result<PassClaims, CredentialError> {
        self.read_pass(pass, Some(room), 0)
    }

    /// The JSON Web Key Set that verifies passes: the current key, and the
    /// previous one while a rotation is under way.
    pub fn jwks(&self) -> Jwks {
        let keys = self
            .accepted()
            .map(|keys| Jwk {
                kty: "OKP",
                crv: "Ed25519",
                alg: "EdDSA",
                usage: "sig",
                kid: keys.pass_kid.clone(),
                x: keys.pass_public_x.clone(),
            })
            .collect();
        Jwks { keys }
    }

    /// An operator session's cookie: its id, the idle deadline (pushed on
    /// by every use) and the absolute one, signed.
    pub fn issue_admin_session(&self, session: &AdminSession, idle_until: Millis) -> String {
        let id = &session.id;
        let idle = (idle_until.min(session.expires_at) / 1000).to_string();
        let expires = (session.expires_at / 1000).to_string();
        let mac = self.current.admin_mac(&["session", id, &idle, &expires]);
        format!("{id}.{idle}.{expires}.{mac}")
    }

    /// The session a cookie carries, if its signature holds and neither
    /// deadline has passed. Whether it was ended (logout) is the store's to say.
    pub fn read_admin_session(&self, cookie: &str, now: Millis) -> Option<AdminSession> {
        let mut parts = cookie.split('.');
        let (Some(id), Some(idle), Some(expires), Some(mac), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let valid = self
            .accepted()
            .any(|keys| constant_time_eq(&keys.admin_mac(&["session", id, idle, expires]), mac));
        let idle_s = idle.parse::<u64>().ok()?;
        let expires_s = expires.parse::<u64>().ok()?;
        (valid && idle_s * 1000 > now && expires_s * 1000 > now).then(|| AdminSession {
            id: id.to_string(),
            expires_at: expires_s * 1000,
        })
    }

    /// The CSRF token bound to one operator session (to its id, so it
    /// stays the same while the cookie is refreshed).
    pub fn csrf_for_session(&self, session: &AdminSession) -> String {
        self.current.admin_mac(&["csrf", &session.id])
    }

    /// Whether `sent` is the session's CSRF token (or, during a rotation,
    /// the one the previous secret made for it, on a page loaded before).
    pub fn csrf_matches(&self, session: &AdminSession, sent: &str) -> bool {
        self.accepted()
            .any(|keys| constant_time_eq(sent, &keys.admin_mac(&["csrf", &session.id])))
    }
}

/// The ticket, if it has not expired at `now`.
fn unexpired(signed: SignedTicket, now: Millis) -> Result<SignedTicket, CredentialError> {
    if signed.expires_at <= now {
        return Err(CredentialError::Expired);
    }
    Ok(signed)
}

pub fn constant_time_eq(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// A fresh random secret, for development when none is configured.
pub fn random_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(id: &str) -> RoomId {
        RoomId::parse(id).unwrap()
    }

    #[test]
    fn a_pass_is_what_jsonwebtoken_would_sign() {
        let credentials = Credentials::from_secret("a-secret");
        let (visitor, at) = (VisitorId::random(), 1_767_225_600_000);
        let ours = credentials.issue_pass(&room("drop"), visitor, at, at + 600_000);
        let claims = PassClaims {
            sub: visitor.to_string(),
            room: "drop".into(),
            iat: at / 1000,
            exp: (at + 600_000) / 1000,
            jti: format!("{visitor}.{at}"),
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(credentials.current.pass_kid.clone());
        let der = credentials.current.pass_signing.to_pkcs8v1().unwrap();
        let theirs =
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ed_der(der.as_ref()))
                .unwrap();
        assert_eq!(ours, theirs);
        assert!(
            credentials
                .read_pass(&ours, Some(&room("drop")), at)
                .is_ok()
        );
    }

    /// The pass is RFC 8032's Ed25519 by a second implementation: the key
    /// derived from the same seed, the same public key in the JWKS, and
    /// the very signature ed25519-dalek makes of the same signed parts
    /// (what an edge verifier, jose or a Go library checks).
    #[test]
    fn a_pass_is_signed_as_ed25519_dalek_signs_it() {
        use ed25519_dalek::{Signer, SigningKey};
        let credentials = Credentials::from_secret("a-secret");
        let theirs = SigningKey::from_bytes(&derive(b"a-secret", "pass-ed25519"));
        assert_eq!(
            credentials.current.pass_public_x,
            URL_SAFE_NO_PAD.encode(theirs.verifying_key().to_bytes())
        );
        for (at, visitor) in [
            (0, VisitorId::random()),
            (1_767_225_600_000, VisitorId::random()),
        ] {
            let pass = credentials.issue_pass(&room("drop"), visitor, at, at + 60_000);
            let (signed, signature) = pass.rsplit_once('.').unwrap();
            let expected = theirs.sign(signed.as_bytes()).to_bytes();
            assert_eq!(URL_SAFE_NO_PAD.decode(signature).unwrap(), expected);
        }
    }

    #[test]
    fn a_tickets_return_is_signed_with_it_and_kept_through_a_rotation() {
        let old = Credentials::from_secret("old");
        let visitor = VisitorId::random();
        let ret = "https://shop.example/checkout?item=7";
        let ticket = old.issue_ticket_returning(&room("r"), visitor, 1_000, Some(ret), 1_000_000);
        assert_eq!(old.ticket_return(&room("r"), &ticket).as_deref(), Some(ret));
        assert_eq!(old.ticket_return(&room("other"), &ticket), None);
        let plain = old.issue_ticket(&room("r"), visitor, 1_000);
        assert_eq!(old.ticket_return(&room("r"), &plain), None);
        // Signed: another secret's ticket says nothing.
        let forged = Credentials::from_secret("x").issue_ticket_returning(
            &room("r"),
            visitor,
            1_000,
            Some("https://evil.example/"),
            1_000_000,
        );
        assert_eq!(old.ticket_return(&room("r"), &forged), None);
        // Renewed under a new secret, the ticket keeps its return.
        let rotated = Credentials::rotating("new", Some("old"));
        let renewed = rotated.renew_ticket(&room("r"), &ticket, 2_000).unwrap();
        assert_eq!(renewed.visitor, visitor);
        assert_eq!(renewed.ret.as_deref(), Some(ret));
        let renewed = renewed.ticket;
        assert_ne!(renewed, ticket);
        assert_eq!(
            Credentials::from_secret("new")
                .ticket_return(&room("r"), &renewed)
                .as_deref(),
            Some(ret)
        );
    }

    #[test]
    fn tickets_round_trip_and_reject_forgery() {
        let ours = Credentials::from_secret("s1");
        let theirs = Credentials::from_secret("s2");
        let visitor = VisitorId::random();
        let ticket = ours.issue_ticket(&room("a"), visitor, 1_000);
        assert_eq!(ours.read_ticket(&room("a"), &ticket, 2_000), Ok(visitor));
        assert_eq!(
            ours.read_ticket(&room("b"), &ticket, 2_000),
            Err(CredentialError::WrongRoom)
        );
        assert_eq!(
            theirs.read_ticket(&room("a"), &ticket, 2_000),
            Err(CredentialError::Invalid)
        );
        assert_eq!(
            ours.read_ticket(&room("a"), "garbage", 2_000),
            Err(CredentialError::Invalid)
        );
        // A pass is not a ticket.
        let pass = ours.issue_pass(&room("a"), visitor, 0, 60_000);
        assert_eq!(
            ours.read_ticket(&room("a"), &pass, 2_000),
            Err(CredentialError::Invalid)
        );
    }

    const DAY_MS: Millis = 24 * 60 * 60 * 1000;

    /// A ticket as the release before signed it: no `exp`.
    fn ticket_without_exp(credentials: &Credentials, visitor: VisitorId, iat_ms: Millis) -> String {
        let claims =
            serde_json::json!({"sub": visitor.to_string(), "room": "a", "iat": iat_ms / 1000});
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &credentials.current.ticket_encoding,
        )
        .unwrap()
    }

    fn claims_of(token: &str) -> serde_json::Value {
        let claims = token.split('.').nth(1).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap()
    }

    #[test]
    fn a_ticket_lives_a_week_or_until_its_room_closes_if_that_is_later() {
        let now = NOW;
        assert_eq!(ticket_expiry(now, None), now + 7 * DAY_MS);
        assert_eq!(ticket_expiry(now, Some(now + DAY_MS)), now + 7 * DAY_MS);
        assert_eq!(
            ticket_expiry(now, Some(now + 30 * DAY_MS)),
            now + 30 * DAY_MS
        );
        assert_eq!(ticket_expiry(now, Some(now - DAY_MS)), now + 7 * DAY_MS);
    }

    #[test]
    fn a_ticket_carries_its_exp_and_is_refused_from_then_on() {
        let credentials = Credentials::from_secret("s");
        let visitor = VisitorId::random();
        let expires_at = NOW + 30 * DAY_MS;
        let ticket = credentials.issue_ticket_returning(
            &room("a"),
            visitor,
            NOW,
            Some("https://x/"),
            expires_at,
        );
        assert_eq!(claims_of(&ticket)["exp"], expires_at / 1000);
        assert_eq!(claims_of(&ticket)["iat"], NOW / 1000);
        assert_eq!(
            credentials.read_ticket(&room("a"), &ticket, expires_at - 1),
            Ok(visitor)
        );
        let renewed = credentials
            .renew_ticket(&room("a"), &ticket, expires_at - 1)
            .unwrap();
        assert_eq!(renewed.expires_at, expires_at);
        assert_eq!(renewed.ticket, ticket, "a current ticket is handed back");
        for at in [expires_at, expires_at + DAY_MS] {
            assert_eq!(
                credentials.read_ticket(&room("a"), &ticket, at),
                Err(CredentialError::Expired)
            );
            assert_eq!(
                credentials.renew_ticket(&room("a"), &ticket, at),
                Err(CredentialError::Expired)
            );
        }
        // Whose it is, and where it asked to go, outlive it: they let no one in.
        assert_eq!(credentials.ticket_holder(&room("a"), &ticket), Ok(visitor));
        assert_eq!(
            credentials.ticket_return(&room("a"), &ticket).as_deref(),
            Some("https://x/")
        );
        // The plain issue: a week.
        let plain = credentials.issue_ticket(&room("a"), visitor, NOW);
        assert_eq!(claims_of(&plain)["exp"], (NOW + 7 * DAY_MS) / 1000);
    }

    #[test]
    fn a_ticket_without_exp_counts_as_expiring_a_week_after_its_iat() {
        let credentials = Credentials::from_secret("s");
        let visitor = VisitorId::random();
        let old = ticket_without_exp(&credentials, visitor, NOW);
        let end = NOW + 7 * DAY_MS;
        assert_eq!(
            credentials.read_ticket(&room("a"), &old, end - 1000),
            Ok(visitor)
        );
        let renewed = credentials
            .renew_ticket(&room("a"), &old, end - 1000)
            .unwrap();
        assert_eq!((renewed.visitor, renewed.expires_at), (visitor, end));
        assert_eq!(
            credentials.read_ticket(&room("a"), &old, end),
            Err(CredentialError::Expired)
        );
        // Renewed through a rotation, it keeps its end, now written in.
        let rotating = Credentials::rotating("new", Some("s"));
        let renewed = rotating
            .renew_ticket(&room("a"), &old, NOW + DAY_MS)
            .unwrap();
        assert_eq!(claims_of(&renewed.ticket)["exp"], end / 1000);
        assert_eq!(renewed.expires_at, end);
        assert_eq!(
            rotating.read_ticket(&room("a"), &renewed.ticket, end),
            Err(CredentialError::Expired)
        );
    }

    #[test]
    fn passes_are_deterministic_and_expire() {
        let node_a = Credentials::from_secret("shared");
        let node_b = Credentials::from_secret("shared");
        let visitor = VisitorId::random();
        let pass = node_a.issue_pass(&room("a"), visitor, 10_000, 70_000);
        assert_eq!(pass, node_b.issue_pass(&room("a"), visitor, 10_000, 70_000));
        let claims = node_b.read_pass(&pass, Some(&room("a")), 69_999).unwrap();
        assert_eq!(claims.sub, visitor.to_string());
        assert_eq!(
            node_b.read_pass(&pass, Some(&room("a")), 70_000),
            Err(CredentialError::Expired)
        );
        assert_eq!(
            node_b.read_pass(&pass, Some(&room("b")), 0),
            Err(CredentialError::WrongRoom)
        );
        let forged = Credentials::from_secret("other").issue_pass(&room("a"), visitor, 0, 70_000);
        assert_eq!(
            node_a.read_pass(&forged, None, 0),
            Err(CredentialError::Invalid)
        );
    }

    const USER_KEY: &str = "a-user-key-of-thirty-two-characters!";
    const NOW: Millis = 1_767_225_600_000;

    fn user_token(header: Header, claims: serde_json::Value) -> String {
        jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret(USER_KEY.as_bytes()),
        )
        .unwrap()
    }

    fn read(token: &str, now: Millis) -> Result<String, CredentialError> {
        read_user_token(token, USER_KEY, &room("shop"), now)
    }

    #[test]
    fn a_user_token_is_not_read_before_its_nbf() {
        let hs256 = || Header::new(Algorithm::HS256);
        let exp = NOW / 1000 + 3600;
        let ahead = NOW / 1000 + 600;
        let early = user_token(
            hs256(),
            serde_json::json!({"sub": "alice", "room": "shop", "exp": exp, "nbf": ahead}),
        );
        assert_eq!(read(&early, NOW), Err(CredentialError::NotYetValid));
        let at_nbf = ahead * 1000;
        assert_eq!(
            read(&early, at_nbf - USER_TOKEN_NBF_LEEWAY_MS - 1),
            Err(CredentialError::NotYetValid)
        );
        assert_eq!(
            read(&early, at_nbf - USER_TOKEN_NBF_LEEWAY_MS),
            Ok("alice".into()),
            "a clock a little behind the site's is forgiven"
        );
        assert_eq!(read(&early, at_nbf), Ok("alice".into()));
        let without = user_token(
            hs256(),
            serde_json::json!({"sub": "alice", "room": "shop", "exp": exp}),
        );
        assert_eq!(read(&without, NOW), Ok("alice".into()));
        let garbled = user_token(
            hs256(),
            serde_json::json!({"sub": "alice", "room": "shop", "exp": exp, "nbf": "soon"}),
        );
        assert_eq!(read(&garbled, NOW), Err(CredentialError::Invalid));
    }

    #[test]
    fn a_user_token_with_critical_header_parameters_is_refused() {
        let claims = serde_json::json!({"sub": "alice", "room": "shop", "exp": NOW / 1000 + 3600});
        let mut header = Header::new(Algorithm::HS256);
        assert_eq!(
            read(&user_token(header.clone(), claims.clone()), NOW),
            Ok("alice".into())
        );
        for crit in [vec!["exp".to_string()], vec!["b64".to_string()], vec![]] {
            header.crit = Some(crit.clone());
            assert_eq!(
                read(&user_token(header.clone(), claims.clone()), NOW),
                Err(CredentialError::Invalid),
                "crit {crit:?}"
            );
        }
    }

    #[test]
    fn admin_sessions_are_signed_and_end_when_idle_or_old() {
        let creds = Credentials::from_secret("s");
        let session = AdminSession::new(100_000);
        let cookie = creds.issue_admin_session(&session, 10_000);
        assert_eq!(
            creds.read_admin_session(&cookie, 9_000),
            Some(session.clone())
        );
        assert_eq!(
            creds.read_admin_session(&cookie, 10_000),
            None,
            "idle too long"
        );
        // Refreshed, it lives on, but never past its absolute end.
        let refreshed = creds.issue_admin_session(&session, 500_000);
        assert!(creds.read_admin_session(&refreshed, 99_000).is_some());
        assert_eq!(creds.read_admin_session(&refreshed, 100_000), None);
        for forged in [
            cookie.replacen('.', "x.", 1),
            format!("{}.99999999.99999999.{}", session.id, "0".repeat(64)),
            "a.b".to_string(),
        ] {
            assert_eq!(creds.read_admin_session(&forged, 0), None, "{forged}");
        }
        assert_ne!(
            creds.csrf_for_session(&session),
            creds.csrf_for_session(&AdminSession::new(100_000))
        );
        assert_eq!(
            creds.csrf_for_session(&session),
            creds.csrf_for_session(&creds.read_admin_session(&refreshed, 0).unwrap()),
            "the CSRF token outlives a refresh"
        );
    }

    fn kid_of(token: &str) -> String {
        jsonwebtoken::decode_header(token).unwrap().kid.unwrap()
    }

    fn kids(credentials: &Credentials) -> Vec<String> {
        credentials
            .jwks()
            .keys
            .into_iter()
            .map(|key| key.kid)
            .collect()
    }

    #[test]
    fn the_vapid_key_follows_the_secret_and_a_rotation_keeps_the_previous() {
        let key = |secret: &str| {
            let credentials = Credentials::from_secret(secret);
            credentials.vapid_key().public_key().to_owned()
        };
        assert_eq!(key("one"), key("one"));
        assert_ne!(key("one"), key("two"));
        let rotating = Credentials::rotating("two", Some("one"));
        let keys: Vec<_> = rotating
            .vapid_keys()
            .map(|k| k.public_key().to_owned())
            .collect();
        assert_eq!(keys, [key("two"), key("one")]);
        assert_eq!(Credentials::from_secret("one").vapid_keys().count(), 1);
    }

    #[test]
    fn a_rotation_accepts_what_the_previous_secret_signed_and_signs_with_the_current() {
        let before = Credentials::from_secret("old");
        let rotating = Credentials::rotating("new", Some("old"));
        let after = Credentials::from_secret("new");
        let visitor = VisitorId::random();

        let ticket = before.issue_ticket(&room("a"), visitor, 1_000);
        assert_eq!(
            rotating.read_ticket(&room("a"), &ticket, 2_000),
            Ok(visitor)
        );
        assert_eq!(
            after.read_ticket(&room("a"), &ticket, 2_000),
            Err(CredentialError::Invalid)
        );
        let renewed = rotating.renew_ticket(&room("a"), &ticket, 2_000).unwrap();
        assert_eq!(renewed.visitor, visitor);
        let renewed = renewed.ticket;
        assert_eq!(
            after.read_ticket(&room("a"), &renewed, 2_000),
            Ok(visitor),
            "a ticket of the previous secret is renewed under the current one"
        );
        let kept = rotating.renew_ticket(&room("a"), &renewed, 3_000).unwrap();
        assert_eq!(
            kept.ticket, renewed,
            "a current ticket is handed back as it is"
        );

        let pass = before.issue_pass(&room("a"), visitor, 0, 60_000);
        assert!(rotating.read_pass(&pass, Some(&room("a")), 1).is_ok());
        assert_eq!(
            rotating.read_pass(&pass, Some(&room("a")), 60_000),
            Err(CredentialError::Expired),
            "until it expires"
        );
        assert_eq!(
            after.read_pass(&pass, Some(&room("a")), 1),
            Err(CredentialError::Invalid)
        );
        let new_pass = rotating.issue_pass(&room("a"), visitor, 0, 60_000);
        assert_eq!(
            kid_of(&new_pass),
            kids(&after)[0],
            "new passes: the current key"
        );
        assert!(after.read_pass(&new_pass, Some(&room("a")), 1).is_ok());

        assert_eq!(
            kids(&rotating),
            [kids(&after)[0].clone(), kids(&before)[0].clone()]
        );
        assert_ne!(kids(&after), kids(&before));

        let session = AdminSession::new(100_000);
        let cookie = before.issue_admin_session(&session, 50_000);
        assert_eq!(
            rotating.read_admin_session(&cookie, 1),
            Some(session.clone())
        );
        assert_eq!(after.read_admin_session(&cookie, 1), None);
        let csrf = before.csrf_for_session(&session);
        assert!(rotating.csrf_matches(&session, &csrf));
        assert!(!after.csrf_matches(&session, &csrf));
        assert!(rotating.csrf_matches(&session, &rotating.csrf_for_session(&session)));

        assert_eq!(rotating.pow_keys(), [after.pow_key(), before.pow_key()]);
    }

    #[test]
    fn a_pass_without_a_known_kid_is_refused() {
        let credentials = Credentials::from_secret("s");
        let pass = credentials.issue_pass(&room("a"), VisitorId::random(), 0, 60_000);
        let (header, rest) = pass.split_once('.').unwrap();
        let mut decoded: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
        decoded["kid"] = "someone-else".into();
        let swapped = format!("{}.{rest}", URL_SAFE_NO_PAD.encode(decoded.to_string()));
        assert_eq!(
            credentials.read_pass(&swapped, None, 0),
            Err(CredentialError::Invalid)
        );
    }

    /// A pass is refused unless it is three base64url parts, its header
    /// names EdDSA, and our key signed the first two parts as sent: even a
    /// pass our own key signed is refused when its header names another
    /// algorithm, as jsonwebtoken refused it.
    #[test]
    fn a_pass_is_refused_unless_its_header_names_eddsa_and_our_key_signed_it_as_sent() {
        let credentials = Credentials::from_secret("s");
        let visitor = VisitorId::random();
        let pass = credentials.issue_pass(&room("a"), visitor, 0, 60_000);
        assert!(credentials.read_pass(&pass, None, 0).is_ok());
        let (header, rest) = pass.split_once('.').unwrap();
        let (claims, signature) = rest.split_once('.').unwrap();
        let kid = &credentials.current.pass_kid;
        let signed_by_us = |header: serde_json::Value| {
            let signed = format!("{}.{claims}", URL_SAFE_NO_PAD.encode(header.to_string()));
            let signature = credentials.current.pass_signing.sign(signed.as_bytes());
            format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
        };
        let mut tampered_claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
        tampered_claims["exp"] = 4_000_000_000u64.into();
        let tampered = format!(
            "{header}.{}.{signature}",
            URL_SAFE_NO_PAD.encode(tampered_claims.to_string())
        );
        let refused = [
            signed_by_us(serde_json::json!({"alg": "HS256", "kid": kid})),
            signed_by_us(serde_json::json!({"alg": "ES256", "kid": kid})),
            format!(
                "{}.{claims}.",
                URL_SAFE_NO_PAD.encode(serde_json::json!({"alg": "none", "kid": kid}).to_string())
            ),
            tampered,
            format!("{header}.{claims}"),
            format!("{header}.{claims}.{signature}.{signature}"),
            format!("{header}.{claims}.{}", &signature[..40]),
            format!("{header}.{claims}.{signature}="),
            format!("{header}.{claims}!.{signature}"),
            String::new(),
        ];
        for pass in refused {
            assert_eq!(
                credentials.read_pass(&pass, None, 0),
                Err(CredentialError::Invalid),
                "{pass}"
            );
        }
        // The same signing with the header unchanged is a valid pass.
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
        assert!(
            credentials
                .read_pass(&signed_by_us(header), None, 0)
                .is_ok()
        );
    }
}

#[cfg(test)]
mod resume_tests {
    use super::*;

    #[test]
    fn a_resume_code_names_one_place_and_event_and_is_not_made_elsewhere() {
        let credentials = Credentials::from_secret("s".repeat(32).as_str());
        let room = RoomId::parse("drop").unwrap();
        let visitor = VisitorId(0xabc);
        let code = credentials.resume_code(&room, visitor, EventKind::Near);
        assert!(code.len() < 64, "{code}");
        assert_eq!(
            credentials.read_resume_code(&room, &code),
            Some((visitor, EventKind::Near))
        );
        let other_room = RoomId::parse("other").unwrap();
        assert_eq!(credentials.read_resume_code(&other_room, &code), None);
        let as_admitted = code.replace(".near.", ".admitted.");
        assert_eq!(credentials.read_resume_code(&room, &as_admitted), None);
        let other_visitor = code.replacen("0000000000000abc", "0000000000000abd", 1);
        assert_eq!(credentials.read_resume_code(&room, &other_visitor), None);
        let elsewhere = Credentials::from_secret("t".repeat(32).as_str());
        assert_eq!(elsewhere.read_resume_code(&room, &code), None);
        let rotated = Credentials::rotating(&"t".repeat(32), Some(&"s".repeat(32)));
        assert!(rotated.read_resume_code(&room, &code).is_some());
        for junk in ["", "x", "a.b.c", &format!("{visitor}.near.")] {
            assert_eq!(credentials.read_resume_code(&room, junk), None, "{junk}");
        }
    }
}
