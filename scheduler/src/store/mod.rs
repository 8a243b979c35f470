//! The scheduler's state in Redis.
//!
//! * [`Store`] (here): jobs, groups, due sets and rings. A job's definition
//!   is its field (JSON) in its partition's hash `{pK}:defs`, its existence
//!   a bit of `{pK}:job-bits` ([`index`]); its next fire is its score in
//!   its partition's due set, so the claim script never has to touch a key
//!   outside the partition's hash tag.
//! * [`triggers`]: what happens to a trigger after its dispatch: in-flight
//!   records, handled marks, retries waiting for their backoff, and the
//!   executor registry's dead entries.
//!
//! Writes a leader makes under its term (claim, reassign, due retries, lost
//! triggers) go through the fenced scripts in `lua/`, each prefixed with
//! `lua/fence.lua`, which refuses a term the partition no longer accepts.

pub(crate) mod defs;
mod fence;
pub(crate) mod index;
pub(crate) mod parsed;
pub mod triggers;

pub(crate) use fence::fenced;

use std::collections::HashMap;
use std::sync::Arc;

use redis::{AsyncCommands, Script};
use rondo_core::model::Group;
use rondo_core::redis::Pool;
use rondo_core::schedule::MissedFires;
use rondo_core::{Error, ErrorKind, Job, Names};

/// What a save does to a job's due-set entry (see [`Store::save_job`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    At(i64),
    Remove,
    Keep,
}

impl From<Option<i64>> for Due {
    fn from(next: Option<i64>) -> Due {
        next.map_or(Due::Remove, Due::At)
    }
}

/// One job's part of a claim call.
#[derive(Debug, Clone)]
pub struct ClaimItem {
    pub job_id: u64,
    pub expected_score: i64,
    pub next: Option<i64>,
    /// Index into the node list passed with the claim.
    pub node: usize,
    pub fires: Vec<i64>,
    /// The fire in `fires` that is a misfire fired now (`MISFIRE`).
    pub misfire_fire: Option<i64>,
    /// Fires the job missed: how many never ran, and the record kept.
    pub missed: Option<(u64, String)>,
    /// A fixed-delay job's fire whose final result arms its next one.
    pub awaited: Option<i64>,
}

/// One partition's part of a ring read: members and their instants,
/// earliest first, and the limit the read had (a read that returned
/// `limit` members may have left later ones in the ring).
#[derive(Debug, Clone, PartialEq)]
pub struct RingRead {
    pub partition: u32,
    pub members: Vec<(String, i64)>,
    pub limit: usize,
}

impl RingRead {
    /// The read stopped at its limit: the ring may hold more.
    pub fn cut(&self) -> bool {
        !self.members.is_empty() && self.members.len() >= self.limit
    }
}

#[derive(Clone)]
pub struct Store {
    pool: Pool,
    names: Names,
    claim: Arc<Script>,
    rearm: Arc<Script>,
    raise_term: Arc<Script>,
    reassign: Arc<Script>,
    /// Definitions decoded once per version of their bytes, shared by the
    /// clones of this store (one node's readers).
    parsed: Arc<parsed::ParsedJobs>,
}

impl Store {
    pub fn new(pool: Pool, names: Names) -> Self {
        Store {
            pool,
            names,
            claim: Arc::new(fenced(&format!(
                "{}\n{}",
                include_str!("../../lua/missed.lua"),
                include_str!("../../lua/claim.lua")
            ))),
            raise_term: Arc::new(Script::new(include_str!("../../lua/raise_term.lua"))),
            rearm: Arc::new(Script::new(include_str!("../../lua/rearm.lua"))),
            reassign: Arc::new(fenced(&format!(
                "{}\n{}",
                include_str!("../../lua/missed.lua"),
                include_str!("../../lua/reassign.lua")
            ))),
            parsed: Arc::default(),
        }
    }

    /// The jobs in `defs`, the stored definitions of `ids` (same order;
    /// `None` where a job is gone), decoded, or shared with an earlier
    /// decode of the same bytes ([`parsed`]).
    pub(crate) fn decode_jobs(
        &self,
        ids: &[u64],
        defs: Vec<Option<String>>,
    ) -> Vec<Option<Result<Arc<Job>, Error>>> {
        self.parsed.decode(ids, defs)
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn conn(&self) -> Result<rondo_core::redis::Connection, Error> {
        Ok(self.pool.get().await?)
    }

    /// Waits until this process's writes are on a replica of each master
    /// (a Redis Cluster; see `rondo_core::redis::Connection::replicate`).
    pub async fn replicate(&self) -> Result<(), Error> {
        self.conn().await?.replicate().await?;
        Ok(())
    }

    /// Whether Redis answers.
    pub async fn ping(&self) -> Result<(), Error> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.conn().await?)
            .await?;
        Ok(())
    }

    // ---- groups ----

    /// Creates a group; `Conflict` if the app name is taken.
    pub async fn create_group(&self, group: &Group) -> Result<(), Error> {
        let json = serde_json::to_string(group)?;
        let created: bool = self
            .conn()
            .await?
            .hset_nx(self.names.groups(), &group.app, json)
            .await?;
        if !created {
            return Err(Error {
                kind: ErrorKind::Conflict,
                field: Some("app".into()),
                message: format!("group {} exists", group.app),
            });
        }
        Ok(())
    }

    pub async fn update_group(&self, group: &Group) -> Result<(), Error> {
        self.get_group(&group.app).await?;
        let json = serde_json::to_string(group)?;
        let _: () = self
            .conn()
            .await?
            .hset(self.names.groups(), &group.app, json)
            .await?;
        Ok(())
    }

    pub async fn get_group(&self, app: &str) -> Result<Group, Error> {
        let json: Option<String> = self.conn().await?.hget(self.names.groups(), app).await?;
        let json =
            json.ok_or_else(|| Error::not_found("group", format!("no executor group {app:?}")))?;
        Ok(serde_json::from_str(&json)?)
    }

    pub async fn list_groups(&self) -> Result<Vec<Group>, Error> {
        let all: HashMap<String, String> = self.conn().await?.hgetall(self.names.groups()).await?;
        let mut groups: Vec<Group> = all
            .values()
            .filter_map(|j| serde_json::from_str(j).ok())
            .collect();
        groups.sort_by(|a, b| a.app.cmp(&b.app));
        Ok(groups)
    }

    /// Deletes a group that has no job; `Conflict` otherwise (as XXL-JOB).
    pub async fn delete_group(&self, app: &str) -> Result<(), Error> {
        self.get_group(app).await?;
        let mut conn = self.conn().await?;
        let mut pipe = redis::pipe();
        for p in 0..self.names.partitions() {
            pipe.zcard(self.names.group_job_ids(p, app));
        }
        let counts: Vec<u64> = pipe.query_async(&mut conn).await?;
        let jobs: u64 = counts.iter().sum();
        if jobs > 0 {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("group {app} still has {jobs} job(s)"),
            ));
        }
        let _: () = conn.hdel(self.names.groups(), app).await?;
        Ok(())
    }

    // ---- jobs ----

    pub async fn next_job_id(&self) -> Result<u64, Error> {
        Ok(self.conn().await?.incr(self.names.job_seq(), 1).await?)
    }

    /// Writes a job, its index entries and its due-set entry in one
    /// transaction (all in the job's partition, so in one hash slot on a
    /// Redis Cluster too): `Due::At` sets its next fire, `Due::Remove` takes
    /// it out of the due set (stopped, or `NONE`), `Due::Keep` leaves the
    /// entry as the claims and the monitor keep it (a change that does not
    /// reschedule: writing back a score read earlier could undo a claim's
    /// advance or a fixed delay's re-arm made meanwhile).
    pub async fn save_job(
        &self,
        job: &Job,
        next: impl Into<Due>,
        old_group: Option<&str>,
    ) -> Result<(), Error> {
        let json = serde_json::to_string(job)?;
        let p = self.names.partition_of(job.id);
        let due = self.names.due(p);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(self.names.defs(p), job.id, json)
            .ignore()
            .set(self.names.defs_version(p), rand::random::<u64>())
            .ignore()
            .setbit(
                self.names.job_bits(p),
                self.names.job_bit(job.id) as usize,
                true,
            )
            .ignore()
            .zadd(self.names.group_job_ids(p, &job.group), job.id, job.id)
            .ignore();
        if let Some(old) = old_group.filter(|g| *g != job.group) {
            pipe.zrem(self.names.group_job_ids(p, old), job.id).ignore();
        }
        match next.into() {
            Due::At(score) => {
                pipe.zadd(&due, job.id, score).ignore();
            }
            Due::Remove => {
                pipe.zrem(&due, job.id).ignore();
            }
            Due::Keep => {}
        }
        let mut conn = self.conn().await?;
        let _: () = pipe.query_async(&mut conn).await?;
        // An acknowledged change outlives its master's failover.
        conn.replicate().await?;
        Ok(())
    }

    pub async fn get_job(&self, id: u64) -> Result<Job, Error> {
        let mut conn = self.conn().await?;
        let p = self.names.partition_of(id);
        let json: Option<String> = conn.hget(self.names.defs(p), id).await?;
        let json = json.ok_or_else(|| Error::not_found("id", format!("no job {id}")))?;
        Ok(serde_json::from_str(&json)?)
    }

    /// Definitions of many jobs in one round trip; missing ones are absent.
    pub async fn get_jobs(&self, ids: &[u64]) -> Result<HashMap<u64, Arc<Job>>, Error> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let defs = self.get_job_defs(ids).await?;
        let mut jobs = HashMap::with_capacity(ids.len());
        for (id, job) in ids.iter().zip(self.decode_jobs(ids, defs)) {
            match job {
                None => {}
                Some(Ok(job)) => {
                    jobs.insert(*id, job);
                }
                Some(Err(e)) => {
                    tracing::error!(job_id = id, error = %e, "stored job definition does not decode")
                }
            }
        }
        Ok(jobs)
    }

    /// The stored definitions (JSON) of many jobs in one round trip (one
    /// `HMGET` per partition), in the order of `ids`; `None` where a job is
    /// gone.
    pub async fn get_job_defs(&self, ids: &[u64]) -> Result<Vec<Option<String>>, Error> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        let reads = defs::DefReads::add(&mut pipe, &self.names, ids);
        let mut conn = self.conn().await?;
        let replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        reads.assemble(replies)
    }

    /// A page of job ids in id order (`descending`: newest first), of one
    /// group, of several, or (`None`) of every group, and how many there
    /// are. Every group's is a page of the bitmaps `{pK}:job-bits`
    /// ([`index`]); a group's ids are kept per partition in sorted sets
    /// (`{pK}:group-job-ids:<app>`), and its page is the merge of them from
    /// the id at rank `offset` on, which [`Store::id_at_rank`] finds by
    /// counting, so a deep page costs a few counts, not a read of every id
    /// before it.
    pub async fn job_page(
        &self,
        groups: Option<&[String]>,
        offset: usize,
        limit: usize,
        descending: bool,
    ) -> Result<(usize, Vec<u64>), Error> {
        let Some(groups) = groups else {
            return self.all_jobs_page(offset, limit, descending).await;
        };
        let keys: Vec<String> = (0..self.names.partitions())
            .flat_map(|p| groups.iter().map(move |g| self.names.group_job_ids(p, g)))
            .collect();
        if keys.is_empty() {
            return Ok((0, Vec::new()));
        }
        let mut conn = self.conn().await?;
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.zcard(key);
        }
        let counts: Vec<usize> = pipe.query_async(&mut conn).await?;
        let total: usize = counts.iter().sum();
        if limit == 0 || offset >= total {
            return Ok((total, Vec::new()));
        }
        let bound = if offset == 0 {
            None
        } else {
            Some(
                self.id_at_rank(&mut conn, &keys, offset, descending)
                    .await?,
            )
        };
        let limit_arg = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut pipe = redis::pipe();
        for key in &keys {
            let (from, to) = match (bound, descending) {
                (None, false) => ("-inf".to_owned(), "+inf".to_owned()),
                (None, true) => ("+inf".to_owned(), "-inf".to_owned()),
                (Some(b), false) => (b.to_string(), "+inf".to_owned()),
                (Some(b), true) => (b.to_string(), "-inf".to_owned()),
            };
            let range = if descending {
                "ZREVRANGEBYSCORE"
            } else {
                "ZRANGEBYSCORE"
            };
            pipe.cmd(range)
                .arg(key)
                .arg(from)
                .arg(to)
                .arg("LIMIT")
                .arg(0)
                .arg(limit_arg);
        }
        let pages: Vec<Vec<u64>> = pipe.query_async(&mut conn).await?;
        let mut ids: Vec<u64> = pages.into_iter().flatten().collect();
        ids.sort_unstable();
        ids.dedup();
        if descending {
            ids.reverse();
        }
        ids.truncate(limit);
        Ok((total, ids))
    }

    /// A page of every job, from the bitmaps `{pK}:job-bits` ([`index`]):
    /// one round trip counts them (`BITCOUNT`, `STRLEN`), one more reads
    /// the window of columns the page needs (`GETRANGE`), wider and again
    /// while the window had too few ids.
    async fn all_jobs_page(
        &self,
        offset: usize,
        limit: usize,
        descending: bool,
    ) -> Result<(usize, Vec<u64>), Error> {
        let parts = self.names.partitions();
        let mut conn = self.conn().await?;
        let mut pipe = redis::pipe();
        for p in 0..parts {
            pipe.cmd("BITCOUNT").arg(self.names.job_bits(p));
            pipe.strlen(self.names.job_bits(p));
        }
        let replies: Vec<Option<u64>> = pipe.query_async(&mut conn).await?;
        let total = replies
            .iter()
            .step_by(2)
            .map(|c| c.unwrap_or(0) as usize)
            .sum();
        let columns = replies[1..]
            .iter()
            .step_by(2)
            .map(|l| l.unwrap_or(0) as usize)
            .max()
            .unwrap_or(0);
        if limit == 0 || offset >= total {
            return Ok((total, Vec::new()));
        }
        let end = offset.saturating_add(limit);
        let mut width = index::first_window(end, parts as usize);
        loop {
            let width_now = width.min(columns);
            let first = if descending { columns - width_now } else { 0 };
            let mut pipe = redis::pipe();
            for p in 0..parts {
                pipe.getrange(
                    self.names.job_bits(p),
                    first as isize,
                    (first + width_now) as isize - 1,
                );
            }
            let window: Vec<Vec<u8>> = pipe.query_async(&mut conn).await?;
            let ids = index::cut(&window, first, offset, limit, descending);
            // The whole bitmaps were read, or the window held the page.
            if width_now == columns || ids.len() == limit {
                return Ok((total, ids));
            }
            width = width.saturating_mul(2);
        }
    }

    /// The id at rank `rank` (0-based) of the merged indexes `keys`, in
    /// ascending order or (`descending`) from the top: a binary search on
    /// the id, each step one pipelined count per index.
    async fn id_at_rank(
        &self,
        conn: &mut rondo_core::redis::Connection,
        keys: &[String],
        rank: usize,
        descending: bool,
    ) -> Result<u64, Error> {
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.zrange_withscores(key, 0, 0)
                .zrange_withscores(key, -1, -1);
        }
        let ends: Vec<Vec<(u64, f64)>> = pipe.query_async(&mut *conn).await?;
        let ids = ends.iter().flatten().map(|(id, _)| *id);
        let (Some(mut lo), Some(mut hi)) = (ids.clone().min(), ids.max()) else {
            return Err(Error::internal("ranking an empty job index"));
        };
        while lo < hi {
            // Ascending: the smallest id with more than `rank` ids at or
            // below it. Descending: the largest with more than `rank` at or
            // above it.
            let mid = if descending {
                lo + (hi - lo).div_ceil(2)
            } else {
                lo + (hi - lo) / 2
            };
            let mut pipe = redis::pipe();
            for key in keys {
                if descending {
                    pipe.zcount(key, mid, "+inf");
                } else {
                    pipe.zcount(key, "-inf", mid);
                }
            }
            let counts: Vec<usize> = pipe.query_async(&mut *conn).await?;
            let beyond = counts.iter().sum::<usize>() > rank;
            match (descending, beyond) {
                (false, true) => hi = mid,
                (false, false) => lo = mid + 1,
                (true, true) => lo = mid,
                (true, false) => hi = mid - 1,
            }
        }
        Ok(lo)
    }

    /// Deletes a job: its definition, index entries, due entry and the
    /// records its partition keeps of it in one transaction (one hash
    /// slot), then its routing counters (keys of their own, each in its own
    /// slot on a cluster; left behind by a crash in between, they expire
    /// by their idle TTLs).
    pub async fn delete_job(&self, job: &Job) -> Result<(), Error> {
        let p = self.names.partition_of(job.id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hdel(self.names.defs(p), job.id)
            .ignore()
            .set(self.names.defs_version(p), rand::random::<u64>())
            .ignore()
            .setbit(
                self.names.job_bits(p),
                self.names.job_bit(job.id) as usize,
                false,
            )
            .ignore()
            .zrem(self.names.group_job_ids(p, &job.group), job.id)
            .ignore()
            .zrem(self.names.due(p), job.id)
            .ignore()
            .hdel(self.names.misfires(p), job.id)
            .ignore()
            .hdel(self.names.delays(p), job.id)
            .ignore();
        let mut conn = self.conn().await?;
        let _: () = pipe.query_async(&mut conn).await?;
        let mut counters = redis::pipe();
        counters
            .del(self.names.round_counter(job.id))
            .ignore()
            .del(self.names.route_lfu(job.id))
            .ignore()
            .del(self.names.route_lru(job.id))
            .ignore();
        let _: () = counters.query_async(&mut conn).await?;
        conn.replicate().await?;
        Ok(())
    }

    /// Sets a `FIX_DELAY` job's next fire after the final ending of its
    /// scheduled fire `fire_ms`, if that is the fire the job awaits (the
    /// last one a claim gave it): a second ending of it (a redelivery,
    /// another shard), or the ending of a fire from before a stop/start or
    /// a schedule change, changes nothing; nor does it when the job is in
    /// the due set already (a save re-armed it). True when it armed it.
    pub async fn rearm_fix_delay(
        &self,
        id: u64,
        fire_ms: i64,
        next_ms: i64,
    ) -> Result<bool, Error> {
        let p = self.names.partition_of(id);
        let armed: i64 = self
            .rearm
            .key(self.names.due(p))
            .key(self.names.delays(p))
            .arg(id)
            .arg(fire_ms)
            .arg(next_ms)
            .invoke_async(&mut self.conn().await?)
            .await?;
        Ok(armed == 1)
    }

    /// The fires job `id` missed (counted by the claims and failovers that
    /// found it late), if it ever missed one.
    pub async fn missed_fires(&self, id: u64) -> Result<MissedFires, Error> {
        let key = self.names.misfires(self.names.partition_of(id));
        let text: Option<String> = self.conn().await?.hget(key, id).await?;
        let Some(text) = text else {
            return Ok(MissedFires::default());
        };
        serde_json::from_str(&text)
            .map_err(|e| Error::internal(format!("misfires of job {id}: {e}")))
    }

    /// The job's next fire (its due score), if scheduled.
    pub async fn next_fire(&self, id: u64) -> Result<Option<i64>, Error> {
        let due = self.names.due(self.names.partition_of(id));
        let score: Option<f64> = self.conn().await?.zscore(due, id).await?;
        Ok(score.map(|s| s as i64))
    }

    // ---- claim (leader) ----

    /// Raises a partition's accepted term; returns what it accepts after.
    pub async fn raise_term(&self, partition: u32, term: u64) -> Result<u64, Error> {
        let mut conn = self.conn().await?;
        let accepted: u64 = self
            .raise_term
            .key(self.names.term(partition))
            .arg(term)
            .invoke_async(&mut conn)
            .await?;
        Ok(accepted)
    }

    /// Jobs of a partition due at or before `horizon_ms`, oldest first,
    /// and the partition's definitions version (`{pK}:defs-ver`; `None`
    /// before this build's first write), read in one round trip.
    pub async fn read_due(
        &self,
        partition: u32,
        horizon_ms: i64,
        limit: usize,
    ) -> Result<(Vec<(u64, i64)>, Option<u64>), Error> {
        let mut conn = self.conn().await?;
        let (rows, version): (Vec<(u64, f64)>, Option<u64>) = redis::pipe()
            .zrangebyscore_limit_withscores(
                self.names.due(partition),
                "-inf",
                horizon_ms,
                0,
                limit as isize,
            )
            .get(self.names.defs_version(partition))
            .query_async(&mut conn)
            .await?;
        let due = rows.into_iter().map(|(id, s)| (id, s as i64)).collect();
        Ok((due, version))
    }

    /// Runs the fenced claim script; returns `(claimed, skipped)`.
    /// `StaleTerm` when a newer leader has raised the partition's term.
    /// The script applies all of `items` or none: when some jobs' due
    /// scores moved (updated, stopped or claimed meanwhile), it writes
    /// nothing and names them, and the others are claimed by a second call
    /// (skipped: the moved ones).
    pub async fn claim(
        &self,
        partition: u32,
        term: u64,
        nodes: &[String],
        items: &[ClaimItem],
    ) -> Result<(u64, u64), Error> {
        let mut items: Vec<&ClaimItem> = items.iter().collect();
        let mut skipped = 0u64;
        let mut conn = self.conn().await?;
        while !items.is_empty() {
            let cmd = claim_cmd(&self.names, &self.claim, partition, term, nodes, &items);
            let reply: Vec<i64> =
                rondo_core::redis::run_script(&mut conn, &self.claim, &cmd).await?;
            match reply.split_first() {
                Some((&-1, moved)) => {
                    // Nothing was written: claim the others again.
                    let moved: std::collections::HashSet<usize> =
                        moved.iter().map(|&i| i as usize - 1).collect();
                    skipped += moved.len() as u64;
                    items = items
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| !moved.contains(i))
                        .map(|(_, item)| item)
                        .collect();
                }
                Some((&claimed, _)) => return Ok((claimed as u64, skipped)),
                None => return Err(Error::internal("the claim script answered nothing")),
            }
        }
        Ok((0, skipped))
    }

    // ---- rings (every node) ----

    /// Reads this node's rings: per partition, the members due after
    /// `after_ms` (from the start if `None`) and by `until_ms`, earliest
    /// first, at most `limits[p]` of them, with their instants.
    pub async fn read_rings(
        &self,
        node: &str,
        after_ms: Option<i64>,
        until_ms: i64,
        limits: &[usize],
    ) -> Result<Vec<RingRead>, Error> {
        let from = after_ms.map_or_else(|| "-inf".to_owned(), |ms| format!("({ms}"));
        let mut pipe = redis::pipe();
        for p in 0..self.names.partitions() {
            let limit = limits.get(p as usize).copied().unwrap_or(0).max(1);
            // Redis reads a negative count as "no limit".
            let limit = isize::try_from(limit).unwrap_or(isize::MAX);
            pipe.zrangebyscore_limit_withscores(
                self.names.ring(p, node),
                &from,
                until_ms,
                0,
                limit,
            );
        }
        let per_partition: Vec<Vec<(String, f64)>> =
            pipe.query_async(&mut self.conn().await?).await?;
        Ok(per_partition
            .into_iter()
            .enumerate()
            .map(|(p, members)| RingRead {
                partition: p as u32,
                limit: limits.get(p).copied().unwrap_or(0).max(1),
                members: members
                    .into_iter()
                    .map(|(m, score)| (m, score as i64))
                    .collect(),
            })
            .collect())
    }

    /// Removes a fired member from the node's ring. Not fenced: it only
    /// removes the caller's own member, and a member reassigned elsewhere is
    /// no longer in this ring, so a stale node's ack is a no-op.
    pub async fn ack(&self, partition: u32, node: &str, member: &str) -> Result<(), Error> {
        let _: u64 = self
            .conn()
            .await?
            .zrem(self.names.ring(partition, node), member)
            .await?;
        Ok(())
    }

    /// Removes many fired members of one partition from the node's ring in
    /// one command (see [`Store::ack`]).
    pub async fn ack_many(
        &self,
        partition: u32,
        node: &str,
        members: &[String],
    ) -> Result<(), Error> {
        if members.is_empty() {
            return Ok(());
        }
        let _: u64 = self
            .conn()
            .await?
            .zrem(self.names.ring(partition, node), members)
            .await?;
        Ok(())
    }

    /// Sizes of every partition's due set.
    pub async fn due_sizes(&self) -> Result<Vec<u64>, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.names.partitions() {
            pipe.zcard(self.names.due(p));
        }
        Ok(pipe.query_async(&mut self.conn().await?).await?)
    }

    /// Total ring size of a node over all partitions.
    pub async fn ring_size(&self, node: &str) -> Result<u64, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.names.partitions() {
            pipe.zcard(self.names.ring(p, node));
        }
        let sizes: Vec<u64> = pipe.query_async(&mut self.conn().await?).await?;
        Ok(sizes.iter().sum())
    }
}

/// One dead-ring member's fate in a reassignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub member: String,
    /// Index into the target nodes, or `None` to drop the member.
    pub target: Option<usize>,
    /// Its score in the target ring (when it should fire).
    pub score: i64,
    /// Its name in the target ring, if not its own (a late fire fired now
    /// as a misfire).
    pub rename: Option<String>,
    /// Fires its job missed (how many never ran, and the record), counted
    /// when this member is moved or dropped.
    pub missed: Option<(u64, String)>,
}

impl Store {
    /// Ring owners of every partition, in one round trip.
    pub async fn ring_owners(&self) -> Result<Vec<Vec<String>>, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.names.partitions() {
            pipe.smembers(self.names.ring_owners(p));
        }
        Ok(pipe.query_async(&mut self.conn().await?).await?)
    }

    /// The first `limit` members of a node's ring in a partition, with scores.
    pub async fn ring_members(
        &self,
        partition: u32,
        node: &str,
        limit: usize,
    ) -> Result<Vec<(String, i64)>, Error> {
        let mut conn = self.conn().await?;
        let rows: Vec<(String, f64)> = conn
            .zrange_withscores(self.names.ring(partition, node), 0, limit as isize - 1)
            .await?;
        Ok(rows.into_iter().map(|(m, s)| (m, s as i64)).collect())
    }

    /// Runs the fenced reassign script; returns `(moved, dropped)`.
    pub async fn reassign(
        &self,
        partition: u32,
        term: u64,
        dead: &str,
        targets: &[String],
        moves: &[Move],
    ) -> Result<(u64, u64), Error> {
        let mut inv = self.reassign.prepare_invoke();
        inv.key(self.names.term(partition))
            .key(self.names.ring(partition, dead))
            .key(self.names.ring_owners(partition))
            .key(self.names.misfires(partition));
        for node in targets {
            inv.key(self.names.ring(partition, node));
        }
        inv.arg(term).arg(dead).arg(targets.len());
        for node in targets {
            inv.arg(node);
        }
        for m in moves {
            let (skipped, record) = m.missed.clone().unwrap_or_default();
            inv.arg(&m.member)
                .arg(m.target.map_or(0, |t| t + 5))
                .arg(m.score)
                .arg(m.rename.as_deref().unwrap_or(""))
                .arg(skipped)
                .arg(record);
        }
        let (moved, dropped): (u64, u64) = inv.invoke_async(&mut self.conn().await?).await?;
        Ok((moved, dropped))
    }
}

/// The claim script's call for `items` (see `lua/claim.lua`): every
/// write built here, so the script only checks the due scores and
/// applies them. Written straight into one command's buffer: a claim of
/// 1,000 jobs has about 5,000 arguments, and a `ScriptInvocation` would
/// allocate each of them and copy them all once more.
fn claim_cmd(
    names: &Names,
    script: &Script,
    partition: u32,
    term: u64,
    nodes: &[String],
    items: &[&ClaimItem],
) -> redis::Cmd {
    let (capacity, missed, awaited) = claim_capacity(nodes, items);
    let mut cmd = rondo_core::redis::script_cmd(script, 5 + nodes.len(), capacity);
    cmd.arg(names.term(partition))
        .arg(names.due(partition))
        .arg(names.ring_owners(partition))
        .arg(names.misfires(partition))
        .arg(names.delays(partition));
    for node in nodes {
        cmd.arg(names.ring(partition, node));
    }
    cmd.arg(term);
    for node in nodes {
        cmd.arg(node);
    }
    cmd.arg(items.len());
    for item in items {
        cmd.arg(item.job_id);
    }
    cmd.arg(items.len());
    for item in items {
        cmd.arg(item.expected_score);
    }
    let advance = items.iter().filter(|i| i.next.is_some()).count();
    cmd.arg(2 * advance);
    for item in items {
        if let Some(next) = item.next {
            cmd.arg(next).arg(item.job_id);
        }
    }
    cmd.arg(items.len() - advance);
    for item in items.iter().filter(|i| i.next.is_none()) {
        cmd.arg(item.job_id);
    }
    // Each fire goes to a ring of the list; a fire with no ring would be
    // lost while its job advances.
    assert!(
        items.iter().all(|i| i.node < nodes.len()),
        "a node out of the list"
    );
    let mut member = String::new();
    for node in 0..nodes.len() {
        let on_node = || items.iter().filter(move |i| i.node == node);
        cmd.arg(2 * on_node().map(|i| i.fires.len()).sum::<usize>());
        for item in on_node() {
            for &fire in &item.fires {
                member.clear();
                rondo_core::names::write_ring_member(&mut member, item.job_id, fire);
                if item.misfire_fire == Some(fire) {
                    member.push_str(rondo_core::names::MISFIRE_SUFFIX);
                }
                cmd.arg(fire).arg(member.as_str());
            }
        }
    }
    cmd.arg(3 * missed.len());
    for item in items {
        if let Some((skipped, record)) = &item.missed {
            cmd.arg(item.job_id).arg(skipped).arg(record);
        }
    }
    cmd.arg(2 * awaited);
    for item in items {
        if let Some(fire) = item.awaited {
            cmd.arg(item.job_id).arg(fire);
        }
    }
    cmd
}

/// What [`claim_cmd`] will add to its command, (arguments, bytes), at
/// most; and the missed records and awaited fires it counts on the way.
fn claim_capacity<'a>(
    nodes: &[String],
    items: &[&'a ClaimItem],
) -> ((usize, usize), Vec<&'a str>, usize) {
    let fires: usize = items.iter().map(|i| i.fires.len()).sum();
    let missed: Vec<&str> = items
        .iter()
        .filter_map(|i| i.missed.as_ref().map(|(_, record)| record.as_str()))
        .collect();
    let awaited = items.iter().filter(|i| i.awaited.is_some()).count();
    let advance = items.iter().filter(|i| i.next.is_some()).count();
    let leave = items.len() - advance;
    // Keys, and node ids as arguments: up to 80 bytes each.
    let names = 5 + 2 * nodes.len();
    // Numbers, up to 20 bytes each: the term; the jobs and their scores;
    // the advanced jobs' pairs and the ids that leave; each ring's fire
    // instants; the missed jobs' ids and skipped counts; the awaited
    // pairs; and the count before each section.
    let numbers = 1
        + 2 * items.len()
        + 2 * advance
        + leave
        + fires
        + 2 * missed.len()
        + 2 * awaited
        + 6
        + nodes.len();
    // Ring members ('<job>:<fire ms>:m', up to 43 bytes), the records.
    let capacity = (
        names + numbers + fires + missed.len(),
        80 * names + 20 * numbers + 43 * fires + missed.iter().map(|r| r.len()).sum::<usize>(),
    );
    (capacity, missed, awaited)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claim script's arguments in the order `lua/claim.lua` reads
    /// them, for a small batch with every section.
    #[test]
    fn a_claim_command_has_the_layout_the_script_reads() {
        let names = Names::new("ns", 4);
        let script = Script::new("return 1");
        let nodes = ["a".to_owned(), "b".to_owned()];
        let item = |job_id, next, node, fires: &[i64]| ClaimItem {
            job_id,
            expected_score: 1000 + job_id as i64,
            next,
            node,
            fires: fires.to_vec(),
            misfire_fire: None,
            missed: None,
            awaited: None,
        };
        let items = [
            ClaimItem {
                misfire_fire: Some(1000),
                missed: Some((3, "{r}".to_owned())),
                ..item(1, Some(2000), 1, &[1000, 1500])
            },
            item(2, None, 0, &[1200]),
            ClaimItem {
                awaited: Some(1300),
                ..item(3, Some(5000), 1, &[1300])
            },
        ];
        let items: Vec<&ClaimItem> = items.iter().collect();
        let cmd = claim_cmd(&names, &script, 2, 9, &nodes, &items);
        let args: Vec<String> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "?".to_owned(),
            })
            .collect();
        let hash = script.get_hash().to_owned();
        let want = [
            "EVALSHA",
            &hash,
            "7",
            // keys: term, due, ring owners, misfires, delays, one ring per node
            &names.term(2),
            &names.due(2),
            &names.ring_owners(2),
            &names.misfires(2),
            &names.delays(2),
            &names.ring(2, "a"),
            &names.ring(2, "b"),
            // the term, the nodes
            "9",
            "a",
            "b",
            // the jobs, their expected scores
            "3",
            "1",
            "2",
            "3",
            "3",
            "1001",
            "1002",
            "1003",
            // advance: (next, job) pairs; leave
            "4",
            "2000",
            "1",
            "5000",
            "3",
            "1",
            "2",
            // node a's ring, node b's (the misfire marked)
            "2",
            "1200",
            "2:1200",
            "6",
            "1000",
            "1:1000:m",
            "1500",
            "1:1500",
            "1300",
            "3:1300",
            // missed triples, awaited pairs
            "3",
            "1",
            "3",
            "{r}",
            "2",
            "3",
            "1300",
        ];
        assert_eq!(args, want);
    }

    /// The command's buffers are sized once: what the claim of a varied
    /// batch adds (several nodes, fires in the window, a misfire, a missed
    /// record, a job that leaves, a fixed delay's awaited fire) fits in
    /// what [`claim_capacity`] reserved.
    #[test]
    fn a_claim_command_fits_the_room_made_for_it() {
        let names = Names::new("a-namespace-of-some-length-0123456789", 64);
        let script = Script::new("return 1");
        let nodes: Vec<String> = (0..3)
            .map(|n| format!("node-{n}-host.example.org:8080"))
            .collect();
        let now = 1_800_000_000_000_i64;
        let items: Vec<ClaimItem> = (0..500_u64)
            .map(|k| ClaimItem {
                job_id: u64::MAX - k,
                expected_score: now,
                next: (k % 7 != 0).then_some(now + 1_000),
                node: (k % 3) as usize,
                fires: (0..(k % 4) as i64).map(|f| now + f * 250).collect(),
                misfire_fire: (k % 5 == 0 && k % 4 > 0).then_some(now),
                missed: (k % 11 == 0).then(|| {
                    (
                        k,
                        format!("{{\"detected_ms\":{now},\"cause\":\"MISFIRE\"}}"),
                    )
                }),
                awaited: (k % 13 == 0).then_some(now),
            })
            .collect();
        let items: Vec<&ClaimItem> = items.iter().collect();
        let ((args, bytes), _, _) = claim_capacity(&nodes, &items);
        let cmd = claim_cmd(&names, &script, 63, u64::MAX, &nodes, &items);
        let written: Vec<usize> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.len(),
                _ => 0,
            })
            .collect();
        // EVALSHA, the hash and the number of keys come on top.
        assert_eq!(written.len(), args + 3, "the count of arguments is exact");
        let data: usize = written.iter().sum();
        assert!(
            data <= bytes + 64,
            "{data} bytes written, {bytes} + 64 reserved"
        );
    }
}
