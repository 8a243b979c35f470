//! The dedupe marks in Redis that make a trigger id run at most once, and let
//! a redelivered trigger find the result of a run that already happened.
//!
//! `<ns>:dedupe:<app>:<trigger id>` holds a JSON [`Mark`] (its format is
//! [`rondo_core::dedupe`]) and lives `executor.dedupe_ttl_s`. An executor
//! moves it through three states:
//!
//! 1. `running`: set with `SET NX` before the handler starts, naming the
//!    executor and its *incarnation* (a random id per `Executor::run`).
//!    Deleted again if the executor shuts down before the handler started
//!    (the trigger waited for a free handler slot), so its redelivery runs
//!    it.
//! 2. `finished`: the handler ended; the mark holds the full result, so a
//!    redelivery can republish it without running the handler again.
//! 3. `confirmed`: the broker confirmed the result; a redelivery only acks.
//!
//! What a delivery does when `SET NX` finds a mark (see `Runner::admit`):
//!
//! | mark | by this executor | by another executor (or not a rondo mark) |
//! | --- | --- | --- |
//! | `running`, this incarnation | in flight here: wait for it; ran here (its later marks unwritten): done; neither (an earlier claim set it, its answer lost): run it | skip |
//! | `running`, older incarnation | the process died mid-run: publish a 500 "restarted" result, never re-run | skip |
//! | `finished` | publish the stored result | skip |
//! | `confirmed` | ack only | skip |
//! | `killed` (by the API, before any executor took it) | answer 500 "killed", never run | the same |
//!
//! "Skip" means: do not run, publish nothing, ack; the executor that holds
//! the mark answers for the trigger (or the scheduler marks it lost). A
//! foreign mark may also be a plain executor id written by an executor in
//! another language; it is treated the same way.
//!
//! The writes of all triggers in flight share Redis pipelines (see
//! [`Dedupe`]); only reading a mark that `SET NX` found costs a round trip
//! of its own, and that happens on redeliveries.

use rondo_core::batcher::{Batcher, Limits};
pub(crate) use rondo_core::dedupe::Mark;
use rondo_core::redis::Pool;
use rondo_core::{Error, Names};

use tokio::sync::oneshot;

/// Mark writes per pipeline at most, and pipelines in flight at once.
pub(crate) const BATCH_LIMITS: Limits = Limits {
    max_items: 500,
    max_flushes: 2,
    // The `running` mark precedes the handler: a short wait only.
    linger: std::time::Duration::from_millis(2),
};

/// What `claim` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The mark was set: this executor runs the trigger.
    Won,
    /// A rondo mark was there already.
    Held(Mark),
    /// Something else was there (another implementation's value).
    Foreign(String),
}

/// One mark write in a pipeline.
struct Write {
    key: String,
    op: Op,
}

enum Op {
    /// `SET NX`; told whether the key was set.
    Claim(String, oneshot::Sender<bool>),
    /// `SET`.
    Set(String),
    /// `DEL`.
    Release,
}

/// Dedupe marks of one namespace.
///
/// Writes are group-committed: every `SET NX` of [`Dedupe::claim`], `SET`
/// of [`Dedupe::set`] and `DEL` of [`Dedupe::release`] submitted while
/// earlier pipelines are in flight goes out in the next pipeline (one
/// round trip for up to [`BATCH_LIMITS`]`.max_items` marks), and each
/// caller still gets its own answer: a pipeline of `SET NX` answers each
/// command, so every claimer learns whether *it* won. A lone write goes
/// out alone, at once. A pipeline that fails fails each of its writes (a
/// failed claim sends its delivery back to the queue, as before).
#[derive(Clone)]
pub(crate) struct Dedupe {
    pool: Pool,
    names: Names,
    /// The executor's group: its marks are under it (its Redis user
    /// reaches no other group's).
    app: String,
    ttl_s: u64,
    writes: Batcher<(), Write, ()>,
}

impl Dedupe {
    /// Must be called inside a tokio runtime (it starts the batching task,
    /// which ends once every clone is dropped).
    pub(crate) fn new(pool: Pool, names: Names, app: &str, ttl_s: u64) -> Self {
        debug_assert!(ttl_s > 0);
        let flush_pool = pool.clone();
        let writes = Batcher::spawn("dedupe", BATCH_LIMITS, move |(), writes: Vec<Write>| {
            let pool = flush_pool.clone();
            async move { write_all(&pool, ttl_s, writes).await }
        });
        Dedupe {
            pool,
            names,
            app: app.to_owned(),
            ttl_s,
            writes,
        }
    }

    /// Sets `mark` unless the trigger id has one; returns what was there.
    pub(crate) async fn claim(&self, trigger_id: &str, mark: &Mark) -> Result<Claim, Error> {
        // The common case, batched: the id is new and the claim wins.
        let (tx, won) = oneshot::channel();
        let write = Write {
            key: self.names.dedupe(&self.app, trigger_id),
            op: Op::Claim(serde_json::to_string(mark)?, tx),
        };
        self.writes.submit((), write).await?;
        if won
            .await
            .map_err(|_| Error::internal("dedupe pipeline gave no answer"))?
        {
            return Ok(Claim::Won);
        }
        // A redelivery: read the mark, on a round trip of its own (boxed:
        // this rare path's future is big, and every trigger waiting for
        // its claim would carry it).
        let key = self.names.dedupe(&self.app, trigger_id);
        let value = serde_json::to_string(mark)?;
        Box::pin(self.held(key, value)).await
    }

    /// What holds `key`, after a `SET NX` of `value` found it taken.
    async fn held(&self, key: String, value: String) -> Result<Claim, Error> {
        let mut conn = self.pool.get().await?;
        // The key can expire between SET NX and GET; then try again.
        for _ in 0..3 {
            let held: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
            if let Some(held) = held {
                return Ok(parse(held));
            }
            let set: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(&value)
                .arg("NX")
                .arg("EX")
                .arg(self.ttl_s)
                .query_async(&mut conn)
                .await?;
            if set.is_some() {
                return Ok(Claim::Won);
            }
        }
        Err(Error::unavailable(format!(
            "dedupe key {key} keeps vanishing"
        )))
    }

    /// Overwrites the mark (the run moved on), renewing its time to live.
    pub(crate) async fn set(&self, trigger_id: &str, mark: &Mark) -> Result<(), Error> {
        let write = Write {
            key: self.names.dedupe(&self.app, trigger_id),
            op: Op::Set(serde_json::to_string(mark)?),
        };
        self.writes.submit((), write).await
    }

    /// Removes the mark of a trigger this executor claimed but did not
    /// run (it shuts down first), so that its redelivery runs it.
    pub(crate) async fn release(&self, trigger_id: &str) -> Result<(), Error> {
        let write = Write {
            key: self.names.dedupe(&self.app, trigger_id),
            op: Op::Release,
        };
        self.writes.submit((), write).await
    }
}

/// Sends `writes` as one pipeline and tells each claim its answer.
async fn write_all(pool: &Pool, ttl_s: u64, writes: Vec<Write>) -> Result<(), Error> {
    let mut pipe = redis::pipe();
    for w in &writes {
        match &w.op {
            Op::Claim(value, _) => pipe.set_options(&w.key, value, claim_options(ttl_s)),
            Op::Set(value) => pipe.set_ex(&w.key, value, ttl_s),
            Op::Release => pipe.del(&w.key),
        };
    }
    let mut conn = pool.get().await?;
    // `SET NX` answers nil when it found the key.
    let answers: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
    // A claim gates a run: on a Redis Cluster it reaches a replica before
    // the trigger runs, so a failover of its master cannot forget it and
    // let a redelivery run the trigger again.
    conn.replicate().await?;
    if answers.len() != writes.len() {
        return Err(Error::internal(format!(
            "dedupe pipeline: {} answers to {} writes",
            answers.len(),
            writes.len()
        )));
    }
    for (w, answer) in writes.into_iter().zip(answers) {
        if let Op::Claim(_, claimed) = w.op {
            let _ = claimed.send(answer != redis::Value::Nil);
        }
    }
    Ok(())
}

fn claim_options(ttl_s: u64) -> redis::SetOptions {
    redis::SetOptions::default()
        .conditional_set(redis::ExistenceCheck::NX)
        .with_expiration(redis::SetExpiry::EX(ttl_s))
}

fn parse(held: String) -> Claim {
    match Mark::parse(&held) {
        Some(mark) => Claim::Held(mark),
        None => Claim::Foreign(held),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_as_tagged_json() {
        let mark = Mark::Running {
            executor: "e1".into(),
            incarnation: "abc".into(),
            since_ms: 5,
        };
        let json = serde_json::to_string(&mark).unwrap();
        assert!(json.contains("\"state\":\"running\""));
        assert_eq!(parse(json), Claim::Held(mark));
    }

    #[test]
    fn other_values_are_foreign() {
        assert_eq!(parse("e1".into()), Claim::Foreign("e1".into()));
        assert_eq!(
            parse("{\"state\":\"other\"}".into()),
            Claim::Foreign("{\"state\":\"other\"}".into())
        );
    }
}
