//! A script job's history (`xxl_job_logglue`) brought over as its script
//! versions: the job is created with the oldest kept version, and each
//! later one is saved over it in order, with its remark and the time
//! XXL-JOB wrote it (`glue_saved_ms`), ending with the job's current
//! script. rondo then lists them as XXL-JOB did and can restore any.

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

/// The versions of `job`'s script, oldest first, the current one last: its
/// history of the same script type (another type's scripts cannot run as
/// this job's), a version saved twice in a row once.
pub(super) fn versions(
    job: &XxlJob,
    history: &[XxlGlue],
    zone: chrono_tz::Tz,
    now_ms: i64,
) -> Vec<Version> {
    let dated = |ms: Option<i64>| ms.filter(|ms| *ms > 0 && *ms <= now_ms);
    let mut out: Vec<Version> = Vec::new();
    let kept = history
        .iter()
        .filter(|g| g.glue_type == job.glue_type)
        .map(|g| Version {
            source: g.source.clone(),
            remark: g.remark.clone(),
            saved_ms: dated(g.saved.to_ms(zone)),
        });
    let current = Version {
        source: job.glue_source.clone(),
        remark: job.glue_remark.clone(),
        saved_ms: dated(job.glue_saved.to_ms(zone)),
    };
    for v in kept.chain(std::iter::once(current)) {
        match out.last_mut() {
            // The current script is the newest kept one (XXL-JOB writes
            // both at a save): one version, its remark and time as kept.
            Some(last) if last.source == v.source => {
                last.saved_ms = last.saved_ms.or(v.saved_ms);
            }
            _ => out.push(v),
        }
    }
    out
}

/// Creates the job from `spec` with its script's `versions` (oldest first,
/// the last one `spec`'s own); the answer is the last call's.
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
    let mut body = spec;
    set(&mut body, first);
    let (status, created) = api
        .call(reqwest::Method::POST, "/api/v1/jobs", Some(body))
        .await?;
    if status != 201 {
        return Ok((status, created));
    }
    let id = created["id"].clone();
    let mut answer = (status, created);
    for v in later {
        let mut patch = json!({});
        set(&mut patch, v);
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
