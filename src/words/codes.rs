//! Priority and invite codes: a room's groups of codes (each with its
//! `priority` and its `uses` per code), what an operator asks to add, how a
//! code is kept (a SHA-256 of it, never the code itself), how codes are
//! made, and the rules of spending one, as the memory model keeps them
//! (`lua/join.lua` keeps the same on Redis).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use sha2::{Digest, Sha256};

use crate::words::chance::Chance;

/// Codes in one group at most.
pub const MAX_CODES_PER_GROUP: usize = 10_000;
/// Groups in one room at most: a join looks a code up in each.
pub const MAX_GROUPS: usize = 100;
/// The lowest priority a group may have (lower is admitted first).
pub const MAX_PRIORITY: u32 = 1_000_000;
/// A given code's length, in characters, at most.
pub const MAX_CODE_CHARS: usize = 128;
/// How long a generated code is: 22 characters of 64 is 132 bits.
pub const GENERATED_CODE_CHARS: usize = 22;
/// The bits of a generated code: each character is one of 64, drawn
/// uniformly (a random byte's low six bits).
pub const GENERATED_CODE_BITS: u32 = GENERATED_CODE_CHARS as u32 * 6;
// The docs promise generated codes of 96 bits at least.
const _: () = assert!(GENERATED_CODE_BITS >= 96);
/// The fewest bits a code an operator gives may have, as
/// [`estimated_bits`] counts them. A store's copy holds each code's
/// SHA-256, which a short code can be found from by trying candidates
/// offline; and an address may guess online only a few a minute, but
/// many addresses together far more. 64 bits is out of reach of both.
pub const MIN_GIVEN_CODE_BITS: f64 = 64.0;
/// How many codes one request may generate.
pub const MAX_GENERATED: usize = MAX_CODES_PER_GROUP;

/// The URL-safe alphabet generated codes are made of (base64url's).
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A code as it is kept: its SHA-256. A store never holds the code itself,
/// so a copy of the store does not give the codes away (a short code an
/// operator chose can still be guessed from its hash; generated ones can't).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CodeHash(pub [u8; 32]);

impl CodeHash {
    pub fn of(code: &str) -> Self {
        Self(Sha256::digest(code.as_bytes()).into())
    }

    pub fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for CodeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A group's name: `[a-z0-9_-]{1,64}`, so that it can name a key and a path.
pub fn check_group_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "group must be 1 to 64 of a-z, 0-9, '-' and '_'; {name:?} is not"
        ))
    }
}

/// A code an operator gives: 1 to 128 visible characters, no spaces. The
/// refusal reads after the code's name (`codes[3] …`).
pub fn check_given_code(code: &str) -> Result<(), String> {
    let chars = code.chars().count();
    if chars == 0 || chars > MAX_CODE_CHARS {
        return Err(format!(
            "must be 1 to {MAX_CODE_CHARS} characters; it is {chars}"
        ));
    }
    if code.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("holds a space or a control character, which codes may not".into());
    }
    Ok(())
}

/// How many bits a code may hold at most, judged by its length and the
/// kinds of characters it uses: `length × log2(alphabet)`, the alphabet
/// being the sum of the kinds present (lowercase 26, uppercase 26, digits
/// 10, anything else 32, about the printable ASCII punctuation). An upper
/// bound: a code made by a person (a word, a date, `STAFF-0001`) holds far
/// fewer, so the bound refuses the short ones, never vouches for a long one.
pub fn estimated_bits(code: &str) -> f64 {
    let (mut lower, mut upper, mut digits, mut other) = (false, false, false, false);
    for c in code.chars() {
        match c {
            'a'..='z' => lower = true,
            'A'..='Z' => upper = true,
            '0'..='9' => digits = true,
            _ => other = true,
        }
    }
    let alphabet = [(lower, 26), (upper, 26), (digits, 10), (other, 32)]
        .iter()
        .filter(|(present, _)| *present)
        .map(|(_, size)| size)
        .sum::<u32>();
    code.chars().count() as f64 * f64::from(alphabet.max(1)).log2()
}

/// A given code hard enough to guess ([`MIN_GIVEN_CODE_BITS`]); the
/// refusal says how far it falls short, never the code.
pub fn check_code_strength(code: &str) -> Result<(), String> {
    let bits = estimated_bits(code);
    if bits < MIN_GIVEN_CODE_BITS {
        return Err(format!(
            "is too easy to guess: about {bits:.0} bits by its length and the kinds of \
             characters it uses, at least {MIN_GIVEN_CODE_BITS:.0} needed (say 16 random \
             letters and digits; or have codes generated, {GENERATED_CODE_BITS} bits each)"
        ));
    }
    Ok(())
}

/// `count` new codes of [`GENERATED_CODE_CHARS`] URL-safe characters.
pub fn generate(chance: &dyn Chance, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            let bytes = chance.bytes32();
            bytes[..GENERATED_CODE_CHARS]
                .iter()
                .map(|b| ALPHABET[usize::from(b & 63)] as char)
                .collect()
        })
        .collect()
}

/// A group to add, its codes already hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewGroup {
    pub group: String,
    pub priority: u32,
    pub uses: u32,
    pub codes: Vec<CodeHash>,
}

/// A group as the operator sees it: never its codes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct GroupSummary {
    pub group: String,
    /// Lower is admitted first.
    pub priority: u32,
    /// Places each code makes.
    pub uses: u32,
    /// Codes in the group.
    pub total: u64,
    /// Codes used at least once.
    pub used: u64,
}

/// What a valid code gives its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub group: String,
    pub priority: u32,
}

/// Why a code gives no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Unknown, or its group was removed.
    Invalid,
    /// Every use of it was spent.
    Used,
}

struct Group {
    priority: u32,
    uses: u32,
    /// Each code → the uses spent.
    spent: HashMap<CodeHash, u32>,
    used: u64,
}

/// A room's codes, as the memory model keeps them.
#[derive(Default)]
pub struct Codes {
    groups: BTreeMap<String, Group>,
}

impl Codes {
    /// Adds a group; `Err(true)` if one of that name exists, `Err(false)`
    /// if the room holds [`MAX_GROUPS`] already.
    pub fn add(&mut self, new: NewGroup) -> Result<GroupSummary, bool> {
        if self.groups.contains_key(&new.group) {
            return Err(true);
        }
        if self.groups.len() >= MAX_GROUPS {
            return Err(false);
        }
        let spent: HashMap<CodeHash, u32> = new.codes.iter().map(|code| (*code, 0)).collect();
        let group = Group {
            priority: new.priority,
            uses: new.uses,
            spent,
            used: 0,
        };
        let summary = summary(&new.group, &group);
        self.groups.insert(new.group, group);
        Ok(summary)
    }

    /// Every group, by name.
    pub fn groups(&self) -> Vec<GroupSummary> {
        self.groups
            .iter()
            .map(|(name, group)| summary(name, group))
            .collect()
    }

    /// Removes a group at once: its codes stop working. Whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.groups.remove(name).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// What the code gives, without spending it: the group holding it
    /// (of those that do, the first by priority, then name) with a use left.
    pub fn check(&self, code: CodeHash) -> Result<Granted, Refused> {
        let mut holders: Vec<(&String, &Group)> = self
            .groups
            .iter()
            .filter(|(_, group)| group.spent.contains_key(&code))
            .collect();
        holders.sort_by_key(|(name, group)| (group.priority, *name));
        if holders.is_empty() {
            return Err(Refused::Invalid);
        }
        holders
            .into_iter()
            .find(|(_, group)| group.spent[&code] < group.uses)
            .map(|(name, group)| Granted {
                group: name.clone(),
                priority: group.priority,
            })
            .ok_or(Refused::Used)
    }

    /// Spends one use of a code [`Codes::check`] granted.
    pub fn spend(&mut self, code: CodeHash, granted: &Granted) {
        if let Some(group) = self.groups.get_mut(&granted.group)
            && let Some(spent) = group.spent.get_mut(&code)
        {
            if *spent == 0 {
                group.used += 1;
            }
            *spent += 1;
        }
    }
}

fn summary(name: &str, group: &Group) -> GroupSummary {
    GroupSummary {
        group: name.to_string(),
        priority: group.priority,
        uses: group.uses,
        total: group.spent.len() as u64,
        used: group.used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::chance::SeededChance;

    fn group(name: &str, priority: u32, uses: u32, codes: &[&str]) -> NewGroup {
        NewGroup {
            group: name.into(),
            priority,
            uses,
            codes: codes.iter().map(|c| CodeHash::of(c)).collect(),
        }
    }

    #[test]
    fn a_code_is_spent_up_to_its_uses_then_refused() {
        let mut codes = Codes::default();
        codes.add(group("fans", 1, 2, &["a", "b"])).unwrap();
        let a = CodeHash::of("a");
        for _ in 0..2 {
            let granted = codes.check(a).unwrap();
            codes.spend(a, &granted);
        }
        assert_eq!(codes.check(a), Err(Refused::Used));
        assert_eq!(codes.check(CodeHash::of("c")), Err(Refused::Invalid));
        assert_eq!(codes.groups()[0].used, 1);
        assert!(codes.remove("fans"));
        assert_eq!(codes.check(CodeHash::of("b")), Err(Refused::Invalid));
    }

    #[test]
    fn generated_codes_are_url_safe_and_distinct() {
        let made = generate(&SeededChance::new(5), 500);
        assert!(made.iter().all(|c| {
            c.len() == GENERATED_CODE_CHARS
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }));
        let distinct: std::collections::HashSet<_> = made.iter().collect();
        assert_eq!(distinct.len(), 500);
    }

    #[test]
    fn generated_codes_hold_at_least_96_bits() {
        assert_eq!(ALPHABET.len(), 64, "six bits a character");
        for code in generate(&SeededChance::new(9), 200) {
            assert!(check_code_strength(&code).is_ok(), "{code}");
        }
    }

    #[test]
    fn a_code_is_judged_by_its_length_and_kinds_of_characters() {
        let bits = |code: &str| estimated_bits(code).round() as u32;
        assert_eq!(bits("0000000000"), 33, "ten digits: 10 × log2 10");
        assert_eq!(bits("abcdefghijklm"), 61, "13 lowercase: 13 × log2 26");
        assert_eq!(bits("STAFF-7Q2K"), 61, "upper, digits, other: 10 × log2 68");
        assert_eq!(bits("aB3-"), 26, "every kind: 4 × log2 94");
        assert!(check_code_strength("STAFF-7Q2K").is_err());
        assert!(
            check_code_strength("abcdefghijklmn").is_ok(),
            "14 × 4.70 = 65.8"
        );
        let refusal = check_code_strength("FAN-0001").unwrap_err();
        assert!(!refusal.contains("FAN-0001"), "{refusal}");
        // A hex string of 128 bits, as `openssl rand -hex 16` makes.
        assert!(check_code_strength("3f9c1a7e5b2d4c6f8a0e1b3d5f7a9c2e").is_ok());
    }

    #[test]
    fn names_and_codes_are_checked() {
        assert!(check_group_name("fan-club_2").is_ok());
        for bad in ["", "Fans", "a b", "a/b", &"x".repeat(65)] {
            assert!(check_group_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_given_code("PRESALE-2026").is_ok());
        assert!(check_given_code("a b").is_err());
        assert!(check_given_code(&"x".repeat(129)).is_err());
    }
}
