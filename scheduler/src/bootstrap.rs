//! Rebuilding Redis from MySQL, the system of record.
//!
//! When the namespace holds no job (a new Redis, or one that lost its data)
//! the leader, before it claims, copies the non-deleted groups and jobs from
//! MySQL into Redis and puts every enabled, scheduled job back in its due
//! set with a first fire computed from now:
//!
//! * `DO_NOTHING`: the schedule's next fire after now;
//! * `FIRE_ONCE_NOW`: now (the claim fires it once, then follows the
//!   schedule). Redis held the last fire; without it every such job counts
//!   as having missed one.
//!
//! "No job" means the `jobs` set is empty **and** `seq:job` is missing: a
//! cluster whose user deleted every job keeps its sequence and is left
//! alone. The sequence is raised to MySQL's highest id (deleted rows
//! included, so an id is never reused) before any job is written, so ids the
//! API hands out meanwhile cannot collide with restored ones.
//!
//! Jobs are read by keyset pagination on `id` ([`PAGE`] rows a query) and
//! written with one pipeline per page. Every write only fills what is
//! missing (`HSETNX`, `SADD`, `ZADD NX`), so a rebuild that runs twice (two
//! leaders racing, or a retry after MySQL went away mid-way) writes the same
//! thing and never overwrites a job the API or a claim changed meanwhile.
//! Before each page the partitions' terms are read: once a newer leader has
//! raised them, this one stops with `StaleTerm`. A marker key holds the
//! rebuilding leader's term while it runs, so an interrupted rebuild (its
//! `jobs` set no longer empty) is resumed by the next tick or leader.
//!
//! The persistence worker writes MySQL asynchronously: a job defined a few
//! moments before Redis was lost may not have reached MySQL, and then is not
//! restored. That lag is inherent to the design (DESIGN.md, "MySQL").

use std::time::Instant;

use redis::AsyncCommands;
use rondo_core::model::{BlockStrategy, Group, Misfire, Routing, ScheduleType};
use rondo_core::schedule::MisfireRule;
use rondo_core::{Error, ErrorKind, Job, Names, clock};
use sqlx::Row;
use sqlx::mysql::{MySqlPool, MySqlRow};

use crate::store::{DEF, Store};

/// Job rows read from MySQL per query (and written per Redis pipeline).
pub const PAGE: u32 = 5_000;

const JOB_COLUMNS: &str = "id, group_app, description, schedule_type, schedule_conf, misfire, \
     routing, block_strategy, handler, params, timeout_s, retries, child_jobs, retry_backoff_s, \
     alarm_email, alarm_webhook, enabled, created_ms, updated_ms";

/// What one rebuild restored, for the log line and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    pub groups: u64,
    /// Job definitions written.
    pub jobs: u64,
    /// Jobs put in a due set.
    pub scheduled: u64,
    /// Jobs defined but not due: stopped, `NONE`, no fire left, or a
    /// schedule that does not parse.
    pub unscheduled: u64,
    /// Rows that do not decode (not restored) or whose schedule does not
    /// parse (defined, not due); each is logged.
    pub skipped: u64,
    /// The highest job id in MySQL; `seq:job` is at least this.
    pub max_id: u64,
    pub elapsed_ms: u64,
}

/// What Redis holds, as far as the rebuild is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RedisState {
    /// Jobs or a sequence: nothing to do.
    Populated,
    /// No job and no sequence: rebuild.
    Empty,
    /// A rebuild started and did not finish: resume it.
    Interrupted,
}

/// Rebuilds Redis from MySQL if the namespace has no job; `None` when it
/// has. `term` is the caller's leader term (the rebuild stops with
/// `StaleTerm` once a newer leader raised the partitions' terms). Errors
/// leave Redis partly filled and marked, and the next call resumes.
pub async fn rebuild_if_empty(
    store: &Store,
    mysql: &MySqlPool,
    term: u64,
) -> Result<Option<Report>, Error> {
    match redis_state(store).await? {
        RedisState::Populated => return Ok(None),
        RedisState::Empty => {}
        RedisState::Interrupted => {
            tracing::warn!(term, "resuming an interrupted rebuild of redis from mysql")
        }
    }
    check_term(store, term).await?;
    let started = Instant::now();
    // Read MySQL first: while it is down, Redis stays untouched.
    let max_id = max_job_id(mysql).await?;
    let mut conn = store.pool().get().await?;
    let _: () = conn.set(marker(store.names()), term).await?;
    raise_seq(store, max_id).await?;
    let mut report = Report {
        max_id,
        groups: copy_groups(store, mysql).await?,
        ..Report::default()
    };
    copy_jobs(store, mysql, term, &mut report).await?;
    check_term(store, term).await?;
    let _: () = conn.del(marker(store.names())).await?;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    tracing::info!(
        term,
        groups = report.groups,
        jobs = report.jobs,
        scheduled = report.scheduled,
        unscheduled = report.unscheduled,
        skipped = report.skipped,
        max_id = report.max_id,
        elapsed_ms = report.elapsed_ms,
        "redis had no jobs: rebuilt groups, jobs and due sets from mysql"
    );
    Ok(Some(report))
}

fn marker(names: &Names) -> String {
    names.bootstrap_marker()
}

async fn redis_state(store: &Store) -> Result<RedisState, Error> {
    let names = store.names();
    let (jobs, seq, marked): (u64, bool, bool) = redis::pipe()
        .scard(names.job_index())
        .exists(names.job_seq())
        .exists(marker(names))
        .query_async(&mut store.pool().get().await?)
        .await?;
    Ok(match (jobs, seq, marked) {
        (_, _, true) => RedisState::Interrupted,
        (0, false, false) => RedisState::Empty,
        _ => RedisState::Populated,
    })
}

/// `StaleTerm` when any partition accepts a newer term than the caller's.
async fn check_term(store: &Store, term: u64) -> Result<(), Error> {
    let names = store.names();
    let mut pipe = redis::pipe();
    for p in 0..names.partitions() {
        pipe.get(names.term(p));
    }
    let accepted: Vec<Option<u64>> = pipe.query_async(&mut store.pool().get().await?).await?;
    match accepted.into_iter().flatten().max() {
        Some(newer) if newer > term => Err(Error::new(
            ErrorKind::StaleTerm,
            format!("rebuild by term {term} stopped: a partition accepts term {newer}"),
        )),
        _ => Ok(()),
    }
}

/// Raises `seq:job` to at least `floor`, never lowering it. Not a script:
/// the only other writer is the API's `INCR`, so a concurrent increment
/// between the read and the `INCRBY` can only overshoot, which skips ids
/// and is harmless.
async fn raise_seq(store: &Store, floor: u64) -> Result<(), Error> {
    let key = store.names().job_seq();
    let mut conn = store.pool().get().await?;
    let created: bool = conn.set_nx(&key, floor).await?;
    if created {
        return Ok(());
    }
    let current: Option<u64> = conn.get(&key).await?;
    let current = current.unwrap_or(0);
    if current < floor {
        let _: u64 = conn.incr(&key, floor - current).await?;
    }
    Ok(())
}

fn db_err(e: sqlx::Error) -> Error {
    Error::unavailable(format!("mysql: {e}"))
}

/// The highest job id ever stored, deleted ones included.
async fn max_job_id(mysql: &MySqlPool) -> Result<u64, Error> {
    sqlx::query_scalar("SELECT CAST(COALESCE(MAX(id), 0) AS UNSIGNED) FROM job")
        .fetch_one(mysql)
        .await
        .map_err(db_err)
}

/// Copies the non-deleted groups; returns how many. Groups are few (one
/// per application), so one query reads them all.
async fn copy_groups(store: &Store, mysql: &MySqlPool) -> Result<u64, Error> {
    let rows = sqlx::query(
        "SELECT app, title, updated_ms FROM executor_group WHERE deleted = 0 ORDER BY app",
    )
    .fetch_all(mysql)
    .await
    .map_err(db_err)?;
    let mut pipe = redis::pipe();
    for row in &rows {
        let group = Group {
            app: row.try_get("app").map_err(db_err)?,
            title: row.try_get("title").map_err(db_err)?,
            updated_ms: row.try_get("updated_ms").map_err(db_err)?,
        };
        let json = serde_json::to_string(&group)?;
        pipe.hset_nx(store.names().groups(), &group.app, json)
            .ignore();
    }
    // redis-rs refuses an empty pipeline ("empty command"): no groups yet.
    if !pipe.is_empty() {
        let _: () = pipe.query_async(&mut store.pool().get().await?).await?;
    }
    Ok(rows.len() as u64)
}

/// Copies the non-deleted jobs page by page, in id order.
async fn copy_jobs(
    store: &Store,
    mysql: &MySqlPool,
    term: u64,
    report: &mut Report,
) -> Result<(), Error> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM job WHERE deleted = 0 AND id > ? ORDER BY id LIMIT {PAGE}"
    );
    let mut after = 0u64;
    loop {
        check_term(store, term).await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(after)
            .fetch_all(mysql)
            .await
            .map_err(db_err)?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = last.try_get("id").map_err(db_err)?;
        write_page(store, &rows, report).await?;
        if rows.len() < PAGE as usize {
            return Ok(());
        }
    }
}

/// Writes one page of jobs (definitions, indexes, due entries) in one
/// pipeline. Each due score is computed from the clock at this page, so a
/// long rebuild does not leave the first pages' fires in the past.
async fn write_page(store: &Store, rows: &[MySqlRow], report: &mut Report) -> Result<(), Error> {
    let names = store.names();
    let now = clock::now_ms();
    let mut pipe = redis::pipe();
    for row in rows {
        let job = match JobRow::decode(row).and_then(JobRow::into_job) {
            Ok(job) => job,
            Err(e) => {
                let id: Option<u64> = row.try_get("id").ok();
                tracing::error!(job_id = ?id, error = %e, "job row in mysql does not decode; not restored");
                report.skipped += 1;
                continue;
            }
        };
        let due = match first_due(&job, now) {
            Ok(due) => due,
            Err(e) => {
                tracing::error!(job_id = job.id, error = %e, "stored schedule does not parse; restored but not scheduled");
                report.skipped += 1;
                None
            }
        };
        add_job(&mut pipe, names, &job, due)?;
        report.jobs += 1;
        match due {
            Some(_) => report.scheduled += 1,
            None => report.unscheduled += 1,
        }
    }
    // Every row of the page may have been skipped.
    if !pipe.is_empty() {
        let _: () = pipe.query_async(&mut store.pool().get().await?).await?;
    }
    Ok(())
}

/// Adds one job's writes to the pipeline, each only filling what is missing.
fn add_job(
    pipe: &mut redis::Pipeline,
    names: &Names,
    job: &Job,
    due: Option<i64>,
) -> Result<(), Error> {
    let json = serde_json::to_string(job)?;
    pipe.hset_nx(names.job(job.id), DEF, json)
        .ignore()
        .sadd(names.job_index(), job.id)
        .ignore()
        .sadd(names.group_jobs(&job.group), job.id)
        .ignore();
    if let Some(score) = due {
        pipe.cmd("ZADD")
            .arg(names.due(names.partition_of(job.id)))
            .arg("NX")
            .arg(score)
            .arg(job.id)
            .ignore();
    }
    Ok(())
}

/// The due score of a restored job, computed from `now_ms`; `None` when it
/// is not due (stopped, `NONE`, no fire left). Errors when the stored
/// schedule no longer parses.
pub fn first_due(job: &Job, now_ms: i64) -> Result<Option<i64>, Error> {
    if !job.enabled {
        return Ok(None);
    }
    let Some(next) = job.schedule()?.next_after(now_ms) else {
        return Ok(None);
    };
    Ok(Some(match job.misfire.rule() {
        MisfireRule::DoNothing => next,
        MisfireRule::FireOnceNow => now_ms,
    }))
}

/// A `job` row as MySQL stores it (enums and child ids as text).
#[derive(Debug, Clone, Default)]
struct JobRow {
    id: u64,
    group: String,
    description: String,
    schedule_type: String,
    schedule_conf: String,
    misfire: String,
    routing: String,
    block: String,
    handler: String,
    params: Option<String>,
    timeout_s: u32,
    retries: u32,
    child_jobs: Option<String>,
    retry_backoff_s: u32,
    alarm_email: String,
    alarm_webhook: String,
    enabled: i8,
    created_ms: i64,
    updated_ms: i64,
}

impl JobRow {
    fn decode(row: &MySqlRow) -> Result<JobRow, Error> {
        let get = |e: sqlx::Error| Error::internal(format!("job row: {e}"));
        Ok(JobRow {
            id: row.try_get("id").map_err(get)?,
            group: row.try_get("group_app").map_err(get)?,
            description: row.try_get("description").map_err(get)?,
            schedule_type: row.try_get("schedule_type").map_err(get)?,
            schedule_conf: row.try_get("schedule_conf").map_err(get)?,
            misfire: row.try_get("misfire").map_err(get)?,
            routing: row.try_get("routing").map_err(get)?,
            block: row.try_get("block_strategy").map_err(get)?,
            handler: row.try_get("handler").map_err(get)?,
            params: row.try_get("params").map_err(get)?,
            timeout_s: row.try_get("timeout_s").map_err(get)?,
            retries: row.try_get("retries").map_err(get)?,
            child_jobs: row.try_get("child_jobs").map_err(get)?,
            retry_backoff_s: row.try_get("retry_backoff_s").map_err(get)?,
            alarm_email: row.try_get("alarm_email").map_err(get)?,
            alarm_webhook: row.try_get("alarm_webhook").map_err(get)?,
            enabled: row.try_get("enabled").map_err(get)?,
            created_ms: row.try_get("created_ms").map_err(get)?,
            updated_ms: row.try_get("updated_ms").map_err(get)?,
        })
    }

    /// The job, with its enums parsed. The schedule itself is checked by
    /// [`first_due`], so a job with a broken cron is still restored.
    fn into_job(self) -> Result<Job, Error> {
        let child_jobs = match self.child_jobs.as_deref().map(str::trim) {
            None | Some("") => Vec::new(),
            Some(text) => serde_json::from_str(text)
                .map_err(|e| Error::invalid("child_jobs", format!("not a JSON id array: {e}")))?,
        };
        Ok(Job {
            id: self.id,
            group: self.group,
            description: self.description,
            schedule_type: ScheduleType::parse("schedule_type", &self.schedule_type)?,
            schedule_conf: self.schedule_conf,
            misfire: Misfire::parse("misfire", &self.misfire)?,
            routing: Routing::parse("routing", &self.routing)?,
            block: BlockStrategy::parse("block_strategy", &self.block)?,
            handler: self.handler,
            params: self.params.unwrap_or_default(),
            timeout_s: self.timeout_s,
            retries: self.retries,
            child_jobs,
            retry_backoff_s: self.retry_backoff_s,
            alarm_email: self.alarm_email,
            alarm_webhook: self.alarm_webhook,
            enabled: self.enabled != 0,
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_123;

    fn row(schedule_type: &str, conf: &str, misfire: &str) -> JobRow {
        JobRow {
            id: 7,
            group: "app".into(),
            schedule_type: schedule_type.into(),
            schedule_conf: conf.into(),
            misfire: misfire.into(),
            routing: "FIRST".into(),
            block: "SERIAL_EXECUTION".into(),
            handler: "h".into(),
            enabled: 1,
            child_jobs: Some("[3, 4]".into()),
            ..JobRow::default()
        }
    }

    fn job(schedule_type: &str, conf: &str, misfire: &str) -> Job {
        row(schedule_type, conf, misfire)
            .into_job()
            .expect("valid row")
    }

    #[test]
    fn a_row_becomes_the_job_it_stores() {
        let job = job("CRON", "0 * * * * ?", "FIRE_ONCE_NOW");
        assert_eq!(job.child_jobs, vec![3, 4]);
        assert_eq!(job.misfire, Misfire::FireOnceNow);
        assert_eq!(job.params, "");
        assert!(job.enabled);
    }

    #[test]
    fn rows_with_unknown_enums_or_bad_children_are_refused() {
        assert!(row("CRON", "", "LATER").into_job().is_err());
        let mut bad = row("CRON", "0 * * * * ?", "DO_NOTHING");
        bad.child_jobs = Some("3,4".into());
        assert!(bad.into_job().is_err());
        let mut empty = row("CRON", "0 * * * * ?", "DO_NOTHING");
        empty.child_jobs = None;
        assert_eq!(empty.into_job().unwrap().child_jobs, Vec::<u64>::new());
    }

    #[test]
    fn do_nothing_waits_for_the_next_fire_after_now() {
        let due = first_due(&job("CRON", "0 * * * * ?", "DO_NOTHING"), NOW).unwrap();
        let due = due.expect("scheduled");
        assert!(due > NOW && due <= NOW + 60_000 && due % 60_000 == 0);
        let rate = first_due(&job("FIX_RATE", "5", "DO_NOTHING"), NOW).unwrap();
        assert_eq!(rate, Some(NOW + 5_000));
    }

    #[test]
    fn fire_once_now_is_due_now() {
        let due = first_due(&job("FIX_RATE", "3600", "FIRE_ONCE_NOW"), NOW).unwrap();
        assert_eq!(due, Some(NOW));
    }

    #[test]
    fn stopped_and_manual_jobs_are_not_due() {
        let mut stopped = job("FIX_RATE", "5", "FIRE_ONCE_NOW");
        stopped.enabled = false;
        assert_eq!(first_due(&stopped, NOW).unwrap(), None);
        assert_eq!(
            first_due(&job("NONE", "", "FIRE_ONCE_NOW"), NOW).unwrap(),
            None
        );
    }

    #[test]
    fn a_schedule_that_no_longer_parses_is_an_error_not_a_panic() {
        let broken = job("CRON", "not a cron", "DO_NOTHING");
        assert!(first_due(&broken, NOW).is_err());
    }
}
