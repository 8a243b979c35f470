//! A stale leader cannot move a fire.
//!
//! * `a_frozen_leader_steps_down_and_moves_nothing`: real processes; the
//!   leader is frozen (SIGSTOP) past its ZooKeeper session, another node
//!   takes over with a higher term, the old leader is thawed: it steps down,
//!   whatever claim it still attempts is refused by Redis, and no fire is
//!   lost or doubled.
//! * `a_refused_term_makes_the_leader_resign_and_come_back_higher`: the
//!   partitions' term is raised behind a leader's back (as a newer leader
//!   would): its next claim is refused, it resigns, and it leads again with
//!   a term above the one Redis accepts, so scheduling goes on.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::clock;
use rondo_tests::procs::{NodeProc, log_dir};
use rondo_tests::recorder::Recorder;
use rondo_tests::{Api, Env, eventually};
use serde_json::json;
use tokio_util::sync::CancellationToken;

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
    let mut env = Env::new("stale").await;
    env.config.zookeeper.session_timeout_ms = SESSION_MS;
    env.config.executor.app = "stale".into();
    let dir = log_dir(&env.config.namespace);
    let shutdown = CancellationToken::new();
    let recorder = Recorder::default();
    let (exec, queue) = recorder.start_executor(&env.config, "stale-1", shutdown.clone());
    let mut nodes = vec![
        NodeProc::spawn(&env.config, "a", &dir),
        NodeProc::spawn(&env.config, "b", &dir),
    ];
    let leader = eventually("a leader", Duration::from_secs(30), || async {
        let s = nodes[0].status().await?;
        let id = s["leader"]["node"].as_str()?.to_owned();
        (s["nodes"].as_array()?.len() == 2).then_some(id)
    })
    .await;
    let (old, other) = if leader == "a" { (0, 1) } else { (1, 0) };
    let first = create_jobs(&nodes[other].api(), "stale", 20).await;
    let from = first + 2000;
    tokio::time::sleep(Duration::from_millis(
        (from - clock::now_ms()).max(0) as u64 + 2000,
    ))
    .await;

    let old_term = nodes[old].status().await.unwrap()["role"]["term"]
        .as_u64()
        .unwrap();
    nodes[old].signal("STOP");
    let new_term = eventually("a new leader", Duration::from_secs(20), || async {
        let s = nodes[other].status().await?;
        let term = s["role"]["term"].as_u64()?;
        (s["role"]["leader"] == true && term > old_term).then_some(term)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    nodes[old].signal("CONT");
    eventually(
        "the old leader to step down",
        Duration::from_secs(20),
        || async {
            let s = nodes[old].status().await?;
            (s["role"]["leader"] == false && s["leader"]["node"] == nodes[other].id.as_str())
                .then_some(())
        },
    )
    .await;
    let to = clock::now_ms() + 3000;
    tokio::time::sleep(Duration::from_millis(6000)).await;

    let log = nodes[old].log_text();
    let refused = log.contains("claim refused");
    let noticed = log.contains("session state changed while leading")
        || log.contains("zookeeper session lost");
    eprintln!(
        "stale leader: term {old_term} → {new_term}; its claim refused by redis: {refused}; noticed its lost session: {noticed}"
    );
    assert!(
        refused || noticed,
        "the old leader neither was refused nor noticed; its log:\n{log}"
    );
    assert_exactly_once(&recorder, 20, from, to - to % 1000);

    for n in &mut nodes {
        let _ = n.terminate(Duration::from_secs(15)).await;
    }
    shutdown.cancel();
    let _ = exec.await;
    env.cleanup(&[queue]).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_term_makes_the_leader_resign_and_come_back_higher() {
    let mut env = Env::new("resign").await;
    env.config.executor.app = "resign".into();
    let shutdown = CancellationToken::new();
    let recorder = Recorder::default();
    let (exec, queue) = recorder.start_executor(&env.config, "resign-1", shutdown.clone());
    let node = rondo_scheduler::start(env.config.clone(), shutdown.clone())
        .await
        .expect("node");
    let api = Api::new(node.api_addr);
    let first = create_jobs(&api, "resign", 5).await;
    let term = eventually("leadership", Duration::from_secs(10), || async {
        let (_, s) = api.get("/api/v1/cluster").await;
        s["role"]["term"].as_u64()
    })
    .await;

    // A newer leader's fencing, behind this node's back.
    let fenced = term + 10;
    let names = env.config.names();
    let mut conn = rondo_core::redis::pool(&env.config.redis)
        .unwrap()
        .get()
        .await
        .unwrap();
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
    let from = clock::now_ms() + 2000 - clock::now_ms() % 1000;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(first < from);
    assert_exactly_once(&recorder, 5, from, from + 2000);

    shutdown.cancel();
    node.wait().await.expect("the node stops cleanly");
    let _ = exec.await;
    env.cleanup(&[queue]).await;
}
