//! Chaos on a cluster of real `rondo-scheduler` processes: 200 jobs firing
//! every second for 60 s while the leader is killed with -9, then a
//! follower, a replacement node joins, a node is frozen (SIGSTOP) past its
//! ZooKeeper session and thawed, and a node leaves gracefully (SIGTERM).
//! Every scheduled second of every job must run exactly once; only fires
//! inside a disruption and later than the misfire threshold may be skipped
//! (the jobs use DO_NOTHING). Prints lost / duplicate / late counts and the
//! time from each kill to the next successful claim.

use std::collections::HashMap;
use std::time::Duration;

use rondo_core::clock;
use rondo_testkit::cluster::Node;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::{Cluster, World, eventually, stats};
use serde_json::{Value, json};

const JOBS: usize = 200;
const WINDOW_S: i64 = 60;
const SESSION_MS: u64 = 2000;
const MISFIRE_MS: i64 = 5000;

fn is_leader(status: &Value) -> bool {
    status["role"]["leader"] == true
}

/// The nodes still running (not killed or terminated), with their indexes.
fn live(nodes: &[Node]) -> impl Iterator<Item = (usize, &Node)> {
    nodes.iter().enumerate().filter(|(_, n)| n.is_running())
}

/// Waits for a live node that leads with a term above `old_term` and has
/// claimed after `since_ms`; returns (node index, term, claim time).
async fn next_claim(nodes: &[Node], old_term: u64, since_ms: i64) -> (usize, u64, i64) {
    eventually("a leader that claims", Duration::from_secs(20), || async {
        for (i, n) in live(nodes) {
            let Some(s) = n.status().await else { continue };
            let term = s["role"]["term"].as_u64().unwrap_or(0);
            let claimed = s["last_claim_ms"].as_i64().unwrap_or(0);
            if is_leader(&s) && term >= old_term && claimed > since_ms {
                return Some((i, term, claimed));
            }
        }
        None
    })
    .await
}

async fn sleep_until(ms: i64) {
    let wait = ms - clock::now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

/// Index of a live node that is not the leader (and not `except`); waits
/// for one to answer (a busy machine may be slow to).
async fn a_follower(nodes: &[Node], except: Option<usize>) -> usize {
    eventually("a live follower", Duration::from_secs(20), || async {
        for (i, n) in live(nodes) {
            if Some(i) == except {
                continue;
            }
            if n.status()
                .await
                .is_some_and(|s| s["role"]["leader"] == false)
            {
                return Some(i);
            }
        }
        None
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kills_stops_and_restarts_lose_no_fire_and_double_none() {
    let mut world = World::new("chaos").await;
    world.config.zookeeper.session_timeout_ms = SESSION_MS;
    world.config.scheduler.misfire_threshold_ms = MISFIRE_MS;
    world.config.executor.app = "chaos".into();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("chaos-1", &recorder);
    cluster.start_recording_executor("chaos-2", &recorder);

    for id in ["n1", "n2", "n3"] {
        cluster.spawn_node(id);
    }
    let api = cluster.api(0);
    eventually(
        "three nodes and a leader",
        Duration::from_secs(30),
        || async {
            let s = cluster.nodes[0].status().await?;
            (s["nodes"].as_array()?.len() == 3 && s["leader"]["term"].as_u64().is_some())
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "chaos" }))
            .await
            .0,
        201
    );
    eventually("two executors", Duration::from_secs(10), || async {
        let (_, live) = api.get("/api/v1/groups/chaos/executors").await;
        (live.as_array()?.len() == 2).then_some(())
    })
    .await;
    let mut first_fire = 0;
    for _ in 0..JOBS {
        let spec = json!({ "group": "chaos", "handler": "record", "schedule_type": "CRON",
                           "schedule_conf": "* * * * * ?", "routing": "ROUND", "misfire": "DO_NOTHING" });
        let (status, job) = api.post("/api/v1/jobs", spec).await;
        assert_eq!(status, 201, "{job}");
        first_fire = first_fire.max(job["next_fire_ms"].as_i64().unwrap());
    }
    let w0 = first_fire + 1000;
    let w1 = w0 + (WINDOW_S - 1) * 1000;
    let mut disruptions: Vec<(String, i64)> = Vec::new();
    let mut claims_after_kill: Vec<(String, i64)> = Vec::new();

    // 1. kill -9 the leader.
    sleep_until(w0 + 8_000).await;
    let (leader, term, _) = next_claim(&cluster.nodes, 0, 0).await;
    let t = clock::now_ms();
    cluster.node_proc(leader).kill9().await;
    let killed = cluster.nodes[leader].id().to_owned();
    disruptions.push((format!("kill -9 leader {killed}"), t));
    let (_, new_term, claimed) = next_claim(&cluster.nodes, term + 1, t).await;
    assert!(new_term > term);
    claims_after_kill.push((
        format!("kill -9 leader {killed} → first claim of term {new_term}"),
        claimed - t,
    ));

    // 2. kill -9 a follower.
    sleep_until(w0 + 20_000).await;
    let follower = a_follower(&cluster.nodes, None).await;
    let t = clock::now_ms();
    cluster.node_proc(follower).kill9().await;
    let killed = cluster.nodes[follower].id().to_owned();
    disruptions.push((format!("kill -9 follower {killed}"), t));
    let (_, _, claimed) = next_claim(&cluster.nodes, new_term, t).await;
    claims_after_kill.push((
        format!("kill -9 follower {killed} → next claim"),
        claimed - t,
    ));

    // 3. A replacement node joins.
    sleep_until(w0 + 28_000).await;
    cluster.spawn_node("n4");

    // 4. Freeze a follower past its session, then thaw it.
    sleep_until(w0 + 38_000).await;
    let frozen = a_follower(&cluster.nodes, None).await;
    let t = clock::now_ms();
    cluster.node_proc(frozen).signal("STOP");
    disruptions.push((format!("SIGSTOP {}", cluster.nodes[frozen].id()), t));
    tokio::time::sleep(Duration::from_millis(SESSION_MS * 5 / 2)).await;
    cluster.node_proc(frozen).signal("CONT");

    // 5. A follower leaves gracefully.
    sleep_until(w0 + 50_000).await;
    let leaving = a_follower(&cluster.nodes, None).await;
    let t = clock::now_ms();
    disruptions.push((format!("SIGTERM {}", cluster.nodes[leaving].id()), t));
    let status = cluster
        .node_proc(leaving)
        .terminate(Duration::from_secs(15))
        .await;
    assert!(
        status.is_some_and(|s| s.success()),
        "a SIGTERM'd node exits 0 within its grace: {status:?}"
    );
    let left_after = clock::now_ms() - t;

    // Let the window's last fires run.
    sleep_until(w1 + 5_000).await;
    let runs = recorder.runs();
    let mut per_fire: HashMap<(u64, i64), usize> = HashMap::new();
    for r in &runs {
        *per_fire.entry((r.job_id, r.fire_ms)).or_default() += 1;
    }
    let in_window = |fire: i64| (w0..=w1).contains(&fire);
    let duplicates: Vec<_> = per_fire
        .iter()
        .filter(|((_, f), n)| in_window(*f) && **n > 1)
        .collect();
    let mut lost = Vec::new();
    for job in 1..=JOBS as u64 {
        for fire in (w0..=w1).step_by(1000) {
            if !per_fire.contains_key(&(job, fire)) {
                lost.push((job, fire));
            }
        }
    }
    // A missing fire is the misfire rule at work only if it fell inside a
    // disruption: within a session timeout plus the misfire threshold of it.
    let excused = |fire: i64| {
        disruptions
            .iter()
            .any(|(_, t)| fire >= t - 1000 && fire <= t + SESSION_MS as i64 * 3 + MISFIRE_MS)
    };
    let unexcused: Vec<_> = lost.iter().filter(|(_, f)| !excused(*f)).collect();
    let lateness: Vec<i64> = runs
        .iter()
        .filter(|r| in_window(r.fire_ms))
        .map(|r| r.start_ms - r.fire_ms)
        .collect();
    let late = lateness.iter().filter(|l| **l > 1000).count();
    let (p50, p99, max) = stats::summary(&lateness);

    eprintln!(
        "chaos: {JOBS} jobs × {WINDOW_S} s = {} expected fires, {} runs in the window",
        JOBS as i64 * WINDOW_S,
        lateness.len()
    );
    for (what, t) in &disruptions {
        eprintln!("  {what} at +{} ms", t - w0);
    }
    for (what, ms) in &claims_after_kill {
        eprintln!("  {what}: {ms} ms");
    }
    eprintln!("  graceful leave took {left_after} ms");
    eprintln!(
        "  lost {} (misfire, inside a disruption: {}), duplicates {}, late > 1 s {late}",
        lost.len(),
        lost.len() - unexcused.len(),
        duplicates.len()
    );
    eprintln!("  handler-start lateness: p50 {p50} ms, p99 {p99} ms, max {max} ms");

    assert!(
        duplicates.is_empty(),
        "fires run more than once: {:?}",
        &duplicates[..duplicates.len().min(10)]
    );
    assert!(
        unexcused.is_empty(),
        "fires lost outside any disruption: {:?}",
        &unexcused[..unexcused.len().min(10)]
    );

    cluster.stop().await;
}
