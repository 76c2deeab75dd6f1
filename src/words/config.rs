//! A room's config: the one type an operator sets, through the API, the
//! admin page or the rooms file ([`RoomConfig`]); each of its fields
//! declared once more in [`FIELDS`] with what is not in its type (its
//! limits, whether `null` is a value, how a form writes it); a change to
//! any subset of it ([`ConfigPatch`]); and its validation, whose error
//! names the field at fault ([`ConfigError`]).
//!
//! Everything else is derived from these: the admin page's inputs and the
//! reading of its forms, the limits the API description states, the rooms
//! file's tables, and what the Redis store writes (the config as one JSON
//! value, `StoredConfig` in `store::redis`). A new field is a field of
//! [`RoomConfig`] and its line in [`FIELDS`], which a test holds together.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::autotune::Autotune;
use super::clock::{Millis, Moment};
use super::language::Language;
use super::networks::Networks;
use super::page::{PAGE_FIELDS, PageBranding, is_deceptive};
use super::schedule::Schedule;
use super::wire_enum;

/// What an operator sets on a room. Field names are the public API's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RoomConfig {
    pub name: String,
    pub target_url: String,
    /// Visitors admitted per tick; also the token bucket's capacity.
    pub admit_per_tick: u32,
    pub tick_ms: u64,
    /// Cap on visitors holding an unexpired pass at once; `None` = no cap.
    pub max_active: Option<u64>,
    pub pass_ttl_s: u64,
    /// A waiting visitor with no socket and no poll for this long loses the place.
    pub abandon_after_s: u64,
    pub paused: bool,
    /// A pass no `/api/verify` has seen this long after its admission is
    /// reclaimed as a no-show; `None` = off.
    #[serde(default)]
    pub arrival_grace_s: Option<u64>,
    /// An admitted visitor's session lapses once no verify, gate or sale
    /// call has accepted their pass for this long (`pass_ttl_s` stays the
    /// hard limit); `None` = off: a pass lasts its `pass_ttl_s`.
    #[serde(default)]
    pub session_idle_s: Option<u64>,
    /// The HS256 key the room's site signs user tokens with. Write-only:
    /// never serialized (the operator API shows `user_key_set`) nor logged.
    #[serde(default, skip_serializing)]
    #[schema(ignore)]
    pub user_key: Option<Secret>,
    /// Anonymous joins are refused (401 `user_required`).
    #[serde(default)]
    pub user_required: bool,
    /// A join without a valid code is refused (403 `code_required`):
    /// invite-only rooms, presale phases.
    #[serde(default)]
    pub code_required: bool,
    /// A join that makes a new place must carry a solved challenge; 0 = off.
    #[serde(default)]
    pub pow_difficulty: u32,
    /// The operator's message to everyone in the room, shown on the waiting
    /// page and pushed to every socket when it changes.
    #[serde(default)]
    pub notice: Option<String>,
    #[serde(default)]
    pub queue_method: QueueMethod,
    /// The scheduled opening: before it joins enter the pre-queue, drawn
    /// into one random order at the opening (`super::draw`).
    #[serde(default)]
    pub opens_at: Option<Moment>,
    /// From then on new arrivals are turned away; those waiting stay.
    #[serde(default)]
    pub closes_at: Option<Moment>,
    /// When the room's sale sells out (nothing left, no hold out), everyone
    /// waiting is told `closed`, `sold_out`, and so is every new arrival.
    #[serde(default = "yes")]
    pub close_when_sold_out: bool,
    /// Clients from these addresses and networks are admitted at once,
    /// whatever the bucket, the cap, `paused`, the method or the opening,
    /// and hold passes outside the cap (api.md, "Bypass networks").
    #[serde(default)]
    #[schema(value_type = Vec<String>, example = json!(["203.0.113.7", "10.20.0.0/16"]))]
    pub bypass_networks: Networks,
    /// The pages' language for a visitor who asks for none we speak
    /// (neither `?lang=`, the `wr_lang` cookie nor `Accept-Language`).
    #[serde(default)]
    pub language: Language,
    /// The operator's branding of the waiting and sale pages.
    #[serde(default)]
    pub page: PageBranding,
    /// Changes set in advance (`words::schedule`). Read from a change by
    /// [`ConfigPatch::apply_to`], which keeps what was applied of it.
    #[serde(default)]
    #[schema(value_type = Vec<super::schedule::ScheduleEntryDoc>)]
    pub schedule: Schedule,
    /// The admission rate follows the origin's health (`words::autotune`);
    /// `None` = off.
    #[serde(default)]
    pub autotune: Option<Autotune>,
    /// A visitor who asked to be notified must come back this long after
    /// `near` is sent, or the place lapses (api.md, "Step away").
    #[serde(default = "notify_return_s")]
    pub notify_return_s: u64,
    /// A pass admitted with a notification is not reclaimed as a no-show
    /// for this long from the admission (capped by `pass_ttl_s`).
    #[serde(default = "notify_hold_s")]
    pub notify_hold_s: u64,
    /// Where the room's notifications are POSTed, signed with
    /// `notify_webhook_secret`; `None`: no webhook (web push only).
    #[serde(default)]
    pub notify_webhook_url: Option<String>,
    /// The webhook's HMAC key. Write-only, as `user_key`.
    #[serde(default, skip_serializing)]
    #[schema(ignore)]
    pub notify_webhook_secret: Option<Secret>,
}

fn notify_return_s() -> u64 {
    super::notify::DEFAULT_NOTIFY_RETURN_S
}

fn notify_hold_s() -> u64 {
    super::notify::DEFAULT_NOTIFY_HOLD_S
}

fn webhook_url_ok(raw: &str) -> bool {
    let Ok(url) = url::Url::parse(raw) else {
        return false;
    };
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return false,
    };
    url.username().is_empty()
        && url.password().is_none()
        && (url.scheme() == "https" || (url.scheme() == "http" && loopback))
}

fn yes() -> bool {
    true
}

wire_enum! {
    /// How a room admits (api.md's `queue_method`).
    #[derive(Default)]
    pub enum QueueMethod {
        /// In join order.
        #[default]
        Fifo,
        /// Each tick admits uniformly at random among those waiting; nobody has
        /// a position, only an expected wait.
        Random,
        /// Every arrival is admitted at once, bucket and cap ignored; a line
        /// that exists is admitted at the next tick.
        Passthrough,
        /// New arrivals are turned away; those waiting keep their places.
        Reject,
    }
}

impl QueueMethod {
    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn parse(name: &str) -> Option<Self> {
        name.parse().ok()
    }
}

/// A key an operator gives and nobody reads back: its `Debug` (what the
/// logs would print) is `[redacted]`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The shortest user key accepted: a short HMAC key can be guessed offline.
pub const MIN_USER_KEY_CHARS: usize = 32;
/// The longest notice, in characters.
pub const MAX_NOTICE_CHARS: usize = 500;

pub const DEFAULT_ADMIT_PER_TICK: u32 = 10;
pub const DEFAULT_TICK_MS: u64 = 5_000;
pub const DEFAULT_PASS_TTL_S: u64 = 600;
/// How long a visitor with no socket and no poll keeps a place: a phone
/// that locks or a tab in the background for a few minutes must come back
/// to it (hosted rooms keep a place 5 to 20 minutes).
pub const DEFAULT_ABANDON_AFTER_S: u64 = 300;

/// One field of [`RoomConfig`]: what its type does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    /// `null` is a value of its own (no cap, off, none), which a patch
    /// sets; for any other field a `null` in a patch leaves it as it is.
    pub nullable: bool,
    /// A whole number between these, both included.
    pub range: Option<(u64, u64)>,
    /// How the admin page's forms write it.
    pub input: Input,
}

/// How a field is written in the admin page's forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A whole number; empty is `null` where the field is nullable.
    Number,
    /// On or off.
    Switch,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// One line of at most this many characters.
    Line(usize),
    /// Text with line breaks, at most this many characters; empty is none.
    Text(usize),
    /// An RFC 3339 time; empty is none.
    Moment,
    /// A list, one entry a line.
    Lines,
    /// Write-only: empty leaves it as it is.
    Secret,
    /// Not in the room forms (set through the API or the rooms file).
    None,
}

const fn field(name: &'static str, input: Input) -> Field {
    Field {
        name,
        nullable: false,
        range: None,
        input,
    }
}

const fn number(name: &'static str, min: u64, max: u64) -> Field {
    Field {
        name,
        nullable: false,
        range: Some((min, max)),
        input: Input::Number,
    }
}

const fn nullable(field: Field) -> Field {
    Field {
        nullable: true,
        ..field
    }
}

/// Every field of [`RoomConfig`], in its order (a test holds them
/// together): the one place a field's limits are written.
pub const FIELDS: &[Field] = &[
    field("name", Input::Line(200)),
    field("target_url", Input::Line(2048)),
    number("admit_per_tick", 1, 100_000),
    number("tick_ms", 100, 3_600_000),
    nullable(number("max_active", 1, u64::MAX)),
    number("pass_ttl_s", 1, 7 * 86_400),
    number("abandon_after_s", 15, 86_400),
    field("paused", Input::Switch),
    nullable(number("arrival_grace_s", 5, 86_400)),
    nullable(number("session_idle_s", 5, 86_400)),
    nullable(field("user_key", Input::Secret)),
    field("user_required", Input::Switch),
    field("code_required", Input::Switch),
    number("pow_difficulty", 0, super::pow::MAX_DIFFICULTY as u64),
    nullable(field("notice", Input::Text(MAX_NOTICE_CHARS))),
    field(
        "queue_method",
        Input::Choice(&["fifo", "random", "passthrough", "reject"]),
    ),
    nullable(field("opens_at", Input::Moment)),
    nullable(field("closes_at", Input::Moment)),
    field("close_when_sold_out", Input::Switch),
    field("bypass_networks", Input::Lines),
    field("language", Input::None),
    nullable(field("page", Input::None)),
    field("schedule", Input::None),
    nullable(field("autotune", Input::None)),
    number("notify_return_s", 60, 86_400),
    number("notify_hold_s", 0, 86_400),
    nullable(field("notify_webhook_url", Input::Line(2048))),
    nullable(field("notify_webhook_secret", Input::Secret)),
];

/// The field of that name, if the config has one.
pub fn field_named(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|field| field.name == name)
}

/// What is wrong with a config or a change to it, and which field it is
/// about: a field of [`FIELDS`], or of the page (`page.title`), or the
/// name a change gave that is no field at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    pub field: String,
    pub fault: Fault,
    pub message: String,
}

/// What kind of wrong a [`ConfigError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A value that is not of its field's type, or a field there is not.
    Unreadable,
    /// A value that breaks one of the config's rules (a limit, a format,
    /// two fields that disagree).
    Rule,
}

impl ConfigError {
    /// A value that breaks a rule of `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            fault: Fault::Rule,
            message: message.into(),
        }
    }

    /// A value of `field` that could not be read as its type: the reader's
    /// words, after the field's name unless they start with it. A value of
    /// the right kind that the field's own reader refused (a language we
    /// do not speak, an entry that is no network, a time that is not one)
    /// breaks a rule; serde's own words (a wrong type, a number out of its
    /// type's range, a field there is not) say it is unreadable.
    fn unreadable(field: &str, why: impl fmt::Display) -> Self {
        let why = why.to_string();
        const SERDE_S_OWN: [&str; 6] = [
            "invalid type",
            "invalid value",
            "invalid length",
            "unknown variant",
            "unknown field",
            "missing field",
        ];
        let fault = if SERDE_S_OWN.iter().any(|own| why.starts_with(own)) {
            Fault::Unreadable
        } else {
            Fault::Rule
        };
        let message = if why.starts_with(field) {
            why
        } else {
            format!("{field}: {why}")
        };
        Self {
            fault,
            ..Self::new(field, message)
        }
    }
}

/// A change to any subset of a room's config: the fields it names change;
/// `null` removes what may be none (`max_active`, `notice`, `opens_at`…)
/// and leaves any other field as it is; `page`'s fields change one by one
/// (`null` or `""` removes one), and `page: null` removes them all.
#[derive(Clone, Default, PartialEq)]
pub struct ConfigPatch(Map<String, Value>);

impl ConfigPatch {
    /// A change as the API is sent it: an object naming config fields.
    pub fn from_json(value: Value) -> Result<Self, ConfigError> {
        let Value::Object(fields) = value else {
            return Err(ConfigError::unreadable(
                "",
                "a change is a JSON object of config fields",
            ));
        };
        if let Some(unknown) = fields.keys().find(|name| field_named(name).is_none()) {
            let expected: Vec<&str> = FIELDS.iter().map(|field| field.name).collect();
            return Err(ConfigError::unreadable(
                unknown,
                format!(
                    "unknown field `{unknown}`, expected one of {}",
                    expected.join(", ")
                ),
            ));
        }
        if let Some(Value::Object(page)) = fields.get("page")
            && let Some(unknown) = page
                .keys()
                .find(|name| !PAGE_FIELDS.contains(&name.as_str()))
        {
            return Err(ConfigError::unreadable(
                &format!("page.{unknown}"),
                format!(
                    "unknown field `{unknown}`, expected one of {}",
                    PAGE_FIELDS.join(", ")
                ),
            ));
        }
        Ok(Self(fields))
    }

    /// The same change with `name` set to `value`.
    pub fn with(mut self, name: &str, value: Value) -> Self {
        self.0.insert(name.to_string(), value);
        self
    }

    /// The value the change gives `name`, if it names it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// Every field the change names, with its value.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.0
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The config of a new room made of this change: the defaults, with the
    /// change's fields (`name` and `target_url` are required).
    pub fn new_room(&self) -> Result<RoomConfig, ConfigError> {
        for required in ["name", "target_url"] {
            if !self.get(required).is_some_and(Value::is_string) {
                return Err(ConfigError::new(
                    required,
                    "name and target_url are required",
                ));
            }
        }
        self.apply_to(&RoomConfig::new("", ""))
    }

    /// The config this change makes of `base`, or what is wrong with it: a
    /// schedule it gives is checked entry by entry, and keeps what `base`'s
    /// had applied of equal entries (`words::schedule`).
    pub fn apply_to(&self, base: &RoomConfig) -> Result<RoomConfig, ConfigError> {
        let mut config = self.apply_fields(base)?;
        if let Some(schedule) = self.get("schedule") {
            config.schedule = Schedule::from_input(schedule, &base.schedule)
                .map_err(|(field, message)| ConfigError::new(field, message))?;
            check_schedule(&config.schedule, &config)?;
        }
        Ok(config)
    }

    /// [`ConfigPatch::apply_to`] but for the schedule, which stays `base`'s:
    /// a schedule entry's own change.
    pub fn apply_fields(&self, base: &RoomConfig) -> Result<RoomConfig, ConfigError> {
        let mut next = base.as_value();
        next.remove("schedule");
        for (name, value) in &self.0 {
            let field = field_named(name).expect("from_json names known fields alone");
            match (name.as_str(), value) {
                ("page", Value::Object(changes)) => {
                    let page = next
                        .entry("page")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(page) = page {
                        for (name, value) in changes {
                            page.insert(name.clone(), blank_is_none(value));
                        }
                    }
                }
                (_, Value::Null) if !field.nullable => {}
                ("page", Value::Null) => {
                    next.remove("page");
                }
                _ => {
                    next.insert(name.clone(), value.clone());
                }
            }
        }
        let mut config: RoomConfig = serde_path_to_error::deserialize(Value::Object(next))
            .map_err(|error| {
                let path = error.path().to_string();
                let field = path.split(['.', '[']).next().unwrap_or_default();
                ConfigError::unreadable(field, error.into_inner())
            })?;
        // An empty notice is no notice.
        if config.notice.as_ref().is_some_and(|n| n.trim().is_empty()) {
            config.notice = None;
        }
        config.schedule = base.schedule.clone();
        config.validate()?;
        Ok(config)
    }
}

/// A page field given as `""` or blank: none.
fn blank_is_none(value: &Value) -> Value {
    match value {
        Value::String(text) if text.trim().is_empty() => Value::Null,
        other => other.clone(),
    }
}

/// Write-only fields stay out of the logs.
impl fmt::Debug for ConfigPatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = f.debug_map();
        for (name, value) in &self.0 {
            match field_named(name).map(|field| field.input) {
                Some(Input::Secret) => shown.entry(name, &"[redacted]"),
                _ => shown.entry(name, value),
            };
        }
        shown.finish()
    }
}

impl<'de> Deserialize<'de> for ConfigPatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Self::from_json(value).map_err(serde::de::Error::custom)
    }
}

/// Any config field, all of them optional (the schema of `RoomConfig`
/// without its required list), and the write-only `user_key`.
impl utoipa::PartialSchema for ConfigPatch {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
        let RefOr::T(Schema::Object(mut object)) = <RoomConfig as utoipa::PartialSchema>::schema()
        else {
            unreachable!("RoomConfig's schema is an object");
        };
        object.required.clear();
        object.description = Some(
            "A change to any subset of a room's config: the fields given change; `null` removes \
             what may be none and leaves any other field as it is; `page`'s fields change one by \
             one."
                .into(),
        );
        let user_key = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "Write-only: the HS256 key the room's site signs user tokens with, at least 32 \
                 characters; `null` removes it.",
            ))
            .write_only(Some(true))
            .build();
        object.properties.insert("user_key".into(), user_key.into());
        let webhook_secret = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "Write-only: the key the room's notification webhook is signed with \
                 (`Waitroom-Signature`), at least 32 characters; `null` removes it.",
            ))
            .write_only(Some(true))
            .build();
        object
            .properties
            .insert("notify_webhook_secret".into(), webhook_secret.into());
        // The limits, as FIELDS declares them.
        for field in FIELDS {
            let (Some((min, max)), Some(RefOr::T(Schema::Object(property)))) =
                (field.range, object.properties.get_mut(field.name))
            else {
                continue;
            };
            property.minimum = Some(utoipa::Number::UInt(min as usize));
            if max != u64::MAX {
                property.maximum = Some(utoipa::Number::UInt(max as usize));
            }
        }
        RefOr::T(Schema::Object(object))
    }
}

impl utoipa::ToSchema for ConfigPatch {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <RoomConfig as utoipa::ToSchema>::schemas(schemas);
    }
}

impl RoomConfig {
    pub fn new(name: impl Into<String>, target_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            target_url: target_url.into(),
            admit_per_tick: DEFAULT_ADMIT_PER_TICK,
            tick_ms: DEFAULT_TICK_MS,
            max_active: None,
            pass_ttl_s: DEFAULT_PASS_TTL_S,
            abandon_after_s: DEFAULT_ABANDON_AFTER_S,
            paused: false,
            arrival_grace_s: None,
            session_idle_s: None,
            user_key: None,
            user_required: false,
            code_required: false,
            pow_difficulty: 0,
            notice: None,
            queue_method: QueueMethod::Fifo,
            opens_at: None,
            closes_at: None,
            close_when_sold_out: true,
            bypass_networks: Networks::default(),
            language: Language::default(),
            page: PageBranding::default(),
            schedule: Schedule::default(),
            autotune: None,
            notify_return_s: notify_return_s(),
            notify_hold_s: notify_hold_s(),
            notify_webhook_url: None,
            notify_webhook_secret: None,
        }
    }

    /// The config as a JSON object, its write-only fields included: what a
    /// change is made to, and (with what is derived from it) what the
    /// Redis store keeps. Never an answer.
    pub fn as_value(&self) -> Map<String, Value> {
        let Ok(Value::Object(mut fields)) = serde_json::to_value(self) else {
            unreachable!("a config is an object");
        };
        for (name, secret) in self.secrets() {
            if let Some(secret) = secret {
                fields.insert(name.into(), Value::String(secret.expose().into()));
            }
        }
        fields
    }

    /// The write-only fields, by name: never serialized, never logged.
    pub fn secrets(&self) -> [(&'static str, Option<&Secret>); 2] {
        [
            ("user_key", self.user_key.as_ref()),
            ("notify_webhook_secret", self.notify_webhook_secret.as_ref()),
        ]
    }

    /// What is wrong with the config, naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_ranges()?;
        let name_len = self.name.trim().chars().count();
        if name_len == 0 || name_len > 200 {
            return Err(ConfigError::new("name", "name must be 1 to 200 characters"));
        }
        if self.name.chars().any(is_deceptive) {
            return Err(ConfigError::new(
                "name",
                "name must not contain control characters or bidirectional overrides",
            ));
        }
        if !target_url_ok(&self.target_url) {
            return Err(ConfigError::new(
                "target_url",
                "target_url must be an absolute http(s) URL with a host, or a path starting with a single /",
            ));
        }
        if let Some(key) = &self.user_key {
            let key = key.expose();
            let chars = key.chars().count();
            if !(MIN_USER_KEY_CHARS..=512).contains(&chars) || key.chars().any(char::is_control) {
                return Err(ConfigError::new(
                    "user_key",
                    format!(
                        "user_key must be {MIN_USER_KEY_CHARS} to 512 characters, without control characters (openssl rand -hex 32 makes one)"
                    ),
                ));
            }
        }
        if let Some(notice) = &self.notice
            && (notice.chars().count() > MAX_NOTICE_CHARS
                || notice.chars().any(|c| is_deceptive(c) && c != '\n'))
        {
            return Err(ConfigError::new(
                "notice",
                format!(
                    "notice must be at most {MAX_NOTICE_CHARS} characters, without control characters (line breaks allowed) or bidirectional overrides"
                ),
            ));
        }
        if let (Some(opens), Some(closes)) = (self.opens_at, self.closes_at)
            && closes <= opens
        {
            return Err(ConfigError::new(
                "closes_at",
                "closes_at must be after opens_at",
            ));
        }
        self.page.validate().map_err(|error| {
            let field = error
                .field
                .map_or_else(|| "page".to_string(), |field| format!("page.{field}"));
            ConfigError::new(field, error.message)
        })?;
        if let Some(idle) = self.session_idle_s
            && idle > self.pass_ttl_s
        {
            return Err(ConfigError::new(
                "session_idle_s",
                "session_idle_s must be at most pass_ttl_s, the pass's hard limit (raise pass_ttl_s with sessions on)",
            ));
        }
        if let Some(autotune) = &self.autotune {
            autotune
                .validate(self.admit_per_tick)
                .map_err(|(field, why)| ConfigError::new(field, why))?;
        }
        self.validate_webhook()?;
        if self.user_required && self.user_key.is_none() {
            return Err(ConfigError::new(
                "user_required",
                "user_required needs a user_key: without one no user token can be checked",
            ));
        }
        Ok(())
    }

    /// The webhook's URL is https (http only to a loopback host, for
    /// tests and a receiver beside the node) and comes with its secret;
    /// where it may point at all is the node's rule when it calls
    /// (`live::outbound`: no private address unless allowed).
    fn validate_webhook(&self) -> Result<(), ConfigError> {
        if let Some(secret) = &self.notify_webhook_secret {
            let secret = secret.expose();
            let chars = secret.chars().count();
            if !(MIN_USER_KEY_CHARS..=512).contains(&chars) || secret.chars().any(char::is_control)
            {
                return Err(ConfigError::new(
                    "notify_webhook_secret",
                    format!(
                        "notify_webhook_secret must be {MIN_USER_KEY_CHARS} to 512 characters, without control characters (openssl rand -hex 32 makes one)"
                    ),
                ));
            }
        }
        let Some(url) = &self.notify_webhook_url else {
            return Ok(());
        };
        if !webhook_url_ok(url) {
            return Err(ConfigError::new(
                "notify_webhook_url",
                "notify_webhook_url must be an https URL with a host and no user info (http only on a loopback host)",
            ));
        }
        if self.notify_webhook_secret.is_none() {
            return Err(ConfigError::new(
                "notify_webhook_secret",
                "a notify_webhook_url needs a notify_webhook_secret to sign with",
            ));
        }
        Ok(())
    }

    /// Every numeric field within its [`FIELDS`] range.
    fn check_ranges(&self) -> Result<(), ConfigError> {
        let values = self.as_value();
        for field in FIELDS {
            let Some((min, max)) = field.range else {
                continue;
            };
            let value = values.get(field.name).and_then(Value::as_u64);
            let within = value.is_some_and(|value| (min..=max).contains(&value));
            if within || (value.is_none() && field.nullable) {
                continue;
            }
            let name = field.name;
            let message = match (max == u64::MAX, field.nullable) {
                (true, true) => format!("{name} must be at least {min}, or null for no cap"),
                (true, false) => format!("{name} must be at least {min}"),
                (false, true) => {
                    format!("{name} must be between {min} and {max}, or null for off")
                }
                (false, false) if min == 0 => {
                    format!("{name} must be between 0 (off) and {max}")
                }
                (false, false) => format!("{name} must be between {min} and {max}"),
            };
            return Err(ConfigError::new(name, message));
        }
        Ok(())
    }
}

/// Every pending entry of `schedule`, in order, is a change a PATCH would
/// take of the config the entries before it make of `base`; the first that
/// is not is named (`schedule[2].admit_per_tick`).
fn check_schedule(schedule: &Schedule, base: &RoomConfig) -> Result<(), ConfigError> {
    let mut running = base.clone();
    for (i, entry) in schedule.entries().iter().enumerate() {
        if !entry.pending() {
            continue;
        }
        let named = |error: ConfigError| ConfigError {
            field: format!("schedule[{i}].{}", error.field.trim_start_matches('.')),
            message: format!(
                "schedule[{i}] (at {}): {}",
                super::clock::rfc3339(entry.at.0),
                error.message
            ),
            ..error
        };
        running = ConfigPatch::from_json(Value::Object(entry.set.clone()))
            .and_then(|patch| patch.apply_fields(&running))
            .map_err(named)?;
    }
    Ok(())
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
            match ConfigPatch(entry.set.clone())
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
            if let Ok(next) = ConfigPatch(entry.set.clone()).apply_fields(&running) {
                running = next;
            }
        }
        running
    }
}

/// Where admitted visitors go: an absolute http(s) URL with a host, or a
/// path on this site. `//evil.example` and `/\evil.example` are paths only
/// in name: browsers take them to another host.
fn target_url_ok(url: &str) -> bool {
    if url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if let Some(rest) = url.strip_prefix('/') {
        return !rest.starts_with('/') && !rest.starts_with('\\');
    }
    url::Url::parse(url).is_ok_and(|parsed| {
        matches!(parsed.scheme(), "http" | "https")
            && parsed.host_str().is_some_and(|h| !h.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(value: Value) -> ConfigPatch {
        ConfigPatch::from_json(value).unwrap()
    }

    #[test]
    fn every_field_of_the_config_is_declared_once_in_its_order() {
        let mut config = RoomConfig::new("Sale", "/x");
        config.user_key = Some(Secret::new("k".repeat(32)));
        config.notify_webhook_secret = Some(Secret::new("s".repeat(32)));
        let names: Vec<String> = config.as_value().keys().cloned().collect();
        let mut declared: Vec<&str> = FIELDS.iter().map(|field| field.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        declared.sort();
        assert_eq!(
            sorted, declared,
            "FIELDS and RoomConfig name the same fields"
        );
        let schema = serde_json::to_value(<RoomConfig as utoipa::PartialSchema>::schema()).unwrap();
        let in_schema: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            in_schema.len(),
            FIELDS.len() - 2,
            "all but the write-only user_key and notify_webhook_secret"
        );
    }

    #[test]
    fn a_schedule_entry_hides_the_fields_the_config_declares_write_only() {
        let secret: Vec<&str> = FIELDS
            .iter()
            .filter(|field| field.input == Input::Secret)
            .map(|field| field.name)
            .collect();
        assert_eq!(secret, super::super::schedule::WRITE_ONLY);
    }

    #[test]
    fn a_patch_distinguishes_a_null_cap_from_an_absent_one() {
        let mut base = RoomConfig::new("Sale", "https://shop.example/");
        base.max_active = Some(5);
        let keep = patch(json!({"paused": true}));
        assert_eq!(keep.apply_to(&base).unwrap().max_active, Some(5));
        let lift = patch(json!({"max_active": null}));
        assert_eq!(lift.apply_to(&base).unwrap().max_active, None);
        let unchanged = patch(json!({"paused": null, "admit_per_tick": null}));
        assert_eq!(
            unchanged.apply_to(&base).unwrap(),
            base,
            "null leaves those as they are"
        );
    }

    #[test]
    fn a_refusal_names_its_field() {
        let base = RoomConfig::new("Sale", "https://shop.example/");
        for (change, field, message) in [
            (
                json!({"tick_ms": 5}),
                "tick_ms",
                "tick_ms must be between 100 and 3600000",
            ),
            (
                json!({"max_active": 0}),
                "max_active",
                "max_active must be at least 1, or null for no cap",
            ),
            (
                json!({"arrival_grace_s": 1}),
                "arrival_grace_s",
                "arrival_grace_s must be between 5 and 86400, or null for off",
            ),
            (
                json!({"session_idle_s": 4}),
                "session_idle_s",
                "session_idle_s must be between 5 and 86400, or null for off",
            ),
            (
                json!({"session_idle_s": 601}),
                "session_idle_s",
                "session_idle_s must be at most pass_ttl_s",
            ),
            (
                json!({"pow_difficulty": 21}),
                "pow_difficulty",
                "pow_difficulty must be between 0 (off) and 20",
            ),
            (json!({"paused": "yes"}), "paused", "paused: invalid type"),
            (
                json!({"bypass_networks": ["10.0.0.1", "shop.example"]}),
                "bypass_networks",
                "bypass_networks: \"shop.example\" is neither",
            ),
            (
                json!({"page": {"title": "a\nb"}}),
                "page.title",
                "page.title must be",
            ),
            (
                json!({"user_required": true}),
                "user_required",
                "user_required needs",
            ),
        ] {
            let error = patch(change.clone()).apply_to(&base).unwrap_err();
            assert_eq!(error.field, field, "{change}");
            assert!(error.message.starts_with(message), "{change}: {error}");
        }
        let unknown = ConfigPatch::from_json(json!({"speed": 3})).unwrap_err();
        assert_eq!(unknown.field, "speed");
        let unknown = ConfigPatch::from_json(json!({"page": {"font": "x"}})).unwrap_err();
        assert_eq!(unknown.field, "page.font");
    }

    #[test]
    fn page_fields_change_one_by_one() {
        let base = patch(json!({"page": {"title": "T", "footer": "F"}}))
            .apply_to(&RoomConfig::new("Sale", "/x"))
            .unwrap();
        let next = patch(json!({"page": {"title": null, "headline": "H", "footer": " "}}))
            .apply_to(&base)
            .unwrap();
        assert_eq!(next.page.title, None);
        assert_eq!(next.page.headline.as_deref(), Some("H"));
        assert_eq!(next.page.footer, None, "blank is none");
        let cleared = patch(json!({"page": null})).apply_to(&base).unwrap();
        assert!(cleared.page.is_empty());
    }

    #[test]
    fn a_user_key_is_kept_through_a_change_and_never_logged() {
        let with_key = patch(json!({"user_key": "the-shop-s-user-key-0123456789abcdef"}))
            .apply_to(&RoomConfig::new("Sale", "/x"))
            .unwrap();
        let changed = patch(json!({"paused": true})).apply_to(&with_key).unwrap();
        assert_eq!(changed.user_key, with_key.user_key);
        let removed = patch(json!({"user_key": null}))
            .apply_to(&with_key)
            .unwrap();
        assert_eq!(removed.user_key, None);
        for logged in [
            format!("{changed:?}"),
            format!(
                "{:?}",
                patch(json!({"user_key": "the-shop-s-user-key-0123456789abcdef"}))
            ),
        ] {
            assert!(!logged.contains("the-shop"), "{logged}");
            assert!(logged.contains("[redacted]"), "{logged}");
        }
    }

    #[test]
    fn a_new_room_needs_a_name_and_a_target() {
        assert_eq!(
            patch(json!({"name": "A"})).new_room().unwrap_err().field,
            "target_url"
        );
        let made = patch(json!({"name": "A", "target_url": "/a", "notice": " "}))
            .new_room()
            .unwrap();
        assert_eq!(made.admit_per_tick, DEFAULT_ADMIT_PER_TICK);
        assert_eq!(made.notice, None, "an empty notice is no notice");
    }

    #[test]
    fn targets_are_absolute_http_urls_or_local_paths() {
        let with = |url: &str| RoomConfig::new("Sale", url).validate();
        for good in [
            "https://shop.example/",
            "http://shop.example:8080/x?y=1",
            "/shop",
            "/",
        ] {
            assert!(with(good).is_ok(), "{good}");
        }
        for bad in [
            "//evil.example/",
            "/\\evil.example",
            "https://",
            "http://",
            "javascript:alert(1)",
            "ftp://x.example/",
            "shop",
            "https://a b.example/",
        ] {
            assert_eq!(with(bad).unwrap_err().field, "target_url", "{bad}");
        }
    }

    #[test]
    fn names_refuse_controls_and_bidi_overrides() {
        for bad in ["a\u{202E}b", "a\nb", "x\u{2066}y", "\u{7}"] {
            let config = RoomConfig::new(bad, "/x");
            assert_eq!(config.validate().unwrap_err().field, "name", "{bad:?}");
        }
        assert!(
            RoomConfig::new("Spring sale — 봄 세일", "/x")
                .validate()
                .is_ok()
        );
    }
}

#[cfg(test)]
mod schedule_tests {
    use super::*;
    use crate::words::clock::{Millis, Moment};
    use crate::words::schedule::{MAX_ENTRIES, Schedule};
    use serde_json::json;

    const T: Millis = 1_800_000_000_000;

    fn at(ms: Millis) -> String {
        crate::words::clock::rfc3339_ms(ms)
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
        let logged = format!("{config:?}");
        assert!(!logged.contains(&key), "never logged: {logged}");
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
