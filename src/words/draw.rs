//! The draw of a scheduled room, as api.md defines it: a secret 32-byte
//! seed committed to by its SHA-256 before anyone joins, an entry id for
//! each pre-queue entrant, and the order HMAC-SHA256(seed, entry), lowest
//! first. Each entrant's key is computed when they join, so the opening
//! only reveals an order that already exists: it costs the store nothing.

use std::fmt;
use std::str::FromStr;

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::clock::{Millis, Moment};
use super::config::ConfigError;

/// The secret a room's draw is made from, until the opening reveals it.
#[derive(Clone, PartialEq, Eq)]
pub struct DrawSeed([u8; 32]);

impl DrawSeed {
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// What is published before the first join: lowercase hex SHA-256 of the seed.
    pub fn commitment(&self) -> String {
        hex(&Sha256::digest(self.0))
    }

    /// The seed as the draw reveals it: 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// An entrant's place in the drawn order.
    pub fn key_of(&self, entry: &EntryId) -> DrawKey {
        draw_key(&self.0, entry.to_string().as_bytes())
    }
}

impl FromStr for DrawSeed {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        unhex::<32>(text).map(Self)
    }
}

/// Never in a log: the seed decides the order until it is revealed.
impl fmt::Debug for DrawSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DrawSeed([redacted])")
    }
}

/// HMAC-SHA256(key = seed, message = entry): the recipe api.md publishes.
pub fn draw_key(seed: &[u8], entry: &[u8]) -> DrawKey {
    let mut mac = Hmac::<Sha256>::new_from_slice(seed).expect("HMAC takes a key of any length");
    mac.update(entry);
    DrawKey(mac.finalize().into_bytes().into())
}

/// An entrant's HMAC: entrants are drawn in ascending order of it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DrawKey(pub [u8; 32]);

impl DrawKey {
    /// The first 8 bytes, big-endian: orders like the whole key except
    /// between keys that share them (1 in 2^64), which only positions
    /// estimated from events compare.
    pub fn prefix(&self) -> u64 {
        u64::from_be_bytes(self.0[..8].try_into().expect("8 bytes"))
    }

    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

impl FromStr for DrawKey {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        unhex::<32>(text).map(Self)
    }
}

impl fmt::Debug for DrawKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DrawKey({})", &self.to_hex()[..16])
    }
}

/// An entrant's public id in the draw: random, so the published list of
/// entries says nothing about passes or visitors.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId([u8; 12]);

impl EntryId {
    pub fn from_bytes(bytes: [u8; 12]) -> Self {
        Self(bytes)
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EntryId({self})")
    }
}

impl FromStr for EntryId {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        unhex::<12>(text).map(Self)
    }
}

impl Serialize for EntryId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A room's draw as anyone may see it (`GET /api/rooms/{room}/draw`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DrawInfo {
    pub opens_at: Moment,
    pub commitment: String,
    /// Null until the opening.
    pub seed: Option<String>,
    /// Everyone in the pre-queue: so far, or at the opening once drawn.
    pub entrants: u64,
    /// Of the entrants, the code holders, drawn ahead of everyone else and
    /// listed first by `draw/entries` (lower priority first, each priority
    /// in HMAC order).
    #[serde(default)]
    pub priority_entrants: u64,
    /// The opening, once it has passed: the order took effect then.
    pub drawn_at: Option<Moment>,
}

/// Who waits in a room, as an opening's change is judged.
#[derive(Debug, Clone, Copy, Default)]
pub struct Waiting {
    /// In the line (after the opening, or in a room without one).
    pub line: u64,
    /// For the opening, in the pre-queue.
    pub pre_queue: u64,
}

/// Whether a room's opening may change from `old` to `new` at `now`, with
/// `waiting` in its line and pre-queue: the opening is when
/// the order takes effect, so once it has passed it stays; a pre-queue
/// keeps its opening (which may be brought forward, to now or earlier, to
/// open at once); and a room whose line already holds people gets none,
/// since they would wait behind the draw's entrants who came after them.
pub fn check_schedule(
    old: Option<Moment>,
    new: Option<Moment>,
    now: Millis,
    waiting: Waiting,
) -> Result<(), ConfigError> {
    if old == new {
        return Ok(());
    }
    if old.is_some_and(|at| now >= at.0) {
        return Err(ConfigError::new(
            "opens_at",
            "opens_at can't change after the opening: the draw is done",
        ));
    }
    let Waiting { line, pre_queue } = waiting;
    if old.is_none() && line > 0 {
        return Err(ConfigError::new(
            "opens_at",
            format!(
                "opens_at can't be set while {line} wait in the line: the draw's entrants would go ahead of them; let the line empty first"
            ),
        ));
    }
    if new.is_none() && pre_queue > 0 {
        return Err(ConfigError::new(
            "opens_at",
            format!(
                "opens_at can't be removed while {pre_queue} wait in the pre-queue; set it to now to open at once"
            ),
        ));
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn unhex<const N: usize>(text: &str) -> Result<[u8; N], ()> {
    if text.len() != 2 * N || !text.is_ascii() {
        return Err(());
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| ())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_published_hmac() {
        // RFC 4231 test case 2: key "Jefe".
        let key = draw_key(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            key.to_hex(),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn seeds_entries_and_keys_round_trip_as_hex() {
        let seed = DrawSeed::from_bytes(rand::random());
        assert_eq!(seed.to_hex().parse::<DrawSeed>(), Ok(seed.clone()));
        assert_eq!(seed.commitment().len(), 64);
        assert_ne!(seed.commitment(), seed.to_hex());
        let entry = EntryId::from_bytes(rand::random());
        assert_eq!(entry.to_string().len(), 24);
        assert_eq!(entry.to_string().parse::<EntryId>(), Ok(entry));
        let key = seed.key_of(&entry);
        assert_eq!(key.to_hex().parse::<DrawKey>(), Ok(key));
        assert!("zz".repeat(12).parse::<EntryId>().is_err());
        assert!(format!("{seed:?}").contains("redacted"));
    }

    #[test]
    fn an_opening_stays_once_passed_and_a_pre_queue_keeps_one() {
        let at = |ms| Some(Moment(ms));
        let pre_queue = |n| Waiting {
            pre_queue: n,
            line: 0,
        };
        let empty = Waiting::default();
        assert!(check_schedule(None, at(100), 50, empty).is_ok());
        assert!(check_schedule(at(100), at(200), 50, pre_queue(9)).is_ok());
        assert!(
            check_schedule(at(100), at(10), 50, pre_queue(9)).is_ok(),
            "open at once"
        );
        assert!(check_schedule(at(100), None, 50, empty).is_ok());
        assert!(check_schedule(at(100), None, 50, pre_queue(1)).is_err());
        assert!(check_schedule(at(100), at(200), 100, empty).is_err());
        assert!(check_schedule(at(100), at(100), 500, empty).is_ok());
    }

    #[test]
    fn a_room_whose_line_holds_people_gets_no_opening() {
        let at = |ms| Some(Moment(ms));
        let waiting = Waiting {
            line: 3,
            pre_queue: 0,
        };
        let refused = check_schedule(None, at(100), 50, waiting).unwrap_err();
        assert!(
            refused.to_string().contains("3 wait in the line"),
            "{refused}"
        );
        assert!(
            check_schedule(None, at(10), 50, waiting).is_err(),
            "nor one in the past"
        );
        assert!(check_schedule(None, None, 50, waiting).is_ok());
    }

    /// Pearson's statistic of observed counts against one expected count.
    fn chi_square(observed: &[u64], expected: f64) -> f64 {
        observed
            .iter()
            .map(|o| (*o as f64 - expected).powi(2) / expected)
            .sum()
    }

    #[test]
    fn draws_give_every_entrant_every_position_alike_whenever_they_joined() {
        // 20,000 draws of a pre-queue of 5, with fixed seeds (SHA-256 of the
        // draw's number), so the test is the same on every run: it cannot
        // flake, and the bounds are chi-square quantiles at p = 1e-9, which
        // a fair draw passes with certainty and a biased one does not.
        const ENTRANTS: usize = 5;
        const DRAWS: u64 = 20_000;
        // In join order: entrant 0 came first.
        let entries: Vec<EntryId> = (0..ENTRANTS)
            .map(|i| format!("{:024x}", 0x5eed_0000 + i).parse().unwrap())
            .collect();
        let mut positions = [[0u64; ENTRANTS]; ENTRANTS]; // [joined][drawn]
        for draw in 0..DRAWS {
            let seed = DrawSeed::from_bytes(Sha256::digest(draw.to_be_bytes()).into());
            let mut order: Vec<(DrawKey, usize)> = entries
                .iter()
                .enumerate()
                .map(|(joined, entry)| (seed.key_of(entry), joined))
                .collect();
            order.sort();
            for (drawn, (_, joined)) in order.iter().enumerate() {
                positions[*joined][drawn] += 1;
            }
        }
        let expected = DRAWS as f64 / ENTRANTS as f64;
        // The first position: each entrant as often as any (4 degrees of freedom).
        let first: Vec<u64> = positions.iter().map(|row| row[0]).collect();
        let first_stat = chi_square(&first, expected);
        assert!(
            first_stat < 52.5,
            "first positions {first:?}: chi2 {first_stat}"
        );
        // Every position, by join order: when one joined does not predict
        // where one is drawn (each row uniform, 20 degrees of freedom).
        let all: Vec<u64> = positions.iter().flatten().copied().collect();
        let all_stat = chi_square(&all, expected);
        assert!(
            all_stat < 85.2,
            "positions by join order {positions:?}: chi2 {all_stat}"
        );
        // And the test has teeth: a draw giving the first to join the first
        // place 10% more often than fair is caught.
        let mut biased = positions;
        biased[0][0] += 400;
        biased[0][4] -= 400;
        let biased: Vec<u64> = biased.iter().flatten().copied().collect();
        assert!(chi_square(&biased, expected) > 85.2);
    }

    #[test]
    fn the_prefix_orders_like_the_key() {
        let seed = DrawSeed::from_bytes(rand::random());
        let mut keys: Vec<DrawKey> = (0..1000)
            .map(|_| seed.key_of(&EntryId::from_bytes(rand::random())))
            .collect();
        keys.sort();
        assert!(keys.windows(2).all(|w| w[0].prefix() <= w[1].prefix()));
    }
}
