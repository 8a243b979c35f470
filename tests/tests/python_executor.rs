//! The example Python executor (`examples/python-executor`), written from
//! `docs/executor-protocol.md` alone, in a real cluster: a scheduler node,
//! the persistence worker and MySQL, unchanged. Every outcome is read back
//! from the trigger log rows the persistence worker stores.
//!
//! * block strategies where they matter (triggers overlapping a slow run):
//!   SERIAL_EXECUTION runs them all, one after another; DISCARD_LATER
//!   refuses the later one; COVER_EARLY stops the earlier one;
//! * a timeout, a kill through the API, a failing run and its retries;
//! * a SHARDING_BROADCAST over a group of the Python executor and a Rust
//!   `rondo-executor` process: one shard on each, both succeed.
//!
//! Every job runs the `demo` handler, which both executors have: params
//! `fail` fail, a number sleeps that many milliseconds (cancellable).

use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::dedupe::Mark;
use rondo_testkit::python::PythonExecutor;
use rondo_testkit::{Api, Cluster, PATIENCE, World, eventually};
use serde_json::{Value, json};
use sqlx::{MySqlPool, Row};

/// A cluster of one node and the persistence worker, with the Python
/// executor `python_id` and the Rust executor processes `rust_ids` in group
/// `app`; returns it with its API once every executor is live.
async fn cluster(
    tag: &str,
    app: &str,
    python_id: &str,
    rust_ids: &[&str],
) -> (Cluster, Api, PythonExecutor) {
    let mut world = World::new(tag).await;
    world.config.executor.app = app.into();
    world.executor_queue(app, python_id);
    let mut cluster = Cluster::new(world);
    let mut python = PythonExecutor::spawn(cluster.config(), app, python_id, &cluster.log_dir);
    for id in rust_ids {
        cluster.spawn_executor(id);
    }
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": app })).await.0,
        201
    );
    python.until_registered(cluster.config()).await;
    let mut ids: Vec<&str> = rust_ids.iter().copied().chain([python_id]).collect();
    ids.sort_unstable();
    api.until_executors(app, &ids).await;
    (cluster, api, python)
}

/// A `demo` job of `app` with `params`, plus the fields of `extra`.
fn demo_job(app: &str, params: &str, extra: Value) -> Value {
    let mut spec = json!({ "group": app, "handler": "demo", "params": params, "routing": "FIRST" });
    for (key, value) in extra.as_object().expect("an object") {
        spec[key] = value.clone();
    }
    spec
}

/// Waits until `executor` holds the `running` dedupe mark of a trigger: it
/// claimed it, and its handler runs (or is about to).
async fn until_running(c: &Cluster, trigger_id: &str, executor: &str) {
    let pool = rondo_core::redis::pool(&c.config().redis).expect("a redis pool");
    let key = c.config().names().dedupe("py", trigger_id);
    eventually(
        &format!("{trigger_id} running on {executor}"),
        PATIENCE,
        || async {
            let mark: Option<String> = pool.get().await.ok()?.get(&key).await.ok()?;
            matches!(Mark::parse(&mark?), Some(Mark::Running { executor: e, .. }) if e == executor)
                .then_some(())
        },
    )
    .await;
}

/// A trigger's stored result (`job_log`).
#[derive(Debug, Clone)]
struct Stored {
    trigger_id: String,
    executor_id: String,
    shard_index: u32,
    shard_total: u32,
    retry_count: u32,
    code: i32,
    msg: String,
    start_ms: i64,
    end_ms: i64,
}

/// The stored results of job `job_id` (rows whose handler side is not
/// stored yet, or still running, left out), by start.
async fn results(db: &MySqlPool, job_id: u64) -> Vec<Stored> {
    let rows = sqlx::query(
        "SELECT trigger_id, executor_id, shard_index, shard_total, retry_count, \
         handle_code, handle_msg, \
         CAST(UNIX_TIMESTAMP(handle_start) * 1000 AS SIGNED) AS start_ms, \
         CAST(UNIX_TIMESTAMP(handle_time) * 1000 AS SIGNED) AS end_ms \
         FROM job_log WHERE job_id = ? AND handle_code IS NOT NULL AND handle_code <> 0 \
         ORDER BY handle_start, trigger_id",
    )
    .bind(job_id)
    .fetch_all(db)
    .await
    .expect("read job_log");
    rows.iter()
        .map(|r| Stored {
            trigger_id: r.get("trigger_id"),
            executor_id: r.get("executor_id"),
            shard_index: r.get("shard_index"),
            shard_total: r.get("shard_total"),
            retry_count: r.get("retry_count"),
            code: r.get("handle_code"),
            msg: r.get::<Option<String>, _>("handle_msg").unwrap_or_default(),
            start_ms: r.get::<Option<i64>, _>("start_ms").unwrap_or_default(),
            end_ms: r.get::<Option<i64>, _>("end_ms").unwrap_or_default(),
        })
        .collect()
}

/// Waits until job `job_id` has `n` stored results; returns them by start.
async fn until_results(c: &Cluster, job_id: u64, n: usize) -> Vec<Stored> {
    eventually(
        &format!("{n} stored results of job {job_id}"),
        Duration::from_secs(40),
        || async {
            let stored = results(c.db(), job_id).await;
            (stored.len() >= n).then_some(stored)
        },
    )
    .await
}

/// Waits until trigger `trigger_id` of job `job_id` has a stored result.
async fn until_result(c: &Cluster, job_id: u64, trigger_id: &str) -> Stored {
    eventually(
        &format!("the stored result of {trigger_id}"),
        Duration::from_secs(40),
        || async {
            results(c.db(), job_id)
                .await
                .into_iter()
                .find(|s| s.trigger_id == trigger_id)
        },
    )
    .await
}

/// Stops the Python executor with SIGTERM and asserts its graceful stop.
async fn stop(python: PythonExecutor) {
    let log = python.log_text();
    let exit = python.terminate(Duration::from_secs(20)).await;
    assert!(
        exit.is_some_and(|s| s.success()),
        "the python executor stops gracefully: {exit:?}\n{log}"
    );
}

const DISCARDED: &str = "block strategy DISCARD_LATER: job is running, trigger discarded";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn block_strategies_decide_triggers_overlapping_a_slow_run() {
    let (c, api, python) = cluster("py_block", "py", "py-1", &[]).await;

    // SERIAL_EXECUTION: three 800 ms runs fired at once all run, in order,
    // each after the one before ended.
    let serial = api
        .create_job(demo_job(
            "py",
            "800",
            json!({ "block": "SERIAL_EXECUTION" }),
        ))
        .await;
    let mut fired = Vec::new();
    for _ in 0..3 {
        fired.push(api.trigger_now(serial).await);
    }
    // DISCARD_LATER: a trigger while the first one runs is refused.
    let discard = api
        .create_job(demo_job("py", "3000", json!({ "block": "DISCARD_LATER" })))
        .await;
    let first = api.trigger_now(discard).await;
    until_running(&c, &first, "py-1").await;
    let later = api.trigger_now(discard).await;
    // COVER_EARLY: a trigger while the first one runs stops it and runs.
    let cover = api
        .create_job(demo_job("py", "60000", json!({ "block": "COVER_EARLY" })))
        .await;
    let early = api.trigger_now(cover).await;
    until_running(&c, &early, "py-1").await;
    let covering = api.trigger_with_params(cover, "200").await;

    let runs = until_results(&c, serial, 3).await;
    let order: Vec<&str> = runs.iter().map(|r| r.trigger_id.as_str()).collect();
    assert_eq!(order, fired, "run in the order fired: {runs:?}");
    for run in &runs {
        assert_eq!(
            (run.code, run.executor_id.as_str()),
            (200, "py-1"),
            "{run:?}"
        );
    }
    for pair in runs.windows(2) {
        assert!(
            pair[1].start_ms >= pair[0].end_ms,
            "one after another: {pair:?}"
        );
    }

    let discarded = until_result(&c, discard, &later).await;
    assert_eq!((discarded.code, discarded.msg.as_str()), (500, DISCARDED));
    let kept = until_result(&c, discard, &first).await;
    assert_eq!(kept.code, 200, "{kept:?}");

    let covered = until_result(&c, cover, &early).await;
    let replaced = format!("block strategy COVER_EARLY: replaced by trigger {covering}");
    assert_eq!(
        (covered.code, covered.msg.as_str()),
        (500, replaced.as_str())
    );
    let ran = until_result(&c, cover, &covering).await;
    assert_eq!(ran.code, 200, "{ran:?}");
    assert!(
        ran.start_ms >= covered.end_ms,
        "the covering run starts once the covered one ended: {covered:?} {ran:?}"
    );

    stop(python).await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timeouts_kills_failures_and_retries_are_answered() {
    let (c, api, python) = cluster("py_fail", "py", "py-1", &[]).await;

    let timeout = api
        .create_job(demo_job("py", "20000", json!({ "timeout_s": 1 })))
        .await;
    let kill = api.create_job(demo_job("py", "60000", json!({}))).await;
    let fail = api.create_job(demo_job("py", "fail", json!({}))).await;
    let retried = api
        .create_job(demo_job("py", "fail", json!({ "retries": 2 })))
        .await;
    let timed_out = api.trigger_now(timeout).await;
    let failed = api.trigger_now(fail).await;
    let first_try = api.trigger_now(retried).await;
    let killed = api.trigger_now(kill).await;
    until_running(&c, &killed, "py-1").await;
    let (status, out) = api
        .post(&format!("/api/v1/logs/{killed}/kill"), json!({}))
        .await;
    assert_eq!(status, 202, "{out}");
    assert_eq!(out["kill"], "sent", "the run is told to stop: {out}");

    let stored = until_result(&c, timeout, &timed_out).await;
    assert_eq!(
        (stored.code, stored.msg.as_str()),
        (502, "timeout after 1s")
    );
    assert!(
        stored.end_ms - stored.start_ms < 10_000,
        "cut short, not run for 20 s: {stored:?}"
    );

    let stored = until_result(&c, kill, &killed).await;
    assert_eq!((stored.code, stored.msg.as_str()), (500, "killed"));

    let fail_msg = "demo: failure requested by params";
    let stored = until_result(&c, fail, &failed).await;
    assert_eq!((stored.code, stored.msg.as_str()), (500, fail_msg));

    // Two retries: three attempts, each its own stored failure.
    let attempts = until_results(&c, retried, 3).await;
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert_eq!(attempts[0].trigger_id, first_try);
    let tries: Vec<u32> = attempts.iter().map(|a| a.retry_count).collect();
    assert_eq!(tries, [0, 1, 2], "{attempts:?}");
    for attempt in &attempts {
        assert_eq!(
            (
                attempt.code,
                attempt.msg.as_str(),
                attempt.executor_id.as_str()
            ),
            (500, fail_msg, "py-1"),
        );
    }

    stop(python).await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharding_broadcast_runs_one_shard_on_python_and_one_on_rust() {
    let (c, api, python) = cluster("py_shard", "mix", "mix-py", &["mix-rs"]).await;

    let job = api
        .create_job(demo_job(
            "mix",
            "300",
            json!({ "routing": "SHARDING_BROADCAST" }),
        ))
        .await;
    let (status, out) = api
        .post(&format!("/api/v1/jobs/{job}/trigger"), json!({}))
        .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["triggers"].as_array().map(Vec::len), Some(2), "{out}");

    let mut shards = until_results(&c, job, 2).await;
    shards.sort_by_key(|s| s.shard_index);
    // Live executors sorted by id take the shards in order.
    let placed: Vec<(u32, u32, &str, i32)> = shards
        .iter()
        .map(|s| (s.shard_index, s.shard_total, s.executor_id.as_str(), s.code))
        .collect();
    assert_eq!(
        placed,
        [(0, 2, "mix-py", 200), (1, 2, "mix-rs", 200)],
        "{shards:?}"
    );

    stop(python).await;
    c.stop().await;
}
