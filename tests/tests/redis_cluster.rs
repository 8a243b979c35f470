//! rondo on a Redis Cluster of three masters with a replica each
//! (`scripts/services-cluster.sh`): a scheduler node, an executor and the
//! persistence worker given the cluster's seed nodes. The API works as on
//! one Redis (groups, jobs spread over every partition, pages merged across
//! them, deletes), and 20 jobs firing every second lose no fire and run
//! none twice while the master of the executor registry and then the
//! master of a partition elsewhere is killed -9 (its replica is promoted)
//! and restarted. The executor lease keeps its default (2 s), shorter than
//! a failover: an executor that could not renew while its registry's
//! master was down must not be taken for gone.

use std::time::Duration;

use reqwest::Method;
use rondo_core::clock;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::topology::{self, MemberLock};
use rondo_testkit::{Api, Cluster, World};
use serde_json::json;

const JOBS: u64 = 20;

/// Longer than a failover (the node timeout, 3 s, an election, and the
/// client's reconnection).
const PREREAD_MS: i64 = 15_000;

/// How long the cluster may take to fire on past a kill (the failover
/// takes the node timeout, 3 s, and an election).
const FIRES_ON: Duration = Duration::from_secs(60);

/// The job list, page by page, as ids.
async fn listed(api: &Api, query: &str, limit: usize) -> (u64, Vec<u64>) {
    let mut ids = Vec::new();
    let mut total = 0;
    for offset in (0..).step_by(limit) {
        let (status, page) = api
            .get(&format!(
                "/api/v1/jobs?{query}&limit={limit}&offset={offset}"
            ))
            .await;
        assert_eq!(status, 200, "{page}");
        total = page["total"].as_u64().expect("total");
        let items = page["items"].as_array().expect("items");
        if items.is_empty() {
            break;
        }
        ids.extend(items.iter().map(|j| j["id"].as_u64().expect("id")));
    }
    (total, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_works_and_a_dead_master_loses_no_fire_on_a_redis_cluster() {
    let _members = tokio::task::spawn_blocking(MemberLock::acquire)
        .await
        .unwrap();
    let mut world = World::new("redis_cluster").await;
    tokio::task::block_in_place(|| world.on_redis_cluster());
    world.config.executor.app = "rc".into();
    // Claims run this far ahead: fires claimed before a master dies fire
    // from the rings once its replica serves (docs/operations.md, "Outgrowing one
    // machine": the preread outlasts a failover).
    world.config.scheduler.preread_ms = PREREAD_MS;
    let names = world.config.names();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("rc-1", &recorder);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    topology::until_redis_whole().await;

    // The API on the cluster: jobs of two groups, over every partition.
    let first = api.every_second_jobs("rc", JOBS).await;
    let (status, body) = api.post("/api/v1/groups", json!({ "app": "other" })).await;
    assert_eq!(status, 201, "{body}");
    let mut others = Vec::new();
    for d in 0..names.partitions() + 3 {
        let spec = json!({ "group": "other", "handler": "record", "description": format!("o{d}"),
            "schedule_type": "NONE" });
        let (status, job) = api.post("/api/v1/jobs", spec).await;
        assert_eq!(status, 201, "{job}");
        others.push(job["id"].as_u64().expect("id"));
    }
    let all: Vec<u64> = (1..=JOBS).chain(others.iter().copied()).collect();
    assert_eq!(
        listed(&api, "sort=id", 7).await,
        (all.len() as u64, all.clone())
    );
    let mut newest_first = all.clone();
    newest_first.reverse();
    assert_eq!(listed(&api, "sort=-id", 5).await.1, newest_first);
    assert_eq!(listed(&api, "group=other", 4).await.1, others);
    // A move to another group, a change and a delete, each in one place.
    let moved = others[0];
    let (status, job) = api
        .call(
            Method::PUT,
            &format!("/api/v1/jobs/{moved}"),
            Some(json!({ "group": "rc", "description": "moved" })),
        )
        .await;
    assert_eq!(status, 200, "{job}");
    let gone = others[1];
    let (status, body) = api
        .call(Method::DELETE, &format!("/api/v1/jobs/{gone}"), None)
        .await;
    assert!((200..300).contains(&status), "{status} {body}");
    let (status, _) = api.get(&format!("/api/v1/jobs/{gone}")).await;
    assert_eq!(status, 404);
    let rest: Vec<u64> = others[2..].to_vec();
    assert_eq!(
        listed(&api, "group=other", 3).await,
        (rest.len() as u64, rest)
    );
    let (_, rc) = listed(&api, "group=rc", 6).await;
    assert_eq!(rc, (1..=JOBS).chain([moved]).collect::<Vec<_>>());

    // Fires go on through a master's death, twice: first the registry's
    // (the executor cannot renew its lease for longer than the lease), then
    // another, found through the partitions.
    let from = first + 2000;
    recorder.until_every_job_ran(JOBS, from, FIRES_ON).await;
    let mut to = from;
    let mut killed_ports = Vec::new();
    let keys =
        std::iter::once(names.registry("rc")).chain((0..names.partitions()).map(|p| names.due(p)));
    for key in keys {
        if killed_ports.len() == 2 {
            break;
        }
        let master = topology::redis_master_of(&key)
            .await
            .expect("a master serves the key");
        if killed_ports.contains(&master) {
            continue;
        }
        topology::kill_redis_node(master);
        killed_ports.push(master);
        let killed = clock::now_ms();
        // Every job's fire eight seconds on runs: the replica took over.
        to = (killed / 1000 + 8) * 1000;
        recorder.until_every_job_ran(JOBS, to, FIRES_ON).await;
        tokio::task::block_in_place(topology::up);
        topology::until_redis_whole().await;
    }
    recorder.until_each_ran(JOBS, from, to, FIRES_ON).await;
    recorder.assert_each_ran_once(JOBS, from, to);
    cluster.stop().await;
}
