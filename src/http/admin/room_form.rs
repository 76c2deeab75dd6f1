//! The admin page's room forms, derived from the config's declaration
//! (`words::config::FIELDS`): the inputs each form shows (kind, limits,
//! value), and the reading of a posted form into the change the API would
//! be sent. Only what a field looks like is chosen here (its hint, the
//! words of its options); a field added to the config appears in the edit
//! form by itself.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::http::extractors::CsrfProtected;
use crate::http::pages::i18n::Catalogue;
use crate::words::config::{FIELDS, Field, Input, RoomConfig, field_named};
use crate::words::page::PAGE_FIELDS;
use crate::words::{ConfigError, ConfigPatch};

/// A room form as posted: the session's CSRF token and the fields, each
/// as text (`page_title` for the page's `title`).
#[derive(Deserialize, utoipa::ToSchema)]
pub struct ConfigForm {
    pub csrf: String,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub fields: BTreeMap<String, String>,
}

impl CsrfProtected for ConfigForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// Ticked in the edit form: the room's user key is removed.
const REMOVE_USER_KEY: &str = "remove_user_key";

impl ConfigForm {
    /// The text of a field, if the form has it.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// The change the form asks for, as the API would be sent it: a field
    /// the form leaves out is unchanged, and so is an empty one unless
    /// empty means none there (see [`form_value`]).
    pub fn patch(&self) -> Result<ConfigPatch, ConfigError> {
        let mut change = Map::new();
        let mut page = Map::new();
        for (name, text) in &self.fields {
            if let Some(page_field) = name.strip_prefix("page_")
                && PAGE_FIELDS.contains(&page_field)
            {
                // A browser sends `\r\n` for a textarea's line breaks.
                page.insert(page_field.into(), Value::String(text.replace("\r\n", "\n")));
            } else if let Some(field) = field_named(name)
                && let Some(value) = form_value(field, text)?
            {
                change.insert(name.clone(), value);
            }
        }
        if self.fields.contains_key(REMOVE_USER_KEY) {
            change.insert("user_key".into(), Value::Null);
        }
        if !page.is_empty() {
            change.insert("page".into(), Value::Object(page));
        }
        ConfigPatch::from_json(Value::Object(change))
    }
}

/// A form field's text as the API would be sent it; `None` leaves the
/// field as it is. Empty is none for a field that may be none (no cap, no
/// opening, no notice); an empty key is no change (the key is never shown).
fn form_value(field: &Field, text: &str) -> Result<Option<Value>, ConfigError> {
    let trimmed = text.trim();
    Ok(match field.input {
        Input::Number if trimmed.is_empty() => field.nullable.then_some(Value::Null),
        Input::Number => Some(trimmed.parse::<u64>().map(Value::from).map_err(|_| {
            ConfigError::new(field.name, format!("{} must be a whole number", field.name))
        })?),
        Input::Switch => Some(Value::Bool(matches!(trimmed, "true" | "on"))),
        Input::Choice(_) | Input::Line(_) if trimmed.is_empty() => None,
        Input::Choice(_) | Input::Line(_) => Some(Value::String(trimmed.into())),
        Input::Text(_) => Some(Value::String(text.replace("\r\n", "\n"))),
        Input::Moment if trimmed.is_empty() => Some(Value::Null),
        Input::Moment => Some(Value::String(trimmed.into())),
        Input::Lines => Some(Value::Array(
            text.lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .map(|line| Value::String(line.into()))
                .collect(),
        )),
        Input::Secret if trimmed.is_empty() => None,
        Input::Secret => Some(Value::String(trimmed.into())),
        Input::None => None,
    })
}

/// The fields the create form shows: what a room needs, and its pace.
const CREATE_FORM: &[&str] = &[
    "name",
    "target_url",
    "admit_per_tick",
    "tick_ms",
    "max_active",
    "pass_ttl_s",
    "abandon_after_s",
    "arrival_grace_s",
];

/// Fields an edit form does not change (the API and the rooms file do).
const NOT_EDITED: &[&str] = &["name", "target_url"];

/// One input of a room form, as the template writes it.
pub struct FormInput {
    pub name: &'static str,
    /// `number`, `select`, `line`, `text`, `moment`, `lines` or `secret`.
    pub kind: &'static str,
    pub label: &'static str,
    pub hint: Option<&'static str>,
    pub value: String,
    pub min: Option<u64>,
    /// None for no upper limit.
    pub max: Option<u64>,
    /// The most characters a line or text may have.
    pub max_chars: Option<usize>,
    pub required: bool,
    /// A select's options: the value, its words, whether it is chosen.
    pub options: Vec<(&'static str, &'static str, bool)>,
    pub placeholder: Option<&'static str>,
    pub pattern: Option<&'static str>,
}

impl FormInput {
    /// Wider than one column: texts and lists.
    pub fn wide(&self) -> bool {
        matches!(self.kind, "text" | "lines")
    }
}

/// The edit form's inputs for a room with `config`.
pub fn edit_inputs(t: &'static Catalogue, config: &RoomConfig) -> Vec<FormInput> {
    let values = config.as_value();
    FIELDS
        .iter()
        .filter(|field| field.input != Input::None && !NOT_EDITED.contains(&field.name))
        .map(|field| input(t, field, values.get(field.name), false))
        .collect()
}

/// The create form's inputs, with a new room's defaults.
pub fn create_inputs(t: &'static Catalogue) -> Vec<FormInput> {
    let values = RoomConfig::new("", "").as_value();
    CREATE_FORM
        .iter()
        .filter_map(|name| field_named(name))
        .map(|field| input(t, field, values.get(field.name), true))
        .collect()
}

const MOMENT_PATTERN: &str =
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+\-]\d{2}:\d{2})";
const TARGET_URL_PATTERN: &str = r"https?://[^\s\/]+[^\s]*|\/([^\s\/\\][^\s]*)?";

fn input(
    t: &'static Catalogue,
    field: &'static Field,
    value: Option<&Value>,
    creating: bool,
) -> FormInput {
    let text = match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(entries)) => entries
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    };
    let shown = looks(t, field);
    let (kind, max_chars) = match field.input {
        Input::Number => ("number", None),
        Input::Switch | Input::Choice(_) => ("select", None),
        Input::Line(chars) => ("line", Some(chars)),
        Input::Text(chars) => ("text", Some(chars)),
        Input::Moment => ("moment", None),
        Input::Lines => ("lines", None),
        Input::Secret | Input::None => ("secret", None),
    };
    let options = match field.input {
        Input::Switch => {
            let (off, on) = shown.switch;
            vec![
                ("false", off, text == "false"),
                ("true", on, text == "true"),
            ]
        }
        Input::Choice(values) => values
            .iter()
            .map(|value| (*value, shown.choice(value), text == *value))
            .collect(),
        _ => Vec::new(),
    };
    let (min, max) = match field.range {
        Some((min, max)) => (Some(min), (max != u64::MAX).then_some(max)),
        None => (None, None),
    };
    FormInput {
        name: field.name,
        kind,
        label: t.field_label(field.name),
        hint: shown.hint,
        value: if field.input == Input::Secret {
            String::new()
        } else {
            text
        },
        min,
        max,
        max_chars,
        required: match field.input {
            Input::Line(_) => creating,
            Input::Number => !field.nullable && !creating,
            _ => false,
        },
        options,
        placeholder: shown.placeholder,
        pattern: match field.input {
            Input::Moment => Some(MOMENT_PATTERN),
            _ if field.name == "target_url" => Some(TARGET_URL_PATTERN),
            _ => None,
        },
    }
}

/// A switch's or a choice's value in the words its form shows for it
/// (`paused: true` is "paused", `queue_method: "random"` its words);
/// `None` for any other field or value.
pub fn value_words(t: &'static Catalogue, name: &str, value: &Value) -> Option<&'static str> {
    let field = field_named(name)?;
    let shown = looks(t, field);
    match (field.input, value) {
        (Input::Switch, Value::Bool(on)) => Some(if *on { shown.switch.1 } else { shown.switch.0 }),
        (Input::Choice(values), Value::String(text)) => values
            .iter()
            .find(|choice| **choice == text.as_str())
            .map(|choice| shown.choice(choice)),
        _ => None,
    }
}

/// How one field looks beyond its kind: a hint after its label, the words
/// of its options, an example.
struct Looks {
    hint: Option<&'static str>,
    /// The words for off and for on.
    switch: (&'static str, &'static str),
    placeholder: Option<&'static str>,
    t: &'static Catalogue,
    field: &'static str,
}

impl Looks {
    fn choice(&self, value: &'static str) -> &'static str {
        let t = self.t;
        match (self.field, value) {
            ("queue_method", "fifo") => t.text("admin.queue_fifo"),
            ("queue_method", "random") => t.text("admin.queue_random"),
            ("queue_method", "passthrough") => t.text("admin.queue_passthrough"),
            ("queue_method", "reject") => t.text("admin.queue_reject"),
            _ => value,
        }
    }
}

fn looks(t: &'static Catalogue, field: &'static Field) -> Looks {
    let mut looks = Looks {
        hint: None,
        switch: (t.text("admin.switch_off"), t.text("admin.switch_on")),
        placeholder: None,
        t,
        field: field.name,
    };
    match field.name {
        "max_active" => looks.hint = Some(t.text("admin.hint_no_cap")),
        "arrival_grace_s" => looks.hint = Some(t.text("admin.hint_never")),
        "notice" => looks.hint = Some(t.text("admin.hint_notice")),
        "bypass_networks" => {
            looks.hint = Some(t.text("admin.hint_bypass_networks"));
            looks.placeholder = Some("203.0.113.7\n10.20.0.0/16");
        }
        "opens_at" => {
            looks.hint = Some(t.text("admin.hint_opens_at"));
            looks.placeholder = Some("2026-06-01T17:00:00Z");
        }
        "closes_at" => {
            looks.hint = Some(t.text("admin.hint_closes_at"));
            looks.placeholder = Some("2026-06-01T18:00:00Z");
        }
        "pow_difficulty" => looks.hint = Some(t.text("admin.hint_pow")),
        "target_url" => looks.placeholder = Some(t.text("admin.placeholder_target_url")),
        "paused" => looks.switch = (t.text("admin.state_running"), t.text("admin.state_paused")),
        "close_when_sold_out" => {
            looks.switch = (
                t.text("admin.keep_the_line"),
                t.text("admin.close_the_line"),
            )
        }
        "user_required" => {
            looks.switch = (
                t.text("admin.anyone_may_join"),
                t.text("admin.signed_in_only"),
            )
        }
        "code_required" => {
            looks.switch = (
                t.text("admin.anyone_without_code"),
                t.text("admin.code_holders_only"),
            )
        }
        _ => {}
    }
    looks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(fields: &[(&str, &str)]) -> ConfigForm {
        ConfigForm {
            csrf: String::new(),
            fields: fields
                .iter()
                .map(|(name, text)| (name.to_string(), text.to_string()))
                .collect(),
        }
    }

    fn change(fields: &[(&str, &str)]) -> Value {
        let patch = form(fields).patch().unwrap();
        Value::Object(
            patch
                .names()
                .map(|name| (name.to_string(), patch.get(name).unwrap().clone()))
                .collect(),
        )
    }

    #[test]
    fn a_form_reads_as_the_change_the_api_would_be_sent() {
        assert_eq!(
            change(&[
                ("admit_per_tick", " 20 "),
                ("max_active", ""),
                ("tick_ms", ""),
                ("paused", "true"),
                ("queue_method", "random"),
                ("opens_at", ""),
                ("bypass_networks", "203.0.113.7\r\n 10.20.0.0/16 \n\n"),
                ("notice", "Back\r\nsoon"),
                ("user_key", ""),
                ("page_title", "Drop"),
                ("id", "ignored"),
            ]),
            json!({
                "admit_per_tick": 20,
                "max_active": null,
                "paused": true,
                "queue_method": "random",
                "opens_at": null,
                "bypass_networks": ["203.0.113.7", "10.20.0.0/16"],
                "notice": "Back\nsoon",
                "page": {"title": "Drop"},
            })
        );
        assert_eq!(
            change(&[("user_key", "k"), (REMOVE_USER_KEY, "1")]),
            json!({"user_key": null}),
            "removing wins"
        );
        let refused = form(&[("tick_ms", "fast")]).patch().unwrap_err();
        assert_eq!(refused.field, "tick_ms");
    }

    #[test]
    fn every_field_a_form_shows_is_one_of_the_config() {
        let t = crate::http::pages::i18n::english();
        let config = RoomConfig::new("Sale", "/x");
        for input in edit_inputs(t, &config).iter().chain(&create_inputs(t)) {
            assert!(field_named(input.name).is_some(), "{}", input.name);
            assert_ne!(input.label, format!("admin.field_{}", input.name));
        }
        let edit = edit_inputs(t, &config);
        let admit = edit.iter().find(|i| i.name == "admit_per_tick").unwrap();
        assert_eq!(
            (admit.min, admit.max),
            (Some(1), Some(100_000)),
            "the limits declared"
        );
        assert_eq!(admit.value, "10");
    }
}
