//! The worker end to end: events published to the events exchange of a real
//! RabbitMQ, stored by the worker in a real MySQL.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rondo_core::Event;
use rondo_history::write_events;
use sqlx::mysql::MySqlPoolOptions;

#[tokio::test]
async fn published_events_end_up_in_every_table() {
    let h = Harness::start().await;
    let worker = h.worker();
    h.publish(&[
        group("demo", "Demo", T0),
        job(1, "v1", T0),
        triggered("1-a", 1, 200, T0 + 1),
        result("1-a", 1, 200, T0 + 50),
        log("1-a", 0, &["one", "two"]),
        // Alarmed before anything else about its trigger is stored.
        alarm(
            "1-f",
            1,
            rondo_core::event::alarm_status::FAILED,
            "email: alarm.smtp_host is not configured",
        ),
    ])
    .await;
    eventually("every event stored", || async {
        count(&h.pool, "job_log_line").await == 2 && count(&h.pool, "job_log").await == 2
    })
    .await;
    eventually("definitions stored", || async {
        count(&h.pool, "executor_group").await == 1 && count(&h.pool, "job").await == 1
    })
    .await;
    let row: (
        u64,
        String,
        String,
        Option<i32>,
        Option<i32>,
        Option<String>,
    ) = sqlx::query_as(
        "SELECT job_id, group_app, executor_id, trigger_code, handle_code, \
         CAST(trigger_time AS CHAR) FROM job_log WHERE trigger_id = '1-a'",
    )
    .fetch_one(&h.pool)
    .await
    .unwrap();
    let trigger_time = Some("2023-11-14 22:13:20.001".to_owned());
    assert_eq!(
        row,
        (
            1,
            "demo".into(),
            "demo-host-1".into(),
            Some(200),
            Some(200),
            trigger_time
        )
    );
    let alarm: (i8, Option<String>) =
        sqlx::query_as("SELECT alarm_status, alarm_msg FROM job_log WHERE trigger_id = '1-f'")
            .fetch_one(&h.pool)
            .await
            .unwrap();
    let expected = "email: alarm.smtp_host is not configured".to_owned();
    assert_eq!(alarm, (3, Some(expected)));
    let job: (u32, String) =
        sqlx::query_as("SELECT retry_backoff_s, alarm_webhook FROM job WHERE id = 1")
            .fetch_one(&h.pool)
            .await
            .unwrap();
    assert_eq!(job, (15, "https://hooks.example.com/rondo/1".into()));
    worker.stop().await;
    let queue = h.config.names().persist_queue();
    assert_eq!(h.queue_counts(&queue).await, (0, 0), "everything acked");
    h.cleanup().await;
}

#[tokio::test]
async fn duplicates_and_reordering_end_in_the_same_rows() {
    // Published last: once it is stored, everything before it was handled
    // (one consumer, one event per batch, batches in delivery order).
    let sentinel = log("zz-sentinel", 0, &["last"]);
    let mut story = story();
    let (reference, reference_db) = fresh_database().await;
    for event in story.iter().chain([&sentinel]) {
        write_events(&reference, std::slice::from_ref(event))
            .await
            .unwrap();
    }
    let expected = snapshot(&reference).await;
    reference.close().await;
    drop(reference_db);

    let mut h = Harness::start().await;
    // One event per transaction, so every reordering crosses a commit.
    h.config.persist.batch_size = 1;
    let worker = h.worker();
    story = scrambled(&story);
    story.push(sentinel);
    h.publish(&story).await;
    eventually("the last event stored", || async {
        count(&h.pool, "job_log_line").await == 4
    })
    .await;
    worker.stop().await;
    let queue = h.config.names().persist_queue();
    assert_eq!(h.queue_counts(&queue).await, (0, 0), "everything acked");
    assert_eq!(snapshot(&h.pool).await, expected);
    h.cleanup().await;
}

#[tokio::test]
async fn a_malformed_message_is_dead_lettered_and_the_rest_stored() {
    let h = Harness::start().await;
    let good = |e: Event| {
        (
            e.routing_key().to_owned(),
            serde_json::to_vec(&[e]).unwrap(),
        )
    };
    h.publish_bodies(&[
        good(job(1, "a", T0)),
        ("job.upsert".into(), b"{not json".to_vec()),
        good(job(2, "b", T0)),
        (
            "job.upsert".into(),
            br#"[{"type":"job_exploded"}]"#.to_vec(),
        ),
        good(triggered("1-a", 1, 200, T0)),
    ])
    .await;
    let worker = h.worker();
    let dead = h.wait_dead(2).await;
    assert_eq!(dead.len(), 2);
    assert_eq!(dead[0].0, b"{not json");
    assert!(
        dead.iter()
            .all(|(_, reason)| reason.starts_with("undecodable event message"))
    );
    eventually("valid events stored", || async {
        count(&h.pool, "job").await == 2 && count(&h.pool, "job_log").await == 1
    })
    .await;
    worker.stop().await;
    assert_eq!(
        h.queue_counts(&h.config.names().persist_queue()).await,
        (0, 0)
    );
    h.cleanup().await;
}

#[tokio::test]
async fn an_event_mysql_refuses_is_dead_lettered_alone() {
    let h = Harness::start().await;
    let too_long = "x".repeat(200);
    // One message with three events: only the middle one is bad.
    let body = serde_json::to_vec(&[
        triggered("1-a", 1, 200, T0),
        triggered(&too_long, 1, 200, T0),
        triggered("1-b", 1, 200, T0),
    ])
    .unwrap();
    h.publish_bodies(&[("trigger.sent".into(), body)]).await;
    let worker = h.worker();
    let dead = h.wait_dead(1).await;
    assert!(dead[0].1.contains("Data too long"), "{}", dead[0].1);
    let events = rondo_core::event::decode_events(&dead[0].0).unwrap();
    assert!(matches!(&events[..], [Event::Triggered(r)] if r.trigger.trigger_id == too_long));
    eventually("the good events stored", || async {
        count(&h.pool, "job_log").await == 2
    })
    .await;
    worker.stop().await;
    assert_eq!(
        h.queue_counts(&h.config.names().persist_queue()).await,
        (0, 0)
    );
    h.cleanup().await;
}

#[tokio::test]
async fn five_thousand_events_make_one_row_per_trigger() {
    let h = Harness::start().await;
    let mut events = Vec::with_capacity(5000);
    for i in 0..2500 {
        let id = format!("7-{}-0", T0 + i);
        events.push(triggered(&id, 7, 200, T0 + i));
        events.push(result(&id, 7, 200, T0 + i + 100));
    }
    h.publish(&events).await;
    let started = Instant::now();
    let worker = h.worker();
    eventually("2,500 merged rows", || async {
        let done: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM job_log WHERE trigger_code = 200 AND handle_code = 200",
        )
        .fetch_one(&h.pool)
        .await
        .unwrap();
        done == 2500
    })
    .await;
    let elapsed = started.elapsed();
    eprintln!("5,000 events stored in {elapsed:?}");
    assert_eq!(count(&h.pool, "job_log").await, 2500);
    worker.stop().await;
    assert_eq!(
        h.queue_counts(&h.config.names().persist_queue()).await,
        (0, 0)
    );
    h.cleanup().await;
}

#[tokio::test]
async fn a_mysql_outage_keeps_events_unacked_until_a_restart() {
    let h = Harness::start().await;
    let events: Vec<Event> = (0..20)
        .map(|i| triggered(&format!("t-{i}"), 1, 200, T0 + i))
        .collect();
    h.publish(&events).await;
    let queue = h.config.names().persist_queue();

    let closed = rondo_history::connect_options("mysql://rondo:rondo@127.0.0.1:1/rondo").unwrap();
    let dead_pool = MySqlPoolOptions::new()
        .acquire_timeout(Duration::from_millis(300))
        .connect_lazy_with(closed);
    let worker = h.spawn_worker(h.config.clone(), dead_pool);
    // Taken by the worker (none ready, one consumer) but never acked …
    eventually("deliveries held by the worker", || async {
        h.queue_counts(&queue).await == (0, 1)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(count(&h.pool, "job_log").await, 0);
    worker.stop().await;
    // … so they are back in the queue once it stops.
    eventually("deliveries requeued", || async {
        h.queue_counts(&queue).await == (20, 0)
    })
    .await;

    let worker = h.worker();
    eventually("events stored after the restart", || async {
        count(&h.pool, "job_log").await == 20
    })
    .await;
    eventually("everything acked", || async {
        h.queue_counts(&queue).await.0 == 0
    })
    .await;
    worker.stop().await;
    assert_eq!(h.queue_counts(&queue).await, (0, 0));
    h.cleanup().await;
}
