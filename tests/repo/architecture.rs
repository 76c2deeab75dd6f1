//! The shape of `src/`, checked: dependencies point one way.
//!
//! Every file's references to other modules (`use` items and paths written
//! inline, parsed with `syn`) are resolved to the file that defines them.
//! Two rules hold:
//! - the layers: words, then the stores, then the live sockets, then the
//!   HTTP routes, then start-up; a file never refers to a layer above its own;
//! - no cycle among files, even through others: two files that refer to
//!   each other are one piece of code in two places. A module's references
//!   to its own children (re-exports, their constructors) are its own
//!   business and do not count; references inside attributes (utoipa's
//!   `paths(...)`) do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The layers, lowest first; a module is in the layer of its first name.
const LAYERS: [&str; 5] = ["words", "store", "live", "http", "startup"];

type Module = Vec<String>;

/// Every `.rs` file under `src/` as its module path (`src/live/hub.rs` is
/// `live::hub`, `src/store/mod.rs` is `store`, `lib.rs` the crate).
fn modules() -> BTreeMap<Module, PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .filter(|path| path.file_name().unwrap() != "main.rs")
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().with_extension("");
            let mut module: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            (module, path)
        })
        .collect()
}

/// The paths a file names that start at `crate`, `super` or `self`, each
/// made absolute.
struct References<'a> {
    /// The module the code being visited is in (the file's, then any inline
    /// `mod` inside it).
    within: Module,
    found: &'a mut BTreeSet<Module>,
}

impl References<'_> {
    fn note(&mut self, segments: &[String]) {
        let mut absolute = match segments.first().map(String::as_str) {
            Some("crate") => Module::new(),
            Some("self" | "super") => self.within.clone(),
            _ => return,
        };
        for segment in segments {
            match segment.as_str() {
                "crate" | "self" => {}
                "super" => {
                    absolute.pop();
                }
                name => absolute.push(name.to_owned()),
            }
        }
        self.found.insert(absolute);
    }

    /// Every path (`a::b::c`) in `tokens`, groups included.
    fn note_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let mut path: Vec<String> = Vec::new();
        let mut colons = 0;
        for token in tokens {
            match token {
                proc_macro2::TokenTree::Ident(ident) => {
                    if colons != 2 && !path.is_empty() {
                        self.note(&std::mem::take(&mut path));
                    }
                    path.push(ident.to_string());
                    colons = 0;
                }
                proc_macro2::TokenTree::Punct(punct) if punct.as_char() == ':' => colons += 1,
                other => {
                    if !path.is_empty() {
                        self.note(&std::mem::take(&mut path));
                    }
                    colons = 0;
                    if let proc_macro2::TokenTree::Group(group) = other {
                        self.note_tokens(group.stream());
                    }
                }
            }
        }
        if !path.is_empty() {
            self.note(&path);
        }
    }

    /// A `use` tree's leaves, each with the path that leads to it.
    fn note_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.note_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.note(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.note(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.note(prefix),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.note_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for References<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.note_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(&segments);
        syn::visit::visit_path(self, path);
    }

    /// Paths written inside an attribute's tokens too (utoipa's
    /// `paths(super::visitor::join)`, `params(RoomPath)`), which syn keeps
    /// as tokens: a reference there ties two files as much as a `use`.
    fn visit_attribute(&mut self, attribute: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &attribute.meta {
            self.note_tokens(list.tokens.clone());
        }
        syn::visit::visit_attribute(self, attribute);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.within.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.within.pop();
    }
}

/// Which files each file refers to (not itself, not its own descendants).
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules();
    modules
        .iter()
        .map(|(module, path)| {
            let source = std::fs::read_to_string(path).unwrap();
            let file =
                syn::parse_file(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut found = BTreeSet::new();
            References {
                within: module.clone(),
                found: &mut found,
            }
            .visit_file(&file);
            let targets = found
                .iter()
                .filter_map(|path| {
                    // The longest prefix of the path that is a file.
                    (0..=path.len())
                        .rev()
                        .map(|n| path[..n].to_vec())
                        .find(|prefix| modules.contains_key(prefix))
                })
                .filter(|target| !target.starts_with(module))
                .collect();
            (module.clone(), targets)
        })
        .collect()
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

#[test]
fn no_file_refers_to_a_layer_above_its_own() {
    let layer = |module: &Module| {
        module
            .first()
            .and_then(|first| LAYERS.iter().position(|layer| layer == first))
    };
    let mut upward = Vec::new();
    for (module, targets) in graph() {
        let Some(own) = layer(&module) else { continue };
        for target in targets {
            if let Some(theirs) = layer(&target)
                && theirs > own
            {
                upward.push(format!("{} -> {}", name(&module), name(&target)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "upward references:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_two_files_depend_on_each_other_even_through_others() {
    let graph = graph();
    // Tarjan would name the components; a depth-first search that reports
    // the first cycle it closes is enough to say where to look.
    fn visit(
        module: &Module,
        graph: &BTreeMap<Module, BTreeSet<Module>>,
        path: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
        cycles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|m| m == module) {
            let cycle: Vec<String> = path[at..].iter().chain([module]).map(name).collect();
            cycles.push(cycle.join(" -> "));
            return;
        }
        if !done.insert(module.clone()) {
            return;
        }
        path.push(module.clone());
        for target in graph.get(module).into_iter().flatten() {
            visit(target, graph, path, done, cycles);
        }
        path.pop();
    }
    let mut cycles = Vec::new();
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(module, &graph, &mut Vec::new(), &mut done, &mut cycles);
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_check_sees_references_written_inline_in_groups_and_in_attributes() {
    let graph = graph();
    let refers = |from: &str, to: &str| {
        let split = |s: &str| s.split("::").map(str::to_owned).collect::<Module>();
        graph[&split(from)].contains(&split(to))
    };
    // `crate::store::redis::redacted(url)`, written inline in start-up.
    assert!(refers("startup", "store::redis::connection") || refers("startup", "store::redis"));
    // A group: `use crate::words::{…}` in the hub.
    assert!(refers("live::hub", "words::model") || refers("live::hub", "words"));
    // Inside an attribute: utoipa's `paths(super::visitor::join, …)`.
    assert!(refers("http::openapi", "http::visitor"));
}
