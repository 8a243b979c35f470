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

/// Kills a trigger that has no result yet, wherever it is.
///
/// * Not started by any executor (queued in the broker, or waiting for its
///   job's turn): the kill is remembered in its dedupe mark (`SET NX`), so
///   the executor that receives it answers it as killed and never runs it
///   — `"kill": "queued"`. A control message also tells its executor at
///   once, in case it holds it waiting.
/// * Running: a `kill` message on the control exchange; the executor
///   cancels the run and answers "killed" — `"kill": "sent"`.
pub(super) async fn kill_trigger(
    State(s): State<AppState>,
    Path(trigger_id): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let job_id = trigger_id::job_of(&trigger_id)?;
    let Some(trigger) = s.triggers.inflight(job_id, &trigger_id).await? else {
        let msg = format!("trigger {trigger_id} is not running (no result is pending)");
        return Err(Error::new(rondo_core::ErrorKind::Conflict, msg).into());
    };
    let queued = s
        .triggers
        .kill_unstarted(&trigger_id, s.dedupe_ttl_s)
        .await?;
    let control = rondo_core::trigger::Control {
        v: 1,
        action: rondo_core::trigger::ControlAction::Kill,
        trigger_id: trigger_id.clone(),
        job_id,
    };
    let delivered = s
        .dispatcher
        .publish_control(&trigger.executor_id, &control)
        .await;
    if queued {
        // The kill is remembered: the control message only makes it quicker.
        if let Err(e) = &delivered {
            tracing::info!(error = %e, trigger_id = %trigger_id, "kill message not sent; the remembered kill stands");
        }
        tracing::info!(trigger_id = %trigger_id, executor_id = %trigger.executor_id, "kill remembered before the trigger started");
        return Ok((
            StatusCode::ACCEPTED,
            Json(
                json!({ "trigger_id": trigger_id, "executor_id": trigger.executor_id, "kill": "queued" }),
            ),
        ));
    }
    if !delivered? {
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
