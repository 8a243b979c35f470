//! Day partitions, retention and the daily report against a real MySQL,
//! at a fixed "now" so that partition names are known.

mod common;

use chrono_tz::Tz;
use common::*;
use rondo_core::Event;
use rondo_history::maintenance::{pass_at, retention_at};
use rondo_history::partitions::{self, DAY_MS, DAYS_AHEAD, day_of, partition_name};
use rondo_history::report::{self, ReportRow};
use rondo_history::{MIGRATOR, migrate, write_events};
use sqlx::{Connection as _, MySqlPool};

/// 2026-03-01T12:00:00Z.
const NOW: i64 = 1_772_323_200_000 + DAY_MS / 2;

fn today() -> i64 {
    day_of(NOW)
}

/// Noon of the day `days_ago` days before [`NOW`]'s.
fn days_ago(days: i64) -> i64 {
    (today() - days) * DAY_MS + DAY_MS / 2
}

/// A trigger, its result (if any) and one log line, all at `fire_ms`.
fn fired(trigger_id: &str, fire_ms: i64, trigger_code: i32, handle: Option<i32>) -> Vec<Event> {
    let mut events = Vec::new();
    if let Event::Triggered(mut record) = triggered(trigger_id, 1, trigger_code, fire_ms) {
        record.trigger.fire_ms = fire_ms;
        events.push(Event::Triggered(record));
    }
    if let Some(code) = handle
        && let Event::Result(mut res) = result(trigger_id, 1, code, fire_ms + 10)
    {
        res.fire_ms = fire_ms;
        events.push(Event::Result(res));
    }
    if let Event::Log(mut lines) = log(trigger_id, 0, &["line"]) {
        lines.lines[0].ts_ms = fire_ms + 5;
        events.push(Event::Log(lines));
    }
    events
}

async fn write(pool: &MySqlPool, events: Vec<Event>) {
    let report = write_events(pool, &events).await.unwrap();
    assert!(report.rejected.is_empty(), "{report:?}");
}

async fn partition_names(pool: &MySqlPool, table: &str) -> Vec<String> {
    let mut conn = pool.acquire().await.unwrap();
    let parts = partitions::list(&mut conn, table).await.unwrap();
    parts.into_iter().map(|p| p.name).collect()
}

async fn trigger_ids(pool: &MySqlPool, table: &str) -> Vec<String> {
    let sql = format!("SELECT DISTINCT trigger_id FROM {table} ORDER BY trigger_id");
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_migration_partitions_both_log_tables() {
    let (pool, _db) = fresh_database().await;
    assert_eq!(partition_names(&pool, "job_log").await, ["pmax"]);
    assert_eq!(partition_names(&pool, "job_log_line").await, ["pmax"]);
    // A redelivered line is still written once.
    let events = fired("1-a", NOW, 200, Some(200));
    write(&pool, events.clone()).await;
    write(&pool, events).await;
    assert_eq!(count(&pool, "job_log_line").await, 1);
    pool.close().await;
}

#[tokio::test]
async fn a_pass_makes_day_partitions_and_retention_drops_only_old_days() {
    let (pool, _db) = fresh_database().await;
    for (id, age) in [
        ("1-d40", 40),
        ("1-d31", 31),
        ("1-d30", 30),
        ("1-d29", 29),
        ("1-d0", 0),
    ] {
        write(&pool, fired(id, days_ago(age), 200, Some(200))).await;
    }

    let pass = pass_at(&pool, 30, false, NOW).await.unwrap().expect("lock");
    // From the oldest row's day to DAYS_AHEAD after today, in both tables.
    let days = (40 + DAYS_AHEAD + 1) as usize;
    assert_eq!(pass.partitions_added, 2 * days);
    let names = partition_names(&pool, "job_log").await;
    assert_eq!(names.len(), days + 1);
    assert_eq!(names[0], partition_name(today() - 40));
    assert!(names.contains(&partition_name(today())));
    assert!(names.contains(&partition_name(today() + DAYS_AHEAD)));
    assert_eq!(names.last().map(String::as_str), Some("pmax"));
    assert_eq!(partition_names(&pool, "job_log_line").await, names);
    // A second pass adds nothing; rows stayed where they were.
    let again = pass_at(&pool, 30, false, NOW).await.unwrap().expect("lock");
    assert_eq!(again.partitions_added, 0);
    assert_eq!(count(&pool, "job_log").await, 5);

    let applied = retention_at(&pool, 30, NOW).await.unwrap();
    assert!(applied.enabled);
    assert_eq!(applied.cutoff_ms, Some((today() - 30) * DAY_MS));
    let rows: Vec<u64> = applied.dropped.iter().map(|d| d.rows).collect();
    assert_eq!(rows, [2, 2], "{applied:?}");
    let kept = ["1-d0", "1-d29", "1-d30"];
    assert_eq!(trigger_ids(&pool, "job_log").await, kept);
    assert_eq!(trigger_ids(&pool, "job_log_line").await, kept);
    let names = partition_names(&pool, "job_log").await;
    assert_eq!(names[0], partition_name(today() - 30));
    assert_eq!(partition_names(&pool, "job_log_line").await, names);

    // The next day's pass (with retention) moves on by one day each way.
    let tomorrow = pass_at(&pool, 30, true, NOW + DAY_MS)
        .await
        .unwrap()
        .expect("lock");
    assert_eq!(tomorrow.partitions_added, 2);
    assert_eq!(trigger_ids(&pool, "job_log").await, ["1-d0", "1-d29"]);
    pool.close().await;
}

#[tokio::test]
async fn retention_below_seven_days_does_nothing() {
    let (pool, _db) = fresh_database().await;
    write(&pool, fired("1-old", days_ago(60), 200, Some(200))).await;
    write(&pool, fired("1-new", days_ago(1), 200, Some(200))).await;
    pass_at(&pool, 6, true, NOW).await.unwrap().expect("lock");
    let applied = retention_at(&pool, 6, NOW).await.unwrap();
    assert!(
        !applied.enabled && applied.dropped.is_empty(),
        "{applied:?}"
    );
    assert_eq!(count(&pool, "job_log").await, 2);
    assert_eq!(count(&pool, "job_log_line").await, 2);
    // Seven is the least that counts.
    retention_at(&pool, 7, NOW).await.unwrap();
    assert_eq!(trigger_ids(&pool, "job_log").await, ["1-new"]);
    pool.close().await;
}

#[tokio::test]
async fn the_report_counts_running_success_and_failure_per_utc_day() {
    let (pool, _db) = fresh_database().await;
    let yesterday = days_ago(1);
    let today_start = today() * DAY_MS;
    let mut events = Vec::new();
    // Today: 2 running (no result, or a running 0), 3 successes, 3 failures
    // (trigger refused, handler 500, handler 502 after a sent trigger).
    events.extend(fired("1-r1", today_start, 200, None));
    events.extend(fired("1-r2", NOW, 200, Some(0)));
    for id in ["1-s1", "1-s2", "1-s3"] {
        events.extend(fired(id, NOW, 200, Some(200)));
    }
    events.extend(fired("1-f1", NOW, 500, None));
    events.extend(fired("1-f2", NOW, 200, Some(500)));
    events.extend(fired("1-f3", today_start + DAY_MS - 1, 200, Some(502)));
    // Yesterday, up to its last millisecond: 1 success, 1 failure.
    events.extend(fired("1-y1", yesterday, 200, Some(200)));
    events.extend(fired("1-y2", today_start - 1, 200, Some(500)));
    // Tomorrow does not count.
    events.extend(fired("1-t1", today_start + DAY_MS, 200, Some(200)));
    write(&pool, events).await;

    let day = partitions::date_of_day;
    let expected = vec![
        ReportRow {
            day: day(today() - 2),
            running_count: 0,
            success_count: 0,
            fail_count: 0,
        },
        ReportRow {
            day: day(today() - 1),
            running_count: 0,
            success_count: 1,
            fail_count: 1,
        },
        ReportRow {
            day: day(today()),
            running_count: 2,
            success_count: 3,
            fail_count: 3,
        },
    ];
    assert_eq!(report::refresh_at(&pool, 3, NOW).await.unwrap(), expected);
    // Stored, and a second refresh after a result updates the row.
    assert_eq!(
        report::read(&pool, day(today() - 2)).await.unwrap(),
        expected
    );
    let mut finished = fired("1-r1", today_start, 200, Some(200));
    finished.retain(|e| matches!(e, Event::Result(_)));
    write(&pool, finished).await;
    let rows = report::refresh_at(&pool, 1, NOW).await.unwrap();
    assert_eq!((rows[0].running_count, rows[0].success_count), (1, 4));
    // The loop's pass refreshes the last three days too.
    let pass = pass_at(&pool, 30, false, NOW).await.unwrap().expect("lock");
    assert_eq!(pass.report_days, 3);

    // What a page reads (`current_in`): today and yesterday are recounted,
    // an older day is read as stored, and a day never stored is counted.
    events = fired("1-y3", yesterday, 200, Some(200));
    events.extend(fired("1-o1", days_ago(2), 200, Some(200)));
    events.extend(fired("1-o2", days_ago(3), 200, Some(500)));
    write(&pool, events).await;
    let rows = report::current_in(&pool, 4, NOW, Tz::UTC, None)
        .await
        .unwrap();
    let counts: Vec<_> = rows
        .iter()
        .map(|r| (r.day, r.success_count, r.fail_count))
        .collect();
    assert_eq!(
        counts,
        [
            (day(today() - 3), 0, 1),
            (day(today() - 2), 0, 0),
            (day(today() - 1), 2, 1),
            (day(today()), 4, 3),
        ]
    );
    pool.close().await;
}

#[tokio::test]
async fn a_pass_is_skipped_while_another_session_holds_the_lock() {
    let (pool, _db) = fresh_database().await;
    let mut other = sqlx::MySqlConnection::connect_with(&pool.connect_options())
        .await
        .unwrap();
    let got: i64 =
        sqlx::query_scalar("SELECT GET_LOCK(CONCAT('rondo_maintenance_', DATABASE()), 0)")
            .fetch_one(&mut other)
            .await
            .unwrap();
    assert_eq!(got, 1);
    assert!(pass_at(&pool, 30, true, NOW).await.unwrap().is_none());
    other.close().await.unwrap();
    assert!(pass_at(&pool, 30, true, NOW).await.unwrap().is_some());
    // A pass released the lock: the next one gets it at once.
    assert!(pass_at(&pool, 30, true, NOW).await.unwrap().is_some());
    pool.close().await;
}

#[tokio::test]
async fn an_unpartitioned_database_upgrades_and_its_rows_get_day_partitions() {
    let (pool, _db) = empty_database().await;
    // The schema as it was before the log tables got day partitions.
    let partitions = MIGRATOR
        .migrations
        .iter()
        .position(|m| m.version == 20260301000001)
        .expect("the log_partitions migration");
    let before = MIGRATOR.migrations[partitions - 1].version;
    MIGRATOR.run_to(before, &pool).await.unwrap();
    for (id, age) in [("1-old", 10), ("1-new", 0)] {
        let fire_ms = days_ago(age);
        let sql = format!(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, trigger_code, handle_code) \
             VALUES ('{id}', {fire_ms}, 1, 200, 200)"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
        let sql = format!(
            "INSERT INTO job_log_line (trigger_id, seq, ts_ms, line) VALUES ('{id}', 0, {fire_ms}, 'x')"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    migrate(&pool).await.unwrap();
    assert_eq!(count(&pool, "job_log").await, 2);
    assert_eq!(count(&pool, "job_log_line").await, 2);

    pass_at(&pool, 30, true, NOW).await.unwrap().expect("lock");
    let in_partition = |table: &'static str, age: i64| {
        let pool = pool.clone();
        async move {
            let sql = format!(
                "SELECT trigger_id FROM {table} PARTITION ({})",
                partition_name(today() - age)
            );
            let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_all(&pool)
                .await
                .unwrap();
            ids
        }
    };
    assert_eq!(in_partition("job_log", 10).await, ["1-old"]);
    assert_eq!(in_partition("job_log", 0).await, ["1-new"]);
    assert_eq!(in_partition("job_log_line", 10).await, ["1-old"]);
    // Retention of seven days drops the old day only.
    retention_at(&pool, 7, NOW).await.unwrap();
    assert_eq!(trigger_ids(&pool, "job_log").await, ["1-new"]);
    assert_eq!(trigger_ids(&pool, "job_log_line").await, ["1-new"]);
    pool.close().await;
}
