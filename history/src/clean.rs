//! Cleaning trigger logs by hand (XXL-JOB's 清理): a job's, a group's or
//! every job's logs older than an age, beyond the newest so many, or all,
//! with their log lines; a trigger still running stays. Deleted a chunk at a time, each chunk in a
//! transaction of its own, oldest first, so a big clean never holds long
//! locks and a clean cut short leaves the newest logs as they were.

use sqlx::MySqlPool;

use crate::Error;

/// Whose logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanScope {
    Job(u64),
    Group(String),
    /// Every group's (an admin's).
    All,
}

/// Which of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanRule {
    /// Logs of fires before this instant (ms).
    Before(i64),
    /// All but the newest `n` (by fire time; ties at the cut are kept).
    KeepNewest(u64),
    Everything,
}

/// Rows deleted per transaction.
const CHUNK: usize = 2_000;

/// Deletes the logs `rule` picks of `scope`, with their lines, and says
/// how many trigger logs went.
pub async fn clean_logs(
    pool: &MySqlPool,
    scope: &CleanScope,
    rule: CleanRule,
) -> Result<u64, Error> {
    let (scope_sql, scope_arg) = match scope {
        CleanScope::Job(id) => ("job_id = ?", Some(id.to_string())),
        CleanScope::Group(app) => ("group_app = ?", Some(app.clone())),
        CleanScope::All => ("1 = 1", None),
    };
    let before = match rule {
        CleanRule::Before(ms) => ms,
        CleanRule::Everything => i64::MAX,
        CleanRule::KeepNewest(n) => {
            if n == 0 {
                i64::MAX
            } else {
                let sql = format!(
                    "SELECT fire_ms FROM job_log WHERE {scope_sql} ORDER BY fire_ms DESC LIMIT 1 OFFSET ?"
                );
                let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql));
                if let Some(arg) = &scope_arg {
                    q = q.bind(arg);
                }
                match q.bind(n - 1).fetch_optional(pool).await? {
                    Some(nth_newest) => nth_newest,
                    None => return Ok(0),
                }
            }
        }
    };
    // A trigger still running (state 0) stays: its result would come back
    // to a half row.
    let pick = format!(
        "SELECT trigger_id, fire_ms FROM job_log WHERE {scope_sql} AND fire_ms < ? \
         AND state <> 0 ORDER BY fire_ms LIMIT {CHUNK}"
    );
    let mut deleted = 0u64;
    loop {
        let mut tx = pool.begin().await?;
        let mut q = sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(pick.clone()));
        if let Some(arg) = &scope_arg {
            q = q.bind(arg);
        }
        let rows = q.bind(before).fetch_all(&mut *tx).await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(deleted);
        }
        let marks = vec!["?"; rows.len()].join(", ");
        let lines = format!("DELETE FROM job_log_line WHERE trigger_id IN ({marks})");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(lines));
        for (trigger_id, _) in &rows {
            q = q.bind(trigger_id);
        }
        q.execute(&mut *tx).await?;
        let pairs = vec!["(?, ?)"; rows.len()].join(", ");
        let logs = format!("DELETE FROM job_log WHERE (trigger_id, fire_ms) IN ({pairs})");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(logs));
        for (trigger_id, fire_ms) in &rows {
            q = q.bind(trigger_id).bind(fire_ms);
        }
        deleted += q.execute(&mut *tx).await?.rows_affected();
        tx.commit().await?;
        if rows.len() < CHUNK {
            return Ok(deleted);
        }
    }
}
