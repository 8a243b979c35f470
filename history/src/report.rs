//! The daily report (XXL-JOB's `xxl_job_log_report`): per UTC day of
//! `fire_ms`, how many triggers are running, succeeded and failed.
//!
//! * running: the trigger was sent (`trigger_code` 200) and no result has
//!   arrived (`handle_code` NULL or 0);
//! * success: the handler answered 200;
//! * fail: anything else that has an outcome: the trigger failed
//!   (`trigger_code` not 200) or the handler answered another code.
//!
//! The three are disjoint. Each day is counted with a range on `fire_ms`,
//! which reads one day partition of `job_log`. Days are computed from epoch
//! milliseconds, not with the session's time zone, so any pool can call
//! these functions.

use chrono::NaiveDate;
use serde::Serialize;
use sqlx::MySqlPool;

use crate::partitions::{DAY_MS, date_of_day, day_of};

/// The most days a report covers (a year and a day).
pub const MAX_DAYS: u32 = 366;

/// One day of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct ReportRow {
    /// The UTC day.
    #[schema(value_type = String, format = Date)]
    pub day: NaiveDate,
    pub running_count: u32,
    pub success_count: u32,
    pub fail_count: u32,
}

const COUNT_DAY: &str = "SELECT \
     CAST(COALESCE(SUM(trigger_code = 200 AND COALESCE(handle_code, 0) = 0), 0) AS UNSIGNED), \
     CAST(COALESCE(SUM(handle_code = 200), 0) AS UNSIGNED), \
     CAST(COALESCE(SUM(COALESCE(handle_code, 0) <> 200 AND (trigger_code <> 200 \
         OR COALESCE(handle_code, 0) NOT IN (0, 200))), 0) AS UNSIGNED) \
     FROM job_log WHERE fire_ms >= ? AND fire_ms < ?";

const UPSERT: &str = "INSERT INTO log_report (day, running_count, success_count, fail_count) \
     VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE running_count = VALUES(running_count), \
     success_count = VALUES(success_count), fail_count = VALUES(fail_count)";

/// Recomputes the report of the last `days_back` days up to `now_ms`'s day
/// (today included; at least one day, at most [`MAX_DAYS`]) from `job_log`,
/// and returns those days' rows, oldest first. Idempotent; days without any
/// trigger get a row of zeros, as in XXL-JOB.
pub async fn refresh_at(
    pool: &MySqlPool,
    days_back: u32,
    now_ms: i64,
) -> Result<Vec<ReportRow>, crate::Error> {
    let today = day_of(now_ms);
    let days = i64::from(days_back.clamp(1, MAX_DAYS));
    let mut out = Vec::new();
    for day in today - days + 1..=today {
        let row = count_day(pool, day).await?;
        sqlx::query(UPSERT)
            .bind(row.day)
            .bind(row.running_count)
            .bind(row.success_count)
            .bind(row.fail_count)
            .execute(pool)
            .await?;
        out.push(row);
    }
    Ok(out)
}

/// [`refresh_at`] now.
pub async fn refresh(pool: &MySqlPool, days_back: u32) -> Result<Vec<ReportRow>, crate::Error> {
    refresh_at(pool, days_back, rondo_core::clock::now_ms()).await
}

async fn count_day(pool: &MySqlPool, day: i64) -> sqlx::Result<ReportRow> {
    let (running, success, fail): (u64, u64, u64) = sqlx::query_as(COUNT_DAY)
        .bind(day * DAY_MS)
        .bind((day + 1) * DAY_MS)
        .fetch_one(pool)
        .await?;
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(ReportRow {
        day: date_of_day(day),
        running_count: clamp(running),
        success_count: clamp(success),
        fail_count: clamp(fail),
    })
}

/// The stored report rows from `since` on, oldest first.
pub async fn read(pool: &MySqlPool, since: NaiveDate) -> Result<Vec<ReportRow>, crate::Error> {
    Ok(sqlx::query_as(
        "SELECT day, running_count, success_count, fail_count FROM log_report \
         WHERE day >= ? ORDER BY day",
    )
    .bind(since)
    .fetch_all(pool)
    .await?)
}
