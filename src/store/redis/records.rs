//! The records the scripts keep as one string each in a Redis hash (a
//! visitor's place or pass, a group of codes, a sale's claim), declared
//! once: the prelude generates from each declaration the Lua that writes
//! it and reads it back (`prelude::records_lua`), so no script splits a
//! record by hand. The layout is the compact one: a kind's letter when the
//! hash holds several kinds, then the fields, `|` between; the last field
//! may hold any character. Kept over JSON by measurement (BENCHMARKS.md,
//! issue 42): a place in the line costs 262 bytes of Redis memory, and a
//! record read costs a call where decoding JSON costs microseconds.

/// A record: its name in the Lua (`records.<name>.write(…)` makes one,
/// `records.<name>.read(record)` gives its fields' values back, in this
/// order), the letter its kind begins with, and its fields.
pub(super) struct Record {
    pub name: &'static str,
    pub tag: Option<&'static str>,
    pub fields: &'static [&'static str],
}

/// The record of each visitor in a room's `visitors` hash, one kind each.
pub(super) const VISITOR_RECORDS: [Record; 5] = [
    // In the general line: its join sequence number, when it joined.
    Record {
        name: "waiting",
        tag: Some("w"),
        fields: &["seq", "joined"],
    },
    // In the draw before the opening: the entrant's key and entry id.
    Record {
        name: "drawn",
        tag: Some("d"),
        fields: &["key", "entry", "joined"],
    },
    // In the priority line: the code's group, its priority, the level's
    // sequence number.
    Record {
        name: "priority",
        tag: Some("q"),
        fields: &["group", "priority", "seq", "joined"],
    },
    // A code holder in the draw.
    Record {
        name: "priority_drawn",
        tag: Some("r"),
        fields: &["group", "priority", "key", "entry", "joined"],
    },
    // Admitted: its pass's times, ms.
    Record {
        name: "admitted",
        tag: Some("a"),
        fields: &["admitted_at", "expires_at"],
    },
];

/// A group of priority codes in a room's `code-groups` hash, by name.
pub(super) const GROUP: Record = Record {
    name: "group",
    tag: None,
    fields: &["priority", "uses", "total"],
};

/// A claim in a sale's `claims` hash, by id.
pub(super) const CLAIM: Record = Record {
    name: "claim",
    tag: None,
    fields: &[
        "visitor",
        "state",
        "quantity",
        "seats",
        "sequence",
        "expires",
        "confirmed",
        "buyer",
    ],
};
