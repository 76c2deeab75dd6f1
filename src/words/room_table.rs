//! A room as the rooms file declares it (`--rooms`, api.md "Rooms from a
//! file"): its id, the fields its table names (a [`ConfigPatch`]: the file
//! wins for those, and nothing else of the room is touched) and the hash of
//! the table. The store keeps the hash of the table it applied last with
//! the room, and a table with that hash is not applied again: a restart
//! with an unchanged file must not undo what an operator changed live (an
//! emergency `paused`). Reading the file is start-up's; applying a table is
//! one atomic step of each store (`op::ApplyTable`).

use std::fmt;

use sha2::{Digest, Sha256};

use super::config::ConfigPatch;
use super::model::RoomId;
use super::wire_enum;

/// The lowercase hex SHA-256 of a table's canonical JSON.
#[derive(Clone, PartialEq, Eq)]
pub struct TableHash(String);

impl TableHash {
    /// The hash of `table` in its canonical form: compact JSON, the keys of
    /// every object sorted, so that the order the file writes them in does
    /// not count, only what they say.
    pub fn of(table: &serde_json::Value) -> Self {
        let canonical = canonical(table).to_string();
        let digest = Sha256::digest(canonical.as_bytes());
        Self(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A hash as a store wrote it back.
    pub fn stored(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Short, for the logs: the table may hold a `user_key`, and although a
/// SHA-256 of it gives nothing away, a log line has no use for all of it.
impl fmt::Debug for TableHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableHash({:.12}…)", self.0)
    }
}

/// `value` with the keys of every object in sorted order. Written out
/// because serde_json keeps insertion order once any crate in the build
/// turns on its `preserve_order` feature; sorting here holds either way.
fn canonical(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key.clone(), canonical(value)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(canonical).collect())
        }
        other => other.clone(),
    }
}

/// One `[[room]]` table of the rooms file, read and checked.
#[derive(Debug, Clone)]
pub struct RoomTable {
    pub id: RoomId,
    /// The fields the table names; `name` and `target_url` always among them.
    pub patch: ConfigPatch,
    pub hash: TableHash,
}

wire_enum! {
    /// What applying a table did to its room.
    pub enum Applied {
        /// The room was missing (or closed under another table): made anew.
        Created,
        /// The room took the table's fields.
        Changed,
        /// The table is the one applied last: nothing was done.
        Unchanged,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_hash_is_of_what_the_table_says_not_of_its_order() {
        let a = json!({"id": "a", "name": "A", "page": {"x": 1, "y": [1, {"b": 2, "a": 1}]}});
        let b = json!({"page": {"y": [1, {"a": 1, "b": 2}], "x": 1}, "name": "A", "id": "a"});
        assert_eq!(TableHash::of(&a), TableHash::of(&b));
        let c = json!({"id": "a", "name": "B", "page": {"x": 1, "y": [1, {"b": 2, "a": 1}]}});
        assert_ne!(TableHash::of(&a), TableHash::of(&c));
        assert_eq!(TableHash::of(&a).as_str().len(), 64);
        assert!(!format!("{:?}", TableHash::of(&a)).contains(TableHash::of(&a).as_str()));
    }
}
