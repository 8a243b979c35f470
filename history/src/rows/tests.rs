use rondo_core::event::{AlarmRecord, LogLine, LogLines, TriggerRecord, alarm_status};
use rondo_core::model::ScheduleType;
use rondo_core::trigger::{ExecResult, Trigger, TriggerType};
use rondo_core::{BlockStrategy, Event, Group, Job};

use super::*;

fn job(id: u64, updated_ms: i64) -> Job {
    Job {
        description: "d".into(),
        schedule_type: ScheduleType::Cron,
        schedule_conf: "* * * * * ?".into(),
        zone: "Asia/Shanghai".into(),
        misfire_threshold_ms: Some(60_000),
        child_jobs: vec![2, 3],
        retry_backoff_s: 30,
        alarm_webhook: "https://hooks.example.com/x".into(),
        created_ms: 1,
        updated_ms,
        ..Job::new(id, "demo", "h")
    }
}

fn trigger(id: &str) -> Trigger {
    Trigger {
        trigger_id: id.into(),
        job_id: 1,
        group: "demo".into(),
        executor_id: "e1".into(),
        handler: "h".into(),
        params: String::new(),
        trigger_type: TriggerType::Cron,
        fire_ms: 1_700_000_000_000,
        sent_ms: 1_700_000_000_005,
        shard_index: 0,
        shard_total: 1,
        timeout_s: 0,
        block: BlockStrategy::SerialExecution,
        retry_count: 0,
        script: None,
        secrets: Default::default(),
    }
}

fn result(id: &str) -> ExecResult {
    ExecResult {
        trigger_id: id.into(),
        job_id: 1,
        executor_id: "e1".into(),
        fire_ms: 1_700_000_000_000,
        start_ms: 1_700_000_000_010,
        end_ms: 1_700_000_000_020,
        code: 200,
        msg: "ok".into(),
        retryable: true,
    }
}

#[test]
fn events_are_grouped_by_table_and_sorted_by_key() {
    let events = vec![
        Event::JobUpserted { job: job(9, 5) },
        Event::Result(result("b")),
        Event::GroupUpserted {
            group: Group {
                app: "z".into(),
                title: "Z".into(),
                updated_ms: 1,
                xxl_addresses: Vec::new(),
                xxl_gateway: false,
                xxl_access: Default::default(),
            },
        },
        Event::JobDeleted {
            id: 3,
            at_ms: 7,
            last: None,
        },
        Event::Triggered(TriggerRecord {
            trigger: trigger("b"),
            code: 200,
            msg: String::new(),
        }),
        Event::GroupDeleted {
            app: "a".into(),
            at_ms: 2,
        },
        Event::Result(result("a")),
    ];
    let rows = Rows::from_events(&events);
    let apps: Vec<_> = rows
        .groups
        .iter()
        .map(|g| (g.app.as_str(), g.deleted))
        .collect();
    assert_eq!(apps, vec![("a", true), ("z", false)]);
    let jobs: Vec<_> = rows.jobs.iter().map(|j| (j.job.id, j.deleted)).collect();
    assert_eq!(jobs, vec![(3, true), (9, false)]);
    assert_eq!(rows.jobs[0].job.updated_ms, 7);
    // b's trigger and result met in this batch: one complete row.
    assert!(rows.triggers.is_empty());
    let complete: Vec<_> = rows
        .complete
        .iter()
        .map(|(t, r)| {
            (
                t.record.trigger.trigger_id.as_str(),
                r.result.trigger_id.as_str(),
            )
        })
        .collect();
    assert_eq!(complete, vec![("b", "b")]);
    let results: Vec<_> = rows
        .results
        .iter()
        .map(|r| r.result.trigger_id.as_str())
        .collect();
    assert_eq!(results, vec!["a"]);
    assert!(rows.lines.is_empty());
}

#[test]
fn a_batch_of_only_paired_rows_is_not_empty() {
    let sent = Event::Triggered(TriggerRecord {
        trigger: trigger("a"),
        code: 200,
        msg: String::new(),
    });
    let rows = Rows::from_events(&[sent, Event::Result(result("a"))]);
    assert_eq!(rows.complete.len(), 1);
    assert!(!rows.is_empty(), "a complete row must be written");
}

#[test]
fn a_key_seen_twice_on_a_side_is_not_paired() {
    let sent = |id: &str| {
        Event::Triggered(TriggerRecord {
            trigger: trigger(id),
            code: 200,
            msg: String::new(),
        })
    };
    let events = vec![
        sent("a"),
        sent("a"),
        Event::Result(result("a")),
        sent("b"),
        Event::Result(result("b")),
    ];
    let rows = Rows::from_events(&events);
    assert_eq!(rows.triggers.len(), 2, "the duplicated trigger stays apart");
    assert_eq!(rows.results.len(), 1);
    assert_eq!(rows.complete.len(), 1);
    assert_eq!(rows.complete[0].0.record.trigger.trigger_id, "b");
}

fn alarm(id: &str, status: i32, msg: &str) -> Event {
    Event::Alarm(AlarmRecord {
        trigger_id: id.into(),
        job_id: 1,
        fire_ms: 1_700_000_000_000,
        status,
        msg: msg.into(),
    })
}

#[test]
fn alarms_become_alarm_rows_sorted_by_trigger() {
    let events = vec![
        alarm("b", alarm_status::FAILED, "webhook: HTTP 500"),
        Event::Result(result("b")),
        alarm("a", alarm_status::SENT, "sent"),
        alarm("b", alarm_status::SENT, "sent"),
    ];
    let rows = Rows::from_events(&events);
    assert!(!rows.is_empty());
    let alarms: Vec<_> = rows
        .alarms
        .iter()
        .map(|a| {
            (
                a.record.trigger_id.as_str(),
                a.record.status,
                a.msg.as_str(),
            )
        })
        .collect();
    assert_eq!(
        alarms,
        vec![
            ("a", 2, "sent"),
            ("b", 3, "webhook: HTTP 500"),
            ("b", 2, "sent")
        ]
    );
    assert_eq!(rows.results.len(), 1);
    let only_alarm = Rows::from_events(&[alarm("c", alarm_status::NOT_NEEDED, "")]);
    assert!(!only_alarm.is_empty(), "an alarm alone is written");
}

#[test]
fn a_long_alarm_message_is_clipped() {
    let rows = Rows::from_events(&[alarm("a", alarm_status::FAILED, &"x".repeat(70_000))]);
    assert!(rows.alarms[0].msg.len() <= MAX_TEXT_BYTES);
    assert_eq!(rows.alarms[0].record.msg.len(), 70_000);
}

#[test]
fn a_deleted_job_keeps_no_alarm_or_retry_settings() {
    let rows = Rows::from_events(&[Event::JobDeleted {
        id: 4,
        at_ms: 9,
        last: None,
    }]);
    let tombstone = &rows.jobs[0].job;
    assert_eq!(
        (tombstone.retry_backoff_s, tombstone.alarm_webhook.as_str()),
        (0, "")
    );
    let kept = Rows::from_events(&[Event::JobUpserted { job: job(4, 1) }]);
    assert_eq!(kept.jobs[0].job.retry_backoff_s, 30);
    assert_eq!(
        kept.jobs[0].job.alarm_webhook,
        "https://hooks.example.com/x"
    );
}

#[test]
fn two_versions_of_one_job_keep_their_order() {
    let events = vec![
        Event::JobUpserted { job: job(1, 5) },
        Event::JobUpserted { job: job(1, 3) },
    ];
    let rows = Rows::from_events(&events);
    let versions: Vec<_> = rows.jobs.iter().map(|j| j.job.updated_ms).collect();
    assert_eq!(versions, vec![5, 3]);
}

#[test]
fn log_lines_are_numbered_from_first_seq() {
    let events = vec![Event::Log(LogLines {
        trigger_id: "t".into(),
        job_id: 1,
        first_seq: 4,
        lines: vec![
            LogLine {
                ts_ms: 1,
                text: "one".into(),
            },
            LogLine {
                ts_ms: 2,
                text: "two".into(),
            },
        ],
    })];
    let rows = Rows::from_events(&events);
    let seqs: Vec<_> = rows
        .lines
        .iter()
        .map(|l| (l.seq, l.line.as_str()))
        .collect();
    assert_eq!(seqs, vec![(4, "one"), (5, "two")]);
}

#[test]
fn trigger_and_result_times_become_utc_datetimes() {
    let rows = Rows::from_events(&[Event::Result(result("a"))]);
    let start = rows.results[0].handle_start.unwrap();
    assert_eq!(start.to_string(), "2023-11-14 22:13:20.010");
    assert_eq!(datetime(0).unwrap().to_string(), "1970-01-01 00:00:00");
    assert_eq!(datetime(i64::MAX), None);
    assert_eq!(datetime(-40_000_000_000_000), None);
}

#[test]
fn long_text_is_clipped_on_a_char_boundary() {
    let short = "é".repeat(10);
    assert_eq!(clip(&short), short);
    let long = "é".repeat(MAX_TEXT_BYTES);
    let clipped = clip(&long);
    assert!(clipped.len() <= MAX_TEXT_BYTES);
    assert!(clipped.ends_with("[truncated]"));
}
