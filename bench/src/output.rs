//! Where reports go: `<out>/<scenario>.json` (overwritten) and a markdown
//! section appended to `<out>/latest.md`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

/// What every scenario's report offers.
pub trait Report: Serialize {
    /// The scenario's name; its JSON file is `<name>.json`.
    fn scenario(&self) -> &'static str;
    /// A markdown section (heading, table, notes) for a README or a PR.
    fn markdown(&self) -> String;
}

/// Writes `report` as `<out>/<scenario>.json` and appends its markdown to
/// `<out>/latest.md`; returns the JSON file's path.
pub fn write_report(report: &impl Report, out: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(format!("{}.json", report.scenario()));
    let mut json = serde_json::to_string_pretty(report).context("encoding the report")?;
    json.push('\n');
    std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    let latest = out.join("latest.md");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&latest)
        .with_context(|| format!("opening {}", latest.display()))?;
    writeln!(file, "{}", report.markdown())
        .with_context(|| format!("writing {}", latest.display()))?;
    Ok(path)
}
