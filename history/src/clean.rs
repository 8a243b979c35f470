//! Cleaning trigger logs by hand (XXL-JOB's 清理): a job's, a group's or
//! every job's logs older than an age, beyond the newest so many, or all,
//! with their log lines; a trigger still running stays. Deleted a chunk at a time, each chunk in a
//! transaction of its own, oldest first, so a big clean never holds long
//! locks and a clean cut short leaves the newest logs as they were.

use sqlx::MySqlPool;

use crate::Error;

/// Whose logs. A row is judged by the group it was run in
/// (`job_log.group_app`), not by the group its job is in now: a job moved
/// from A to B keeps its A runs as A's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanScope {
    /// One job's logs, of these groups only (`None`: of every group, an
    /// admin's).
    Job {
        id: u64,
        groups: Option<Vec<String>>,
    },
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

/// The `WHERE` condition of `scope` and its arguments; `None` when it
/// holds no row (a job's logs of no group).
fn scope_filter(scope: &CleanScope) -> Option<(String, Vec<String>)> {
    Some(match scope {
        CleanScope::Job { id, groups: None } => ("job_id = ?".into(), vec![id.to_string()]),
        CleanScope::Job {
            id,
            groups: Some(groups),
        } => {
            if groups.is_empty() {
                return None;
            }
            let marks = vec!["?"; groups.len()].join(", ");
            let mut args = vec![id.to_string()];
            args.extend(groups.iter().cloned());
            (format!("job_id = ? AND group_app IN ({marks})"), args)
        }
        CleanScope::Group(app) => ("group_app = ?".into(), vec![app.clone()]),
        CleanScope::All => ("1 = 1".into(), Vec::new()),
    })
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
    let Some((scope_sql, scope_args)) = scope_filter(scope) else {
        return Ok(0);
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
                for arg in &scope_args {
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
        for arg in &scope_args {
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
