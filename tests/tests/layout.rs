//! The workspace's layout rules, checked on the source (no service needed):
//!
//! * no import cycle between the files of any crate: a file names another
//!   with `crate::…`, `super::…`, `self::…` or, in a module file, a child's
//!   name, and following those names never leads back to where it started
//!   (the crate root, which only re-exports, is not counted);
//! * the scheduler reaches MySQL only through `rondo-history`: it depends
//!   neither on `sqlx` nor on the persistence worker.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside a crate (`["leader", "claim"]`; the root is empty).
type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The workspace members with a `src/`.
fn crates() -> Vec<PathBuf> {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("a members list")
        .0;
    members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root.join(m))
        .filter(|dir| dir.join("src").is_dir())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source dir") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file defines, or `None` for a second binary root.
fn module_of(src: &Path, file: &Path) -> Option<Module> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.last().map(String::as_str) {
        Some("lib") if parts.len() == 1 => parts.clear(),
        Some("main") if parts.len() == 1 => return None,
        Some("mod") => {
            parts.pop();
        }
        _ => {}
    }
    Some(parts)
}

/// The source without comments, string literals and everything from the
/// first `#[cfg(test)]` on (test modules sit at the end of a file).
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push_str("\"\"");
            }
            c => out.push(c),
        }
    }
    out
}

/// Every path a file names: the paths of its `use` trees (groups
/// expanded), and `crate::` / `super::` / `self::` paths in its code.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for statement in code.split(';') {
        let trimmed = statement.trim_start();
        let tree = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p));
        if let Some(tree) = tree {
            expand(
                &tree.replace(char::is_whitespace, ""),
                &mut Vec::new(),
                &mut out,
            );
        }
    }
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .collect();
    for word in words {
        // `super::{` of a use tree leaves `super::`: its group is expanded
        // above, so a trailing empty segment is dropped.
        let segments: Vec<String> = word
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if segments.len() > 1 && ["crate", "super", "self"].contains(&segments[0].as_str()) {
            out.push(segments);
        }
    }
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Some(brace) = tree.find('{') else {
        let mut path = prefix.clone();
        path.extend(
            tree.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        out.push(path);
        return;
    };
    let head: Vec<String> = tree[..brace]
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let inner = &tree[brace + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut start) = (0, 0);
    let mut parts = Vec::new();
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let len = prefix.len();
    prefix.extend(head);
    for part in parts.into_iter().filter(|p| !p.is_empty() && *p != "self") {
        expand(part, prefix, out);
    }
    prefix.truncate(len);
}

/// The file module a path lands in, seen from `from` (a module file if
/// `is_dir`): the longest prefix that is a file.
fn resolve(
    path: &[String],
    from: &Module,
    is_dir: bool,
    files: &BTreeSet<Module>,
) -> Option<Module> {
    let mut base: Module = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") | Some("self") => {
            let mut base = from.clone();
            if !is_dir {
                base.pop();
            }
            base
        }
        Some(child)
            if is_dir && files.contains(&[from.clone(), vec![child.to_owned()]].concat()) =>
        {
            from.clone()
        }
        _ => return None,
    };
    let mut rest = match path.first().map(String::as_str) {
        Some("crate") => &path[1..],
        Some("self") => &path[1..],
        Some("super") => {
            let mut rest = &path[1..];
            if is_dir {
                base.pop();
            }
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
            rest
        }
        _ => path,
    };
    if rest.first().map(String::as_str) == Some("self") {
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    (0..=base.len())
        .rev()
        .map(|n| base[..n].to_vec())
        .find(|m| files.contains(m))
}

/// The import graph of one crate's files.
fn graph(dir: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let src = dir.join("src");
    let mut list = Vec::new();
    rust_files(&src, &mut list);
    let modules: Vec<(Module, PathBuf)> = list
        .into_iter()
        .filter_map(|f| module_of(&src, &f).map(|m| (m, f)))
        .collect();
    let files: BTreeSet<Module> = modules.iter().map(|(m, _)| m.clone()).collect();
    let mut edges = BTreeMap::new();
    for (module, file) in &modules {
        let is_dir = module.is_empty()
            || file
                .file_name()
                .is_some_and(|n| n == "mod.rs" || n == "lib.rs");
        let text = std::fs::read_to_string(file).expect("a source file");
        let targets: BTreeSet<Module> = paths(&code(&text))
            .iter()
            .filter_map(|p| resolve(p, module, is_dir, &files))
            .filter(|t| t != module && !t.is_empty())
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

/// The cycles of a graph: its strongly connected components of more than
/// one file (Tarjan).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a Module) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        let edges = w.edges;
        for t in edges.get(v).into_iter().flatten() {
            if !w.index.contains_key(t) {
                visit(w, t);
                let low = w.low[v].min(w.low[t]);
                w.low.insert(v, low);
            } else if w.stack.contains(&t) {
                let low = w.low[v].min(w.index[t]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = Vec::new();
            while let Some(t) = w.stack.pop() {
                component.push(t.clone());
                if t == v {
                    break;
                }
            }
            if component.len() > 1 {
                w.found.push(component);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let mut found = Vec::new();
    for dir in crates() {
        for cycle in cycles(&graph(&dir)) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            found.push(format!("{}: {}", dir.display(), names.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_and_resolves_groups_children_and_super() {
    let files: BTreeSet<Module> = [
        vec![],
        vec!["a".to_owned()],
        vec!["a".to_owned(), "b".to_owned()],
        vec!["c".to_owned()],
    ]
    .into();
    let a = vec!["a".to_owned()];
    let b = vec!["a".to_owned(), "b".to_owned()];
    let found = paths(&code(
        "use crate::{c::X, a::{b::Y, self}};\n// crate::nope::Z\n",
    ));
    let resolved: BTreeSet<Module> = found
        .iter()
        .filter_map(|p| resolve(p, &vec![], true, &files))
        .collect();
    assert!(resolved.contains(&vec!["c".to_owned()]) && resolved.contains(&b));
    assert!(!resolved.contains(&vec!["nope".to_owned()]));
    let child = paths(&code("use b::Y;"));
    assert_eq!(resolve(&child[0], &a, true, &files), Some(b.clone()));
    let up = paths(&code("use super::Thing;"));
    assert_eq!(resolve(&up[0], &b, false, &files), Some(a.clone()));
    let edges = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([a.clone()])),
    ]);
    assert_eq!(cycles(&edges).len(), 1);
}

#[test]
fn the_scheduler_reaches_mysql_only_through_rondo_history() {
    let manifest = std::fs::read_to_string(workspace().join("scheduler/Cargo.toml"))
        .expect("scheduler/Cargo.toml");
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table");
    for forbidden in ["sqlx", "rondo-persist-worker"] {
        let named = dependencies
            .lines()
            .any(|l| l.trim_start().starts_with(forbidden));
        assert!(!named, "scheduler/Cargo.toml depends on {forbidden}");
    }
    assert!(dependencies.contains("rondo-history"));
}
