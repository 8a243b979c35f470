//! Every link of the README, of `docs/` and of the crates' READMEs
//! resolves: a relative link names a file or folder that exists, and a
//! `#fragment` names a heading of the page it points into (GitHub's
//! anchors). Links to other sites are not followed (no network here).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The pages checked: the README, everything under `docs/`, and the
/// README of each folder at the top (the crates, the bench, examples).
fn pages() -> Vec<PathBuf> {
    let root = workspace();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    for dir in std::fs::read_dir(&root).expect("the workspace") {
        let dir = dir.expect("an entry").path();
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "docs" {
            continue;
        }
        for readme in [dir.join("README.md")]
            .into_iter()
            .chain(subfolder_readmes(&dir))
        {
            if readme.is_file() {
                pages.push(readme);
            }
        }
    }
    pages
}

/// `examples/<x>/README.md` and the like: one level down, where a folder
/// at the top holds projects of their own.
fn subfolder_readmes(dir: &Path) -> Vec<PathBuf> {
    if dir.file_name().is_none_or(|n| n != "examples") {
        return Vec::new();
    }
    std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(Result::ok)
                .map(|e| e.path().join("README.md"))
                .collect()
        })
        .unwrap_or_default()
}

/// The text outside fenced code blocks and inline code.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if fenced {
            out.push('\n');
            continue;
        }
        // Inline code spans hold no links.
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// Every link target of a page: `[text](target)` and `[ref]: target`.
fn links(markdown: &str) -> Vec<String> {
    let text = prose(markdown);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(['<', '>']).to_owned());
    }
    for line in text.lines() {
        let line = line.trim_start();
        if line.starts_with('[')
            && let Some((label, target)) = line.split_once("]: ")
            && !label.contains("](")
        {
            out.push(target.trim().to_owned());
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_`
/// kept, spaces made `-`, the rest dropped; a repeated one gets `-1`, `-2`…
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        if fenced {
            continue;
        }
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        // A link in a heading anchors on its text.
        let mut text = String::new();
        let mut rest = heading.trim();
        while let Some(open) = rest.find('[') {
            text.push_str(&rest[..open]);
            rest = &rest[open + 1..];
            if let Some((label, after)) = rest.split_once("](") {
                text.push_str(label);
                rest = after.split_once(')').map_or("", |(_, r)| r);
            }
        }
        text.push_str(rest);
        let slug: String = text
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c),
                _ => None,
            })
            .collect();
        let n = seen.entry(slug.clone()).or_default();
        out.push(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// What is wrong with the links of `page` (its text `markdown`).
fn broken(page: &Path, markdown: &str) -> Vec<String> {
    let dir = page.parent().expect("a page's folder");
    let mut wrong = Vec::new();
    for link in links(markdown) {
        if link.is_empty() {
            wrong.push("an empty link".to_owned());
            continue;
        }
        if link.contains("://") || link.starts_with("mailto:") {
            continue;
        }
        let (path, fragment) = match link.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (link.as_str(), None),
        };
        let target = if path.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(path)
        };
        if !path.is_empty() && !target.exists() {
            wrong.push(format!("{link}: no {}", target.display()));
            continue;
        }
        let Some(fragment) = fragment else { continue };
        if target.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = if path.is_empty() {
            markdown.to_owned()
        } else {
            std::fs::read_to_string(&target).expect("a linked page")
        };
        if !anchors(&text).iter().any(|a| a == fragment) {
            wrong.push(format!("{link}: no heading #{fragment} there"));
        }
    }
    wrong
}

#[test]
fn every_link_of_the_docs_resolves() {
    let root = workspace();
    let pages = pages();
    assert!(pages.len() > 10, "the pages found: {pages:?}");
    let mut wrong = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        for w in broken(page, &text) {
            let rel = page.strip_prefix(&root).unwrap_or(page);
            wrong.push(format!("{}: {w}", rel.display()));
        }
    }
    assert!(wrong.is_empty(), "broken links:\n{}", wrong.join("\n"));
}

/// The checker itself sees a missing file, a missing heading, and takes
/// GitHub's anchors (punctuation dropped, repeats numbered, code ignored).
#[test]
fn the_checker_sees_what_is_broken() {
    let root = workspace();
    let page = root.join("docs").join("planted.md");
    let text = "# A title: with `code`, and (punctuation)\n\n## Twice\n\n## Twice\n\n\
                [ok](#a-title-with-code-and-punctuation) [ok](#twice-1) [ok](../README.md)\n\
                [gone](no-such-page.md) [bad](#nowhere) [bad](../README.md#nowhere)\n\
                `[not a link](nowhere.md)`\n\n```\n[nor this](nowhere.md)\n```\n";
    let wrong = broken(&page, text);
    assert_eq!(wrong.len(), 3, "{wrong:?}");
    assert!(wrong[0].starts_with("no-such-page.md"), "{wrong:?}");
    assert!(wrong[1].starts_with("#nowhere"), "{wrong:?}");
    assert!(wrong[2].starts_with("../README.md#nowhere"), "{wrong:?}");
}
