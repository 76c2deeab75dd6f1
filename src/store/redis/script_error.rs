//! What a script refused with: each `redis.error_reply('CODE detail')` in
//! `lua/*.lua`, parsed once into a type. Anything else a command fails with
//! is an outage (the store is unavailable), not a refusal.

use redis::RedisError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptError {
    NoRoom,
    Closed,
    Exists,
    /// The config changed since it was read (`configure.lua`).
    Conflict,
    NoSale,
    SoldOut,
    SeatTaken(String),
    UnknownSeat(String),
    Limit(u32),
    /// The per-address join limit, with the seconds until the next join.
    RateLimited(u64),
    /// The room admits known users only.
    UserRequired,
    PowRequired,
    PowReused,
    /// The solution's challenge is easier than the room's `pow_difficulty`.
    PowTooEasy,
    /// `reject`, or past `closes_at`.
    NotAccepting,
    /// The node joined a pre-queue without the room's draw seed (or an old one).
    DrawSeed,
    NoDraw,
    NotDrawn,
    /// The sale sells the other kind (`seats` or `stock`).
    WrongKind(String),
    NoClaim,
    Expired,
    Released,
    Confirmed,
}

impl ScriptError {
    /// The refusal a script answered with, if the error is one. A single
    /// Redis files it as the error's code (`SEATTAKEN`, detail `A1`); the
    /// cluster client as a response error whose detail holds both.
    pub fn of(error: &RedisError) -> Option<Self> {
        let detail = error.detail().unwrap_or_default().trim();
        if let Some(refusal) = error.code().and_then(|code| Self::parse(code, detail)) {
            return Some(refusal);
        }
        let (code, rest) = detail.split_once(' ').unwrap_or((detail, ""));
        Self::parse(code, rest.trim())
    }

    fn parse(code: &str, detail: &str) -> Option<Self> {
        Some(match code {
            "NOROOM" => Self::NoRoom,
            "CLOSED" => Self::Closed,
            "EXISTS" => Self::Exists,
            "CONFLICT" => Self::Conflict,
            "NOSALE" => Self::NoSale,
            "SOLDOUT" => Self::SoldOut,
            "SEATTAKEN" => Self::SeatTaken(detail.to_string()),
            "UNKNOWNSEAT" => Self::UnknownSeat(detail.to_string()),
            "LIMIT" => Self::Limit(detail.parse().unwrap_or(0)),
            "RATELIMITED" => Self::RateLimited(detail.parse().unwrap_or(1)),
            "USERREQUIRED" => Self::UserRequired,
            "POWREQUIRED" => Self::PowRequired,
            "POWREUSED" => Self::PowReused,
            "POWTOOEASY" => Self::PowTooEasy,
            "NOTACCEPTING" => Self::NotAccepting,
            "DRAWSEED" => Self::DrawSeed,
            "NODRAW" => Self::NoDraw,
            "NOTDRAWN" => Self::NotDrawn,
            "WRONGKIND" => Self::WrongKind(detail.to_string()),
            "NOCLAIM" => Self::NoClaim,
            "EXPIRED" => Self::Expired,
            "RELEASED" => Self::Released,
            "CONFIRMED" => Self::Confirmed,
            // Redis's own codes (LOADING, NOSCRIPT, READONLY…) are outages.
            _ => return None,
        })
    }
}
