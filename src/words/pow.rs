//! Proof of work against bots: ALTCHA challenges (the format api.md fixes:
//! `algorithm`, `challenge`, `salt`, `maxnumber`, `signature`), made and
//! checked with the `altcha-lib-rs` crate. What is ours: the difficulty
//! scale, the room and difficulty written into the salt, the expiry read on
//! our clock (so tests can drive it), and the id by which a store accepts
//! each solution once.
//!
//! The room and the difficulty are part of the salt itself
//! (`<room>.<difficulty>.<random>`), not salt parameters: the crate rebuilds
//! the parameters from a `HashMap` when it verifies, so with two of them it
//! would rebuild them in a random order and refuse good solutions half the
//! time.
//!
//! The salt is read strictly, as exactly the form we make
//! (`<room>.<difficulty>.<24 hex digits>?expires=<seconds>&`). The crate
//! verifies the salt it rebuilds from its own reading of the parameters,
//! which keeps the last of a repeated one and drops one without its `&`:
//! a salt read any other way could say one expiry to us and another to it
//! (`…?expires=<ours>&expires=<far>` was accepted long after it expired).

use altcha_lib_rs::{Challenge, ChallengeOptions, Payload, create_challenge, verify_solution};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::DateTime;

use super::RoomId;
use super::clock::Millis;

/// The highest `pow_difficulty`.
pub const MAX_DIFFICULTY: u32 = 20;
/// How long a challenge may be solved and used.
pub const CHALLENGE_TTL_MS: Millis = 5 * 60_000;
/// Numbers a browser may have to try per step of difficulty: the expected
/// work is half of `maxnumber`.
const NUMBERS_PER_STEP: u64 = 50_000;
/// The longest `pow` payload read.
const MAX_PAYLOAD_BYTES: usize = 2048;
/// Random bytes in a salt (written as twice as many hex digits).
const SALT_RANDOM_BYTES: usize = 12;

/// `maxnumber` for a difficulty: 50,000 numbers per step, so difficulty 1
/// costs a browser about 25,000 SHA-256 hashes and 20 about 500,000.
pub fn max_number(difficulty: u32) -> u64 {
    u64::from(difficulty.clamp(1, MAX_DIFFICULTY)) * NUMBERS_PER_STEP
}

/// A challenge as the API description shows it. The served one is the
/// crate's `Challenge`, whose fields this mirrors (a test below serializes
/// one and compares the names, so the two cannot part).
#[derive(utoipa::ToSchema)]
#[schema(as = Challenge)]
#[allow(dead_code)]
pub struct ChallengeShape {
    /// Always `SHA-256`.
    #[schema(example = "SHA-256")]
    algorithm: String,
    /// Hex SHA-256 of the salt and the secret number.
    challenge: String,
    /// The highest number the solution may be.
    maxnumber: u64,
    /// `<room>.<difficulty>.<random>?expires=<seconds>&`.
    salt: String,
    signature: String,
}

/// A fresh challenge for `room` at `difficulty` (clamped to the scale),
/// valid until `now + CHALLENGE_TTL_MS`.
pub fn challenge(key: &str, room: &RoomId, difficulty: u32, now: Millis) -> Challenge {
    let difficulty = difficulty.clamp(1, MAX_DIFFICULTY);
    let expires = DateTime::from_timestamp(((now + CHALLENGE_TTL_MS) / 1000) as i64, 0);
    let random: [u8; SALT_RANDOM_BYTES] = rand::random();
    let salt = format!(
        "{room}.{difficulty}.{}",
        random
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    create_challenge(ChallengeOptions {
        hmac_key: key,
        max_number: Some(max_number(difficulty)),
        expires,
        salt: Some(salt),
        ..Default::default()
    })
    .expect("a challenge within its own bounds")
}

/// A solution that holds: the id a store keeps it under (so it counts
/// once), until when it would be accepted, and the difficulty of its
/// challenge, which the store compares with the room's in the join's own
/// step (a challenge made before the room asked for more is not enough).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solved {
    pub id: String,
    pub until: Millis,
    pub difficulty: u32,
}

/// Checks a join's `pow`: base64 of the ALTCHA payload JSON, signed by
/// us (with any of `keys`: the current secret's, and the previous one's
/// during a rotation), solved, for this room, with a salt of exactly our
/// form, not expired.
pub fn check(
    keys: &[&str],
    payload: &str,
    room: &RoomId,
    now: Millis,
) -> Result<Solved, &'static str> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err("the solution is too long");
    }
    let json = STANDARD
        .decode(payload.trim())
        .map_err(|_| "the solution is not base64")?;
    let solution: Payload =
        serde_json::from_slice(&json).map_err(|_| "the solution is not an ALTCHA payload")?;
    let salt = Salt::read(&solution.salt)?;
    // Expiry on our clock (the crate would read the system's).
    if !keys
        .iter()
        .any(|key| verify_solution(&solution, key, false).is_ok())
    {
        return Err("the solution does not solve a challenge of ours");
    }
    if salt.room != room.as_str() {
        return Err("the challenge is for another room");
    }
    let until = salt.expires_s.saturating_mul(1000);
    if until <= now {
        return Err("the challenge has expired; a new one is needed");
    }
    Ok(Solved {
        id: solution.signature,
        until,
        difficulty: salt.difficulty,
    })
}

/// What a salt of ours says.
#[derive(Debug, PartialEq, Eq)]
struct Salt<'a> {
    room: &'a str,
    difficulty: u32,
    expires_s: u64,
}

impl<'a> Salt<'a> {
    /// Reads `<room>.<difficulty>.<random>?expires=<seconds>&`, and nothing
    /// else: any other parameter, a repeated one, or one without its `&`
    /// is refused (see the module's header for why).
    fn read(salt: &'a str) -> Result<Self, &'static str> {
        const MALFORMED: &str = "the challenge's salt is not one of ours";
        let (base, query) = salt.split_once('?').ok_or(MALFORMED)?;
        let mut parts = base.split('.');
        let (Some(room), Some(difficulty), Some(random), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(MALFORMED);
        };
        let random_is_ours = random.len() == 2 * SALT_RANDOM_BYTES
            && random
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let difficulty = canonical_number(difficulty)
            .and_then(|d| u32::try_from(d).ok())
            .filter(|d| (1..=MAX_DIFFICULTY).contains(d));
        let (Some(difficulty), true) = (difficulty, random_is_ours) else {
            return Err(MALFORMED);
        };
        let mut expires_s = None;
        for param in query.split_inclusive('&') {
            let (name, value) = param
                .strip_suffix('&')
                .and_then(|param| param.split_once('='))
                .ok_or(MALFORMED)?;
            if name != "expires" {
                return Err(MALFORMED);
            }
            if expires_s.is_some() {
                return Err("the challenge's salt repeats a parameter");
            }
            expires_s = Some(canonical_number(value).ok_or(MALFORMED)?);
        }
        Ok(Self {
            room,
            difficulty,
            expires_s: expires_s.ok_or("the challenge has no expiry")?,
        })
    }
}

/// A number written as we write them: digits only, no leading zero.
fn canonical_number(text: &str) -> Option<u64> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    (digits && !leading_zero)
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "pow-key";
    const NOW: Millis = 1_767_225_600_000;

    fn room(id: &str) -> RoomId {
        RoomId::parse(id).unwrap()
    }

    #[test]
    fn the_described_challenge_has_the_served_fields() {
        use utoipa::PartialSchema;
        use utoipa::openapi::{RefOr, schema::Schema};
        let served = serde_json::to_value(challenge(KEY, &room("a"), 1, NOW)).unwrap();
        let served: Vec<&String> = served.as_object().unwrap().keys().collect();
        let RefOr::T(Schema::Object(shape)) = ChallengeShape::schema() else {
            panic!("the challenge is described as an object");
        };
        let described: Vec<&String> = shape.properties.keys().collect();
        assert_eq!(served, described);
    }

    fn solve(challenge: &Challenge) -> String {
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
        STANDARD.encode(payload.to_string())
    }

    #[test]
    fn a_solution_holds_for_its_room_until_it_expires() {
        let drop = room("drop");
        let challenge = challenge(KEY, &drop, 1, NOW);
        assert_eq!(challenge.maxnumber, 50_000);
        let payload = solve(&challenge);
        let solved = check(&[KEY], &payload, &drop, NOW).unwrap();
        assert_eq!(solved.until, (NOW + CHALLENGE_TTL_MS) / 1000 * 1000);
        assert_eq!(solved.id, challenge.signature);
        assert_eq!(solved.difficulty, 1);
        assert!(check(&[KEY], &payload, &room("other"), NOW).is_err());
        assert!(check(&[KEY], &payload, &drop, solved.until).is_err());
        assert!(check(&["another-key"], &payload, &drop, NOW).is_err());
    }

    #[test]
    fn a_challenge_of_the_previous_key_holds_while_that_key_is_given() {
        let drop = room("drop");
        let payload = solve(&challenge("old-key", &drop, 1, NOW));
        assert!(check(&[KEY, "old-key"], &payload, &drop, NOW).is_ok());
        assert_eq!(
            check(&[KEY], &payload, &drop, NOW),
            Err("the solution does not solve a challenge of ours"),
            "once the previous key is dropped"
        );
    }

    #[test]
    fn every_good_solution_holds_not_just_some() {
        // The crate's verification once depended on a HashMap's order.
        let drop = room("drop");
        for _ in 0..16 {
            let challenge = challenge(KEY, &drop, 1, NOW);
            assert!(check(&[KEY], &solve(&challenge), &drop, NOW).is_ok());
        }
    }

    #[test]
    fn garbage_is_refused_without_a_panic() {
        let drop = room("drop");
        for payload in ["", "!!!", "bm90IGpzb24=", &"A".repeat(5000)] {
            assert!(check(&[KEY], payload, &drop, NOW).is_err(), "{payload}");
        }
        let challenge = challenge(KEY, &drop, 1, NOW);
        let wrong = serde_json::json!({
            "algorithm": "SHA-256", "challenge": challenge.challenge, "number": 50_001,
            "salt": challenge.salt, "signature": challenge.signature,
        });
        assert!(check(&[KEY], &STANDARD.encode(wrong.to_string()), &drop, NOW).is_err());
    }

    #[test]
    fn a_solution_carries_the_difficulty_its_challenge_was_made_at() {
        let drop = room("drop");
        for (asked, made) in [(0, 1), (1, 1), (3, 3), (99, MAX_DIFFICULTY)] {
            let challenge = challenge(KEY, &drop, asked, NOW);
            assert_eq!(challenge.maxnumber, max_number(made));
            let solved = check(&[KEY], &solve(&challenge), &drop, NOW).unwrap();
            assert_eq!(solved.difficulty, made, "asked for {asked}");
        }
    }

    /// A solved payload of `challenge` whose salt is rewritten by `edit`
    /// (the number and signature stay those of the real solution).
    fn with_salt(challenge: &Challenge, edit: impl Fn(&str) -> String) -> String {
        let json = STANDARD.decode(solve(challenge)).unwrap();
        let mut payload: serde_json::Value = serde_json::from_slice(&json).unwrap();
        payload["salt"] = edit(&challenge.salt).into();
        STANDARD.encode(payload.to_string())
    }

    #[test]
    fn a_second_expiry_in_the_salt_is_refused_whichever_comes_first() {
        let drop = room("drop");
        let challenge = challenge(KEY, &drop, 1, NOW);
        let expired = NOW + CHALLENGE_TTL_MS + 1_000;
        let far = "99999999999";
        // The crate ignores a last parameter without its `&`, so it still
        // verifies the salt it signed while a lax reading takes `far`.
        let trailing = with_salt(&challenge, |salt| format!("{salt}expires={far}"));
        assert_eq!(
            check(&[KEY], &trailing, &drop, expired),
            Err("the challenge's salt is not one of ours")
        );
        // The crate keeps the last of a repeated parameter (the real one).
        let repeated = with_salt(&challenge, |salt| {
            let (base, query) = salt.split_once('?').unwrap();
            format!("{base}?expires={far}&{query}")
        });
        assert_eq!(
            check(&[KEY], &repeated, &drop, NOW),
            Err("the challenge's salt repeats a parameter")
        );
    }

    #[test]
    fn only_a_salt_of_exactly_our_form_is_read() {
        let good = "drop.3.0123456789abcdef01234567?expires=1767225900&";
        assert_eq!(
            Salt::read(good),
            Ok(Salt {
                room: "drop",
                difficulty: 3,
                expires_s: 1_767_225_900
            })
        );
        for bad in [
            "drop.3.0123456789abcdef01234567",
            "drop.3.0123456789abcdef01234567?",
            "drop.3.0123456789abcdef01234567?expires=1767225900",
            "drop.3.0123456789abcdef01234567?expires=1767225900&other=1&",
            "drop.3.0123456789abcdef01234567?expires=01767225900&",
            "drop.3.0123456789abcdef01234567?expires=+1767225900&",
            "drop.3.0123456789abcdef01234567?expires=&",
            "drop.03.0123456789abcdef01234567?expires=1767225900&",
            "drop.0.0123456789abcdef01234567?expires=1767225900&",
            "drop.21.0123456789abcdef01234567?expires=1767225900&",
            "drop.0123456789abcdef01234567?expires=1767225900&",
            "drop.3.0123456789ABCDEF01234567?expires=1767225900&",
            "drop.3.0123456789abcdef0123456?expires=1767225900&",
            "drop.3.x.0123456789abcdef01234567?expires=1767225900&",
        ] {
            assert!(Salt::read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn difficulty_scales_the_work() {
        assert_eq!(max_number(0), 50_000);
        assert_eq!(max_number(4), 200_000);
        assert_eq!(max_number(99), 1_000_000);
    }
}
