//! Shared helpers of the integration tests: a fresh database and namespace
//! per test, event fixtures, a running worker, table snapshots.

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::time::Duration;

use lapin::options::{BasicGetOptions, BasicPublishOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use rondo_core::event::{AlarmRecord, LogLine, LogLines, TriggerRecord, alarm_status};
use rondo_core::model::ScheduleType;
use rondo_core::trigger::{ExecResult, Trigger, TriggerType};
use rondo_core::{BlockStrategy, Config, Event, Group, Job, Misfire, Routing, amqp, testkit};
use rondo_persist_worker::{Worker, testing};
use sqlx::MySqlPool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a test waits for the worker before failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A test's own database and AMQP namespace, removed when dropped (also
/// when the test panics).
pub struct Harness {
    pub config: Config,
    pub pool: MySqlPool,
    amqp: Connection,
    channel: Channel,
    _namespace: NamespaceGuard,
    _db: DbGuard,
}

/// Drops a test database when dropped.
pub struct DbGuard {
    pub url: String,
    pub name: String,
}

impl Drop for DbGuard {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        block_on_side_thread(async move { testing::drop_database(&url, &name).await });
    }
}

/// Deletes a test namespace's queues and exchanges when dropped.
struct NamespaceGuard(Config);

impl Drop for NamespaceGuard {
    fn drop(&mut self) {
        let config = self.0.clone();
        block_on_side_thread(async move { testkit::cleanup_amqp(&config, &[]).await });
    }
}

/// Runs async cleanup from `Drop`, on its own thread and runtime so that it
/// works inside (and during a panic of) the test's runtime.
fn block_on_side_thread<F: Future<Output = ()> + Send + 'static>(cleanup: F) {
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("cleanup runtime");
        rt.block_on(cleanup);
    })
    .join();
}

/// A fresh migrated database with its guard.
pub async fn fresh_database() -> (MySqlPool, DbGuard) {
    let (pool, url, name) = testing::fresh_database(&testkit::config("persist").mysql.url).await;
    (pool, DbGuard { url, name })
}

/// A fresh database without any migration, with its guard.
pub async fn empty_database() -> (MySqlPool, DbGuard) {
    let (pool, url, name) = testing::empty_database(&testkit::config("persist").mysql.url).await;
    (pool, DbGuard { url, name })
}

impl Harness {
    /// A fresh database, namespace and declared topology (so events
    /// published before the worker starts wait in the persist queue).
    pub async fn start() -> Harness {
        rondo_core::telemetry::init(&rondo_core::config::LogConfig {
            format: "plain".into(),
            filter: "warn".into(),
        });
        let mut config = testkit::config("persist");
        config.persist.linger_ms = 20;
        config.persist.shutdown_grace_ms = 3000;
        let (pool, db) = fresh_database().await;
        config.mysql.url = db.url.clone();
        let namespace = NamespaceGuard(config.clone());
        let amqp = amqp::connect(&config.amqp.url, "persist-test")
            .await
            .unwrap();
        let channel = amqp::confirm_channel(&amqp).await.unwrap();
        amqp::declare_topology(&channel, &config.names())
            .await
            .unwrap();
        Harness {
            config,
            pool,
            amqp,
            channel,
            _namespace: namespace,
            _db: db,
        }
    }

    /// Starts a worker with this harness's config on `pool`.
    pub fn spawn_worker(&self, config: Config, pool: MySqlPool) -> RunningWorker {
        let shutdown = CancellationToken::new();
        let handle = tokio::spawn(Worker::new(config, pool).run(shutdown.clone()));
        RunningWorker { shutdown, handle }
    }

    pub fn worker(&self) -> RunningWorker {
        self.spawn_worker(self.config.clone(), self.pool.clone())
    }

    /// Publishes each event as its own message (confirms pipelined).
    pub async fn publish(&self, events: &[Event]) {
        let bodies: Vec<(String, Vec<u8>)> = events
            .iter()
            .map(|e| {
                (
                    e.routing_key().to_owned(),
                    serde_json::to_vec(&[e]).unwrap(),
                )
            })
            .collect();
        self.publish_bodies(&bodies).await;
    }

    /// Publishes raw bodies with their routing keys, confirms pipelined.
    pub async fn publish_bodies(&self, bodies: &[(String, Vec<u8>)]) {
        let exchange = self.config.names().events_exchange();
        let mut confirms = Vec::with_capacity(bodies.len());
        for (key, body) in bodies {
            let props = BasicProperties::default().with_delivery_mode(amqp::PERSISTENT);
            let confirm = self
                .channel
                .basic_publish(
                    exchange.as_str().into(),
                    key.as_str().into(),
                    BasicPublishOptions::default(),
                    body,
                    props,
                )
                .await
                .unwrap();
            confirms.push(confirm);
        }
        for confirm in confirms {
            assert!(confirm.await.unwrap().is_ack());
        }
    }

    /// (ready messages, consumers) of a queue.
    pub async fn queue_counts(&self, queue: &str) -> (u32, u32) {
        let ch = self.amqp.create_channel().await.unwrap();
        let opts = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let q = ch
            .queue_declare(queue.into(), opts, FieldTable::default())
            .await
            .unwrap();
        let _ = ch.close(200, "ok".into()).await;
        (q.message_count(), q.consumer_count())
    }

    /// Takes every message of the dead queue: (body, x-rondo-reason).
    pub async fn take_dead(&self) -> Vec<(Vec<u8>, String)> {
        let queue = self.config.names().dead_queue();
        let opts = BasicGetOptions { no_ack: true };
        let mut out = Vec::new();
        while let Some(msg) = self
            .channel
            .basic_get(queue.as_str().into(), opts)
            .await
            .unwrap()
        {
            let headers = msg
                .delivery
                .properties
                .headers()
                .clone()
                .unwrap_or_default();
            let reason = match headers.inner().get(&ShortString::from("x-rondo-reason")) {
                Some(AMQPValue::LongString(s)) => s.to_string(),
                other => panic!("no x-rondo-reason header: {other:?}"),
            };
            out.push((msg.delivery.data, reason));
        }
        out
    }

    /// Waits until the dead queue holds `n` messages and takes them.
    pub async fn wait_dead(&self, n: usize) -> Vec<(Vec<u8>, String)> {
        let queue = self.config.names().dead_queue();
        eventually("dead-lettered messages", || async {
            self.queue_counts(&queue).await.0 as usize >= n
        })
        .await;
        self.take_dead().await
    }

    /// Closes the connections, then the guards drop the database and the
    /// namespace.
    pub async fn cleanup(self) {
        self.pool.close().await;
        let _ = self.amqp.close(200, "bye".into()).await;
    }
}

pub struct RunningWorker {
    shutdown: CancellationToken,
    handle: JoinHandle<anyhow::Result<()>>,
}

impl RunningWorker {
    /// Cancels and waits for the drain.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(PATIENCE, self.handle)
            .await
            .expect("worker stops within the patience")
            .expect("worker task")
            .expect("worker result");
    }
}

/// Polls `check` every 50 ms until it holds; panics after [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn count(pool: &MySqlPool, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM `{table}`");
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Every stored column of every table rondo writes (not `updated_at`), one
/// line per row, in key order.
pub async fn snapshot(pool: &MySqlPool) -> Vec<String> {
    const QUERIES: [&str; 4] = [
        "SELECT CONCAT_WS('|', 'group', app, title, updated_ms, deleted) FROM executor_group ORDER BY app",
        "SELECT CONCAT_WS('|', 'job', id, group_app, description, schedule_type, schedule_conf, \
         misfire, routing, block_strategy, handler, COALESCE(params, '-'), timeout_s, retries, \
         COALESCE(child_jobs, '-'), retry_backoff_s, alarm_email, alarm_webhook, enabled, \
         created_ms, updated_ms, deleted) FROM job ORDER BY id",
        "SELECT CONCAT_WS('|', 'log', trigger_id, fire_ms, job_id, group_app, executor_id, handler, \
         COALESCE(params, '-'), shard_index, shard_total, retry_count, trigger_type, \
         COALESCE(trigger_time, '-'), COALESCE(trigger_code, '-'), COALESCE(trigger_msg, '-'), \
         COALESCE(handle_start, '-'), COALESCE(handle_time, '-'), COALESCE(handle_code, '-'), \
         COALESCE(handle_msg, '-'), alarm_status, COALESCE(alarm_msg, '-')) \
         FROM job_log ORDER BY trigger_id, fire_ms",
        "SELECT CONCAT_WS('|', 'line', trigger_id, seq, ts_ms, line) FROM job_log_line \
         ORDER BY trigger_id, seq",
    ];
    let mut rows = Vec::new();
    for sql in QUERIES {
        let part: Vec<String> = sqlx::query_scalar(sql).fetch_all(pool).await.unwrap();
        rows.extend(part);
    }
    rows
}

// ---- fixtures ----

pub const T0: i64 = 1_700_000_000_000;

pub fn group(app: &str, title: &str, updated_ms: i64) -> Event {
    Event::GroupUpserted {
        group: Group {
            app: app.into(),
            title: title.into(),
            updated_ms,
        },
    }
}

pub fn job(id: u64, params: &str, updated_ms: i64) -> Event {
    Event::JobUpserted {
        job: Job {
            id,
            group: "demo".into(),
            description: format!("job {id}"),
            schedule_type: ScheduleType::Cron,
            schedule_conf: "0/5 * * * * ?".into(),
            misfire: Misfire::FireOnceNow,
            routing: Routing::Round,
            block: BlockStrategy::DiscardLater,
            handler: "echo".into(),
            params: params.into(),
            timeout_s: 30,
            retries: 2,
            child_jobs: vec![id + 100, id + 200],
            retry_backoff_s: 15,
            alarm_email: "ops@example.com".into(),
            alarm_webhook: format!("https://hooks.example.com/rondo/{id}"),
            enabled: true,
            created_ms: T0,
            updated_ms,
        },
    }
}

pub fn trigger(trigger_id: &str, job_id: u64, sent_ms: i64) -> Trigger {
    Trigger {
        trigger_id: trigger_id.into(),
        job_id,
        group: "demo".into(),
        executor_id: "demo-host-1".into(),
        handler: "echo".into(),
        params: "p".into(),
        trigger_type: TriggerType::Cron,
        fire_ms: T0,
        sent_ms,
        shard_index: 0,
        shard_total: 1,
        timeout_s: 30,
        block: BlockStrategy::SerialExecution,
        retry_count: 0,
    }
}

pub fn triggered(trigger_id: &str, job_id: u64, code: i32, sent_ms: i64) -> Event {
    Event::Triggered(TriggerRecord {
        trigger: trigger(trigger_id, job_id, sent_ms),
        code,
        msg: format!("sent with {code}"),
    })
}

pub fn result(trigger_id: &str, job_id: u64, code: i32, end_ms: i64) -> Event {
    Event::Result(ExecResult {
        trigger_id: trigger_id.into(),
        job_id,
        executor_id: "demo-host-1".into(),
        fire_ms: T0,
        start_ms: end_ms - 5,
        end_ms,
        code,
        msg: format!("ended with {code}"),
        retryable: true,
    })
}

pub fn log(trigger_id: &str, first_seq: u32, texts: &[&str]) -> Event {
    Event::Log(LogLines {
        trigger_id: trigger_id.into(),
        job_id: 1,
        first_seq,
        lines: texts
            .iter()
            .enumerate()
            .map(|(i, t)| LogLine {
                ts_ms: T0 + i64::from(first_seq) + i as i64,
                text: (*t).into(),
            })
            .collect(),
    })
}

/// The outcome of alarming for a failed trigger (fired at [`T0`]).
pub fn alarm(trigger_id: &str, job_id: u64, status: i32, msg: &str) -> Event {
    Event::Alarm(AlarmRecord {
        trigger_id: trigger_id.into(),
        job_id,
        fire_ms: T0,
        status,
        msg: msg.into(),
    })
}

/// A history touching every rule, in the order things happened.
pub fn story() -> Vec<Event> {
    vec![
        group("demo", "Demo v1", T0),
        group("demo", "Demo v2", T0 + 10),
        group("gone", "Gone", T0),
        Event::GroupDeleted {
            app: "gone".into(),
            at_ms: T0 + 20,
        },
        job(1, "v1", T0),
        job(1, "v2", T0 + 10),
        job(2, "x", T0),
        Event::JobDeleted {
            id: 2,
            at_ms: T0 + 30,
        },
        // A merged trigger: sent, ran, logged.
        triggered("1-a", 1, 200, T0 + 1),
        log("1-a", 0, &["start", "working"]),
        log("1-a", 2, &["done"]),
        result("1-a", 1, 200, T0 + 50),
        // A trigger that could not be published: no result. Its alarm
        // failed, then a redelivery alarmed again and got through.
        triggered("1-b", 1, 500, T0 + 2),
        alarm("1-b", 1, alarm_status::FAILED, "webhook: HTTP 500"),
        alarm("1-b", 1, alarm_status::SENT, "sent: webhook"),
        // A result whose trigger event never arrives; nobody to alarm.
        result("1-c", 1, 500, T0 + 60),
        alarm("1-c", 1, alarm_status::NOT_NEEDED, "no alarm channel"),
        // An alarm whose trigger and result events never arrive.
        alarm("1-e", 1, alarm_status::FAILED, "email: connection refused"),
        // Published twice in a crash window: the confirmed one wins.
        triggered("1-d", 1, 200, T0 + 3),
        triggered("1-d", 1, 500, T0 + 4),
        // Two results (say, "lost" then the real one): the later end wins.
        // Each was alarmed and both alarms failed: the tie is broken by the
        // message, whatever the order.
        result("1-d", 1, 500, T0 + 65),
        alarm("1-d", 1, alarm_status::FAILED, "webhook: timed out"),
        result("1-d", 1, 502, T0 + 70),
        alarm("1-d", 1, alarm_status::FAILED, "email: 554 rejected"),
    ]
}

/// The story reversed, then again rotated: every event twice, most of them
/// after something newer.
pub fn scrambled(story: &[Event]) -> Vec<Event> {
    let mut out: Vec<Event> = story.iter().rev().cloned().collect();
    let mut rotated = story.to_vec();
    rotated.rotate_left(story.len() / 3);
    out.extend(rotated);
    out
}
