//! What the gateway remembers of each trigger it hands to an XXL-JOB
//! executor, in Redis only (any gateway instance may receive its callback,
//! or its redelivery after the instance that handed it off died):
//!
//! * `ns:dedupe:<trigger id>`: the protocol's dedupe mark, kept on the
//!   executor's behalf (`running` from the claim, then `finished` /
//!   `confirmed`);
//! * `ns:xxl:claim:{ns:dedupe:<trigger id>}`: the trigger's [`Claimant`]:
//!   its log id and the gateway instance handing it off. It is the one token
//!   of who sends the trigger: set with the mark in one script, changed
//!   hands only by a compare-and-set, given back with the mark in one
//!   script (its hash tag puts it in the mark's slot, so on a Redis Cluster
//!   too);
//! * `ns:xxl:run:<log id>`: its [`Run`] (what a callback needs), written in
//!   the claim's round trip, removed once its result is confirmed;
//! * `ns:xxl:inflight:<executor id>`: `<log id>:<job id>` while it waits for
//!   its callback (the executor's `running_jobs`, the lost-run scan);
//!
//! Every write carries `executor.dedupe_ttl_s`, so nothing outlives the
//! marks.
//!
//! Why one file of ~550 lines: every key the gateway keeps for a run, with
//! the scripts that change them together; one place says what each key
//! holds and who may write it.

use std::sync::LazyLock;

use redis::AsyncCommands;
use rondo_core::dedupe::Mark;
use rondo_core::redis::{Pool, run_script, script_cmd};
use rondo_core::{Error, ExecResult, Names};
use serde::{Deserialize, Serialize};

/// The longest `msg` published (as rondo's executors cut theirs).
const MAX_MSG_BYTES: usize = 4096;

/// `msg` cut to [`MAX_MSG_BYTES`] at a character boundary, with `…`.
pub fn cut_msg(msg: String) -> String {
    if msg.len() <= MAX_MSG_BYTES {
        return msg;
    }
    rondo_core::model::clip(&msg, MAX_MSG_BYTES, "…")
}

static CLAIM: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/claim.lua")));
static TAKE_OVER: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/take_over.lua")));
static RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/release.lua")));
static FINISH: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/finish.lua")));

/// A trigger handed to an XXL-JOB executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub trigger_id: String,
    /// The trigger's group: its dedupe mark and claim are under it.
    #[serde(default)]
    pub group: String,
    pub job_id: u64,
    pub fire_ms: i64,
    pub executor_id: String,
    pub log_id: i64,
    /// The date its log file is named by (`logDateTime`).
    pub log_date_ms: i64,
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
    /// The trigger's secrets, so their values read `***` in the result
    /// message and the log lines the executor hands back.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub secrets: std::collections::BTreeMap<String, String>,
}

impl Run {
    /// Its result with `code` and `msg` (cut as rondo's executors cut
    /// theirs), ended at `now_ms` (never before it began).
    pub fn result(&self, code: i32, msg: String, retryable: bool, now_ms: i64) -> ExecResult {
        ExecResult {
            trigger_id: self.trigger_id.clone(),
            job_id: self.job_id,
            executor_id: self.executor_id.clone(),
            fire_ms: self.fire_ms,
            start_ms: self.since_ms,
            end_ms: now_ms.max(self.since_ms),
            code,
            msg: cut_msg(self.masker().mask(msg)),
            retryable,
        }
    }

    /// What hides its secrets' values.
    pub fn masker(&self) -> rondo_core::model::secrets::Masker {
        rondo_core::model::secrets::Masker::new(&self.secrets)
    }

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

/// Who hands a trigger off: its log id and the gateway instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimant {
    pub log_id: i64,
    pub instance: String,
}

impl Claimant {
    fn value(&self) -> String {
        format!("{} {}", self.log_id, self.instance)
    }

    fn parse(value: &str) -> Option<Claimant> {
        let (log, instance) = value.split_once(' ')?;
        Some(Claimant {
            log_id: log.parse().ok()?,
            instance: instance.to_owned(),
        })
    }
}

/// How a claim of a trigger ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The mark and the claim are this hand-off's, and its run recorded.
    Won,
    /// The mark was there: what Redis holds of the trigger.
    Found(Box<Found>),
}

/// What Redis holds of a trigger whose mark was there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub mark: Option<Mark>,
    pub claimant: Option<Claimant>,
    /// The claimant's run, if it has one.
    pub run: Option<Run>,
}

/// The Redis side of hand-offs and callbacks.
pub struct Runs {
    pool: Pool,
    names: Names,
    ttl_s: u64,
}

impl Runs {
    pub fn new(pool: Pool, names: Names, ttl_s: u64) -> Runs {
        Runs { pool, names, ttl_s }
    }

    /// A new log id: 62 random bits above 2^32, so unique over every
    /// gateway instance, and never guessed by a caller that was not handed
    /// it (a callback is taken by log id). Sequences (XXL-JOB's row ids,
    /// this gateway's earlier ids) stay below 2^32.
    pub fn log_id(&self) -> i64 {
        const FLOOR: i64 = 1 << 32;
        FLOOR + rand::random::<i64>().rem_euclid((1 << 62) - FLOOR)
    }

    /// Claims the trigger of `run` for `instance` (its mark `running` and
    /// its claim, only if it has no mark) and, in the same round trip,
    /// records `run` (its run, its in-flight member). Found: the records
    /// written are undone (they are under this hand-off's own log id) and
    /// what Redis holds comes back.
    pub async fn claim(&self, mark: &Mark, run: &Run, instance: &str) -> Result<Claim, Error> {
        let claimant = Claimant {
            log_id: run.log_id,
            instance: instance.to_owned(),
        };
        let mut cmd = script_cmd(&CLAIM, 2, (5, 512));
        cmd.arg(self.names.dedupe(&run.group, &run.trigger_id))
            .arg(self.names.xxl_claim(&run.group, &run.trigger_id))
            .arg(serde_json::to_string(mark)?)
            .arg(claimant.value())
            .arg(self.ttl_s);
        let mut pipe = redis::pipe();
        pipe.add_command(cmd);
        self.put_run(&mut pipe, run)?;
        self.enter_inflight(&mut pipe, run);
        let mut conn = self.pool.get().await?;
        let (claimed,): (Vec<redis::Value>,) = match pipe.query_async(&mut conn).await {
            Ok(reply) => reply,
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                CLAIM.load_async(&mut conn).await?;
                pipe.query_async(&mut conn).await?
            }
            Err(e) => return Err(e.into()),
        };
        if matches!(claimed.first(), Some(redis::Value::Int(1))) {
            return Ok(Claim::Won);
        }
        let mut undo = redis::pipe();
        undo.del(self.names.xxl_run(run.log_id)).ignore();
        self.leave_inflight(&mut undo, run);
        let () = undo.query_async(&mut conn).await?;
        let text = |i: usize| match claimed.get(i) {
            Some(redis::Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        };
        let (mark, claimant) = (text(1), text(2));
        Ok(Claim::Found(Box::new(
            self.found_from(mark, claimant).await?,
        )))
    }

    /// What Redis holds of a trigger of `group` now.
    pub async fn found(&self, group: &str, trigger_id: &str) -> Result<Found, Error> {
        let (mark, claimant): (Option<String>, Option<String>) = redis::pipe()
            .get(self.names.dedupe(group, trigger_id))
            .get(self.names.xxl_claim(group, trigger_id))
            .query_async(&mut self.pool.get().await?)
            .await?;
        self.found_from(mark, claimant).await
    }

    async fn found_from(
        &self,
        mark: Option<String>,
        claimant: Option<String>,
    ) -> Result<Found, Error> {
        let claimant = claimant.as_deref().and_then(Claimant::parse);
        let run = match &claimant {
            Some(c) => self.run(c.log_id).await?,
            None => None,
        };
        Ok(Found {
            mark: mark.as_deref().and_then(Mark::parse),
            claimant,
            run,
        })
    }

    /// Moves a trigger's claim from `from` (`None`: it had none) to
    /// `to`, if nobody changed it meanwhile; true when this caller has it.
    pub async fn take_over(
        &self,
        group: &str,
        trigger_id: &str,
        from: Option<&Claimant>,
        to: &Claimant,
    ) -> Result<bool, Error> {
        let mut cmd = script_cmd(&TAKE_OVER, 2, (5, 256));
        cmd.arg(self.names.xxl_claim(group, trigger_id))
            .arg(self.names.dedupe(group, trigger_id))
            .arg(from.map(Claimant::value).unwrap_or_default())
            .arg(to.value())
            .arg(self.ttl_s);
        let taken: i64 = run_script(&mut self.pool.get().await?, &TAKE_OVER, &cmd).await?;
        Ok(taken == 1)
    }

    /// Whether a trigger's claim is `claimant`'s now.
    pub async fn holds(
        &self,
        group: &str,
        trigger_id: &str,
        claimant: &Claimant,
    ) -> Result<bool, Error> {
        let value: Option<String> = self
            .pool
            .get()
            .await?
            .get(self.names.xxl_claim(group, trigger_id))
            .await?;
        Ok(value.as_deref() == Some(claimant.value().as_str()))
    }

    /// Gives a claimed, unsent trigger back (its mark and claim go, its
    /// run and in-flight member too), while the claim is `claimant`'s.
    pub async fn release(&self, run: &Run, claimant: &Claimant) -> Result<bool, Error> {
        let mut cmd = script_cmd(&RELEASE, 2, (3, 256));
        cmd.arg(self.names.dedupe(&run.group, &run.trigger_id))
            .arg(self.names.xxl_claim(&run.group, &run.trigger_id))
            .arg(claimant.value());
        let mut conn = self.pool.get().await?;
        let released: i64 = run_script(&mut conn, &RELEASE, &cmd).await?;
        if released == 1 {
            let mut pipe = redis::pipe();
            pipe.del(self.names.xxl_run(run.log_id)).ignore();
            self.leave_inflight(&mut pipe, run);
            let () = pipe.query_async(&mut conn).await?;
        }
        Ok(released == 1)
    }

    /// Writes the `finished` mark of a trigger the gateway answers itself,
    /// while its claim is still `claimant`'s; false when someone else
    /// settles it (a callback came, another instance took it over).
    pub async fn finish(
        &self,
        group: &str,
        trigger_id: &str,
        claimant: &Claimant,
        mark: &Mark,
    ) -> Result<bool, Error> {
        let mut cmd = script_cmd(&FINISH, 2, (5, 1024));
        cmd.arg(self.names.dedupe(group, trigger_id))
            .arg(self.names.xxl_claim(group, trigger_id))
            .arg(claimant.value())
            .arg(serde_json::to_string(mark)?)
            .arg(self.ttl_s);
        let written: i64 = run_script(&mut self.pool.get().await?, &FINISH, &cmd).await?;
        Ok(written == 1)
    }

    /// Records the run of a trigger whose claim this hand-off took over
    /// without one (its run and in-flight member).
    pub async fn record(&self, run: &Run) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        self.put_run(&mut pipe, run)?;
        self.enter_inflight(&mut pipe, run);
        self.write(&pipe).await
    }

    /// Writes a trigger's mark whatever it holds (a trigger never claimed:
    /// answered at once, as a killed one).
    pub fn put_mark(
        &self,
        pipe: &mut redis::Pipeline,
        group: &str,
        trigger_id: &str,
        mark: &Mark,
    ) -> Result<(), Error> {
        pipe.set_ex(
            self.names.dedupe(group, trigger_id),
            serde_json::to_string(mark)?,
            self.ttl_s,
        )
        .ignore();
        Ok(())
    }

    /// Adds a new run's write to `pipe`.
    pub fn put_run(&self, pipe: &mut redis::Pipeline, run: &Run) -> Result<(), Error> {
        pipe.set_ex(
            self.names.xxl_run(run.log_id),
            serde_json::to_string(run)?,
            self.ttl_s,
        )
        .ignore();
        Ok(())
    }

    /// Adds a rewrite of an existing run to `pipe`: a run its callback
    /// removed meanwhile is not brought back (`SET XX`).
    pub fn rewrite_run(&self, pipe: &mut redis::Pipeline, run: &Run) -> Result<(), Error> {
        pipe.cmd("SET")
            .arg(self.names.xxl_run(run.log_id))
            .arg(serde_json::to_string(run)?)
            .arg("XX")
            .arg("EX")
            .arg(self.ttl_s)
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

    /// The run of a trigger's claimant, if it has one that waits.
    pub async fn run_of(&self, group: &str, trigger_id: &str) -> Result<Option<Run>, Error> {
        let claimant: Option<String> = self
            .pool
            .get()
            .await?
            .get(self.names.xxl_claim(group, trigger_id))
            .await?;
        match claimant.as_deref().and_then(Claimant::parse) {
            Some(c) => self.run(c.log_id).await,
            None => Ok(None),
        }
    }

    /// Adds to `pipe` the end of a run whose result is confirmed: its
    /// `confirmed` mark, its claim, its run and in-flight member go.
    pub fn settle(
        &self,
        pipe: &mut redis::Pipeline,
        run: &Run,
        confirmed: &Mark,
    ) -> Result<(), Error> {
        self.put_mark(pipe, &run.group, &run.trigger_id, confirmed)?;
        pipe.del(self.names.xxl_claim(&run.group, &run.trigger_id))
            .ignore()
            .del(self.names.xxl_run(run.log_id))
            .ignore();
        self.leave_inflight(pipe, run);
        Ok(())
    }

    fn enter_inflight(&self, pipe: &mut redis::Pipeline, run: &Run) {
        let key = self.names.xxl_inflight(&run.executor_id);
        pipe.zadd(&key, run.inflight_member(), run.since_ms)
            .ignore()
            .expire(&key, self.ttl_s as i64)
            .ignore();
    }

    /// Adds to `pipe` the end of a run's wait for its callback.
    pub fn leave_inflight(&self, pipe: &mut redis::Pipeline, run: &Run) {
        pipe.zrem(
            self.names.xxl_inflight(&run.executor_id),
            run.inflight_member(),
        )
        .ignore();
    }

    /// Removes in-flight members that have no run any more (written by a
    /// claim that lost and could not undo, or whose run expired).
    pub async fn drop_inflight(
        &self,
        executor_id: &str,
        members: &[(i64, u64)],
    ) -> Result<(), Error> {
        if members.is_empty() {
            return Ok(());
        }
        let members: Vec<String> = members
            .iter()
            .map(|(log, job)| inflight_member(*log, *job))
            .collect();
        let () = self
            .pool
            .get()
            .await?
            .zrem(self.names.xxl_inflight(executor_id), members)
            .await?;
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
    fn in_flight_members_and_claims_round_trip() {
        assert_eq!(inflight_member(42, 7), "42:7");
        assert_eq!(parse_inflight_member("42:7"), Some((42, 7)));
        assert_eq!(parse_inflight_member("x:7"), None);
        assert_eq!(parse_inflight_member("42"), None);
        let c = Claimant {
            log_id: 42,
            instance: "xxl-gateway-h-1".into(),
        };
        assert_eq!(Claimant::parse(&c.value()), Some(c));
        assert_eq!(Claimant::parse("42"), None);
    }

    #[test]
    fn a_run_reads_back_without_its_optional_fields() {
        let json = r#"{"trigger_id":"7-1-0","job_id":7,"fire_ms":1,"executor_id":"a-h-1","log_id":3,"log_date_ms":1,"since_ms":2}"#;
        let run: Run = serde_json::from_str(json).unwrap();
        assert!(!run.killed && !run.answered && run.covered_by.is_none());
        let again: Run = serde_json::from_str(&serde_json::to_string(&run).unwrap()).unwrap();
        assert_eq!(again, run);
    }
}
