//! What a script refused with: each `redis.error_reply(CODE .. ' detail')`
//! in `lua/*.lua`, parsed once into a type. The codes are defined here only:
//! the scripts' prelude (`prelude.rs`) gives each to Lua as a local of its
//! own name. Anything else a command fails with is an outage (the store is
//! unavailable), not a refusal.

use redis::RedisError;

/// The refusal codes, as the scripts answer them.
pub(super) mod code {
    pub const NOROOM: &str = "NOROOM";
    pub const CLOSED: &str = "CLOSED";
    pub const EXISTS: &str = "EXISTS";
    pub const CONFLICT: &str = "CONFLICT";
    pub const NOSALE: &str = "NOSALE";
    pub const SOLDOUT: &str = "SOLDOUT";
    pub const SEATTAKEN: &str = "SEATTAKEN";
    pub const UNKNOWNSEAT: &str = "UNKNOWNSEAT";
    pub const LIMIT: &str = "LIMIT";
    pub const RATELIMITED: &str = "RATELIMITED";
    pub const USERREQUIRED: &str = "USERREQUIRED";
    pub const POWREQUIRED: &str = "POWREQUIRED";
    pub const POWREUSED: &str = "POWREUSED";
    pub const POWTOOEASY: &str = "POWTOOEASY";
    pub const NOTACCEPTING: &str = "NOTACCEPTING";
    pub const DRAWSEED: &str = "DRAWSEED";
    pub const NODRAW: &str = "NODRAW";
    pub const NOTDRAWN: &str = "NOTDRAWN";
    pub const WRONGKIND: &str = "WRONGKIND";
    pub const NOCLAIM: &str = "NOCLAIM";
    pub const EXPIRED: &str = "EXPIRED";
    pub const RELEASED: &str = "RELEASED";
    pub const CONFIRMED: &str = "CONFIRMED";
    pub const CODEREQUIRED: &str = "CODEREQUIRED";
    pub const INVALIDCODE: &str = "INVALIDCODE";
    pub const CODEUSED: &str = "CODEUSED";
    pub const GROUPEXISTS: &str = "GROUPEXISTS";
    pub const NOGROUP: &str = "NOGROUP";
    pub const TOOMANYGROUPS: &str = "TOOMANYGROUPS";
    pub const SCHEDULE_DUE: &str = "SCHEDULE_DUE";
    pub const NOTWAITING: &str = "NOTWAITING";
    pub const TOOMANYNOTIFY: &str = "TOOMANYNOTIFY";
    pub const RESUMEUSED: &str = "RESUMEUSED";
}

/// Every refusal code, for the scripts' prelude.
pub(super) const CODES: [&str; 33] = [
    code::NOROOM,
    code::CLOSED,
    code::EXISTS,
    code::CONFLICT,
    code::NOSALE,
    code::SOLDOUT,
    code::SEATTAKEN,
    code::UNKNOWNSEAT,
    code::LIMIT,
    code::RATELIMITED,
    code::USERREQUIRED,
    code::POWREQUIRED,
    code::POWREUSED,
    code::POWTOOEASY,
    code::NOTACCEPTING,
    code::DRAWSEED,
    code::NODRAW,
    code::NOTDRAWN,
    code::WRONGKIND,
    code::NOCLAIM,
    code::EXPIRED,
    code::RELEASED,
    code::CONFIRMED,
    code::CODEREQUIRED,
    code::INVALIDCODE,
    code::CODEUSED,
    code::GROUPEXISTS,
    code::NOGROUP,
    code::TOOMANYGROUPS,
    code::SCHEDULE_DUE,
    code::NOTWAITING,
    code::TOOMANYNOTIFY,
    code::RESUMEUSED,
];

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
    /// The room admits code holders only.
    CodeRequired,
    InvalidCode,
    CodeUsed,
    GroupExists,
    NoGroup,
    TooManyGroups,
    /// A schedule entry is due: the node applies it and runs the
    /// operation again (`load_room` in lua/lib.lua).
    ScheduleDue,
    /// Only a waiting visitor may ask to be notified.
    NotWaiting,
    /// Past `--notify-per-ip`.
    TooManyNotify,
    /// The resume code was spent.
    ResumeUsed,
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

    /// The refusal a script answered as text (`CODE detail`), inside a
    /// reply rather than as an error (one join among others). Redis files
    /// a refusal without detail under `ERR` (`ERR DRAWSEED`).
    pub fn of_reply(text: &str) -> Option<Self> {
        let text = text.trim();
        let text = text.strip_prefix("ERR ").unwrap_or(text);
        let (code, detail) = text.split_once(' ').unwrap_or((text, ""));
        Self::parse(code, detail.trim())
    }

    fn parse(code: &str, detail: &str) -> Option<Self> {
        Some(match code {
            code::NOROOM => Self::NoRoom,
            code::CLOSED => Self::Closed,
            code::EXISTS => Self::Exists,
            code::CONFLICT => Self::Conflict,
            code::NOSALE => Self::NoSale,
            code::SOLDOUT => Self::SoldOut,
            code::SEATTAKEN => Self::SeatTaken(detail.to_string()),
            code::UNKNOWNSEAT => Self::UnknownSeat(detail.to_string()),
            code::LIMIT => Self::Limit(detail.parse().unwrap_or(0)),
            code::RATELIMITED => Self::RateLimited(detail.parse().unwrap_or(1)),
            code::USERREQUIRED => Self::UserRequired,
            code::POWREQUIRED => Self::PowRequired,
            code::POWREUSED => Self::PowReused,
            code::POWTOOEASY => Self::PowTooEasy,
            code::NOTACCEPTING => Self::NotAccepting,
            code::DRAWSEED => Self::DrawSeed,
            code::NODRAW => Self::NoDraw,
            code::NOTDRAWN => Self::NotDrawn,
            code::WRONGKIND => Self::WrongKind(detail.to_string()),
            code::NOCLAIM => Self::NoClaim,
            code::EXPIRED => Self::Expired,
            code::RELEASED => Self::Released,
            code::CONFIRMED => Self::Confirmed,
            code::CODEREQUIRED => Self::CodeRequired,
            code::INVALIDCODE => Self::InvalidCode,
            code::CODEUSED => Self::CodeUsed,
            code::GROUPEXISTS => Self::GroupExists,
            code::NOGROUP => Self::NoGroup,
            code::TOOMANYGROUPS => Self::TooManyGroups,
            code::SCHEDULE_DUE => Self::ScheduleDue,
            code::NOTWAITING => Self::NotWaiting,
            code::TOOMANYNOTIFY => Self::TooManyNotify,
            code::RESUMEUSED => Self::ResumeUsed,
            // Redis's own codes (LOADING, NOSCRIPT, READONLY…) are outages.
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_the_scripts_are_given_is_read_as_a_refusal() {
        for code in CODES {
            assert!(ScriptError::parse(code, "7").is_some(), "{code}");
        }
        assert_eq!(ScriptError::parse("NOSCRIPT", ""), None);
    }

    #[test]
    fn a_refusal_inside_a_reply_is_read_with_its_detail_or_under_err() {
        assert_eq!(
            ScriptError::of_reply("RATELIMITED 7"),
            Some(ScriptError::RateLimited(7))
        );
        assert_eq!(
            ScriptError::of_reply("ERR DRAWSEED"),
            Some(ScriptError::DrawSeed)
        );
        assert_eq!(ScriptError::of_reply("ERR something else"), None);
    }
}
