//! The executor registry in Redis, written once: what an executor writes at
//! every heartbeat and what the scheduler reads back (routing, BUSYOVER,
//! the reaper, the API).
//!
//! * `<ns>:registry:<app>` (ZSET): executor id scored by its last sign of
//!   life (ms, UTC): every heartbeat, and every lease renewal in between
//!   (`registry.lease_ms / 4`). An executor is *live* — routed to — while
//!   that score is younger than `registry.lease_ms`; older, it is
//!   *offline*, and the leader moves what waits in its queue; older than
//!   `registry.dead_after_ms`, it leaves the registry.
//!   An executor that stops gracefully [`retire`]s at once (score 1: offline
//!   now) and, once its broker link is closed, [`leave`]s (its hash goes).
//! * `<ns>:executor:<id>` (HASH): the [`Entry`] fields below, with a TTL so
//!   the hash of a crashed executor goes away by itself.
//!
//! The two keys are in different hash slots (on a Redis Cluster), so they
//! are written by a plain pipeline, not a transaction: a reader may see the
//! score without the hash for a moment, and treats a missing hash as
//! "unknown" (see `Activity` in the dispatcher).

use std::collections::HashMap;
use std::time::Duration;

use crate::names::Names;

/// The hash's field names.
pub mod field {
    pub const APP: &str = "app";
    pub const HOST: &str = "host";
    /// Handler names, sorted, comma-separated.
    pub const HANDLERS: &str = "handlers";
    pub const STARTED_MS: &str = "started_ms";
    pub const PID: &str = "pid";
    /// A random id per process start, so two runs of one executor id differ.
    pub const INCARNATION: &str = "incarnation";
    pub const HEARTBEAT_MS: &str = "heartbeat_ms";
    /// Ids of the jobs with a trigger running or waiting there, ascending,
    /// comma-separated, empty when idle.
    pub const RUNNING_JOBS: &str = "running_jobs";
    /// Who runs it on the executor's behalf: [`super::VIA_XXL_GATEWAY`]
    /// for an XXL-JOB executor; absent for a rondo executor.
    pub const VIA: &str = "via";
}

/// [`Entry::via`] of an XXL-JOB executor the gateway serves: its id is
/// the gateway's to give, never a rondo executor's to take.
pub const VIA_XXL_GATEWAY: &str = "xxl-gateway";

/// What an executor says about itself in `<ns>:executor:<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    pub app: String,
    pub host: String,
    pub handlers: Vec<String>,
    pub started_ms: i64,
    pub pid: u32,
    pub incarnation: String,
    pub heartbeat_ms: i64,
    pub running_jobs: Vec<u64>,
    /// Empty for a rondo executor; [`VIA_XXL_GATEWAY`] for one the XXL-JOB
    /// gateway serves.
    pub via: String,
}

impl Entry {
    /// The hash fields, as written.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            (field::APP, self.app.clone()),
            (field::HOST, self.host.clone()),
            (field::HANDLERS, self.handlers.join(",")),
            (field::STARTED_MS, self.started_ms.to_string()),
            (field::PID, self.pid.to_string()),
            (field::INCARNATION, self.incarnation.clone()),
            (field::HEARTBEAT_MS, self.heartbeat_ms.to_string()),
            (field::RUNNING_JOBS, format_running_jobs(&self.running_jobs)),
        ];
        if !self.via.is_empty() {
            fields.push((field::VIA, self.via.clone()));
        }
        fields
    }

    /// Reads a hash back; `None` without an `app` (no hash, or not an
    /// executor's). Missing or unreadable other fields take their defaults.
    pub fn from_fields(fields: &HashMap<String, String>) -> Option<Entry> {
        let get = |name: &str| fields.get(name).map(String::as_str).unwrap_or_default();
        let app = fields.get(field::APP)?.clone();
        Some(Entry {
            app,
            host: get(field::HOST).to_owned(),
            handlers: get(field::HANDLERS)
                .split(',')
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect(),
            started_ms: get(field::STARTED_MS).parse().unwrap_or_default(),
            pid: get(field::PID).parse().unwrap_or_default(),
            incarnation: get(field::INCARNATION).to_owned(),
            heartbeat_ms: get(field::HEARTBEAT_MS).parse().unwrap_or_default(),
            running_jobs: parse_running_jobs(get(field::RUNNING_JOBS)),
            via: get(field::VIA).to_owned(),
        })
    }
}

/// `running_jobs` as written: ascending, comma-separated.
pub fn format_running_jobs(jobs: &[u64]) -> String {
    let mut sorted = jobs.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let ids: Vec<String> = sorted.iter().map(u64::to_string).collect();
    ids.join(",")
}

/// `running_jobs` as read; ids that do not parse are skipped.
pub fn parse_running_jobs(text: &str) -> Vec<u64> {
    text.split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Adds a heartbeat to `pipe`: the registry score (the entry's
/// `heartbeat_ms`) and the hash, which expires after `hash_ttl`.
pub fn beat(
    pipe: &mut redis::Pipeline,
    names: &Names,
    executor_id: &str,
    entry: &Entry,
    hash_ttl: Duration,
) {
    let hash = names.executor(executor_id);
    pipe.zadd(names.registry(&entry.app), executor_id, entry.heartbeat_ms)
        .ignore()
        .hset_multiple(&hash, &entry.fields())
        .ignore()
        .pexpire(&hash, hash_ttl.as_millis() as i64)
        .ignore();
}

/// Adds a lease renewal to `pipe`: only the registry score.
pub fn renew(pipe: &mut redis::Pipeline, names: &Names, app: &str, executor_id: &str, now_ms: i64) {
    pipe.zadd(names.registry(app), executor_id, now_ms).ignore();
}

/// The score of a retired executor: offline at once, whatever the lease.
pub const RETIRED_SCORE: i64 = 1;

/// Adds an executor's retirement to `pipe`: no more triggers for it, and
/// the leader moves what waits in its queue. Its hash stays until it
/// [`leave`]s, which says it holds no message any more.
pub fn retire(pipe: &mut redis::Pipeline, names: &Names, app: &str, executor_id: &str) {
    pipe.zadd(names.registry(app), executor_id, RETIRED_SCORE)
        .ignore();
}

/// Adds an executor's leaving to `pipe`, after its broker link closed: its
/// hash goes, so the leader may delete its queue once it is empty.
pub fn leave(pipe: &mut redis::Pipeline, names: &Names, executor_id: &str) {
    pipe.del(names.executor(executor_id)).ignore();
}

/// Adds the removal of an executor (score and hash) to `pipe`.
pub fn remove(pipe: &mut redis::Pipeline, names: &Names, app: &str, executor_id: &str) {
    pipe.zrem(names.registry(app), executor_id)
        .ignore()
        .del(names.executor(executor_id))
        .ignore();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            app: "billing".into(),
            host: "h1".into(),
            handlers: vec!["demo".into(), "http".into()],
            started_ms: 1_700_000_000_000,
            pid: 42,
            incarnation: "00ff".into(),
            heartbeat_ms: 1_700_000_001_000,
            running_jobs: vec![3, 12],
            via: String::new(),
        }
    }

    #[test]
    fn an_entry_round_trips_through_its_fields() {
        let fields: HashMap<String, String> = entry()
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(fields[field::RUNNING_JOBS], "3,12");
        assert_eq!(fields[field::HANDLERS], "demo,http");
        assert_eq!(Entry::from_fields(&fields), Some(entry()));
        assert!(
            !fields.contains_key(field::VIA),
            "a rondo executor's has none"
        );
        let served = Entry {
            via: VIA_XXL_GATEWAY.into(),
            ..entry()
        };
        let fields: HashMap<String, String> = served
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(Entry::from_fields(&fields), Some(served));
    }

    #[test]
    fn a_hash_without_an_app_is_no_entry_and_missing_fields_default() {
        assert_eq!(Entry::from_fields(&HashMap::new()), None);
        let only_app = HashMap::from([(field::APP.to_owned(), "a".to_owned())]);
        let e = Entry::from_fields(&only_app).unwrap();
        assert!(e.running_jobs.is_empty() && e.handlers.is_empty());
    }

    #[test]
    fn running_jobs_are_written_sorted_and_read_by_whole_id() {
        assert_eq!(format_running_jobs(&[12, 7, 7]), "7,12");
        assert_eq!(format_running_jobs(&[]), "");
        assert_eq!(parse_running_jobs("7,12"), vec![7, 12]);
        assert_eq!(parse_running_jobs(" 17, x,71"), vec![17, 71]);
        assert!(parse_running_jobs("").is_empty());
    }
}
