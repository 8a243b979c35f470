//! A stale leader cannot move a fire.
//!
//! * `a_frozen_leader_steps_down_and_moves_nothing`: real processes; the
//!   leader is frozen (SIGSTOP) past its ZooKeeper session, another node
//!   takes over with a higher term, the old leader is thawed: it steps down,
//!   every partition still accepts only the new term (whatever the old one
//!   still attempts is refused by Redis), and no fire is lost or doubled.
//! * `a_refused_term_makes_the_leader_resign_and_come_back_higher`: the
//!   partitions' term is raised behind a leader's back (as a newer leader
//!   would): its next claim is refused, it resigns, and it leads again with
//!   a term above the one Redis accepts, so scheduling goes on.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::clock;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::json;

const SESSION_MS: u64 = 2000;

async fn create_jobs(api: &Api, app: &str, n: usize) -> i64 {
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": app })).await.0,
        201
    );
    eventually("the executor", Duration::from_secs(10), || async {
        let (_, live) = api.get(&format!("/api/v1/groups/{app}/executors")).await;
        (!live.as_array()?.is_empty()).then_some(())
    })
    .await;
    let mut first = 0;
    for _ in 0..n {
        let spec = json!({ "group": app, "handler": "record", "schedule_type": "CRON", "schedule_conf": "* * * * * ?" });
        let (status, job) = api.post("/api/v1/jobs", spec).await;
        assert_eq!(status, 201, "{job}");
        first = first.max(job["next_fire_ms"].as_i64().unwrap());
    }
    first
}

/// Waits until every job ran its fire at `at`: the positive signal that
/// scheduling moved past it.
async fn wait_for_fire(recorder: &Recorder, jobs: usize, at: i64) {
    eventually(
        "every job's fire to run",
        Duration::from_secs(30),
        || async {
            let runs = recorder.runs();
            (1..=jobs as u64)
                .all(|job| runs.iter().any(|r| r.job_id == job && r.fire_ms == at))
                .then_some(())
        },
    )
    .await;
}

async fn redis_conn(cluster: &Cluster) -> rondo_core::redis::Connection {
    rondo_core::redis::pool(&cluster.config().redis)
        .unwrap()
        .get()
        .await
        .unwrap()
}

/// Every job ran every second of [from, to] exactly once.
fn assert_exactly_once(recorder: &Recorder, jobs: usize, from: i64, to: i64) {
    let mut per_fire: HashMap<(u64, i64), usize> = HashMap::new();
    for r in recorder.runs() {
        *per_fire.entry((r.job_id, r.fire_ms)).or_default() += 1;
    }
    for job in 1..=jobs as u64 {
        for fire in (from..=to).step_by(1000) {
            assert_eq!(
                per_fire.get(&(job, fire)),
                Some(&1),
                "job {job} fire {fire}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_leader_steps_down_and_moves_nothing() {
    let mut world = World::new("stale").await;
    world.config.zookeeper.session_timeout_ms = SESSION_MS;
    world.config.executor.app = "stale".into();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("stale-1", &recorder);
    let a = cluster.spawn_node("a");
    let b = cluster.spawn_node("b");
    let leader = eventually("a leader", Duration::from_secs(30), || async {
        let s = cluster.nodes[a].status().await?;
        let id = s["leader"]["node"].as_str()?.to_owned();
        (s["nodes"].as_array()?.len() == 2).then_some(id)
    })
    .await;
    let (old, other) = if leader == "a" { (a, b) } else { (b, a) };
    let first = create_jobs(&cluster.api(other), "stale", 20).await;
    let from = first + 2000;
    wait_for_fire(&recorder, 20, from + 2000).await;

    let old_term = cluster.nodes[old].status().await.unwrap()["role"]["term"]
        .as_u64()
        .unwrap();
    cluster.node_proc(old).signal("STOP");
    let new_term = eventually("a new leader", Duration::from_secs(20), || async {
        let s = cluster.nodes[other].status().await?;
        let term = s["role"]["term"].as_u64()?;
        (s["role"]["leader"] == true && term > old_term).then_some(term)
    })
    .await;
    // The new leader claims while the old one is still frozen.
    let took_over = clock::now_ms();
    eventually(
        "the new leader's first claim",
        Duration::from_secs(20),
        || async {
            let s = cluster.nodes[other].status().await?;
            (s["last_claim_ms"].as_i64()? > took_over).then_some(())
        },
    )
    .await;
    cluster.node_proc(old).signal("CONT");
    let old_status = eventually(
        "the old leader to step down",
        Duration::from_secs(20),
        || async {
            let s = cluster.nodes[old].status().await?;
            (s["role"]["leader"] == false && s["leader"]["node"] == cluster.nodes[other].id())
                .then_some(s)
        },
    )
    .await;
    assert_eq!(old_status["role"]["leader"], false);
    // The fence held: every partition accepts the new term, none an older.
    let names = cluster.config().names();
    let mut conn = redis_conn(&cluster).await;
    for p in 0..names.partitions() {
        let accepted: u64 = conn.get(names.term(p)).await.unwrap();
        assert!(
            accepted >= new_term,
            "partition {p} accepts term {accepted} < {new_term}"
        );
    }
    eprintln!("stale leader: term {old_term} → {new_term}; the old leader stepped down");
    let to = clock::now_ms() + 3000;
    let to = to - to % 1000;
    // Scheduling moved on two seconds past the checked window.
    wait_for_fire(&recorder, 20, to + 2000).await;
    assert_exactly_once(&recorder, 20, from, to);

    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_term_makes_the_leader_resign_and_come_back_higher() {
    let mut world = World::new("resign").await;
    world.config.executor.app = "resign".into();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("resign-1", &recorder);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let first = create_jobs(&api, "resign", 5).await;
    let term = eventually("leadership", Duration::from_secs(10), || async {
        let (_, s) = api.get("/api/v1/cluster").await;
        s["role"]["term"].as_u64()
    })
    .await;

    // A newer leader's fencing, behind this node's back.
    let fenced = term + 10;
    let names = cluster.config().names();
    let mut conn = redis_conn(&cluster).await;
    for p in 0..names.partitions() {
        let _: () = conn.set(names.term(p), fenced).await.unwrap();
    }
    let raised_at = clock::now_ms();
    let new_term = eventually(
        "leading again above the fence",
        Duration::from_secs(15),
        || async {
            let (_, s) = api.get("/api/v1/cluster").await;
            let t = s["role"]["term"].as_u64()?;
            (t > fenced && s["last_claim_ms"].as_i64()? > raised_at).then_some(t)
        },
    )
    .await;
    eprintln!(
        "refused term {term}, partitions fenced at {fenced}, leading again with term {new_term}"
    );

    // Scheduling went on: every second after the episode ran once.
    let now = clock::now_ms();
    let from = now + 2000 - now % 1000;
    wait_for_fire(&recorder, 5, from + 4000).await;
    assert!(first < from);
    assert_exactly_once(&recorder, 5, from, from + 2000);

    cluster.stop().await;
}
