//! The ceiling: the rows the worker ends with, inserted as fast as sqlx
//! and MySQL allow: `QueryBuilder::push_values` multi-row `INSERT`s (plain,
//! no `ON DUPLICATE KEY UPDATE`), one statement and one transaction per
//! batch, batches one after the other on one connection, rows sorted by key
//! within a batch (as the worker sorts them). The rows are built before the
//! clock starts: the ceiling is MySQL's and the driver's, not ours.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use sqlx::{MySql, MySqlPool, QueryBuilder};

use super::stream::LogRow;

/// Columns per row: the trigger side (14) and the handle side (4).
pub(crate) const COLUMNS: usize = 18;

/// Inserts `rows` in batches of `rows_per_batch`; returns the time taken.
pub(crate) async fn insert_all(
    pool: &MySqlPool,
    rows: &mut [LogRow],
    rows_per_batch: usize,
) -> anyhow::Result<Duration> {
    debug_assert!(rows_per_batch * COLUMNS <= 65_535, "placeholder limit");
    for batch in rows.chunks_mut(rows_per_batch) {
        batch.sort_by(|a, b| {
            a.trigger
                .trigger
                .trigger_id
                .cmp(&b.trigger.trigger.trigger_id)
        });
    }
    let started = Instant::now();
    for batch in rows.chunks(rows_per_batch) {
        insert_batch(pool, batch).await?;
    }
    Ok(started.elapsed())
}

async fn insert_batch(pool: &MySqlPool, batch: &[LogRow]) -> anyhow::Result<()> {
    let mut tx = pool.begin().await.context("begin")?;
    let mut qb = QueryBuilder::<MySql>::new(
        "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, executor_id, handler, \
         params, shard_index, shard_total, retry_count, trigger_type, trigger_msg, \
         trigger_time, trigger_code, handle_start, handle_msg, handle_time, handle_code) ",
    );
    qb.push_values(batch, |mut b, row| {
        let t = &row.trigger.trigger;
        let r = &row.result;
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
            .push_bind(&row.trigger.msg)
            .push_bind(row.trigger_time)
            .push_bind(row.trigger.code)
            .push_bind(row.handle_start)
            .push_bind(&r.msg)
            .push_bind(row.handle_time)
            .push_bind(r.code);
    });
    qb.build()
        .execute(&mut *tx)
        .await
        .context("multi-row insert")?;
    tx.commit().await.context("commit")?;
    Ok(())
}
