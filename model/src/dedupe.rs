//! The dedupe mark of a trigger id, written once: what an executor writes
//! before, during and after a run, what the API writes to kill a trigger
//! that has not started, and what the leader's reaper reads back.
//!
//! `<ns>:dedupe:<trigger id>` holds a JSON [`Mark`], tagged by `state`, and
//! lives `executor.dedupe_ttl_s`. Whoever sets it first with `SET NX`
//! decides the trigger's fate: an executor that wins runs it (`running`,
//! then `finished`, then `confirmed`); a kill that wins (`killed`) makes
//! every executor that later receives the trigger answer it as killed
//! without running it. The executor's side of the table is in
//! `executor/src/admission/dedupe.rs`.

use serde::{Deserialize, Serialize};

use crate::trigger::ExecResult;

/// A trigger id's state, as stored in its dedupe key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Mark {
    /// An executor claimed it and runs (or ran) the handler.
    Running {
        executor: String,
        incarnation: String,
        since_ms: i64,
    },
    /// The handler ended; the full result, for a redelivery to republish.
    Finished {
        executor: String,
        result: ExecResult,
    },
    /// The broker confirmed the result.
    Confirmed { executor: String, code: i32 },
    /// Killed before any executor started it: it is never run, and the
    /// executor that receives it answers it as killed.
    Killed { by: String, at_ms: i64 },
}

impl Mark {
    /// The executor that holds the trigger; `None` for a kill.
    pub fn executor(&self) -> Option<&str> {
        match self {
            Mark::Running { executor, .. }
            | Mark::Finished { executor, .. }
            | Mark::Confirmed { executor, .. } => Some(executor),
            Mark::Killed { .. } => None,
        }
    }

    /// Reads a stored value; `None` for a value that is not a rondo mark
    /// (an executor in another language may store its plain id).
    pub fn parse(value: &str) -> Option<Mark> {
        serde_json::from_str(value).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_as_tagged_json() {
        let marks = [
            Mark::Running {
                executor: "e1".into(),
                incarnation: "abc".into(),
                since_ms: 5,
            },
            Mark::Confirmed {
                executor: "e1".into(),
                code: 200,
            },
            Mark::Killed {
                by: "api".into(),
                at_ms: 7,
            },
        ];
        for mark in marks {
            let json = serde_json::to_string(&mark).unwrap();
            assert!(json.starts_with("{\"state\":"), "{json}");
            assert_eq!(Mark::parse(&json), Some(mark));
        }
        let killed = r#"{"state":"killed","by":"api","at_ms":7}"#;
        assert_eq!(Mark::parse(killed).unwrap().executor(), None);
    }

    #[test]
    fn values_that_are_not_rondo_marks_parse_to_none() {
        assert_eq!(Mark::parse("e1"), None);
        assert_eq!(Mark::parse("{\"state\":\"other\"}"), None);
    }
}
