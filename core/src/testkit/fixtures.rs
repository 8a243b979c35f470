//! Jobs, groups, triggers, results and events with sensible defaults, for
//! tests of any crate. Each returns a plain struct: change what the test is
//! about with struct-update syntax,
//! `Job { params: "x".into(), ..fixtures::job(7) }`.

use crate::event::{AlarmRecord, Event, LogLine, LogLines, TriggerRecord};
use crate::model::{BlockStrategy, Group, Job, ScheduleType};
use crate::trigger::{ExecResult, Trigger, TriggerType, code};

/// A fixed instant (2023-11-14T22:13:20Z) fixtures are dated from.
pub const T0: i64 = 1_700_000_000_000;

/// Group `app`, titled after it.
pub fn group(app: &str) -> Group {
    Group {
        app: app.into(),
        title: format!("{app} executors"),
        updated_ms: T0,
        xxl_addresses: Vec::new(),
        xxl_gateway: false,
        xxl_access: Default::default(),
    }
}

/// Job `id` of group `demo`: the `demo` handler every five seconds, every
/// other field at its API default.
pub fn job(id: u64) -> Job {
    Job {
        description: format!("job {id}"),
        schedule_type: ScheduleType::Cron,
        schedule_conf: "0/5 * * * * ?".into(),
        created_ms: T0,
        updated_ms: T0,
        ..Job::new(id, "demo", "demo")
    }
}

/// Trigger `trigger_id` of job `job_id` to executor `demo-1`, fired and sent
/// at [`T0`].
pub fn trigger(trigger_id: &str, job_id: u64) -> Trigger {
    Trigger {
        trigger_id: trigger_id.into(),
        job_id,
        group: "demo".into(),
        executor_id: "demo-1".into(),
        handler: "demo".into(),
        params: String::new(),
        trigger_type: TriggerType::Cron,
        fire_ms: T0,
        sent_ms: T0,
        shard_index: 0,
        shard_total: 1,
        timeout_s: 0,
        block: BlockStrategy::SerialExecution,
        retry_count: 0,
        script: None,
        secrets: Default::default(),
    }
}

/// The result of `trigger` with `code`, ended 5 ms after it started at
/// `end_ms - 5`.
pub fn result(trigger: &Trigger, code: i32, end_ms: i64) -> ExecResult {
    ExecResult {
        trigger_id: trigger.trigger_id.clone(),
        job_id: trigger.job_id,
        executor_id: trigger.executor_id.clone(),
        fire_ms: trigger.fire_ms,
        start_ms: end_ms - 5,
        end_ms,
        code,
        msg: format!("ended with {code}"),
        retryable: true,
    }
}

/// The trigger event of `trigger`, sent (200) or failed (other codes).
pub fn triggered(trigger: Trigger, code: i32) -> Event {
    Event::Triggered(TriggerRecord {
        trigger,
        code,
        msg: format!("sent with {code}"),
    })
}

/// A successful result event of `trigger`.
pub fn succeeded(trigger: &Trigger) -> Event {
    Event::Result(result(trigger, code::SUCCESS, trigger.fire_ms + 10))
}

/// Log lines `texts` of a trigger, numbered from `first_seq`.
pub fn log(trigger_id: &str, job_id: u64, first_seq: u32, texts: &[&str]) -> Event {
    Event::Log(LogLines {
        trigger_id: trigger_id.into(),
        job_id,
        first_seq,
        lines: texts
            .iter()
            .enumerate()
            .map(|(i, t)| LogLine {
                ts_ms: T0 + i64::from(first_seq) + i as i64,
                text: (*t).into(),
            })
            .collect(),
    })
}

/// What alarming a failed trigger (fired at [`T0`]) did.
pub fn alarm(trigger_id: &str, job_id: u64, status: i32, msg: &str) -> Event {
    Event::Alarm(AlarmRecord {
        trigger_id: trigger_id.into(),
        job_id,
        fire_ms: T0,
        status,
        msg: msg.into(),
    })
}
