//! Executors that go away, on the real services: one killed with -9 stops
//! getting triggers within its liveness lease and loses none of the fires
//! routed to it meanwhile; one stopped with SIGTERM hands back what waits
//! for it at once, finishes its running trigger, and its queue goes (an
//! executor that comes back under the same id gets a fresh one).
//!
//! `a-exec` is a real `rondo-executor` process (built-in `demo` handler);
//! `b-exec` runs in-process with a `demo` handler that records every run.
//! Both are in group `loss`; FIRST routing picks `a-exec` while it is live.
//! A broker-side [`Witness`] sees every trigger sent to either.

use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::clock;
use rondo_core::dedupe::Mark;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::witness::Witness;
use rondo_testkit::{Api, Cluster, World, eventually, queue_depth, stats};
use serde_json::json;

/// A cluster of one node, the persistence worker, `b-exec` in-process and
/// `a-exec` as a process; returns it with its API, the recorder of
/// `b-exec`'s runs and a witness of both executors' triggers.
async fn cluster(tag: &str) -> (Cluster, Api, Recorder, Witness) {
    let mut world = World::new(tag).await;
    world.config.executor.app = "loss".into();
    world.config.monitor.scan_interval_ms = 500;
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_executor("b-exec", |b| recorder.register_as(b, "demo"));
    cluster.spawn_executor("a-exec");
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "loss" })).await.0,
        201
    );
    live_executors(&api, 2).await;
    let witness = Witness::bind(cluster.config(), &["a-exec", "b-exec"]).await;
    (cluster, api, recorder, witness)
}

async fn live_executors(api: &Api, n: usize) {
    eventually(
        "the executors to be live",
        Duration::from_secs(30),
        || async {
            let (_, live) = api.get("/api/v1/groups/loss/executors").await;
            (live.as_array()?.len() == n).then_some(())
        },
    )
    .await;
}

/// The `handle_code` of a trigger once its result is stored.
async fn stored_result(c: &Cluster, trigger_id: &str) -> i32 {
    eventually("the stored result", Duration::from_secs(20), || async {
        let row: Option<(Option<i32>,)> =
            sqlx::query_as("SELECT handle_code FROM job_log WHERE trigger_id = ?")
                .bind(trigger_id)
                .fetch_optional(c.db())
                .await
                .ok()?;
        row?.0
    })
    .await
}

fn next_second(ms: i64) -> i64 {
    (ms / 1000 + 1) * 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_executor_stops_getting_triggers_within_its_lease_and_loses_none() {
    let (mut c, api, recorder, witness) = cluster("exloss_kill").await;
    let lease = c.config().registry.lease_ms as i64;
    let id = api
        .create_job(
            json!({ "group": "loss", "handler": "demo", "schedule_type": "CRON",
                "schedule_conf": "* * * * * ?", "routing": "FIRST" }),
        )
        .await;
    eventually(
        "a-exec taking the fires",
        Duration::from_secs(20),
        || async {
            witness
                .sent()
                .iter()
                .any(|s| s.executor == "a-exec")
                .then_some(())
        },
    )
    .await;
    let killed_ms = clock::now_ms();
    c.kill_executor("a-exec").await;
    // The schedule says which fires are due from the kill on; the check
    // covers every one of them up to `last`.
    let first = next_second(killed_ms);
    let last = first + 6_000;
    recorder.until_fire(last, Duration::from_secs(30)).await;

    let sent = witness.sent();
    let to_dead = sent
        .iter()
        .filter(|s| s.executor == "a-exec")
        .map(|s| s.seen_ms)
        .max()
        .unwrap_or(killed_ms);
    let kept_ms = (to_dead - killed_ms).max(0);
    let runs = recorder.runs();
    let mut lateness = Vec::new();
    for fire in (first..=last).step_by(1000) {
        let ran: Vec<_> = runs
            .iter()
            .filter(|r| r.job_id == id && r.fire_ms == fire)
            .collect();
        assert_eq!(ran.len(), 1, "fire {fire} runs once, on b-exec: {ran:?}");
        assert_eq!(ran[0].executor, "b-exec");
        lateness.push(ran[0].start_ms - fire);
    }
    let (p50, p99, max) = stats::summary(&lateness);
    eprintln!(
        "executor kill -9: kept receiving triggers for {kept_ms} ms (lease {lease} ms); \
         lateness of the fires from the kill on: p50 {p50} ms, p99 {p99} ms, max {max} ms"
    );
    assert!(
        kept_ms <= lease + 1000,
        "routing stops within the lease (plus the routing cache and a renewal): {kept_ms} ms"
    );
    assert!(
        max <= lease + 2000,
        "the fires it got were moved within the lease plus 2 s: {lateness:?}"
    );
    assert_eq!(witness.undecodable(), 0);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_executor_hands_back_its_waiting_triggers_at_once_and_its_queue_goes() {
    let (mut c, api, recorder, witness) = cluster("exloss_stop").await;
    let names = c.config().names();
    // SERIAL: the first trigger runs three seconds, the others wait for it
    // on a-exec.
    let id = api
        .create_job(
            json!({ "group": "loss", "handler": "demo", "params": "3000", "routing": "FIRST" }),
        )
        .await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(api.trigger_now(id).await);
    }
    let pool = rondo_core::redis::pool(&c.config().redis).unwrap();
    eventually("the first trigger running on a-exec", Duration::from_secs(20), || async {
        let mark: Option<String> = pool.get().await.ok()?.get(names.dedupe("loss", &ids[0])).await.ok()?;
        matches!(Mark::parse(&mark?), Some(Mark::Running { executor, .. }) if executor == "a-exec")
            .then_some(())
    })
    .await;
    assert!(
        witness
            .sent()
            .iter()
            .filter(|s| s.executor == "a-exec")
            .count()
            >= 4
    );

    let stopped_ms = clock::now_ms();
    let exit = c
        .terminate_executor("a-exec", Duration::from_secs(20))
        .await;
    assert!(
        exit.is_some_and(|s| s.success()),
        "a-exec exits 0 in its grace: {exit:?}"
    );

    // The running trigger finished where it ran.
    assert_eq!(stored_result(&c, &ids[0]).await, 200);
    let first_end = stopped_ms + 3_000;
    // The waiting ones were handed back and ran on b-exec, without waiting
    // for a-exec's run to end.
    for waiting in &ids[1..] {
        let run = eventually(
            "the handed-back trigger on b-exec",
            Duration::from_secs(20),
            || async {
                recorder
                    .runs()
                    .into_iter()
                    .find(|r| &r.trigger_id == waiting)
            },
        )
        .await;
        assert_eq!(run.executor, "b-exec");
        eprintln!(
            "executor SIGTERM: waiting trigger {waiting} ran on b-exec {} ms after the stop",
            run.start_ms - stopped_ms
        );
        assert!(
            run.start_ms < first_end,
            "handed back at once, not after a-exec's run ended: {} ms after the stop",
            run.start_ms - stopped_ms
        );
    }
    for waiting in &ids[1..] {
        assert_eq!(stored_result(&c, waiting).await, 200);
    }

    // The executor left: the leader deletes its queue and drops it.
    let queue = names.executor_queue("loss", "a-exec");
    eventually(
        "a-exec's queue and entry to go",
        Duration::from_secs(20),
        || async {
            let queue_gone = queue_depth(c.config(), &queue).await.is_none();
            let entry: Option<f64> = pool
                .get()
                .await
                .ok()?
                .zscore(names.registry("loss"), "a-exec")
                .await
                .ok()?;
            (queue_gone && entry.is_none()).then_some(())
        },
    )
    .await;

    // Back under the same id: a fresh queue, and FIRST picks it again.
    c.spawn_executor("a-exec");
    live_executors(&api, 2).await;
    let again = api.trigger_now(id).await;
    assert_eq!(stored_result(&c, &again).await, 200);
    let sent_to: Vec<String> = witness
        .sent()
        .into_iter()
        .filter(|s| s.trigger_id == again)
        .map(|s| s.executor)
        .collect();
    assert_eq!(sent_to, ["a-exec"]);
    c.stop().await;
}
