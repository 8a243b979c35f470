//! Log maintenance: the daily report, the day partitions and retention
//! (XXL-JOB's `JobLogReportHelper`).
//!
//! [`Maintenance::run`] makes a pass at start and every
//! `persist.report_interval_ms`: refresh the last [`REPORT_DAYS`] days of
//! the report and make the coming days' partitions; at start and then once
//! a day it also applies retention (`persist.retention_days`, below
//! [`MIN_RETENTION_DAYS`] disabled; report rows are kept, as in XXL-JOB).
//!
//! Several workers may run: each pass holds the MySQL named lock
//! `rondo_maintenance_<database>` (taken without waiting by the loop), so
//! passes never overlap; a worker that finds it taken skips its pass.
//! Every step is idempotent, so a pass repeated by another worker is
//! harmless. [`retention`] and [`crate::report::refresh`] are what the
//! admin API calls.

use std::time::Duration;

use serde::Serialize;
use sqlx::MySqlPool;
use tokio_util::sync::CancellationToken;

use crate::lock::NamedLock;
use crate::partitions::{self, DAY_MS, Dropped, day_of};
use crate::{Error, report};

/// Days of the report refreshed by every pass (XXL-JOB: three).
pub const REPORT_DAYS: u32 = 3;
/// Retention below this many days is disabled (XXL-JOB's rule).
pub const MIN_RETENTION_DAYS: u32 = 7;
/// How long an API call waits for a pass of the loop to finish.
const API_LOCK_WAIT_S: u32 = 30;
/// How often retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(24 * 3600);

/// The MySQL named lock around a maintenance pass.
const LOCK_NAME: &str = "LEFT(CONCAT('rondo_maintenance_', DATABASE()), 64)";

/// What one application of retention did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Retention {
    pub days: u32,
    /// False when `days` is below [`MIN_RETENTION_DAYS`]: nothing dropped.
    pub enabled: bool,
    /// Rows with a time before this (ms, a UTC day boundary) were dropped.
    pub cutoff_ms: Option<i64>,
    pub dropped: Vec<Dropped>,
}

/// Drops the log days older than `days` days before `now_ms`'s day (a
/// `days` below [`MIN_RETENTION_DAYS`] does nothing). The day partitions are
/// made first, so that it also works before any worker ran a pass. Waits
/// for the maintenance lock if a pass holds it; [`Error::Busy`] if it stays
/// taken.
pub async fn retention_at(pool: &MySqlPool, days: u32, now_ms: i64) -> Result<Retention, Error> {
    if days < MIN_RETENTION_DAYS {
        return Ok(disabled(days));
    }
    let Some(mut lock) = NamedLock::acquire(pool, LOCK_NAME, API_LOCK_WAIT_S).await? else {
        return Err(Error::Busy);
    };
    partitions::ensure(lock.conn(), now_ms).await?;
    let applied = apply_retention(lock.conn(), days, now_ms).await?;
    lock.release().await?;
    Ok(applied)
}

/// [`retention_at`] now.
pub async fn retention(pool: &MySqlPool, days: u32) -> Result<Retention, Error> {
    retention_at(pool, days, rondo_core::clock::now_ms()).await
}

fn disabled(days: u32) -> Retention {
    Retention {
        days,
        ..Retention::default()
    }
}

async fn apply_retention(
    conn: &mut sqlx::MySqlConnection,
    days: u32,
    now_ms: i64,
) -> Result<Retention, Error> {
    if days < MIN_RETENTION_DAYS {
        return Ok(disabled(days));
    }
    let cutoff_ms = (day_of(now_ms) - i64::from(days)) * DAY_MS;
    let dropped = partitions::drop_before(conn, cutoff_ms).await?;
    for d in &dropped {
        tracing::info!(
            table = %d.table,
            partitions = d.partitions.len(),
            rows = d.rows,
            cutoff_ms,
            "retention dropped old log days"
        );
    }
    Ok(Retention {
        days,
        enabled: true,
        cutoff_ms: Some(cutoff_ms),
        dropped,
    })
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Pass {
    pub report_days: usize,
    pub partitions_added: usize,
    pub retention: Option<Retention>,
}

/// One maintenance pass at `now_ms` under the lock (not waiting for it):
/// the report, the coming partitions and, if `with_retention`, retention.
/// `None` when another worker holds the lock.
pub async fn pass_at(
    pool: &MySqlPool,
    retention_days: u32,
    with_retention: bool,
    now_ms: i64,
) -> Result<Option<Pass>, Error> {
    pass_in(
        pool,
        retention_days,
        with_retention,
        now_ms,
        chrono_tz::Tz::UTC,
    )
    .await
}

/// [`pass_at`] with the report's days in `zone`.
pub async fn pass_in(
    pool: &MySqlPool,
    retention_days: u32,
    with_retention: bool,
    now_ms: i64,
    zone: chrono_tz::Tz,
) -> Result<Option<Pass>, Error> {
    let Some(mut lock) = NamedLock::acquire(pool, LOCK_NAME, 0).await? else {
        return Ok(None);
    };
    let partitions_added = partitions::ensure(lock.conn(), now_ms).await?;
    let retention = if with_retention {
        Some(apply_retention(lock.conn(), retention_days, now_ms).await?)
    } else {
        None
    };
    let report_days = report::refresh_in(pool, REPORT_DAYS, now_ms, zone)
        .await?
        .len();
    lock.release().await?;
    Ok(Some(Pass {
        report_days,
        partitions_added,
        retention,
    }))
}

/// The maintenance loop of one worker.
pub struct Maintenance {
    pool: MySqlPool,
    retention_days: u32,
    interval: Duration,
    report_zone: chrono_tz::Tz,
}

impl Maintenance {
    pub fn new(config: &rondo_core::Config, pool: MySqlPool) -> Self {
        Maintenance {
            pool,
            retention_days: config.persist.retention_days,
            interval: Duration::from_millis(config.persist.report_interval_ms.max(1)),
            report_zone: config.report_tz(),
        }
    }

    /// Passes at start and every interval until `shutdown`; errors are
    /// logged and the next pass tries again.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retention_due = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let with_retention = tokio::time::Instant::now() >= retention_due;
            let now_ms = rondo_core::clock::now_ms();
            // A pass is not cut short by shutdown: it is a few statements,
            // and the binary's grace period bounds a long first split.
            let pass = pass_in(
                &self.pool,
                self.retention_days,
                with_retention,
                now_ms,
                self.report_zone,
            );
            match pass.await {
                Ok(Some(pass)) => {
                    if with_retention {
                        retention_due = tokio::time::Instant::now() + RETENTION_EVERY;
                    }
                    log_pass(&pass);
                }
                Ok(None) => tracing::debug!("another worker holds the maintenance lock"),
                Err(error) => tracing::warn!(%error, "log maintenance failed; retrying next pass"),
            }
        }
    }
}

fn log_pass(pass: &Pass) {
    let (dropped_partitions, dropped_rows) = pass
        .retention
        .iter()
        .flat_map(|r| &r.dropped)
        .fold((0, 0), |(parts, rows), d| {
            (parts + d.partitions.len(), rows + d.rows)
        });
    tracing::info!(
        report_days = pass.report_days,
        partitions_added = pass.partitions_added,
        retention = pass.retention.is_some(),
        dropped_partitions,
        dropped_rows,
        "log maintenance pass"
    );
}
