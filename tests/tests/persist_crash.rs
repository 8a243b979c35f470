//! The persistence worker (the real `rondo-persist-worker` binary) is
//! killed with `kill -9` in the middle of a large stream of events, the
//! stream goes on, the worker is restarted, and MySQL ends with every event
//! stored exactly once: one `job_log` row per trigger with both its trigger
//! and its result, and every log line once.
//!
//! What the kill interrupts (a transaction in flight, a batch committed but
//! not acked, deliveries taken but not written) is redelivered by RabbitMQ;
//! the idempotent upserts must turn that into the same rows.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use rondo_core::event::{LogLine, LogLines, TriggerRecord};
use rondo_core::trigger::code;
use rondo_core::{BlockStrategy, Config, Event, ExecResult, Trigger, TriggerType, amqp};
use rondo_testkit::{Cluster, World, eventually};
use sqlx::MySqlPool;

/// Triggers in the stream; each has a trigger, a result and a log event.
const TRIGGERS: usize = 10_000;
/// Lines in each trigger's log event.
const LINES_PER_TRIGGER: usize = 2;
/// Triggers per chunk: one message of each kind (an array of this many
/// events) per chunk.
const CHUNK: usize = 50;
/// Pause between chunks: the stream lasts about 8 s, long enough to kill
/// and restart the worker while it goes on.
const CHUNK_EVERY: Duration = Duration::from_millis(40);
/// Rows stored before the kill: the worker is well into the stream.
const KILL_AFTER_ROWS: i64 = 1500;
const JOB_ID: u64 = 42;
const FIRST_FIRE_MS: i64 = 1_700_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_mid_stream_then_restart_stores_every_event_exactly_once() {
    let mut cluster = Cluster::new(World::new("pcrash").await);
    let (config, db) = (cluster.config().clone(), cluster.db().clone());
    let amqp_conn = amqp::connect(&config.amqp.url, "persist-crash-test")
        .await
        .expect("amqp");
    let channel = amqp::confirm_channel(&amqp_conn).await.expect("channel");
    let names = config.names();
    amqp::declare_topology(&channel, &names)
        .await
        .expect("topology");

    cluster.spawn_persist_worker();
    let published = Arc::new(AtomicUsize::new(0));
    let publisher = tokio::spawn(publish_stream(config.clone(), published.clone()));

    // Kill -9 once the worker is well into the stream, before its end.
    let stored_at_kill = wait_for_rows(&mut cluster).await;
    cluster.kill_persist_worker().await;
    let published_at_kill = published.load(Ordering::SeqCst);
    assert!(
        published_at_kill < TRIGGERS,
        "the stream ended before the kill ({published_at_kill} triggers published): nothing was tested"
    );
    eprintln!(
        "kill -9 after {stored_at_kill} rows stored, {published_at_kill} of {TRIGGERS} triggers published; {}",
        counts(&db).await
    );

    // The stream goes on to its end with no worker; the backlog waits in
    // the queue (with what the killed worker held unacked).
    let stream_time = publisher.await.expect("publisher task");
    let events = TRIGGERS * 3;
    eprintln!(
        "stream: {events} events ({} log lines) in {} messages over {stream_time:?}: {:.0} events/s",
        TRIGGERS * LINES_PER_TRIGGER,
        TRIGGERS / CHUNK * 3,
        events as f64 / stream_time.as_secs_f64()
    );
    let persist = names.persist_queue();
    let backlog = queue_depth(&amqp_conn, &persist).await;
    let before_restart = counts(&db).await;
    assert!(
        before_restart.complete < TRIGGERS as i64,
        "the killed worker cannot have stored everything: {before_restart}"
    );
    let restarted = Instant::now();
    cluster.spawn_persist_worker();
    let done = wait_until_complete(&mut cluster).await;
    eprintln!(
        "restarted with {backlog} messages queued ({before_restart}); drained in {:?}; {done}",
        restarted.elapsed()
    );
    eventually(
        "the persist queue to drain",
        Duration::from_secs(30),
        || {
            let conn = &amqp_conn;
            let persist = persist.clone();
            async move { (queue_depth(conn, &persist).await == 0).then_some(()) }
        },
    )
    .await;
    let dead = queue_depth(&amqp_conn, &names.dead_queue()).await;
    assert_eq!(dead, 0, "nothing is dead-lettered");

    // SIGTERM (the graceful drain), then wait for the exit: once the worker
    // is gone, everything it took is committed, so the counts are final.
    let exit = cluster
        .terminate_persist_worker(Duration::from_secs(20))
        .await
        .expect("the worker exits within 20 s of SIGTERM");
    assert!(exit.success(), "the worker exits cleanly: {exit}");
    assert_exactly_once(&db).await;
    let _ = amqp_conn.close(200, "bye".into()).await;
    cluster.stop().await;
}

/// Fails at once, with the worker's log, if it exited.
fn assert_running(cluster: &mut Cluster) {
    if let Some(exit) = cluster.persist_worker_exit() {
        let log = cluster.log_dir.join("persist-worker.log");
        let log = std::fs::read_to_string(log).unwrap_or_default();
        panic!("the persist worker exited ({exit}):\n{log}");
    }
}

/// Waits until [`KILL_AFTER_ROWS`] rows are stored; fails at once, with
/// its log, if the worker exits (say, a binary older than the schema).
async fn wait_for_rows(cluster: &mut Cluster) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert_running(cluster);
        let rows = counts(cluster.db()).await.rows;
        if rows >= KILL_AFTER_ROWS {
            return rows;
        }
        assert!(
            Instant::now() < deadline,
            "only {rows} rows stored after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Publishes the whole stream, chunk by chunk, on its own connection;
/// `published` counts the triggers whose three messages are confirmed.
/// Returns how long the stream took.
async fn publish_stream(config: Config, published: Arc<AtomicUsize>) -> Duration {
    let conn = amqp::connect(&config.amqp.url, "persist-crash-publisher")
        .await
        .expect("publisher amqp");
    let channel = amqp::confirm_channel(&conn)
        .await
        .expect("publisher channel");
    let names = config.names();
    let started = Instant::now();
    let mut pace = tokio::time::interval(CHUNK_EVERY);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for first in (0..TRIGGERS).step_by(CHUNK) {
        pace.tick().await;
        let ids = first..first + CHUNK;
        // Results before log lines before triggers in every other chunk:
        // the worker must merge whatever arrives first.
        let (triggered, logged, results): (Vec<_>, Vec<_>, Vec<_>) = (
            ids.clone().map(triggered).collect(),
            ids.clone().map(logged).collect(),
            ids.map(result).collect(),
        );
        let mut messages = [triggered, logged, results];
        if (first / CHUNK) % 2 == 1 {
            messages.reverse();
        }
        for events in &messages {
            amqp::publish_events(&channel, &names, events)
                .await
                .expect("publish events");
        }
        published.store(first + CHUNK, Ordering::SeqCst);
    }
    let elapsed = started.elapsed();
    let _ = conn.close(200, "bye".into()).await;
    elapsed
}

fn trigger_id(i: usize) -> String {
    format!("{JOB_ID}-{}-0", fire_ms(i))
}

fn fire_ms(i: usize) -> i64 {
    FIRST_FIRE_MS + i as i64 * 1000
}

fn triggered(i: usize) -> Event {
    Event::Triggered(TriggerRecord {
        trigger: Trigger {
            trigger_id: trigger_id(i),
            job_id: JOB_ID,
            group: "crash".into(),
            executor_id: "crash-1".into(),
            handler: "record".into(),
            params: String::new(),
            trigger_type: TriggerType::Cron,
            fire_ms: fire_ms(i),
            sent_ms: fire_ms(i) + 3,
            shard_index: 0,
            shard_total: 1,
            timeout_s: 0,
            block: BlockStrategy::SerialExecution,
            retry_count: 0,
            script: None,
            secrets: Default::default(),
        },
        code: code::SUCCESS,
        msg: "sent".into(),
    })
}

fn result(i: usize) -> Event {
    Event::Result(ExecResult {
        trigger_id: trigger_id(i),
        job_id: JOB_ID,
        executor_id: "crash-1".into(),
        fire_ms: fire_ms(i),
        start_ms: fire_ms(i) + 5,
        end_ms: fire_ms(i) + 20,
        code: code::SUCCESS,
        msg: "ok".into(),
        retryable: true,
    })
}

fn logged(i: usize) -> Event {
    Event::Log(LogLines {
        trigger_id: trigger_id(i),
        job_id: JOB_ID,
        first_seq: 0,
        lines: (0..LINES_PER_TRIGGER)
            .map(|n| LogLine {
                ts_ms: fire_ms(i) + 10 + n as i64,
                text: format!("line {n} of trigger {i}"),
            })
            .collect(),
    })
}

/// What MySQL holds so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    rows: i64,
    distinct_triggers: i64,
    complete: i64,
    lines: i64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "job_log rows {} ({} distinct, {} with trigger and result), job_log_line rows {}",
            self.rows, self.distinct_triggers, self.complete, self.lines
        )
    }
}

async fn counts(db: &MySqlPool) -> Counts {
    let (rows, distinct_triggers, complete): (i64, i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT trigger_id), \
         CAST(COALESCE(SUM(trigger_code IS NOT NULL AND handle_code IS NOT NULL), 0) AS SIGNED) \
         FROM job_log",
    )
    .fetch_one(db)
    .await
    .expect("count job_log");
    let lines: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_log_line")
        .fetch_one(db)
        .await
        .expect("count job_log_line");
    Counts {
        rows,
        distinct_triggers,
        complete,
        lines,
    }
}

/// Waits until every trigger is complete and every line stored; fails if
/// the counts stop moving for 20 s before that.
async fn wait_until_complete(cluster: &mut Cluster) -> Counts {
    const STALL: Duration = Duration::from_secs(20);
    let lines = (TRIGGERS * LINES_PER_TRIGGER) as i64;
    let db = cluster.db().clone();
    let mut last = counts(&db).await;
    let mut last_change = Instant::now();
    loop {
        if last.complete >= TRIGGERS as i64 && last.lines >= lines {
            return last;
        }
        assert_running(cluster);
        assert!(
            last_change.elapsed() < STALL,
            "the worker stopped making progress: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = counts(&db).await;
        if now != last {
            last = now;
            last_change = Instant::now();
        }
    }
}

async fn assert_exactly_once(db: &MySqlPool) {
    let c = counts(db).await;
    let triggers = TRIGGERS as i64;
    assert_eq!(c.rows, triggers, "one job_log row per trigger: {c}");
    assert_eq!(c.distinct_triggers, triggers, "no trigger twice: {c}");
    assert_eq!(
        c.complete, triggers,
        "trigger_code and handle_code set: {c}"
    );
    assert_eq!(
        c.lines,
        (TRIGGERS * LINES_PER_TRIGGER) as i64,
        "every log line once: {c}"
    );
    let (bad_codes, lines_per_trigger): (i64, i64) = sqlx::query_as(
        "SELECT \
         (SELECT COUNT(*) FROM job_log WHERE trigger_code <> 200 OR handle_code <> 200), \
         (SELECT COUNT(DISTINCT trigger_id) FROM job_log_line)",
    )
    .fetch_one(db)
    .await
    .expect("check codes");
    assert_eq!(bad_codes, 0, "every trigger and result stored as sent");
    assert_eq!(lines_per_trigger, triggers, "every trigger has its lines");
}

/// Ready messages in a queue.
async fn queue_depth(conn: &lapin::Connection, queue: &str) -> u32 {
    let ch = conn.create_channel().await.expect("channel");
    let opts = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let q = ch
        .queue_declare(queue.into(), opts, FieldTable::default())
        .await
        .expect("queue exists");
    let _ = ch.close(200, "ok".into()).await;
    q.message_count()
}
