//! A job's history: every change with the fields before and after (from
//! the audit log, where each save keeps its diff), and restoring a deleted
//! job from its last state (admins).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::{Error, ErrorKind};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

use super::{JobIdParam, JobView, first_fire, save_and_announce};
use crate::api::auth::Caller;
use crate::api::doc::ApiErrors;
use crate::api::input::{parse_id, query_usize};
use crate::api::state::{ApiResult, AppState};

/// One change of a job.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct JobChange {
    pub at_ms: i64,
    pub username: String,
    /// `job.create`, `job.update`, `job.start`, `job.stop`,
    /// `job.script.restore`, `job.delete`, `job.restore`, `job.trigger`.
    pub action: String,
    /// Each field changed: `[before, after]` (secrets as `***`, a script
    /// as its version); null for an action that changes no field.
    #[schema(value_type = Option<Object>)]
    pub changes: Option<Value>,
}

/// A job's changes, newest first.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct JobHistory {
    items: Vec<JobChange>,
}

/// A job's history, newest first: who changed what, field by field. Those
/// who may read its group (a deleted job's: admins); one who may not
/// operate the group sees webhook URLs without their path and query.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/history", tag = "jobs",
    params(JobIdParam,
        ("limit" = Option<u32>, Query, description = "How many, newest first (default 100).", maximum = 1000)),
    responses((status = 200, description = "The changes, newest first.", body = JobHistory), ApiErrors))]
pub(crate) async fn job_history(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(raw): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<JobHistory>> {
    let id = parse_id(&raw)?;
    let limit = query_usize(&q, "limit", 100, 1000)?;
    let operates = match s.store.get_job(id).await {
        Ok(job) => {
            caller.require(Access::ReadGroup(&job.group), "id")?;
            caller.principal.may(Access::OperateGroup(&job.group))
        }
        Err(e) if e.kind == ErrorKind::NotFound => {
            caller.require(Access::ReadAdmin, "id")?;
            true
        }
        Err(e) => return Err(e.into()),
    };
    let filter = rondo_history::auth::AuditFilter {
        target: Some(format!("job:{id}")),
        limit: limit as u32,
        ..Default::default()
    };
    let items = s
        .history
        .audit_log(&filter)
        .await?
        .into_iter()
        .map(|r| JobChange {
            at_ms: r.at_ms,
            username: r.username,
            action: r.action,
            changes: r
                .detail
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
                .filter(Value::is_object)
                .map(|d| if operates { d } else { redact(d) }),
        })
        .collect();
    Ok(Json(JobHistory { items }))
}

/// The changes with webhook URLs cut to their scheme and host.
fn redact(mut changes: Value) -> Value {
    if let Some(pair) = changes
        .get_mut("alarm_webhook")
        .and_then(Value::as_array_mut)
    {
        for url in pair.iter_mut() {
            if let Some(text) = url.as_str() {
                *url = Value::String(rondo_core::redact::url_path(text));
            }
        }
    }
    changes
}

/// Restores a deleted job from its last state (kept when it was deleted),
/// under its id, stopped: start it when ready. Its group must exist.
/// Admins only.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/restore", tag = "jobs",
    params(JobIdParam),
    responses((status = 201, description = "The job, restored and stopped.", body = JobView), ApiErrors))]
pub(crate) async fn restore_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(raw): Path<String>,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    caller.require(Access::Admin, "id")?;
    let id = parse_id(&raw)?;
    match s.store.get_job(id).await {
        Ok(_) => {
            let msg = format!("job {id} exists: only a deleted job is restored");
            return Err(Error::new(ErrorKind::Conflict, msg).into());
        }
        Err(e) if e.kind == ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let mut job = s
        .history
        .deleted_job(id)
        .await?
        .ok_or_else(|| Error::not_found("id", format!("no deleted job {id} is kept")))?;
    if s.store.api().get_group(&job.group).await.is_err() {
        let msg = format!("its group {} is gone: create it first", job.group);
        return Err(Error::new(ErrorKind::Conflict, msg).into());
    }
    // Checked as a new job is: today's rules, its children and channels.
    let now = rondo_core::clock::now_ms();
    job = job
        .to_spec()
        .validate(id, now, Some(job.created_ms))
        .map_err(|e| {
            Error::new(
                ErrorKind::Conflict,
                format!("its last state is not a valid job today: {}", e.message),
            )
        })?
        .versioned_after(Some(&job));
    super::check_children(&s, &caller, &job).await?;
    crate::api::channels::check_job_channels(&s, &job.alarm_channels).await?;
    super::check_alarm_email(&s, &job)?;
    job.enabled = false;
    job.run_until_ms = 0;
    job.updated_ms = now;
    let next = first_fire(&job)?;
    save_and_announce(&s, &caller, "job.restore", &job, next, None).await?;
    Ok((StatusCode::CREATED, Json(JobView::new(job, next))))
}
