//! What the gateway remembers of each trigger it hands to an XXL-JOB
//! executor, in Redis only (any gateway instance may receive its callback,
//! or its redelivery after the instance that handed it off died):
//!
//! * `ns:dedupe:<trigger id>`: the protocol's dedupe mark, kept on the
//!   executor's behalf (`running` from the claim, then `finished` /
//!   `confirmed`), so a redelivered trigger is never sent twice;
//! * `ns:xxl:tid:<trigger id>`: its log id, written before it is sent;
//! * `ns:xxl:run:<log id>`: its [`Run`], written before it is sent, removed
//!   once its result is confirmed;
//! * `ns:xxl:inflight:<executor id>`: `<log id>:<job id>` while it waits for
//!   its callback (the executor's `running_jobs`, the lost-trigger scan);
//! * `ns:xxl:seq:log`: the sequence log ids come from, taken in blocks.
//!
//! Every write carries `executor.dedupe_ttl_s`, so nothing outlives the
//! marks. Keys of one trigger are in different hash slots on a Redis
//! Cluster; the order of the steps (mark, then records, then the send) is
//! what keeps them consistent, see `handoff`.

use redis::AsyncCommands;
use rondo_core::dedupe::Mark;
use rondo_core::redis::Pool;
use rondo_core::{Error, Names};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

/// Log ids taken from the sequence at a time.
const LOG_ID_BLOCK: i64 = 256;

static FORGET_LOG_ID: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("../lua/forget_log_id.lua")));

/// A trigger handed to an XXL-JOB executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub trigger_id: String,
    pub job_id: u64,
    pub fire_ms: i64,
    pub executor_id: String,
    pub log_id: i64,
    /// The date its log file is named by (`logDateTime`).
    pub log_date_ms: i64,
    /// The gateway instance that hands it off.
    pub instance: String,
    /// When the hand-off began (ms): the result's `start_ms`.
    pub since_ms: i64,
    /// A kill of its job was sent to its executor: its failure is final.
    #[serde(default)]
    pub killed: bool,
    /// A COVER_EARLY trigger of its job replaced it: its failure is final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_by: Option<String>,
    /// Already answered by the gateway (lost, or no answer to the send):
    /// a late callback brings the executor's own outcome.
    #[serde(default)]
    pub answered: bool,
}

impl Run {
    /// Its member of the executor's in-flight set.
    pub fn inflight_member(&self) -> String {
        inflight_member(self.log_id, self.job_id)
    }
}

pub fn inflight_member(log_id: i64, job_id: u64) -> String {
    format!("{log_id}:{job_id}")
}

/// `(log id, job id)` of an in-flight member.
pub fn parse_inflight_member(member: &str) -> Option<(i64, u64)> {
    let (log, job) = member.split_once(':')?;
    Some((log.parse().ok()?, job.parse().ok()?))
}

/// How a claim of a trigger's mark ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The mark is ours: the trigger is this hand-off's to send.
    Won,
    /// The mark was there; with the log id and run if it has them.
    Found(Box<Found>),
}

/// What Redis holds of a trigger whose mark was there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub mark: Option<Mark>,
    pub log_id: Option<i64>,
    pub run: Option<Run>,
}

/// The Redis side of hand-offs and callbacks.
pub struct Runs {
    pool: Pool,
    names: Names,
    ttl_s: u64,
    /// Log ids left of the block this instance took: `(next, end)`.
    ids: Mutex<(i64, i64)>,
}

impl Runs {
    pub fn new(pool: Pool, names: Names, ttl_s: u64) -> Runs {
        Runs {
            pool,
            names,
            ttl_s,
            ids: Mutex::new((0, 0)),
        }
    }

    /// `n` new log ids (unique over every gateway instance).
    pub async fn log_ids(&self, n: usize) -> Result<Vec<i64>, Error> {
        let mut ids = self.ids.lock().await;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if ids.0 >= ids.1 {
                let want = LOG_ID_BLOCK.max((n - out.len()) as i64);
                let end: i64 = self
                    .pool
                    .get()
                    .await?
                    .incr(self.names.xxl_log_seq(), want)
                    .await?;
                *ids = (end - want + 1, end + 1);
            }
            out.push(ids.0);
            ids.0 += 1;
        }
        Ok(out)
    }

    /// Sets the trigger's `running` mark unless it has one, and in the same
    /// round trip writes `run`'s records (its log id, the run, its
    /// in-flight member) as [`Runs::record`] does. Won: the trigger is this
    /// hand-off's, recorded. Found: the records written are undone (the
    /// log id only if it is still this one's) and what Redis holds comes
    /// back.
    ///
    /// Two claimers of one trigger may interleave: the one whose mark won
    /// may find the log id already set by the other, which undoes it; the
    /// winner then writes its own over it, so whichever order the two take,
    /// the winner's log id stays.
    pub async fn claim(&self, mark: &Mark, run: &Run) -> Result<Claim, Error> {
        let tid = self.names.xxl_trigger(&run.trigger_id);
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.names.dedupe(&run.trigger_id))
            .arg(serde_json::to_string(mark)?)
            .arg("NX")
            .arg("EX")
            .arg(self.ttl_s)
            .cmd("SET")
            .arg(&tid)
            .arg(run.log_id)
            .arg("NX")
            .arg("EX")
            .arg(self.ttl_s);
        self.put_run(&mut pipe, run)?;
        pipe.zadd(
            self.names.xxl_inflight(&run.executor_id),
            run.inflight_member(),
            run.since_ms,
        )
        .ignore();
        let mut conn = self.pool.get().await?;
        let (marked, logged): (Option<String>, Option<String>) =
            pipe.query_async(&mut conn).await?;
        if marked.is_some() {
            if logged.is_none() {
                let () = conn.set_ex(&tid, run.log_id, self.ttl_s).await?;
            }
            return Ok(Claim::Won);
        }
        let mut undo = redis::pipe();
        undo.del(self.names.xxl_run(run.log_id)).ignore();
        self.leave_inflight(&mut undo, run);
        let () = undo.query_async(&mut conn).await?;
        if logged.is_some() {
            let mut cmd = rondo_core::redis::script_cmd(&FORGET_LOG_ID, 1, (2, 64));
            cmd.arg(&tid).arg(run.log_id);
            let _: i64 = rondo_core::redis::run_script(&mut conn, &FORGET_LOG_ID, &cmd).await?;
        }
        self.found(&run.trigger_id).await
    }

    /// What Redis holds about a trigger whose mark was already there.
    pub async fn found(&self, trigger_id: &str) -> Result<Claim, Error> {
        let mut conn = self.pool.get().await?;
        let (mark, log_id): (Option<String>, Option<i64>) = redis::pipe()
            .get(self.names.dedupe(trigger_id))
            .get(self.names.xxl_trigger(trigger_id))
            .query_async(&mut conn)
            .await?;
        let run = match log_id {
            Some(id) => self.run(id).await?,
            None => None,
        };
        Ok(Claim::Found(Box::new(Found {
            mark: mark.as_deref().and_then(Mark::parse),
            log_id,
            run,
        })))
    }

    /// Takes over the sending of a trigger whose mark is ours but that has
    /// no log id yet (a hand-off cut short before its records): true when
    /// this caller got the log id in first.
    pub async fn take_log_id(&self, trigger_id: &str, log_id: i64) -> Result<bool, Error> {
        let set: Option<String> = redis::cmd("SET")
            .arg(self.names.xxl_trigger(trigger_id))
            .arg(log_id)
            .arg("NX")
            .arg("EX")
            .arg(self.ttl_s)
            .query_async(&mut self.pool.get().await?)
            .await?;
        Ok(set.is_some())
    }

    /// Writes the records of runs about to be sent: each one's log id (when
    /// `with_log_ids`), the run, its in-flight member.
    pub async fn record(&self, runs: &[&Run], with_log_ids: bool) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        for run in runs {
            if with_log_ids {
                pipe.set_ex(
                    self.names.xxl_trigger(&run.trigger_id),
                    run.log_id,
                    self.ttl_s,
                )
                .ignore();
            }
            self.put_run(&mut pipe, run)?;
            pipe.zadd(
                self.names.xxl_inflight(&run.executor_id),
                run.inflight_member(),
                run.since_ms,
            )
            .ignore();
        }
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    /// Adds a run's rewrite to `pipe`.
    pub fn put_run(&self, pipe: &mut redis::Pipeline, run: &Run) -> Result<(), Error> {
        pipe.set_ex(
            self.names.xxl_run(run.log_id),
            serde_json::to_string(run)?,
            self.ttl_s,
        )
        .ignore();
        Ok(())
    }

    pub async fn run(&self, log_id: i64) -> Result<Option<Run>, Error> {
        Ok(self.runs(&[log_id]).await?.pop().flatten())
    }

    /// The runs of `log_ids` (`None` where there is none, or it does not
    /// decode).
    pub async fn runs(&self, log_ids: &[i64]) -> Result<Vec<Option<Run>>, Error> {
        if log_ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = log_ids.iter().map(|id| self.names.xxl_run(*id)).collect();
        let mut conn = self.pool.get().await?;
        let values: Vec<Option<String>> = if keys.len() == 1 {
            vec![conn.get(&keys[0]).await?]
        } else {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.get(key);
            }
            pipe.query_async(&mut conn).await?
        };
        Ok(values
            .into_iter()
            .map(|v| v.and_then(|json| serde_json::from_str(&json).ok()))
            .collect())
    }

    /// Adds to `pipe` the removal of a run's records (it is answered).
    pub fn forget(&self, pipe: &mut redis::Pipeline, run: &Run) {
        pipe.del(self.names.xxl_run(run.log_id))
            .ignore()
            .del(self.names.xxl_trigger(&run.trigger_id))
            .ignore();
        self.leave_inflight(pipe, run);
    }

    /// Adds to `pipe` the end of a run's wait for its callback.
    pub fn leave_inflight(&self, pipe: &mut redis::Pipeline, run: &Run) {
        pipe.zrem(
            self.names.xxl_inflight(&run.executor_id),
            run.inflight_member(),
        )
        .ignore();
    }

    /// Adds a mark's write to `pipe`.
    pub fn put_mark(
        &self,
        pipe: &mut redis::Pipeline,
        trigger_id: &str,
        mark: &Mark,
    ) -> Result<(), Error> {
        pipe.set_ex(
            self.names.dedupe(trigger_id),
            serde_json::to_string(mark)?,
            self.ttl_s,
        )
        .ignore();
        Ok(())
    }

    /// Gives a claimed, unsent trigger back: its mark and records go, so
    /// whoever receives it next sends it.
    pub async fn release(&self, runs: &[&Run], trigger_ids: &[&str]) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        for run in runs {
            self.forget(&mut pipe, run);
        }
        for id in trigger_ids {
            pipe.del(self.names.dedupe(id)).ignore();
        }
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    /// Sends `pipe` (writes only).
    pub async fn write(&self, pipe: &redis::Pipeline) -> Result<(), Error> {
        if pipe.is_empty() {
            return Ok(());
        }
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    /// The in-flight members of an executor handed off before `before_ms`.
    pub async fn inflight_before(
        &self,
        executor_id: &str,
        before_ms: i64,
    ) -> Result<Vec<(i64, u64)>, Error> {
        let members: Vec<String> = self
            .pool
            .get()
            .await?
            .zrangebyscore(self.names.xxl_inflight(executor_id), "-inf", before_ms)
            .await?;
        Ok(members
            .iter()
            .filter_map(|m| parse_inflight_member(m))
            .collect())
    }

    /// The jobs with a trigger waiting for its callback on an executor:
    /// its `running_jobs`.
    pub async fn running_jobs(&self, executor_id: &str) -> Result<Vec<u64>, Error> {
        Ok(self
            .inflight_before(executor_id, i64::MAX)
            .await?
            .into_iter()
            .map(|(_, job)| job)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_members_round_trip() {
        assert_eq!(inflight_member(42, 7), "42:7");
        assert_eq!(parse_inflight_member("42:7"), Some((42, 7)));
        assert_eq!(parse_inflight_member("x:7"), None);
        assert_eq!(parse_inflight_member("42"), None);
    }

    #[test]
    fn a_run_reads_back_without_its_optional_fields() {
        let json = r#"{"trigger_id":"7-1-0","job_id":7,"fire_ms":1,"executor_id":"a-h-1","log_id":3,"log_date_ms":1,"instance":"g","since_ms":2}"#;
        let run: Run = serde_json::from_str(json).unwrap();
        assert!(!run.killed && !run.answered && run.covered_by.is_none());
        let again: Run = serde_json::from_str(&serde_json::to_string(&run).unwrap()).unwrap();
        assert_eq!(again, run);
    }
}
