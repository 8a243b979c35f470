//! `write_events` and the schema against a real MySQL, without a broker.

mod common;

use common::*;
use rondo_core::Event;
use rondo_history::{MIGRATOR, Rejected, migrate, write_events};
use sqlx::MySqlPool;

/// Writes each event in its own transaction, in order.
async fn write_one_by_one(pool: &MySqlPool, events: &[Event]) {
    for event in events {
        let report = write_events(pool, std::slice::from_ref(event))
            .await
            .unwrap();
        assert!(report.rejected.is_empty());
    }
}

#[tokio::test]
async fn migrations_are_idempotent_and_create_every_table() {
    let (pool, _db) = fresh_database().await;
    migrate(&pool).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name <> '_sqlx_migrations' ORDER BY table_name",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "api_token",
            "audit_log",
            "executor_group",
            "job",
            "job_deleted",
            "job_glue",
            "job_log",
            "job_log_line",
            "log_report",
            "log_report_group",
            "rondo_meta",
            "user"
        ]
    );
    pool.close().await;
}

#[tokio::test]
async fn a_database_on_the_first_schema_upgrades_and_keeps_its_rows() {
    let (pool, _db) = empty_database().await;
    let first = MIGRATOR.migrations[0].version;
    MIGRATOR.run_to(first, &pool).await.unwrap();
    // Rows as a worker of the first schema wrote them.
    sqlx::query(
        "INSERT INTO job (id, group_app, handler, alarm_email, updated_ms) \
         VALUES (1, 'demo', 'echo', 'ops@example.com', 5)",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO job_log (trigger_id, fire_ms, job_id, handle_code, alarm_status) \
         VALUES ('1-old', 7, 1, 500, 0)",
    )
    .execute(&pool)
    .await
    .unwrap();

    migrate(&pool).await.unwrap();
    let old_job: (String, u32, String) =
        sqlx::query_as("SELECT alarm_email, retry_backoff_s, alarm_webhook FROM job WHERE id = 1")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(old_job, ("ops@example.com".into(), 0, String::new()));
    let log: (Option<i32>, i8, Option<String>) = sqlx::query_as(
        "SELECT handle_code, alarm_status, alarm_msg FROM job_log WHERE trigger_id = '1-old'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(log, (Some(500), 0, None));

    // The upgraded tables take every event, on old rows and new ones.
    let old_alarm = Event::Alarm(rondo_core::event::AlarmRecord {
        trigger_id: "1-old".into(),
        job_id: 1,
        fire_ms: 7,
        status: rondo_core::event::alarm_status::SENT,
        msg: "sent: email to 1 recipient".into(),
    });
    let report = write_events(&pool, &[job(1, "v2", T0), old_alarm])
        .await
        .unwrap();
    assert!(report.rejected.is_empty(), "{report:?}");
    let log: (i8, Option<String>) =
        sqlx::query_as("SELECT alarm_status, alarm_msg FROM job_log WHERE trigger_id = '1-old'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(log, (2, Some("sent: email to 1 recipient".into())));
    let backoff: u32 = sqlx::query_scalar("SELECT retry_backoff_s FROM job WHERE id = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(backoff, 15);
    pool.close().await;
}

#[tokio::test]
async fn an_alarm_creates_its_row_and_keeps_the_best_outcome() {
    use rondo_core::event::alarm_status::{FAILED, NOT_NEEDED, SENT};
    let (pool, _db) = fresh_database().await;
    // The alarm first: it makes the row; the trigger and result fill it in.
    write_one_by_one(
        &pool,
        &[
            alarm("9-a", 9, FAILED, "email: 554 rejected"),
            triggered("9-a", 9, 200, T0 + 1),
            result("9-a", 9, 500, T0 + 9),
            alarm("9-a", 9, SENT, "sent: email to 1 recipient"),
            alarm("9-a", 9, NOT_NEEDED, "no alarm channel"),
            alarm("9-a", 9, FAILED, "webhook: timed out"),
        ],
    )
    .await;
    type Row = (u64, String, Option<i32>, Option<i32>, i8, Option<String>);
    let row: Row = sqlx::query_as(
        "SELECT job_id, group_app, trigger_code, handle_code, alarm_status, alarm_msg \
         FROM job_log WHERE trigger_id = '9-a'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let expected: Row = (
        9,
        "demo".into(),
        Some(200),
        Some(500),
        2,
        Some("sent: email to 1 recipient".into()),
    );
    assert_eq!(row, expected);
    assert_eq!(count(&pool, "job_log").await, 1);
    pool.close().await;
}

#[tokio::test]
async fn any_order_and_any_repetition_end_in_the_same_rows() {
    let story = story();
    let (reference, _reference_db) = fresh_database().await;
    write_one_by_one(&reference, &story).await;
    let expected = snapshot(&reference).await;

    let (pool, _db) = fresh_database().await;
    let scrambled = scrambled(&story);
    write_one_by_one(&pool, &scrambled).await;
    assert_eq!(snapshot(&pool).await, expected, "one event per transaction");

    // The same, all in one batch (several rows of one key in one statement).
    sqlx::query("DELETE FROM job_log_line")
        .execute(&pool)
        .await
        .unwrap();
    for table in ["job_log", "job", "executor_group"] {
        let sql = format!("DELETE FROM {table}");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let report = write_events(&pool, &scrambled).await.unwrap();
    assert_eq!(report.written, scrambled.len());
    assert_eq!(snapshot(&pool).await, expected, "one batch");
    reference.close().await;
    pool.close().await;
}

#[tokio::test]
async fn the_story_ends_in_the_rows_a_user_expects() {
    let (pool, _db) = fresh_database().await;
    write_events(&pool, &scrambled(&story())).await.unwrap();

    let groups: Vec<(String, String, i8)> =
        sqlx::query_as("SELECT app, title, deleted FROM executor_group ORDER BY app")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        groups,
        [
            ("demo".into(), "Demo v2".into(), 0),
            ("gone".into(), String::new(), 1)
        ]
    );
    type JobRow = (u64, String, String, u32, String, i8, i64);
    let jobs: Vec<JobRow> = sqlx::query_as(
        "SELECT id, params, child_jobs, retry_backoff_s, alarm_webhook, deleted, updated_ms \
         FROM job ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let webhook = "https://hooks.example.com/rondo/1".to_owned();
    assert_eq!(
        jobs[0],
        (1, "v2".into(), "[101,201]".into(), 15, webhook, 0, T0 + 10)
    );
    assert_eq!(
        jobs[1],
        (2, String::new(), "[]".into(), 0, String::new(), 1, T0 + 30)
    );

    type LogRow = (String, String, Option<i32>, Option<i32>, Option<String>);
    let logs: Vec<LogRow> = sqlx::query_as(
        "SELECT trigger_id, group_app, trigger_code, handle_code, handle_msg \
         FROM job_log ORDER BY trigger_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let expected: Vec<LogRow> = vec![
        (
            "1-a".into(),
            "demo".into(),
            Some(200),
            Some(200),
            Some("ended with 200".into()),
        ),
        ("1-b".into(), "demo".into(), Some(500), None, None),
        (
            "1-c".into(),
            String::new(),
            None,
            Some(500),
            Some("ended with 500".into()),
        ),
        (
            "1-d".into(),
            "demo".into(),
            Some(200),
            Some(502),
            Some("ended with 502".into()),
        ),
        // Stored by its alarm alone.
        ("1-e".into(), String::new(), None, None, None),
    ];
    assert_eq!(logs, expected);
    let alarms: Vec<(String, u64, i8, Option<String>)> = sqlx::query_as(
        "SELECT trigger_id, job_id, alarm_status, alarm_msg FROM job_log ORDER BY trigger_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let expected_alarms: Vec<(String, u64, i8, Option<String>)> = vec![
        // Succeeded: never alarmed.
        ("1-a".into(), 1, 0, None),
        // Sent beats an earlier or later failure.
        ("1-b".into(), 1, 2, Some("sent: webhook".into())),
        ("1-c".into(), 1, 1, Some("no alarm channel".into())),
        // Two failures: the greater message, whatever the order.
        ("1-d".into(), 1, 3, Some("webhook: timed out".into())),
        ("1-e".into(), 1, 3, Some("email: connection refused".into())),
    ];
    assert_eq!(alarms, expected_alarms);
    let lines: Vec<(u32, String)> =
        sqlx::query_as("SELECT seq, line FROM job_log_line WHERE trigger_id = '1-a' ORDER BY seq")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        lines,
        [
            (0, "start".into()),
            (1, "working".into()),
            (2, "done".into())
        ]
    );
    pool.close().await;
}

#[tokio::test]
async fn refused_events_are_isolated_and_the_rest_committed() {
    let (pool, _db) = fresh_database().await;
    let mut events: Vec<Event> = (0..40)
        .map(|i| triggered(&format!("t-{i}"), 1, 200, T0 + i))
        .collect();
    events[7] = triggered(&"x".repeat(200), 1, 200, T0);
    events[31] = group(&"g".repeat(65), "too long an app name", T0);
    let report = write_events(&pool, &events).await.unwrap();
    let indexes: Vec<usize> = report.rejected.iter().map(|r: &Rejected| r.index).collect();
    assert_eq!(indexes, [7, 31]);
    assert!(
        report.rejected[0].reason.contains("Data too long"),
        "{:?}",
        report.rejected[0]
    );
    assert_eq!(report.written, 38);
    assert_eq!(count(&pool, "job_log").await, 38);
    assert_eq!(count(&pool, "executor_group").await, 0);
    pool.close().await;
}

#[tokio::test]
async fn a_trigger_and_its_result_in_one_batch_make_the_same_row_as_apart() {
    // Each trigger once with its result: the batch writes complete rows.
    let mut events = Vec::new();
    for (i, code) in [(1, 200), (2, 500), (3, 200)] {
        let id = format!("pair-{i}");
        events.push(triggered(&id, i, 200, 1_700_000_000_000 + i as i64));
        events.push(result(&id, i, code, 1_700_000_001_000 + i as i64));
    }
    let (reference, _reference_db) = fresh_database().await;
    write_one_by_one(&reference, &events).await;
    let expected = snapshot(&reference).await;

    let (pool, _db) = fresh_database().await;
    let report = write_events(&pool, &events).await.unwrap();
    assert_eq!(report.written, events.len());
    let complete: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM job_log WHERE trigger_code IS NOT NULL AND handle_code IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(complete, 3, "one complete row per trigger");
    assert_eq!(
        snapshot(&pool).await,
        expected,
        "the same rows as written one event at a time"
    );
    // A later duplicate of either side changes nothing.
    write_events(&pool, &events[..2]).await.unwrap();
    assert_eq!(snapshot(&pool).await, expected);
    reference.close().await;
    pool.close().await;
}

#[tokio::test]
async fn jobs_and_groups_read_back_as_written_and_deleted_ones_do_not() {
    let (pool, _db) = fresh_database().await;
    let history = rondo_history::History::from_pool(pool.clone());
    let jobs: Vec<Event> = (1..=5).map(|id| job(id, &format!("p{id}"), T0)).collect();
    let mut events = vec![group("demo", "Demo", T0), group("gone", "Gone", T0)];
    events.extend(jobs.iter().cloned());
    events.push(Event::JobDeleted {
        id: 3,
        at_ms: T0 + 1,
        last: None,
    });
    events.push(Event::GroupDeleted {
        app: "gone".into(),
        at_ms: T0 + 1,
    });
    write_events(&pool, &events).await.unwrap();

    let written: Vec<rondo_core::Job> = jobs
        .into_iter()
        .filter_map(|e| match e {
            Event::JobUpserted { job } if job.id != 3 => Some(job),
            _ => None,
        })
        .collect();
    let first_page = history.jobs_after(0, 2).await.unwrap();
    let rest = history.jobs_after(2, 100).await.unwrap();
    let read: Vec<rondo_core::Job> = first_page
        .into_iter()
        .chain(rest)
        .map(|r| r.expect("every row decodes"))
        .collect();
    assert_eq!(read, written, "the same jobs, every field, in id order");
    assert_eq!(history.max_job_id().await.unwrap(), 5, "deleted ids count");
    let groups = history.groups().await.unwrap();
    assert_eq!(
        groups.iter().map(|g| g.app.as_str()).collect::<Vec<_>>(),
        ["demo"]
    );
    assert_eq!(groups[0].title, "Demo");
}

#[tokio::test]
async fn a_job_row_that_no_longer_decodes_is_returned_in_its_place() {
    let (pool, _db) = fresh_database().await;
    let history = rondo_history::History::from_pool(pool.clone());
    write_events(&pool, &[job(1, "a", T0), job(2, "b", T0)])
        .await
        .unwrap();
    sqlx::query("UPDATE job SET misfire = 'LATER' WHERE id = 1")
        .execute(&pool)
        .await
        .unwrap();
    let read = history.jobs_after(0, 10).await.unwrap();
    let bad = read[0].as_ref().expect_err("row 1 is refused");
    assert_eq!(
        (bad.id, bad.error.field.as_deref()),
        (Some(1), Some("misfire"))
    );
    assert_eq!(read[1].as_ref().map(|j| j.id).ok(), Some(2));
}
