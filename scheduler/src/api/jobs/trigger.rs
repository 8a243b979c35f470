//! Trigger once: fire a job now, whatever its schedule or status.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use rondo_core::event::TriggerRecord;
use rondo_core::{Error, TriggerType, clock};
use rondo_dispatcher::Fire;
use serde::Serialize;

use super::{JobIdParam, may_run_children, operable_job};
use crate::api::auth::Caller;
use crate::api::doc::ApiErrors;
use crate::api::input::parse_body;
use crate::api::state::{ApiResult, AppState};

/// A manual trigger.
#[derive(serde::Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TriggerSpec {
    /// Params for this run instead of the job's; at most 16 KiB.
    #[schema(max_length = 16384)]
    params: Option<String>,
    /// Run on these executors of the group only (ids as `GET
    /// /api/v1/groups/{app}/executors` lists them; the job's routing picks
    /// among them, a broadcast goes to each); default: the whole group. At
    /// most 64.
    #[schema(max_items = 64)]
    executors: Option<Vec<String>>,
}

/// The triggers a manual fire sent (one per shard for a broadcast).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Triggered {
    triggers: Vec<TriggerRecord>,
}

/// Fires a job once, now, whatever its schedule or status (XXL-JOB's
/// "execute once"), optionally with other params and on chosen executors
/// of its group (none of them live: the trigger fails saying so).
#[utoipa::path(post, path = "/api/v1/jobs/{id}/trigger", tag = "jobs",
    params(JobIdParam), request_body(content = Option<TriggerSpec>, description = "Optional: no body runs the job's own params."),
    responses((status = 200, description = "What was sent; a trigger the broker did not take has code 500.", body = Triggered), ApiErrors))]
pub(crate) async fn trigger_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Triggered>> {
    let spec = parse_body::<TriggerSpec>(&body)?;
    if let Some(p) = &spec.params
        && p.len() > rondo_core::model::MAX_PARAMS_BYTES
    {
        return Err(Error::invalid(
            "params",
            format!(
                "is {} bytes, the limit is {}",
                p.len(),
                rondo_core::model::MAX_PARAMS_BYTES
            ),
        )
        .into());
    }
    let executors = spec.executors.unwrap_or_default();
    if executors.len() > 64 {
        return Err(Error::invalid("executors", "at most 64 executors").into());
    }
    if let Some(bad) = executors
        .iter()
        .find(|e| e.is_empty() || e.len() > 255 || e.contains(char::is_whitespace))
    {
        return Err(Error::invalid("executors", format!("{bad:?} is not an executor id")).into());
    }
    let job = operable_job(&s, &caller, &id).await?;
    may_run_children(&s, &caller, &job).await?;
    let mut detail: Vec<String> = Vec::new();
    if let Some(p) = &spec.params {
        detail.push(format!("params {} bytes", p.len()));
    }
    if !executors.is_empty() {
        detail.push(format!("on {}", executors.join(", ")));
    }
    let audit = caller.audit(
        "job.trigger",
        format!("job:{}", job.id),
        Some(&job.group),
        (!detail.is_empty()).then(|| detail.join("; ")),
    );
    let fire = Fire {
        job: Arc::new(job),
        fire_ms: clock::now_ms(),
        trigger_type: TriggerType::Manual,
        params: spec.params,
        retry_count: 0,
        trigger_id: None,
        shard: None,
        executors,
    };
    let dispatched = s.dispatcher.dispatch(&fire).await?;
    s.events.publish(&[audit]).await?;
    // What was sent, with no secret in it.
    let mut triggers = dispatched.records;
    for record in &mut triggers {
        record.trigger.secrets = rondo_core::model::secrets::masked(&record.trigger.secrets);
    }
    Ok(Json(Triggered { triggers }))
}

/// What a kill of every run of a job did.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct KilledAll {
    /// Each trigger in flight, and how its kill reached it.
    killed: Vec<crate::api::logs::Kill>,
    /// Triggers whose kill could not be sent (their executor is gone: they
    /// are found lost if it never answers), with why.
    failed: Vec<KillFailed>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct KillFailed {
    trigger_id: String,
    reason: String,
}

/// Kills every run of the job that has no result yet: queued in the
/// broker, waiting for the job's turn, or running (as `POST
/// /api/v1/logs/{trigger_id}/kill` does each). A retry waiting for its
/// backoff is not a run yet and is left to come.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/kill", tag = "jobs",
    params(JobIdParam),
    responses((status = 202, description = "The kills are remembered or sent; the triggers' results follow.", body = KilledAll), ApiErrors))]
pub(crate) async fn kill_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(raw): Path<String>,
) -> ApiResult<(axum::http::StatusCode, Json<KilledAll>)> {
    let job = operable_job(&s, &caller, &raw).await?;
    let mut answer = KilledAll {
        killed: Vec::new(),
        failed: Vec::new(),
    };
    for trigger in s.triggers.inflight_of_job(job.id).await? {
        let trigger_id = trigger.trigger_id.clone();
        match crate::api::logs::kill_inflight(&s, &caller, trigger).await {
            Ok(kill) => answer.killed.push(kill),
            Err(e) if e.kind == rondo_core::ErrorKind::Conflict => {
                answer.failed.push(KillFailed {
                    trigger_id,
                    reason: e.message,
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((axum::http::StatusCode::ACCEPTED, Json(answer)))
}
