//! Trigger logs (from MySQL) and killing a running trigger.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::model::validate_app_name;
use rondo_core::{Error, ErrorKind, trigger_id};
use rondo_history::{LogQuery, LogRow, LogStatus, TriggerLog};
use serde::Serialize;

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::{parse_id, query_usize};
use super::jobs::JobIdParam;
use super::state::{ApiResult, AppState};

/// The `{trigger_id}` path parameter.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // only describes the path; handlers read it as text
struct TriggerIdParam {
    /// The trigger's id (from a log row or a manual trigger's answer).
    #[param(max_length = 96)]
    trigger_id: String,
}

/// How a kill reached its trigger.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum KillHow {
    /// Not started yet: remembered, the executor answers it as killed.
    Queued,
    /// Running: the executor was told to cancel it.
    Sent,
}

/// The answer to a kill.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Kill {
    trigger_id: String,
    executor_id: String,
    kill: KillHow,
}

/// A job's latest trigger logs, those of the groups the caller may read.
/// A row is judged by the group it ran in, not by the job's group now: a
/// job moved from A to B shows a reader of B only its B runs, and a reader
/// of A only its A runs. Refused when the caller sees none and may not
/// read the job's group (a deleted job: no row of a readable group).
#[utoipa::path(get, path = "/api/v1/jobs/{id}/logs", tag = "logs",
    params(JobIdParam,
        ("limit" = Option<u32>, Query, description = "How many, newest first (default 20).", maximum = 1000)),
    responses((status = 200, description = "Trigger log rows, newest first.", body = Vec<LogRow>), ApiErrors))]
pub(super) async fn job_logs(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Vec<LogRow>>> {
    let id = parse_id(&id)?;
    let limit = query_usize(&q, "limit", 20, 1000)?;
    let group = match s.store.get_job(id).await {
        Ok(job) => Some(job.group),
        Err(e) if e.kind == ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let readable: Option<Vec<String>> = caller
        .readable_groups()
        .map(|groups| groups.iter().cloned().collect());
    let rows = s
        .history
        .job_logs(id, limit as u32, readable.as_deref())
        .await?;
    let may_read_job = group
        .as_deref()
        .is_some_and(|g| caller.principal.may(Access::ReadGroup(g)));
    if rows.is_empty() && !may_read_job {
        let theirs = group.is_some() || !s.history.job_log_groups(id).await?.is_empty();
        return Err(match theirs {
            true => Error::forbidden(
                "id",
                format!("job {id} and its logs are of groups not granted to you"),
            ),
            false => Error::not_found("id", format!("no job {id}")),
        }
        .into());
    }
    Ok(Json(rows))
}

/// A page of trigger logs, newest first.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct LogPageView {
    items: Vec<LogRow>,
    /// Pass as `before` for the next (older) page; absent on the last.
    next: Option<String>,
}

/// Trigger logs of the groups the caller may read, newest first, by group,
/// job, status and time, a page at a time (each filter reads an index).
#[utoipa::path(get, path = "/api/v1/logs", tag = "logs",
    params(
        ("group" = Option<String>, Query, description = "Only this group's triggers.", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("job_id" = Option<u64>, Query, description = "Only this job's triggers.", minimum = 0),
        ("status" = Option<String>, Query, description = "`running` (sent, no result yet), `success` (the handler answered 200) or `failure` (the trigger failed or the handler answered another code), as the daily report counts them.", pattern = "^(running|success|failure)$"),
        ("from_ms" = Option<i64>, Query, description = "Fires at or after this instant (epoch ms).", minimum = 0),
        ("until_ms" = Option<i64>, Query, description = "Fires before this instant (epoch ms).", minimum = 0),
        ("before" = Option<String>, Query, description = "The previous page's `next`: where this page starts.", max_length = 128),
        ("limit" = Option<u32>, Query, description = "Page size (default 50).", maximum = 1000),
    ),
    responses((status = 200, description = "A page of trigger logs.", body = LogPageView), ApiErrors))]
pub(super) async fn search_logs(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<LogPageView>> {
    let group = q.get("group").cloned();
    if let Some(g) = &group {
        validate_app_name("group", g)?;
        caller.require(Access::ReadGroup(g), "group")?;
    }
    let job_id = q
        .get("job_id")
        .map(|raw| {
            parse_id(raw)
                .map_err(|_| Error::invalid("job_id", format!("must be a job id, got {raw:?}")))
        })
        .transpose()?;
    let status = match q.get("status").map(String::as_str) {
        None => None,
        Some("running") => Some(LogStatus::Running),
        Some("success") => Some(LogStatus::Success),
        Some("failure") => Some(LogStatus::Failure),
        Some(other) => {
            return Err(Error::invalid(
                "status",
                format!("must be running, success or failure, got {other:?}"),
            )
            .into());
        }
    };
    let instant = |key: &str| -> Result<Option<i64>, Error> {
        q.get(key)
            .map(|raw| {
                raw.parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
                    Error::invalid(key, format!("must be epoch milliseconds, got {raw:?}"))
                })
            })
            .transpose()
    };
    let from_ms = instant("from_ms")?;
    let until_ms = instant("until_ms")?;
    let before = q
        .get("before")
        .map(|raw| {
            raw.split_once(':')
                .and_then(|(ms, id)| Some((ms.parse::<i64>().ok()?, id)))
                .filter(|(_, id)| !id.is_empty() && id.len() <= 96)
                .map(|(ms, id)| (ms, id.to_owned()))
                .ok_or_else(|| {
                    Error::invalid("before", "must be a page's `next` (<fire_ms>:<trigger_id>)")
                })
        })
        .transpose()?;
    let limit = query_usize(&q, "limit", 50, 1000)?;
    let groups = match (group, caller.readable_groups()) {
        (Some(g), _) => Some(vec![g]),
        (None, Some(readable)) => Some(readable.iter().cloned().collect()),
        (None, None) => None,
    };
    let page = s
        .history
        .search_logs(&LogQuery {
            groups,
            job_id,
            status,
            from_ms,
            until_ms,
            before,
            limit: limit as u32,
        })
        .await?;
    Ok(Json(LogPageView {
        items: page.items,
        next: page.next.map(|(ms, id)| format!("{ms}:{id}")),
    }))
}

/// One trigger's log row and log lines (with `after_seq`, only the lines
/// after it: a page that follows a run asks for what is new).
#[utoipa::path(get, path = "/api/v1/logs/{trigger_id}", tag = "logs",
    params(TriggerIdParam,
        ("after_seq" = Option<i64>, Query, description = "Only the lines whose `seq` is greater.", minimum = 0, maximum = 4294967295_i64)),
    responses((status = 200, description = "The trigger's log.", body = TriggerLog), ApiErrors))]
pub(super) async fn trigger_log(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(trigger_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<TriggerLog>> {
    if trigger_id.len() > trigger_id::MAX_LEN {
        let msg = format!("is longer than {} characters", trigger_id::MAX_LEN);
        return Err(Error::invalid("trigger_id", msg).into());
    }
    let after_seq = q
        .get("after_seq")
        .map(|raw| {
            raw.parse::<i64>()
                .ok()
                .filter(|v| (0..=i64::from(u32::MAX)).contains(v))
                .ok_or_else(|| {
                    Error::invalid("after_seq", format!("must be a line's seq, got {raw:?}"))
                })
        })
        .transpose()?;
    let not_found = || Error::not_found("trigger_id", format!("no trigger {trigger_id}"));
    let Some(log) = s.history.trigger_log(&trigger_id, after_seq).await? else {
        return Err(not_found().into());
    };
    if caller.readable_groups().is_some() {
        // Lines that came before their trigger row have no group yet: only
        // an admin reads them.
        let group = log.log.as_ref().and_then(|l| l.group.as_deref());
        let group = group.ok_or_else(not_found)?;
        caller.require(Access::ReadGroup(group), "trigger_id")?;
    }
    Ok(Json(log))
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
#[utoipa::path(post, path = "/api/v1/logs/{trigger_id}/kill", tag = "logs",
    params(TriggerIdParam),
    responses((status = 202, description = "The kill is remembered or sent; the trigger's result follows.", body = Kill), ApiErrors))]
pub(super) async fn kill_trigger(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(trigger_id): Path<String>,
) -> ApiResult<(StatusCode, Json<Kill>)> {
    let job_id = trigger_id::job_of(&trigger_id)?;
    // The right is checked on the job's group before anything is said
    // about the trigger (a deleted job's: the trigger's own group).
    let job_group = match s.store.get_job(job_id).await {
        Ok(job) => Some(job.group),
        Err(e) if e.kind == ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(group) = &job_group {
        caller.require(Access::OperateGroup(group), "trigger_id")?;
    }
    let Some(trigger) = s.triggers.inflight(job_id, &trigger_id).await? else {
        let msg = format!("trigger {trigger_id} is not running (no result is pending)");
        return Err(Error::new(ErrorKind::Conflict, msg).into());
    };
    caller.require(Access::OperateGroup(&trigger.group), "trigger_id")?;
    let kill = kill_inflight(&s, &caller, trigger).await?;
    Ok((StatusCode::ACCEPTED, Json(kill)))
}

/// Kills an in-flight trigger (see [`kill_trigger`]), audited.
pub(super) async fn kill_inflight(
    s: &AppState,
    caller: &Caller,
    trigger: rondo_core::Trigger,
) -> Result<Kill, Error> {
    let trigger_id = trigger.trigger_id.clone();
    let job_id = trigger.job_id;
    // Recorded once the kill is remembered or sent, with how.
    let audited = |how: &str| {
        let target = format!("trigger:{trigger_id}");
        let detail = Some(format!("kill {how} to {}", trigger.executor_id));
        caller.audit("trigger.kill", target, Some(&trigger.group), detail)
    };
    let queued = s
        .triggers
        .kill_unstarted(&trigger.group, &trigger_id, s.dedupe_ttl_s)
        .await?;
    let control = rondo_core::trigger::Control {
        v: 1,
        action: rondo_core::trigger::ControlAction::Kill,
        trigger_id: trigger_id.clone(),
        job_id,
        group: trigger.group.clone(),
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
        s.events.publish(&[audited("queued")]).await?;
        return Ok(Kill {
            trigger_id,
            executor_id: trigger.executor_id,
            kill: KillHow::Queued,
        });
    }
    if !delivered? {
        let msg = format!(
            "executor {} is not connected; the trigger will be found lost if it never answers",
            trigger.executor_id
        );
        return Err(Error::new(ErrorKind::Conflict, msg));
    }
    tracing::info!(trigger_id = %trigger_id, executor_id = %trigger.executor_id, "kill sent");
    s.events.publish(&[audited("sent")]).await?;
    Ok(Kill {
        trigger_id,
        executor_id: trigger.executor_id,
        kill: KillHow::Sent,
    })
}
