//! A script job's kept versions, and restoring one.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use rondo_core::{Error, JobSpec, clock};

use crate::store::Due;
use serde::Serialize;

use super::{JobIdParam, JobView, operable_job, readable_job, save_and_announce};
use crate::api::auth::Caller;
use crate::api::doc::ApiErrors;
use crate::api::input::parse_body;
use crate::api::state::{ApiResult, AppState};

/// A script job's kept script versions (the newest 30), newest first.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ScriptVersions {
    /// The job's current version (0: never a script).
    current: u32,
    /// Versions as the persistence worker stored them (the current one
    /// shows up within moments of its save).
    items: Vec<rondo_history::GlueVersion>,
}

/// The saved versions of a script job's script.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/scripts", tag = "jobs",
    params(JobIdParam),
    responses((status = 200, description = "The versions, newest first.", body = ScriptVersions), ApiErrors))]
pub(crate) async fn script_versions(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<ScriptVersions>> {
    let job = readable_job(&s, &caller, &id).await?;
    Ok(Json(ScriptVersions {
        current: job.glue_version,
        items: s.history.glue_versions(job.id).await?,
    }))
}

/// What a restore saves with the restored script.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RestoreSpec {
    /// Default: "restored from version N".
    #[schema(max_length = 255)]
    remark: Option<String>,
}

/// Makes a kept version of the script the job's current script: saved as
/// a new version, so the history only grows.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/scripts/{version}/restore", tag = "jobs",
    params(JobIdParam, ("version" = u32, Path, description = "The version to restore.", minimum = 1)),
    request_body(content = Option<RestoreSpec>, description = "An optional remark."),
    responses((status = 200, description = "The job, with the restored script.", body = JobView), ApiErrors))]
pub(crate) async fn restore_script(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((raw, version)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<Json<JobView>> {
    let spec = parse_body::<RestoreSpec>(&body)?;
    let old = operable_job(&s, &caller, &raw).await?;
    let number: u32 = version
        .parse()
        .map_err(|_| Error::invalid("version", format!("{version:?} is not a version number")))?;
    let kept = s
        .history
        .glue_version(old.id, number)
        .await?
        .ok_or_else(|| {
            Error::not_found(
                "version",
                format!("job {} has no kept script version {number}", old.id),
            )
        })?;
    let patch = JobSpec {
        glue_type: Some(kept.glue_type),
        glue_source: Some(kept.glue_source),
        glue_remark: Some(
            spec.remark
                .unwrap_or_else(|| format!("restored from version {number}")),
        ),
        ..JobSpec::default()
    };
    let mut base = old.to_spec();
    base.handler = None;
    let now = clock::now_ms();
    let job = base
        .overlay(patch)
        .validate(old.id, now, Some(old.created_ms))?
        .versioned_after(Some(&old));
    save_and_announce(
        &s,
        &caller,
        "job.script.restore",
        &job,
        Due::Keep,
        Some(&old),
    )
    .await?;
    let next = s.store.api().next_fire(old.id).await?;
    Ok(Json(JobView::new(job, next)))
}
