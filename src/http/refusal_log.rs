//! The log lines about refused requests, rate-limited: with a warn line
//! for every 4xx answer and every wrong admin token, a client sending bad
//! requests as fast as it can would write the log as fast as it could.
//! Per kind (the refusal's code), the first line of each window is
//! written, and it says how many lines of its kind were left out since the
//! last one written; the others are only counted.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::words::clock::Millis;

/// At most one line per kind of refusal this often.
pub const WINDOW_MS: Millis = 10_000;

/// Decides which refusal lines are written (see the module's header).
/// Kinds are the codes of our errors, a bounded set, so the map is too
/// (the operator's templates use one of their own per template file, also
/// bounded: `pages::operator_templates`).
#[derive(Default)]
pub struct RefusalLog {
    kinds: Mutex<HashMap<String, Window>>,
}

/// One kind's current window.
struct Window {
    /// When its written line was.
    opened_at: Millis,
    /// Lines of the kind left out since.
    left_out: u64,
}

impl RefusalLog {
    /// Whether to write a line of `kind` at `now`: `Some(left_out)` to
    /// write it, saying how many of its kind were left out since the last
    /// one written; `None` to leave it out (it is counted).
    pub fn admit(&self, kind: &str, now: Millis) -> Option<u64> {
        let mut kinds = self.kinds.lock();
        match kinds.get_mut(kind) {
            Some(window) if now < window.opened_at.saturating_add(WINDOW_MS) => {
                window.left_out += 1;
                None
            }
            Some(window) => {
                let left_out = window.left_out;
                *window = Window {
                    opened_at: now,
                    left_out: 0,
                };
                Some(left_out)
            }
            None => {
                kinds.insert(
                    kind.to_string(),
                    Window {
                        opened_at: now,
                        left_out: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_writes_its_first_line_then_one_a_window_with_the_count_left_out() {
        let log = RefusalLog::default();
        // 1,000 bad requests a second for 25 s.
        let written: Vec<(Millis, u64)> = (0..25_000)
            .filter_map(|ms| log.admit("invalid_json", ms).map(|left_out| (ms, left_out)))
            .collect();
        assert_eq!(written, [(0, 0), (10_000, 9_999), (20_000, 9_999)]);
    }

    #[test]
    fn each_kind_has_its_own_window() {
        let log = RefusalLog::default();
        assert_eq!(log.admit("invalid_json", 0), Some(0));
        assert_eq!(log.admit("invalid_admin_token", 1), Some(0));
        assert_eq!(log.admit("invalid_json", 2), None);
        assert_eq!(log.admit("invalid_admin_token", 3), None);
        assert_eq!(log.admit("not_found", 4), Some(0));
        assert_eq!(log.admit("invalid_json", WINDOW_MS), Some(1));
        assert_eq!(log.admit("invalid_admin_token", WINDOW_MS), None);
        assert_eq!(log.admit("invalid_admin_token", WINDOW_MS + 1), Some(2));
    }

    #[test]
    fn a_quiet_kind_is_written_at_once_and_says_none_were_left_out() {
        let log = RefusalLog::default();
        assert_eq!(log.admit("room_not_found", 0), Some(0));
        assert_eq!(log.admit("room_not_found", 60_000), Some(0));
        assert_eq!(log.admit("room_not_found", 120_000), Some(0));
    }
}
