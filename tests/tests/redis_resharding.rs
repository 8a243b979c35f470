//! A Redis Cluster resharding under load: the hash slot of partition 0 (its
//! due set, rings, in-flight records, job definitions and indexes) moves
//! from its master to another, key by key with pauses, as
//! `redis-cli --cluster reshard` moves slots, and back. Meanwhile clients
//! get `ASK` redirects for the keys already moved (and `TRYAGAIN` for a
//! command whose keys are split): 20 jobs firing every second lose no
//! fire and run none twice, and a job of that partition edited through
//! the API throughout is saved every time.

use std::time::Duration;

use reqwest::Method;
use rondo_core::clock;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::topology::{self, MemberLock};
use rondo_testkit::{Cluster, World};
use serde_json::json;

const JOBS: u64 = 20;

/// How long the cluster may take to fire on past the move.
const FIRES_ON: Duration = Duration::from_secs(60);

/// Between two keys moved: the slot stays split over many claim ticks and
/// edits (the slot holds a few dozen keys).
const PAUSE: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_moved_between_masters_under_load_loses_no_fire_and_no_edit() {
    let _members = tokio::task::spawn_blocking(MemberLock::acquire)
        .await
        .unwrap();
    let mut world = World::new("resharding").await;
    tokio::task::block_in_place(|| world.on_redis_cluster());
    world.config.executor.app = "rs".into();
    let names = world.config.names();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("rs-1", &recorder);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    topology::until_redis_whole().await;

    let first = api.every_second_jobs("rs", JOBS).await;
    // A job that does not fire, in partition 0, to edit during the move.
    let (status, body) = api.post("/api/v1/groups", json!({ "app": "idle" })).await;
    assert_eq!(status, 201, "{body}");
    let edited = loop {
        let spec = json!({ "group": "idle", "handler": "record", "schedule_type": "NONE" });
        let (status, job) = api.post("/api/v1/jobs", spec).await;
        assert_eq!(status, 201, "{job}");
        let id = job["id"].as_u64().expect("id");
        if names.partition_of(id) == 0 {
            break id;
        }
    };
    let from = first + 2000;
    recorder.until_every_job_ran(JOBS, from, FIRES_ON).await;

    let slot = topology::redis_slot_of(&names.due(0)).await;
    let home = topology::redis_master_of(&names.due(0))
        .await
        .expect("a master serves partition 0");
    let away = *topology::redis_masters()
        .await
        .iter()
        .find(|&&p| p != home)
        .expect("another master");
    let mut edits = 0;
    for target in [away, home] {
        let moving = tokio::spawn(topology::migrate_redis_slot(slot, target, PAUSE));
        while !moving.is_finished() {
            edits += 1;
            let description = format!("edit {edits}");
            let (status, job) = api
                .call(
                    Method::PUT,
                    &format!("/api/v1/jobs/{edited}"),
                    Some(json!({ "description": description })),
                )
                .await;
            assert_eq!(
                status, 200,
                "edit {edits} while the slot moves to {target}: {job}"
            );
            let (status, job) = api.get(&format!("/api/v1/jobs/{edited}")).await;
            assert_eq!(status, 200, "{job}");
            assert_eq!(job["description"], description, "the edit is there");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let moved = moving.await.expect("the slot moved");
        assert!(moved >= 5, "the partition's keys moved one by one: {moved}");
        assert_eq!(
            topology::redis_master_of(&names.due(0)).await,
            Some(target),
            "slot {slot} is on {target}"
        );
    }
    assert!(edits > 1, "edits ran while the slot was split: {edits}");
    let to = (clock::now_ms() / 1000 + 8) * 1000;
    recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;
    recorder.until_each_ran(JOBS, from, to, FIRES_ON).await;
    recorder.assert_each_ran_once(JOBS, from, to);
    cluster.stop().await;
}
