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
    // A range of days (the dashboard's), with its totals.
    let old = date_of_day(today - 40);
    let (status, report) = api
        .get(&format!("/api/v1/reports?from={old}&to={old}"))
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        report["items"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(report["items"][0]["day"], old.to_string());
    assert_eq!(
        report["total"],
        json!({ "running_count": 0, "success_count": 1, "fail_count": 0 })
    );
    let (_, report) = api.get(&format!("/api/v1/reports?from={old}")).await;
    assert_eq!(
        report["items"].as_array().map(Vec::len),
        Some(41),
        "to today"
    );
    assert_eq!(
        report["total"],
        json!({ "running_count": 1, "success_count": 2, "fail_count": 1 })
    );
    let tomorrow = date_of_day(today + 1);
    let long_ago = date_of_day(today - 400);
    for (query, field) in [
        (format!("from={}&to={old}", date_of_day(today)), "from"),
        (format!("from={old}&to={tomorrow}"), "to"),
        (format!("from={long_ago}"), "from"),
        ("from=yesterday".to_owned(), "from"),
        (format!("to={old}"), "from"),
        (format!("from={old}&days=3"), "days"),
    ] {
        let (status, answer) = api.get(&format!("/api/v1/reports?{query}")).await;
        assert_eq!(
            (status, &answer["error"]["field"]),
            (400, &json!(field)),
            "{query}: {answer}"
        );
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

/// A trigger log row of `group` with its outcome (`state` as the stored
/// column reads it: 0 running, 1 success, 2 failed).
async fn insert_in(db: &MySqlPool, group: &str, id: &str, fire_ms: i64, state: i32) {
    sqlx::query(
        "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, trigger_code, handle_code) \
         VALUES (?, ?, 1, ?, 200, ?)",
    )
    .bind(id)
    .bind(fire_ms)
    .bind(group)
    .bind(match state {
        1 => Some(200),
        2 => Some(500),
        _ => None,
    })
    .execute(db)
    .await
    .unwrap();
}

/// `(running, success, fail)` of the report's `i`-th day.
fn counts(report: &Value, i: usize) -> (i64, i64, i64) {
    let day = &report["items"][i];
    let n = |k: &str| day[k].as_i64().unwrap_or(-1);
    (n("running_count"), n("success_count"), n("fail_count"))
}

/// A user who may read some groups is shown the runs of those groups only,
/// on days recounted, on days stored, and on a day stored before the
/// per-group counts existed; an admin is shown every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_report_counts_only_the_groups_they_may_read() {
    let world = World::new("report_groups").await;
    let now = rondo_core::clock::now_ms();
    let today = day_of(now);
    let db = world.db.clone();
    let at = |days_ago: i64| (today - days_ago) * DAY_MS + 1_000;
    // Today: pay one success and one failure; ops two successes, one running.
    insert_in(&db, "pay", "p-ok", now, 1).await;
    insert_in(&db, "pay", "p-bad", now, 2).await;
    insert_in(&db, "ops", "o-ok1", now, 1).await;
    insert_in(&db, "ops", "o-ok2", now, 1).await;
    insert_in(&db, "ops", "o-run", now, 0).await;
    // Ten days ago: pay one success, ops three.
    insert_in(&db, "pay", "p-old", at(10), 1).await;
    for i in 0..3 {
        insert_in(&db, "ops", &format!("o-old{i}"), at(10), 1).await;
    }
    // Twenty days ago, stored by a build that counted no groups.
    insert_in(&db, "pay", "p-older", at(20), 1).await;
    insert_in(&db, "ops", "o-older", at(20), 1).await;
    sqlx::query("INSERT INTO log_report (day, success_count) VALUES (?, 2)")
        .bind(date_of_day(today - 20))
        .execute(&db)
        .await
        .unwrap();
    // Nineteen days ago, stored likewise, its logs since dropped: its
    // total must survive a restricted user's read.
    sqlx::query("INSERT INTO log_report (day, success_count) VALUES (?, 5)")
        .bind(date_of_day(today - 19))
        .execute(&db)
        .await
        .unwrap();
    let payer = world
        .user("payer", rondo_core::auth::Role::Viewer, &["pay"], false)
        .await;
    let nobody = world
        .user("nobody", rondo_core::auth::Role::Operator, &[], false)
        .await;
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let admin = cluster.api(node);
    let payer = cluster.api(node).with_token(&payer);
    let nobody = cluster.api(node).with_token(&nobody);

    // The admin's read counts (and stores) every day, with its groups.
    let (status, all) = admin.get("/api/v1/reports?days=21").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(counts(&all, 20), (1, 3, 1), "today, every group: {all}");
    assert_eq!(counts(&all, 10), (0, 4, 0), "{all}");
    assert_eq!(counts(&all, 0), (0, 2, 0), "as stored: {all}");
    assert_eq!(counts(&all, 1), (0, 5, 0), "as stored: {all}");
    for _ in 0..2 {
        // Read twice: the second time every old day is as stored.
        let (status, mine) = payer.get("/api/v1/reports?days=21").await;
        assert_eq!(status, 200, "{mine}");
        assert_eq!(counts(&mine, 20), (0, 1, 1), "today, pay only: {mine}");
        assert_eq!(counts(&mine, 10), (0, 1, 0), "stored, pay only: {mine}");
        assert_eq!(
            counts(&mine, 0),
            (0, 1, 0),
            "counted again, pay only: {mine}"
        );
        assert_eq!(counts(&mine, 5), (0, 0, 0), "{mine}");
        assert_eq!(
            counts(&mine, 1),
            (0, 0, 0),
            "logs gone: none of pay's: {mine}"
        );
    }
    let (_, again) = admin.get("/api/v1/reports?days=21").await;
    assert_eq!(
        counts(&again, 1),
        (0, 5, 0),
        "the stored total kept: {again}"
    );
    assert_eq!(counts(&again, 0), (0, 2, 0), "{again}");
    let (status, none) = nobody.get("/api/v1/reports?days=21").await;
    assert_eq!(status, 200, "{none}");
    for i in 0..21 {
        assert_eq!(counts(&none, i), (0, 0, 0), "day {i}: {none}");
    }
    cluster.stop().await;
}

/// `GET /api/v1/maintenance/retention` (`rondo retention show`) answers the
/// configured retention to an admin, a read-only admin token included, and
/// refuses everyone else; it drops nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_retention_is_shown_to_admins_only() {
    use rondo_core::auth::Role;
    let mut world = World::new("retention_show").await;
    world.config.persist.retention_days = 45;
    let now = rondo_core::clock::now_ms();
    insert(
        &world.db,
        "1-old",
        (day_of(now) - 400) * DAY_MS + 1,
        200,
        None,
    )
    .await;
    let anonymous = world.in_process_api("retention-show").await;
    let admin = anonymous.clone().with_token(&world.admin.token);
    let admin_ro = rondo_history::testing::users::create_token(&world.db, "admin", true).await;
    let operator = world.user("olga", Role::Operator, &[], false).await;
    let viewer = world.user("vic", Role::Viewer, &[], false).await;
    let path = "/api/v1/maintenance/retention";

    let shown = json!({ "days": 45, "min_days": 7, "max_days": 36500 });
    for api in [admin, anonymous.clone().with_token(&admin_ro)] {
        let (status, answer) = api.get(path).await;
        assert_eq!((status, &answer), (200, &shown));
    }
    for token in [operator, viewer] {
        let (status, answer) = anonymous.clone().with_token(&token).get(path).await;
        assert_eq!(status, 403, "{answer}");
        assert_eq!(answer["error"]["field"], "retention", "{answer}");
    }
    assert_eq!(anonymous.get(path).await.0, 401);
    assert_eq!(trigger_ids(&world.db, "job_log").await, ["1-old"]);
}
