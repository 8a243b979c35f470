//! The result monitor on the real services: retries with their count and
//! backoff, child jobs, lost triggers, an offline executor's queued triggers
//! routed again, kill, and alarms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::{TriggerBatch, TriggerType, amqp, clock};
use rondo_executor::{ExecutorBuilder, JobContext, JobError};
use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::{Value, json};

/// (trigger id, trigger type, retry count, executor, start ms)
type Seen = Arc<Mutex<Vec<(String, TriggerType, u32, String, i64)>>>;

/// The handlers of an executor that record every run in `seen`: `ok` and
/// `demo` succeed, `fail` fails, `hang` waits until cancelled.
fn handlers(builder: ExecutorBuilder, seen: &Seen) -> ExecutorBuilder {
    let record = |seen: Seen| {
        move |ctx: &JobContext| {
            let entry = (
                ctx.trigger_id().to_owned(),
                ctx.trigger_type(),
                ctx.retry_count(),
                ctx.executor_id().to_owned(),
                clock::now_ms(),
            );
            seen.lock().unwrap().push(entry);
        }
    };
    let (r1, r2, r3, r4) = (
        record(seen.clone()),
        record(seen.clone()),
        record(seen.clone()),
        record(seen.clone()),
    );
    builder
        .handler("ok", move |ctx: JobContext| {
            r1(&ctx);
            async { Ok::<(), JobError>(()) }
        })
        .handler("demo", move |ctx: JobContext| {
            r4(&ctx);
            async { Ok::<(), JobError>(()) }
        })
        .handler("fail", move |ctx: JobContext| {
            r2(&ctx);
            async { Err::<(), JobError>(JobError::fail("always fails")) }
        })
        .handler("hang", move |ctx: JobContext| {
            r3(&ctx);
            async move {
                ctx.cancelled().await;
                Err::<(), JobError>(JobError::fail("cancelled"))
            }
        })
}

/// The handle side of a trigger's log row, once the persistence worker has
/// stored a result for it.
async fn stored_result(c: &Mon, trigger_id: &str, what: &str) -> (Option<i32>, Option<String>) {
    eventually(what, Duration::from_secs(15), || async {
        let row: Option<(Option<i32>, Option<String>)> =
            sqlx::query_as("SELECT handle_code, handle_msg FROM job_log WHERE trigger_id = ?")
                .bind(trigger_id)
                .fetch_optional(c.cluster.db())
                .await
                .ok()?;
        row.filter(|r| r.0.is_some())
    })
    .await
}

/// The positive signal that the monitor is done with a trigger's ending:
/// its `handled` mark is set (after any retry was queued and any child
/// dispatched), and no retry of the test's jobs is waiting for its backoff.
async fn reacted_with_nothing_pending(c: &Mon, trigger_id: &str) {
    let mut config = c.cluster.config().clone();
    // `KEYS`, which no process's user may run.
    config.redis.url = c.cluster.world.redis_admin_url();
    eventually("the monitor's reaction", Duration::from_secs(20), || {
        let config = config.clone();
        async move {
            let names = config.names();
            let pool = rondo_core::redis::pool(&config.redis).ok()?;
            let mut redis = pool.get().await.ok()?;
            let handled = handled_set(&mut redis, &names, trigger_id)
                .await
                .ok()?
                .is_some();
            let mut waiting = 0;
            for p in 0..names.partitions() {
                let n: usize = redis.zcard(names.retry(p)).await.ok()?;
                waiting += n;
            }
            (handled && waiting == 0).then_some(())
        }
    })
    .await;
}

/// The handled set that holds `trigger_id`'s mark, if any. The mark is in
/// its partition's set of the minute of its fire, which a manual trigger's
/// id does not tell: every minute's set is looked at.
async fn handled_set(
    redis: &mut rondo_core::redis::Connection,
    names: &rondo_core::Names,
    trigger_id: &str,
) -> redis::RedisResult<Option<String>> {
    let sets: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*:handled:*", names.namespace()))
        .query_async(redis)
        .await?;
    for set in sets {
        if redis.sismember(&set, trigger_id).await? {
            return Ok(Some(set));
        }
    }
    Ok(None)
}

fn runs_of(seen: &Seen, prefix: &str) -> Vec<(String, TriggerType, u32, String, i64)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|r| r.0.starts_with(prefix))
        .cloned()
        .collect()
}

/// A monitor test's cluster: executors of group `mon` with the recording
/// handlers, the persistence worker and a node, and what the handlers saw.
struct Mon {
    cluster: Cluster,
    api: Api,
    seen: Seen,
}

async fn cluster(tag: &str, executors: &[&str], tune: impl FnOnce(&mut rondo_core::Config)) -> Mon {
    let mut world = World::new(tag).await;
    world.config.executor.app = "mon".into();
    world.config.monitor.scan_interval_ms = 500;
    tune(&mut world.config);
    let mut cluster = Cluster::new(world);
    let seen: Seen = Arc::default();
    for id in executors {
        cluster.start_executor(id, |b| handlers(b, &seen));
    }
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "mon" })).await.0,
        201
    );
    let want = executors.len();
    eventually("executors", Duration::from_secs(10), || async {
        let (_, live) = api.get("/api/v1/groups/mon/executors").await;
        (live.as_array()?.len() == want).then_some(())
    })
    .await;
    Mon { cluster, api, seen }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failures_are_retried_with_their_count_and_backoff() {
    let c = cluster("retry", &["mon-1"], |_| {}).await;
    let id = c
        .api
        .create_job(
            json!({ "group": "mon", "handler": "fail", "retries": 2, "retry_backoff_s": 1 }),
        )
        .await;
    let first = c.api.trigger_now(id).await;
    let runs = eventually("three runs", Duration::from_secs(20), || async {
        let runs = runs_of(&c.seen, &format!("{id}-"));
        (runs.len() >= 3).then_some(runs)
    })
    .await;
    // Its backoff (1 s) keeps a retry in the retry set long enough to be
    // seen there, had one been decided.
    reacted_with_nothing_pending(&c, &format!("{first}-retry2")).await;
    let runs_after = runs_of(&c.seen, &format!("{id}-"));
    assert_eq!(
        runs_after.len(),
        3,
        "no retry after the retries ran out: {runs_after:?}"
    );
    assert_eq!(runs[0].0, first);
    assert_eq!(
        (runs[1].0.clone(), runs[1].1, runs[1].2),
        (format!("{first}-retry1"), TriggerType::Retry, 1)
    );
    assert_eq!(
        (runs[2].0.clone(), runs[2].1, runs[2].2),
        (format!("{first}-retry2"), TriggerType::Retry, 2)
    );
    for pair in runs.windows(2) {
        assert!(
            pair[1].4 - pair[0].4 >= 1000,
            "backoff of 1 s between runs: {runs:?}"
        );
    }
    c.cluster.stop().await;
}

/// A node process keeps a handled mark `monitor.handled_ttl_s`, as its
/// configuration says: what every fire leaves in Redis is the operator's to
/// size.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_keeps_handled_marks_as_long_as_configured() {
    const TTL_S: i64 = 7_200;
    let c = cluster("handledttl", &["mon-1"], |config| {
        config.monitor.handled_ttl_s = TTL_S as u64;
    })
    .await;
    let job = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok" }))
        .await;
    let trigger = c.api.trigger_now(job).await;
    reacted_with_nothing_pending(&c, &trigger).await;
    let mut config = c.cluster.config().clone();
    config.redis.url = c.cluster.world.redis_admin_url();
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    let mut redis = pool.get().await.unwrap();
    let set = handled_set(&mut redis, &config.names(), &trigger)
        .await
        .unwrap()
        .expect("the trigger's handled mark");
    let ttl: i64 = redis.ttl(&set).await.unwrap();
    assert!(
        (TTL_S - 60..=TTL_S).contains(&ttl),
        "{set} expires in {ttl} s, configured {TTL_S} s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_success_triggers_the_child_jobs() {
    let c = cluster("child", &["mon-1"], |_| {}).await;
    let child = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok" }))
        .await;
    let parent = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok", "child_jobs": [child] }))
        .await;
    let failing_parent = c
        .api
        .create_job(json!({ "group": "mon", "handler": "fail", "child_jobs": [child] }))
        .await;
    let parent_trigger = c.api.trigger_now(parent).await;
    let child_runs = eventually("the child run", Duration::from_secs(15), || async {
        let runs = runs_of(&c.seen, &format!("{child}-"));
        (!runs.is_empty()).then_some(runs)
    })
    .await;
    assert_eq!(
        child_runs[0].0,
        rondo_core::trigger_id::child(child, &parent_trigger)
    );
    assert_eq!(child_runs[0].1, TriggerType::Parent);
    // The child fires at its parent's end, as the parent's result says...
    let child_id = child_runs[0].0.clone();
    let (parent_log, child_log) = eventually(
        "the parent's and the child's log rows",
        Duration::from_secs(15),
        || async {
            let (_, parent) = c.api.get(&format!("/api/v1/logs/{parent_trigger}")).await;
            let (_, child) = c.api.get(&format!("/api/v1/logs/{child_id}")).await;
            parent["log"]["handle_ms"].as_i64()?;
            child["log"]["trigger_ms"].as_i64()?;
            Some((parent["log"].clone(), child["log"].clone()))
        },
    )
    .await;
    assert_eq!(child_log["fire_ms"], parent_log["handle_ms"]);
    // ... so the parent's result handled again (redelivered after the
    // monitor stopped before its handled mark) dispatches the same trigger
    // at the same instant: its event updates the child's one row.
    let config = c.cluster.config().clone();
    let names = config.names();
    let parent_fire = parent_log["fire_ms"].as_i64().unwrap();
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    let mut redis = pool.get().await.unwrap();
    let mark = names.handled(names.partition_of(parent), parent_fire);
    let removed: u32 = redis.srem(&mark, &parent_trigger).await.unwrap();
    assert_eq!(removed, 1, "the parent's handled mark");
    let again = rondo_core::Event::Result(rondo_core::ExecResult {
        trigger_id: parent_trigger.clone(),
        job_id: parent,
        executor_id: parent_log["executor_id"].as_str().unwrap().to_owned(),
        fire_ms: parent_fire,
        start_ms: parent_log["handle_start_ms"].as_i64().unwrap(),
        end_ms: parent_log["handle_ms"].as_i64().unwrap(),
        code: rondo_core::trigger::code::SUCCESS,
        msg: String::new(),
        retryable: true,
    });
    let body = serde_json::to_vec(&[again]).unwrap();
    rondo_testkit::publish_raw_event(&config.amqp.url, &config, "result.success", &body).await;
    let first_sent = child_log["trigger_ms"].as_i64().unwrap();
    eventually(
        "the child's row updated by its second dispatch",
        Duration::from_secs(15),
        || async {
            let (_, child) = c.api.get(&format!("/api/v1/logs/{child_id}")).await;
            (child["log"]["trigger_ms"].as_i64()? > first_sent).then_some(())
        },
    )
    .await;
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_log WHERE trigger_id = ?")
        .bind(&child_id)
        .fetch_one(c.cluster.db())
        .await
        .unwrap();
    assert_eq!(rows, 1, "one row for the child's trigger");
    let failed = c.api.trigger_now(failing_parent).await;
    reacted_with_nothing_pending(&c, &failed).await;
    // A child of the failed parent would have been dispatched before its
    // handled mark, so before this second parent's child, on the same
    // executor queue: once that one ran, the other would have too.
    let second = c.api.trigger_now(parent).await;
    let second_child = rondo_core::trigger_id::child(child, &second);
    eventually(
        "the second parent's child",
        Duration::from_secs(15),
        || async { (!runs_of(&c.seen, &second_child).is_empty()).then_some(()) },
    )
    .await;
    assert_eq!(
        runs_of(&c.seen, &format!("{child}-")).len(),
        2,
        "a failed parent triggers no child"
    );
    c.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_cancels_the_run_and_is_not_retried() {
    let c = cluster("kill", &["mon-1"], |_| {}).await;
    let id = c
        .api
        .create_job(
            json!({ "group": "mon", "handler": "hang", "retries": 3, "retry_backoff_s": 1 }),
        )
        .await;
    let trigger_id = c.api.trigger_now(id).await;
    eventually("the run to start", Duration::from_secs(10), || async {
        (!runs_of(&c.seen, &trigger_id).is_empty()).then_some(())
    })
    .await;
    let (status, answer) = c
        .api
        .post(&format!("/api/v1/logs/{trigger_id}/kill"), json!({}))
        .await;
    assert_eq!(status, 202, "{answer}");
    let row = stored_result(&c, &trigger_id, "the killed result in MySQL").await;
    // Who killed it is in the audit log.
    let audit = format!("/api/v1/audit?action=trigger.kill&target=trigger:{trigger_id}");
    let killed = eventually(
        "the kill in the audit log",
        Duration::from_secs(10),
        || async {
            let (_, rows) = c.api.get(&audit).await;
            (rows["items"].as_array()?.len() == 1).then_some(rows)
        },
    )
    .await;
    assert_eq!(killed["items"][0]["username"], "admin", "{killed}");
    assert_eq!(killed["items"][0]["group"], "mon", "{killed}");
    assert_eq!(row.0, Some(500));
    assert!(
        row.1.as_deref().is_some_and(|m| m.contains("killed")),
        "{row:?}"
    );
    reacted_with_nothing_pending(&c, &trigger_id).await;
    assert_eq!(
        runs_of(&c.seen, &format!("{id}-")).len(),
        1,
        "a killed run is not retried"
    );
    let (status, _) = c
        .api
        .post(&format!("/api/v1/logs/{trigger_id}/kill"), json!({}))
        .await;
    assert_eq!(status, 409, "a finished trigger cannot be killed");
    c.cluster.stop().await;
}

/// A kill of a trigger still queued in the broker is remembered: when the
/// trigger reaches its executor it is answered as killed and never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_of_a_queued_trigger_is_remembered_and_it_never_runs() {
    // Prefetch 1: while `hang` runs, the executor takes nothing more.
    let c = cluster("killq", &["mon-1"], |config| config.executor.prefetch = 1).await;
    let hang = c
        .api
        .create_job(json!({ "group": "mon", "handler": "hang" }))
        .await;
    let later = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok" }))
        .await;
    let running = c.api.trigger_now(hang).await;
    eventually(
        "the hanging run to start",
        Duration::from_secs(10),
        || async { (!runs_of(&c.seen, &running).is_empty()).then_some(()) },
    )
    .await;
    let queued = c.api.trigger_now(later).await;
    let queue = c.cluster.config().names().executor_queue("mon", "mon-1");
    eventually(
        "the second trigger waiting in the broker",
        Duration::from_secs(10),
        || async {
            let (ready, _) = rondo_core::testkit::queue_depth(c.cluster.config(), &queue).await?;
            (ready == 1).then_some(())
        },
    )
    .await;
    let (status, answer) = c
        .api
        .post(&format!("/api/v1/logs/{queued}/kill"), json!({}))
        .await;
    assert_eq!(
        (status, answer["kill"].clone()),
        (202, json!("queued")),
        "{answer}"
    );
    // Free the window: the queued trigger reaches the executor now.
    let (status, answer) = c
        .api
        .post(&format!("/api/v1/logs/{running}/kill"), json!({}))
        .await;
    assert_eq!(
        (status, answer["kill"].clone()),
        (202, json!("sent")),
        "{answer}"
    );
    let row = stored_result(&c, &queued, "the queued trigger's killed result").await;
    assert_eq!(row, (Some(500), Some("killed".to_owned())));
    assert!(
        runs_of(&c.seen, &queued).is_empty(),
        "the killed trigger's handler never ran (its result is in, so it was delivered)"
    );
    c.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trigger_whose_executor_died_is_lost_then_retried_elsewhere() {
    let mut c = cluster("lost", &["b-exec"], |config| {
        config.monitor.lost_after_ms = 2000;
    })
    .await;
    // a-exec is a real rondo-executor process; FIRST routes to it (sorted
    // ids), and its built-in demo handler sleeps for ten minutes.
    c.cluster.spawn_executor("a-exec");
    eventually("a-exec to register", Duration::from_secs(20), || async {
        let (_, live) = c.api.get("/api/v1/groups/mon/executors").await;
        (live.as_array()?.len() == 2).then_some(())
    })
    .await;
    let spec = json!({ "group": "mon", "handler": "demo", "params": "600000", "routing": "FIRST", "retries": 1 });
    let id = c.api.create_job(spec).await;
    let trigger_id = c.api.trigger_now(id).await;
    let pool = rondo_core::redis::pool(&c.cluster.config().redis).unwrap();
    let mark = c.cluster.config().names().dedupe("mon", &trigger_id);
    eventually(
        "the run to start on a-exec",
        Duration::from_secs(10),
        || {
            let (pool, mark) = (pool.clone(), mark.clone());
            async move {
                let started: bool = pool.get().await.ok()?.exists(mark).await.ok()?;
                started.then_some(())
            }
        },
    )
    .await;
    // a-exec dies without answering.
    c.cluster.kill_executor("a-exec").await;
    let retry = format!("{trigger_id}-retry1");
    let runs = eventually("the retry on b-exec", Duration::from_secs(40), || async {
        let runs = runs_of(&c.seen, &retry);
        (!runs.is_empty()).then_some(runs)
    })
    .await;
    assert_eq!(
        (runs[0].1, runs[0].3.as_str()),
        (TriggerType::Retry, "b-exec")
    );
    let row = stored_result(&c, &trigger_id, "the lost result in MySQL").await;
    assert_eq!(row.0, Some(500));
    let msg = row.1.unwrap_or_default();
    assert!(msg.starts_with("lost: executor a-exec"), "{msg}");
    c.cluster.stop().await;
}

/// Triggers waiting in an offline executor's queue are settled by their
/// lateness: a fresh one is routed again (same id) to a live executor; a
/// scheduled fire later than the misfire threshold gets its job's misfire
/// rule (DO_NOTHING: answered as skipped, never run; FIRE_ONCE_NOW: one
/// runs). The executor then leaves the registry and its queue is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn triggers_queued_on_an_offline_executor_are_routed_again_or_misfired() {
    let c = cluster("reroute", &["live-exec"], |_| {}).await;
    let skip = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok" }))
        .await;
    let once = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok", "misfire": "FIRE_ONCE_NOW" }))
        .await;
    let names = c.cluster.config().names();
    // An offline executor: silent for a minute, its queue holding triggers.
    let conn = amqp::connect(&c.cluster.config().amqp.url, "reroute-test")
        .await
        .unwrap();
    let ch = amqp::confirm_channel(&conn).await.unwrap();
    c.cluster.world.executor_queue("mon", "dead-exec");
    let queue = names.executor_queue("mon", "dead-exec");
    amqp::declare_executor_queue(&ch, &names, "mon", "dead-exec")
        .await
        .unwrap();
    let pool = rondo_core::redis::pool(&c.cluster.config().redis).unwrap();
    let stranded = |job_id: u64, fire_ms: i64| rondo_core::Trigger {
        trigger_id: rondo_core::trigger_id::scheduled(job_id, fire_ms, 0),
        job_id,
        group: "mon".into(),
        executor_id: "dead-exec".into(),
        handler: "ok".into(),
        params: String::new(),
        trigger_type: TriggerType::Cron,
        fire_ms,
        sent_ms: fire_ms,
        shard_index: 0,
        shard_total: 1,
        timeout_s: 0,
        block: rondo_core::BlockStrategy::SerialExecution,
        retry_count: 0,
        script: None,
        secrets: Default::default(),
    };
    let now = clock::now_ms();
    let old = now - 60_000;
    let fresh = [stranded(skip, now), stranded(skip, now + 1)];
    let skipped = [stranded(skip, old), stranded(skip, old + 1000)];
    let folded = [stranded(once, old), stranded(once, old + 1000)];
    for t in fresh.iter().chain(&skipped).chain(&folded) {
        let body = serde_json::to_vec(&TriggerBatch::new(vec![t.clone()])).unwrap();
        let exchange = names.trigger_exchange();
        let publish = amqp::Publish {
            exchange: &exchange,
            routing_key: &names.trigger_key("mon", "dead-exec"),
            mandatory: true,
            ..amqp::Publish::default()
        };
        assert!(amqp::publish_confirmed(&ch, publish, &body).await.unwrap());
    }
    let _: () = pool
        .get()
        .await
        .unwrap()
        .zadd(names.registry("mon"), "dead-exec", now - 60_000)
        .await
        .unwrap();
    for t in &fresh {
        let run = eventually("the rerouted run", Duration::from_secs(20), || async {
            runs_of(&c.seen, &t.trigger_id).into_iter().next()
        })
        .await;
        assert_eq!(
            run.3, "live-exec",
            "same trigger id, run on the live executor"
        );
    }
    for t in &skipped {
        let (code, msg) = stored_result(&c, &t.trigger_id, "the skipped misfire's result").await;
        let msg = msg.unwrap_or_default();
        assert_eq!(code, Some(500));
        assert!(
            msg.starts_with("misfire:") && msg.contains("DO_NOTHING"),
            "{msg}"
        );
    }
    let (code, msg) = stored_result(&c, &folded[1].trigger_id, "the folded misfire's result").await;
    assert_eq!(code, Some(500));
    assert!(msg.unwrap_or_default().contains("FIRE_ONCE_NOW"));
    let run = eventually(
        "FIRE_ONCE_NOW's one run",
        Duration::from_secs(20),
        || async { runs_of(&c.seen, &folded[0].trigger_id).into_iter().next() },
    )
    .await;
    assert_eq!(run.3, "live-exec");
    // Every answer is in: nothing skipped or folded ran.
    for t in skipped.iter().chain(&folded[1..]) {
        assert!(
            runs_of(&c.seen, &t.trigger_id).is_empty(),
            "{} ran",
            t.trigger_id
        );
    }
    eventually(
        "the offline executor to leave the registry and its queue to go",
        Duration::from_secs(10),
        || {
            let pool = pool.clone();
            let key = names.registry("mon");
            let (config, queue) = (c.cluster.config().clone(), queue.clone());
            async move {
                let mut redis = pool.get().await.ok()?;
                let gone: Option<f64> = redis.zscore(key, "dead-exec").await.ok()?;
                let queue_gone = rondo_core::testkit::queue_depth(&config, &queue)
                    .await
                    .is_none();
                (gone.is_none() && queue_gone).then_some(())
            }
        },
    )
    .await;
    let _ = conn.close(200, "bye".into()).await;
    c.cluster.stop().await;
}

/// A one-purpose HTTP receiver: records each POSTed JSON body, answers 204.
async fn webhook_receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    slow_webhook_receiver(Duration::ZERO).await
}

/// [`webhook_receiver`] answering each POST `delay` after reading it (the
/// body is recorded when read).
async fn slow_webhook_receiver(delay: Duration) -> (String, Arc<Mutex<Vec<Value>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alarm", listener.local_addr().unwrap());
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let got = bodies.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let got = got.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(head_end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..head_end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() < head_end + 4 + length {
                        continue;
                    }
                    if let Ok(body) =
                        serde_json::from_slice(&buf[head_end + 4..head_end + 4 + length])
                    {
                        got.lock().unwrap().push(body);
                    }
                    tokio::time::sleep(delay).await;
                    let _ = sock.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                    return;
                }
            });
        }
    });
    (url, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failure_is_alarmed_and_its_alarm_status_stored() {
    // The receiver listens on loopback, which a webhook may reach only
    // when the allow-list names it.
    let allow = |c: &mut rondo_core::Config| c.alarm.webhook_allow = vec!["127.0.0.1".into()];
    let c = cluster("alarm", &["mon-1"], allow).await;
    let (url, bodies) = webhook_receiver().await;
    let id = c
        .api
        .create_job(json!({ "group": "mon", "handler": "fail", "alarm_webhook": url }))
        .await;
    let quiet = c
        .api
        .create_job(json!({ "group": "mon", "handler": "fail" }))
        .await;
    let trigger_id = c.api.trigger_now(id).await;
    let quiet_trigger = c.api.trigger_now(quiet).await;
    let body = eventually("the webhook POST", Duration::from_secs(15), || async {
        bodies
            .lock()
            .unwrap()
            .iter()
            .find(|b| b["trigger_id"] == trigger_id.as_str())
            .cloned()
    })
    .await;
    assert_eq!(
        (body["job_id"].as_u64(), body["code"].as_i64()),
        (Some(id), Some(500))
    );
    assert!(
        body["msg"]
            .as_str()
            .is_some_and(|m| m.contains("always fails")),
        "{body}"
    );
    for (tid, want) in [(&trigger_id, 2), (&quiet_trigger, 1)] {
        eventually(
            "the alarm status in MySQL",
            Duration::from_secs(15),
            || async {
                let row: Option<(i32,)> =
                    sqlx::query_as("SELECT alarm_status FROM job_log WHERE trigger_id = ?")
                        .bind(tid)
                        .fetch_optional(c.cluster.db())
                        .await
                        .ok()?;
                (row?.0 == want).then_some(())
            },
        )
        .await;
    }
    c.cluster.stop().await;
}

/// Alarm channels: an admin defines them (an operator reads them without
/// the signing secret or the URL's token, and may not define one), a job
/// names them (an unknown name is refused at save), and a failure reaches
/// each with the channel's template, the console link filled in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failure_reaches_the_jobs_alarm_channels_with_their_templates() {
    let tune = |c: &mut rondo_core::Config| {
        c.alarm.webhook_allow = vec!["127.0.0.1".into()];
        c.alarm.console_url = "https://rondo.example.com".into();
    };
    let c = cluster("chan", &["mon-1"], tune).await;
    let (url, bodies) = webhook_receiver().await;
    for (name, kind, template) in [
        ("team-slack", "slack", "{job} failed: {code} {link}"),
        ("team-json", "json", "{trigger_id} on {executor}"),
    ] {
        let (status, out) = c
            .api
            .post(
                "/api/v1/alarm-channels",
                json!({ "name": name, "kind": kind, "url": format!("{url}?token=t0ken"), "template": template }),
            )
            .await;
        assert_eq!(status, 201, "{out}");
    }
    let (status, out) = c
        .api
        .post(
            "/api/v1/alarm-channels",
            json!({ "name": "ding", "kind": "dingtalk", "url": "https://oapi.dingtalk.com/robot/send?access_token=abc", "secret": "SECret" }),
        )
        .await;
    assert_eq!((status, &out["secret"]), (201, &json!("***")), "{out}");
    let token = c
        .cluster
        .world
        .user("ops", rondo_core::auth::Role::Operator, &["mon"], false)
        .await;
    let ops = c.api.clone().with_token(&token);
    let (_, seen) = ops.get("/api/v1/alarm-channels/ding").await;
    assert_eq!(seen["secret"], "***");
    assert!(!seen.to_string().contains("abc"), "{seen}");
    let (status, out) = ops
        .post(
            "/api/v1/alarm-channels",
            json!({ "name": "mine", "kind": "slack", "url": "https://hooks.example.com/x" }),
        )
        .await;
    assert_eq!(status, 403, "{out}");

    let (status, out) = c
        .api
        .post(
            "/api/v1/jobs",
            json!({ "group": "mon", "handler": "fail", "alarm_channels": ["team-slack", "nope"] }),
        )
        .await;
    assert_eq!(
        (status, &out["error"]["field"]),
        (400, &json!("alarm_channels")),
        "{out}"
    );
    let id = c
        .api
        .create_job(json!({
            "group": "mon",
            "handler": "fail",
            "description": "nightly",
            "alarm_channels": ["team-slack", "team-json"],
        }))
        .await;
    let trigger_id = c.api.trigger_now(id).await;
    let got = eventually("both channels' POSTs", Duration::from_secs(15), || async {
        let got = bodies.lock().unwrap().clone();
        (got.len() >= 2).then_some(got)
    })
    .await;
    let slack = got.iter().find(|b| b.get("v").is_none()).expect("slack");
    assert_eq!(
        slack["text"],
        format!("nightly failed: 500 https://rondo.example.com/logs/{trigger_id}")
    );
    let body = got.iter().find(|b| b["v"] == 1).expect("json");
    assert_eq!(body["text"], format!("{trigger_id} on mon-1"));
    assert_eq!(body["trigger_id"], trigger_id.as_str());
    eventually(
        "the alarm status in MySQL",
        Duration::from_secs(15),
        || async {
            let row: Option<(i32, String)> =
                sqlx::query_as("SELECT alarm_status, alarm_msg FROM job_log WHERE trigger_id = ?")
                    .bind(&trigger_id)
                    .fetch_optional(c.cluster.db())
                    .await
                    .ok()?;
            let (status, msg) = row?;
            (status == 2
                && msg.contains("channel team-slack: sent")
                && msg.contains("channel team-json: sent"))
            .then_some(())
        },
    )
    .await;
    c.cluster.stop().await;
}

/// The stored alarm status of each of `triggers` (0 until stored).
async fn alarm_statuses(db: &sqlx::MySqlPool, triggers: &[String]) -> Vec<i32> {
    let mut out = Vec::with_capacity(triggers.len());
    for t in triggers {
        let row: Option<(Option<i32>,)> =
            sqlx::query_as("SELECT alarm_status FROM job_log WHERE trigger_id = ?")
                .bind(t)
                .fetch_optional(db)
                .await
                .unwrap_or(None);
        out.push(row.and_then(|r| r.0).unwrap_or(0));
    }
    out
}

/// A flapping job cannot flood a channel: 100 failures within the gather
/// time make one alarm, which says 100; its trigger reads sent, the 99
/// others folded into it; the next failure's alarm waits out the throttle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_failures_of_a_job_make_one_alarm_with_their_count() {
    let tune = |c: &mut rondo_core::Config| {
        c.alarm.webhook_allow = vec!["127.0.0.1".into()];
        c.alarm.gather_ms = 10_000;
        c.alarm.throttle_ms = 15_000;
    };
    let c = cluster("throttle", &["mon-1"], tune).await;
    let (url, bodies) = webhook_receiver().await;
    let id = c
        .api
        .create_job(json!({ "group": "mon", "handler": "fail", "alarm_webhook": url }))
        .await;
    let mut triggers = Vec::new();
    for _ in 0..100 {
        triggers.push(c.api.trigger_now(id).await);
    }
    // Every failure is taken in before the alarm goes: 1 queued, 99
    // folded.
    eventually("the failures folded", Duration::from_secs(20), || async {
        let s = alarm_statuses(c.cluster.db(), &triggers).await;
        (s.iter().filter(|s| **s == 5).count() == 99 && s.iter().filter(|s| **s == 4).count() == 1)
            .then_some(())
    })
    .await;
    let sent = eventually("the one alarm", Duration::from_secs(30), || async {
        bodies.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(sent["failures"], 100, "{sent}");
    assert_eq!(
        sent["trigger_id"],
        triggers[0].as_str(),
        "the first failure leads"
    );
    eventually("the lead trigger sent", Duration::from_secs(15), || async {
        (alarm_statuses(c.cluster.db(), &triggers[..1]).await == [2]).then_some(())
    })
    .await;
    let statuses = alarm_statuses(c.cluster.db(), &triggers).await;
    assert_eq!(statuses.iter().filter(|s| **s == 5).count(), 99);
    assert_eq!(bodies.lock().unwrap().len(), 1, "one alarm for the burst");
    // One more failure waits out the throttle: its alarm goes no sooner
    // than 15 s after the first, and says 1.
    let late = c.api.trigger_now(id).await;
    let second = eventually("the next alarm", Duration::from_secs(45), || async {
        bodies.lock().unwrap().get(1).cloned()
    })
    .await;
    assert_eq!(
        (&second["trigger_id"], &second["failures"]),
        (&json!(late), &json!(1))
    );
    let apart = second["sent_ms"].as_i64().unwrap() - sent["sent_ms"].as_i64().unwrap();
    assert!(apart >= 14_000, "{apart} ms apart");
    c.cluster.stop().await;
}

/// A slow channel does not slow result handling: with a webhook that takes
/// 5 s per alarm, every result of 20 failing jobs is handled (each trigger's
/// alarm queued) before the first alarm is answered; the alarms then go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_webhook_does_not_hold_result_handling() {
    let tune = |c: &mut rondo_core::Config| {
        c.alarm.webhook_allow = vec!["127.0.0.1".into()];
        c.alarm.gather_ms = 0;
        c.alarm.throttle_ms = 0;
        c.alarm.timeout_ms = 10_000;
    };
    let c = cluster("slowhook", &["mon-1"], tune).await;
    let (url, bodies) = slow_webhook_receiver(Duration::from_secs(5)).await;
    let mut triggers = Vec::new();
    for _ in 0..20 {
        let id = c
            .api
            .create_job(json!({ "group": "mon", "handler": "fail", "alarm_webhook": url }))
            .await;
        triggers.push(c.api.trigger_now(id).await);
    }
    let handled = eventually("every result handled", Duration::from_secs(20), || async {
        let s = alarm_statuses(c.cluster.db(), &triggers).await;
        s.iter().all(|s| *s != 0).then_some(s)
    })
    .await;
    // By counts: each of the 20 results was handled while the webhook had
    // answered no alarm yet (it answers 5 s after reading one).
    assert!(handled.iter().all(|s| *s == 4), "all queued: {handled:?}");
    eventually("every alarm sent", Duration::from_secs(60), || async {
        let s = alarm_statuses(c.cluster.db(), &triggers).await;
        s.iter().all(|s| *s == 2).then_some(())
    })
    .await;
    assert_eq!(bodies.lock().unwrap().len(), 20);
    c.cluster.stop().await;
}

/// Kill all: every run of the job without a result is killed in one
/// call, none is retried, and another job's run is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_of_a_job_ends_every_run_it_has() {
    let c = cluster("killall", &["mon-1"], |_| {}).await;
    let id = c
        .api
        .create_job(
            json!({ "group": "mon", "handler": "hang", "retries": 2, "block": "SERIAL_EXECUTION" }),
        )
        .await;
    let other = c
        .api
        .create_job(json!({ "group": "mon", "handler": "hang" }))
        .await;
    let mut triggers = Vec::new();
    for _ in 0..3 {
        triggers.push(c.api.trigger_now(id).await);
    }
    let bystander = c.api.trigger_now(other).await;
    eventually(
        "the first run and the bystander",
        Duration::from_secs(10),
        || async {
            (!runs_of(&c.seen, &triggers[0]).is_empty() && !runs_of(&c.seen, &bystander).is_empty())
                .then_some(())
        },
    )
    .await;
    let (status, answer) = c
        .api
        .post(&format!("/api/v1/jobs/{id}/kill"), json!({}))
        .await;
    assert_eq!(status, 202, "{answer}");
    let mut killed: Vec<String> = answer["killed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["trigger_id"].as_str().unwrap().to_owned())
        .collect();
    killed.sort();
    let mut want = triggers.clone();
    want.sort();
    assert_eq!(killed, want, "{answer}");
    for t in &triggers {
        let row = stored_result(&c, t, "a killed result in MySQL").await;
        assert!(
            row.1.as_deref().is_some_and(|m| m.contains("killed")),
            "{t}: {row:?}"
        );
    }
    // Each ran at most once (those killed before their turn never), and
    // none was retried (a retry is a run of retry count 1).
    let runs = runs_of(&c.seen, &format!("{id}-"));
    assert!(runs.iter().all(|r| r.2 == 0), "{runs:?}");
    let mut ran: Vec<&String> = runs.iter().map(|r| &r.0).collect();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), runs.len(), "{runs:?}");
    let (status, answer) = c
        .api
        .post(&format!("/api/v1/jobs/{id}/kill"), json!({}))
        .await;
    assert_eq!(
        (status, &answer["killed"]),
        (202, &json!([])),
        "nothing left"
    );
    let (status, answer) = c
        .api
        .post(&format!("/api/v1/logs/{bystander}/kill"), json!({}))
        .await;
    assert_eq!(
        status, 202,
        "the other job's run was still running: {answer}"
    );
    c.cluster.stop().await;
}

/// Trigger once on chosen executors (XXL-JOB's 执行一次 with an address
/// list): the job's routing picks among them only, a broadcast goes to each
/// of them, none live fails the trigger saying so, and a bad id is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trigger_on_chosen_executors_runs_only_there() {
    let c = cluster("chosen", &["mon-1", "mon-2", "mon-3"], |_| {}).await;
    let round = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok", "routing": "ROUND" }))
        .await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        let (status, answer) = c
            .api
            .post(
                &format!("/api/v1/jobs/{round}/trigger"),
                json!({ "executors": ["mon-2"] }),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        ids.push(
            answer["triggers"][0]["trigger"]["trigger_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let broadcast = c
        .api
        .create_job(json!({ "group": "mon", "handler": "ok", "routing": "SHARDING_BROADCAST" }))
        .await;
    let (status, answer) = c
        .api
        .post(
            &format!("/api/v1/jobs/{broadcast}/trigger"),
            json!({ "executors": ["mon-1", "mon-3"] }),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let shards: Vec<String> = answer["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trigger"]["trigger_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(shards.len(), 2, "{answer}");
    let ran_on = |trigger: &str| -> Option<String> {
        runs_of(&c.seen, trigger).first().map(|r| r.3.clone())
    };
    eventually("every run", Duration::from_secs(15), || async {
        ids.iter()
            .chain(&shards)
            .all(|t| ran_on(t).is_some())
            .then_some(())
    })
    .await;
    for t in &ids {
        assert_eq!(ran_on(t).as_deref(), Some("mon-2"), "{t}");
    }
    let mut on: Vec<String> = shards.iter().filter_map(|t| ran_on(t)).collect();
    on.sort();
    assert_eq!(on, ["mon-1", "mon-3"]);
    let (status, answer) = c
        .api
        .post(
            &format!("/api/v1/jobs/{round}/trigger"),
            json!({ "executors": ["mon-9"] }),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["triggers"][0]["code"], 500, "{answer}");
    assert!(
        answer["triggers"][0]["msg"]
            .as_str()
            .is_some_and(|m| m.contains("none of the chosen executors")),
        "{answer}"
    );
    let (status, answer) = c
        .api
        .post(
            &format!("/api/v1/jobs/{round}/trigger"),
            json!({ "executors": [" "] }),
        )
        .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (400, &json!("executors")),
        "{answer}"
    );
    c.cluster.stop().await;
}
