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
    /// The sale sells the other kind (`seats` or `stock`).
    WrongKind(String),
    NoClaim,
    Expired,
    Released,
    Confirmed,
    /// A code no script of this version answers with.
    Unknown(String),
}

impl ScriptError {
    /// The refusal a script answered with, if the error is one.
    pub fn of(error: &RedisError) -> Option<Self> {
        let code = error.code()?;
        let detail = || error.detail().unwrap_or_default().trim().to_string();
        Some(match code {
            "NOROOM" => Self::NoRoom,
            "CLOSED" => Self::Closed,
            "EXISTS" => Self::Exists,
            "CONFLICT" => Self::Conflict,
            "NOSALE" => Self::NoSale,
            "SOLDOUT" => Self::SoldOut,
            "SEATTAKEN" => Self::SeatTaken(detail()),
            "UNKNOWNSEAT" => Self::UnknownSeat(detail()),
            "LIMIT" => Self::Limit(detail().parse().unwrap_or(0)),
            "WRONGKIND" => Self::WrongKind(detail()),
            "NOCLAIM" => Self::NoClaim,
            "EXPIRED" => Self::Expired,
            "RELEASED" => Self::Released,
            "CONFIRMED" => Self::Confirmed,
            // Redis's own codes (LOADING, NOSCRIPT, READONLY…) are outages.
            code if code.chars().all(|c| c.is_ascii_uppercase())
                && error.kind() == redis::ErrorKind::Extension =>
            {
                Self::Unknown(code.to_string())
            }
            _ => return None,
        })
    }
}
