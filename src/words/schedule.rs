//! A room's schedule (api.md, "Scheduled changes"): changes to its config
//! set in advance, each applied once, by the first store operation at or
//! after its time, as if an operator had made it then (design rule 15).
//!
//! What is here: the entries and how they read, show and are stored
//! ([`Schedule`], [`ScheduleEntry`]). What each entry's change does to a
//! config is the config's own rule (`words::config`: the check when a
//! schedule is set, `RoomConfig::apply_due`, `RoomConfig::preview`), so
//! this module knows no config. When an entry applies (which operation, on
//! which node) is the stores' part: the memory store asks at each
//! operation, a Redis script refuses to run while an entry is due and the
//! node applies it, written only if nobody wrote the config since.

use serde::Serialize;
use serde_json::{Map, Value};

use super::clock::{Millis, Moment};

/// The most entries a schedule holds.
pub const MAX_ENTRIES: usize = 50;

/// The config's write-only fields, shown as `"set"` in an entry (a test in
/// `words::config` holds this to the fields its `FIELDS` declares secret).
pub const WRITE_ONLY: &[&str] = &["user_key", "notify_webhook_secret"];

/// What is wrong with a schedule as given: the field it is about
/// (`schedule`, `schedule[2]`…) and why.
pub type Fault = (String, String);

/// The entries, in `at` order (entries at the same time in the order given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule(pub(super) Vec<ScheduleEntry>);

/// One change set in advance. Its `Debug` (what the logs would print)
/// hides the write-only fields it sets, as the API does.
#[derive(Clone, PartialEq)]
pub struct ScheduleEntry {
    pub at: Moment,
    /// Any config fields but `schedule` (and the room's `id`, which is no
    /// field), as a PATCH names them (read as one by `words::config`).
    pub set: Map<String, Value>,
    /// When an operation applied it; `None` until then.
    pub applied_at: Option<Moment>,
    /// Why it was skipped when it fell due: the change no longer applied to
    /// the config as it was then.
    pub error: Option<String>,
}

impl ScheduleEntry {
    /// Neither applied nor skipped yet.
    pub fn pending(&self) -> bool {
        self.applied_at.is_none() && self.error.is_none()
    }

    /// Whether the entry is the same change as `other` (same time, same fields).
    fn same_change(&self, other: &ScheduleEntry) -> bool {
        self.at == other.at && self.set == other.set
    }
}

impl Schedule {
    pub fn entries(&self) -> &[ScheduleEntry] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// When the next pending entry falls due.
    pub fn next_at(&self) -> Option<Millis> {
        self.0.iter().find(|e| e.pending()).map(|e| e.at.0)
    }

    /// Whether an entry sets an opening: its draw's seed is chosen (and its
    /// commitment shown) when the schedule is set, not when it applies.
    pub fn sets_opening(&self) -> bool {
        self.0
            .iter()
            .any(|e| e.pending() && e.set.get("opens_at").is_some_and(|at| !at.is_null()))
    }

    /// The opening the first pending entry that sets one sets: its draw's
    /// commitment is shown from the moment the schedule is set.
    pub fn opening(&self) -> Option<Moment> {
        self.0
            .iter()
            .filter(|e| e.pending())
            .find_map(|e| serde_json::from_value(e.set.get("opens_at")?.clone()).ok())
    }

    /// A schedule as a PATCH gives it (`at` and `set` of each entry; an
    /// `applied_at` or `error` sent back from a GET is not read), with what
    /// `before` had applied or skipped kept for each entry equal to one of
    /// its own.
    pub fn from_input(value: &Value, before: &Schedule) -> Result<Self, Fault> {
        let Value::Array(items) = value else {
            return Err((
                "schedule".into(),
                "schedule must be a list of {\"at\", \"set\"} entries".into(),
            ));
        };
        if items.len() > MAX_ENTRIES {
            return Err((
                "schedule".into(),
                format!("schedule holds at most {MAX_ENTRIES} entries"),
            ));
        }
        let mut entries = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            entries.push(read_entry(i, item)?);
        }
        // Stable: entries at one time apply in the order given.
        entries.sort_by_key(|e| e.at);
        let mut done: Vec<&ScheduleEntry> = before.0.iter().filter(|e| !e.pending()).collect();
        for entry in &mut entries {
            if let Some(i) = done.iter().position(|old| old.same_change(entry)) {
                let old = done.swap_remove(i);
                entry.applied_at = old.applied_at;
                entry.error = old.error.clone();
            }
        }
        Ok(Self(entries))
    }

    /// The schedule as the Redis store keeps it: whole (write-only fields
    /// included, the store never shows it), with what was applied.
    pub fn stored(&self) -> String {
        let entries: Vec<Value> = self
            .0
            .iter()
            .map(|e| {
                serde_json::json!({
                    "at": e.at.0,
                    "set": Value::Object(e.set.clone()),
                    "applied_at": e.applied_at.map(|at| at.0),
                    "error": e.error,
                })
            })
            .collect();
        Value::Array(entries).to_string()
    }

    /// A schedule as [`Schedule::stored`] wrote it; an unreadable one is
    /// none (never written by us).
    pub fn from_stored(json: &str) -> Option<Self> {
        let Value::Array(items) = serde_json::from_str(json).ok()? else {
            return None;
        };
        let mut entries = Vec::with_capacity(items.len());
        for item in items {
            entries.push(ScheduleEntry {
                at: Moment(item.get("at")?.as_u64()?),
                set: item.get("set")?.as_object()?.clone(),
                applied_at: item.get("applied_at").and_then(Value::as_u64).map(Moment),
                error: item.get("error").and_then(Value::as_str).map(String::from),
            });
        }
        Some(Self(entries))
    }
}

fn read_entry(i: usize, item: &Value) -> Result<ScheduleEntry, Fault> {
    let wrong = |message: String| (format!("schedule[{i}]"), message);
    let Value::Object(fields) = item else {
        return Err(wrong(format!(
            "schedule[{i}] must be an object with \"at\" and \"set\""
        )));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["at", "set", "applied_at", "error"].contains(&k.as_str()))
    {
        return Err(wrong(format!(
            "schedule[{i}]: unknown field `{unknown}`, expected at, set"
        )));
    }
    let at: Moment = fields
        .get("at")
        .cloned()
        .ok_or_else(|| wrong(format!("schedule[{i}] needs \"at\", an RFC 3339 time")))
        .and_then(|at| {
            serde_json::from_value(at).map_err(|e| wrong(format!("schedule[{i}].at: {e}")))
        })?;
    let set = fields.get("set").ok_or_else(|| {
        wrong(format!(
            "schedule[{i}] needs \"set\", the fields it changes"
        ))
    })?;
    let Value::Object(set) = set else {
        return Err(wrong(format!(
            "schedule[{i}].set must be an object of config fields"
        )));
    };
    if set.contains_key("schedule") {
        return Err((
            format!("schedule[{i}].schedule"),
            format!("schedule[{i}]: an entry can't set the schedule"),
        ));
    }
    if set.is_empty() {
        return Err(wrong(format!("schedule[{i}] sets nothing")));
    }
    Ok(ScheduleEntry {
        at,
        set: set.clone(),
        applied_at: None,
        error: None,
    })
}

impl ScheduleEntry {
    /// The fields it sets as they may be shown: write-only ones as `"set"`.
    fn shown_set(&self) -> Map<String, Value> {
        let mut set = Map::new();
        for (name, value) in &self.set {
            let secret = WRITE_ONLY.contains(&name.as_str());
            let shown = if secret && !value.is_null() {
                Value::String("set".into())
            } else {
                value.clone()
            };
            set.insert(name.clone(), shown);
        }
        set
    }
}

impl std::fmt::Debug for ScheduleEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleEntry")
            .field("at", &self.at.0)
            .field("set", &self.shown_set())
            .field("applied_at", &self.applied_at.map(|at| at.0))
            .field("error", &self.error)
            .finish()
    }
}

/// As the operator API shows an entry: write-only fields as `"set"`.
impl Serialize for ScheduleEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut entry = s.serialize_struct("ScheduleEntry", 4)?;
        entry.serialize_field("at", &self.at)?;
        entry.serialize_field("set", &self.shown_set())?;
        entry.serialize_field("applied_at", &self.applied_at)?;
        entry.serialize_field("error", &self.error)?;
        entry.end()
    }
}

impl Serialize for Schedule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Read as none: a config is read whole only where its schedule is kept
/// apart (`ConfigPatch::apply_fields` and the Redis store each set it
/// after), since the schedule as shown hides its write-only fields.
impl<'de> serde::Deserialize<'de> for Schedule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Self::default())
    }
}

/// One entry as the API description shows it.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ScheduleEntryDoc {
    /// When it applies (RFC 3339).
    at: Moment,
    /// Any config fields but `schedule`; write-only ones shown as `"set"`.
    #[schema(value_type = Object)]
    set: Value,
    /// When it was applied; null until then (not read from a PATCH).
    applied_at: Option<Moment>,
    /// Why it was skipped when it fell due (not read from a PATCH).
    error: Option<String>,
}
