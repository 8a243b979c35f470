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
//!
//! Each day is counted per group as well (`log_report_group`), so that a
//! user who may read some groups is shown the runs of those groups only.

use std::collections::BTreeSet;

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

const COUNT_DAY: &str = "SELECT group_app, \
     CAST(COALESCE(SUM(state = 0), 0) AS UNSIGNED), \
     CAST(COALESCE(SUM(state = 1), 0) AS UNSIGNED), \
     CAST(COALESCE(SUM(state = 2), 0) AS UNSIGNED) \
     FROM job_log WHERE fire_ms >= ? AND fire_ms < ? GROUP BY group_app";

/// Days a read recounts, today included: a result can still land for
/// yesterday's fires; older days are read as the maintenance pass stored
/// them (it recounts the last [`crate::maintenance::REPORT_DAYS`]).
const RECOUNTED_DAYS: u64 = 2;

const UPSERT: &str = "INSERT INTO log_report (day, running_count, success_count, fail_count, by_group) \
     VALUES (?, ?, ?, ?, 1) ON DUPLICATE KEY UPDATE running_count = VALUES(running_count), \
     success_count = VALUES(success_count), fail_count = VALUES(fail_count), by_group = 1";

/// A day's counts: the total, and by group.
struct Counted {
    total: ReportRow,
    by_group: Vec<(String, ReportRow)>,
}

impl Counted {
    /// The day's counts of `groups` only.
    fn of(&self, groups: &BTreeSet<String>) -> ReportRow {
        let mut row = zero(self.total.day);
        for (_, g) in self.by_group.iter().filter(|(app, _)| groups.contains(app)) {
            add(&mut row, g);
        }
        row
    }
}

fn zero(day: NaiveDate) -> ReportRow {
    ReportRow {
        day,
        running_count: 0,
        success_count: 0,
        fail_count: 0,
    }
}

fn add(to: &mut ReportRow, row: &ReportRow) {
    to.running_count = to.running_count.saturating_add(row.running_count);
    to.success_count = to.success_count.saturating_add(row.success_count);
    to.fail_count = to.fail_count.saturating_add(row.fail_count);
}

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
        out.push(recount(pool, day, zone).await?.total);
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

/// Counts one day from `job_log` and stores its rows, the total and each
/// group's, in one transaction.
async fn recount(pool: &MySqlPool, day: NaiveDate, zone: Tz) -> sqlx::Result<Counted> {
    let counted = count_day(pool, day, zone).await?;
    let mut tx = pool.begin().await?;
    let row = &counted.total;
    sqlx::query(UPSERT)
        .bind(row.day)
        .bind(row.running_count)
        .bind(row.success_count)
        .bind(row.fail_count)
        .execute(&mut *tx)
        .await?;
    write_groups(&mut tx, day, &counted.by_group).await?;
    tx.commit().await?;
    Ok(counted)
}

/// The report of the last `days_back` days up to `now_ms`'s day, oldest
/// first, for a page that asks often: today and yesterday are recounted;
/// older days come from `log_report` as stored, and only a day without a
/// stored row is counted (and stored). `groups`: the runs of those groups
/// only (`None`: every run); a day stored before the per-group counts
/// existed is counted by group while its logs still add up to its stored
/// total, and shows none of the groups' runs once they do not.
pub async fn current_in(
    pool: &MySqlPool,
    days_back: u32,
    now_ms: i64,
    zone: Tz,
    groups: Option<&BTreeSet<String>>,
) -> Result<Vec<ReportRow>, crate::Error> {
    let (today, days) = span(days_back, now_ms, zone);
    let first = today.checked_sub_days(Days::new(days - 1)).unwrap_or(today);
    let stored = read(pool, first).await?;
    let counted_by_group: BTreeSet<NaiveDate> =
        sqlx::query_scalar("SELECT day FROM log_report WHERE day >= ? AND by_group = 1")
            .bind(first)
            .fetch_all(pool)
            .await?
            .into_iter()
            .collect();
    let stored_of_groups = match groups {
        Some(groups) => read_groups(pool, first, groups).await?,
        None => Vec::new(),
    };
    let mut out = Vec::new();
    for back in (0..days).rev() {
        let day = today.checked_sub_days(Days::new(back)).unwrap_or(today);
        let recent = back < RECOUNTED_DAYS;
        let kept = stored.iter().find(|r| r.day == day);
        let row = match (groups, kept) {
            (None, Some(row)) if !recent => row.clone(),
            (None, _) => recount(pool, day, zone).await?.total,
            (Some(_), _) if !recent && counted_by_group.contains(&day) => stored_of_groups
                .iter()
                .find(|r| r.day == day)
                .cloned()
                .unwrap_or_else(|| zero(day)),
            // Stored before the per-group counts: counted by group while
            // the day's logs still add up to its total, never written over
            // (retention may have dropped them; the total stays).
            (Some(groups), Some(total)) if !recent => {
                match backfill(pool, day, zone, total).await? {
                    Some(counted) => counted.of(groups),
                    None => zero(day),
                }
            }
            (Some(groups), _) => recount(pool, day, zone).await?.of(groups),
        };
        out.push(row);
    }
    Ok(out)
}

/// Counts `day` by group from `job_log` and stores the group rows, when
/// they add up to the day's stored `total`; `None` (nothing written) when
/// they do not, as after retention dropped the day's logs.
async fn backfill(
    pool: &MySqlPool,
    day: NaiveDate,
    zone: Tz,
    total: &ReportRow,
) -> sqlx::Result<Option<Counted>> {
    let counted = count_day(pool, day, zone).await?;
    if counted.total != *total {
        return Ok(None);
    }
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE log_report SET by_group = 1 WHERE day = ?")
        .bind(day)
        .execute(&mut *tx)
        .await?;
    write_groups(&mut tx, day, &counted.by_group).await?;
    tx.commit().await?;
    Ok(Some(counted))
}

/// Replaces `day`'s group rows with `by_group`.
async fn write_groups(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    day: NaiveDate,
    by_group: &[(String, ReportRow)],
) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM log_report_group WHERE day = ?")
        .bind(day)
        .execute(&mut **tx)
        .await?;
    if !by_group.is_empty() {
        let mut insert = sqlx::QueryBuilder::new(
            "INSERT INTO log_report_group (day, group_app, running_count, success_count, fail_count) ",
        );
        insert.push_values(by_group, |mut b, (app, g)| {
            b.push_bind(day)
                .push_bind(app)
                .push_bind(g.running_count)
                .push_bind(g.success_count)
                .push_bind(g.fail_count);
        });
        insert.build().execute(&mut **tx).await?;
    }
    Ok(())
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

async fn count_day(pool: &MySqlPool, day: NaiveDate, zone: Tz) -> sqlx::Result<Counted> {
    let next = day.checked_add_days(Days::new(1)).unwrap_or(day);
    let rows: Vec<(String, u64, u64, u64)> = sqlx::query_as(COUNT_DAY)
        .bind(day_start(zone, day))
        .bind(day_start(zone, next))
        .fetch_all(pool)
        .await?;
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let mut total = zero(day);
    let by_group = rows
        .into_iter()
        .map(|(app, running, success, fail)| {
            let row = ReportRow {
                day,
                running_count: clamp(running),
                success_count: clamp(success),
                fail_count: clamp(fail),
            };
            add(&mut total, &row);
            (app, row)
        })
        .collect();
    Ok(Counted { total, by_group })
}

/// The stored rows of `groups` from `since` on, summed per day, oldest
/// first (days none of them ran are absent).
async fn read_groups(
    pool: &MySqlPool,
    since: NaiveDate,
    groups: &BTreeSet<String>,
) -> Result<Vec<ReportRow>, crate::Error> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = sqlx::QueryBuilder::new(
        "SELECT day, CAST(SUM(running_count) AS UNSIGNED), CAST(SUM(success_count) AS UNSIGNED), \
         CAST(SUM(fail_count) AS UNSIGNED) FROM log_report_group WHERE day >= ",
    );
    q.push_bind(since).push(" AND group_app IN (");
    let mut list = q.separated(", ");
    for g in groups {
        list.push_bind(g);
    }
    q.push(") GROUP BY day ORDER BY day");
    let rows: Vec<(NaiveDate, u64, u64, u64)> = q.build_query_as().fetch_all(pool).await?;
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(rows
        .into_iter()
        .map(|(day, running, success, fail)| ReportRow {
            day,
            running_count: clamp(running),
            success_count: clamp(success),
            fail_count: clamp(fail),
        })
        .collect())
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
