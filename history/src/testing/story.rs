//! A history of events touching every write rule, its pieces, and reading
//! the tables back: fixtures for the MySQL tests of this crate and of the
//! persistence worker.

use rondo_core::event::alarm_status;
use rondo_core::testkit::fixtures;
use rondo_core::trigger::Trigger;
use rondo_core::{BlockStrategy, Event, Group, Job, Misfire, Routing};
use sqlx::MySqlPool;

pub use fixtures::T0;

pub async fn count(pool: &MySqlPool, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM `{table}`");
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Every stored column of every table rondo writes (not `updated_at`), one
/// line per row, in key order.
pub async fn snapshot(pool: &MySqlPool) -> Vec<String> {
    const QUERIES: [&str; 4] = [
        "SELECT CONCAT_WS('|', 'group', app, title, updated_ms, deleted) FROM executor_group ORDER BY app",
        "SELECT CONCAT_WS('|', 'job', id, group_app, description, schedule_type, schedule_conf, \
         misfire, routing, block_strategy, handler, COALESCE(params, '-'), timeout_s, retries, \
         COALESCE(child_jobs, '-'), retry_backoff_s, alarm_email, alarm_webhook, enabled, \
         created_ms, updated_ms, deleted) FROM job ORDER BY id",
        "SELECT CONCAT_WS('|', 'log', trigger_id, fire_ms, job_id, group_app, executor_id, handler, \
         COALESCE(params, '-'), shard_index, shard_total, retry_count, trigger_type, \
         COALESCE(trigger_time, '-'), COALESCE(trigger_code, '-'), COALESCE(trigger_msg, '-'), \
         COALESCE(handle_start, '-'), COALESCE(handle_time, '-'), COALESCE(handle_code, '-'), \
         COALESCE(handle_msg, '-'), alarm_status, COALESCE(alarm_msg, '-')) \
         FROM job_log ORDER BY trigger_id, fire_ms",
        "SELECT CONCAT_WS('|', 'line', trigger_id, seq, ts_ms, line) FROM job_log_line \
         ORDER BY trigger_id, seq",
    ];
    let mut rows = Vec::new();
    for sql in QUERIES {
        let part: Vec<String> = sqlx::query_scalar(sql).fetch_all(pool).await.unwrap();
        rows.extend(part);
    }
    rows
}

// ---- fixtures ----

pub fn group(app: &str, title: &str, updated_ms: i64) -> Event {
    let group = Group {
        title: title.into(),
        updated_ms,
        ..fixtures::group(app)
    };
    Event::GroupUpserted { group }
}

/// A job with every column away from its default.
pub fn job(id: u64, params: &str, updated_ms: i64) -> Event {
    let job = Job {
        schedule_conf: "0/5 * * * * ?".into(),
        zone: "UTC".into(),
        misfire: Misfire::FireOnceNow,
        misfire_threshold_ms: None,
        routing: Routing::Round,
        block: BlockStrategy::DiscardLater,
        handler: "echo".into(),
        params: params.into(),
        timeout_s: 30,
        retries: 2,
        child_jobs: vec![id + 100, id + 200],
        retry_backoff_s: 15,
        alarm_email: "ops@example.com".into(),
        alarm_webhook: format!("https://hooks.example.com/rondo/{id}"),
        glue_type: Default::default(),
        glue_source: String::new(),
        glue_remark: String::new(),
        glue_version: 0,
        glue_updated_ms: 0,
        import_ref: String::new(),
        updated_ms,
        ..fixtures::job(id)
    };
    Event::JobUpserted { job }
}

pub fn trigger(trigger_id: &str, job_id: u64, sent_ms: i64) -> Trigger {
    Trigger {
        executor_id: "demo-host-1".into(),
        handler: "echo".into(),
        params: "p".into(),
        sent_ms,
        timeout_s: 30,
        ..fixtures::trigger(trigger_id, job_id)
    }
}

pub fn triggered(trigger_id: &str, job_id: u64, code: i32, sent_ms: i64) -> Event {
    fixtures::triggered(trigger(trigger_id, job_id, sent_ms), code)
}

pub fn result(trigger_id: &str, job_id: u64, code: i32, end_ms: i64) -> Event {
    let trigger = trigger(trigger_id, job_id, T0);
    Event::Result(fixtures::result(&trigger, code, end_ms))
}

/// Log lines of a trigger of job 1.
pub fn log(trigger_id: &str, first_seq: u32, texts: &[&str]) -> Event {
    fixtures::log(trigger_id, 1, first_seq, texts)
}

pub use fixtures::alarm;

/// A history touching every rule, in the order things happened.
pub fn story() -> Vec<Event> {
    vec![
        group("demo", "Demo v1", T0),
        group("demo", "Demo v2", T0 + 10),
        group("gone", "Gone", T0),
        Event::GroupDeleted {
            app: "gone".into(),
            at_ms: T0 + 20,
        },
        job(1, "v1", T0),
        job(1, "v2", T0 + 10),
        job(2, "x", T0),
        Event::JobDeleted {
            id: 2,
            at_ms: T0 + 30,
            last: None,
        },
        // A merged trigger: sent, ran, logged.
        triggered("1-a", 1, 200, T0 + 1),
        log("1-a", 0, &["start", "working"]),
        log("1-a", 2, &["done"]),
        result("1-a", 1, 200, T0 + 50),
        // A trigger that could not be published: no result. Its alarm
        // failed, then a redelivery alarmed again and got through.
        triggered("1-b", 1, 500, T0 + 2),
        alarm("1-b", 1, alarm_status::FAILED, "webhook: HTTP 500"),
        alarm("1-b", 1, alarm_status::SENT, "sent: webhook"),
        // A result whose trigger event never arrives; nobody to alarm.
        result("1-c", 1, 500, T0 + 60),
        alarm("1-c", 1, alarm_status::NOT_NEEDED, "no alarm channel"),
        // An alarm whose trigger and result events never arrive.
        alarm("1-e", 1, alarm_status::FAILED, "email: connection refused"),
        // Published twice in a crash window: the confirmed one wins.
        triggered("1-d", 1, 200, T0 + 3),
        triggered("1-d", 1, 500, T0 + 4),
        // Two results (say, "lost" then the real one): the later end wins.
        // Each was alarmed and both alarms failed: the tie is broken by the
        // message, whatever the order.
        result("1-d", 1, 500, T0 + 65),
        alarm("1-d", 1, alarm_status::FAILED, "webhook: timed out"),
        result("1-d", 1, 502, T0 + 70),
        alarm("1-d", 1, alarm_status::FAILED, "email: 554 rejected"),
    ]
}

/// The story reversed, then again rotated: every event twice, most of them
/// after something newer.
pub fn scrambled(story: &[Event]) -> Vec<Event> {
    let mut out: Vec<Event> = story.iter().rev().cloned().collect();
    let mut rotated = story.to_vec();
    rotated.rotate_left(story.len() / 3);
    out.extend(rotated);
    out
}
