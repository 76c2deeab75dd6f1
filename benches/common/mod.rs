//! Timing shared by the benches (`mod common;`): the process's CPU time (getrusage), so a figure
//! holds on a machine where other work takes the cores, and one loop that
//! prints wall time per call (mean, p50, p99) beside CPU per call.

use std::time::{Duration, Instant};

/// User + system CPU of the whole process so far.
pub fn process_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given and reads nothing else.
    let usage = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()), 0);
        usage.assume_init()
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Times `call` `count` times; prints wall mean/p50/p99 and CPU per call.
pub fn measure(what: &str, count: usize, mut call: impl FnMut(usize)) {
    let mut each = Vec::with_capacity(count);
    let cpu_before = process_cpu();
    let started = Instant::now();
    for i in 0..count {
        let one = Instant::now();
        call(i);
        each.push(one.elapsed());
    }
    let wall = started.elapsed();
    let cpu = process_cpu() - cpu_before;
    each.sort_unstable();
    println!(
        "{what}: {count} calls in {:.3} s wall, {:.3} s CPU: CPU {:.2} µs per call; \
         wall per call mean {:.2} µs, p50 {:.2} µs, p99 {:.2} µs, max {:.1} µs",
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        micros(cpu) / count as f64,
        micros(wall) / count as f64,
        micros(percentile(&each, 0.50)),
        micros(percentile(&each, 0.99)),
        micros(each[count - 1]),
    );
}
