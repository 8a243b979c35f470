//! Kills through the control exchange, sent the way the scheduler sends
//! them, against the real RabbitMQ and Redis.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Harness;
use lapin::types::AMQPValue;
use rondo_core::trigger::code;
use rondo_core::{BlockStrategy, Event};
use rondo_executor::{ExecutorBuilder, JobContext, JobError, builtin};

/// Counts its runs, logs `start`, sleeps `params` ms (stopping when
/// cancelled, or not at all when params end in `!`).
fn sleeper(runs: &Arc<AtomicUsize>) -> impl Fn(ExecutorBuilder) -> ExecutorBuilder + use<> {
    let runs = runs.clone();
    move |builder: ExecutorBuilder| {
        let runs = runs.clone();
        builtin::register(builder).handler("sleep", move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                ctx.log("start");
                let stubborn = ctx.params().ends_with('!');
                let ms = ctx.params().trim_end_matches('!').parse().unwrap_or(0);
                let nap = tokio::time::sleep(Duration::from_millis(ms));
                if stubborn {
                    nap.await;
                    return Ok(());
                }
                tokio::select! {
                    () = nap => Ok(()),
                    () = ctx.cancelled() => Err(JobError::fail("sleep: cancelled")),
                }
            }
        })
    }
}

#[tokio::test]
async fn a_kill_stops_the_running_trigger() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("control", sleeper(&runs)).await;
    h.publish(vec![h.trigger("k-run", "sleep", "30000")]).await;
    h.started("k-run").await;
    let sent = Instant::now();
    assert!(
        h.kill("k-run", 42).await,
        "the control queue takes the kill"
    );
    let (killed, logs) = h.result_for("k-run").await;
    assert_eq!(
        (killed.code, killed.msg.as_str(), killed.retryable),
        (code::FAIL, "killed", false)
    );
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    let lines: Vec<&str> = logs
        .iter()
        .flat_map(|l| &l.lines)
        .map(|l| l.text.as_str())
        .collect();
    assert!(lines.contains(&"[rondo] run stopped: killed"), "{lines:?}");
    // The job runs again afterwards.
    h.publish(vec![h.trigger("k-after", "sleep", "0")]).await;
    assert_eq!(h.result("k-after").await.code, code::SUCCESS);
    assert_eq!(h.ready_messages(&h.queue).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn a_handler_that_ignores_the_kill_is_aborted_after_the_grace() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("control", sleeper(&runs)).await;
    h.publish(vec![h.trigger("k-stubborn", "sleep", "30000!")])
        .await;
    h.started("k-stubborn").await;
    let sent = Instant::now();
    assert!(h.kill("k-stubborn", 42).await);
    let killed = h.result("k-stubborn").await;
    assert_eq!((killed.code, killed.msg.as_str()), (code::FAIL, "killed"));
    let took = sent.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_kill_takes_a_waiting_trigger_out_of_its_queue() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("control", sleeper(&runs)).await;
    h.publish(vec![h.trigger("q-run", "sleep", "1500")]).await;
    h.started("q-run").await;
    let mut waiting = h.trigger("q-wait", "sleep", "0");
    waiting.block = BlockStrategy::SerialExecution;
    h.publish(vec![waiting]).await;
    // Let it reach the job's queue, then kill it there.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(h.kill("q-wait", 42).await);
    let killed = h.result("q-wait").await;
    assert_eq!(
        (killed.code, killed.msg.as_str(), killed.retryable),
        (code::FAIL, "killed", false)
    );
    let running = h.result("q-run").await;
    assert_eq!(running.code, code::SUCCESS);
    assert!(
        killed.end_ms < running.end_ms,
        "answered while the run went on"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the killed trigger never ran"
    );
    assert_eq!(h.ready_messages(&h.queue).await, 0);
    h.stop().await;
}

fn reason(message: &lapin::message::BasicGetMessage) -> String {
    let headers = message
        .delivery
        .properties
        .headers()
        .clone()
        .unwrap_or_default();
    match headers.inner().get("x-rondo-reason") {
        Some(AMQPValue::LongString(s)) => s.to_string(),
        other => panic!("no x-rondo-reason header: {other:?}"),
    }
}

#[tokio::test]
async fn stray_kills_are_ignored_and_bad_control_messages_dead_lettered() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("control", sleeper(&runs)).await;
    h.publish(vec![h.trigger("x-run", "sleep", "600")]).await;
    h.started("x-run").await;
    // An unknown trigger, and the right trigger with the wrong job.
    assert!(h.kill("x-unknown", 42).await);
    assert!(h.kill("x-run", 99).await);
    h.publish_control_raw(b"{not json").await;
    let dead = h.next_dead().await;
    assert!(
        reason(&dead).starts_with("malformed control message"),
        "{}",
        reason(&dead)
    );
    assert_eq!(dead.delivery.data, b"{not json");
    h.publish_control_raw(br#"{"v":1,"action":"pause","trigger_id":"x-run","job_id":42}"#)
        .await;
    assert!(reason(&h.next_dead().await).contains("unknown variant `pause`"));
    let result = h.result("x-run").await;
    assert_eq!(result.code, code::SUCCESS, "{result:?}");
    let late = h.results_within(Duration::from_millis(300)).await;
    assert!(late.is_empty(), "{late:?}");
    // A kill for an executor that is not connected comes back unroutable.
    let nobody = rondo_executor::control::send_kill(&h.channel, &h.names, "nobody", "g", "t", 1)
        .await
        .unwrap();
    assert!(!nobody);
    assert!(!matches!(
        h.next_event(Duration::ZERO).await,
        Some(Event::Result(_))
    ));
    h.stop().await;
}

#[tokio::test]
async fn a_control_queue_held_by_a_stale_connection_is_taken_over_later() {
    let config = common::test_config("control");
    let names = config.names();
    // Another connection holds the exclusive control queue, as a dead
    // connection of this executor would until the broker notices.
    let holder = rondo_core::amqp::connect(&config.amqp.url, "stale-holder")
        .await
        .unwrap();
    let channel = holder.create_channel().await.unwrap();
    let exclusive = lapin::options::QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..Default::default()
    };
    channel
        .queue_declare(
            names.control_queue(&config.executor.id).as_str().into(),
            exclusive,
            rondo_core::amqp::queue_args(&names),
        )
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start_with(config, sleeper(&runs)).await;
    // Triggers run all the same.
    h.publish(vec![h.trigger("s-ok", "sleep", "0")]).await;
    assert_eq!(h.result("s-ok").await.code, code::SUCCESS);
    h.publish(vec![h.trigger("s-long", "sleep", "30000")]).await;
    h.started("s-long").await;
    holder.close(200, "gone".into()).await.unwrap();
    // The executor declares the queue on its next attempt (every 5 s).
    let deadline = Instant::now() + Duration::from_secs(8);
    while !h.kill("s-long", 42).await {
        assert!(
            Instant::now() < deadline,
            "the control queue was never taken over"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let killed = h.result("s-long").await;
    assert_eq!((killed.code, killed.msg.as_str()), (code::FAIL, "killed"));
    h.stop().await;
}
