//! No function in the load tool runs over [`LONGEST`] lines: a mode's run
//! is a few named steps (set up, run, measure, report), each a function
//! whose name says what it does, not one long body.
//!
//! Every `.rs` file under `tools/load/src` is parsed with `syn`; a
//! function's length is from its `fn` keyword to its closing brace
//! (attributes and doc comments not counted), for free functions, methods
//! and functions nested in other items (test modules included).

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The most lines one function may take.
const LONGEST: usize = 100;

/// Every `.rs` file under `dir`, in order.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// One function: where it is, its name and its length in lines.
struct Length {
    place: String,
    name: String,
    lines: usize,
}

struct Functions<'a> {
    file: &'a str,
    found: Vec<Length>,
}

impl Functions<'_> {
    fn note(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, block: &syn::Block) {
        let first = fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        self.found.push(Length {
            place: format!("{}:{first}", self.file),
            name: name.to_string(),
            lines: last + 1 - first,
        });
    }
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.note(&item.sig.ident, &item.sig.fn_token, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.note(&item.sig.ident, &item.sig.fn_token, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default {
            self.note(&item.sig.ident, &item.sig.fn_token, block);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// Every function of the tool, longest first.
fn lengths() -> Vec<Length> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for path in sources(&root.join("tools/load/src")) {
        let source = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let shown = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let mut functions = Functions {
            file: &shown,
            found: Vec::new(),
        };
        functions.visit_file(&file);
        all.extend(functions.found);
    }
    all.sort_by(|a, b| b.lines.cmp(&a.lines).then_with(|| a.place.cmp(&b.place)));
    all
}

#[test]
fn no_function_runs_over_a_hundred_lines() {
    let all = lengths();
    assert!(all.len() > 50, "found only {} functions", all.len());
    let longest = &all[0];
    println!(
        "longest function: {} at {}, {} lines",
        longest.name, longest.place, longest.lines
    );
    let too_long: Vec<String> = all
        .iter()
        .filter(|f| f.lines > LONGEST)
        .map(|f| format!("{} at {}: {} lines", f.name, f.place, f.lines))
        .collect();
    assert!(
        too_long.is_empty(),
        "functions over {LONGEST} lines (split them into named steps):\n{}",
        too_long.join("\n")
    );
}
