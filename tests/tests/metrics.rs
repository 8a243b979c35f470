//! Prometheus metrics of every process after real fires: a scheduler
//! node, a `rondo-executor` and the persistence worker, each a fresh
//! process, scraped once what was done has happened; their counters moved
//! by exactly that.

use std::time::Duration;

use rondo_testkit::procs::free_addr;
use rondo_testkit::{Cluster, World, eventually, publish_raw_event, stored_codes};
use serde_json::json;

/// The metric table of `docs/operations.md` lists exactly the metrics rondo records.
#[test]
fn the_operations_doc_lists_every_metric() {
    let readme = include_str!("../../docs/operations.md");
    let mut listed: Vec<&str> = rondo_testkit::doc_block(readme, "metrics")
        .lines()
        .filter(|l| l.starts_with("| `rondo_"))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    let mut known: Vec<&str> = rondo_core::metrics::METRICS.iter().map(|m| m.0).collect();
    listed.sort_unstable();
    known.sort_unstable();
    assert_eq!(listed, known);
}

/// How many triggers of job `id` MySQL holds as sent.
async fn sent_count(db: &sqlx::MySqlPool, id: u64) -> f64 {
    let codes = stored_codes(db, id).await;
    codes.iter().filter(|c| c.0 == Some(200)).count() as f64
}

/// The value of the sample `series` (name with its labels, exactly as
/// rendered), if the scrape has it.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    match req.send().await {
        Ok(resp) => (
            resp.status().as_u16(),
            resp.text().await.unwrap_or_default(),
        ),
        Err(_) => (0, String::new()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_process_counts_what_happened() {
    let mut world = World::new("metrics").await;
    world.config.executor.app = "met".into();
    let (executor_addr, persist_addr) = (free_addr(), free_addr());
    world.config.executor.metrics_addr = executor_addr.to_string();
    world.config.persist.metrics_addr = persist_addr.to_string();
    let token = world.admin.token.clone();
    let mut cluster = Cluster::new(world);
    cluster.spawn_persist_worker();
    cluster.spawn_executor("met-1");
    let node = cluster.spawn_node("met-n1");
    let api = cluster.api(node);
    let scheduler = format!("http://{}", cluster.nodes[node].addr());
    let executor = format!("http://{executor_addr}");
    let persist = format!("http://{persist_addr}");

    for base in [&scheduler, &executor, &persist] {
        eventually(
            &format!("{base}/readyz"),
            Duration::from_secs(30),
            || async { (get(&format!("{base}/readyz"), None).await.0 == 200).then_some(()) },
        )
        .await;
        assert_eq!(get(&format!("{base}/healthz"), None).await.0, 200);
    }
    for app in ["met", "empty"] {
        assert_eq!(
            api.post("/api/v1/groups", json!({ "app": app })).await.0,
            201
        );
    }
    api.until_executors("met", &["met-1"]).await;
    let job = api
        .create_job(json!({ "group": "met", "handler": "demo", "schedule_type": "NONE" }))
        .await;
    let nowhere = api
        .create_job(json!({ "group": "empty", "handler": "demo", "schedule_type": "NONE" }))
        .await;
    // Three successes, one failure, one trigger with no executor to go to.
    for _ in 0..3 {
        api.trigger_now(job).await;
    }
    let (status, _) = api
        .post(
            &format!("/api/v1/jobs/{job}/trigger"),
            json!({ "params": "fail" }),
        )
        .await;
    assert_eq!(status, 200);
    api.trigger_now(nowhere).await;
    eventually(
        "the four results stored",
        Duration::from_secs(30),
        || async {
            let codes = stored_codes(cluster.db(), job).await;
            (codes.iter().filter(|c| c.1.is_some()).count() == 4).then_some(())
        },
    )
    .await;
    // A malformed event, for the worker to dead-letter.
    let config = cluster.config().clone();
    publish_raw_event(&config.amqp.url, &config, "job.upsert", b"not json").await;

    // The executor: 3 successes, 1 failure, each timed, none running.
    let (_, text) = get(&format!("{executor}/metrics"), None).await;
    assert_eq!(
        sample(&text, "rondo_executor_runs_total{outcome=\"success\"}"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rondo_executor_runs_total{outcome=\"failure\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rondo_executor_run_seconds_count"),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rondo_executor_queue_wait_seconds_count"),
        Some(4.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rondo_executor_running"), Some(0.0), "{text}");
    assert!(
        sample(&text, "rondo_executor_run_seconds_bucket{le=\"+Inf\"}").is_some(),
        "{text}"
    );

    // The scheduler: 4 sent, 1 failed, leader with a term; a token needed.
    let metrics = format!("{scheduler}/metrics");
    assert_eq!(get(&metrics, None).await.0, 401);
    let (status, text) = get(&metrics, Some(&token)).await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(&text, "rondo_triggers_sent_total{trigger_type=\"MANUAL\"}"),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "rondo_dispatch_failures_total{trigger_type=\"MANUAL\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rondo_leader"), Some(1.0), "{text}");
    assert!(
        sample(&text, "rondo_leader_term").is_some_and(|t| t >= 1.0),
        "{text}"
    );
    assert!(
        sample(&text, "rondo_claim_tick_seconds_count").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rondo_due_jobs{partition=\"0\"}"),
        Some(0.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rondo_cluster_nodes"), Some(1.0), "{text}");

    // The worker: every event of the above stored, the bad one dead-lettered.
    eventually(
        "the dead letter counted",
        Duration::from_secs(15),
        || async {
            let (_, text) = get(&format!("{persist}/metrics"), None).await;
            (sample(
                &text,
                "rondo_persist_dead_letters_total{reason=\"undecodable\"}",
            ) == Some(1.0))
            .then_some(())
        },
    )
    .await;
    let (_, text) = get(&format!("{persist}/metrics"), None).await;
    // 2 groups, 2 jobs, 5 triggers, 4 results (and their audits, logs).
    let stored = sample(&text, "rondo_persist_events_total").unwrap_or_default();
    assert!(stored >= 13.0, "{text}");
    assert!(
        sample(&text, "rondo_persist_batch_seconds_count").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        sample(&text, "rondo_persist_batch_events_count").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // Scheduled fires: every one the wheel dispatched is counted, and has
    // its lateness observed, exactly as MySQL has them.
    let rate = api
        .create_job(json!({ "group": "met", "handler": "demo", "schedule_type": "FIX_RATE", "schedule_conf": "1" }))
        .await;
    let db = cluster.db().clone();
    eventually(
        "two scheduled fires stored",
        Duration::from_secs(20),
        || async { (sent_count(&db, rate).await >= 2.0).then_some(()) },
    )
    .await;
    let (status, _) = api
        .post(&format!("/api/v1/jobs/{rate}/stop"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (fires, text) = eventually(
        "the fire counter to match MySQL",
        Duration::from_secs(20),
        || async {
            let (_, text) = get(&metrics, Some(&token)).await;
            let fires = sample(&text, "rondo_fires_total")?;
            (fires == sent_count(&db, rate).await).then_some((fires, text))
        },
    )
    .await;
    assert!(fires >= 2.0);
    assert_eq!(
        sample(&text, "rondo_fire_lateness_seconds_count"),
        Some(fires),
        "{text}"
    );
    cluster.stop().await;
}
