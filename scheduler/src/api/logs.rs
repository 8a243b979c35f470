//! Trigger logs (from MySQL) and killing a running trigger.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use rondo_core::{Error, trigger_id};
use serde_json::{Value, json};

use super::input::{parse_id, query_usize};
use super::state::{ApiResult, AppState};

pub(super) async fn job_logs(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id)?;
    let limit = query_usize(&q, "limit", 20, 1000)?;
    Ok(Json(json!(s.history.job_logs(id, limit as u32).await?)))
}

pub(super) async fn trigger_log(
    State(s): State<AppState>,
    Path(trigger_id): Path<String>,
) -> ApiResult<Json<Value>> {
    if trigger_id.len() > trigger_id::MAX_LEN {
        let msg = format!("is longer than {} characters", trigger_id::MAX_LEN);
        return Err(Error::invalid("trigger_id", msg).into());
    }
    match s.history.trigger_log(&trigger_id).await? {
        Some(log) => Ok(Json(json!(log))),
        None => Err(Error::not_found("trigger_id", format!("no trigger {trigger_id}")).into()),
    }
}

/// Kills a running (or queued) trigger on its executor: a `kill` message on
/// the control exchange; the executor cancels the run and answers "killed".
pub(super) async fn kill_trigger(
    State(s): State<AppState>,
    Path(trigger_id): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let job_id = trigger_id::job_of(&trigger_id)?;
    let Some(trigger) = s.triggers.inflight(job_id, &trigger_id).await? else {
        let msg = format!("trigger {trigger_id} is not running (no result is pending)");
        return Err(Error::new(rondo_core::ErrorKind::Conflict, msg).into());
    };
    let control = rondo_core::trigger::Control {
        v: 1,
        action: rondo_core::trigger::ControlAction::Kill,
        trigger_id: trigger_id.clone(),
        job_id,
    };
    if !s
        .dispatcher
        .publish_control(&trigger.executor_id, &control)
        .await?
    {
        let msg = format!(
            "executor {} is not connected; the trigger will be found lost if it never answers",
            trigger.executor_id
        );
        return Err(Error::new(rondo_core::ErrorKind::Conflict, msg).into());
    }
    tracing::info!(trigger_id = %trigger_id, executor_id = %trigger.executor_id, "kill sent");
    Ok((
        StatusCode::ACCEPTED,
        Json(
            json!({ "trigger_id": trigger_id, "executor_id": trigger.executor_id, "kill": "sent" }),
        ),
    ))
}
