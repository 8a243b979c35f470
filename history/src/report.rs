//! The daily report (XXL-JOB's `xxl_job_log_report`): per calendar day of
//! `fire_ms` in the report's zone (the config's `report_zone`; UTC unless
//! set), how many triggers are running, succeeded and failed.
//!
//! * running: no outcome yet: the trigger was sent (`trigger_code` 200) or
//!   its record has not arrived yet (a log line or a start came first), and
//!   no result has arrived (`handle_code` NULL or 0);
//! * success: the handler answered 200;
//! * fail: anything else that has an outcome: the trigger failed
//!   (`trigger_code` not 200) or the handler answered another code.
//!
//! The three are disjoint, and they are `job_log.state` (0, 1, 2), the
//! stored column the log list filters on, so a day's counts and the log
//! list filtered by status agree. Each day is counted with a range on `fire_ms`
//! from the day's first instant in the zone to the next day's (23 or 25
//! hours on a daylight-saving day; a day whose midnight the zone skips
//! starts at its first valid minute), which reads one or two day
//! partitions of `job_log`. Bounds are computed here with the IANA rules
//! (`chrono-tz`), not with MySQL's time zone tables, so any pool can call
//! these functions. A `day` row holds the counts of the zone that last
//! refreshed it: after a change of `report_zone`, the days refreshed since
//! (the last three, every pass) follow the new zone.

use chrono::{Days, NaiveDate, NaiveTime, TimeZone};
use chrono_tz::Tz;
use serde::Serialize;
use sqlx::MySqlPool;

/// The most days a report covers (a year and a day).
pub const MAX_DAYS: u32 = 366;

/// One day of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct ReportRow {
    /// The day, in the report's zone.
    #[schema(value_type = String, format = Date)]
    pub day: NaiveDate,
    pub running_count: u32,
    pub success_count: u32,
    pub fail_count: u32,
}

const COUNT_DAY: &str = "SELECT \
     CAST(COALESCE(SUM(state = 0), 0) AS UNSIGNED), \
     CAST(COALESCE(SUM(state = 1), 0) AS UNSIGNED), \
     CAST(COALESCE(SUM(state = 2), 0) AS UNSIGNED) \
     FROM job_log WHERE fire_ms >= ? AND fire_ms < ?";

/// Days a read recounts, today included: a result can still land for
/// yesterday's fires; older days are read as the maintenance pass stored
/// them (it recounts the last [`crate::maintenance::REPORT_DAYS`]).
const RECOUNTED_DAYS: u64 = 2;

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
    refresh_in(pool, days_back, now_ms, Tz::UTC).await
}

/// [`refresh_at`] with the days of `zone`.
pub async fn refresh_in(
    pool: &MySqlPool,
    days_back: u32,
    now_ms: i64,
    zone: Tz,
) -> Result<Vec<ReportRow>, crate::Error> {
    let (today, days) = span(days_back, now_ms, zone);
    let mut out = Vec::new();
    for back in (0..days).rev() {
        let day = today.checked_sub_days(Days::new(back)).unwrap_or(today);
        out.push(recount(pool, day, zone).await?);
    }
    Ok(out)
}

/// `now_ms`'s day in `zone`, and how many days back a report covers
/// (at least one, at most [`MAX_DAYS`]).
fn span(days_back: u32, now_ms: i64, zone: Tz) -> (NaiveDate, u64) {
    let today = zone
        .timestamp_millis_opt(now_ms)
        .single()
        .map(|t| t.date_naive())
        .unwrap_or_default();
    (today, u64::from(days_back.clamp(1, MAX_DAYS)))
}

/// Counts one day from `job_log` and stores the row.
async fn recount(pool: &MySqlPool, day: NaiveDate, zone: Tz) -> sqlx::Result<ReportRow> {
    let row = count_day(pool, day, zone).await?;
    sqlx::query(UPSERT)
        .bind(row.day)
        .bind(row.running_count)
        .bind(row.success_count)
        .bind(row.fail_count)
        .execute(pool)
        .await?;
    Ok(row)
}

/// The report of the last `days_back` days up to `now_ms`'s day, oldest
/// first, for a page that asks often: today and yesterday are recounted;
/// older days come from `log_report` as stored, and only a day without a
/// stored row is counted (and stored).
pub async fn current_in(
    pool: &MySqlPool,
    days_back: u32,
    now_ms: i64,
    zone: Tz,
) -> Result<Vec<ReportRow>, crate::Error> {
    let (today, days) = span(days_back, now_ms, zone);
    let first = today.checked_sub_days(Days::new(days - 1)).unwrap_or(today);
    let stored = read(pool, first).await?;
    let mut out = Vec::new();
    for back in (0..days).rev() {
        let day = today.checked_sub_days(Days::new(back)).unwrap_or(today);
        let kept = stored.iter().find(|r| r.day == day);
        match kept {
            Some(row) if back >= RECOUNTED_DAYS => out.push(row.clone()),
            _ => out.push(recount(pool, day, zone).await?),
        }
    }
    Ok(out)
}

/// [`refresh_in`] now.
pub async fn refresh(
    pool: &MySqlPool,
    days_back: u32,
    zone: Tz,
) -> Result<Vec<ReportRow>, crate::Error> {
    refresh_in(pool, days_back, rondo_core::clock::now_ms(), zone).await
}

/// The first instant (ms) of `day` in `zone`: its midnight, or, where the
/// zone skips midnight (a daylight-saving change at 00:00), the first valid
/// minute after it; of a repeated midnight, the earlier.
pub fn day_start(zone: Tz, day: NaiveDate) -> i64 {
    let mut at = day.and_time(NaiveTime::MIN);
    for _ in 0..=24 * 60 {
        if let Some(t) = zone.from_local_datetime(&at).earliest() {
            return t.timestamp_millis();
        }
        at += chrono::Duration::minutes(1);
    }
    day.and_time(NaiveTime::MIN).and_utc().timestamp_millis()
}

async fn count_day(pool: &MySqlPool, day: NaiveDate, zone: Tz) -> sqlx::Result<ReportRow> {
    let next = day.checked_add_days(Days::new(1)).unwrap_or(day);
    let (running, success, fail): (u64, u64, u64) = sqlx::query_as(COUNT_DAY)
        .bind(day_start(zone, day))
        .bind(day_start(zone, next))
        .fetch_one(pool)
        .await?;
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(ReportRow {
        day,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn days_start_at_the_zones_midnight_and_last_23_or_25_hours_across_dst() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let shanghai: Tz = "Asia/Shanghai".parse().unwrap();
        assert_eq!(
            day_start(shanghai, d("2026-11-24")),
            ms("2026-11-23T16:00:00Z")
        );
        let ny: Tz = "America/New_York".parse().unwrap();
        let hours = |a: &str, b: &str| (day_start(ny, d(b)) - day_start(ny, d(a))) / 3_600_000;
        assert_eq!(hours("2026-03-08", "2026-03-09"), 23, "spring forward");
        assert_eq!(hours("2026-11-01", "2026-11-02"), 25, "fall back");
        // Santiago moves its clocks at midnight: the day starts at 01:00.
        let santiago: Tz = "America/Santiago".parse().unwrap();
        assert_eq!(
            day_start(santiago, d("2026-09-06")),
            ms("2026-09-06T01:00:00-03:00")
        );
        assert_eq!(
            day_start(Tz::UTC, d("2026-11-24")),
            ms("2026-11-24T00:00:00Z")
        );
    }
}
