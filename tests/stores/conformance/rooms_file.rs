//! Rooms from a file (`--rooms`): a table applied once, on every store.
//! The tables are read by the node's own reader of the file.

use std::path::Path;

use futures_util::future::join_all;
use waitroom::startup::rooms_file::RoomsFile;
use waitroom::store::StoreError;
use waitroom::words::PlaceState;
use waitroom::words::clock::{Clock, rfc3339};
use waitroom::words::room_table::{Applied, RoomTable};

use super::Harness;
use waitroom::store::StoreExt;

/// Applies made at once in the concurrency scenario.
const AT_ONCE: usize = 32;

/// The one `[[room]]` table of `toml`, as the node reads it.
fn table(toml: &str) -> RoomTable {
    let file = RoomsFile::parse(Path::new("rooms.toml"), toml)
        .unwrap_or_else(|error| panic!("{error}\n{toml}"));
    file.rooms().next().expect("one table").clone()
}

/// A table of room `drop` with `more` lines after the required ones.
fn drop_table(more: &str) -> RoomTable {
    table(&format!(
        "[[room]]\nid = \"drop\"\nname = \"Drop\"\ntarget_url = \"https://shop.example/buy\"\n{more}"
    ))
}

async fn apply(h: &Harness, table: &RoomTable) -> Applied {
    h.store.apply_table(table).await.unwrap()
}

pub async fn a_table_creates_its_room_and_then_changes_nothing(h: &Harness) {
    let first = drop_table("admit_per_tick = 3\nmax_active = 50\npaused = false\n");
    assert_eq!(apply(h, &first).await, Applied::Created);
    let config = h.store.room(&first.id).await.unwrap().config;
    assert_eq!(
        (
            config.name.as_str(),
            config.admit_per_tick,
            config.max_active
        ),
        ("Drop", 3, Some(50))
    );
    assert_eq!(config.tick_ms, 5_000, "a field not named has its default");
    assert_eq!(apply(h, &first).await, Applied::Unchanged);
    assert!(
        matches!(h.join(&first.id).await.1, PlaceState::Admitted { .. }),
        "the room made from the file admits like any other"
    );
}

pub async fn an_unchanged_table_leaves_a_live_change_alone(h: &Harness) {
    let opens_at = rfc3339(h.clock.now_ms() + 60_000);
    let table = drop_table(&format!("paused = false\nopens_at = {opens_at}\n"));
    assert_eq!(apply(h, &table).await, Applied::Created);
    // The operator's emergency stop, then a restart with the same file,
    // after the opening the file set has passed.
    h.patch(&table.id, r#"{"paused": true}"#).await;
    h.clock.advance_ms(120_000);
    assert_eq!(apply(h, &table).await, Applied::Unchanged);
    assert!(h.store.room(&table.id).await.unwrap().config.paused);

    // An edited table is applied, the fields it names winning (paused
    // included); its opening, equal to the room's, is no error although
    // it has passed.
    let edited = drop_table(&format!(
        "paused = false\nopens_at = {opens_at}\nadmit_per_tick = 4\n"
    ));
    assert_eq!(apply(h, &edited).await, Applied::Changed);
    let config = h.store.room(&table.id).await.unwrap().config;
    assert_eq!((config.paused, config.admit_per_tick), (false, 4));
}

pub async fn a_changed_table_applies_only_the_fields_it_names(h: &Harness) {
    let first = drop_table("admit_per_tick = 5\n[room.page]\nheadline = \"Drop\"\n");
    assert_eq!(apply(h, &first).await, Applied::Created);
    h.patch(
        &first.id,
        r#"{"paused": true, "max_active": 7, "notice": "Back soon", "page": {"footer": "Live"}}"#,
    )
    .await;
    let second = table(
        "[[room]]\nid = \"drop\"\nname = \"Drop, second wave\"\n\
         target_url = \"https://shop.example/wave-2\"\nadmit_per_tick = 8\n\
         [room.page]\nheadline = \"Second wave\"\n",
    );
    assert_eq!(apply(h, &second).await, Applied::Changed);
    let config = h.store.room(&first.id).await.unwrap().config;
    assert_eq!(
        (
            config.name.as_str(),
            config.target_url.as_str(),
            config.admit_per_tick
        ),
        ("Drop, second wave", "https://shop.example/wave-2", 8)
    );
    assert_eq!(
        (config.paused, config.max_active, config.notice.as_deref()),
        (true, Some(7), Some("Back soon")),
        "what the table does not name stays as the operator left it"
    );
    assert_eq!(
        (
            config.page.headline.as_deref(),
            config.page.footer.as_deref()
        ),
        (Some("Second wave"), Some("Live")),
        "so too within the page: the table's headline, the operator's footer"
    );

    // A room the admin API made has no table yet: the file's is applied.
    let made = h.room("made-live", 2, Some(3)).await;
    h.patch(&made, r#"{"paused": true}"#).await;
    let declared = table(
        "[[room]]\nid = \"made-live\"\nname = \"Made live\"\ntarget_url = \"/x\"\nadmit_per_tick = 9\n",
    );
    assert_eq!(apply(h, &declared).await, Applied::Changed);
    let config = h.store.room(&made).await.unwrap().config;
    assert_eq!(
        (config.admit_per_tick, config.max_active, config.paused),
        (9, Some(3), true)
    );
}

/// What many applies of `table` made at once said, counted.
async fn at_once(h: &Harness, table: &RoomTable) -> (usize, usize, usize) {
    let outcomes = join_all((0..AT_ONCE).map(|_| h.store.apply_table(table))).await;
    let count = |wanted: Applied| {
        outcomes
            .iter()
            .filter(|outcome| *outcome.as_ref().unwrap() == wanted)
            .count()
    };
    (
        count(Applied::Created),
        count(Applied::Changed),
        count(Applied::Unchanged),
    )
}

pub async fn applies_made_at_once_apply_once(h: &Harness) {
    let first = drop_table("admit_per_tick = 5\n");
    assert_eq!(
        at_once(h, &first).await,
        (1, 0, AT_ONCE - 1),
        "created once, the others found it applied"
    );
    // A live change, then a changed table applied by many at once.
    h.patch(&first.id, r#"{"admit_per_tick": 6, "paused": true}"#)
        .await;
    let second = drop_table("admit_per_tick = 7\npaused = false\n");
    assert_eq!(
        at_once(h, &second).await,
        (0, 1, AT_ONCE - 1),
        "changed once, the others found it applied"
    );
    let config = h.store.room(&first.id).await.unwrap().config;
    assert_eq!((config.admit_per_tick, config.paused), (7, false));
    // Once applied, a live change stays however many apply it again.
    h.patch(&first.id, r#"{"paused": true}"#).await;
    assert_eq!(at_once(h, &second).await, (0, 0, AT_ONCE));
    assert!(h.store.room(&first.id).await.unwrap().config.paused);
}

pub async fn a_room_closed_stays_closed_under_its_unchanged_table(h: &Harness) {
    let first = drop_table("admit_per_tick = 5\n");
    assert_eq!(apply(h, &first).await, Applied::Created);
    h.store.close_room(&first.id).await.unwrap();
    assert_eq!(apply(h, &first).await, Applied::Unchanged);
    assert!(matches!(
        h.store.room(&first.id).await,
        Err(StoreError::RoomNotFound(_))
    ));
    assert!(
        !h.store.room_ids().await.unwrap().contains(&first.id),
        "the closed room is not listed for ticks"
    );
    let edited = drop_table("admit_per_tick = 6\n");
    assert_eq!(
        apply(h, &edited).await,
        Applied::Created,
        "an edited table makes the room again"
    );
    assert_eq!(
        h.store.room(&first.id).await.unwrap().config.admit_per_tick,
        6
    );
    assert!(h.store.room_ids().await.unwrap().contains(&first.id));
}

pub async fn a_table_the_room_cannot_take_changes_nothing(h: &Harness) {
    let opens_at = rfc3339(h.clock.now_ms() + 60_000);
    let first = drop_table(&format!("opens_at = {opens_at}\n"));
    assert_eq!(apply(h, &first).await, Applied::Created);
    h.clock.advance_ms(120_000);
    let later = rfc3339(h.clock.now_ms() + 60_000);
    let moved = drop_table(&format!("opens_at = \"{later}\"\nadmit_per_tick = 4\n"));
    match h.store.apply_table(&moved).await {
        Err(StoreError::InvalidConfig(error)) => {
            assert_eq!(error.field, "opens_at", "{error}")
        }
        other => panic!("an opening moved after it passed is refused: {other:?}"),
    }
    let config = h.store.room(&first.id).await.unwrap().config;
    assert_eq!(
        config.admit_per_tick, 10,
        "nothing of the table was applied"
    );
    assert_eq!(
        apply(h, &first).await,
        Applied::Unchanged,
        "the table applied last is still the first"
    );
}

/// A changed table keeps what its schedule applied: an entry the room
/// applied under the table before is not applied again, nor lost.
pub async fn a_changed_table_keeps_what_its_schedule_applied(h: &Harness) {
    let t0 = h.clock.now_ms();
    let schedule = format!(
        "[[room.schedule]]\nat = {}\nset = {{ notice = \"Presale\" }}\n\n[[room.schedule]]\nat = {}\nset = {{ notice = \"Sale\" }}\n",
        rfc3339(t0 + 10_000),
        rfc3339(t0 + 20_000)
    );
    let first = drop_table(&format!("admit_per_tick = 3\n\n{schedule}"));
    assert_eq!(apply(h, &first).await, Applied::Created);
    h.clock.advance_ms(10_000);
    let room = h.store.room(&first.id).await.unwrap();
    assert_eq!(room.config.notice.as_deref(), Some("Presale"));
    let applied = room.config.schedule.entries()[0].applied_at;
    assert!(applied.is_some());
    // An operator's notice since, then the file changed elsewhere.
    h.store
        .configure(
            &first.id,
            serde_json::from_str(r#"{"notice": "Live"}"#).unwrap(),
        )
        .await
        .unwrap();
    let changed = drop_table(&format!("admit_per_tick = 4\n\n{schedule}"));
    assert_eq!(apply(h, &changed).await, Applied::Changed);
    let room = h.store.room(&first.id).await.unwrap();
    assert_eq!(room.config.admit_per_tick, 4);
    assert_eq!(
        room.config.notice.as_deref(),
        Some("Live"),
        "not applied again"
    );
    assert_eq!(room.config.schedule.entries()[0].applied_at, applied);
    assert_eq!(room.config.schedule.entries()[1].applied_at, None);
}
