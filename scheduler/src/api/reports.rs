//! The daily report and log retention (MySQL, through `rondo-history`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::{Extension, Json};
use rondo_core::Error;
use rondo_core::auth::Access;
use rondo_history::{ReportRow, Retention};
use serde::Serialize;

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::{parse_body, query_usize};
use super::state::{ApiResult, AppState};

/// The daily report of the last `days` days (default 7, today included):
/// today and yesterday recounted from the trigger logs, older days as the
/// persistence worker's maintenance pass stored them. A user who may read
/// some groups only is shown the runs of those groups.
#[utoipa::path(get, path = "/api/v1/reports", tag = "reports",
    params(("days" = Option<u32>, Query, description = "Days back, today included (default 7).", minimum = 1, maximum = 366)),
    responses((status = 200, description = "One row per day, oldest first.", body = Report), ApiErrors))]
pub(super) async fn reports(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Report>> {
    let max = rondo_history::report::MAX_DAYS as usize;
    let days = query_usize(&q, "days", 7, max)?;
    if days == 0 {
        return Err(Error::invalid("days", format!("must be between 1 and {max}")).into());
    }
    let groups = caller.readable_groups();
    let rows = s.history.report(days as u32, s.report_zone, groups).await?;
    Ok(Json(Report {
        days,
        zone: s.report_zone.name().to_owned(),
        items: rows,
    }))
}

/// The daily report.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Report {
    days: usize,
    /// The zone whose calendar days are counted (`report_zone`).
    zone: String,
    items: Vec<ReportRow>,
}

/// The longest retention asked through the API (a hundred years).
const MAX_RETENTION_DAYS: u32 = 36_500;

#[derive(serde::Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RetentionSpec {
    /// Days of logs to keep, 7 to 36500 (default `persist.retention_days`).
    #[schema(minimum = 7, maximum = 36500)]
    days: Option<u32>,
}

/// Applies log retention now: drops the log days older than `days` (default
/// `persist.retention_days`; a given `days` must be at least 7). Admins
/// only.
#[utoipa::path(post, path = "/api/v1/maintenance/retention", tag = "reports",
    request_body(content = Option<RetentionSpec>, description = "Optional: no body applies the configured retention."),
    responses((status = 200, description = "What was dropped.", body = Retention), ApiErrors))]
pub(super) async fn retention(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<Json<Retention>> {
    use rondo_history::maintenance::MIN_RETENTION_DAYS;
    caller.require(Access::Admin, "days")?;
    let spec = parse_body::<RetentionSpec>(&body)?;
    let days = match spec.days {
        Some(days) if !(MIN_RETENTION_DAYS..=MAX_RETENTION_DAYS).contains(&days) => {
            let msg =
                format!("must be from {MIN_RETENTION_DAYS} to {MAX_RETENTION_DAYS} (got {days})");
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
    Ok(Json(applied))
}
