//! rondo on the whole cluster topology of `scripts/services-cluster.sh` — a
//! Redis Cluster (three masters, a replica each), a 3-member ZooKeeper
//! ensemble, a 3-node RabbitMQ cluster with quorum queues — with two
//! scheduler processes, an executor and the persistence worker, under 200
//! jobs firing every second. In turn: kill -9 of the Redis master of a
//! partition (its replica is promoted), of a ZooKeeper member, of a
//! RabbitMQ node (each restarted after), and of the leading scheduler.
//! Every fire the schedule says is due in the window runs exactly once, and
//! within `LATENESS_BOUND_MS` of its instant.

use std::time::Duration;

use rondo_core::clock;
use rondo_testkit::cluster::the_leader;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::topology::{self, MemberLock};
use rondo_testkit::{Cluster, World, eventually};

const JOBS: u64 = 200;

/// How long the cluster may take to fire on past a kill.
const FIRES_ON: Duration = Duration::from_secs(90);

/// Longer than a Redis failover (the node timeout, 3 s, an election, the
/// client's reconnection): see docs/operations.md, "A Redis Cluster". The executor
/// lease keeps its default (2 s): leases that lapse because Redis did not
/// answer are not taken for executors gone.
const PREREAD_MS: i64 = 15_000;
const SESSION_MS: u64 = 4_000;

/// Every fire's run starts within this of its instant: the longest outage
/// (a Redis master's failover and the client's reconnection, or a leader's
/// session expiring) plus the dispatch retries' backoff.
const LATENESS_BOUND_MS: i64 = 15_000;

/// Restarts what was killed and waits until each cluster is whole.
async fn restore() {
    tokio::task::block_in_place(topology::up);
    topology::until_redis_whole().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_member_of_each_cluster_dies_in_turn_and_no_fire_is_lost_or_doubled() {
    let _members = tokio::task::spawn_blocking(MemberLock::acquire)
        .await
        .unwrap();
    let mut world = World::new("topology").await;
    tokio::task::block_in_place(|| {
        world.on_redis_cluster();
        world.on_zk_ensemble();
        world.on_rabbit_cluster();
    });
    world.config.executor.app = "topo".into();
    world.config.scheduler.preread_ms = PREREAD_MS;
    world.config.zookeeper.session_timeout_ms = SESSION_MS;
    world.config.scheduler.misfire_threshold_ms = 60_000;
    let names = world.config.names();
    let mut cluster = Cluster::new(world);
    topology::until_redis_whole().await;
    let recorder = Recorder::default();
    cluster.start_recording_executor("topo-1", &recorder);
    cluster.spawn_persist_worker();
    cluster.spawn_node("t1");
    cluster.spawn_node("t2");
    eventually(
        "two nodes and a leader",
        Duration::from_secs(60),
        || async {
            let s = cluster.nodes[0].status().await?;
            (s["nodes"].as_array()?.len() == 2 && s["leader"]["term"].as_u64().is_some())
                .then_some(())
        },
    )
    .await;
    let first = cluster.api(0).every_second_jobs("topo", JOBS).await;
    let from = first + 2000;
    recorder.until_every_job_ran(JOBS, from, FIRES_ON).await;

    // After each kill, every job's fire eight seconds on runs before the
    // member comes back.
    let fires_on = |killed: i64| (killed / 1000 + 8) * 1000;

    // 1. The Redis master of partition 0.
    let master = topology::redis_master_of(&names.due(0))
        .await
        .expect("a master serves partition 0");
    topology::kill_redis_node(master);
    let mut to = fires_on(clock::now_ms());
    recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;
    restore().await;

    // 2. A ZooKeeper member.
    topology::kill_zk_member(1);
    to = fires_on(clock::now_ms());
    recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;
    restore().await;

    // 3. A RabbitMQ node.
    topology::kill_rabbit_node(1);
    to = fires_on(clock::now_ms());
    recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;
    restore().await;
    eventually("rabbitmq node 1 back", Duration::from_secs(120), || async {
        topology::rabbit_up(1).await.then_some(())
    })
    .await;

    // 4. The leading scheduler.
    let leading = the_leader(&cluster.nodes).await;
    cluster.node_proc(leading).kill9().await;
    to = fires_on(clock::now_ms());
    recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;

    recorder.until_each_ran(JOBS, from, to, FIRES_ON).await;
    recorder.assert_each_ran_once(JOBS, from, to);
    let latest = recorder
        .runs()
        .iter()
        .filter(|r| (from..=to).contains(&r.fire_ms))
        .map(|r| r.start_ms - r.fire_ms)
        .max()
        .unwrap_or_default();
    tracing::warn!(
        latest_ms = latest,
        window_s = (to - from) / 1000 + 1,
        "the latest run of the window"
    );
    let late: Vec<(u64, i64, i64)> = recorder
        .runs()
        .iter()
        .filter(|r| (from..=to).contains(&r.fire_ms))
        .map(|r| (r.job_id, r.fire_ms, r.start_ms - r.fire_ms))
        .filter(|(_, _, late)| *late > LATENESS_BOUND_MS)
        .collect();
    assert!(
        late.is_empty(),
        "{} runs started more than {LATENESS_BOUND_MS} ms after their fire, e.g. {:?}",
        late.len(),
        &late[..late.len().min(5)]
    );
    cluster.stop().await;
}
