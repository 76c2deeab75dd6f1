//! Several tool processes run together (`--barrier-dir`): each marks
//! itself ready in the shared directory and waits for the others, and at
//! the end writes its deliveries there so that each reports the latency
//! over all of them.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::common::{Latency, say};
use crate::error::LoadError;
use crate::floor;

use super::floor_phase::compare_line;

/// The longest a process waits at `--barrier-dir` for the others.
pub(super) const BARRIER_LIMIT: Duration = Duration::from_secs(300);

/// The figures over every process that met at one barrier.
#[derive(Debug, Serialize)]
pub(super) struct Combined {
    pub(super) processes: usize,
    pub(super) tick_latency: Option<Latency>,
    pub(super) floor_tick_latency: Option<Latency>,
    pub(super) ratio: Option<floor::Ratios>,
}

/// Writes this process's deliveries of both phases into the barrier's
/// directory, waits for the other processes to do the same, and reports
/// the latency over all of them.
pub(super) async fn combine(
    dir: &Path,
    parties: u32,
    floor_us: &[u64],
    real_us: &[u64],
    json: bool,
) -> Option<Combined> {
    let pid = std::process::id();
    for (phase, delays) in [("floor", floor_us), ("real", real_us)] {
        let path = dir.join(format!("delays-{phase}-{pid}"));
        if let Err(error) = std::fs::write(&path, encode_delays(delays)) {
            say(json, format!("warning: {}: {error}", path.display()));
            return None;
        }
    }
    if let Err(error) = meet(&dir.join("done"), parties).await {
        say(json, format!("warning: barrier: {error}"));
    }
    let read = |phase: &str| -> (usize, Vec<u64>) {
        let prefix = format!("delays-{phase}-");
        let mut files = 0;
        let mut all = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix)
                && let Ok(bytes) = std::fs::read(entry.path())
            {
                files += 1;
                all.extend(decode_delays(&bytes));
            }
        }
        (files, all)
    };
    let (processes, real) = read("real");
    let (_, floor) = read("floor");
    let tick_latency = Latency::from_micros(real);
    let floor_tick_latency = Latency::from_micros(floor);
    let ratio = floor::ratios(tick_latency.as_ref()?, floor_tick_latency.as_ref()?);
    let label = format!("all {processes} processes: ");
    say(
        json,
        compare_line(
            &label,
            tick_latency.as_ref()?,
            floor_tick_latency.as_ref()?,
            ratio,
        ),
    );
    Some(Combined {
        processes,
        tick_latency,
        floor_tick_latency,
        ratio,
    })
}

/// Delays as little-endian u32 microseconds (at most about 71 minutes).
pub(super) fn encode_delays(delays: &[u64]) -> Vec<u8> {
    delays
        .iter()
        .flat_map(|&d| (d.min(u32::MAX as u64) as u32).to_le_bytes())
        .collect()
}

pub(super) fn decode_delays(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64)
}

/// Marks this process ready in `dir` and waits until `parties` processes
/// are (or `BARRIER_LIMIT` passes); returns how many were ready.
pub(super) async fn meet(dir: &std::path::Path, parties: u32) -> Result<u32, LoadError> {
    std::fs::create_dir_all(dir).map_err(LoadError::io(dir.display().to_string()))?;
    let mark = dir.join(format!("ready-{}", std::process::id()));
    std::fs::write(&mark, b"").map_err(LoadError::io(mark.display().to_string()))?;
    let deadline = Instant::now() + BARRIER_LIMIT;
    loop {
        let ready = std::fs::read_dir(dir)
            .map_err(LoadError::io(dir.display().to_string()))?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("ready-"))
            .count() as u32;
        if ready >= parties {
            return Ok(ready);
        }
        if Instant::now() >= deadline {
            return Err(LoadError::Setup(format!(
                "only {ready} of {parties} processes ready after {} s; holding anyway",
                BARRIER_LIMIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_survive_the_file_between_processes() {
        let delays = [0, 1, 250_000, u32::MAX as u64, u32::MAX as u64 + 5];
        let back: Vec<u64> = decode_delays(&encode_delays(&delays)).collect();
        assert_eq!(back, [0, 1, 250_000, u32::MAX as u64, u32::MAX as u64]);
    }
}
