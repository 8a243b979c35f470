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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
    /// A script job's script (its `handler` is then `script:<interpreter>`);
    /// absent for a handler job. Optional in protocol version 1: an
    /// executor that does not know it has no `script:*` handler either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Script>,
}

/// The script a script job's trigger carries (XXL-JOB's `glueSource`, sent
/// with every trigger as XXL-JOB does, so an executor needs nothing else).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Script {
    /// `GLUE_SHELL`, `GLUE_PYTHON`, `GLUE_NODEJS`, `GLUE_POWERSHELL`,
    /// `GLUE_PHP`.
    pub glue_type: String,
    pub source: String,
    /// The job's script version (for logs: which version ran).
    pub version: u32,
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
