//! A 3-member ZooKeeper ensemble (`scripts/services-cluster.sh`) under a
//! cluster of two real scheduler processes, 20 jobs firing every second:
//! each member in turn is killed -9, the cluster fires on for a few
//! seconds, the member is restarted. Losing one member of three changes
//! nothing: the same leader with the same term throughout (so the member a
//! node's session was on — the leader's included, once in the three — was
//! left without a new election), and every fire the schedule says is due
//! runs exactly once.

use std::collections::HashMap;
use std::time::Duration;

use rondo_core::clock;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::topology::{self, MemberLock};
use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::{Value, json};

const JOBS: u64 = 20;

async fn create_jobs(api: &Api, app: &str) -> i64 {
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": app })).await.0,
        201
    );
    eventually("the executor", Duration::from_secs(20), || async {
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
        Duration::from_secs(40),
        || async {
            let runs = recorder.runs();
            (1..=JOBS)
                .all(|job| runs.iter().any(|r| r.job_id == job && r.fire_ms == at))
                .then_some(())
        },
    )
    .await;
}

/// (leader node, term) as node `status` says, once it names a leader.
fn leader_of(status: &Value) -> Option<(String, u64)> {
    Some((
        status["leader"]["node"].as_str()?.to_owned(),
        status["leader"]["term"].as_u64()?,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_any_one_zookeeper_member_changes_no_leader_and_loses_no_fire() {
    let _members = tokio::task::spawn_blocking(MemberLock::acquire)
        .await
        .unwrap();
    let mut world = World::new("zk_ensemble").await;
    tokio::task::block_in_place(|| world.on_zk_ensemble());
    world.config.executor.app = "ens".into();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("ens-1", &recorder);
    let a = cluster.spawn_node("a");
    let b = cluster.spawn_node("b");
    let (leader, term) = eventually(
        "a leader both nodes see",
        Duration::from_secs(40),
        || async {
            let sa = cluster.nodes[a].status().await?;
            let sb = cluster.nodes[b].status().await?;
            let seen = leader_of(&sa)?;
            (sa["nodes"].as_array()?.len() == 2 && leader_of(&sb)? == seen).then_some(seen)
        },
    )
    .await;
    let first = create_jobs(&cluster.api(a), "ens").await;
    let from = first + 2000;
    wait_for_fire(&recorder, from).await;

    let mut to = from;
    for member in 1..=3u8 {
        let mode = topology::zk_mode(member).await;
        topology::kill_zk_member(member);
        let killed = clock::now_ms();
        // The cluster fires on: every job's fire three seconds on runs.
        to = (killed / 1000 + 4) * 1000;
        wait_for_fire(&recorder, to).await;
        for node in [a, b] {
            let status = cluster.nodes[node]
                .status()
                .await
                .expect("the node answers");
            assert_eq!(
                leader_of(&status),
                Some((leader.clone(), term)),
                "member {member} ({mode:?}) killed: the same leader and term on node {node}: {status}"
            );
        }
        tokio::task::block_in_place(topology::up);
        eventually("the member back", Duration::from_secs(60), || async {
            topology::zk_mode(member).await
        })
        .await;
    }

    // Every fire from `from` to `to`, exactly once.
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
    // And the term never moved (terms only grow: one check at the end
    // covers the whole run).
    let status = cluster.nodes[a].status().await.unwrap();
    assert_eq!(leader_of(&status), Some((leader, term)), "{status}");
    cluster.stop().await;
}
