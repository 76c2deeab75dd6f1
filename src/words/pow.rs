//! Proof of work against bots: ALTCHA challenges (the format api.md fixes:
//! `algorithm`, `challenge`, `salt`, `maxnumber`, `signature`), made and
//! checked with the `altcha-lib-rs` crate. What is ours: the difficulty
//! scale, the room written into the salt and the expiry read on our clock
//! (so tests can drive it), and the id by which a store accepts each
//! solution once.
//!
//! The room is part of the salt itself (`<room>.<random>`), not a second
//! salt parameter: the crate rebuilds the parameters from a `HashMap` when it
//! verifies, so with two of them it would rebuild them in a random order and
//! refuse good solutions half the time.

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

/// `maxnumber` for a difficulty: 50,000 numbers per step, so difficulty 1
/// costs a browser about 25,000 SHA-256 hashes and 20 about 500,000.
pub fn max_number(difficulty: u32) -> u64 {
    u64::from(difficulty.clamp(1, MAX_DIFFICULTY)) * NUMBERS_PER_STEP
}

/// A fresh challenge for `room`, valid until `now + CHALLENGE_TTL_MS`.
pub fn challenge(key: &str, room: &RoomId, difficulty: u32, now: Millis) -> Challenge {
    let expires = DateTime::from_timestamp(((now + CHALLENGE_TTL_MS) / 1000) as i64, 0);
    let random: [u8; 12] = rand::random();
    let salt = format!(
        "{room}.{}",
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
/// once) and until when it would be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solved {
    pub id: String,
    pub until: Millis,
}

/// Checks a join's `pow`: base64 of the ALTCHA payload JSON, signed by
/// us (with any of `keys`: the current secret's, and the previous one's
/// during a rotation), solved, for this room, not expired.
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
    // Expiry on our clock (the crate would read the system's).
    if !keys
        .iter()
        .any(|key| verify_solution(&solution, key, false).is_ok())
    {
        return Err("the solution does not solve a challenge of ours");
    }
    let (base, query) = solution
        .salt
        .split_once('?')
        .unwrap_or((&solution.salt, ""));
    if base.split_once('.').map(|(r, _)| r) != Some(room.as_str()) {
        return Err("the challenge is for another room");
    }
    let params = salt_params(query);
    let expires_s: u64 = params
        .get("expires")
        .and_then(|e| e.parse().ok())
        .ok_or("the challenge has no expiry")?;
    let until = expires_s * 1000;
    if until <= now {
        return Err("the challenge has expired; a new one is needed");
    }
    Ok(Solved {
        id: solution.signature,
        until,
    })
}

/// The salt's parameters: `a=b&c=d` after its `?`.
fn salt_params(query: &str) -> std::collections::HashMap<String, String> {
    url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "pow-key";
    const NOW: Millis = 1_767_225_600_000;

    fn room(id: &str) -> RoomId {
        RoomId::parse(id).unwrap()
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
    fn difficulty_scales_the_work() {
        assert_eq!(max_number(0), 50_000);
        assert_eq!(max_number(4), 200_000);
        assert_eq!(max_number(99), 1_000_000);
    }
}
