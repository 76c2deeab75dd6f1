//! A room's config as the Redis store keeps it: one JSON value, the
//! `config` field of the room's record, holding the config's own fields
//! (its write-only key among them; the record never leaves the store) and
//! what only the scripts need, derived here from the config: the opening
//! and the closing in ms, and the bypass networks as `join.lua` matches
//! them. The scripts read the fields they need from it (`read_config` in
//! `lua/lib.lua`).
//!
//! Rooms written by the releases before keep their config in a field of
//! the record each; a node migrates those at start ([`migrate`]).

use std::collections::HashMap;
use std::net::IpAddr;

use redis::AsyncCommands;
use serde_json::Value;

use super::connection::{Link, unavailable};
use super::keys::{ROOM, ROOMS_KEY, room_key};
use crate::store::StoreError;
use crate::words::clock::Moment;
use crate::words::language::Language;
use crate::words::networks::Networks;
use crate::words::page::PageBranding;
use crate::words::schedule::Schedule;
use crate::words::{QueueMethod, RoomConfig, Secret};

/// The field of a room's record that holds its config.
pub(super) const CONFIG_FIELD: &str = "config";

/// The config as the store keeps it (see the module's comment): its
/// schedule apart ([`plan`]), and whether an entry of it sets an opening.
pub(super) fn stored(config: &RoomConfig) -> String {
    let mut fields = config.as_value();
    fields.remove("schedule");
    fields.insert(
        "schedule_opens".into(),
        config.schedule.sets_opening().into(),
    );
    fields.insert("opens_at_ms".into(), config.opens_at.map(|at| at.0).into());
    fields.insert(
        "closes_at_ms".into(),
        config.closes_at.map(|at| at.0).into(),
    );
    fields.insert(
        "bypass_match".into(),
        bypass_match(&config.bypass_networks).into(),
    );
    Value::Object(fields).to_string()
}

/// The config a room's record holds, if it is one, with its schedule as
/// `room_info.lua` read it (none without).
pub(super) fn read(record: &HashMap<String, String>, schedule: Option<&str>) -> Option<RoomConfig> {
    let mut config: RoomConfig = serde_json::from_str(record.get(CONFIG_FIELD)?).ok()?;
    if let Some(schedule) = schedule {
        config.schedule = Schedule::from_stored(schedule)?;
    }
    Some(config)
}

/// The schedule's arguments of the scripts that write a config
/// (`write_schedule` in lua/lib.lua): the schedule, when its next entry
/// falls due, and whether an operator's pause holds it (`None`: as it was).
pub(super) fn plan(config: &RoomConfig, held: Option<bool>) -> [String; 3] {
    [
        if config.schedule.is_empty() {
            String::new()
        } else {
            config.schedule.stored()
        },
        config
            .schedule
            .next_at()
            .map(|at| at.to_string())
            .unwrap_or_default(),
        held.map(|held| if held { "1" } else { "0" }.to_string())
            .unwrap_or_default(),
    ]
}

/// The networks as `join.lua` matches them: `<family>:<hex>/<bits>` of
/// each network's first address, space-separated (Lua has no address type;
/// comparing hex digits and the bits of one more is all a match takes).
fn bypass_match(networks: &Networks) -> String {
    networks
        .iter()
        .map(|net| format!("{}/{}", address_form(net.network()), net.prefix_len()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An address as `join.lua` reads it: `4:` and 8 hex digits, or `6:` and
/// 32 (an IPv4-mapped IPv6 address as its IPv4 address).
pub(super) fn address_form(address: IpAddr) -> String {
    match address.to_canonical() {
        IpAddr::V4(v4) => format!("4:{:08x}", u32::from(v4)),
        IpAddr::V6(v6) => format!("6:{:032x}", u128::from(v6)),
    }
}

/// Gives every room whose record has no `config` yet (written by a release
/// before) its config, read from the fields that release wrote; O(rooms),
/// once at a node's start. `HSETNX`: nodes starting together write it once,
/// and never over a config written since. A room an older node writes
/// while the rolling restart is under way is migrated by the next node to
/// start (docs/src/upgrading.md).
pub(super) async fn migrate(link: &Link) -> Result<usize, StoreError> {
    let mut connection = link.connection().await;
    let ids: Vec<String> = connection.smembers(ROOMS_KEY).await.map_err(unavailable)?;
    let mut migrated = 0;
    for id in ids {
        let Some(room) = crate::words::RoomId::parse(&id) else {
            continue;
        };
        let key = &room_key(&room, ROOM);
        let record: HashMap<String, String> = connection.hgetall(key).await.map_err(unavailable)?;
        if record.is_empty() || record.contains_key(CONFIG_FIELD) {
            continue;
        }
        let Some(config) = legacy(&record) else {
            tracing::warn!(%room, "a room's config of a release before could not be read");
            continue;
        };
        let written: bool = connection
            .hset_nx(key, CONFIG_FIELD, stored(&config))
            .await
            .map_err(unavailable)?;
        migrated += usize::from(written);
    }
    if migrated > 0 {
        tracing::info!(migrated, "rooms' configs moved into one value");
    }
    Ok(migrated)
}

/// A config as the releases before wrote it, a field of the record each.
fn legacy(record: &HashMap<String, String>) -> Option<RoomConfig> {
    let field = |name: &str| record.get(name).cloned();
    let parse = |name: &str| field(name)?.parse::<u64>().ok();
    Some(RoomConfig {
        name: field("name")?,
        target_url: field("target_url")?,
        admit_per_tick: u32::try_from(parse("admit_per_tick")?).ok()?,
        tick_ms: parse("tick_ms")?,
        max_active: field("max_active")?.parse().ok(),
        pass_ttl_s: parse("pass_ttl_s")?,
        abandon_after_s: parse("abandon_after_s")?,
        paused: field("paused")? == "1",
        arrival_grace_s: field("arrival_grace_s").and_then(|g| g.parse().ok()),
        session_idle_s: None,
        user_key: field("user_key").filter(|k| !k.is_empty()).map(Secret::new),
        user_required: field("user_required").as_deref() == Some("1"),
        code_required: field("code_required").as_deref() == Some("1"),
        pow_difficulty: field("pow_difficulty")
            .and_then(|d| d.parse().ok())
            .unwrap_or(0),
        notice: field("notice").filter(|n| !n.is_empty()),
        queue_method: field("queue_method")
            .and_then(|m| QueueMethod::parse(&m))
            .unwrap_or_default(),
        closes_at: field("closes_at")
            .and_then(|at| at.parse().ok())
            .map(Moment),
        opens_at: field("opens_at").and_then(|at| at.parse().ok()).map(Moment),
        close_when_sold_out: field("close_when_sold_out").as_deref() != Some("0"),
        bypass_networks: field("bypass_networks")
            .and_then(|list| serde_json::from_str(&list).ok())
            .unwrap_or_default(),
        language: field("language")
            .and_then(|tag| Language::from_tag(&tag))
            .unwrap_or_default(),
        page: match field("page").filter(|page| !page.is_empty()) {
            Some(json) => serde_json::from_str(&json).ok()?,
            None => PageBranding::default(),
        },
        schedule: Default::default(),
        autotune: None,
        ..RoomConfig::new("", "")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_config_reads_back_whole_with_what_the_scripts_need() {
        let mut config = RoomConfig::new("Drop", "/buy");
        config.user_key = Some(Secret::new("k".repeat(32)));
        config.opens_at = Some(Moment(1_800_000_000_000));
        config.bypass_networks = Networks::parse(&["10.0.0.0/8"]).unwrap();
        let json = stored(&config);
        let value: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["opens_at_ms"], 1_800_000_000_000u64);
        assert_eq!(value["closes_at_ms"], Value::Null);
        assert_eq!(value["bypass_match"], "4:0a000000/8");
        let record = HashMap::from([(CONFIG_FIELD.to_string(), json)]);
        assert_eq!(read(&record, None), Some(config));
    }

    #[test]
    fn a_record_of_the_release_before_reads_as_its_config() {
        let record: HashMap<String, String> = [
            ("name", "Drop"),
            ("target_url", "/buy"),
            ("admit_per_tick", "7"),
            ("tick_ms", "2000"),
            ("max_active", ""),
            ("pass_ttl_s", "600"),
            ("abandon_after_s", "300"),
            ("paused", "1"),
            ("queue_method", "random"),
            ("opens_at", "1800000000000"),
            ("bypass_networks", "[\"10.0.0.0/8\"]"),
            ("page", "{\"title\":\"T\"}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let config = legacy(&record).unwrap();
        assert_eq!(config.admit_per_tick, 7);
        assert_eq!(config.max_active, None);
        assert!(config.paused);
        assert_eq!(config.queue_method, QueueMethod::Random);
        assert_eq!(config.opens_at, Some(Moment(1_800_000_000_000)));
        assert_eq!(config.page.title.as_deref(), Some("T"));
        assert!(config.close_when_sold_out);
    }
}
