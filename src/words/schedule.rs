//! A room's schedule (api.md, "Scheduled changes"): changes to its config
//! set in advance, each applied once, by the first store operation at or
//! after its time, as if an operator had made it then (design rule 15).
//!
//! What is here is pure: the entries and how they read and show
//! ([`Schedule`], [`ScheduleEntry`]), the check made when a schedule is set
//! (every entry, in order, must be a change a PATCH would take), the
//! application of the entries due ([`RoomConfig::apply_due`]) and the
//! preview of the config at a later time. When an entry applies (which
//! operation, on which node) is the stores' part: the memory store asks at
//! each operation, a Redis script refuses to run while an entry is due and
//! the node applies it, written only if nobody wrote the config since.

use serde::Serialize;
use serde_json::{Map, Value};

use super::clock::{Millis, Moment};
use super::config::{ConfigError, ConfigPatch, Input, RoomConfig, field_named};

/// The most entries a schedule holds.
pub const MAX_ENTRIES: usize = 50;

/// The entries, in `at` order (entries at the same time in the order given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule(Vec<ScheduleEntry>);

/// One change set in advance.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleEntry {
    pub at: Moment,
    /// Any config fields but `schedule` (and the room's `id`, which is no field).
    pub set: ConfigPatch,
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

    /// A schedule as a PATCH gives it (`at` and `set` of each entry; an
    /// `applied_at` or `error` sent back from a GET is not read), with what
    /// `before` had applied or skipped kept for each entry equal to one of
    /// its own.
    pub fn from_input(value: &Value, before: &Schedule) -> Result<Self, ConfigError> {
        let Value::Array(items) = value else {
            return Err(ConfigError::new(
                "schedule",
                "schedule must be a list of {\"at\", \"set\"} entries",
            ));
        };
        if items.len() > MAX_ENTRIES {
            return Err(ConfigError::new(
                "schedule",
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
                    "set": Value::Object(e.set.fields().clone()),
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
                set: ConfigPatch::from_json(item.get("set")?.clone()).ok()?,
                applied_at: item.get("applied_at").and_then(Value::as_u64).map(Moment),
                error: item.get("error").and_then(Value::as_str).map(String::from),
            });
        }
        Some(Self(entries))
    }

    /// Every pending entry, in order, is a change a PATCH would take of
    /// the config the entries before it make of `base`; the first that
    /// is not is named (`schedule[2].admit_per_tick`).
    pub fn check(&self, base: &RoomConfig) -> Result<(), ConfigError> {
        let mut running = base.clone();
        for (i, entry) in self.0.iter().enumerate() {
            if !entry.pending() {
                continue;
            }
            running = entry
                .set
                .apply_fields(&running)
                .map_err(|error| ConfigError {
                    field: format!("schedule[{i}].{}", error.field),
                    message: format!("schedule[{i}] (at {}): {}", rfc(entry.at), error.message),
                    ..error
                })?;
        }
        Ok(())
    }
}

fn rfc(at: Moment) -> String {
    super::clock::rfc3339(at.0)
}

fn read_entry(i: usize, item: &Value) -> Result<ScheduleEntry, ConfigError> {
    let wrong = |message: String| ConfigError::new(format!("schedule[{i}]"), message);
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
    if let Value::Object(names) = set
        && names.contains_key("schedule")
    {
        return Err(ConfigError::new(
            format!("schedule[{i}].schedule"),
            format!("schedule[{i}]: an entry can't set the schedule"),
        ));
    }
    let set = ConfigPatch::from_json(set.clone()).map_err(|error| ConfigError {
        field: format!("schedule[{i}].{}", error.field),
        message: format!("schedule[{i}]: {}", error.message),
        ..error
    })?;
    if set.is_empty() {
        return Err(wrong(format!("schedule[{i}] sets nothing")));
    }
    Ok(ScheduleEntry {
        at,
        set,
        applied_at: None,
        error: None,
    })
}

/// As the operator API shows an entry: write-only fields as `"set"`.
impl Serialize for ScheduleEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut set = Map::new();
        for (name, value) in self.set.fields() {
            let secret = field_named(name).is_some_and(|f| f.input == Input::Secret);
            let shown = if secret && !value.is_null() {
                Value::String("set".into())
            } else {
                value.clone()
            };
            set.insert(name.clone(), shown);
        }
        let mut entry = s.serialize_struct("ScheduleEntry", 4)?;
        entry.serialize_field("at", &self.at)?;
        entry.serialize_field("set", &set)?;
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
/// apart ([`ConfigPatch::apply_fields`] and the Redis store each set it
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

impl RoomConfig {
    /// The config once the schedule's entries due at `now` are applied, in
    /// order, each as a PATCH then (and `check`ed as the store checks one,
    /// the opening's rule); an entry that no longer applies is skipped
    /// with its error. `None` when no entry is due.
    pub fn apply_due(
        &self,
        now: Millis,
        check: impl Fn(&RoomConfig, &RoomConfig) -> Result<(), ConfigError>,
    ) -> Option<RoomConfig> {
        if self.schedule.next_at().is_none_or(|at| at > now) {
            return None;
        }
        let mut schedule = self.schedule.clone();
        let mut running = self.clone();
        for entry in &mut schedule.0 {
            if !entry.pending() || entry.at.0 > now {
                continue;
            }
            match entry
                .set
                .apply_fields(&running)
                .and_then(|next| check(&running, &next).map(|()| next))
            {
                Ok(next) => {
                    running = next;
                    entry.applied_at = Some(Moment(now));
                }
                Err(error) => entry.error = Some(error.message),
            }
        }
        running.schedule = schedule;
        Some(running)
    }

    /// The config as the schedule will make it at `at`, if every entry due
    /// by then applies (one that would not is passed over).
    pub fn preview(&self, at: Millis) -> RoomConfig {
        let mut running = self.clone();
        for entry in self
            .schedule
            .0
            .iter()
            .filter(|e| e.pending() && e.at.0 <= at)
        {
            if let Ok(next) = entry.set.apply_fields(&running) {
                running = next;
            }
        }
        running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: Millis = 1_800_000_000_000;

    fn at(ms: Millis) -> String {
        super::super::clock::rfc3339_ms(ms)
    }

    fn room() -> RoomConfig {
        RoomConfig::new("Drop", "/buy")
    }

    fn with_schedule(entries: Value) -> Result<RoomConfig, ConfigError> {
        ConfigPatch::from_json(json!({ "schedule": entries }))?.apply_to(&room())
    }

    #[test]
    fn entries_are_kept_in_time_order_and_applied_once_each_when_due() {
        let config = with_schedule(json!([
            {"at": at(T + 2000), "set": {"admit_per_tick": 50}},
            {"at": at(T + 1000), "set": {"code_required": true, "admit_per_tick": 5}},
        ]))
        .unwrap();
        assert_eq!(config.schedule.entries()[0].at, Moment(T + 1000));
        assert_eq!(config.schedule.next_at(), Some(T + 1000));
        let ok = |_: &RoomConfig, _: &RoomConfig| Ok(());
        assert!(config.apply_due(T + 999, ok).is_none());
        let first = config.apply_due(T + 1001, ok).unwrap();
        assert_eq!(first.admit_per_tick, 5);
        assert!(first.code_required);
        assert_eq!(
            first.schedule.entries()[0].applied_at,
            Some(Moment(T + 1001))
        );
        assert!(first.apply_due(T + 1500, ok).is_none(), "applied once");
        let both = config.apply_due(T + 5000, ok).unwrap();
        assert_eq!(both.admit_per_tick, 50, "in order, the later last");
        assert_eq!(both.schedule.next_at(), None);
    }

    #[test]
    fn an_entry_that_no_longer_applies_is_skipped_with_its_error() {
        let config = with_schedule(json!([
            {"at": at(T + 1000), "set": {"session_idle_s": 300}},
        ]))
        .unwrap();
        // Since set, an operator lowered the hard limit below it.
        let lowered = ConfigPatch::from_json(json!({"pass_ttl_s": 120}))
            .unwrap()
            .apply_to(&config)
            .unwrap();
        let after = lowered.apply_due(T + 1000, |_, _| Ok(())).unwrap();
        assert_eq!(after.session_idle_s, None);
        let entry = &after.schedule.entries()[0];
        assert_eq!(entry.applied_at, None);
        assert!(
            entry.error.as_deref().unwrap().contains("pass_ttl_s"),
            "{entry:?}"
        );
        assert_eq!(after.schedule.next_at(), None, "skipped is done");
    }

    #[test]
    fn a_schedule_is_refused_naming_the_entry_a_patch_would_refuse() {
        for (entries, field) in [
            (
                json!([{"at": at(T), "set": {"admit_per_tick": 0}}]),
                "schedule[0].admit_per_tick",
            ),
            (
                json!([{"at": at(T), "set": {"notice": "x"}}, {"at": at(T + 1), "set": {"speed": 1}}]),
                "schedule[1].speed",
            ),
            (
                json!([{"at": at(T), "set": {"schedule": []}}]),
                "schedule[0].schedule",
            ),
            (
                json!([{"at": "soon", "set": {"paused": true}}]),
                "schedule[0]",
            ),
            (json!([{"at": at(T), "set": {}}]), "schedule[0]"),
            (json!({"at": at(T)}), "schedule"),
            // Each is fine alone; in order the second breaks a rule of the first's config.
            (
                json!([{"at": at(T), "set": {"pass_ttl_s": 60}}, {"at": at(T + 1), "set": {"session_idle_s": 120}}]),
                "schedule[1].session_idle_s",
            ),
        ] {
            let error = with_schedule(entries.clone()).unwrap_err();
            assert_eq!(error.field, field, "{entries}: {error}");
        }
        let many: Vec<Value> = (0..=MAX_ENTRIES as u64)
            .map(|i| json!({"at": at(T + i), "set": {"paused": false}}))
            .collect();
        assert_eq!(
            with_schedule(Value::Array(many)).unwrap_err().field,
            "schedule"
        );
    }

    #[test]
    fn a_replaced_list_keeps_what_was_applied_of_equal_entries() {
        let config = with_schedule(json!([
            {"at": at(T), "set": {"notice": "Presale"}},
            {"at": at(T + 10), "set": {"notice": "Sale"}},
        ]))
        .unwrap();
        let applied = config.apply_due(T, |_, _| Ok(())).unwrap();
        let replaced = ConfigPatch::from_json(json!({"schedule": [
            {"at": at(T), "set": {"notice": "Presale"}, "applied_at": null},
            {"at": at(T + 20), "set": {"notice": "Sale"}},
        ]}))
        .unwrap()
        .apply_to(&applied)
        .unwrap();
        let entries = replaced.schedule.entries();
        assert_eq!(entries[0].applied_at, Some(Moment(T)), "the same change");
        assert_eq!(entries[1].applied_at, None, "another time, another entry");
        let kept = ConfigPatch::from_json(json!({"paused": true}))
            .unwrap()
            .apply_to(&applied)
            .unwrap();
        assert_eq!(
            kept.schedule, applied.schedule,
            "a PATCH without it keeps it"
        );
    }

    #[test]
    fn write_only_fields_show_as_set_and_are_stored_whole() {
        let key = "k".repeat(40);
        let config = with_schedule(json!([
            {"at": at(T), "set": {"user_key": key, "user_required": true}},
        ]))
        .unwrap();
        let shown = serde_json::to_string(&config.schedule).unwrap();
        assert!(!shown.contains(&key), "{shown}");
        assert!(shown.contains(r#""user_key":"set""#), "{shown}");
        let stored = config.schedule.stored();
        assert_eq!(Schedule::from_stored(&stored).unwrap(), config.schedule);
        let applied = config.apply_due(T, |_, _| Ok(())).unwrap();
        assert_eq!(applied.user_key.unwrap().expose(), key);
    }

    #[test]
    fn the_preview_is_the_config_as_the_schedule_makes_it_then() {
        let config = with_schedule(json!([
            {"at": at(T), "set": {"admit_per_tick": 5}},
            {"at": at(T + 60_000), "set": {"admit_per_tick": 50, "notice": "Open to all"}},
        ]))
        .unwrap();
        assert_eq!(config.preview(T - 1).admit_per_tick, config.admit_per_tick);
        assert_eq!(config.preview(T + 1).admit_per_tick, 5);
        let later = config.preview(T + 60_000);
        assert_eq!(later.admit_per_tick, 50);
        assert_eq!(later.notice.as_deref(), Some("Open to all"));
    }
}
