//! What happens to a trigger after its dispatch, in Redis: in-flight
//! records (written by the dispatcher, format in `rondo_core::inflight`),
//! the monitor's "handled" marks, retries waiting for their backoff, the
//! registry's offline executors, and dedupe marks (read by the reaper,
//! written by a kill of a trigger not started yet).
//!
//! The leader's reads and takes of retries and lost triggers are fenced by
//! its term (`lua/due_members.lua`, `lua/take_members.lua`), like the claim:
//! a deposed leader is refused with `StaleTerm` before it dispatches a
//! retry or fails a trigger as lost.

use std::collections::HashMap;
use std::sync::Arc;

use redis::{AsyncCommands, Script};
use rondo_core::dedupe::Mark;
use rondo_core::redis::Pool;
use rondo_core::{Error, Names, Trigger, clock, inflight, registry};
use serde::{Deserialize, Serialize};

use super::fence::fenced;

/// A trigger whose handled mark is read or written: its mark lives in the
/// set of its job's partition and of the minute of its `fire_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandledId<'a> {
    pub job_id: u64,
    pub fire_ms: i64,
    pub trigger_id: &'a str,
}

/// A retry waiting in `{pK}:retry` for its backoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryItem {
    pub job_id: u64,
    /// The id the retry's trigger will carry.
    pub trigger_id: String,
    /// The original scheduled instant.
    pub fire_ms: i64,
    pub retry_count: u32,
    pub shard_index: u32,
    pub shard_total: u32,
    pub params: String,
}

#[derive(Clone)]
pub struct TriggerStore {
    pool: Pool,
    names: Names,
    due_members: Arc<Script>,
    take_members: Arc<Script>,
    check_term: Arc<Script>,
    /// `monitor.handled_ttl_s`: every write to a minute's handled set
    /// ([`Names::handled`]) sets the set's expiry this far ahead.
    handled_ttl_s: i64,
}

impl TriggerStore {
    /// Handled marks are kept `handled_ttl_s` after their set was last
    /// written (`monitor.handled_ttl_s`).
    pub fn new(pool: Pool, names: Names, handled_ttl_s: u64) -> Self {
        TriggerStore {
            pool,
            names,
            handled_ttl_s: i64::try_from(handled_ttl_s).unwrap_or(i64::MAX),
            due_members: Arc::new(fenced(include_str!("../../lua/due_members.lua"))),
            take_members: Arc::new(fenced(include_str!("../../lua/take_members.lua"))),
            check_term: Arc::new(fenced(include_str!("../../lua/check_term.lua"))),
        }
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    pub(crate) async fn conn(&self) -> Result<rondo_core::redis::Connection, Error> {
        Ok(self.pool.get().await?)
    }

    fn partition(&self, job_id: u64) -> u32 {
        self.names.partition_of(job_id)
    }

    /// The trigger as the dispatcher recorded it, if still in flight.
    pub async fn inflight(&self, job_id: u64, trigger_id: &str) -> Result<Option<Trigger>, Error> {
        let json: Option<String> = self
            .conn()
            .await?
            .hget(self.names.inflight_data(self.partition(job_id)), trigger_id)
            .await?;
        Ok(inflight::decode(json.as_deref()))
    }

    /// Every trigger of `job_id` still in flight (its partition's in-flight
    /// set read whole: for a kill of all of a job's runs, not a hot path).
    pub async fn inflight_of_job(&self, job_id: u64) -> Result<Vec<Trigger>, Error> {
        let p = self.partition(job_id);
        let mut conn = self.conn().await?;
        let ids: Vec<String> = conn.zrange(self.names.inflight(p), 0, -1).await?;
        let prefix = format!("{job_id}-");
        let mine: Vec<String> = ids.into_iter().filter(|t| t.starts_with(&prefix)).collect();
        if mine.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.names.inflight_data(p))
            .arg(&mine)
            .query_async(&mut conn)
            .await?;
        Ok(found
            .iter()
            .filter_map(|json| inflight::decode(json.as_deref()))
            .filter(|t| t.job_id == job_id)
            .collect())
    }

    /// Forgets an in-flight trigger (its outcome was handled).
    pub async fn forget(&self, job_id: u64, trigger_id: &str) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        inflight::forget(
            &mut pipe,
            &self.names,
            self.partition(job_id),
            &[trigger_id],
        );
        let _: () = pipe.query_async(&mut self.conn().await?).await?;
        Ok(())
    }

    pub async fn is_handled(&self, id: HandledId<'_>) -> Result<bool, Error> {
        let handled = self.handled(&mut self.conn().await?, &[id]).await?;
        Ok(handled.first().copied().unwrap_or(false))
    }

    pub async fn mark_handled(&self, id: HandledId<'_>) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        self.add_marks(&mut pipe, &[id]);
        let () = pipe.query_async(&mut self.conn().await?).await?;
        Ok(())
    }

    /// Adds `ids` to their minutes' handled sets: one `SADD` and one
    /// `EXPIRE` per partition and minute, whatever the number of ids.
    fn add_marks(&self, pipe: &mut redis::Pipeline, ids: &[HandledId<'_>]) {
        let mut sets: HashMap<String, Vec<&str>> = HashMap::new();
        for id in ids {
            sets.entry(self.names.handled(self.partition(id.job_id), id.fire_ms))
                .or_default()
                .push(id.trigger_id);
        }
        for (key, members) in sets {
            pipe.sadd(&key, members)
                .ignore()
                .expire(&key, self.handled_ttl_s)
                .ignore();
        }
    }

    /// Queues a retry due at `due_ms`.
    pub async fn push_retry(&self, item: &RetryItem, due_ms: i64) -> Result<(), Error> {
        let json = serde_json::to_string(item)?;
        let _: () = self
            .conn()
            .await?
            .zadd(self.names.retry(self.partition(item.job_id)), json, due_ms)
            .await?;
        Ok(())
    }

    /// Retries of a partition due at or before `now_ms` (raw members), for
    /// the leader of `term` (fenced).
    pub async fn due_retries(
        &self,
        p: u32,
        term: u64,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        self.fenced_due(p, &self.names.retry(p), term, now_ms, limit)
            .await
    }

    /// Takes a dispatched (or unreadable) retry out of its set, for the
    /// leader of `term` (fenced).
    pub async fn take_retry(&self, p: u32, term: u64, member: &str) -> Result<bool, Error> {
        self.fenced_take(p, &self.names.retry(p), term, member)
            .await
    }

    /// Checks that partition `p` still accepts `term`; `StaleTerm` once a
    /// newer leader raised it.
    pub async fn check_term(&self, p: u32, term: u64) -> Result<(), Error> {
        let _: u32 = self
            .check_term
            .key(self.names.term(p))
            .arg(term)
            .invoke_async(&mut self.conn().await?)
            .await?;
        Ok(())
    }

    async fn fenced_due(
        &self,
        p: u32,
        key: &str,
        term: u64,
        max_score: i64,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        Ok(self
            .due_members
            .key(self.names.term(p))
            .key(key)
            .arg(term)
            .arg(max_score)
            .arg(limit)
            .invoke_async(&mut self.conn().await?)
            .await?)
    }

    async fn fenced_take(&self, p: u32, key: &str, term: u64, member: &str) -> Result<bool, Error> {
        let taken: u32 = self
            .take_members
            .key(self.names.term(p))
            .key(key)
            .arg(term)
            .arg(member)
            .invoke_async(&mut self.conn().await?)
            .await?;
        Ok(taken == 1)
    }

    /// In-flight trigger ids of a partition published before `before_ms`,
    /// for the leader of `term` (fenced).
    pub async fn stale_inflight(
        &self,
        p: u32,
        term: u64,
        before_ms: i64,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        self.fenced_due(p, &self.names.inflight(p), term, before_ms, limit)
            .await
    }

    /// Takes a trigger off the lost-trigger scan (its data stays for the
    /// monitor), for the leader of `term` (fenced). True for the one caller
    /// that took it.
    pub async fn unlist(&self, p: u32, term: u64, trigger_id: &str) -> Result<bool, Error> {
        self.fenced_take(p, &self.names.inflight(p), term, trigger_id)
            .await
    }

    pub async fn inflight_data(&self, p: u32, trigger_id: &str) -> Result<Option<Trigger>, Error> {
        let json: Option<String> = self
            .conn()
            .await?
            .hget(self.names.inflight_data(p), trigger_id)
            .await?;
        Ok(inflight::decode(json.as_deref()))
    }

    /// Executors of a group whose last heartbeat is older than `before_ms`.
    /// The registry score below which a lease has run out
    /// ([`rondo_core::redis::Pool::lease_cutoff`]).
    pub fn lease_cutoff(&self, now: i64, lease_ms: i64) -> i64 {
        self.pool.lease_cutoff(now, lease_ms)
    }

    pub async fn offline_executors(
        &self,
        app: &str,
        before_ms: i64,
    ) -> Result<Vec<(String, i64)>, Error> {
        let mut conn = self.conn().await?;
        let scored: Vec<(String, f64)> = conn
            .zrangebyscore_withscores(self.names.registry(app), "-inf", before_ms)
            .await?;
        Ok(scored.into_iter().map(|(id, s)| (id, s as i64)).collect())
    }

    /// The incarnation an executor's registry hash names, if it has one.
    pub async fn incarnation(&self, executor_id: &str) -> Result<Option<String>, Error> {
        Ok(self
            .conn()
            .await?
            .hget(
                self.names.executor(executor_id),
                registry::field::INCARNATION,
            )
            .await?)
    }

    /// Whether an executor's registry hash exists (it has not left).
    pub async fn has_entry(&self, executor_id: &str) -> Result<bool, Error> {
        Ok(self
            .conn()
            .await?
            .exists(self.names.executor(executor_id))
            .await?)
    }

    /// Whether an executor heartbeated since `since_ms`.
    pub async fn is_alive(
        &self,
        app: &str,
        executor_id: &str,
        since_ms: i64,
    ) -> Result<bool, Error> {
        let score: Option<f64> = self
            .conn()
            .await?
            .zscore(self.names.registry(app), executor_id)
            .await?;
        Ok(score.is_some_and(|s| s as i64 >= since_ms))
    }

    /// Drops a dead executor from the registry (only if it is still stale:
    /// one that heartbeated meanwhile stays).
    pub async fn drop_executor(
        &self,
        app: &str,
        executor_id: &str,
        before_ms: i64,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let score: Option<f64> = conn.zscore(self.names.registry(app), executor_id).await?;
        if score.is_none_or(|s| s as i64 >= before_ms) {
            return Ok(false);
        }
        let mut pipe = redis::pipe();
        registry::remove(&mut pipe, &self.names, app, executor_id);
        let _: () = pipe.query_async(&mut conn).await?;
        Ok(true)
    }
}

/// What [`TriggerStore::read_group`] fetches for a group of endings, in one
/// pipeline.
#[derive(Debug, Default)]
pub struct GroupQuery<'a> {
    /// In-flight records to read: (job id, trigger id).
    pub inflight: Vec<(u64, &'a str)>,
    /// Job definitions to read.
    pub jobs: Vec<u64>,
}

/// The answer to a [`GroupQuery`], in the query's order.
#[derive(Debug, Default)]
pub struct GroupRead {
    pub inflight: Vec<Option<Trigger>>,
    /// The stored definition (JSON), `None` for a deleted job.
    pub jobs: Vec<Option<String>>,
}

/// What [`TriggerStore::finish_group`] writes, in one pipeline.
#[derive(Debug, Default)]
pub struct GroupWrite<'a> {
    /// Triggers to mark handled.
    pub mark: Vec<HandledId<'a>>,
    /// In-flight entries to forget: (job id, trigger id).
    pub forget: Vec<(u64, &'a str)>,
}

pub(crate) fn parsed<T: redis::FromRedisValue>(v: redis::Value) -> Result<T, Error> {
    redis::from_redis_value(v).map_err(|e| Error::internal(format!("redis reply: {e}")))
}

impl TriggerStore {
    /// In-flight records and job definitions of a group of endings: one
    /// round trip on `conn`, whatever the group's size.
    pub async fn read_group(
        &self,
        conn: &mut rondo_core::redis::Connection,
        query: &GroupQuery<'_>,
    ) -> Result<GroupRead, Error> {
        let mut pipe = redis::pipe();
        for (job_id, id) in &query.inflight {
            inflight::read(&mut pipe, &self.names, *job_id, id);
        }
        let reads = super::defs::DefReads::add(&mut pipe, &self.names, &query.jobs);
        let mut replies: Vec<redis::Value> = pipe.query_async(&mut *conn).await?;
        let expected = query.inflight.len() + reads.replies();
        if replies.len() != expected {
            return Err(Error::internal(format!(
                "redis answered {} replies to a pipeline of {expected}",
                replies.len()
            )));
        }
        let jobs = reads.assemble(replies.split_off(query.inflight.len()))?;
        Ok(GroupRead {
            inflight: replies
                .into_iter()
                .map(|v| {
                    let json: Option<String> = parsed(v)?;
                    Ok(inflight::decode(json.as_deref()))
                })
                .collect::<Result<_, Error>>()?,
            jobs,
        })
    }

    /// Whether each of `ids` is marked handled (in its minute's set, or by
    /// an earlier build's key): one round trip on `conn`.
    pub async fn handled(
        &self,
        conn: &mut rondo_core::redis::Connection,
        ids: &[HandledId<'_>],
    ) -> Result<Vec<bool>, Error> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.sismember(
                self.names.handled(self.partition(id.job_id), id.fire_ms),
                id.trigger_id,
            );
        }
        Ok(pipe.query_async(conn).await?)
    }

    /// Marks a group's triggers handled, then forgets their in-flight
    /// entries (one variadic `ZREM` and `HDEL` per partition): one round trip
    /// on `conn` on one Redis, two on a cluster. Same effect as [`mark_handled`](Self::mark_handled) and
    /// [`forget`](Self::forget) per trigger, marks first.
    pub async fn finish_group(
        &self,
        conn: &mut rondo_core::redis::Connection,
        write: &GroupWrite<'_>,
    ) -> Result<(), Error> {
        if write.mark.is_empty() && write.forget.is_empty() {
            return Ok(());
        }
        let mut marks = redis::pipe();
        self.add_marks(&mut marks, &write.mark);
        let mut by_partition: Vec<Vec<&str>> = vec![Vec::new(); self.names.partitions() as usize];
        for (job_id, id) in &write.forget {
            by_partition[self.partition(*job_id) as usize].push(id);
        }
        let mut forgets = redis::pipe();
        for (p, ids) in by_partition.iter().enumerate() {
            inflight::forget(&mut forgets, &self.names, p as u32, ids);
        }
        // The marks land before the records go: a trigger is never out of
        // flight without being marked handled (a later duplicate of its
        // result then changes nothing).
        conn.write_in_order(&[&marks, &forgets]).await?;
        Ok(())
    }
}

impl TriggerStore {
    /// The dedupe marks of several triggers, each `(group, trigger id)`, as
    /// stored (see [`Mark::parse`]), in order, in one round trip.
    pub async fn marks(&self, triggers: &[(&str, &str)]) -> Result<Vec<Option<String>>, Error> {
        if triggers.is_empty() {
            return Ok(Vec::new());
        }
        // A pipeline, not MGET: the keys need not share a hash slot.
        let mut pipe = redis::pipe();
        for (group, id) in triggers {
            pipe.get(self.names.dedupe(group, id));
        }
        Ok(pipe.query_async(&mut self.conn().await?).await?)
    }

    /// Remembers the kill of a trigger no executor has started: sets its
    /// dedupe mark to `killed` unless it has one (`SET NX`, for
    /// `ttl_s`). True when the kill won: every executor that receives the
    /// trigger now answers it as killed without running it. False when an
    /// executor took it first (or it has ended).
    pub async fn kill_unstarted(
        &self,
        group: &str,
        trigger_id: &str,
        ttl_s: u64,
    ) -> Result<bool, Error> {
        let mark = Mark::Killed {
            by: "api".into(),
            at_ms: clock::now_ms(),
        };
        let value = serde_json::to_string(&mark)?;
        let set: Option<String> = redis::cmd("SET")
            .arg(self.names.dedupe(group, trigger_id))
            .arg(value)
            .arg("NX")
            .arg("EX")
            .arg(ttl_s)
            .query_async(&mut self.conn().await?)
            .await?;
        Ok(set.is_some())
    }
}
