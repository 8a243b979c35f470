//! The persistence scenario at `--smoke` sizes against the real services:
//! it runs, cleans up, and writes a well-formed report. Not a performance
//! test: no figure is compared with a goal.

use std::time::{SystemTime, UNIX_EPOCH};

use rondo_bench::{Options, Scenario};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persistence_scenario_writes_a_well_formed_report() {
    let out = scratch_dir();
    let options = Options::smoke(Scenario::Persistence, out.clone());
    let config = rondo_core::testkit::config("bsmoke");

    let written = rondo_bench::run(&options, &config)
        .await
        .expect("the persistence scenario runs");

    assert_eq!(written.len(), 1, "one report for one scenario");
    let (markdown, path) = &written[0];
    assert_eq!(path, &out.join("persistence.json"));
    assert!(markdown.contains("## persistence"), "{markdown}");
    assert!(markdown.contains("ratio per event"), "{markdown}");

    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("json written"))
        .expect("the report is JSON");
    assert_eq!(json["scenario"], "persistence");
    assert_eq!(json["smoke"], true);
    assert_eq!(json["events"], 2_000);
    assert_eq!(json["rows"], 1_000);
    for rate in [
        "ceiling_rows_per_s",
        "write_path_events_per_s",
        "events_per_s",
        "rows_per_s",
        "publish_events_per_s",
        "steady_events_per_s",
    ] {
        let value = json[rate]
            .as_f64()
            .unwrap_or_else(|| panic!("{rate} missing: {json}"));
        assert!(value.is_finite() && value > 0.0, "{rate} = {value}");
    }
    let number = |key: &str| json[key].as_f64().expect(key);
    let ratio = number("events_per_s") / number("ceiling_rows_per_s");
    assert!((number("ratio_events_to_ceiling") - ratio).abs() < 1e-9 * ratio.max(1.0));
    assert!((number("ratio_rows_to_ceiling") * 2.0 - ratio).abs() < 1e-9 * ratio.max(1.0));
    assert!(json["machine"]["cores"].as_u64().expect("cores") >= 1);
    assert!(json["started_at"].is_string());

    let latest = std::fs::read_to_string(out.join("latest.md")).expect("latest.md written");
    assert!(latest.contains("## persistence"));
    let _ = std::fs::remove_dir_all(&out);
}

/// A directory of its own under the system's temp dir.
fn scratch_dir() -> std::path::PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!(
        "rondo-bench-smoke-{}-{nanos:08x}",
        std::process::id()
    ))
}
