//! Placeholder: the load tool is being written.
fn main() {}
