//! The rooms file (`--rooms`, api.md "Rooms from a file"): `[[room]]`
//! tables read and checked at start, before the node serves, by the
//! config's own rules (`words::config`), a fault named by its line and the
//! field the rules name; then applied, each table one atomic step of
//! the store (`op::ApplyTable`), so nodes starting at once apply it once.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use crate::store::{Store, StoreError, StoreExt};
use crate::words::room_table::{RoomTable, TableHash};
use crate::words::{ConfigError, ConfigPatch, RoomId};

/// The field that names a file holding the room's `user_key`, so that no
/// secret sits in the rooms file (which is meant to be kept in git).
const USER_KEY_FILE: &str = "user_key_file";
const USER_KEY: &str = "user_key";

/// The rooms file, read and checked: every table can be applied.
#[derive(Debug)]
pub struct RoomsFile {
    path: PathBuf,
    rooms: Vec<Declared>,
}

#[derive(Debug)]
struct Declared {
    table: RoomTable,
    /// The line of the table's `[[room]]`, for an error while applying it.
    line: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum RoomsFileError {
    #[error("cannot read the rooms file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The file does not parse, or names a bad value: where, and what.
    #[error("the rooms file is not valid: {path}:{line}:{column}: {message}")]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("room `{room}` of the rooms file ({path}:{line}) could not be applied: {source}")]
    Apply {
        path: String,
        line: usize,
        room: RoomId,
        source: StoreError,
    },
}

/// The file's shape as serde reads it, every key and value with its span.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    room: Vec<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
}

type Field = (Spanned<String>, Spanned<toml::Value>);

impl RoomsFile {
    /// Reads and checks the file at `path`; relative paths in it
    /// (`user_key_file`) are taken from the file's own directory.
    pub fn load(path: &Path) -> Result<Self, RoomsFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| RoomsFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Checks `text` as the rooms file at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, RoomsFileError> {
        let reader = Reader { path, text };
        let shape: FileShape = toml::from_str(text).map_err(|error| {
            reader.invalid(error.span().unwrap_or(0..0), error.message().trim_end())
        })?;
        let mut rooms: Vec<Declared> = Vec::with_capacity(shape.room.len());
        let mut lines: HashMap<RoomId, usize> = HashMap::new();
        for table in shape.room {
            let declared = reader.table(table)?;
            if let Some(first) = lines.insert(declared.table.id.clone(), declared.line) {
                return Err(reader.invalid_at_line(
                    declared.line,
                    format!(
                        "room `{}` is declared twice (first on line {first})",
                        declared.table.id
                    ),
                ));
            }
            rooms.push(declared);
        }
        Ok(Self {
            path: path.to_path_buf(),
            rooms,
        })
    }

    /// The rooms the file declares, in its order.
    pub fn rooms(&self) -> impl Iterator<Item = &RoomTable> {
        self.rooms.iter().map(|declared| &declared.table)
    }

    /// Applies every table, in the file's order (see `op::ApplyTable`).
    pub async fn apply(&self, store: &dyn Store) -> Result<(), RoomsFileError> {
        for Declared { table, line } in &self.rooms {
            let applied =
                store
                    .apply_table(table)
                    .await
                    .map_err(|source| RoomsFileError::Apply {
                        path: self.path.display().to_string(),
                        line: *line,
                        room: table.id.clone(),
                        source,
                    })?;
            tracing::info!(
                room = %table.id,
                outcome = %applied,
                rooms_file = %self.path.display(),
                "room applied from the rooms file"
            );
        }
        Ok(())
    }
}

/// Reads the tables of one file, and says where a fault is.
struct Reader<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Reader<'_> {
    fn invalid(&self, span: Range<usize>, message: impl Into<String>) -> RoomsFileError {
        let before = &self.text[..span.start.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        RoomsFileError::Invalid {
            path: self.path.display().to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    fn invalid_at_line(&self, line: usize, message: impl Into<String>) -> RoomsFileError {
        RoomsFileError::Invalid {
            path: self.path.display().to_string(),
            line,
            column: 1,
            message: message.into(),
        }
    }

    fn line_of(&self, span: &Range<usize>) -> usize {
        self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    /// One `[[room]]` table, checked field by field and then as a whole, as
    /// the admin API checks `POST /api/admin/rooms`.
    fn table(
        &self,
        table: Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    ) -> Result<Declared, RoomsFileError> {
        let header = table.span();
        let mut fields: Vec<Field> = table.into_inner().into_iter().collect();
        fields.sort_by_key(|(key, _)| key.span().start);
        let named = |name: &str| fields.iter().find(|(key, _)| key.get_ref() == name);

        let Some((id_key, id_value)) = named("id") else {
            return Err(self.invalid(header, "a [[room]] table needs an `id`"));
        };
        let id_json = self.json(id_key, id_value)?;
        let id: RoomId = serde_json::from_value(id_json.clone())
            .map_err(|error| self.invalid(id_value.span(), format!("field `id`: {error}")))?;
        let at_room = |span: Range<usize>, field: &str, message: &dyn std::fmt::Display| {
            self.invalid(span, format!("room `{id}`, field `{field}`: {message}"))
        };
        for required in ["name", "target_url"] {
            if named(required).is_none() {
                return Err(self.invalid(
                    header.clone(),
                    format!(
                        "room `{id}` has no `{required}` (every room needs id, name and target_url)"
                    ),
                ));
            }
        }

        // What the admin API would be sent: the same fields, with the
        // user_key read from its file. It is also what is hashed, so a
        // changed key is a changed table, and a moved key file is not.
        let mut body = Map::new();
        for (key, value) in &fields {
            let name = key.get_ref().as_str();
            match name {
                "id" => {}
                USER_KEY_FILE => {
                    if named(USER_KEY).is_some() {
                        return Err(at_room(
                            key.span(),
                            name,
                            &"give the key in user_key or user_key_file, not both",
                        ));
                    }
                    let user_key = self
                        .user_key(value)
                        .map_err(|message| at_room(value.span(), name, &message))?;
                    body.insert(USER_KEY.into(), Value::String(user_key));
                }
                _ => {
                    body.insert(name.to_string(), self.json(key, value)?);
                }
            }
        }
        // A fault is blamed on the line of the field the rules name (a
        // field of the `page` table on the table's; a key read from
        // `user_key_file` on that line).
        let blame = |error: ConfigError| {
            let top = error.field.split('.').next().unwrap_or_default();
            let line = fields.iter().find(|(key, _)| {
                let name = key.get_ref().as_str();
                name == top || (name == USER_KEY_FILE && top == USER_KEY)
            });
            match line {
                Some((key, value)) => at_room(value.span(), key.get_ref(), &error.message),
                None => self.invalid(header.clone(), format!("room `{id}`: {}", error.message)),
            }
        };
        let patch = ConfigPatch::from_json(Value::Object(body.clone())).map_err(blame)?;
        patch.new_room().map_err(blame)?;
        body.insert("id".into(), id_json);
        let hash = TableHash::of(&Value::Object(body));
        Ok(Declared {
            line: self.line_of(&header),
            table: RoomTable { id, patch, hash },
        })
    }

    /// A value as JSON, as an operator would write it to the admin API:
    /// a TOML datetime is its RFC 3339 text.
    fn json(
        &self,
        key: &Spanned<String>,
        value: &Spanned<toml::Value>,
    ) -> Result<Value, RoomsFileError> {
        to_json(value.get_ref()).map_err(|message| {
            self.invalid(
                value.span(),
                format!("field `{}`: {message}", key.get_ref()),
            )
        })
    }

    /// The key in the file `value` names: relative to the rooms file's
    /// directory, surrounding whitespace (the file's last line break) left out.
    fn user_key(&self, value: &Spanned<toml::Value>) -> Result<String, String> {
        let Some(file) = value.get_ref().as_str() else {
            return Err("must be the path of a file holding the user_key".into());
        };
        let path = self
            .path
            .parent()
            .unwrap_or_else(|| Path::new(""))
            .join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        Ok(text.trim().to_string())
    }
}

fn to_json(value: &toml::Value) -> Result<Value, String> {
    Ok(match value {
        toml::Value::String(text) => Value::String(text.clone()),
        toml::Value::Integer(number) => Value::from(*number),
        toml::Value::Float(number) => serde_json::Number::from_f64(*number)
            .map(Value::Number)
            .ok_or("must be a finite number")?,
        toml::Value::Boolean(flag) => Value::Bool(*flag),
        toml::Value::Datetime(at) => Value::String(at.to_string()),
        toml::Value::Array(items) => {
            Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?)
        }
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| Ok((key.clone(), to_json(value)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str =
        "[[room]]\nid = \"drop\"\nname = \"Drop\"\ntarget_url = \"https://shop.example/\"\n";

    fn parse(text: &str) -> Result<RoomsFile, RoomsFileError> {
        RoomsFile::parse(Path::new("/etc/waitroom/rooms.toml"), text)
    }

    /// The line and message of what is wrong with `text`.
    fn fault(text: &str) -> (usize, String) {
        match parse(text) {
            Err(RoomsFileError::Invalid { line, message, .. }) => (line, message),
            other => panic!("expected a fault in\n{text}\ngot {other:?}"),
        }
    }

    fn hash(text: &str) -> TableHash {
        let file = parse(text).unwrap();
        file.rooms().next().unwrap().hash.clone()
    }

    #[test]
    fn each_fault_is_named_by_its_line_and_field() {
        let cases: &[(&str, usize, &[&str])] = &[
            ("[[room]\nid = \"x\"\n", 1, &["expected `]`"]),
            ("[[rooms]]\nid = \"x\"\n", 1, &["unknown field `rooms`"]),
            (
                &format!("{HEAD}admit_per_tik = 3\n"),
                5,
                &["field `admit_per_tik`", "unknown field"],
            ),
            (
                &format!("{HEAD}admit_per_tick = \"ten\"\n"),
                5,
                &["field `admit_per_tick`", "invalid type"],
            ),
            (
                &format!("{HEAD}admit_per_tick = -1\n"),
                5,
                &["field `admit_per_tick`"],
            ),
            (
                &format!("{HEAD}\ntick_ms = 5\n"),
                6,
                &["field `tick_ms`", "tick_ms must be between 100 and 3600000"],
            ),
            (
                "[[room]]\nid = \"Spring Sale\"\nname = \"x\"\ntarget_url = \"/x\"\n",
                2,
                &["field `id`", "[a-z0-9-]"],
            ),
            (
                "[[room]]\nid = \"drop\"\nname = \"Drop\"\ntarget_url = \"ftp://shop.example/\"\n",
                4,
                &["field `target_url`", "absolute http(s) URL"],
            ),
            (
                &format!("{HEAD}user_key_file = \"secrets/missing.key\"\n"),
                5,
                &[
                    "field `user_key_file`",
                    "cannot read /etc/waitroom/secrets/missing.key",
                ],
            ),
            (
                &format!("{HEAD}opens_at = 2026-06-01T09:00:00\n"),
                5,
                &["field `opens_at`", "RFC 3339"],
            ),
            (
                &format!(
                    "{HEAD}opens_at = 2026-06-01T09:00:00Z\ncloses_at = \"2026-06-01T08:00:00Z\"\n"
                ),
                6,
                &["field `closes_at`", "closes_at must be after opens_at"],
            ),
            (
                &format!("{HEAD}page = {{ title = \"Drop\", accent_color = \"red\" }}\n"),
                5,
                &[
                    "field `page`",
                    "page.accent_color must be a colour written #rrggbb",
                ],
            ),
            (
                &format!("{HEAD}\n[room.page]\nheadline = \"Drop\"\ncolour = \"#ffffff\"\n"),
                6,
                &["field `page`", "unknown field `colour`"],
            ),
            (
                &format!("{HEAD}user_required = true\n"),
                5,
                &["field `user_required`", "needs a user_key"],
            ),
            (
                &format!("{HEAD}paused = true\nlanguage = \"klingon\"\n"),
                6,
                &["field `language`", "\"klingon\"", "zh-Hans"],
            ),
            (
                "[[room]]\nid = \"drop\"\nname = \"Drop\"\n",
                1,
                &["room `drop` has no `target_url`"],
            ),
            ("[[room]]\nname = \"Drop\"\n", 1, &["needs an `id`"]),
            (
                &format!(
                    "{HEAD}\n[[room]]\nid = \"drop\"\nname = \"Again\"\ntarget_url = \"/x\"\n"
                ),
                6,
                &["room `drop` is declared twice (first on line 1)"],
            ),
        ];
        for (text, line, words) in cases {
            let (at, message) = fault(text);
            assert_eq!(at, *line, "{message}\n{text}");
            for word in *words {
                assert!(message.contains(word), "{message:?} lacks {word:?}\n{text}");
            }
        }
    }

    #[test]
    fn the_user_key_comes_from_its_file_and_is_never_shown() {
        let dir = std::env::temp_dir().join(format!("waitroom-rooms-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("secrets")).unwrap();
        let key = "a-user-key-of-the-shop-0123456789abcdef";
        std::fs::write(dir.join("secrets/shop.key"), format!("{key}\n")).unwrap();
        std::fs::write(dir.join("secrets/short.key"), "sesame\n").unwrap();
        let file = dir.join("rooms.toml");
        let with = |name: &str| format!("{HEAD}user_key_file = \"secrets/{name}\"\n");

        let read = RoomsFile::parse(&file, &with("shop.key")).unwrap();
        let table = read.rooms().next().unwrap();
        let set = table.patch.get("user_key").and_then(|key| key.as_str());
        assert_eq!(
            set,
            Some(key),
            "read relative to the file, its line break left out"
        );
        assert!(!format!("{read:?}").contains(key));

        // The key's content is hashed, not the file's name.
        let inline = format!("{HEAD}user_key = \"{key}\"\n");
        assert_eq!(table.hash, hash(&inline));

        let error = RoomsFile::parse(&file, &with("short.key"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(":5:") && error.contains("field `user_key_file`"),
            "{error}"
        );
        assert!(error.contains("user_key must be"), "{error}");
        assert!(!error.contains("sesame"), "{error}");

        let both = format!("{}user_key = \"{key}\"\n", with("shop.key"));
        assert!(
            RoomsFile::parse(&file, &both)
                .unwrap_err()
                .to_string()
                .contains("not both")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_table_hashes_alike_however_it_is_laid_out() {
        let plain = format!("{HEAD}admit_per_tick = 5\nopens_at = \"2026-06-01T09:00:00Z\"\n");
        let laid_out = "# The spring drop.\n[[room]]\nopens_at = 2026-06-01T09:00:00Z   # a TOML datetime\n\
             admit_per_tick = 5\ntarget_url = \"https://shop.example/\"\nname = \"Drop\"\nid = \"drop\"\n";
        assert_eq!(hash(&plain), hash(laid_out));
        assert_ne!(hash(&plain), hash(&format!("{HEAD}admit_per_tick = 6\n")));
    }

    #[test]
    fn a_rooms_language_may_be_an_alias_and_is_kept_as_its_code() {
        let file = parse(&format!("{HEAD}language = \"zh-CN\"\n")).unwrap();
        let table = file.rooms().next().unwrap();
        let config = table.patch.new_room().unwrap();
        assert_eq!(config.language.code(), "zh-Hans");
    }

    #[test]
    fn a_page_table_is_the_room_s_branding() {
        let file = parse(&format!(
            "{HEAD}\n[room.page]\nheadline = \"Spring drop\"\nmessage = \"\"\"\nDoors open at ten.\nBe early.\"\"\"\nbackground_color = \"#101820\"\n"
        ))
        .unwrap();
        let table = file.rooms().next().unwrap();
        let config = table.patch.new_room().unwrap();
        assert_eq!(config.page.headline.as_deref(), Some("Spring drop"));
        assert_eq!(
            config.page.message.as_deref(),
            Some("Doors open at ten.\nBe early.")
        );
        assert_eq!(config.page.background_color.as_deref(), Some("#101820"));
    }

    #[test]
    fn an_empty_file_declares_no_room() {
        assert_eq!(parse("# nothing yet\n").unwrap().rooms().count(), 0);
    }
}
