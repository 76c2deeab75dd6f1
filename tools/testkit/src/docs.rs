//! The configs and snippets the docs print, read by the tests that run
//! them, so that the docs and the tests cannot drift apart.

/// The first ```` ```lang ```` block of `path` (from the repository's root)
/// after `heading`, exactly as printed there.
pub fn doc_block(path: &str, heading: &str, lang: &str) -> String {
    let file = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{path}: {e}"));
    let section = doc
        .split_once(heading)
        .unwrap_or_else(|| panic!("{path} has its section {heading:?}"))
        .1;
    let fence = format!("```{lang}\n");
    section
        .split_once(&fence)
        .unwrap_or_else(|| panic!("{path}'s {heading:?} has a {lang} block"))
        .1
        .split_once("```")
        .unwrap_or_else(|| panic!("{path}'s {heading:?} block ends"))
        .0
        .to_string()
}

/// `text` with `from` replaced, which must be in it: a printed config that
/// no longer has what a test adapts fails the test rather than run unadapted.
pub fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the printed config no longer has {from:?}:\n{text}"
    );
    text.replace(from, to)
}
