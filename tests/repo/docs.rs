//! The docs hold together without the `mdbook` binary: every chapter under
//! `docs/src` is in `SUMMARY.md` and every entry there exists; every relative
//! link in the README, BENCHMARKS.md and the book reaches a file, and an
//! `#anchor` a heading of it (by the slug GitHub and mdBook both give it);
//! the README stays short enough to read in one sitting.
//!
//! Markdown is read with `pulldown-cmark` (the parser mdBook itself uses),
//! so links in code blocks and code spans are not mistaken for links. The
//! slug rule is written here by hand: neither crate exports it.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

/// The README's length the issue allows (issue 28, item 7).
const README_MAX_LINES: usize = 250;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn book_src() -> PathBuf {
    root().join("docs/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH
}

/// Every `.md` file under `dir`, at any depth.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Every link and image destination in `text`, with the line it is on.
fn links(text: &str) -> Vec<(usize, String)> {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    Parser::new_ext(text, options())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            })
            | Event::Start(Tag::Image {
                link_type,
                dest_url,
                ..
            }) if !matches!(link_type, LinkType::Email) => {
                Some((line_of(range.start), dest_url.to_string()))
            }
            _ => None,
        })
        .collect()
}

/// The anchors of `text`'s headings, as GitHub and mdBook make them: the
/// heading's text (code spans included, markup left out) in lower case,
/// letters, digits, `-` and `_` kept, each space a `-`, everything else
/// dropped; a repeated slug gets `-1`, `-2`… in order.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(part) | Event::Code(part) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&part);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let slug = slug(&heading.take().unwrap_or_default());
                let count = seen.entry(slug.clone()).or_insert(0);
                anchors.insert(match *count {
                    0 => slug,
                    n => format!("{slug}-{n}"),
                });
                *count += 1;
            }
            _ => {}
        }
    }
    anchors
}

fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}

/// `path` with `.` and `..` taken out, without asking the file system (a
/// link to a missing file must still read as that file's path).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with the link `dest` written in `from`, if anything.
fn broken(from: &Path, dest: &str) -> Option<String> {
    let external = dest.contains("://") || dest.starts_with("mailto:");
    if external || dest.is_empty() {
        return None;
    }
    let (file, anchor) = match dest.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (dest, None),
    };
    let target = if file.is_empty() {
        from.to_path_buf()
    } else if let Some(from_root) = file.strip_prefix('/') {
        root().join(from_root)
    } else {
        normalise(&from.parent().expect("a file has a directory").join(file))
    };
    if !target.exists() {
        return Some(format!("{} does not exist", target.display()));
    }
    let anchor = anchor?;
    if target.extension().is_none_or(|ext| ext != "md") {
        return Some(format!(
            "#{anchor} points into {}, which has no headings",
            target.display()
        ));
    }
    let known = anchors(&read(&target));
    (!known.contains(anchor)).then(|| {
        format!(
            "{} has no heading #{anchor} (its anchors: {})",
            target.display(),
            known.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

/// Every broken relative link in `files`, one line each.
fn broken_links(files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for file in files {
        for (line, dest) in links(&read(file)) {
            if let Some(why) = broken(file, &dest) {
                let shown = file.strip_prefix(root()).unwrap_or(file).display();
                problems.push(format!("{shown}:{line}: ({dest}): {why}"));
            }
        }
    }
    problems
}

fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("BENCHMARKS.md")];
    files.extend(markdown_files(&book_src()));
    files
}

#[test]
fn every_relative_link_reaches_its_file_and_heading() {
    let problems = broken_links(&documents());
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn summary_lists_every_chapter_and_every_entry_exists() {
    let src = book_src();
    let summary = src.join("SUMMARY.md");
    let listed: BTreeSet<PathBuf> = links(&read(&summary))
        .into_iter()
        .filter(|(_, dest)| !dest.is_empty())
        .map(|(_, dest)| normalise(&src.join(dest.split('#').next().unwrap_or_default())))
        .collect();
    let missing: Vec<_> = listed.iter().filter(|path| !path.is_file()).collect();
    assert!(
        missing.is_empty(),
        "SUMMARY.md lists files that do not exist: {missing:?}"
    );
    let unlisted: Vec<_> = markdown_files(&src)
        .into_iter()
        .filter(|path| *path != summary && !listed.contains(path))
        .collect();
    assert!(
        unlisted.is_empty(),
        "chapters under docs/src that SUMMARY.md does not list: {unlisted:?}"
    );
}

#[test]
fn the_readme_is_read_in_one_sitting() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; at most {README_MAX_LINES} (move the rest into docs/src)"
    );
}

/// The run and test commands, as the README has always given them (CI and
/// other docs quote them).
const README_COMMANDS: [&str; 2] = [
    "cargo run --release -- --demo-room     # then open http://127.0.0.1:8080/rooms/demo",
    "./scripts/test                         # every test; installs Chromium and Redis if missing",
];

#[test]
fn the_readme_opens_with_the_two_commands() {
    let readme = read(&root().join("README.md"));
    let first_block: Vec<&str> = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has a sh block")
        .lines()
        .collect();
    assert_eq!(first_block, README_COMMANDS, "README.md's first sh block");
}

#[test]
fn slugs_follow_github_and_mdbook() {
    let text = "# Issue 12: proof of work\n## What `--redis-wait-replicas 1` costs\n\
                ## A pass's life\n## Notes\n## Notes\n```\n# not a heading\n```\n";
    let expected = [
        "issue-12-proof-of-work",
        "what---redis-wait-replicas-1-costs",
        "a-passs-life",
        "notes",
        "notes-1",
    ];
    assert_eq!(
        anchors(text),
        expected
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
    );
}

#[test]
fn a_broken_link_and_a_missing_anchor_are_found() {
    let dir = std::env::temp_dir().join(format!("waitroom-docs-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.md");
    std::fs::write(
        &page,
        "# Page\n\n## Here\n\n[ok](#here) [ok](page.md#page) [gone](missing.md) \
         [no such heading](#there) `[in code](missing.md)`\n\n```\n[fenced](missing.md)\n```\n",
    )
    .unwrap();
    let problems = broken_links(std::slice::from_ref(&page));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains("(missing.md)"), "{problems:#?}");
    assert!(problems[1].contains("no heading #there"), "{problems:#?}");
}
