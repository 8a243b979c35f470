//! The day partitions of the log tables (see the migration
//! `20260301000001_log_partitions.sql`): one `pYYYYMMDD` per UTC day of
//! epoch milliseconds, `VALUES LESS THAN (<start of the next day>)`, and a
//! catch-all `pmax`.
//!
//! * [`ensure`] splits day partitions off `pmax` up to a few days ahead.
//! * [`drop_before`] drops the day partitions whose rows are all older than
//!   a day boundary: retention without a row-by-row `DELETE`.
//!
//! Partitions are chosen by their bounds, never by their names, so the
//! first partition of a table (which also holds every older row) is
//! dropped like any other once its bound is old enough.

use chrono::{DateTime, NaiveDate};
use sqlx::{MySqlConnection, Row as _};

/// Milliseconds in a UTC day (epoch days have no leap seconds).
pub const DAY_MS: i64 = 86_400_000;
/// Day partitions made ahead of today, so that writes never land in `pmax`
/// while the worker runs (a fire is at most seconds in the future).
pub const DAYS_AHEAD: i64 = 3;
/// The catch-all partition.
const PMAX: &str = "pmax";
/// When a table has no day partition yet (fresh or upgraded), the first one
/// starts at its oldest row's day, but not before this many days ago: older
/// rows share that first partition.
const MAX_BACKFILL_DAYS: i64 = 400;

/// The log tables and the column each is partitioned by.
pub const LOG_TABLES: [(&str, &str); 2] = [("job_log", "fire_ms"), ("job_log_line", "ts_ms")];

/// The epoch day of a time in ms (floor, so negative times work).
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// The UTC date of an epoch day.
pub fn date_of_day(day: i64) -> NaiveDate {
    DateTime::from_timestamp_millis(day.saturating_mul(DAY_MS))
        .unwrap_or_default()
        .date_naive()
}

/// `pYYYYMMDD` of an epoch day.
pub fn partition_name(day: i64) -> String {
    format!("p{}", date_of_day(day).format("%Y%m%d"))
}

/// One partition of a table: its name and exclusive upper bound in ms
/// (`None` for `MAXVALUE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    pub less_than: Option<i64>,
}

/// The partitions of `table` in the current database, in order. Empty when
/// the table is not partitioned.
pub async fn list(conn: &mut MySqlConnection, table: &str) -> sqlx::Result<Vec<Partition>> {
    let rows = sqlx::query(
        "SELECT CAST(PARTITION_NAME AS CHAR) AS name, \
         CAST(PARTITION_DESCRIPTION AS CHAR) AS bound \
         FROM information_schema.PARTITIONS \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL \
         ORDER BY PARTITION_ORDINAL_POSITION",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let name: String = row.try_get("name")?;
        let bound: Option<String> = row.try_get("bound")?;
        let less_than = bound.and_then(|b| b.trim().parse().ok());
        out.push(Partition { name, less_than });
    }
    Ok(out)
}

/// The epoch days to add a partition for, in order, so that every day up to
/// `last_day` has one. `first_day` is where a table without any day
/// partition starts.
pub fn missing_days(existing: &[Partition], first_day: i64, last_day: i64) -> Vec<i64> {
    let covered_until = existing.iter().filter_map(|p| p.less_than).max();
    let start = match covered_until {
        // The bound is the start of the first day not covered yet.
        Some(bound) => day_of(bound + DAY_MS - 1),
        None => first_day,
    };
    (start..=last_day).collect()
}

/// The day partitions that hold only rows older than `cutoff_ms`.
pub fn older_than(existing: &[Partition], cutoff_ms: i64) -> Vec<&Partition> {
    existing
        .iter()
        .filter(|p| p.name != PMAX && p.less_than.is_some_and(|b| b <= cutoff_ms))
        .collect()
}

/// Makes day partitions for every day up to `DAYS_AHEAD` after `now_ms`'s
/// day, in every log table. Returns how many were added.
pub async fn ensure(conn: &mut MySqlConnection, now_ms: i64) -> sqlx::Result<usize> {
    let mut added = 0;
    for (table, column) in LOG_TABLES {
        added += ensure_table(conn, table, column, now_ms).await?;
    }
    Ok(added)
}

async fn ensure_table(
    conn: &mut MySqlConnection,
    table: &str,
    column: &str,
    now_ms: i64,
) -> sqlx::Result<usize> {
    let existing = list(conn, table).await?;
    if !existing.iter().any(|p| p.name == PMAX) {
        tracing::warn!(table, "not partitioned with a pmax partition; skipped");
        return Ok(0);
    }
    let today = day_of(now_ms);
    let first_day = if existing.iter().any(|p| p.less_than.is_some()) {
        today
    } else {
        oldest_day(conn, table, column).await?.unwrap_or(today)
    }
    .clamp(today - MAX_BACKFILL_DAYS, today);
    let days = missing_days(&existing, first_day, today + DAYS_AHEAD);
    if days.is_empty() {
        return Ok(0);
    }
    let mut parts: Vec<String> = days
        .iter()
        .map(|day| {
            let bound = (day + 1) * DAY_MS;
            format!(
                "PARTITION {} VALUES LESS THAN ({bound})",
                partition_name(*day)
            )
        })
        .collect();
    parts.push(format!("PARTITION {PMAX} VALUES LESS THAN MAXVALUE"));
    let sql = format!(
        "ALTER TABLE {table} REORGANIZE PARTITION {PMAX} INTO ({})",
        parts.join(", ")
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut *conn)
        .await?;
    tracing::info!(table, added = days.len(), "day partitions added");
    Ok(days.len())
}

async fn oldest_day(
    conn: &mut MySqlConnection,
    table: &str,
    column: &str,
) -> sqlx::Result<Option<i64>> {
    let sql = format!("SELECT MIN({column}) FROM {table}");
    let oldest: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(&mut *conn)
        .await?;
    Ok(oldest.map(day_of))
}

/// What dropping the old days of one table removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Dropped {
    pub table: String,
    pub partitions: Vec<String>,
    pub rows: u64,
}

/// Drops, in every log table, the day partitions whose rows are all older
/// than `cutoff_ms`, counting their rows first.
pub async fn drop_before(conn: &mut MySqlConnection, cutoff_ms: i64) -> sqlx::Result<Vec<Dropped>> {
    let mut out = Vec::new();
    for (table, _) in LOG_TABLES {
        out.push(drop_table_before(conn, table, cutoff_ms).await?);
    }
    Ok(out)
}

async fn drop_table_before(
    conn: &mut MySqlConnection,
    table: &str,
    cutoff_ms: i64,
) -> sqlx::Result<Dropped> {
    let existing = list(conn, table).await?;
    let old: Vec<String> = older_than(&existing, cutoff_ms)
        .into_iter()
        .map(|p| p.name.clone())
        .collect();
    let mut dropped = Dropped {
        table: table.to_owned(),
        ..Dropped::default()
    };
    if old.is_empty() {
        return Ok(dropped);
    }
    let names = old.join(", ");
    let count = format!("SELECT COUNT(*) FROM {table} PARTITION ({names})");
    let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count))
        .fetch_one(&mut *conn)
        .await?;
    let drop = format!("ALTER TABLE {table} DROP PARTITION {names}");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(&mut *conn)
        .await?;
    dropped.rows = u64::try_from(rows).unwrap_or_default();
    dropped.partitions = old;
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(name: &str, less_than: Option<i64>) -> Partition {
        Partition {
            name: name.into(),
            less_than,
        }
    }

    #[test]
    fn days_are_utc_and_floor() {
        assert_eq!(day_of(0), 0);
        assert_eq!(day_of(DAY_MS - 1), 0);
        assert_eq!(day_of(DAY_MS), 1);
        assert_eq!(day_of(-1), -1);
        assert_eq!(partition_name(0), "p19700101");
        // 2026-03-01T00:00:00Z
        assert_eq!(partition_name(day_of(1_772_323_200_000)), "p20260301");
        assert_eq!(partition_name(day_of(1_772_323_199_999)), "p20260228");
    }

    #[test]
    fn missing_days_continue_after_the_last_bound() {
        let only_pmax = [part("pmax", None)];
        assert_eq!(missing_days(&only_pmax, 10, 13), vec![10, 11, 12, 13]);
        let some = [
            part("p1", Some(2 * DAY_MS)),
            part("p2", Some(3 * DAY_MS)),
            part("pmax", None),
        ];
        assert_eq!(missing_days(&some, 0, 5), vec![3, 4, 5]);
        assert!(missing_days(&some, 0, 2).is_empty());
    }

    #[test]
    fn only_day_partitions_wholly_before_the_cutoff_are_old() {
        let parts = [
            part("p0", Some(DAY_MS)),
            part("p1", Some(2 * DAY_MS)),
            part("p2", Some(3 * DAY_MS)),
            part("pmax", None),
        ];
        let names = |v: Vec<&Partition>| v.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(older_than(&parts, 2 * DAY_MS)), ["p0", "p1"]);
        assert_eq!(names(older_than(&parts, 2 * DAY_MS - 1)), ["p0"]);
        assert_eq!(names(older_than(&parts, i64::MAX)), ["p0", "p1", "p2"]);
    }
}
