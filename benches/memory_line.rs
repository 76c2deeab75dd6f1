//! Resident memory of the embedded store with 1,000,000 visitors waiting
//! (target: at most 200 MB for the whole process).
//!
//! `cargo bench --bench memory_line` joins a million visitors to one room
//! through the store itself and reads the process's resident set from
//! /proc/self/statm before and after.

use std::sync::Arc;
use std::time::Instant;

use waitroom::store::StoreExt;
use waitroom::store::memory::MemoryStore;
use waitroom::words::clock::ManualClock;
use waitroom::words::{RoomConfig, RoomId, VisitorId};

const WAITING: u64 = 1_000_000;

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` only checks that this builds.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let clock = ManualClock::new(1_767_225_600_000);
    let store = MemoryStore::new(Arc::new(clock.clone()));
    let room = RoomId::parse("million").unwrap();
    let mut config = RoomConfig::new("Million", "/x");
    config.paused = true;
    store.create_room(room.clone(), config).await.unwrap();

    let before = resident_bytes();
    let started = Instant::now();
    for i in 0..WAITING {
        if i % 1_000 == 0 {
            clock.advance_ms(1); // arrivals spread over time, as in life
        }
        store.join(&room, VisitorId::random()).await.unwrap();
    }
    let elapsed = started.elapsed();
    let after = resident_bytes();
    let stats = store.room(&room).await.unwrap().stats;
    assert_eq!(stats.waiting, WAITING);
    println!(
        "memory store, {WAITING} waiting: process resident {:.1} MB (before the line {:.1} MB; {:.0} bytes per waiting visitor); \
         {:.0} joins/s through the store on one core",
        after as f64 / 1e6,
        before as f64 / 1e6,
        (after - before) as f64 / WAITING as f64,
        WAITING as f64 / elapsed.as_secs_f64()
    );
}
