//! The daily report and log retention (MySQL, through `rondo-history`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::{Extension, Json};
use rondo_core::Error;
use rondo_core::auth::Access;
use serde_json::{Value, json};

use super::auth::Caller;
use super::input::{parse_body, query_usize};
use super::state::{ApiResult, AppState};

/// The daily report of the last `days` days (default 7, today included),
/// recomputed from the trigger logs first.
pub(super) async fn reports(
    State(s): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let max = rondo_history::report::MAX_DAYS as usize;
    let days = query_usize(&q, "days", 7, max)?;
    if days == 0 {
        return Err(Error::invalid("days", format!("must be between 1 and {max}")).into());
    }
    let rows = s.history.report(days as u32).await?;
    Ok(Json(json!({ "days": days, "items": rows })))
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RetentionSpec {
    days: Option<u32>,
}

/// Applies log retention now: drops the log days older than `days` (default
/// `persist.retention_days`; a given `days` must be at least 7). Admins
/// only.
pub(super) async fn retention(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    use rondo_history::maintenance::MIN_RETENTION_DAYS;
    caller.require(Access::Admin, "days")?;
    let spec = parse_body::<RetentionSpec>(&body)?;
    let days = match spec.days {
        Some(days) if days < MIN_RETENTION_DAYS => {
            let msg = format!("must be at least {MIN_RETENTION_DAYS} (got {days})");
            return Err(Error::invalid("days", msg).into());
        }
        Some(days) => days,
        None => s.retention_days,
    };
    let applied = s.history.retention(days).await?;
    let detail = format!("{days} days");
    s.events
        .publish(&[caller.audit("retention.apply", "job_log".into(), None, Some(detail))])
        .await?;
    tracing::info!(
        days,
        enabled = applied.enabled,
        "retention applied from the api"
    );
    Ok(Json(json!(applied)))
}
