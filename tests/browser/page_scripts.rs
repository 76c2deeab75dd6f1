//! The pages' scripts' own logic, tested in Node (`node --test` over
//! `tests/js/`): what needs no DOM and takes the time as an argument
//! (static/room-state.js: the pacing of aria-live announcements, so a
//! screen reader hears a position politely, not on every tick;
//! static/admin-state.js: where a schedule's entries stand, whether a pause
//! holds it, the node's clock against the browser's), and how the
//! client module (static/waitroom-client.js) opens its socket, with fetch
//! and WebSocket stood in for.
//!
//! Needs Node (Debian's `nodejs`, which ./scripts/test installs); without
//! it this test fails and says so.

use std::path::Path;
use std::process::Command;

#[test]
fn the_page_scripts_pass_their_node_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("node")
        .arg("--test")
        .arg(root.join("tests/js/room-state.test.mjs"))
        .arg(root.join("tests/js/admin-state.test.mjs"))
        .arg(root.join("tests/js/waitroom-client.test.mjs"))
        .current_dir(root)
        .output()
        .unwrap_or_else(|error| panic!("node did not run ({error}): ./scripts/test installs it"));
    assert!(
        output.status.success(),
        "node --test failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
