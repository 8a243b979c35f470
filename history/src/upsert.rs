//! The multi-row upsert statements, one per table, and the rules that make
//! them idempotent and independent of arrival order.
//!
//! * `executor_group`, `job`: a row carries `updated_ms` and `deleted`. An
//!   incoming version wins when it is newer, or as new and at least as
//!   deleted, so the row ends as the greatest `(updated_ms, deleted)` version
//!   whatever the order. A delete is a tombstone with empty data columns (a
//!   tombstone that kept the last definition would depend on whether that
//!   definition arrived before or after it). A late older upsert never
//!   overwrites a newer one or resurrects a delete.
//! * `job_log`, trigger side: a trigger record wins when the row has none,
//!   when it succeeded (200) and the stored one did not, or when it has the
//!   same outcome and was sent at least as late. Only trigger columns move.
//! * `job_log`, handle side: a result wins when the row has none (or a
//!   running 0) or it ended at least as late. Only handle columns move, and
//!   `executor_id` while no trigger record is stored (the trigger's wins).
//! * `job_log`, alarm side: alarm records carry no time, so the row keeps
//!   the greatest by a fixed rank of outcomes, sent > failed > not needed >
//!   none (a trigger whose alarm got through once stays "sent" even if a
//!   redelivered result alarmed again and failed), then by message bytes to
//!   break ties. Only `alarm_status` and `alarm_msg` move.
//! * `job_log_line`: a line is written once per (trigger id, sequence,
//!   time); a redelivered line has the same time (the key includes `ts_ms`
//!   because the table is partitioned by it).
//!
//! MySQL evaluates `ON DUPLICATE KEY UPDATE` assignments left to right and a
//! later assignment sees the columns already changed, so the columns a
//! condition reads are always assigned last; each condition is written so
//! that it still holds after its own columns took the new values.

use std::fmt::Write as _;
use std::sync::LazyLock;

use sqlx::query_builder::Separated;
use sqlx::{MySql, MySqlConnection, QueryBuilder};

use crate::jobs::{JOB_COLUMNS, bind_job, job_data_columns};
use crate::rows::{AlarmRow, GroupRow, JobRow, LineRow, ResultRow, Rows, TriggerRow};
use rondo_core::Job;
use rondo_core::event::AuditRecord;
use rondo_core::model::GlueType;

/// Bind parameters per statement; MySQL's limit is 65,535.
const MAX_PLACEHOLDERS: usize = 10_000;
/// Bound data per statement, well under the smallest common
/// `max_allowed_packet` (4 MiB on MySQL 5.7).
const MAX_STATEMENT_BYTES: usize = 2 << 20;
/// Rough size of a bound number or date.
const SCALAR_BYTES: usize = 8;

/// An incoming definition version is at least as new as the stored one.
const NEWER_VERSION: &str = "(VALUES(updated_ms) > updated_ms \
     OR (VALUES(updated_ms) = updated_ms AND VALUES(deleted) >= deleted))";

static GROUP_UPDATE: LazyLock<String> =
    LazyLock::new(|| versioned_update(&["title", "xxl_addresses", "xxl_gateway", "xxl_access"]));

static JOB_UPDATE: LazyLock<String> = LazyLock::new(|| versioned_update(&job_data_columns()));

static TRIGGER_UPDATE: LazyLock<String> = LazyLock::new(|| {
    let ok = rondo_core::trigger::code::SUCCESS;
    let newer = format!(
        "(trigger_code IS NULL \
         OR (VALUES(trigger_code) = {ok}) > (trigger_code = {ok}) \
         OR ((VALUES(trigger_code) = {ok}) = (trigger_code = {ok}) \
             AND VALUES(trigger_time) >= trigger_time))"
    );
    let columns = [
        "job_id",
        "group_app",
        "executor_id",
        "handler",
        "params",
        "shard_index",
        "shard_total",
        "retry_count",
        "trigger_type",
        "trigger_msg",
        // Read by the condition: last, time before code.
        "trigger_time",
        "trigger_code",
    ];
    format!(" ON DUPLICATE KEY UPDATE {}", assignments(&newer, &columns))
});

static RESULT_UPDATE: LazyLock<String> = LazyLock::new(|| {
    let newer = "(handle_code IS NULL OR handle_code = 0 \
                 OR VALUES(handle_time) >= handle_time)";
    // The trigger event names the executor; until it is stored (the row may
    // have been made by an alarm), the winning result's executor stands in.
    let executor = assignments(
        &format!("(trigger_code IS NULL AND {newer})"),
        &["executor_id"],
    );
    // Read by the condition: last, time before code.
    let columns = ["handle_start", "handle_msg", "handle_time", "handle_code"];
    format!(
        " ON DUPLICATE KEY UPDATE {executor}, {}",
        assignments(newer, &columns)
    )
});

static ALARM_UPDATE: LazyLock<String> = LazyLock::new(|| {
    use rondo_core::event::alarm_status::{FAILED, NOT_NEEDED, SENT};
    // Anything else (0 default, XXL-JOB's -1 lock) ranks lowest.
    let rank = |col: &str| {
        format!(
            "(CASE {col} WHEN {SENT} THEN 3 WHEN {FAILED} THEN 2 \
             WHEN {NOT_NEEDED} THEN 1 ELSE 0 END)"
        )
    };
    let (new, old) = (rank("VALUES(alarm_status)"), rank("alarm_status"));
    let newer = format!(
        "({new} > {old} OR ({new} = {old} \
         AND COALESCE(VALUES(alarm_msg), '') >= COALESCE(alarm_msg, '')))"
    );
    // Read by the condition: the status last.
    let columns = ["alarm_msg", "alarm_status"];
    format!(" ON DUPLICATE KEY UPDATE {}", assignments(&newer, &columns))
});

/// `col = IF(cond, VALUES(col), col), …` in the given order.
fn assignments(condition: &str, columns: &[&str]) -> String {
    let mut sql = String::new();
    for (i, col) in columns.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(sql, "{sep}{col} = IF({condition}, VALUES({col}), {col})");
    }
    sql
}

/// The update clause of a versioned definition table: every column moves
/// only for a newer version; `deleted` and `updated_ms`, which the condition
/// reads, come last.
pub(crate) fn versioned_update(data_columns: &[&str]) -> String {
    let mut columns = data_columns.to_vec();
    columns.push("deleted");
    format!(
        " ON DUPLICATE KEY UPDATE {}, updated_ms = GREATEST(updated_ms, VALUES(updated_ms))",
        assignments(NEWER_VERSION, &columns),
    )
}

/// Splits rows into statements under both the placeholder and the byte
/// budget. A row larger than the byte budget gets a statement of its own.
pub(crate) fn chunks<T>(rows: &[T], columns: usize, bytes: impl Fn(&T) -> usize) -> Vec<&[T]> {
    debug_assert!(columns > 0 && columns <= MAX_PLACEHOLDERS);
    let max_rows = MAX_PLACEHOLDERS / columns;
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, row) in rows.iter().enumerate() {
        let row_bytes = bytes(row);
        let full = i - start == max_rows || size + row_bytes > MAX_STATEMENT_BYTES;
        if full && i > start {
            out.push(&rows[start..i]);
            (start, size) = (i, 0);
        }
        size += row_bytes;
    }
    if start < rows.len() {
        out.push(&rows[start..]);
    }
    out
}

/// Writes every table's rows, in a fixed table order, on one connection
/// (the caller's transaction).
pub(crate) async fn write_rows(conn: &mut MySqlConnection, rows: &Rows) -> sqlx::Result<()> {
    upsert_groups(conn, &rows.groups).await?;
    upsert_jobs(conn, &rows.jobs).await?;
    upsert_complete(conn, &rows.complete).await?;
    upsert_triggers(conn, &rows.triggers).await?;
    upsert_results(conn, &rows.results).await?;
    upsert_alarms(conn, &rows.alarms).await?;
    insert_lines(conn, &rows.lines).await?;
    insert_audit(conn, &rows.audit).await?;
    upsert_deleted_jobs(conn, &rows.deleted_jobs).await
}

/// Keeps each deleted job's last state, the latest deletion's.
async fn upsert_deleted_jobs(
    conn: &mut MySqlConnection,
    rows: &[crate::rows::DeletedJobRow],
) -> sqlx::Result<()> {
    for r in rows {
        sqlx::query(
            "INSERT INTO job_deleted (id, deleted_ms, job) VALUES (?, ?, ?) \
             ON DUPLICATE KEY UPDATE job = IF(VALUES(deleted_ms) >= deleted_ms, VALUES(job), job), \
             deleted_ms = GREATEST(deleted_ms, VALUES(deleted_ms))",
        )
        .bind(r.id)
        .bind(r.deleted_ms)
        .bind(&r.job)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

async fn upsert_groups(conn: &mut MySqlConnection, rows: &[GroupRow]) -> sqlx::Result<()> {
    let bytes = |r: &GroupRow| {
        r.app.len() + r.title.len() + r.xxl_addresses.len() + r.xxl_access.len() + 3 * SCALAR_BYTES
    };
    for chunk in chunks(rows, 7, bytes) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO executor_group (app, title, xxl_addresses, xxl_gateway, xxl_access, updated_ms, deleted) ",
        );
        qb.push_values(chunk, |mut b, r| {
            b.push_bind(&r.app)
                .push_bind(&r.title)
                .push_bind(&r.xxl_addresses)
                .push_bind(r.xxl_gateway)
                .push_bind(&r.xxl_access)
                .push_bind(r.updated_ms)
                .push_bind(r.deleted);
        });
        qb.push(GROUP_UPDATE.as_str());
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

fn job_bytes(r: &JobRow) -> usize {
    let j = &r.job;
    j.group.len()
        + j.description.len()
        + j.owner.len()
        + j.schedule_conf.len()
        + j.zone.len()
        + j.handler.len()
        + j.params.len()
        + j.alarm_email.len()
        + j.alarm_webhook.len()
        + j.alarm_channels.iter().map(|c| c.len() + 3).sum::<usize>()
        + j.glue_source.len()
        + j.glue_remark.len()
        + j.import_ref.len()
        + j.secrets
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>()
        + 20 * j.child_jobs.len()
        + 14 * SCALAR_BYTES
}

async fn upsert_jobs(conn: &mut MySqlConnection, rows: &[JobRow]) -> sqlx::Result<()> {
    let insert = format!("INSERT INTO job ({}) ", JOB_COLUMNS.join(", "));
    for chunk in chunks(rows, JOB_COLUMNS.len(), job_bytes) {
        let mut qb = QueryBuilder::<MySql>::new(insert.as_str());
        qb.push_values(chunk, |mut b, r| bind_job(&mut b, &r.job, r.deleted));
        qb.push(JOB_UPDATE.as_str());
        qb.build().execute(&mut *conn).await?;
    }
    insert_glue_versions(conn, rows).await
}

/// Script versions kept per job (XXL-JOB keeps 30).
pub const GLUE_VERSIONS_KEPT: u32 = 30;

/// One `job_glue` row per script version the job rows carry (a version
/// already stored is left as it is), then only the newest
/// [`GLUE_VERSIONS_KEPT`] of each of those jobs are kept; a deleted job's
/// versions go with it.
async fn insert_glue_versions(conn: &mut MySqlConnection, rows: &[JobRow]) -> sqlx::Result<()> {
    for gone in rows.iter().filter(|r| r.deleted) {
        sqlx::query("DELETE FROM job_glue WHERE job_id = ?")
            .bind(gone.job.id)
            .execute(&mut *conn)
            .await?;
    }
    let scripts: Vec<&Job> = rows
        .iter()
        .filter(|r| !r.deleted && r.job.glue_type != GlueType::Bean && r.job.glue_version > 0)
        .map(|r| &r.job)
        .collect();
    for job in scripts {
        sqlx::query(
            "INSERT IGNORE INTO job_glue (job_id, version, glue_type, glue_source, glue_remark, created_ms) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(job.id)
        .bind(job.glue_version)
        .bind(job.glue_type.as_str())
        .bind(&job.glue_source)
        .bind(&job.glue_remark)
        .bind(job.glue_updated_ms)
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM job_glue WHERE job_id = ? AND version + ? <= ?")
            .bind(job.id)
            .bind(GLUE_VERSIONS_KEPT)
            .bind(job.glue_version)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

fn trigger_bytes(r: &TriggerRow) -> usize {
    let t = &r.record.trigger;
    t.trigger_id.len()
        + t.group.len()
        + t.executor_id.len()
        + t.handler.len()
        + t.params.len()
        + r.msg.len()
        + 8 * SCALAR_BYTES
}

/// The 14 trigger-side values, in the column order of the trigger insert
/// (shared by the trigger and the complete-row statements).
fn bind_trigger(b: &mut Separated<'_, MySql, &'static str>, r: &TriggerRow) {
    let t = &r.record.trigger;
    b.push_bind(&t.trigger_id)
        .push_bind(t.fire_ms)
        .push_bind(t.job_id)
        .push_bind(&t.group)
        .push_bind(&t.executor_id)
        .push_bind(&t.handler)
        .push_bind(&t.params)
        .push_bind(t.shard_index)
        .push_bind(t.shard_total)
        .push_bind(t.retry_count)
        .push_bind(t.trigger_type.as_str())
        .push_bind(&r.msg)
        .push_bind(r.trigger_time)
        .push_bind(r.record.code);
}

async fn upsert_triggers(conn: &mut MySqlConnection, rows: &[TriggerRow]) -> sqlx::Result<()> {
    for chunk in chunks(rows, 14, trigger_bytes) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, executor_id, handler, \
             params, shard_index, shard_total, retry_count, trigger_type, trigger_msg, \
             trigger_time, trigger_code) ",
        );
        qb.push_values(chunk, |mut b, r| {
            bind_trigger(&mut b, r);
        });
        qb.push(TRIGGER_UPDATE.as_str());
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

async fn upsert_results(conn: &mut MySqlConnection, rows: &[ResultRow]) -> sqlx::Result<()> {
    let bytes = |r: &ResultRow| {
        r.result.trigger_id.len() + r.result.executor_id.len() + r.msg.len() + 6 * SCALAR_BYTES
    };
    for chunk in chunks(rows, 8, bytes) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, executor_id, \
             handle_start, handle_msg, handle_time, handle_code) ",
        );
        qb.push_values(chunk, |mut b, r| {
            let res = &r.result;
            b.push_bind(&res.trigger_id)
                .push_bind(res.fire_ms)
                .push_bind(res.job_id)
                .push_bind(&res.executor_id)
                .push_bind(r.handle_start)
                .push_bind(&r.msg)
                .push_bind(r.handle_time)
                .push_bind(res.code);
        });
        qb.push(RESULT_UPDATE.as_str());
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// A trigger and its result as one row: both sides' columns in one insert,
/// both sides' conditions on a duplicate (trigger side first, so the
/// result's executor stand-in sees the stored trigger).
static COMPLETE_UPDATE: LazyLock<String> = LazyLock::new(|| {
    let result_side = RESULT_UPDATE
        .trim_start()
        .trim_start_matches("ON DUPLICATE KEY UPDATE ");
    format!("{}, {result_side}", TRIGGER_UPDATE.as_str())
});

async fn upsert_complete(
    conn: &mut MySqlConnection,
    rows: &[(TriggerRow, ResultRow)],
) -> sqlx::Result<()> {
    let bytes =
        |(t, r): &(TriggerRow, ResultRow)| trigger_bytes(t) + r.msg.len() + 3 * SCALAR_BYTES;
    for chunk in chunks(rows, 18, bytes) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, executor_id, handler, \
             params, shard_index, shard_total, retry_count, trigger_type, trigger_msg, \
             trigger_time, trigger_code, handle_start, handle_msg, handle_time, handle_code) ",
        );
        qb.push_values(chunk, |mut b, (tr, rr)| {
            bind_trigger(&mut b, tr);
            b.push_bind(rr.handle_start)
                .push_bind(&rr.msg)
                .push_bind(rr.handle_time)
                .push_bind(rr.result.code);
        });
        qb.push(COMPLETE_UPDATE.as_str());
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

async fn upsert_alarms(conn: &mut MySqlConnection, rows: &[AlarmRow]) -> sqlx::Result<()> {
    let bytes = |r: &AlarmRow| r.record.trigger_id.len() + r.msg.len() + 3 * SCALAR_BYTES;
    for chunk in chunks(rows, 5, bytes) {
        // A row made here (the alarm came first) gets the trigger and handle
        // sides from their events later; `job_id` is only set on insert.
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, alarm_msg, alarm_status) ",
        );
        qb.push_values(chunk, |mut b, r| {
            let a = &r.record;
            b.push_bind(&a.trigger_id)
                .push_bind(a.fire_ms)
                .push_bind(a.job_id)
                .push_bind(&r.msg)
                .push_bind(a.status);
        });
        qb.push(ALARM_UPDATE.as_str());
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

async fn insert_lines(conn: &mut MySqlConnection, rows: &[LineRow]) -> sqlx::Result<()> {
    let bytes = |r: &LineRow| r.trigger_id.len() + r.line.len() + 2 * SCALAR_BYTES;
    for chunk in chunks(rows, 4, bytes) {
        let mut qb =
            QueryBuilder::<MySql>::new("INSERT INTO job_log_line (trigger_id, seq, ts_ms, line) ");
        qb.push_values(chunk, |mut b, r| {
            b.push_bind(&r.trigger_id)
                .push_bind(r.seq)
                .push_bind(r.ts_ms)
                .push_bind(&r.line);
        });
        // Not INSERT IGNORE: that would also turn data errors into warnings.
        qb.push(" ON DUPLICATE KEY UPDATE seq = seq");
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

async fn insert_audit(conn: &mut MySqlConnection, rows: &[AuditRecord]) -> sqlx::Result<()> {
    let bytes = |r: &AuditRecord| {
        r.id.len()
            + r.username.len()
            + r.action.len()
            + r.target.len()
            + r.group.as_ref().map_or(0, String::len)
            + r.address.len()
            + r.detail.as_ref().map_or(0, String::len)
            + SCALAR_BYTES
    };
    for chunk in chunks(rows, 8, bytes) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO audit_log (event_id, at_ms, username, action, target, group_app, address, detail) ",
        );
        qb.push_values(chunk, |mut b, r| {
            b.push_bind(&r.id)
                .push_bind(r.at_ms)
                .push_bind(&r.username)
                .push_bind(&r.action)
                .push_bind(&r.target)
                .push_bind(&r.group)
                .push_bind(&r.address)
                .push_bind(&r.detail);
        });
        // A record stored twice (a redelivery) keeps its first row.
        qb.push(" ON DUPLICATE KEY UPDATE event_id = event_id");
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
