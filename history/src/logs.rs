//! Reading trigger logs back (the persistence worker writes them): a job's
//! latest triggers and one trigger with its log lines. Read path only:
//! scheduling never waits on MySQL.

use serde::Serialize;
use sqlx::Row;
use sqlx::mysql::MySqlRow;

/// One `job_log` row as the API shows it: times in ms, codes as numbers,
/// `null` for what is not known yet (a trigger without a result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LogRow {
    pub trigger_id: Option<String>,
    pub job_id: Option<u64>,
    pub group: Option<String>,
    pub executor_id: Option<String>,
    pub handler: Option<String>,
    pub params: Option<String>,
    pub trigger_type: Option<String>,
    pub fire_ms: Option<i64>,
    pub shard_index: Option<i64>,
    pub shard_total: Option<i64>,
    pub retry_count: Option<i64>,
    pub trigger_ms: Option<i64>,
    pub trigger_code: Option<i64>,
    pub trigger_msg: Option<String>,
    pub handle_start_ms: Option<i64>,
    pub handle_ms: Option<i64>,
    pub handle_code: Option<i64>,
    pub handle_msg: Option<String>,
    pub alarm_status: Option<i64>,
    pub alarm_msg: Option<String>,
}

/// One log line of a trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LogLine {
    pub seq: Option<i64>,
    pub ts_ms: Option<i64>,
    pub line: Option<String>,
}

/// A trigger's log row (absent while only its lines arrived) and its lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TriggerLog {
    pub log: Option<LogRow>,
    pub lines: Vec<LogLine>,
}

pub(crate) const COLUMNS: &str = "trigger_id, job_id, group_app, executor_id, handler, params, \
     trigger_type, fire_ms, shard_index, shard_total, retry_count, trigger_code, trigger_msg, \
     CAST(UNIX_TIMESTAMP(trigger_time) * 1000 AS SIGNED) AS trigger_ms, \
     CAST(UNIX_TIMESTAMP(handle_start) * 1000 AS SIGNED) AS handle_start_ms, \
     CAST(UNIX_TIMESTAMP(handle_time) * 1000 AS SIGNED) AS handle_ms, \
     handle_code, handle_msg, alarm_status, alarm_msg";

pub(crate) const LINES: &str = "SELECT seq, ts_ms, line FROM job_log_line \
     WHERE trigger_id = ? AND seq > ? ORDER BY seq, ts_ms";

/// An integer column of any width, as i64 (sqlx reads every signed width
/// as i64 and every unsigned one as u64).
fn int(r: &MySqlRow, column: &str) -> Option<i64> {
    let signed = r.try_get::<Option<i64>, _>(column).ok().flatten();
    signed.or_else(|| {
        let unsigned = r.try_get::<Option<u64>, _>(column).ok().flatten();
        unsigned.and_then(|v| i64::try_from(v).ok())
    })
}

fn text(r: &MySqlRow, column: &str) -> Option<String> {
    r.try_get::<Option<String>, _>(column).ok().flatten()
}

pub(crate) fn log_row(r: &MySqlRow) -> LogRow {
    LogRow {
        trigger_id: text(r, "trigger_id"),
        job_id: int(r, "job_id").map(|v| v as u64),
        group: text(r, "group_app"),
        executor_id: text(r, "executor_id"),
        handler: text(r, "handler"),
        params: text(r, "params"),
        trigger_type: text(r, "trigger_type"),
        fire_ms: int(r, "fire_ms"),
        shard_index: int(r, "shard_index"),
        shard_total: int(r, "shard_total"),
        retry_count: int(r, "retry_count"),
        trigger_ms: int(r, "trigger_ms"),
        trigger_code: int(r, "trigger_code"),
        trigger_msg: text(r, "trigger_msg"),
        handle_start_ms: int(r, "handle_start_ms"),
        handle_ms: int(r, "handle_ms"),
        handle_code: int(r, "handle_code"),
        handle_msg: text(r, "handle_msg"),
        alarm_status: int(r, "alarm_status"),
        alarm_msg: text(r, "alarm_msg"),
    }
}

pub(crate) fn log_line(r: &MySqlRow) -> LogLine {
    LogLine {
        seq: int(r, "seq"),
        ts_ms: int(r, "ts_ms"),
        line: text(r, "line"),
    }
}

/// A trigger's status as the log list filters it (the daily report's three
/// kinds; the `state` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStatus {
    Running = 0,
    Success = 1,
    Failure = 2,
}

/// What the log list shows: every filter optional; `groups: None` is every
/// group. Newest first; `before` is the `(fire_ms, trigger_id)` of the last
/// row of the previous page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogQuery {
    pub groups: Option<Vec<String>>,
    pub job_id: Option<u64>,
    pub status: Option<LogStatus>,
    pub from_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub before: Option<(i64, String)>,
    pub limit: u32,
}

/// A page of log rows, newest first, and where the next one starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    pub items: Vec<LogRow>,
    /// `(fire_ms, trigger_id)` of the last row when there may be more.
    pub next: Option<(i64, String)>,
}

/// One page of `job_log` rows `query` finds (keyset pagination over an
/// index per filter).
pub(crate) async fn search(
    pool: &sqlx::MySqlPool,
    query: &LogQuery,
) -> Result<LogPage, crate::Error> {
    let mut filter = String::from("1 = 1");
    let mut ints: Vec<i64> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    // Binds go in order: the group names, then the numbers, then the cursor.
    if let Some(groups) = &query.groups {
        if groups.is_empty() {
            return Ok(LogPage {
                items: Vec::new(),
                next: None,
            });
        }
        filter.push_str(" AND group_app IN (");
        filter.push_str(&vec!["?"; groups.len()].join(", "));
        filter.push(')');
        texts.extend(groups.iter().cloned());
    }
    if let Some(job) = query.job_id {
        filter.push_str(" AND job_id = ?");
        ints.push(i64::try_from(job).unwrap_or(i64::MAX));
    }
    if let Some(status) = query.status {
        filter.push_str(" AND state = ?");
        ints.push(status as i64);
    }
    if let Some(from) = query.from_ms {
        filter.push_str(" AND fire_ms >= ?");
        ints.push(from);
    }
    if let Some(until) = query.until_ms {
        filter.push_str(" AND fire_ms < ?");
        ints.push(until);
    }
    if query.before.is_some() {
        filter.push_str(" AND fire_ms <= ? AND (fire_ms < ? OR trigger_id < ?)");
    }
    let sql = format!(
        "SELECT {COLUMNS} FROM job_log WHERE {filter} \
         ORDER BY fire_ms DESC, trigger_id DESC LIMIT ?"
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for t in &texts {
        q = q.bind(t);
    }
    for i in &ints {
        q = q.bind(i);
    }
    if let Some((fire_ms, trigger_id)) = &query.before {
        q = q.bind(fire_ms).bind(fire_ms).bind(trigger_id);
    }
    let rows = q.bind(query.limit).fetch_all(pool).await?;
    let items: Vec<LogRow> = rows.iter().map(log_row).collect();
    let next = (items.len() == query.limit as usize && query.limit > 0)
        .then(|| items.last())
        .flatten()
        .and_then(|last| Some((last.fire_ms?, last.trigger_id.clone()?)));
    Ok(LogPage { items, next })
}
