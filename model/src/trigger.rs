//! The messages on the trigger path: what the dispatcher publishes to an
//! executor's queue, and the result the executor publishes back.
//!
//! The wire format is JSON so executors can be written in any language with
//! an AMQP client; it is documented in `docs/message-formats.md`.

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
    /// The job's named secrets, for the executor to hand its handler
    /// (absent when the job has none). Kept out of the trigger events.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub secrets: std::collections::BTreeMap<String, String>,
}

/// The script a script job's trigger carries (XXL-JOB's `glueSource`, sent
/// with every trigger as XXL-JOB does, so an executor needs nothing else).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Script {
    /// `GLUE_SHELL`, `GLUE_PYTHON`, `GLUE_NODEJS`, `GLUE_POWERSHELL`,
    /// `GLUE_PHP`, `GLUE_GROOVY`.
    pub glue_type: String,
    pub source: String,
    /// The job's script version (for logs: which version ran).
    pub version: u32,
    /// When this version was saved (ms); XXL-JOB's `glueUpdatetime`, by
    /// which its executor knows a script changed. Absent (0) in messages
    /// of builds before it.
    #[serde(default)]
    pub updated_ms: i64,
}

/// The body of a message on an executor queue: one or more triggers for that
/// executor. Each trigger keeps its own id, result and dedupe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerBatch {
    /// Schema version, 1.
    pub v: u8,
    pub triggers: Vec<Trigger>,
}

/// The longest trigger id an executor accepts (it becomes part of a Redis
/// key).
pub const MAX_TRIGGER_ID_BYTES: usize = 512;

impl TriggerBatch {
    pub const VERSION: u8 = 1;

    pub fn new(triggers: Vec<Trigger>) -> Self {
        TriggerBatch {
            v: Self::VERSION,
            triggers,
        }
    }

    /// Decodes a message of an executor queue as every executor must; the
    /// error is the dead-letter reason (`docs/executor-protocol.md` §10).
    pub fn decode(body: &[u8]) -> Result<TriggerBatch, String> {
        let unsupported = |v: u64| {
            format!(
                "unsupported trigger batch version {v} (this executor reads version {})",
                Self::VERSION
            )
        };
        let batch = match serde_json::from_slice::<TriggerBatch>(body) {
            Ok(batch) => batch,
            Err(e) => {
                return Err(match probe_version(body) {
                    Some(v) if v != u64::from(Self::VERSION) => unsupported(v),
                    _ => format!("malformed trigger batch: {e}"),
                });
            }
        };
        if batch.v != Self::VERSION {
            return Err(unsupported(u64::from(batch.v)));
        }
        if batch.triggers.is_empty() {
            return Err("empty trigger list".into());
        }
        for (i, trigger) in batch.triggers.iter().enumerate() {
            if trigger.trigger_id.is_empty() {
                return Err(format!("trigger {i} has an empty trigger_id"));
            }
            if trigger.trigger_id.len() > MAX_TRIGGER_ID_BYTES {
                return Err(format!(
                    "trigger {i} has a trigger_id longer than {MAX_TRIGGER_ID_BYTES} bytes"
                ));
            }
        }
        Ok(batch)
    }
}

/// The `v` of a body that did not decode as a whole, if it has one (a
/// trigger batch or a control message).
fn probe_version(body: &[u8]) -> Option<u64> {
    #[derive(Deserialize)]
    struct Probe {
        v: u64,
    }
    serde_json::from_slice::<Probe>(body).ok().map(|p| p.v)
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
    /// The trigger's group (its dedupe mark is under it). Absent in
    /// messages of earlier senders; rondo's executors do not need it, the
    /// XXL-JOB gateway finds the run by it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
}

impl Control {
    /// The control schema executors read.
    pub const VERSION: u8 = 1;

    /// The message that kills `trigger_id` of job `job_id` in `group`.
    pub fn kill(group: &str, trigger_id: &str, job_id: u64) -> Control {
        Control {
            v: Self::VERSION,
            action: ControlAction::Kill,
            trigger_id: trigger_id.to_owned(),
            job_id,
            group: group.to_owned(),
        }
    }

    /// Decodes a message of an executor's control queue; the error is the
    /// dead-letter reason.
    pub fn decode(body: &[u8]) -> Result<Control, String> {
        let unsupported = |v: u64| {
            format!(
                "unsupported control message version {v} (this executor reads version {})",
                Self::VERSION
            )
        };
        let control = match serde_json::from_slice::<Control>(body) {
            Ok(control) => control,
            Err(e) => {
                return Err(match probe_version(body) {
                    Some(v) if v != u64::from(Self::VERSION) => unsupported(v),
                    _ => format!("malformed control message: {e}"),
                });
            }
        };
        if control.v != Self::VERSION {
            return Err(unsupported(u64::from(control.v)));
        }
        if control.trigger_id.is_empty() {
            return Err("control message with an empty trigger_id".into());
        }
        Ok(control)
    }
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
    use crate::model::BlockStrategy;

    fn trigger(id: &str) -> Trigger {
        Trigger {
            trigger_id: id.into(),
            job_id: 1,
            group: "g".into(),
            executor_id: "e".into(),
            handler: "demo".into(),
            params: String::new(),
            trigger_type: TriggerType::Cron,
            fire_ms: 1,
            sent_ms: 1,
            shard_index: 0,
            shard_total: 1,
            timeout_s: 0,
            block: BlockStrategy::SerialExecution,
            retry_count: 0,
            script: None,
            secrets: Default::default(),
        }
    }

    fn body(batch: &TriggerBatch) -> Vec<u8> {
        serde_json::to_vec(batch).unwrap()
    }

    #[test]
    fn a_valid_batch_decodes() {
        let batch = TriggerBatch::new(vec![trigger("a"), trigger("b")]);
        assert_eq!(TriggerBatch::decode(&body(&batch)).unwrap(), batch);
    }

    #[test]
    fn bad_batches_say_what_is_wrong() {
        let decode = TriggerBatch::decode;
        assert!(
            decode(b"garbage")
                .unwrap_err()
                .starts_with("malformed trigger batch")
        );
        assert!(
            decode(b"{\"v\":1}")
                .unwrap_err()
                .starts_with("malformed trigger batch")
        );
        let mut v2 = TriggerBatch::new(vec![trigger("a")]);
        v2.v = 2;
        assert!(
            decode(&body(&v2))
                .unwrap_err()
                .contains("unsupported trigger batch version 2")
        );
        assert!(
            decode(b"{\"v\":7,\"jobs\":[]}")
                .unwrap_err()
                .contains("version 7")
        );
        assert_eq!(
            decode(&body(&TriggerBatch::new(vec![]))).unwrap_err(),
            "empty trigger list"
        );
        let no_id = TriggerBatch::new(vec![trigger("a"), trigger("")]);
        assert_eq!(
            decode(&body(&no_id)).unwrap_err(),
            "trigger 1 has an empty trigger_id"
        );
        let long = TriggerBatch::new(vec![trigger(&"x".repeat(600))]);
        assert!(decode(&body(&long)).unwrap_err().contains("longer than"));
    }

    #[test]
    fn a_kill_round_trips_in_the_documented_shape() {
        let kill = Control::kill("g", "7-1000-0", 7);
        let json = serde_json::to_value(&kill).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"v": 1, "action": "kill", "trigger_id": "7-1000-0", "job_id": 7, "group": "g"})
        );
        assert_eq!(Control::decode(json.to_string().as_bytes()).unwrap(), kill);
        // An earlier sender's message, without the group, still reads.
        let old = br#"{"v": 1, "action": "kill", "trigger_id": "7-1000-0", "job_id": 7}"#;
        assert_eq!(Control::decode(old).unwrap().group, "");
    }

    #[test]
    fn bad_control_messages_say_what_is_wrong() {
        let decode = Control::decode;
        assert!(
            decode(b"nope")
                .unwrap_err()
                .starts_with("malformed control message")
        );
        let unknown = br#"{"v":1,"action":"pause","trigger_id":"t","job_id":1}"#;
        assert!(
            decode(unknown)
                .unwrap_err()
                .contains("unknown variant `pause`")
        );
        let v2 = br#"{"v":2,"action":"kill","trigger_id":"t","job_id":1}"#;
        assert!(decode(v2).unwrap_err().contains("version 2"));
        let v3 = br#"{"v":3,"other":true}"#;
        assert!(decode(v3).unwrap_err().contains("version 3"));
        let empty = br#"{"v":1,"action":"kill","trigger_id":"","job_id":1}"#;
        assert_eq!(
            decode(empty).unwrap_err(),
            "control message with an empty trigger_id"
        );
    }
}
