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
//! restored. That lag is inherent to a write-behind system of record.

use std::time::Instant;

use redis::AsyncCommands;
use rondo_core::names::LAYOUT;
use rondo_core::schedule::MisfireRule;
use rondo_core::{Error, ErrorKind, Job, Names, clock};
use rondo_history::{BadRow, History};

use crate::store::{DEF, Store};

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

/// Moves what earlier builds wrote into this build's key layout
/// ([`LAYOUT`]), once per namespace; a leader calls it once per term,
/// before its first claim, and it returns at once when `layout` says the
/// namespace is done.
///
/// * The earliest builds kept the job indexes as plain sets (`jobs`,
///   `group-jobs:<app>`); later ones as namespace-wide sorted sets
///   (`job-ids`, `group-job-ids:<app>`). Both become the per-partition
///   sorted sets `{pK}:job-ids` and `{pK}:group-job-ids:<app>`.
/// * Definitions move from `job:<id>` to `{pK}:job:<id>` (layout 2), and
///   from there into the partition's hash `{pK}:defs` (layout 3); a
///   definition the API already wrote in the new place is newer and wins.
/// * The partition's sorted set of job ids `{pK}:job-ids` becomes its
///   bitmap `{pK}:job-bits` (layout 4), one script per partition, so a job
///   the API deletes meanwhile is not brought back.
///
/// Idempotent: an interrupted move is finished by the next call (the old
/// indexes are deleted only after their ids were copied, the marker set
/// last). Builds before layout 2 never ran on a Redis Cluster, so on one
/// only the moves into `{pK}:defs` and `{pK}:job-bits` have something to
/// do. Not atomic with the writes of a node of an earlier build: the
/// scheduler nodes of a namespace are upgraded together across this change
/// (docs/operations.md, "Upgrading").
pub async fn migrate_layout(store: &Store) -> Result<(), Error> {
    let names = store.names();
    let mut conn = store.pool().get().await?;
    let layout: Option<u32> = conn.get(names.layout()).await?;
    let layout = layout.unwrap_or(0);
    if layout >= LAYOUT {
        return Ok(());
    }
    if layout < 3 {
        into_defs(store, &mut conn).await?;
    }
    // Layout 3 → 4: each partition's sorted set of ids into its bitmap, a
    // bounded batch per script (Redis serves nobody else while one runs).
    let started = Instant::now();
    let mut moved = 0u64;
    for p in 0..names.partitions() {
        loop {
            let ids: u64 = redis::cmd("EVAL")
                .arg(INTO_BITS)
                .arg(2)
                .arg(names.job_ids(p))
                .arg(names.job_bits(p))
                .arg(names.partitions())
                .arg(INTO_BITS_BATCH)
                .query_async(&mut conn)
                .await?;
            moved += ids;
            if ids == 0 {
                break;
            }
        }
    }
    if moved > 0 {
        tracing::info!(
            jobs = moved,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "moved the job indexes of an earlier build into the partitions' bitmaps"
        );
    }
    new_defs_versions(store).await?;
    let _: () = conn.set(names.layout(), LAYOUT).await?;
    Ok(())
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

/// Layouts up to 2 into layout 3: the earliest builds' indexes into the
/// per-partition sorted sets and their definitions to `{pK}:job:<id>` (one
/// Redis only), then every definition into its partition's hash.
async fn into_defs(store: &Store, conn: &mut rondo_core::redis::Connection) -> Result<(), Error> {
    let names = store.names();
    if !store.pool().is_cluster() {
        let started = Instant::now();
        let groups: Vec<String> = conn.hkeys(names.groups()).await?;
        let mut sources = vec![
            (names.legacy_job_index(), None),
            (names.v1_job_index(), None),
        ];
        for g in &groups {
            sources.push((names.legacy_group_jobs(g), Some(g.as_str())));
            sources.push((names.v1_group_jobs(g), Some(g.as_str())));
        }
        let mut moved = 0u64;
        for (key, group) in sources {
            let ids = old_index(conn, &key).await?;
            for chunk in ids.chunks(5_000) {
                let mut pipe = redis::pipe();
                for &id in chunk {
                    let p = names.partition_of(id);
                    match group {
                        None => {
                            pipe.cmd("EVAL")
                                .arg(MOVE_DEF)
                                .arg(2)
                                .arg(names.legacy_job(id))
                                .arg(names.v2_job(id));
                            pipe.zadd(names.job_ids(p), id, id).ignore();
                        }
                        Some(g) => {
                            pipe.zadd(names.group_job_ids(p, g), id, id).ignore();
                        }
                    }
                }
                let renamed: Vec<u64> = pipe.query_async(&mut *conn).await?;
                moved += renamed.iter().sum::<u64>();
            }
            if !ids.is_empty() {
                let _: () = conn.del(&key).await?;
                tracing::info!(key = %key, jobs = ids.len(), "moved a job index of an earlier build into the per-partition indexes");
            }
        }
        if moved > 0 {
            tracing::info!(
                definitions = moved,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "moved job definitions of an earlier build into their partitions"
            );
        }
    }
    // Layout 2 → 3: every definition into its partition's hash, on a
    // Redis Cluster as well (both keys carry the partition's hash tag).
    let started = Instant::now();
    let mut moved = 0u64;
    for p in 0..names.partitions() {
        let ids: Vec<u64> = conn.zrange(names.job_ids(p), 0, -1).await?;
        for chunk in ids.chunks(5_000) {
            let mut pipe = redis::pipe();
            for &id in chunk {
                pipe.cmd("EVAL")
                    .arg(INTO_DEFS)
                    .arg(2)
                    .arg(names.v2_job(id))
                    .arg(names.defs(p))
                    .arg(id)
                    .arg(DEF);
            }
            let into: Vec<u64> = pipe.query_async(&mut *conn).await?;
            moved += into.iter().sum::<u64>();
        }
    }
    if moved > 0 {
        tracing::info!(
            definitions = moved,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "moved job definitions of an earlier build into their partitions' hashes"
        );
    }
    Ok(())
}

/// Moves up to ARGV[2] ids of the sorted set KEYS[1] into the bitmap
/// KEYS[2] (bit `id / ARGV[1]`, ARGV[1] the number of partitions), taking
/// them out of the set; the number moved (0: the set is gone). Both keys
/// are in one hash slot, and a save or delete of a job writes both in one
/// transaction, so a job deleted meanwhile is not brought back.
const INTO_BITS: &str = "local ids = redis.call('ZPOPMIN', KEYS[1], ARGV[2]) \
local n = tonumber(ARGV[1]) \
for k = 1, #ids, 2 do \
redis.call('SETBIT', KEYS[2], string.format('%d', math.floor(tonumber(ids[k]) / n)), 1) end \
return #ids / 2";

/// Ids moved per [`INTO_BITS`] call.
const INTO_BITS_BATCH: usize = 5_000;

/// Moves a definition of layout 2 (field ARGV[2] of the hash KEYS[1]) into
/// the partition's hash (KEYS[2], field ARGV[1]) unless one is there (then
/// it is newer: the API wrote it), and deletes the old key; 1 when it moved
/// one. Both keys are in one hash slot.
const INTO_DEFS: &str = "local def = redis.call('HGET', KEYS[1], ARGV[2]) \
if not def then return 0 end \
local moved = redis.call('HSETNX', KEYS[2], ARGV[1], def) \
redis.call('DEL', KEYS[1]) return moved";

/// Moves a definition of an earlier build (KEYS[1]) to its new key
/// (KEYS[2]) unless the new one exists (then it is newer: the old one is
/// dropped); 1 when it moved one. One Redis only (two slots).
const MOVE_DEF: &str = "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end \
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('DEL', KEYS[1]) return 0 end \
redis.call('RENAME', KEYS[1], KEYS[2]) return 1";

/// The ids of an index of an earlier build: a plain set or a sorted set.
async fn old_index(conn: &mut rondo_core::redis::Connection, key: &str) -> Result<Vec<u64>, Error> {
    let kind: String = redis::cmd("TYPE").arg(key).query_async(&mut *conn).await?;
    Ok(match kind.as_str() {
        "set" => conn.smembers(key).await?,
        "zset" => conn.zrange(key, 0, -1).await?,
        _ => Vec::new(),
    })
}

fn marker(names: &Names) -> String {
    names.bootstrap_marker()
}

async fn redis_state(store: &Store) -> Result<RedisState, Error> {
    let names = store.names();
    let mut pipe = redis::pipe();
    for p in 0..names.partitions() {
        pipe.cmd("BITCOUNT").arg(names.job_bits(p));
        // Layout 3's index, before the leader moved it.
        pipe.zcard(names.job_ids(p));
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
