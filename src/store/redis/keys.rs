//! Every Redis key and channel name waitroom uses, in one place. A room's
//! keys share the hash tag `{room}`, so that on a Cluster they sit in one
//! slot and one script can touch them all.

use crate::words::RoomId;
use crate::words::join_limit::ClientBlock;

/// The set of open rooms' ids.
pub(super) const ROOMS_KEY: &str = "wr:rooms";
/// The set of ids of rooms closed with a report kept (see `REPORTS`):
/// with [`ROOMS_KEY`], every room a report may be kept of. Never shrunk:
/// it holds as many ids as operators ever made rooms under.
pub(super) const REPORTED_KEY: &str = "wr:reported";

/// The room's own hash: the first of its keys, whose name the scripts take
/// the room's prefix `wr:{room}:` from (`lua/lib.lua`).
pub(super) const ROOM: &str = "room";
/// The room's events' channel.
pub(super) const EVENTS: &str = "events";
/// A visitor who left: `wr:{room}:left:<visitor>`, named by the scripts only.
pub(super) const LEFT_PREFIX: &str = "left:";
/// The passes of bypass networks' clients, outside the cap (a sorted set
/// by expiry): `wr:{room}:bypassed`, named by the scripts only.
pub(super) const BYPASSED: &str = "bypassed";
/// The priority line: a sorted set, score priority × 2³² + the level's
/// join sequence number; named by the scripts only.
pub(super) const PRIORITY: &str = "priority";
/// The code holders drawn: score priority, members `<draw key hex>:<entry>`.
pub(super) const PRIORITY_ENTRIES: &str = "priority-entries";
/// The room's groups of codes: name → `priority|uses|total`.
pub(super) const CODE_GROUPS: &str = "code-groups";
/// Each group's codes used at least once: name → count.
pub(super) const CODE_GROUPS_USED: &str = "code-groups-used";
/// A group's codes: `wr:{room}:codes:<group>`, SHA-256 hex → uses spent.
pub(super) const CODES_PREFIX: &str = "codes:";
/// Per client address block: the join limit's theoretical arrival time.
pub(super) const JOIN_LIMIT_PREFIX: &str = "join-limit:";
/// Per client address block: the code-guess budget's theoretical arrival
/// time (`wr:{room}:code-guesses:<block>`, expiring with it).
pub(super) const CODE_GUESSES_PREFIX: &str = "code-guesses:";
/// Known users' visitors back to their user: visitor → user token `sub`.
pub(super) const USER_OF: &str = "user-of";
/// Per proof-of-work solution: that it was used.
pub(super) const POW_PREFIX: &str = "pow:";
/// A room's ledger for its report, per life (`wr:{room}:ledger:<life>`),
/// with its rows (`minutes:<life>`, `hours:<life>`): lua/lib.lua's `ledger`.
pub(super) const LEDGER_PREFIX: &str = "ledger:";
pub(super) const MINUTES_PREFIX: &str = "minutes:";
pub(super) const HOURS_PREFIX: &str = "hours:";
/// The room's lives with a ledger kept: life → `<created_at>|<closed_at>`.
pub(super) const REPORTS: &str = "reports";
/// The room's schedule, as `words::schedule::Schedule::stored` writes it.
pub(super) const SCHEDULE: &str = "schedule";
/// Autotune's health samples, `words::autotune::Sample::stored` each.
pub(super) const SAMPLES: &str = "health-samples";
/// Autotune's changes of the rate, JSON each (`words::autotune::Change`).
pub(super) const TUNE_CHANGES: &str = "tune-changes";

/// Who asked to be notified: visitor → their request and what the scripts
/// keep with it (JSON, `lua/lib.lua`'s `notes`).
pub(super) const NOTIFY: &str = "notify";
/// Those whose `near` is to come, in each part of the line, scored and
/// named as that part is (`near:p`, `near:d`, `near:l`).
pub(super) const NEAR_PREFIX: &str = "near:";
/// Per client block, the places holding a request (`--notify-per-ip`),
/// under the room's life.
pub(super) const NOTIFY_BLOCK_PREFIX: &str = "notify-block:";
/// The outbox: a Stream whose consumer group (`OUTBOX_GROUP`) hands each
/// event to one node.
pub(super) const OUTBOX: &str = "outbox";
pub(super) const OUTBOX_GROUP: &str = "senders";

/// One of a room's keys: `wr:{room}:name`.
pub(super) fn room_key(room: &RoomId, name: &str) -> String {
    format!("wr:{{{room}}}:{name}")
}

/// The keys of one room, in the order every room script takes them: each
/// key's name in the scripts (the prelude binds it, `prelude::room_script`)
/// and in Redis (`wr:{room}:<name>`).
pub(super) const ROOM_KEYS: [(&str, &str); 11] = [
    ("K_ROOM", ROOM),
    ("K_LINE", "line"),
    ("K_SEEN", "seen"),
    ("K_VISITORS", "visitors"),
    ("K_ACTIVE", "active"),
    ("K_ADMISSIONS", "admissions"),
    ("K_ARRIVALS", "arrivals"),
    ("K_USERS", "users"),
    ("K_DRAW", "draw"),
    ("K_ENTRIES", "entries"),
    ("K_USER_OF", USER_OF),
];

/// The room's sale keys, in the order every sale script takes them
/// (`prelude::sale_script`); creating a room deletes them all.
pub(super) const SALE_KEYS: [(&str, &str); 8] = [
    ("K_SALE", "sale"),
    ("K_SEATS", "seats"),
    ("K_CLAIMS", "claims"),
    ("K_HOLDS", "holds"),
    ("K_UNITS", "units"),
    ("K_IDEMPOTENCY", "idempotency"),
    ("K_ORDERS", "orders"),
    ("K_MINE", "mine"),
];

/// The keys of one room, in the order of [`ROOM_KEYS`].
pub(super) fn room_keys(room: &RoomId) -> [String; 11] {
    ROOM_KEYS.map(|(_, name)| room_key(room, name))
}

/// The room's sale keys, in the order of [`SALE_KEYS`].
pub(super) fn sale_keys(room: &RoomId) -> Vec<String> {
    SALE_KEYS
        .iter()
        .map(|(_, name)| room_key(room, name))
        .collect()
}

/// A client block's wrong operator logins (its TAT), one key each,
/// expiring with it; the block is the key's hash tag.
pub(super) fn login_key(block: &ClientBlock) -> String {
    format!("wr:login:{{{block}}}")
}

/// An ended operator session: one key each, expiring with the session.
pub(super) fn ended_session_key(id: &str) -> String {
    format!("wr:admin-session-ended:{id}")
}

/// The room's events' (sharded) pub/sub channel, in the room's own slot.
pub(super) fn channel(room: &RoomId) -> String {
    room_key(room, EVENTS)
}

/// Every room's channel, for the pattern subscription on one server.
pub(super) const EVENTS_PATTERN: &str = "wr:*:events";

/// The room a channel is of.
pub(super) fn room_of_channel(channel: &str) -> Option<RoomId> {
    RoomId::parse(
        channel
            .strip_prefix("wr:{")?
            .strip_suffix(EVENTS)?
            .strip_suffix("}:")?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rooms_channel_names_the_room() {
        let room = RoomId::parse("spring-sale").unwrap();
        assert_eq!(channel(&room), "wr:{spring-sale}:events");
        assert_eq!(room_of_channel(&channel(&room)), Some(room));
        assert_eq!(room_of_channel("wr:{spring-sale}:line"), None);
    }
}
