//! The daily report and log retention through the admin API (what `rondo
//! report` and `rondo retention` call), on a scheduler node in-process.

use reqwest::Method;
use rondo_history::partitions::{DAY_MS, date_of_day, day_of};
use rondo_testkit::{Api, Cluster, World};
use serde_json::{Value, json};
use sqlx::MySqlPool;

/// A trigger log row and one log line, as the persistence worker stores them.
async fn insert(db: &MySqlPool, id: &str, fire_ms: i64, trigger: i32, handle: Option<i32>) {
    sqlx::query(
        "INSERT INTO job_log (trigger_id, fire_ms, job_id, trigger_code, handle_code) \
         VALUES (?, ?, 1, ?, ?)",
    )
    .bind(id)
    .bind(fire_ms)
    .bind(trigger)
    .bind(handle)
    .execute(db)
    .await
    .unwrap();
    sqlx::query("INSERT INTO job_log_line (trigger_id, seq, ts_ms, line) VALUES (?, 0, ?, 'x')")
        .bind(id)
        .bind(fire_ms)
        .execute(db)
        .await
        .unwrap();
}

async fn trigger_ids(db: &MySqlPool, table: &str) -> Vec<String> {
    let sql = format!("SELECT trigger_id FROM {table} ORDER BY trigger_id");
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_all(db)
        .await
        .unwrap()
}

async fn expect_days_refused(api: &Api, method: Method, path: &str, body: Option<Value>) {
    let (status, answer) = api.call(method, path, body).await;
    assert_eq!(status, 400, "{path}: {answer}");
    assert_eq!(answer["error"]["field"], "days", "{path}: {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_and_retention_answer_through_the_api() {
    let world = World::new("reports").await;
    let now = rondo_core::clock::now_ms();
    let today = day_of(now);
    // Today: one running, one success, one failure; 40 days ago: one success.
    insert(&world.db, "1-run", now, 200, None).await;
    insert(&world.db, "1-ok", now, 200, Some(200)).await;
    insert(&world.db, "1-bad", now, 500, None).await;
    insert(
        &world.db,
        "1-old",
        (today - 40) * DAY_MS + 1,
        200,
        Some(200),
    )
    .await;

    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let db = cluster.db().clone();

    let (status, report) = api.get("/api/v1/reports?days=3").await;
    assert_eq!(status, 200, "{report}");
    let items = report["items"].as_array().expect("items");
    assert_eq!(items.len(), 3, "{report}");
    let last = &items[2];
    assert_eq!(last["day"], date_of_day(today).to_string(), "{report}");
    assert_eq!(
        (
            &last["running_count"],
            &last["success_count"],
            &last["fail_count"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{report}"
    );
    let (status, report) = api.get("/api/v1/reports?days=41").await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["items"][0]["success_count"], 1, "{report}");

    for bad in ["0", "many", "367"] {
        let path = format!("/api/v1/reports?days={bad}");
        expect_days_refused(&api, Method::GET, &path, None).await;
    }
    let retention = "/api/v1/maintenance/retention";
    for bad in [
        json!({ "days": 6 }),
        json!({ "days": "x" }),
        json!({ "days": -1 }),
    ] {
        expect_days_refused(&api, Method::POST, retention, Some(bad)).await;
    }
    assert_eq!(trigger_ids(&db, "job_log").await.len(), 4);

    // No body: the configured 30 days.
    let (status, applied) = api.call(Method::POST, retention, None).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(applied["days"], 30);
    assert_eq!(applied["enabled"], true);
    assert_eq!(applied["dropped"][0]["rows"], 1, "{applied}");
    let kept = ["1-bad", "1-ok", "1-run"];
    assert_eq!(trigger_ids(&db, "job_log").await, kept);
    assert_eq!(trigger_ids(&db, "job_log_line").await, kept);
    // Report rows are kept by retention (as in XXL-JOB).
    let old_day: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM log_report WHERE day = ?")
        .bind(date_of_day(today - 40))
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(old_day, 1);

    let (status, applied) = api.post(retention, json!({ "days": 7 })).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(applied["days"], 7);
    assert_eq!(trigger_ids(&db, "job_log").await, kept);

    cluster.stop().await;
}
