//! MySQL out of reach of the persistence worker (pointed at a closed port)
//! during a run: scheduling goes on, on time, because the scheduling path
//! only publishes events and never waits for MySQL; the events wait in the
//! persist queue, and once a worker reaches MySQL every fire's trigger and
//! result end up in `job_log`, and the queue drains.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use rondo_core::Config;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::{Api, Cluster, World, eventually, queue_depth, stats};
use serde_json::json;
use sqlx::MySqlPool;

/// Fires of the window watched while MySQL is out of reach.
const WINDOW_S: i64 = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_out_of_reach_loses_nothing_and_does_not_slow_scheduling() {
    let mut world = World::new("poutage").await;
    world.config.executor.app = "poutage".into();
    let mut cluster = Cluster::new(world);
    let (config, db) = (cluster.config().clone(), cluster.db().clone());

    cluster.start_persist_worker_with(out_of_reach);
    let recorder = Recorder::default();
    cluster.start_recording_executor("poutage-1", &recorder);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let (job_id, first) = create_job(&api).await;

    // Scheduling while no event can reach MySQL: every fire runs, on time.
    let expected: Vec<i64> = (0..WINDOW_S).map(|i| first + i * 1000).collect();
    let last = *expected.last().expect("a window");
    recorder
        .until_fire(last, Duration::from_secs((WINDOW_S + 20) as u64))
        .await;
    let runs = recorder.runs();
    let missed: Vec<i64> = expected
        .iter()
        .copied()
        .filter(|f| !runs.iter().any(|r| r.fire_ms == *f))
        .collect();
    let lateness: Vec<i64> = runs
        .iter()
        .filter(|r| expected.contains(&r.fire_ms))
        .map(|r| r.start_ms - r.fire_ms)
        .collect();
    let (p50, p99, max) = stats::summary(&lateness);
    eprintln!(
        "MySQL out of reach: {} of {} fires ran, {} missed; handler-start lateness p50 {p50} ms, p99 {p99} ms, max {max} ms",
        expected.len() - missed.len(),
        expected.len(),
        missed.len()
    );
    assert!(missed.is_empty(), "fires that never ran: {missed:?}");
    assert!(
        p99 < 1000,
        "MySQL out of reach does not slow scheduling: handler-start p99 {p99} ms"
    );
    assert_eq!(count_rows(&db).await, 0, "nothing reached MySQL");
    let waiting = persist_depth(&config).await;
    eprintln!("{waiting} event messages waiting in the persist queue");
    assert!(waiting > 0, "the events wait in the persist queue");

    // Stop the job so the set of fires is final, then let MySQL be reached.
    let (status, body) = api
        .post(&format!("/api/v1/jobs/{job_id}/stop"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    // Asserts the outage worker stops cleanly.
    cluster.stop_persist_worker().await;
    let recovered = Instant::now();
    cluster.start_persist_worker();

    let stored = eventually(
        "every fire's trigger and result in job_log",
        Duration::from_secs(30),
        || async { all_stored(&db, &recorder, job_id).await },
    )
    .await;
    eprintln!(
        "{stored} fires stored {:?} after MySQL became reachable",
        recovered.elapsed()
    );
    eventually(
        "the persist queue to drain",
        Duration::from_secs(30),
        || async { (persist_depth(&config).await == 0).then_some(()) },
    )
    .await;

    // The node, then the executor, then the worker, each asserted to stop
    // cleanly: the worker last, so the executor's final results are stored
    // too.
    cluster.stop().await;
}

/// Points `mysql.url` at a port nobody listens on.
fn out_of_reach(config: &mut Config) {
    let url = &config.mysql.url;
    let host_start = url.find('@').map_or("mysql://".len(), |at| at + 1);
    let host_end = url[host_start..]
        .find('/')
        .map_or(url.len(), |slash| host_start + slash);
    config.mysql.url = format!("{}127.0.0.1:1{}", &url[..host_start], &url[host_end..]);
}

/// A group, its executor registered, and a job firing every second:
/// (job id, first fire).
async fn create_job(api: &Api) -> (u64, i64) {
    let (status, body) = api
        .post("/api/v1/groups", json!({ "app": "poutage" }))
        .await;
    assert_eq!(status, 201, "{body}");
    eventually(
        "the executor to register",
        Duration::from_secs(15),
        || async {
            let (_, live) = api.get("/api/v1/groups/poutage/executors").await;
            (live == json!(["poutage-1"])).then_some(())
        },
    )
    .await;
    let spec = json!({ "group": "poutage", "handler": "record", "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "routing": "ROUND" });
    let (status, job) = api.post("/api/v1/jobs", spec).await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_u64().expect("job id");
    let first = job["next_fire_ms"].as_i64().expect("next fire");
    (id, first)
}

async fn count_rows(db: &MySqlPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM job_log")
        .fetch_one(db)
        .await
        .expect("count job_log")
}

/// `Some(n)` once job_log holds exactly one row per trigger id the recorder
/// saw (n of them), each with its trigger and its result, both successes.
async fn all_stored(db: &MySqlPool, recorder: &Recorder, job_id: u64) -> Option<usize> {
    let seen: BTreeSet<String> = recorder.runs().into_iter().map(|r| r.trigger_id).collect();
    let rows: Vec<(String, Option<i32>, Option<i32>)> = sqlx::query_as(
        "SELECT trigger_id, trigger_code, handle_code FROM job_log WHERE job_id = ?",
    )
    .bind(job_id)
    .fetch_all(db)
    .await
    .expect("read job_log");
    let complete: HashSet<&str> = rows
        .iter()
        .filter(|(_, trigger, handle)| *trigger == Some(200) && *handle == Some(200))
        .map(|(id, _, _)| id.as_str())
        .collect();
    let stored: BTreeSet<String> = rows.iter().map(|(id, _, _)| id.clone()).collect();
    let done = rows.len() == seen.len()
        && stored == seen
        && seen.iter().all(|id| complete.contains(id.as_str()));
    done.then_some(seen.len())
}

/// Ready messages in the namespace's persist queue.
async fn persist_depth(config: &Config) -> u32 {
    let queue = config.names().persist_queue();
    let (ready, _consumers) = queue_depth(config, &queue)
        .await
        .expect("persist queue exists");
    ready
}
