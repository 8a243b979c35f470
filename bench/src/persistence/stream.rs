//! The fabricated stream: for each trigger a trigger event (what the
//! dispatcher publishes) and a result event (what the executor publishes),
//! with field sizes like a real deployment's, and the `job_log` row both
//! events make together (what the ceiling inserts directly).

use chrono::{DateTime, NaiveDateTime};
use rondo_core::event::TriggerRecord;
use rondo_core::trigger::code;
use rondo_core::{BlockStrategy, Event, ExecResult, Trigger, TriggerType};

/// Jobs the triggers are spread over (each fires once a second).
const JOBS: u64 = 500;
const FIRST_JOB_ID: u64 = 10_000;
const PARAMS: &str = r#"{"region":"eu-west-1","batchSize":500,"dryRun":false,"since":"PT1H"}"#;

/// Trigger `i` of a stream whose first fire is at `first_fire_ms`.
pub(crate) fn trigger(i: usize, first_fire_ms: i64) -> TriggerRecord {
    let (job_id, fire_ms) = job_and_fire(i, first_fire_ms);
    TriggerRecord {
        trigger: Trigger {
            trigger_id: format!("{job_id}-{fire_ms}-0"),
            job_id,
            group: group(job_id),
            executor_id: executor(job_id),
            handler: format!("syncOrderStatusHandler{}", job_id % 7),
            params: PARAMS.to_owned(),
            trigger_type: TriggerType::Cron,
            fire_ms,
            sent_ms: fire_ms + 3,
            shard_index: 0,
            shard_total: 1,
            timeout_s: 300,
            block: BlockStrategy::SerialExecution,
            retry_count: 0,
            script: None,
            secrets: Default::default(),
        },
        code: code::SUCCESS,
        // What the dispatcher records for a trigger it sent.
        msg: String::new(),
    }
}

/// The executor's result for trigger `i`.
pub(crate) fn result(i: usize, first_fire_ms: i64) -> ExecResult {
    let (job_id, fire_ms) = job_and_fire(i, first_fire_ms);
    let took_ms = 5 + (i % 200) as i64;
    ExecResult {
        trigger_id: format!("{job_id}-{fire_ms}-0"),
        job_id,
        executor_id: executor(job_id),
        fire_ms,
        start_ms: fire_ms + 5,
        end_ms: fire_ms + 5 + took_ms,
        code: code::SUCCESS,
        msg: format!("synced {} orders in {took_ms} ms", 100 + i % 400),
        retryable: true,
    }
}

fn job_and_fire(i: usize, first_fire_ms: i64) -> (u64, i64) {
    let job = i as u64 % JOBS;
    let second = i as u64 / JOBS;
    (FIRST_JOB_ID + job, first_fire_ms + second as i64 * 1000)
}

fn group(job_id: u64) -> String {
    format!("order-service-{}", job_id % 20)
}

fn executor(job_id: u64) -> String {
    format!(
        "order-service-{}-7f9c2b-10.0.3.{}:9999",
        job_id % 20,
        job_id % 8
    )
}

/// The messages a backlog of `triggers` triggers arrives in: for each
/// chunk of `per_message` triggers, one message of their trigger events,
/// then one of their results (the result follows its trigger, as in a
/// real run). `per_message` is the number of events in each message.
pub(crate) fn messages(triggers: usize, per_message: usize, first_fire_ms: i64) -> Vec<Vec<Event>> {
    let per_message = per_message.max(1);
    let mut messages = Vec::with_capacity(2 * triggers.div_ceil(per_message));
    for first in (0..triggers).step_by(per_message) {
        let ids = first..(first + per_message).min(triggers);
        messages.push(
            ids.clone()
                .map(|i| Event::Triggered(trigger(i, first_fire_ms)))
                .collect(),
        );
        messages.push(
            ids.map(|i| Event::Result(result(i, first_fire_ms)))
                .collect(),
        );
    }
    messages
}

/// One complete `job_log` row: the trigger side and the handle side, with
/// the values the worker would store from the two events.
#[derive(Debug, Clone)]
pub(crate) struct LogRow {
    pub trigger: TriggerRecord,
    pub trigger_time: Option<NaiveDateTime>,
    pub result: ExecResult,
    pub handle_start: Option<NaiveDateTime>,
    pub handle_time: Option<NaiveDateTime>,
}

pub(crate) fn log_row(i: usize, first_fire_ms: i64) -> LogRow {
    let trigger = trigger(i, first_fire_ms);
    let result = result(i, first_fire_ms);
    LogRow {
        trigger_time: datetime(trigger.trigger.sent_ms),
        handle_start: datetime(result.start_ms),
        handle_time: datetime(result.end_ms),
        trigger,
        result,
    }
}

fn datetime(ms: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp_millis(ms).map(|at| at.naive_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trigger_comes_with_its_result() {
        let messages = messages(120, 50, 1_700_000_000_000);
        assert_eq!(messages.len(), 6);
        let events: usize = messages.iter().map(Vec::len).sum();
        assert_eq!(events, 240);
        assert!(
            messages
                .iter()
                .all(|m| { m.iter().all(|e| e.routing_key() == m[0].routing_key()) })
        );
        let ids = |m: &Vec<Event>| -> Vec<String> {
            m.iter()
                .map(|e| match e {
                    Event::Triggered(t) => t.trigger.trigger_id.clone(),
                    Event::Result(r) => r.trigger_id.clone(),
                    other => panic!("unexpected {other:?}"),
                })
                .collect()
        };
        assert_eq!(ids(&messages[4]), ids(&messages[5]));
    }

    #[test]
    fn trigger_ids_are_unique() {
        let ids: std::collections::HashSet<String> = (0..5_000)
            .map(|i| trigger(i, 0).trigger.trigger_id)
            .collect();
        assert_eq!(ids.len(), 5_000);
    }
}
