//! Jobs: a definition is its field (JSON) in its partition's hash
//! `{pK}:defs`, its existence a bit of `{pK}:job-bits` (`index`), its
//! next fire its score in the partition's due set. The API saves, reads,
//! lists and deletes them; the monitor re-arms a fixed delay.

use std::collections::HashMap;
use std::sync::Arc;

use redis::AsyncCommands;
use rondo_core::schedule::MissedFires;
use rondo_core::{Error, Job};

use super::handle::Store;
use super::views::{ApiStore, LeaderStore};
use super::{defs, index};

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

impl ApiStore<'_> {
    pub async fn next_job_id(&self) -> Result<u64, Error> {
        Ok(self.0.conn().await?.incr(self.0.names.job_seq(), 1).await?)
    }

    /// Writes a job, its index entries and its due-set entry in one
    /// transaction (all in the job's partition, so in one hash slot on a
    /// Redis Cluster too): `Due::At` sets its next fire, `Due::Remove` takes
    /// it out of the due set (stopped, or `NONE`), `Due::Keep` leaves the
    /// entry as the claims and the monitor keep it (a change that does not
    /// reschedule: writing back a score read earlier could undo a claim's
    /// advance or a fixed delay's re-arm made meanwhile).
    /// Returns the job's due score before the save (its first fire not
    /// claimed yet), read in the same transaction.
    pub async fn save_job(
        &self,
        job: &Job,
        next: impl Into<Due>,
        old_group: Option<&str>,
    ) -> Result<Option<i64>, Error> {
        let json = serde_json::to_string(job)?;
        let p = self.0.names.partition_of(job.id);
        let due = self.0.names.due(p);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .zscore(&due, job.id)
            .hset(self.0.names.defs(p), job.id, json)
            .ignore()
            .set(self.0.names.defs_version(p), rand::random::<u64>())
            .ignore()
            .setbit(
                self.0.names.job_bits(p),
                self.0.names.job_bit(job.id) as usize,
                true,
            )
            .ignore()
            .zadd(self.0.names.group_job_ids(p, &job.group), job.id, job.id)
            .ignore();
        if let Some(old) = old_group.filter(|g| *g != job.group) {
            pipe.zrem(self.0.names.group_job_ids(p, old), job.id)
                .ignore();
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
        let mut conn = self.0.conn().await?;
        let (before,): (Option<f64>,) = pipe.query_async(&mut conn).await?;
        // An acknowledged change outlives its master's failover.
        conn.replicate().await?;
        Ok(before.map(|s| s as i64))
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
        let keys: Vec<String> = (0..self.0.names.partitions())
            .flat_map(|p| groups.iter().map(move |g| self.0.names.group_job_ids(p, g)))
            .collect();
        if keys.is_empty() {
            return Ok((0, Vec::new()));
        }
        let mut conn = self.0.conn().await?;
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
        let parts = self.0.names.partitions();
        let mut conn = self.0.conn().await?;
        let mut pipe = redis::pipe();
        for p in 0..parts {
            pipe.cmd("BITCOUNT").arg(self.0.names.job_bits(p));
            pipe.strlen(self.0.names.job_bits(p));
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
                    self.0.names.job_bits(p),
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
        let p = self.0.names.partition_of(job.id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hdel(self.0.names.defs(p), job.id)
            .ignore()
            .set(self.0.names.defs_version(p), rand::random::<u64>())
            .ignore()
            .setbit(
                self.0.names.job_bits(p),
                self.0.names.job_bit(job.id) as usize,
                false,
            )
            .ignore()
            .zrem(self.0.names.group_job_ids(p, &job.group), job.id)
            .ignore()
            .zrem(self.0.names.due(p), job.id)
            .ignore()
            .hdel(self.0.names.misfires(p), job.id)
            .ignore()
            .hdel(self.0.names.delays(p), job.id)
            .ignore();
        let mut conn = self.0.conn().await?;
        let _: () = pipe.query_async(&mut conn).await?;
        let mut counters = redis::pipe();
        counters
            .del(self.0.names.round_counter(job.id))
            .ignore()
            .del(self.0.names.route_lfu(job.id))
            .ignore()
            .del(self.0.names.route_lru(job.id))
            .ignore();
        let _: () = counters.query_async(&mut conn).await?;
        conn.replicate().await?;
        Ok(())
    }

    /// The fires job `id` missed (counted by the claims and failovers that
    /// found it late), if it ever missed one.
    pub async fn missed_fires(&self, id: u64) -> Result<MissedFires, Error> {
        let key = self.0.names.misfires(self.0.names.partition_of(id));
        let text: Option<String> = self.0.conn().await?.hget(key, id).await?;
        let Some(text) = text else {
            return Ok(MissedFires::default());
        };
        serde_json::from_str(&text)
            .map_err(|e| Error::internal(format!("misfires of job {id}: {e}")))
    }

    /// The job's next fire (its due score), if scheduled.
    pub async fn next_fire(&self, id: u64) -> Result<Option<i64>, Error> {
        let due = self.0.names.due(self.0.names.partition_of(id));
        let score: Option<f64> = self.0.conn().await?.zscore(due, id).await?;
        Ok(score.map(|s| s as i64))
    }
}

impl Store {
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
        let defs = self.leader().get_job_defs(ids).await?;
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
}

impl LeaderStore<'_> {
    /// The stored definitions (JSON) of many jobs in one round trip (one
    /// `HMGET` per partition), in the order of `ids`; `None` where a job is
    /// gone.
    pub async fn get_job_defs(&self, ids: &[u64]) -> Result<Vec<Option<String>>, Error> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        let reads = defs::DefReads::add(&mut pipe, &self.0.names, ids);
        let mut conn = self.0.conn().await?;
        let replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        reads.assemble(replies)
    }
}
