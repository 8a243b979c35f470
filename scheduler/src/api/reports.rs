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

/// The daily report: of the last `days` days (default 7, today included),
/// or of the days `from` to `to` (dates in the report's zone; `to`
/// defaults to today), each day's running, success and fail counts and
/// their totals. Today and yesterday are recounted from the trigger logs,
/// older days as the persistence worker's maintenance pass stored them. A
/// user who may read some groups only is shown the runs of those groups.
#[utoipa::path(get, path = "/api/v1/reports", tag = "reports",
    params(
        ("days" = Option<u32>, Query, description = "Days back, today included (default 7).", minimum = 1, maximum = 366),
        ("from" = Option<String>, Query, description = "The first day (YYYY-MM-DD, in the report's zone), at most 366 days back; instead of `days`.", format = Date),
        ("to" = Option<String>, Query, description = "The last day (YYYY-MM-DD), at most today (default today); with `from`.", format = Date),
    ),
    responses((status = 200, description = "One row per day, oldest first, and the totals.", body = Report), ApiErrors))]
pub(super) async fn reports(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Report>> {
    let max = rondo_history::report::MAX_DAYS as usize;
    let today = chrono::DateTime::from_timestamp_millis(rondo_core::clock::now_ms())
        .unwrap_or_default()
        .with_timezone(&s.report_zone)
        .date_naive();
    let date = |key: &str| -> Result<Option<chrono::NaiveDate>, Error> {
        q.get(key)
            .map(|raw| {
                chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d").map_err(|_| {
                    Error::invalid(key, format!("must be a date YYYY-MM-DD, got {raw:?}"))
                })
            })
            .transpose()
    };
    let (from, to) = (date("from")?, date("to")?);
    let (days, range) = match (from, to) {
        (None, None) => {
            let days = query_usize(&q, "days", 7, max)?;
            if days == 0 {
                return Err(Error::invalid("days", format!("must be between 1 and {max}")).into());
            }
            (days, None)
        }
        (None, Some(_)) => return Err(Error::invalid("from", "is required with to").into()),
        (Some(from), to) => {
            if q.contains_key("days") {
                return Err(Error::invalid("days", "give days or from, not both").into());
            }
            let to = to.unwrap_or(today);
            if to > today {
                return Err(Error::invalid("to", format!("is after today ({today})")).into());
            }
            if from > to {
                return Err(Error::invalid("from", format!("is after to ({to})")).into());
            }
            let back = (today - from).num_days() + 1;
            if back > max as i64 {
                return Err(Error::invalid("from", format!("is more than {max} days back")).into());
            }
            (back as usize, Some((from, to)))
        }
    };
    let groups = caller.readable_groups();
    let mut rows = s.history.report(days as u32, s.report_zone, groups).await?;
    if let Some((from, to)) = range {
        rows.retain(|r| r.day >= from && r.day <= to);
    }
    let total = Totals {
        running_count: rows.iter().map(|r| u64::from(r.running_count)).sum(),
        success_count: rows.iter().map(|r| u64::from(r.success_count)).sum(),
        fail_count: rows.iter().map(|r| u64::from(r.fail_count)).sum(),
    };
    Ok(Json(Report {
        days: rows.len(),
        zone: s.report_zone.name().to_owned(),
        total,
        items: rows,
    }))
}

/// The daily report.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Report {
    /// Days reported.
    days: usize,
    /// The zone whose calendar days are counted (`report_zone`).
    zone: String,
    /// The counts of every day reported.
    total: Totals,
    items: Vec<ReportRow>,
}

/// Counts summed over the days reported.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Totals {
    running_count: u64,
    success_count: u64,
    fail_count: u64,
}

/// The longest retention asked through the API (a hundred years).
const MAX_RETENTION_DAYS: u32 = 36_500;

/// The retention this node applies, and the bounds a `POST` takes.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct RetentionSetting {
    /// Days of logs kept: the node's `persist.retention_days`, what a
    /// `POST` without `days` applies. Below `min_days`, retention is off.
    days: u32,
    /// The fewest days a `POST` may ask.
    min_days: u32,
    /// The most days a `POST` may ask.
    max_days: u32,
}

/// The log retention configured (`persist.retention_days`) and the days a
/// `POST` may ask, for a page that shows the setting before applying it.
/// Admins only (a read-only admin token may read it).
#[utoipa::path(get, path = "/api/v1/maintenance/retention", tag = "reports",
    responses((status = 200, description = "The configured retention.", body = RetentionSetting), ApiErrors))]
pub(super) async fn retention_setting(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<RetentionSetting>> {
    caller.require(Access::ReadAdmin, "retention")?;
    Ok(Json(RetentionSetting {
        days: s.retention_days,
        min_days: rondo_history::maintenance::MIN_RETENTION_DAYS,
        max_days: MAX_RETENTION_DAYS,
    }))
}

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
