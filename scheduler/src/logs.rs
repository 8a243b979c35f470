//! Reading trigger logs back from MySQL for the API (the persistence worker
//! writes them). Read path only: scheduling never waits on MySQL.

use rondo_core::Error;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions, MySqlRow};

#[derive(Clone)]
pub struct LogReader {
    pool: MySqlPool,
}

fn db_err(e: sqlx::Error) -> Error {
    Error::unavailable(format!("mysql: {e}"))
}

const COLUMNS: &str = "trigger_id, job_id, group_app, executor_id, handler, params, trigger_type, fire_ms, \
     shard_index, shard_total, retry_count, trigger_code, trigger_msg, \
     CAST(UNIX_TIMESTAMP(trigger_time) * 1000 AS SIGNED) AS trigger_ms, \
     CAST(UNIX_TIMESTAMP(handle_start) * 1000 AS SIGNED) AS handle_start_ms, \
     CAST(UNIX_TIMESTAMP(handle_time) * 1000 AS SIGNED) AS handle_ms, \
     handle_code, handle_msg, alarm_status, alarm_msg";

impl LogReader {
    /// A lazy pool: the API starts even while MySQL is down, and log
    /// requests answer 503 until it is back.
    pub fn connect_lazy(url: &str, max: u32) -> Result<Self, Error> {
        let pool = MySqlPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(std::time::Duration::from_secs(3))
            .connect_lazy(url)
            .map_err(|e| Error::invalid("mysql.url", e.to_string()))?;
        Ok(LogReader { pool })
    }

    /// The MySQL pool, for the report and retention endpoints (which call
    /// the persistence worker's library).
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// The latest trigger logs of a job, newest first.
    pub async fn by_job(&self, job_id: u64, limit: usize) -> Result<Vec<Value>, Error> {
        let sql = format!(
            "SELECT {COLUMNS} FROM job_log WHERE job_id = ? ORDER BY fire_ms DESC, trigger_id DESC LIMIT ?"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job_id)
            .bind(limit as u64)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(rows.iter().map(row_json).collect())
    }

    /// One trigger's log row and its log lines.
    pub async fn one(&self, trigger_id: &str) -> Result<Value, Error> {
        let sql = format!("SELECT {COLUMNS} FROM job_log WHERE trigger_id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(trigger_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        let lines = sqlx::query(
            "SELECT seq, ts_ms, line FROM job_log_line WHERE trigger_id = ? ORDER BY seq, ts_ms",
        )
        .bind(trigger_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        if row.is_none() && lines.is_empty() {
            return Err(Error::not_found(
                "trigger_id",
                format!("no trigger {trigger_id}"),
            ));
        }
        let lines: Vec<Value> = lines
            .iter()
            .map(|l| json!({ "seq": l.try_get::<i32, _>("seq").ok(), "ts_ms": l.try_get::<i64, _>("ts_ms").ok(), "line": l.try_get::<String, _>("line").ok() }))
            .collect();
        Ok(json!({ "log": row.as_ref().map(row_json), "lines": lines }))
    }
}

fn row_json(r: &MySqlRow) -> Value {
    let s = |c: &str| r.try_get::<Option<String>, _>(c).ok().flatten();
    let i = |c: &str| r.try_get::<Option<i64>, _>(c).ok().flatten();
    let u = |c: &str| {
        r.try_get::<Option<u64>, _>(c)
            .ok()
            .flatten()
            .map(|v| v as i64)
            .or_else(|| i(c))
    };
    let n = |c: &str| {
        r.try_get::<Option<i32>, _>(c)
            .ok()
            .flatten()
            .map(i64::from)
            .or_else(|| u(c))
    };
    json!({
        "trigger_id": s("trigger_id"),
        "job_id": u("job_id"),
        "group": s("group_app"),
        "executor_id": s("executor_id"),
        "handler": s("handler"),
        "params": s("params"),
        "trigger_type": s("trigger_type"),
        "fire_ms": i("fire_ms"),
        "shard_index": n("shard_index"),
        "shard_total": n("shard_total"),
        "retry_count": n("retry_count"),
        "trigger_ms": i("trigger_ms"),
        "trigger_code": n("trigger_code"),
        "trigger_msg": s("trigger_msg"),
        "handle_start_ms": i("handle_start_ms"),
        "handle_ms": i("handle_ms"),
        "handle_code": n("handle_code"),
        "handle_msg": s("handle_msg"),
        "alarm_status": n("alarm_status"),
        "alarm_msg": s("alarm_msg"),
    })
}
