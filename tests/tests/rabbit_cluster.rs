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
use rondo_testkit::{Cluster, World, eventually};

const JOBS: u64 = 20;

/// How long the cluster may take to fire on past a kill.
const FIRES_ON: Duration = Duration::from_secs(60);

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
    let first = cluster.api(node).every_second_jobs("rq", JOBS).await;
    let from = first + 2000;
    recorder.until_every_job_ran(JOBS, from, FIRES_ON).await;

    let mut to = from;
    for broker in 1..=3u8 {
        topology::kill_rabbit_node(broker);
        let killed = clock::now_ms();
        // Fires go on through the two nodes left: every job's fire five
        // seconds on runs.
        to = (killed / 1000 + 6) * 1000;
        recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;
        tokio::task::block_in_place(topology::up);
        eventually("the node back", Duration::from_secs(120), || async {
            topology::rabbit_up(broker).await.then_some(())
        })
        .await;
    }

    // Every fire from `from` to `to` ran exactly once…
    recorder.until_each_ran(JOBS, from, to, FIRES_ON).await;
    recorder.assert_each_ran_once(JOBS, from, to);
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
