//! A 3-member ZooKeeper ensemble (`scripts/services-cluster.sh`) under a
//! cluster of two real scheduler processes, 20 jobs firing every second:
//! each member in turn is killed -9, the cluster fires on for a few
//! seconds, the member is restarted. Losing one member of three changes
//! nothing: the same leader with the same term throughout (so the member a
//! node's session was on — the leader's included, once in the three — was
//! left without a new election), and every fire the schedule says is due
//! runs exactly once.

use std::time::Duration;

use rondo_core::clock;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::topology::{self, MemberLock};
use rondo_testkit::{Cluster, World, eventually};
use serde_json::Value;

const JOBS: u64 = 20;

/// How long the cluster may take to fire on past a kill.
const FIRES_ON: Duration = Duration::from_secs(40);

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
    let first = cluster.api(a).every_second_jobs("ens", JOBS).await;
    let from = first + 2000;
    recorder.until_every_job_ran(JOBS, from, FIRES_ON).await;

    let mut to = from;
    for member in 1..=3u8 {
        let mode = topology::zk_mode(member).await;
        topology::kill_zk_member(member);
        let killed = clock::now_ms();
        // The cluster fires on: every job's fire three seconds on runs.
        to = (killed / 1000 + 4) * 1000;
        recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;
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
    recorder.assert_each_ran_once(JOBS, from, to);
    // And the term never moved (terms only grow: one check at the end
    // covers the whole run).
    let status = cluster.nodes[a].status().await.unwrap();
    assert_eq!(leader_of(&status), Some((leader, term)), "{status}");
    cluster.stop().await;
}
