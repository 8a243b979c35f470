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
//! "No job" means no partition's `job-bits` has a bit set (`BITCOUNT`)
//! **and** `seq:job` is missing: a
//! cluster whose user deleted every job keeps its sequence and is left
//! alone. The sequence is raised to MySQL's highest id (deleted rows
//! included, so an id is never reused) before any job is written, so ids the
//! API hands out meanwhile cannot collide with restored ones.
//!
//! Jobs are read by keyset pagination on `id` ([`PAGE`] rows a query) and
//! written with one pipeline per page. Every write only fills what is
//! missing (`HSETNX`, `SETBIT`, `ZADD NX`), so a rebuild that runs twice (two
//! leaders racing, or a retry after MySQL went away mid-way) writes the same
//! thing and never overwrites a job the API or a claim changed meanwhile.
//! Before each page the partitions' terms are read: once a newer leader has
//! raised them, this one stops with `StaleTerm`. A marker key holds the
//! rebuilding leader's term while it runs, so an interrupted rebuild (its
//! job bits no longer empty) is resumed by the next tick or leader.
//!
//! The persistence worker writes MySQL asynchronously: a job defined a few
//! moments before Redis was lost may not have reached MySQL, and then is not
//! restored. That lag is inherent to a write-behind system of record.

use std::time::Instant;

use redis::AsyncCommands;
use rondo_core::names::LAYOUT;
use rondo_core::schedule::MisfireRule;
use rondo_core::{Error, ErrorKind, Job, Names, clock};
use rondo_history::{BadRow, History};

use crate::store::Store;

/// Job rows read from MySQL per query (and written per Redis pipeline).
pub const PAGE: u32 = 5_000;

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
    history: &History,
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
    let max_id = history.max_job_id().await?;
    let mut conn = store.pool().get().await?;
    let _: () = conn.set(marker(store.names()), term).await?;
    raise_seq(store, max_id).await?;
    let mut report = Report {
        max_id,
        groups: copy_groups(store, history).await?,
        ..Report::default()
    };
    copy_jobs(store, history, term, &mut report).await?;
    check_term(store, term).await?;
    new_defs_versions(store).await?;
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

/// Holds the namespace to this build's key layout ([`LAYOUT`]): a leader
/// calls it once per term, before its first claim. A namespace without a
/// recorded layout is new (its first leader records it); one recorded in
/// another layout was written by a build this one cannot read, and the
/// leader refuses to claim in it (every tick says why) rather than misread
/// its keys. No released build wrote another layout.
pub async fn check_layout(store: &Store) -> Result<(), Error> {
    let names = store.names();
    let mut conn = store.pool().get().await?;
    let _: Option<String> = redis::cmd("SET")
        .arg(names.layout())
        .arg(LAYOUT)
        .arg("NX")
        .query_async(&mut conn)
        .await?;
    let layout: Option<u32> = conn.get(names.layout()).await?;
    match layout {
        Some(LAYOUT) => Ok(()),
        other => Err(Error::invalid(
            "layout",
            format!(
                "the namespace's Redis keys are in layout {other:?} ({}); this build reads layout {LAYOUT} only: use a new namespace, or empty this one and let the leader rebuild it from MySQL",
                names.layout()
            ),
        )),
    }
}

/// Gives every partition a new definitions version (`{pK}:defs-ver`)
/// once its definitions were filled or moved in bulk: the claim then reads
/// each definition once more and reuses it unread from the next tick on
/// (a partition without a version is read in every tick). Saves and
/// deletes set their partition's version themselves.
async fn new_defs_versions(store: &Store) -> Result<(), Error> {
    let names = store.names();
    let mut pipe = redis::pipe();
    for p in 0..names.partitions() {
        pipe.set(names.defs_version(p), rand::random::<u64>())
            .ignore();
    }
    let _: () = pipe.query_async(&mut store.pool().get().await?).await?;
    Ok(())
}

fn marker(names: &Names) -> String {
    names.bootstrap_marker()
}

async fn redis_state(store: &Store) -> Result<RedisState, Error> {
    let names = store.names();
    let mut pipe = redis::pipe();
    for p in 0..names.partitions() {
        pipe.cmd("BITCOUNT").arg(names.job_bits(p));
    }
    let counts: Vec<u64> = pipe.query_async(&mut store.pool().get().await?).await?;
    let jobs: u64 = counts.iter().sum();
    let (seq, marked): (bool, bool) = redis::pipe()
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

/// Copies the non-deleted groups; returns how many.
async fn copy_groups(store: &Store, history: &History) -> Result<u64, Error> {
    let groups = history.groups().await?;
    let mut pipe = redis::pipe();
    for group in &groups {
        let json = serde_json::to_string(group)?;
        pipe.hset_nx(store.names().groups(), &group.app, json)
            .ignore();
    }
    // redis-rs refuses an empty pipeline ("empty command"): no groups yet.
    if !pipe.is_empty() {
        let _: () = pipe.query_async(&mut store.pool().get().await?).await?;
    }
    Ok(groups.len() as u64)
}

/// Copies the non-deleted jobs page by page, in id order.
async fn copy_jobs(
    store: &Store,
    history: &History,
    term: u64,
    report: &mut Report,
) -> Result<(), Error> {
    let mut after = 0u64;
    loop {
        check_term(store, term).await?;
        let rows = history.jobs_after(after, PAGE).await?;
        if rows.is_empty() {
            return Ok(());
        }
        let ids = rows.iter().filter_map(|r| match r {
            Ok(job) => Some(job.id),
            Err(bad) => bad.id,
        });
        after = ids
            .max()
            .ok_or_else(|| Error::internal("a page of job rows without ids"))?;
        let full = rows.len() == PAGE as usize;
        write_page(store, rows, report).await?;
        if !full {
            return Ok(());
        }
    }
}

/// Writes one page of jobs (definitions, indexes, due entries) in one
/// pipeline. Each due score is computed from the clock at this page, so a
/// long rebuild does not leave the first pages' fires in the past.
async fn write_page(
    store: &Store,
    rows: Vec<Result<Job, BadRow>>,
    report: &mut Report,
) -> Result<(), Error> {
    let names = store.names();
    let now = clock::now_ms();
    let mut pipe = redis::pipe();
    for row in rows {
        let job = match row {
            Ok(job) => job,
            Err(BadRow { id, error }) => {
                tracing::error!(job_id = ?id, error = %error, "job row in mysql does not decode; not restored");
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
    let p = names.partition_of(job.id);
    pipe.hset_nx(names.defs(p), job.id, json)
        .ignore()
        .setbit(names.job_bits(p), names.job_bit(job.id) as usize, true)
        .ignore()
        .zadd(names.group_job_ids(p, &job.group), job.id, job.id)
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
    let Some(next) = job.schedule()?.first_after(now_ms) else {
        return Ok(None);
    };
    Ok(Some(match job.misfire.rule() {
        MisfireRule::DoNothing => next,
        MisfireRule::FireOnceNow => now_ms,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_123;

    fn job(schedule_type: &str, conf: &str, misfire: &str) -> Job {
        Job {
            schedule_type: rondo_core::model::ScheduleType::parse("schedule_type", schedule_type)
                .unwrap(),
            schedule_conf: conf.into(),
            misfire: rondo_core::Misfire::parse("misfire", misfire).unwrap(),
            ..rondo_core::testkit::fixtures::job(7)
        }
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
