//! The messages on the trigger path: what the dispatcher publishes to an
//! executor's queue, and the result the executor publishes back.
//!
//! The wire format is JSON so executors can be written in any language with
//! an AMQP client; it is documented in the README.

use serde::{Deserialize, Serialize};

use crate::model::BlockStrategy;

/// Result codes, as XXL-JOB's `handle_code` / `trigger_code`.
pub mod code {
    pub const SUCCESS: i32 = 200;
    pub const FAIL: i32 = 500;
    pub const TIMEOUT: i32 = 502;
}

/// Why a trigger happened (XXL-JOB's `TriggerTypeEnum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TriggerType {
    /// The schedule (CRON or FIX_RATE).
    Cron,
    /// A late fire replayed by `FIRE_ONCE_NOW`.
    Misfire,
    /// "Trigger now" through the API or CLI.
    Manual,
    /// A re-trigger after a failure.
    Retry,
    /// A child job after its parent succeeded.
    Parent,
}

impl TriggerType {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerType::Cron => "CRON",
            TriggerType::Misfire => "MISFIRE",
            TriggerType::Manual => "MANUAL",
            TriggerType::Retry => "RETRY",
            TriggerType::Parent => "PARENT",
        }
    }
}

/// One trigger: one run of a job's handler on one executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// Unique per (job, fire, shard, attempt); the executor dedupes on it.
    pub trigger_id: String,
    pub job_id: u64,
    pub group: String,
    pub executor_id: String,
    pub handler: String,
    pub params: String,
    pub trigger_type: TriggerType,
    /// The scheduled instant (ms since the epoch, UTC).
    pub fire_ms: i64,
    /// When the dispatcher published it.
    pub sent_ms: i64,
    pub shard_index: u32,
    pub shard_total: u32,
    pub timeout_s: u32,
    pub block: BlockStrategy,
    pub retry_count: u32,
}

/// The body of a message on an executor queue: one or more triggers for that
/// executor. Each trigger keeps its own id, result and dedupe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerBatch {
    /// Schema version, 1.
    pub v: u8,
    pub triggers: Vec<Trigger>,
}

impl TriggerBatch {
    pub const VERSION: u8 = 1;

    pub fn new(triggers: Vec<Trigger>) -> Self {
        TriggerBatch {
            v: Self::VERSION,
            triggers,
        }
    }
}

/// The id of a scheduled fire: deterministic, so a fire published twice in a
/// crash window carries the same id and the executor runs it once.
pub fn scheduled_trigger_id(job_id: u64, fire_ms: i64, shard_index: u32) -> String {
    format!("{job_id}-{fire_ms}-{shard_index}")
}

/// The id of a manual (or child / retry) trigger: unique per request.
pub fn adhoc_trigger_id(job_id: u64, now_ms: i64, kind: TriggerType, shard_index: u32) -> String {
    let nonce: u32 = rand::random();
    let tag = match kind {
        TriggerType::Manual => 'm',
        TriggerType::Retry => 'r',
        TriggerType::Parent => 'p',
        TriggerType::Cron | TriggerType::Misfire => 'c',
    };
    format!("{job_id}-{now_ms}-{shard_index}-{tag}{nonce:08x}")
}

/// What an executor publishes when a trigger ends. `fire_ms` must equal the
/// trigger's: with the trigger id it keys the log row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecResult {
    pub trigger_id: String,
    pub job_id: u64,
    pub executor_id: String,
    pub fire_ms: i64,
    /// When the handler started (ms).
    pub start_ms: i64,
    /// When the handler ended (ms).
    pub end_ms: i64,
    /// [`code::SUCCESS`], [`code::FAIL`] or [`code::TIMEOUT`].
    pub code: i32,
    pub msg: String,
    /// False when the handler aborted (or the run was killed): the
    /// scheduler does not retry it. Absent in older messages: true.
    #[serde(default = "retryable_default")]
    pub retryable: bool,
}

fn retryable_default() -> bool {
    true
}

/// A message on the control exchange, to one executor (routing key: its id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// Schema version, 1.
    pub v: u8,
    pub action: ControlAction,
    pub trigger_id: String,
    pub job_id: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlAction {
    /// Cancel the run of this trigger (its token fires); result "killed".
    Kill,
}

impl ExecResult {
    pub fn is_success(&self) -> bool {
        self.code == code::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduled_ids_are_deterministic_and_distinct() {
        assert_eq!(
            scheduled_trigger_id(7, 1000, 0),
            scheduled_trigger_id(7, 1000, 0)
        );
        assert_ne!(
            scheduled_trigger_id(7, 1000, 0),
            scheduled_trigger_id(7, 1000, 1)
        );
        assert_ne!(
            scheduled_trigger_id(7, 1000, 0),
            scheduled_trigger_id(71, 100, 0)
        );
    }

    #[test]
    fn adhoc_ids_differ_per_call() {
        let a = adhoc_trigger_id(7, 1000, TriggerType::Manual, 0);
        let b = adhoc_trigger_id(7, 1000, TriggerType::Manual, 0);
        assert_ne!(a, b);
        assert!(a.starts_with("7-1000-0-m"));
    }
}
