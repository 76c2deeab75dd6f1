//! For tests: a file the repository keeps that is written from the code
//! (`lua/prelude.lua`, `static/refusals.js`) must be what the code writes
//! now; with its variable set, the test writes it anew instead.

use std::path::Path;

/// Fails unless the file at `relative` (to the crate) holds `text`; with
/// `variable` set in the environment, writes `text` there first.
pub fn kept_as_written(relative: &str, text: &str, variable: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os(variable).is_some() {
        std::fs::write(&path, text).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap_or_default(),
        text,
        "{relative} is stale: {variable}=1 cargo test --lib"
    );
}
