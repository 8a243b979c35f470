//! A script job's history (`xxl_job_logglue`) brought over as its script
//! versions: the job is created stopped with the oldest kept version, and
//! each later one is saved over it in order, with its remark and the time
//! XXL-JOB wrote it (`glue_saved_ms`), ending with the job's current
//! script, which also sets whether the job runs. rondo then lists them as
//! XXL-JOB did and can restore any.
//!
//! The current script is dated by its save in rondo, not by XXL-JOB: an
//! executor of `xxl-job-core` caches a job's script by its job id and that
//! time (`glueUpdatetime`), so a time XXL-JOB already used for another job
//! of the same id could make it run a cached script. A kept version whose
//! source rondo would refuse (empty, or over 64 KiB) is left out and
//! counted.

use serde_json::{Value, json};

use rondo_cli::Api;
use rondo_model::JobSpec;

use super::tables::{XxlGlue, XxlJob};

/// One version to save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Version {
    pub(super) source: String,
    pub(super) remark: String,
    /// When XXL-JOB wrote it; None when it kept no time (or one not yet
    /// come: then the save's own time).
    pub(super) saved_ms: Option<i64>,
}

/// A time XXL-JOB kept counts as written by then only if it is this much
/// before now (the API refuses a time to come, and its clock may be
/// behind the importer's).
const CLOCK_MARGIN_MS: i64 = 60_000;

/// The versions of `job`'s script, oldest first, the current one last
/// (undated: the save dates it), and how many kept ones were left out: its
/// history of the same script type (another type's scripts cannot run as
/// this job's) that rondo takes, a version saved twice in a row once, each
/// dated later than the one before.
pub(super) fn versions(
    job: &XxlJob,
    history: &[XxlGlue],
    zone: chrono_tz::Tz,
    now_ms: i64,
) -> (Vec<Version>, usize) {
    let mut out: Vec<Version> = Vec::new();
    let mut left_out = 0;
    let takes = |source: &str| {
        !source.trim().is_empty() && source.len() <= rondo_model::model::MAX_SCRIPT_BYTES
    };
    for g in history.iter().filter(|g| g.glue_type == job.glue_type) {
        if !takes(&g.source) {
            left_out += 1;
            continue;
        }
        if out.last().is_some_and(|last| last.source == g.source) {
            continue;
        }
        let after = out.iter().filter_map(|v| v.saved_ms).max().unwrap_or(0);
        let saved_ms = g
            .saved
            .to_ms(zone)
            .filter(|ms| *ms > after && *ms <= now_ms - CLOCK_MARGIN_MS);
        out.push(Version {
            source: g.source.clone(),
            remark: g.remark.clone(),
            saved_ms,
        });
    }
    // The current script is the newest kept one (XXL-JOB writes both at a
    // save): one version, with the kept remark.
    match out.last_mut() {
        Some(last) if last.source == job.glue_source => last.saved_ms = None,
        _ => out.push(Version {
            source: job.glue_source.clone(),
            remark: job.glue_remark.clone(),
            saved_ms: None,
        }),
    }
    (out, left_out)
}

/// Creates the job from `spec` with its script's `versions` (oldest first,
/// the last one `spec`'s own): stopped until the last is saved, which sets
/// `spec`'s `enabled`. The answer is the last call's.
pub(super) async fn create(
    api: &mut Api,
    spec: Value,
    versions: &[Version],
) -> anyhow::Result<(u16, Value)> {
    let Some((first, later)) = versions.split_first().filter(|_| versions.len() > 1) else {
        return api
            .call(reqwest::Method::POST, "/api/v1/jobs", Some(spec))
            .await;
    };
    let enabled = spec.get("enabled").cloned().unwrap_or(json!(true));
    let mut body = spec;
    set(&mut body, first);
    body["enabled"] = json!(false);
    let (status, created) = api
        .call(reqwest::Method::POST, "/api/v1/jobs", Some(body))
        .await?;
    if status != 201 {
        return Ok((status, created));
    }
    let id = created["id"].clone();
    let mut answer = (status, created);
    for (i, v) in later.iter().enumerate() {
        let mut patch = json!({});
        set(&mut patch, v);
        if i + 1 == later.len() {
            patch["enabled"] = enabled.clone();
        }
        let (status, out) = api
            .call(
                reqwest::Method::PUT,
                &format!("/api/v1/jobs/{id}"),
                Some(patch),
            )
            .await?;
        if status != 200 {
            return Ok((
                status,
                json!({ "id": id, "error": out, "while": "saving its script versions" }),
            ));
        }
        answer.1 = out;
    }
    Ok(answer)
}

fn set(body: &mut Value, v: &Version) {
    body["glue_source"] = json!(v.source);
    body["glue_remark"] = json!(v.remark);
    match v.saved_ms {
        Some(ms) => body["glue_saved_ms"] = json!(ms),
        None => {
            if let Value::Object(m) = body {
                m.remove("glue_saved_ms");
            }
        }
    }
}

/// Whether `spec` is a script job (a BEAN job has no versions).
pub(super) fn is_script(spec: &JobSpec) -> bool {
    spec.glue_type.as_deref().is_some_and(|t| t != "BEAN")
}
