//! The executor registry as the dispatcher sees it (the format is
//! [`rondo_core::registry`]): an executor is live while its registry score
//! (heartbeat or lease renewal) is younger than `registry.lease_ms`, or,
//! just after this process saw Redis stop answering, while its lease had
//! not run out when that outage began (no executor could renew during it;
//! [`rondo_core::redis::Health::lease_cutoff`]); of what an executor
//! reports about itself, routing reads `running_jobs` (BUSYOVER).

use redis::AsyncCommands;
use rondo_core::redis::Pool;
use rondo_core::registry::{Entry, RETIRED_SCORE, field, parse_running_jobs};
use rondo_core::{Error, Names, clock};
use serde::Serialize;

/// A live executor and its last heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveExecutor {
    pub id: String,
    /// When it last renewed its lease or heartbeated (ms, UTC).
    pub heartbeat_ms: i64,
}

/// An executor the registry holds (live, offline or retired) and what it
/// last said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    /// Its registry score: last heartbeat or lease renewal (ms, UTC);
    /// [`RETIRED_SCORE`] once it stopped gracefully.
    pub seen_ms: i64,
    pub state: MemberState,
    /// Its hash; `None` once it left or its hash expired.
    pub entry: Option<Entry>,
}

/// Whether the dispatcher routes to an executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Its lease is fresh: triggers are routed to it.
    Live,
    /// Its lease expired: nothing is routed to it, and the leader moves
    /// what waits in its queue.
    Offline,
    /// It stopped gracefully.
    Retired,
}

/// What an executor's hash says about one job, for BUSYOVER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// The job is neither running nor queued there.
    Idle,
    /// The job is running or queued there.
    Busy,
    /// The executor has no hash (it vanished, or writes an older format):
    /// nothing says it is idle.
    Unknown,
}

#[derive(Clone)]
pub struct Registry {
    pool: Pool,
    names: Names,
    lease_ms: i64,
}

impl Registry {
    pub fn new(pool: Pool, names: Names, lease_ms: u64) -> Self {
        Registry {
            pool,
            names,
            lease_ms: lease_ms as i64,
        }
    }

    /// The score below which a lease of `lease_ms` has run out, allowing
    /// for an outage this process just saw
    /// ([`rondo_core::redis::Pool::lease_cutoff`]).
    pub fn lease_cutoff(&self, now: i64, lease_ms: i64) -> i64 {
        self.pool.lease_cutoff(now, lease_ms)
    }

    /// Live executor ids of a group, sorted by id so FIRST / LAST and shard
    /// indexes are stable across nodes.
    pub async fn live(&self, app: &str) -> Result<Vec<String>, Error> {
        let executors = self.live_executors(app).await?;
        Ok(executors.into_iter().map(|e| e.id).collect())
    }

    /// Live executors of a group with their heartbeats, sorted by id.
    pub async fn live_executors(&self, app: &str) -> Result<Vec<LiveExecutor>, Error> {
        let mut conn = self.pool.get().await?;
        let min = self.lease_cutoff(clock::now_ms(), self.lease_ms);
        let scored: Vec<(String, f64)> = conn
            .zrangebyscore_withscores(self.names.registry(app), min, "+inf")
            .await?;
        let mut executors: Vec<LiveExecutor> = scored
            .into_iter()
            .map(|(id, score)| LiveExecutor {
                id,
                heartbeat_ms: score as i64,
            })
            .collect();
        executors.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(executors)
    }

    /// Every executor the registry holds for a group, live or not, with its
    /// hash, sorted by id (two round trips: the scores, then the hashes in
    /// one pipeline).
    pub async fn members(&self, app: &str) -> Result<Vec<Member>, Error> {
        let mut conn = self.pool.get().await?;
        let mut scored: Vec<(String, f64)> = conn
            .zrange_withscores(self.names.registry(app), 0, -1)
            .await?;
        scored.sort_by(|a, b| a.0.cmp(&b.0));
        if scored.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (id, _) in &scored {
            pipe.hgetall(self.names.executor(id));
        }
        let hashes: Vec<std::collections::HashMap<String, String>> =
            pipe.query_async(&mut conn).await?;
        let min = self.lease_cutoff(clock::now_ms(), self.lease_ms);
        Ok(scored
            .into_iter()
            .zip(hashes)
            .map(|((id, score), hash)| {
                let seen_ms = score as i64;
                let state = if seen_ms <= RETIRED_SCORE {
                    MemberState::Retired
                } else if seen_ms >= min {
                    MemberState::Live
                } else {
                    MemberState::Offline
                };
                Member {
                    id,
                    seen_ms,
                    state,
                    entry: Entry::from_fields(&hash),
                }
            })
            .collect())
    }

    /// Whether `job_id` is running or queued on each executor, in the order
    /// given (one pipelined round trip).
    pub async fn activity(
        &self,
        executor_ids: &[&str],
        job_id: u64,
    ) -> Result<Vec<Activity>, Error> {
        if executor_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in executor_ids {
            pipe.cmd("HMGET")
                .arg(self.names.executor(id))
                .arg(field::APP)
                .arg(field::RUNNING_JOBS);
        }
        let mut conn = self.pool.get().await?;
        let rows: Vec<(Option<String>, Option<String>)> = pipe.query_async(&mut conn).await?;
        Ok(rows
            .into_iter()
            .map(|(app, running)| activity_of(app.as_deref(), running.as_deref(), job_id))
            .collect())
    }
}

/// Reads one executor hash: no hash at all (no `app`) is unknown; a missing
/// or empty `running_jobs` is idle.
fn activity_of(app: Option<&str>, running_jobs: Option<&str>, job_id: u64) -> Activity {
    if app.is_none() {
        return Activity::Unknown;
    }
    let busy = parse_running_jobs(running_jobs.unwrap_or_default()).contains(&job_id);
    if busy { Activity::Busy } else { Activity::Idle }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_jobs_are_matched_by_whole_id() {
        assert_eq!(activity_of(Some("a"), Some("7,12"), 7), Activity::Busy);
        assert_eq!(activity_of(Some("a"), Some("7,12"), 12), Activity::Busy);
        assert_eq!(activity_of(Some("a"), Some("17,71,1"), 7), Activity::Idle);
        assert_eq!(activity_of(Some("a"), Some(""), 7), Activity::Idle);
        assert_eq!(activity_of(Some("a"), None, 7), Activity::Idle);
        assert_eq!(activity_of(None, None, 7), Activity::Unknown);
    }
}
