//! Per-job workers against the real RabbitMQ and Redis: block strategies,
//! back-pressure instead of refusals, init / destroy hooks, idle exit, and the
//! registry's `running_jobs`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Harness, PATIENCE, test_config};
use redis::AsyncCommands;
use rondo_core::trigger::code;
use rondo_core::{BlockStrategy, Trigger};
use rondo_executor::{ExecutorBuilder, HookContext, JobContext, JobError};

/// Logs `start`, sleeps `params` ms (stopping when cancelled).
async fn nap(ctx: JobContext) -> Result<(), JobError> {
    ctx.log("start");
    let ms = ctx.params().parse().unwrap_or(0);
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(()),
        () = ctx.cancelled() => Err(JobError::fail("nap: cancelled")),
    }
}

fn naps(builder: ExecutorBuilder) -> ExecutorBuilder {
    builder.handler("nap", nap)
}

fn trigger(h: &Harness, id: &str, job_id: u64, block: BlockStrategy, ms: u64) -> Trigger {
    let mut trigger = h.trigger(id, "nap", &ms.to_string());
    trigger.job_id = job_id;
    trigger.block = block;
    trigger
}

use BlockStrategy::{CoverEarly, DiscardLater, SerialExecution};

#[tokio::test]
async fn serial_triggers_of_a_job_take_turns_while_other_jobs_run() {
    let mut h = Harness::start("workers", naps).await;
    h.publish(vec![trigger(&h, "s-1", 42, SerialExecution, 800)])
        .await;
    h.publish(vec![trigger(&h, "s-2", 42, SerialExecution, 100)])
        .await;
    h.publish(vec![trigger(&h, "s-3", 42, SerialExecution, 100)])
        .await;
    h.publish(vec![trigger(&h, "other", 43, SerialExecution, 100)])
        .await;
    let other = h.result("other").await;
    let (s1, s2, s3) = (
        h.result("s-1").await,
        h.result("s-2").await,
        h.result("s-3").await,
    );
    for r in [&s1, &s2, &s3, &other] {
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
    }
    assert!(
        s2.start_ms >= s1.end_ms,
        "s-2 waited for s-1: {s1:?} {s2:?}"
    );
    assert!(
        s3.start_ms >= s2.end_ms,
        "first in, first out: {s2:?} {s3:?}"
    );
    assert!(
        other.end_ms < s1.end_ms,
        "another job does not wait: {other:?} {s1:?}"
    );
    assert_eq!(h.ready_messages(&h.queue).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn discard_later_refuses_a_trigger_while_the_job_runs() {
    let mut h = Harness::start("workers", naps).await;
    h.publish(vec![trigger(&h, "d-1", 42, DiscardLater, 1500)])
        .await;
    h.started("d-1").await;
    let sent = Instant::now();
    h.publish(vec![trigger(&h, "d-2", 42, DiscardLater, 0)])
        .await;
    let discarded = h.result("d-2").await;
    assert!(
        sent.elapsed() < Duration::from_millis(1000),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(
        (discarded.code, discarded.msg.as_str(), discarded.retryable),
        (
            code::FAIL,
            "block strategy DISCARD_LATER: job is running, trigger discarded",
            false
        )
    );
    assert_eq!(h.result("d-1").await.code, code::SUCCESS);
    // Idle again: the next one runs.
    h.publish(vec![trigger(&h, "d-3", 42, DiscardLater, 0)])
        .await;
    assert_eq!(h.result("d-3").await.code, code::SUCCESS);
    h.stop().await;
}

#[tokio::test]
async fn cover_early_stops_the_running_trigger_and_runs_the_new_one() {
    let mut h = Harness::start("workers", naps).await;
    h.publish(vec![trigger(&h, "c-1", 42, CoverEarly, 30_000)])
        .await;
    h.started("c-1").await;
    let sent = Instant::now();
    h.publish(vec![trigger(&h, "c-2", 42, CoverEarly, 100)])
        .await;
    let replaced = h.result("c-1").await;
    assert_eq!(
        (replaced.code, replaced.msg.as_str(), replaced.retryable),
        (
            code::FAIL,
            "block strategy COVER_EARLY: replaced by trigger c-2",
            false
        )
    );
    let cover = h.result("c-2").await;
    assert_eq!(cover.code, code::SUCCESS, "{cover:?}");
    assert!(
        cover.start_ms >= replaced.end_ms,
        "no overlap: {replaced:?} {cover:?}"
    );
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "{:?}",
        sent.elapsed()
    );
    h.stop().await;
}

/// No SERIAL trigger is refused, however many wait: once every unacked
/// message of the window holds a waiting trigger, the executor takes no
/// more from its queue (the broker keeps the rest, ready), and every
/// trigger runs, in order, once the runs ahead end.
#[tokio::test]
async fn serial_backlog_waits_in_the_broker_and_nothing_is_refused() {
    const WAITING: usize = 10;
    let mut config = test_config("workers");
    config.executor.prefetch = 4;
    let mut h = Harness::start_with(config, naps).await;
    h.publish(vec![trigger(&h, "b-0", 42, SerialExecution, 2500)])
        .await;
    h.started("b-0").await;
    for i in 1..=WAITING {
        h.publish(vec![trigger(&h, &format!("b-{i}"), 42, SerialExecution, 0)])
            .await;
    }
    h.publish(vec![trigger(&h, "b-other", 43, SerialExecution, 0)])
        .await;
    // b-0 runs and three wait, holding the window of 4: the other
    // WAITING - 3 + 1 messages stay ready in the broker.
    let ready = (WAITING - 3 + 1) as u32;
    rondo_core::testkit::eventually("the backlog held back in the broker", PATIENCE, || async {
        (h.ready_messages(&h.queue).await == ready).then_some(())
    })
    .await;
    let mut previous = h.result("b-0").await;
    assert_eq!(previous.code, code::SUCCESS, "{previous:?}");
    for i in 1..=WAITING {
        let r = h.result(&format!("b-{i}")).await;
        assert_eq!(r.code, code::SUCCESS, "nothing refused: {r:?}");
        assert!(r.start_ms >= previous.end_ms, "in order, one at a time");
        previous = r;
    }
    assert_eq!(h.result("b-other").await.code, code::SUCCESS);
    h.stop().await;
}

/// Hooks that record `init <job>` / `destroy <job>`.
fn recorded(events: &Arc<Mutex<Vec<String>>>) -> impl Fn(ExecutorBuilder) -> ExecutorBuilder {
    let (init_events, destroy_events) = (events.clone(), events.clone());
    move |builder: ExecutorBuilder| {
        let (init_events, destroy_events) = (init_events.clone(), destroy_events.clone());
        let init = move |ctx: HookContext| {
            let events = init_events.clone();
            async move {
                assert_eq!(ctx.handler(), "nap");
                events
                    .lock()
                    .unwrap()
                    .push(format!("init {}", ctx.job_id()));
                Ok(())
            }
        };
        let destroy = move |ctx: HookContext| {
            let events = destroy_events.clone();
            async move {
                events
                    .lock()
                    .unwrap()
                    .push(format!("destroy {}", ctx.job_id()));
                Ok(())
            }
        };
        naps(builder)
            .hooks("nap", init, destroy)
            .idle_timeout(Duration::from_millis(800))
    }
}

fn snapshot(events: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    events.lock().unwrap().clone()
}

#[tokio::test]
async fn hooks_run_once_per_worker_life_and_an_idle_worker_exits() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut h = Harness::start("workers", recorded(&events)).await;
    h.publish(vec![trigger(&h, "h-1", 42, SerialExecution, 200)])
        .await;
    h.publish(vec![trigger(&h, "h-2", 42, SerialExecution, 0)])
        .await;
    assert_eq!(h.result("h-1").await.code, code::SUCCESS);
    assert_eq!(h.result("h-2").await.code, code::SUCCESS);
    assert_eq!(snapshot(&events), vec!["init 42"]);
    // Idle for longer than the timeout: the worker exits.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(snapshot(&events), vec!["init 42", "destroy 42"]);
    // The next trigger starts a new worker.
    h.publish(vec![trigger(&h, "h-3", 42, SerialExecution, 0)])
        .await;
    assert_eq!(h.result("h-3").await.code, code::SUCCESS);
    h.publish(vec![trigger(&h, "h-4", 43, SerialExecution, 0)])
        .await;
    assert_eq!(h.result("h-4").await.code, code::SUCCESS);
    assert_eq!(
        snapshot(&events),
        vec!["init 42", "destroy 42", "init 42", "init 43"]
    );
    // Shutdown ends the workers too.
    h.shutdown().await;
    let mut at_exit = snapshot(&events);
    at_exit[4..].sort();
    assert_eq!(&at_exit[4..], ["destroy 42", "destroy 43"]);
    h.stop().await;
}

#[tokio::test]
async fn a_failing_init_fails_the_trigger_and_the_next_one_tries_again() {
    let attempts = Arc::new(Mutex::new(0));
    let counter = attempts.clone();
    let mut h = Harness::start("workers", move |builder: ExecutorBuilder| {
        let counter = counter.clone();
        naps(builder).init_hook("nap", move |_ctx: HookContext| {
            let counter = counter.clone();
            async move {
                let mut n = counter.lock().unwrap();
                *n += 1;
                match *n {
                    1 => Err(JobError::fail("database down")),
                    _ => Ok(()),
                }
            }
        })
    })
    .await;
    h.publish(vec![trigger(&h, "i-1", 42, SerialExecution, 0)])
        .await;
    let failed = h.result("i-1").await;
    assert_eq!(
        (failed.code, failed.msg.as_str(), failed.retryable),
        (
            code::FAIL,
            "init of handler \"nap\" failed: database down",
            true
        )
    );
    h.publish(vec![trigger(&h, "i-2", 42, SerialExecution, 0)])
        .await;
    assert_eq!(h.result("i-2").await.code, code::SUCCESS);
    h.publish(vec![trigger(&h, "i-3", 42, SerialExecution, 0)])
        .await;
    assert_eq!(h.result("i-3").await.code, code::SUCCESS);
    assert_eq!(*attempts.lock().unwrap(), 2, "init runs once it succeeded");
    h.stop().await;
}

/// The `running_jobs` field of the executor's hash.
async fn running_jobs(h: &Harness) -> String {
    let mut redis = h.redis().await;
    let value: Option<String> = redis
        .hget(h.names.executor(&h.executor_id), "running_jobs")
        .await
        .unwrap();
    value.unwrap_or_default()
}

/// Polls `running_jobs` until it equals `want`; returns how long it took.
async fn running_jobs_become(h: &Harness, want: &str) -> Duration {
    let started = Instant::now();
    while running_jobs(h).await != want {
        assert!(
            started.elapsed() < PATIENCE,
            "running_jobs never became {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn running_jobs_follows_runs_without_waiting_for_a_heartbeat() {
    let mut config = test_config("workers");
    // Heartbeats far apart: only the change-driven writes can be fast.
    config.registry.heartbeat_ms = 60_000;
    config.registry.dead_after_ms = 120_000;
    let mut h = Harness::start_with(config, naps).await;
    h.registered().await;
    assert_eq!(running_jobs(&h).await, "");
    let sent = Instant::now();
    h.publish(vec![trigger(&h, "r-1", 42, SerialExecution, 1500)])
        .await;
    h.publish(vec![trigger(&h, "r-2", 7, SerialExecution, 800)])
        .await;
    running_jobs_become(&h, "7,42").await;
    assert!(
        sent.elapsed() < Duration::from_millis(500),
        "{:?}",
        sent.elapsed()
    );
    h.result("r-2").await;
    let after_end = running_jobs_become(&h, "42").await;
    assert!(after_end < Duration::from_millis(300), "{after_end:?}");
    h.result("r-1").await;
    let after_end = running_jobs_become(&h, "").await;
    assert!(after_end < Duration::from_millis(300), "{after_end:?}");
    h.stop().await;
}
