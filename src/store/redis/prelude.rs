//! How a script is put together: a prelude of the constants the Lua shares
//! with Rust (refusal codes, limits, key names, the event format), generated
//! here from the Rust ones so that no script repeats a value; then
//! `lua/lib.lua` (a room's scripts) or `lua/sale_lib.lua` (the sale's); then
//! the operation's own file. `lua/prelude.lua` is the same prelude written
//! out for tools that load a script by hand (`scripts/bench/redis-join.sh`);
//! a test keeps it equal to what is generated here.

use redis::Script;

use super::events::EVENT_FORMAT;
use super::join_batch::{JOIN_VALUES, REFUSED, SHORT_FORM};
use super::keys;
use super::records::{CLAIM, GROUP, Record, VISITOR_RECORDS};
use super::replies::{STATES, TableReply};
use super::script_error::CODES;
use crate::words::QueueMethod;
use crate::words::autotune;
use crate::words::codes::MAX_GROUPS;
use crate::words::constants::{
    AWAY_REMEMBERED_MS, JOIN_LIMIT_WINDOW_MS, RATE_WINDOW_MS, SWEEP_AGAIN_MS, SWEEP_SLICE,
};
use crate::words::login_limit::{self, Attempt};
use crate::words::notify;
use crate::words::report::{self, TurnedAway};
use crate::words::sale::{ClaimState, SaleKind};
use strum::VariantNames;

/// Lua's `unpack()` is limited in the number of values it takes: commands
/// with many members are sent in chunks of this size.
const CHUNK: u64 = 1_000;

/// What a claim asks for, as `lua/sale_claim.lua` reads it (`WANT_…`): a
/// quantity, or seats.
pub(super) const WANTS: [&str; 2] = ["quantity", "seats"];

const LIB: &str = include_str!("../../../lua/lib.lua");
const SALE_LIB: &str = include_str!("../../../lua/sale_lib.lua");

/// The wait buckets' bounds in ms, space-separated, for lua/lib.lua's
/// `ledger.bounds` (made once: the prelude's text lives as long as it).
fn wait_bounds_ms() -> &'static str {
    static BOUNDS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        report::WAIT_BOUNDS_S
            .map(|s| (s * 1000).to_string())
            .join(" ")
    });
    &BOUNDS
}

/// A value the prelude gives a script.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Literal {
    Text(&'static str),
    Number(u64),
}

/// Every constant the prelude defines, by its Lua name.
fn constants() -> Vec<(String, Literal)> {
    let mut constants: Vec<_> = CODES
        .iter()
        .map(|code| (code.to_string(), Literal::Text(code)))
        .collect();
    // Every word a script compares, as `<KIND>_<WORD>`: `METHOD_FIFO = 'fifo'`.
    let words: [(&str, &[&'static str]); 6] = [
        ("METHOD", QueueMethod::VARIANTS),
        ("TURNED", TurnedAway::VARIANTS),
        ("CLAIM", ClaimState::VARIANTS),
        ("SALE", SaleKind::VARIANTS),
        ("WANT", &WANTS),
        ("ATTEMPT", Attempt::VARIANTS),
    ];
    for (kind, names) in words {
        constants.extend(names.iter().map(|name| {
            let constant = format!("{kind}_{}", name.to_uppercase());
            (constant, Literal::Text(name))
        }));
    }
    constants.extend(
        [
            ("RATE_WINDOW_MS", Literal::Number(RATE_WINDOW_MS)),
            (
                "JOIN_LIMIT_WINDOW_MS",
                Literal::Number(JOIN_LIMIT_WINDOW_MS),
            ),
            ("CHUNK", Literal::Number(CHUNK)),
            ("SWEEP_SLICE", Literal::Number(SWEEP_SLICE)),
            ("SWEEP_AGAIN_MS", Literal::Number(SWEEP_AGAIN_MS)),
            ("AWAY_REMEMBERED_MS", Literal::Number(AWAY_REMEMBERED_MS)),
            ("JOIN_REFUSED", Literal::Text(REFUSED)),
            ("EVENT_FORMAT", Literal::Number(EVENT_FORMAT.into())),
            ("ROOM_KEY", Literal::Text(keys::ROOM)),
            ("EVENTS_KEY", Literal::Text(keys::EVENTS)),
            ("LEFT_KEY", Literal::Text(keys::LEFT_PREFIX)),
            ("BYPASSED_KEY", Literal::Text(keys::BYPASSED)),
            ("PRIORITY_KEY", Literal::Text(keys::PRIORITY)),
            (
                "PRIORITY_ENTRIES_KEY",
                Literal::Text(keys::PRIORITY_ENTRIES),
            ),
            ("GROUPS_KEY", Literal::Text(keys::CODE_GROUPS)),
            ("GROUPS_USED_KEY", Literal::Text(keys::CODE_GROUPS_USED)),
            ("CODES_KEY", Literal::Text(keys::CODES_PREFIX)),
            ("JOIN_LIMIT_KEY", Literal::Text(keys::JOIN_LIMIT_PREFIX)),
            ("CODE_GUESSES_KEY", Literal::Text(keys::CODE_GUESSES_PREFIX)),
            ("POW_KEY", Literal::Text(keys::POW_PREFIX)),
            ("LEDGER_KEY", Literal::Text(keys::LEDGER_PREFIX)),
            ("MINUTES_KEY", Literal::Text(keys::MINUTES_PREFIX)),
            ("HOURS_KEY", Literal::Text(keys::HOURS_PREFIX)),
            ("REPORTS_KEY", Literal::Text(keys::REPORTS)),
            ("SCHEDULE_KEY", Literal::Text(keys::SCHEDULE)),
            ("SAMPLES_KEY", Literal::Text(keys::SAMPLES)),
            ("TUNE_CHANGES_KEY", Literal::Text(keys::TUNE_CHANGES)),
            ("NOTIFY_KEY", Literal::Text(keys::NOTIFY)),
            ("NEAR_KEY", Literal::Text(keys::NEAR_PREFIX)),
            ("NOTIFY_BLOCK_KEY", Literal::Text(keys::NOTIFY_BLOCK_PREFIX)),
            ("OUTBOX_KEY", Literal::Text(keys::OUTBOX)),
            ("OUTBOX_GROUP", Literal::Text(keys::OUTBOX_GROUP)),
            (
                "HELD_PRESENCE",
                Literal::Number(crate::words::rules::HELD_PRESENCE),
            ),
            ("MAX_AHEAD", Literal::Number(notify::MAX_AHEAD.into())),
            (
                "SAMPLES_KEPT",
                Literal::Number(autotune::SAMPLES_KEPT as u64),
            ),
            (
                "CHANGES_KEPT",
                Literal::Number(autotune::CHANGES_KEPT as u64),
            ),
            (
                "CHANGES_SHOWN",
                Literal::Number(autotune::CHANGES_SHOWN as u64),
            ),
            (
                "SAMPLE_EVERY_MS",
                Literal::Number(autotune::SAMPLE_EVERY_MS),
            ),
            (
                "HEALTHY_TO_RAISE",
                Literal::Number(autotune::HEALTHY_TO_RAISE as u64),
            ),
            ("NO_FAILURE", Literal::Text(autotune::NO_FAILURE)),
            ("TUNE_CUT", Literal::Text(autotune::TuneState::Cut.into())),
            (
                "TUNE_RAISED",
                Literal::Text(autotune::TuneState::Raised.into()),
            ),
            ("TUNE_HELD", Literal::Text(autotune::TuneState::Held.into())),
            ("TUNE_IDLE", Literal::Text(autotune::TuneState::Idle.into())),
            (
                "TUNED_DOWN",
                Literal::Text(autotune::Direction::Down.name()),
            ),
            ("TUNED_UP", Literal::Text(autotune::Direction::Up.name())),
            ("MINUTE_MS", Literal::Number(report::MINUTE_MS)),
            ("HOUR_MS", Literal::Number(report::HOUR_MS)),
            ("FOLD_AFTER_MS", Literal::Number(report::FOLD_AFTER_MS)),
            ("WAIT_BOUNDS_MS", Literal::Text(wait_bounds_ms())),
            ("MAX_GROUPS", Literal::Number(MAX_GROUPS as u64)),
            (
                "LOGIN_FAILURES",
                Literal::Number(login_limit::FAILURES_PER_MINUTE.into()),
            ),
            ("TABLE_CREATED", Literal::Text(TableReply::Created.into())),
            ("TABLE_CHANGED", Literal::Text(TableReply::Changed.into())),
            (
                "TABLE_UNCHANGED",
                Literal::Text(TableReply::Unchanged.into()),
            ),
            (
                "TABLE_STILL_CLOSED",
                Literal::Text(TableReply::StillClosed.into()),
            ),
        ]
        .map(|(name, value)| (name.to_string(), value)),
    );
    constants
}

/// The Lua that defines [`constants`], one `local` each.
fn prelude() -> String {
    let mut lua = String::from(
        "-- Generated from Rust's constants by src/store/redis/prelude.rs: do not edit.\n",
    );
    for (name, value) in constants() {
        let value = match value {
            Literal::Text(text) => format!("'{text}'"),
            Literal::Number(number) => number.to_string(),
        };
        lua.push_str(&format!("local {name} = {value}\n"));
    }
    lua
}

/// The Lua that names `keys` in the order the node sends them:
/// `local K_ROOM, K_LINE… = KEYS[1], KEYS[2]…`.
fn key_names(keys: &[(&str, &str)]) -> String {
    let names: Vec<&str> = keys.iter().map(|(lua, _)| *lua).collect();
    let slots: Vec<String> = (1..=keys.len()).map(|i| format!("KEYS[{i}]")).collect();
    format!(
        "-- The keys in the order the node sends them (src/store/redis/keys.rs).\nlocal {} =\n  {}\n",
        names.join(", "),
        slots.join(", ")
    )
}

/// `read_join(packed)`: a join's values by name (`join_batch::JOIN_VALUES`)
/// from the one argument the node sends it as (`Join::packed`), each but
/// the last ended by a newline; or, for a join without options, its
/// [`SHORT_FORM`] values (each after a newline but the first, those left
/// out at the end `''`), the other values `''`. Every join in the short
/// form is read into one table, made once: a join is done with its values
/// before the next is read, and a table of every value made for each join
/// cost Redis more than the rest of reading it.
fn join_reader() -> String {
    let names = JOIN_VALUES.join(", ");
    let table = |value: &dyn Fn(&str) -> String| {
        let fields: Vec<String> = JOIN_VALUES
            .iter()
            .map(|name| format!("{name} = {}", value(name)))
            .collect();
        format!("{{ {} }}", fields.join(", "))
    };
    let short = table(&|_| "''".to_string());
    let full = table(&|name| name.to_string());
    let short_names: Vec<String> = SHORT_FORM.iter().map(|n| format!("short_{n}")).collect();
    let short_fields: Vec<String> = SHORT_FORM
        .iter()
        .map(|n| format!("SHORT_JOIN.{n}"))
        .collect();
    let short_pattern = vec!["([^\\n]*)"; SHORT_FORM.len()].join("\\n?");
    format!(
        "-- A join's values by name, from its argument (src/store/redis/join_batch.rs).\n\
         local JOIN_PATTERN = '^' .. string.rep('([^\\n]*)\\n', {before_last}) .. '(.*)$'\n\
         local SHORT_JOIN = {short}\n\
         local function read_join(packed)\n\
         \x20 local {short_names} = string.match(packed, '^{short_pattern}$')\n\
         \x20 if {first_short} then\n\
         \x20   {short_fields} = {short_names}\n\
         \x20   return SHORT_JOIN\n\
         \x20 end\n\
         \x20 local {names} = string.match(packed, JOIN_PATTERN)\n\
         \x20 return {full}\n\
         end\n",
        before_last = JOIN_VALUES.len() - 1,
        short_names = short_names.join(", "),
        short_fields = short_fields.join(", "),
        first_short = short_names[0],
    )
}

/// `records`: for each of `declared` (`records.rs`), by its name, its
/// kind's letter, its number of fields, `write(field…)` that makes one and `read(record)` that
/// gives its fields back in their declared order; and `record_kind(record)`,
/// the letter a record begins with (nil for none).
fn records_lua(declared: &[&Record]) -> String {
    let mut lua = String::from(
        "-- The records kept as one string each (src/store/redis/records.rs).\n\
         local function record_kind(record) return record and string.sub(record, 1, 1) end\n\
         local records = {\n",
    );
    for record in declared {
        let params = record.fields.join(", ");
        let prefix = record
            .tag
            .map(|tag| format!("'{tag}|' .. "))
            .unwrap_or_default();
        let written = record.fields.join(" .. '|' .. ");
        let anchor = record.tag.map(|tag| format!("{tag}|")).unwrap_or_default();
        let captures = vec!["([^|]*)"; record.fields.len() - 1].join("|");
        let pattern = format!("^{anchor}{captures}|(.*)$");
        let kind = record
            .tag
            .map(|tag| format!("kind = '{tag}', "))
            .unwrap_or_default();
        lua.push_str(&format!(
            "  {name} = {{ {kind}fields = {count}, write = function({params}) return {prefix}{written} end,\n\
             \x20   read = function(record) return string.match(record, '{pattern}') end }},\n",
            name = record.name,
            count = record.fields.len(),
        ));
    }
    lua.push_str("}\n");
    lua
}

/// What a room's script begins with: the prelude, its keys' names, the
/// join's reader and the room's records. `lua/prelude.lua` is this, for
/// tools that load a room's script by hand.
fn room_prelude() -> String {
    let declared: Vec<&Record> = VISITOR_RECORDS.iter().chain([&GROUP]).collect();
    prelude()
        + &key_names(&keys::ROOM_KEYS)
        + &join_reader()
        + &records_lua(&declared)
        + &states_lua()
}

/// `STATE`: the letter each state of a place goes by in an answer
/// (`replies::STATES`), by name: `STATE.waiting`.
fn states_lua() -> String {
    let states: Vec<String> = STATES
        .iter()
        .map(|(name, letter)| format!("{name} = '{letter}'"))
        .collect();
    format!(
        "-- A place's states as answers name them (src/store/redis/replies.rs).\n\
         local STATE = {{ {} }}\n",
        states.join(", ")
    )
}

/// A room's script: the prelude with the room's keys' names,
/// `lua/lib.lua`, then `operation` as a function, so that with deferred
/// events (ARGV[1] '') its reply can carry them: `{reply, {event…}}`. An
/// error reply is returned as it is (a refusal publishes nothing).
pub(super) fn room_script(operation: &str) -> Script {
    Script::new(&format!(
        "{prelude}{LIB}
local function operation()
{operation}
end
local reply = operation()
if PUBLISH ~= '' or (type(reply) == 'table' and reply.err) then return reply end
if reply == nil then reply = false end
return {{ reply, DEFERRED }}
",
        prelude = room_prelude()
    ))
}

/// A script of no room and no sale: the prelude, then `operation`.
pub(super) fn plain_script(operation: &str) -> Script {
    Script::new(&format!("{}\n{operation}", prelude()))
}

/// A sale's script: the prelude with the sale's keys' names,
/// `lua/sale_lib.lua`, then `operation`.
pub(super) fn sale_script(operation: &str) -> Script {
    let prelude = prelude() + &key_names(&keys::SALE_KEYS) + &records_lua(&[&CLAIM]);
    Script::new(&format!("{prelude}{SALE_LIB}\n{operation}"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::words::written::kept_as_written;

    /// Every `lua/*.lua` file's name and code, its comments left out.
    fn lua_files() -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "lua"))
            // The generated prelude is where the values are defined.
            .filter(|path| !path.ends_with("prelude.lua"))
            .map(|path| {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text
                    .lines()
                    .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
                    .collect::<Vec<_>>()
                    .join("\n");
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    code,
                )
            })
            .collect();
        files.sort();
        assert!(files.len() > 20, "the scripts are read from lua/");
        files
    }

    /// The string literals in `code`, quoted either way, but for the
    /// arguments of Redis commands: Redis's own words (`ZRANGE … 'LIMIT'`)
    /// are no refusals.
    fn strings(code: &str) -> Vec<&str> {
        let mut found = Vec::new();
        let mut at = 0;
        while let Some(start) = code[at..].find(['\'', '"']).map(|i| at + i) {
            let quote = code.as_bytes()[start] as char;
            let Some(end) = code[start + 1..].find(quote).map(|i| start + 1 + i) else {
                break;
            };
            if !in_redis_call(&code[..start]) {
                found.push(&code[start + 1..end]);
            }
            at = end + 1;
        }
        found
    }

    /// Whether `before` ends inside the arguments of a `redis.call(`.
    fn in_redis_call(before: &str) -> bool {
        before.rfind("redis.call(").is_some_and(|call| {
            let args = &before[call..];
            args.matches('(').count() > args.matches(')').count()
        })
    }

    fn is_name_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_' || c == '.'
    }

    /// `WAITROOM_WRITE_PRELUDE=1 cargo test --lib prelude` writes it anew.
    #[test]
    fn lua_prelude_lua_is_the_generated_prelude() {
        kept_as_written("lua/prelude.lua", &room_prelude(), "WAITROOM_WRITE_PRELUDE");
    }

    #[test]
    fn the_prelude_defines_each_constant_once_with_a_value_lua_reads_as_written() {
        let constants = constants();
        for (i, (name, value)) in constants.iter().enumerate() {
            assert!(
                constants[..i].iter().all(|(other, _)| other != name),
                "{name} is defined twice"
            );
            if let Literal::Text(text) = value {
                assert!(
                    !text.contains(['\'', '"', '\\', '\n']),
                    "{name} needs no escaping"
                );
            }
        }
        assert!(prelude().contains("local NOROOM = 'NOROOM'\n"));
        assert!(prelude().contains("local RATE_WINDOW_MS = 60000\n"));
    }

    #[test]
    fn every_refusal_a_script_answers_is_a_code_script_error_knows() {
        let mut refusals = 0;
        for (file, code) in lua_files() {
            for (at, _) in code.match_indices("redis.error_reply(") {
                let argument = &code[at + "redis.error_reply(".len()..];
                let name: String = argument.chars().take_while(|c| is_name_char(*c)).collect();
                // A refusal named by a variable takes one of the codes
                // (`refusal = POWREQUIRED`): the literals are checked below.
                if ["refusal", "err"].contains(&name.as_str()) {
                    continue;
                }
                assert!(
                    CODES.contains(&name.as_str()),
                    "{file}: redis.error_reply({argument:.40}…) names no code of ScriptError"
                );
                refusals += 1;
            }
        }
        assert!(refusals > 20, "the refusals are found ({refusals})");
    }

    /// A word a script compares is a constant of the prelude, so that a
    /// word the Rust side changes, or a script misspells, fails here rather
    /// than comparing false. Left as literals: the empty string, the flags
    /// '0' and '1', and Lua's type names.
    #[test]
    fn every_word_a_script_compares_comes_from_the_prelude() {
        let plain = ["", "0", "1", "table", "string", "number", "nil"];
        let mut compared = 0;
        for (file, code) in lua_files() {
            for operator in ["==", "~="] {
                for (at, _) in code.match_indices(operator) {
                    let after = code[at + 2..].trim_start();
                    let before = code[..at].trim_end();
                    let quoted_after = after
                        .strip_prefix(['\'', '"'])
                        .and_then(|rest| rest.split_once(['\'', '"']))
                        .map(|(word, _)| word);
                    let quoted_before = before
                        .strip_suffix(['\'', '"'])
                        .and_then(|rest| rest.rsplit_once(['\'', '"']))
                        .map(|(_, word)| word);
                    for word in quoted_after.into_iter().chain(quoted_before) {
                        compared += 1;
                        assert!(
                            plain.contains(&word),
                            "{file} compares with '{word}': name it in the prelude \
                             (src/store/redis/prelude.rs) and compare with the name"
                        );
                    }
                }
            }
        }
        assert!(compared > 30, "the comparisons are found ({compared})");
    }

    /// A place's state is named (`STATE.waiting`), never written as its
    /// letter, so that the letters live in `replies::STATES` alone.
    #[test]
    fn no_script_writes_a_state_as_its_letter() {
        for (file, code) in lua_files() {
            let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            assert!(
                !compact.contains("state='") && !compact.contains("state=\""),
                "{file} writes a state as a letter: use STATE.<name>"
            );
        }
    }

    #[test]
    fn no_script_repeats_a_value_the_prelude_defines() {
        for (file, code) in lua_files() {
            let literals = strings(&code);
            for (name, value) in constants() {
                match value {
                    Literal::Text(text) => {
                        for literal in &literals {
                            assert!(
                                *literal != text && !literal.starts_with(&format!("{text} ")),
                                "{file} writes '{literal}': use {name}"
                            );
                        }
                    }
                    // Small numbers (a format's 1) are too common to tell
                    // apart; ms in a second (`* 1000`, `/ 1000`) is no chunk.
                    Literal::Number(number) if number >= 100 => {
                        let number = number.to_string();
                        for (at, _) in code.match_indices(&number) {
                            let before = code[..at].trim_end();
                            let after = &code[at + number.len()..];
                            let whole =
                                !before.ends_with(is_name_char) && !after.starts_with(is_name_char);
                            let conversion = before.ends_with(['*', '/']);
                            assert!(!whole || conversion, "{file} writes {number}: use {name}");
                        }
                    }
                    Literal::Number(_) => {}
                }
            }
        }
    }
}
