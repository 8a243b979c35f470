//! A failed trigger, as an alarm reports it.

use rondo_core::event::TriggerRecord;
use rondo_core::{ExecResult, Trigger};

/// A failed trigger, as the alarm reports it: a run that ended badly, or a
/// trigger that never reached an executor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    pub trigger_id: String,
    /// The scheduled instant; with the trigger id, the key of the log row.
    pub fire_ms: i64,
    /// Empty when no executor was reached.
    pub executor_id: String,
    /// XXL-JOB's code ([`code::FAIL`], [`code::TIMEOUT`], …).
    ///
    /// [`code::FAIL`]: rondo_core::trigger::code::FAIL
    /// [`code::TIMEOUT`]: rondo_core::trigger::code::TIMEOUT
    pub code: i32,
    pub msg: String,
    /// The failed attempt's retry count (0 = the first run).
    pub retry_count: u32,
    pub params: String,
    /// The job's failures this alarm stands for: this one and those
    /// folded into it while the job's alarms were throttled.
    #[serde(default = "one")]
    pub failures: u32,
}

fn one() -> u32 {
    1
}

impl Failure {
    /// A run that ended badly, with the trigger that started it.
    pub fn of_result(result: &ExecResult, trigger: &Trigger) -> Failure {
        Failure {
            trigger_id: result.trigger_id.clone(),
            fire_ms: result.fire_ms,
            executor_id: result.executor_id.clone(),
            code: result.code,
            msg: result.msg.clone(),
            retry_count: trigger.retry_count,
            params: trigger.params.clone(),
            failures: 1,
        }
    }

    /// A trigger the dispatcher could not deliver.
    pub fn of_trigger(record: &TriggerRecord) -> Failure {
        let t = &record.trigger;
        Failure {
            trigger_id: t.trigger_id.clone(),
            fire_ms: t.fire_ms,
            executor_id: t.executor_id.clone(),
            code: record.code,
            msg: record.msg.clone(),
            retry_count: t.retry_count,
            params: t.params.clone(),
            failures: 1,
        }
    }
}
