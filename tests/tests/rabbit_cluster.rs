//! A 3-node RabbitMQ cluster with quorum queues (`scripts/services-cluster.sh`)
//! under a scheduler node, an executor and the persistence worker, each
//! given the three nodes' addresses, 20 jobs firing every second: each
//! node in turn is killed -9, the cluster fires on for a few seconds, the
//! node is restarted. Nothing is lost: every fire the schedule says is due
//! runs exactly once, and its result reaches MySQL through the events the
//! broker carried.

use std::collections::HashMap;
use std::time::Duration;

use rondo_core::clock;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::topology::{self, MemberLock};
use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::json;

const JOBS: u64 = 20;

async fn create_jobs(api: &Api, app: &str) -> i64 {
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": app })).await.0,
        201
    );
    eventually("the executor", Duration::from_secs(30), || async {
        let (_, live) = api.get(&format!("/api/v1/groups/{app}/executors")).await;
        (!live.as_array()?.is_empty()).then_some(())
    })
    .await;
    let mut first = 0;
    for _ in 0..JOBS {
        let spec = json!({ "group": app, "handler": "record", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?" });
        let (status, job) = api.post("/api/v1/jobs", spec).await;
        assert_eq!(status, 201, "{job}");
        first = first.max(job["next_fire_ms"].as_i64().unwrap());
    }
    first
}

/// Waits until every job ran its fire at `at`.
async fn wait_for_fire(recorder: &Recorder, at: i64) {
    eventually(
        "every job's fire to run",
        Duration::from_secs(60),
        || async {
            let runs = recorder.runs();
            (1..=JOBS)
                .all(|job| runs.iter().any(|r| r.job_id == job && r.fire_ms == at))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_any_one_rabbitmq_node_loses_no_trigger_result_or_event() {
    let _members = tokio::task::spawn_blocking(MemberLock::acquire)
        .await
        .unwrap();
    let mut world = World::new("rabbit_cluster").await;
    tokio::task::block_in_place(|| world.on_rabbit_cluster());
    world.config.executor.app = "rq".into();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("rq-1", &recorder);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let first = create_jobs(&cluster.api(node), "rq").await;
    let from = first + 2000;
    wait_for_fire(&recorder, from).await;

    let mut to = from;
    for broker in 1..=3u8 {
        topology::kill_rabbit_node(broker);
        let killed = clock::now_ms();
        // Fires go on through the two nodes left: every job's fire five
        // seconds on runs.
        to = (killed / 1000 + 6) * 1000;
        wait_for_fire(&recorder, to).await;
        tokio::task::block_in_place(topology::up);
        eventually("the node back", Duration::from_secs(120), || async {
            topology::rabbit_up(broker).await.then_some(())
        })
        .await;
    }

    // Every fire from `from` to `to` ran exactly once…
    let mut per_fire: HashMap<(u64, i64), usize> = HashMap::new();
    for r in recorder.runs() {
        *per_fire.entry((r.job_id, r.fire_ms)).or_default() += 1;
    }
    for job in 1..=JOBS {
        for fire in (from..=to).step_by(1000) {
            assert_eq!(
                per_fire.get(&(job, fire)),
                Some(&1),
                "job {job} fire {fire}"
            );
        }
    }
    // …and its trigger and result events reached MySQL: one row each, with
    // the handler's 200.
    let want = JOBS as usize * ((to - from) / 1000 + 1) as usize;
    let rows: Vec<(u64, i64, Option<i32>)> = eventually(
        "every fire's result stored",
        Duration::from_secs(60),
        || async {
            let rows: Vec<(u64, i64, Option<i32>)> = sqlx::query_as(
                "SELECT job_id, fire_ms, handle_code FROM job_log \
                 WHERE fire_ms BETWEEN ? AND ? AND trigger_type = 'CRON'",
            )
            .bind(from)
            .bind(to)
            .fetch_all(cluster.db())
            .await
            .ok()?;
            (rows.iter().filter(|r| r.2 == Some(200)).count() >= want).then_some(rows)
        },
    )
    .await;
    let mut stored: HashMap<(u64, i64), usize> = HashMap::new();
    for (job, fire, code) in &rows {
        assert_eq!(*code, Some(200), "job {job} fire {fire}");
        *stored.entry((*job, *fire)).or_default() += 1;
    }
    for job in 1..=JOBS {
        for fire in (from..=to).step_by(1000) {
            assert_eq!(
                stored.get(&(job, fire)),
                Some(&1),
                "stored: job {job} fire {fire}"
            );
        }
    }
    cluster.stop().await;
}
