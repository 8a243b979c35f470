//! The path of one fire, end to end on the real services: a scheduler node,
//! an executor and the persistence worker in-process; a job firing every
//! second runs exactly once per second for 10 s, and MySQL holds a success
//! row for every fire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rondo_core::clock;
use rondo_executor::{JobContext, JobError};
use rondo_testkit::{Cluster, World, eventually, stats};
use serde_json::json;
use sqlx::Row;

/// What the handler saw: (trigger id, scheduled fire, handler start).
type Runs = Arc<Mutex<Vec<(String, i64, i64)>>>;

const WINDOW_S: i64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_second_for_ten_seconds_runs_once_each_and_is_stored() {
    let mut world = World::new("e2e").await;
    world.config.executor.app = "e2e".into();
    let mut cluster = Cluster::new(world);

    let runs: Runs = Arc::default();
    let seen = runs.clone();
    let record = move |ctx: JobContext| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push((
                ctx.trigger_id().to_owned(),
                ctx.fire_ms(),
                clock::now_ms(),
            ));
            ctx.log(format!("fired for {}", ctx.fire_ms()));
            Ok::<(), JobError>(())
        }
    };
    cluster.start_executor("e2e-1", |b| b.handler("record", record));
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);

    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "e2e" })).await.0,
        201
    );
    eventually(
        "the executor to register",
        Duration::from_secs(10),
        || async {
            let (_, live) = api.get("/api/v1/groups/e2e/executors").await;
            (live == json!(["e2e-1"])).then_some(())
        },
    )
    .await;
    let (status, job) = api
        .post(
            "/api/v1/jobs",
            json!({ "group": "e2e", "handler": "record", "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "routing": "ROUND" }),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    let job_id = job["id"].as_u64().unwrap();
    let first = job["next_fire_ms"].as_i64().unwrap();
    let expected: Vec<i64> = (0..WINDOW_S).map(|i| first + i * 1000).collect();
    let last = *expected.last().unwrap();

    // Wait until the schedule moved two seconds past the window: its last
    // fire, and any duplicate of a fire in it, would have run by then.
    let past = last + 2000;
    eventually(
        "the schedule to move past the window",
        Duration::from_secs((WINDOW_S + 15) as u64),
        || {
            let runs = runs.clone();
            async move {
                runs.lock()
                    .unwrap()
                    .iter()
                    .any(|r| r.1 >= past)
                    .then_some(())
            }
        },
    )
    .await;

    let snapshot = runs.lock().unwrap().clone();
    let mut per_fire: HashMap<i64, Vec<String>> = HashMap::new();
    for (trigger_id, fire_ms, _) in &snapshot {
        per_fire
            .entry(*fire_ms)
            .or_default()
            .push(trigger_id.clone());
    }
    let missing: Vec<i64> = expected
        .iter()
        .copied()
        .filter(|f| !per_fire.contains_key(f))
        .collect();
    let duplicated: Vec<(&i64, &Vec<String>)> =
        per_fire.iter().filter(|(_, ids)| ids.len() > 1).collect();
    let mut ids: Vec<&String> = snapshot.iter().map(|r| &r.0).collect();
    ids.sort();
    ids.dedup();
    let handler_lateness: Vec<i64> = snapshot
        .iter()
        .filter(|r| expected.contains(&r.1))
        .map(|r| r.2 - r.1)
        .collect();
    assert!(missing.is_empty(), "fires that never ran: {missing:?}");
    assert!(
        duplicated.is_empty(),
        "fires that ran more than once: {duplicated:?}"
    );
    assert_eq!(ids.len(), snapshot.len(), "trigger ids are unique");
    assert!(
        per_fire.keys().all(|f| (f - first) % 1000 == 0),
        "every fire is on the second: {:?}",
        per_fire.keys()
    );

    // MySQL: one row per fire of the window, trigger and handle both 200.
    let window_ids: Vec<String> = snapshot
        .iter()
        .filter(|r| expected.contains(&r.1))
        .map(|r| r.0.clone())
        .collect();
    let rows = eventually("the log rows in MySQL", Duration::from_secs(20), || {
        let db = cluster.db().clone();
        let window_ids = window_ids.clone();
        async move {
            let rows = sqlx::query(
                "SELECT trigger_id, fire_ms, trigger_code, handle_code, \
                 CAST(UNIX_TIMESTAMP(trigger_time) * 1000 AS SIGNED) AS sent_ms \
                 FROM job_log WHERE job_id = ? AND fire_ms BETWEEN ? AND ?",
            )
            .bind(job_id)
            .bind(first)
            .bind(last)
            .fetch_all(&db)
            .await
            .expect("query job_log");
            let done = rows.iter().filter(|r| {
                r.get::<Option<i32>, _>("trigger_code") == Some(200)
                    && r.get::<Option<i32>, _>("handle_code") == Some(200)
            });
            (done.count() == window_ids.len()).then_some(rows)
        }
    })
    .await;
    let mut stored: Vec<String> = rows
        .iter()
        .map(|r| r.get::<String, _>("trigger_id"))
        .collect();
    stored.sort();
    let mut want = window_ids.clone();
    want.sort();
    assert_eq!(
        stored, want,
        "one MySQL row per fire, keyed by its trigger id"
    );
    let lines: i64 = sqlx::query("SELECT COUNT(*) AS n FROM job_log_line WHERE trigger_id = ?")
        .bind(&want[0])
        .fetch_one(cluster.db())
        .await
        .unwrap()
        .get("n");
    assert_eq!(lines, 1, "the handler's log line is stored");
    // … and reads back through the API, with the log row.
    let (status, log) = api.get(&format!("/api/v1/logs/{}", want[0])).await;
    assert_eq!(status, 200, "{log}");
    assert_eq!(log["log"]["handle_code"], 200, "{log}");
    assert!(
        log["lines"][0]["line"]
            .as_str()
            .is_some_and(|l| l.starts_with("fired for ")),
        "{log}"
    );
    let (_, history) = api
        .get(&format!("/api/v1/jobs/{job_id}/logs?limit=5"))
        .await;
    assert_eq!(history.as_array().map(Vec::len), Some(5), "{history}");

    let publish_lateness: Vec<i64> = rows
        .iter()
        .map(|r| {
            r.get::<Option<i64>, _>("sent_ms").unwrap_or_default() - r.get::<i64, _>("fire_ms")
        })
        .collect();
    let (p50, p99, max) = stats::summary(&publish_lateness);
    eprintln!(
        "publish lateness over {} fires: p50 {p50} ms, p99 {p99} ms, max {max} ms",
        publish_lateness.len()
    );
    let (p50, p99, max) = stats::summary(&handler_lateness);
    eprintln!(
        "handler-start lateness over {} fires: p50 {p50} ms, p99 {p99} ms, max {max} ms",
        handler_lateness.len()
    );
    assert!(
        p99 < 1000,
        "a fire's handler starts within a second of its instant (p99 {p99} ms)"
    );

    cluster.stop().await;
}
