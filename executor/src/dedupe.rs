//! The dedupe marks in Redis that make a trigger id run at most once, and let
//! a redelivered trigger find the result of a run that already happened.
//!
//! `<ns>:dedupe:<trigger id>` holds a JSON [`Mark`] and lives
//! `executor.dedupe_ttl_s`. It moves through three states:
//!
//! 1. `running`: set with `SET NX` before the handler starts, naming the
//!    executor and its *incarnation* (a random id per `Executor::run`).
//! 2. `finished`: the handler ended; the mark holds the full result, so a
//!    redelivery can republish it without running the handler again.
//! 3. `confirmed`: the broker confirmed the result; a redelivery only acks.
//!
//! What a delivery does when `SET NX` finds a mark (see `Runner::admit`):
//!
//! | mark | by this executor | by another executor (or not a rondo mark) |
//! | --- | --- | --- |
//! | `running`, this incarnation | the run is in flight here: wait for it | skip |
//! | `running`, older incarnation | the process died mid-run: publish a 500 "restarted" result, never re-run | skip |
//! | `finished` | publish the stored result | skip |
//! | `confirmed` | ack only | skip |
//!
//! "Skip" means: do not run, publish nothing, ack; the executor that holds
//! the mark answers for the trigger (or the scheduler marks it lost). A
//! foreign mark may also be a plain executor id written by an executor in
//! another language; it is treated the same way.

use deadpool_redis::Pool;
use rondo_core::{Error, ExecResult, Names};
use serde::{Deserialize, Serialize};

/// A trigger id's state, as stored in its dedupe key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum Mark {
    Running {
        executor: String,
        incarnation: String,
        since_ms: i64,
    },
    Finished {
        executor: String,
        result: ExecResult,
    },
    Confirmed {
        executor: String,
        code: i32,
    },
}

impl Mark {
    pub(crate) fn executor(&self) -> &str {
        match self {
            Mark::Running { executor, .. }
            | Mark::Finished { executor, .. }
            | Mark::Confirmed { executor, .. } => executor,
        }
    }
}

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

/// Dedupe marks of one namespace.
#[derive(Clone)]
pub(crate) struct Dedupe {
    pool: Pool,
    names: Names,
    ttl_s: u64,
}

impl Dedupe {
    pub(crate) fn new(pool: Pool, names: Names, ttl_s: u64) -> Self {
        debug_assert!(ttl_s > 0);
        Dedupe { pool, names, ttl_s }
    }

    /// Sets `mark` unless the trigger id has one; returns what was there.
    pub(crate) async fn claim(&self, trigger_id: &str, mark: &Mark) -> Result<Claim, Error> {
        let key = self.names.dedupe(trigger_id);
        let value = serde_json::to_string(mark)?;
        let mut conn = self.pool.get().await?;
        // The key can expire between SET NX and GET; then try again.
        for _ in 0..3 {
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
            let held: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
            if let Some(held) = held {
                return Ok(parse(held));
            }
        }
        Err(Error::unavailable(format!(
            "dedupe key {key} keeps vanishing"
        )))
    }

    /// Overwrites the mark (the run moved on), renewing its time to live.
    pub(crate) async fn set(&self, trigger_id: &str, mark: &Mark) -> Result<(), Error> {
        let value = serde_json::to_string(mark)?;
        let mut conn = self.pool.get().await?;
        let () = redis::cmd("SET")
            .arg(self.names.dedupe(trigger_id))
            .arg(value)
            .arg("EX")
            .arg(self.ttl_s)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

fn parse(held: String) -> Claim {
    match serde_json::from_str::<Mark>(&held) {
        Ok(mark) => Claim::Held(mark),
        Err(_) => Claim::Foreign(held),
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
        let confirmed = Mark::Confirmed {
            executor: "e1".into(),
            code: 200,
        };
        assert_eq!(confirmed.executor(), "e1");
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
