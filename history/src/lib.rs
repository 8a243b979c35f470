//! rondo-history: MySQL, rondo's system of record, and its one owner.
//!
//! Every SQL statement rondo runs lives here: the schema and its
//! migrations, the batched idempotent writes of events (groups and jobs
//! defined or deleted, triggers sent, results, handler log lines, alarm
//! outcomes), the job and group rows read back to rebuild Redis, the log
//! queries of the admin API, the daily report and retention, users, API
//! tokens and the audit log. The
//! persistence worker is a consumer over [`write_events`]; the scheduler
//! reads through [`History`] and never names a SQL type.
//!
//! Writes are idempotent and independent of arrival order, so a
//! redelivered, duplicated or reordered event ends in the same rows.
//!
//! # Layout
//!
//! * [`History`] (here): a handle on the database with every read the
//!   scheduler makes and the writes of the API's maintenance calls.
//! * [`schema`]: the migrations under `migrations/` and [`migrate`], run
//!   by one process at a time under a MySQL named lock.
//! * `lock`: MySQL named locks held by one connection (migrations,
//!   maintenance).
//! * `mysql`: connecting (strict SQL mode, UTC), retrying until the server
//!   answers, and telling a bad row from an unavailable server.
//! * `jobs`: the `job` and `executor_group` rows mapped both ways.
//! * `rows`: events turned into rows, grouped by table (pure); a trigger
//!   and its result met in one batch become one complete `job_log` row.
//! * `upsert`: the multi-row statements and their last-writer-by-version
//!   rules, chunked under MySQL's placeholder and packet limits.
//! * `write`: one batch in one transaction; bisection under savepoints to
//!   isolate the events MySQL refuses ([`write_events`]).
//! * `logs`: trigger logs and log lines read back for the API.
//! * [`partitions`]: the day partitions of the log tables: made ahead,
//!   dropped by retention.
//! * [`report`]: the daily running / success / fail counts.
//! * [`auth`]: users, API tokens (their hashes) and the audit log.
//! * [`maintenance`]: the loop that refreshes the report, makes partitions
//!   and applies retention, one process at a time ([`Maintenance`]).
//! * `testing` (feature `testing`): throw-away databases for tests of any
//!   crate, dropped with their guard.

pub mod auth;
pub mod clean;
mod error;
pub mod glue;
mod jobs;
mod lock;
mod logs;
pub mod maintenance;
mod mysql;
pub mod partitions;
pub mod report;
mod rows;
pub mod schema;
pub mod search;
#[cfg(feature = "testing")]
pub mod testing;
mod upsert;
mod write;

use std::collections::HashMap;

use rondo_core::config::MysqlConfig;
use rondo_core::model::{Group, Job};
use sqlx::MySqlPool;
use tokio_util::sync::CancellationToken;

pub use error::Error;
pub use glue::GlueVersion;
pub use jobs::BadRow;
pub use logs::{LogLine, LogPage, LogQuery, LogRow, LogStatus, TriggerLog};
pub use maintenance::{Maintenance, Retention};
pub use report::ReportRow;
pub use schema::MIGRATOR;
pub use search::{JobIdPage, JobQuery, JobSort};
pub use write::{Rejected, WriteReport, write_events};

/// Brings the database's schema up to date (idempotent), one process at a
/// time under a MySQL named lock ([`schema`]).
pub async fn migrate(pool: &MySqlPool) -> Result<(), Error> {
    schema::migrate(pool).await
}

/// Parses a MySQL URL into the options rondo connects with.
pub fn connect_options(url: &str) -> Result<sqlx::mysql::MySqlConnectOptions, Error> {
    Ok(mysql::connect_options(url)?)
}

/// A handle on rondo's MySQL database. Cheap to clone (a pool).
#[derive(Clone)]
pub struct History {
    pool: MySqlPool,
}

impl History {
    /// A handle that connects on first use: a process starts while MySQL
    /// is down, and its reads fail as unavailable until it is back. Fails
    /// only for a URL that does not parse.
    pub fn lazy(config: &MysqlConfig) -> Result<History, Error> {
        let options = mysql::connect_options(&config.url)?;
        Ok(History::from_pool(mysql::lazy_pool(
            options,
            config.pool_size,
        )))
    }

    /// Connects once to check MySQL answers.
    pub async fn connect(config: &MysqlConfig) -> Result<History, Error> {
        Ok(History::from_pool(mysql::connect(config).await?))
    }

    /// Connects, retrying with backoff until MySQL answers; `None` on
    /// shutdown.
    pub async fn connect_with_retry(
        config: &MysqlConfig,
        shutdown: &CancellationToken,
    ) -> Result<Option<History>, Error> {
        let pool = mysql::connect_with_retry(config, shutdown).await?;
        Ok(pool.map(History::from_pool))
    }

    pub fn from_pool(pool: MySqlPool) -> History {
        History { pool }
    }

    /// The pool, for the persistence worker's writes and for tests.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    pub async fn migrate(&self) -> Result<(), Error> {
        migrate(&self.pool).await
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The groups of those of `ids` that are live jobs (no tombstone).
    pub async fn job_groups(&self, ids: &[u64]) -> Result<HashMap<u64, String>, Error> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(
            "SELECT id, group_app FROM job WHERE deleted = 0 AND id IN (",
        );
        let mut list = qb.separated(", ");
        for id in ids {
            list.push_bind(*id);
        }
        qb.push(")");
        let rows: Vec<(u64, String)> = qb.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows.into_iter().collect())
    }

    /// The highest job id ever stored, deleted ones included (so a rebuilt
    /// id sequence never hands out an id twice).
    pub async fn max_job_id(&self) -> Result<u64, Error> {
        Ok(
            sqlx::query_scalar("SELECT CAST(COALESCE(MAX(id), 0) AS UNSIGNED) FROM job")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Every executor group that is not deleted, by app name. Groups are
    /// few (one per application), so one query reads them all.
    pub async fn groups(&self) -> Result<Vec<Group>, Error> {
        let rows = sqlx::query(
            "SELECT app, title, xxl_addresses, xxl_gateway, xxl_access, updated_ms FROM executor_group WHERE deleted = 0 ORDER BY app",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(jobs::decode_group)
            .collect::<Result<_, _>>()
            .map_err(Error::Decode)
    }

    /// Up to `limit` jobs that are not deleted with an id above `after`, in
    /// id order (keyset pagination). A row that does not decode comes back
    /// as a [`BadRow`] in its place, so one bad row stops nothing.
    pub async fn jobs_after(
        &self,
        after: u64,
        limit: u32,
    ) -> Result<Vec<Result<Job, BadRow>>, Error> {
        let sql = format!(
            "SELECT {} FROM job WHERE deleted = 0 AND id > ? ORDER BY id LIMIT ?",
            jobs::JOB_COLUMNS.join(", ")
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(after)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(jobs::decode_job).collect())
    }

    /// The last state of a deleted job (None: no such job, never deleted,
    /// or back since: its `job` row is no tombstone).
    pub async fn deleted_job(&self, id: u64) -> Result<Option<Job>, Error> {
        let json: Option<String> = sqlx::query_scalar(
            "SELECT d.job FROM job_deleted d JOIN job j ON j.id = d.id \
             WHERE d.id = ? AND j.deleted = 1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        json.map(|j| serde_json::from_str(&j))
            .transpose()
            .map_err(|e| {
                Error::Decode(rondo_core::Error::internal(format!(
                    "job_deleted {id}: {e}"
                )))
            })
    }

    /// One page of the ids of the jobs `query` finds (see [`search`]).
    pub async fn search_jobs(&self, query: &JobQuery) -> Result<JobIdPage, Error> {
        search::search_jobs(&self.pool, query).await
    }

    /// One page of the trigger logs `query` finds, newest first.
    pub async fn search_logs(&self, query: &LogQuery) -> Result<LogPage, Error> {
        logs::search(&self.pool, query).await
    }

    /// The latest trigger logs of a job, newest first, of the groups
    /// `groups` names (`None`: every group). A row is judged by the group
    /// it ran in, not by the job's group now.
    pub async fn job_logs(
        &self,
        job_id: u64,
        limit: u32,
        groups: Option<&[String]>,
    ) -> Result<Vec<logs::LogRow>, Error> {
        let query = LogQuery {
            groups: groups.map(<[String]>::to_vec),
            job_id: Some(job_id),
            limit,
            ..LogQuery::default()
        };
        Ok(logs::search(&self.pool, &query).await?.items)
    }

    /// The groups a job's trigger logs ran in (a job may have moved).
    pub async fn job_log_groups(&self, job_id: u64) -> Result<Vec<String>, Error> {
        Ok(
            sqlx::query_scalar("SELECT DISTINCT group_app FROM job_log WHERE job_id = ?")
                .bind(job_id)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// One trigger's log row and its log lines (only those after
    /// `after_seq`, when given: a page that follows a run asks for what is
    /// new); `None` when MySQL has neither.
    pub async fn trigger_log(
        &self,
        trigger_id: &str,
        after_seq: Option<i64>,
    ) -> Result<Option<TriggerLog>, Error> {
        let sql = format!("SELECT {} FROM job_log WHERE trigger_id = ?", logs::COLUMNS);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(trigger_id)
            .fetch_optional(&self.pool)
            .await?;
        let lines = sqlx::query(logs::LINES)
            .bind(trigger_id)
            .bind(after_seq.unwrap_or(-1))
            .fetch_all(&self.pool)
            .await?;
        if row.is_none() && lines.is_empty() {
            let any_line: Option<i32> = match after_seq {
                Some(_) => {
                    sqlx::query_scalar("SELECT 1 FROM job_log_line WHERE trigger_id = ? LIMIT 1")
                        .bind(trigger_id)
                        .fetch_optional(&self.pool)
                        .await?
                }
                None => None,
            };
            if any_line.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(TriggerLog {
            log: row.as_ref().map(logs::log_row),
            lines: lines.iter().map(logs::log_line).collect(),
        }))
    }

    /// The daily report of the last `days` days (today included): today
    /// and yesterday recounted from the trigger logs, older days as stored
    /// ([`report::current_in`]); of `groups` only when given.
    pub async fn report(
        &self,
        days: u32,
        zone: chrono_tz::Tz,
        groups: Option<&std::collections::BTreeSet<String>>,
    ) -> Result<Vec<ReportRow>, Error> {
        report::current_in(&self.pool, days, rondo_core::clock::now_ms(), zone, groups).await
    }

    /// The kept versions of a job's script, newest first.
    pub async fn glue_versions(&self, job_id: u64) -> Result<Vec<GlueVersion>, Error> {
        glue::versions(&self.pool, job_id).await
    }

    /// One kept version of a job's script.
    pub async fn glue_version(
        &self,
        job_id: u64,
        version: u32,
    ) -> Result<Option<GlueVersion>, Error> {
        glue::version(&self.pool, job_id, version).await
    }

    /// Applies log retention now: drops the log days older than `days`.
    pub async fn retention(&self, days: u32) -> Result<Retention, Error> {
        maintenance::retention(&self.pool, days).await
    }

    /// Deletes trigger logs by hand (see [`clean::clean_logs`]).
    pub async fn clean_logs(
        &self,
        scope: &clean::CleanScope,
        rule: clean::CleanRule,
    ) -> Result<u64, Error> {
        clean::clean_logs(&self.pool, scope, rule).await
    }
}
