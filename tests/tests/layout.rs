//! The workspace's layout rules, checked on the source (no service needed):
//!
//! * no import cycle between the files of any crate: a file names another
//!   with `crate::…`, `super::…`, `self::…` or, in a module file, a child's
//!   name (in a `use` or anywhere in its code: a parent that calls
//!   `child::f()` depends on its child as much as one that imports it), and
//!   following those names never leads back to where it started (the crate
//!   root, which only re-exports, is not counted). Only what is compiled
//!   under `#[cfg(test)]` is left out, item by item;
//! * no import cycle between the console's JavaScript modules
//!   (`scheduler/console/`);
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

/// The source without comments, string literals and the items compiled
/// only for tests (`#[cfg(test)]`, wherever in the file they stand).
fn code(text: &str) -> String {
    without_test_items(&stripped(text))
}

/// Drops each item marked `#[cfg(test)]`: the attribute, the attributes
/// after it and the item, up to its `;` or its closing brace.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The source without comments, string and char literals (raw strings
/// included; a lifetime's `'` stays).
fn stripped(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let word_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            i += 2;
            while i < chars.len() && !(chars[i - 1] == '*' && chars[i] == '/') {
                i += 1;
            }
            i += 1;
        } else if c == 'r' && !word_before && (at(i + 1) == '"' || at(i + 1) == '#') {
            // r"…" or r#"…"#: ends at a quote followed by as many hashes.
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() && !(chars[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#')) {
                j += 1;
            }
            out.push_str("\"\"");
            i = j + 1 + hashes;
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if c == '\'' && at(i + 1) == '\\' {
            // An escaped char literal: '\n', '\'', '\u{…}'.
            let mut j = i + 3;
            while j < chars.len() && chars[j] != '\'' {
                j += 1;
            }
            out.push_str("' '");
            i = j + 1;
        } else if c == '\'' && at(i + 2) == '\'' {
            out.push_str("' '");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Every path a file names: the paths of its `use` trees (groups
/// expanded), and every `a::b` path in its code.
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
        // `crate::`, `super::`, `self::` or a child's name: `resolve`
        // keeps those that name a file of the crate.
        if segments.len() > 1 {
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

/// The file module a path lands in, seen from module `from`: the longest
/// prefix that is a file. A first segment that names a child file of
/// `from` is that child (a local module shadows a crate of that name).
fn resolve(path: &[String], from: &Module, files: &BTreeSet<Module>) -> Option<Module> {
    let first = path.first().map(String::as_str)?;
    let (mut base, rest): (Module, &[String]) = match first {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (from.clone(), &path[1..]),
        "super" => {
            let mut base = from.clone();
            base.pop();
            let mut rest = &path[1..];
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
            (base, rest)
        }
        child if files.contains(&[from.clone(), vec![child.to_owned()]].concat()) => {
            (from.clone(), path)
        }
        _ => return None,
    };
    let rest = match rest.first().map(String::as_str) {
        Some("self") => &rest[1..],
        _ => rest,
    };
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
        let text = std::fs::read_to_string(file).expect("a source file");
        let targets: BTreeSet<Module> = paths(&code(&text))
            .iter()
            .filter_map(|p| resolve(p, module, &files))
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

/// The console's modules and what each imports (`import … from './x.js'`,
/// `export … from './x.js'` and `import('./x.js')`).
fn js_graph(dir: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("the console's folder") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "js") {
            continue;
        }
        let name = path.file_name().expect("a name").to_string_lossy();
        let text = std::fs::read_to_string(&path).expect("a module");
        edges.insert(vec![name.into_owned()], js_imports(&text));
    }
    edges
}

/// The relative modules a JavaScript module imports, by file name (lines
/// that are comments left out).
fn js_imports(text: &str) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") || trimmed.starts_with('*') || trimmed.starts_with("/*") {
            continue;
        }
        for key in ["from", "import("] {
            for (at, _) in line.match_indices(key) {
                if let Some(spec) = specifier(&line[at + key.len()..]) {
                    out.insert(vec![spec]);
                }
            }
        }
    }
    out
}

/// `'./x.js'` (or `"./x.js"`) at the start of `rest`: `x.js`.
fn specifier(rest: &str) -> Option<String> {
    let rest = rest.trim_start();
    let quote = rest.chars().next().filter(|q| *q == '\'' || *q == '"')?;
    let spec = rest[1..].split(quote).next()?;
    spec.strip_prefix("./").map(str::to_owned)
}

#[test]
fn the_console_has_no_import_cycle_between_its_modules() {
    let edges = js_graph(&workspace().join("scheduler/console"));
    assert!(edges.len() > 1, "{edges:?}");
    let found: Vec<String> = cycles(&edges)
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| m.join(""))
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The checker sees a parent that calls into its child while the child
/// imports the parent, an import after an early test item, and a circle
/// of JavaScript modules.
#[test]
fn the_checker_sees_parent_child_test_item_and_js_cycles() {
    let files: BTreeSet<Module> = [
        vec![],
        vec!["p".to_owned()],
        vec!["p".to_owned(), "c".to_owned()],
    ]
    .into();
    let p = vec!["p".to_owned()];
    let c = vec!["p".to_owned(), "c".to_owned()];
    let parent = code("mod c;\n#[cfg(test)]\nfn t() { let _ = '}'; }\npub fn f() { c::g() }\n");
    let child = code("pub fn g() { super::h() }\n");
    let edge = |text: &str, from: &Module| -> BTreeSet<Module> {
        paths(text)
            .iter()
            .filter_map(|x| resolve(x, from, &files))
            .filter(|t| t != from)
            .collect()
    };
    let edges = BTreeMap::from([
        (p.clone(), edge(&parent, &p)),
        (c.clone(), edge(&child, &c)),
    ]);
    assert_eq!(edges[&p], BTreeSet::from([c.clone()]), "{parent}");
    assert_eq!(cycles(&edges).len(), 1);
    let js = BTreeMap::from([
        (
            vec!["a.js".to_owned()],
            js_imports("import { x } from './b.js';\n"),
        ),
        (
            vec!["b.js".to_owned()],
            js_imports("const m = await import(\"./a.js\");\n"),
        ),
    ]);
    assert_eq!(cycles(&js).len(), 1, "{js:?}");
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
        .filter_map(|p| resolve(p, &vec![], &files))
        .collect();
    assert!(resolved.contains(&vec!["c".to_owned()]) && resolved.contains(&b));
    assert!(!resolved.contains(&vec!["nope".to_owned()]));
    let child = paths(&code("use b::Y;"));
    assert_eq!(resolve(&child[0], &a, &files), Some(b.clone()));
    let up = paths(&code("use super::Thing;"));
    assert_eq!(resolve(&up[0], &b, &files), Some(a.clone()));
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
