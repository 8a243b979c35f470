//! Fake executors for dispatcher tests: registered in Redis exactly as real
//! executors register (the `registry:<app>` score and the `executor:<id>`
//! hash, renewed every 200 ms) with a durable queue each, but nothing
//! consuming it. A test can make one stale (FAILOVER), busy with jobs
//! (BUSYOVER) or leave, then read how many triggers each queue holds.
//! Their queues are removed with the [`World`] they start in.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicAckOptions, BasicGetOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use rondo_core::redis::Pool;
use rondo_core::{Names, Trigger, TriggerBatch, amqp, clock};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::World;

/// How often the fake executors beat.
const BEAT_EVERY: Duration = Duration::from_millis(200);

/// What a fake executor reports.
#[derive(Debug, Clone, Default)]
struct Report {
    /// Its heartbeat is written this far in the past.
    lag_ms: i64,
    /// Its `running_jobs` field.
    running_jobs: String,
}

/// A group of fake executors of one app; they stop beating when dropped.
pub struct FakeExecutors {
    names: Names,
    pool: Pool,
    app: String,
    queues: BTreeMap<String, String>,
    reports: Arc<Mutex<BTreeMap<String, Report>>>,
    conn: Connection,
    channel: Channel,
    beat: JoinHandle<()>,
}

impl FakeExecutors {
    /// Declares a queue per executor (removed with `world`), registers them
    /// and keeps them beating.
    pub async fn start(world: &World, app: &str, ids: &[&str]) -> FakeExecutors {
        let config = &world.config;
        let names = config.names();
        let pool = rondo_core::redis::pool(&config.redis).expect("redis pool");
        let conn = amqp::connect(&config.amqp.url, "fake-executors")
            .await
            .expect("amqp");
        let channel = amqp::confirm_channel(&conn).await.expect("channel");
        amqp::declare_topology(&channel, &names)
            .await
            .expect("topology");
        let mut queues = BTreeMap::new();
        for id in ids {
            world.executor_queue(app, id);
            let queue = amqp::declare_executor_queue(&channel, &names, app, id)
                .await
                .expect("executor queue");
            queues.insert((*id).to_owned(), queue);
        }
        let reports: BTreeMap<String, Report> = ids
            .iter()
            .map(|id| ((*id).to_owned(), Report::default()))
            .collect();
        let reports = Arc::new(Mutex::new(reports));
        beat_all(&pool, &names, app, &reports).await;
        let beat = tokio::spawn(beat_forever(
            pool.clone(),
            names.clone(),
            app.to_owned(),
            reports.clone(),
        ));
        FakeExecutors {
            names,
            pool,
            app: app.to_owned(),
            queues,
            reports,
            conn,
            channel,
            beat,
        }
    }

    /// Makes an executor's heartbeat `lag_ms` old from now on.
    pub async fn set_heartbeat_lag(&self, id: &str, lag_ms: i64) {
        self.update(id, |r| r.lag_ms = lag_ms).await;
    }

    /// Sets an executor's `running_jobs`.
    pub async fn set_running(&self, id: &str, jobs: &[u64]) {
        let list: Vec<String> = jobs.iter().map(u64::to_string).collect();
        self.update(id, |r| r.running_jobs = list.join(",")).await;
    }

    /// Changes a report and writes it at once. The lock is held across the
    /// write, so a background beat never overwrites it with an older state.
    async fn update(&self, id: &str, change: impl FnOnce(&mut Report)) {
        let mut reports = self.reports.lock().await;
        change(reports.get_mut(id).expect("a known executor"));
        write_beats(&self.pool, &self.names, &self.app, &reports).await;
    }

    /// Deregisters an executor as a graceful shutdown does (its queue stays).
    pub async fn remove(&self, id: &str) {
        // Held until the executor is gone, so no beat re-registers it.
        let mut reports = self.reports.lock().await;
        reports.remove(id);
        let mut conn = self.pool.get().await.expect("redis");
        let () = redis::pipe()
            .zrem(self.names.registry(&self.app), id)
            .ignore()
            .del(self.names.executor(id))
            .ignore()
            .query_async(&mut conn)
            .await
            .expect("deregister");
        drop(reports);
    }

    /// Messages waiting in each executor's queue.
    pub async fn depths(&self) -> HashMap<String, u32> {
        let mut depths = HashMap::new();
        for (id, queue) in &self.queues {
            let opts = QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            };
            let q = self
                .channel
                .queue_declare(queue.as_str().into(), opts, FieldTable::default())
                .await
                .expect("passive declare");
            depths.insert(id.clone(), q.message_count());
        }
        depths
    }

    /// Takes every trigger waiting in an executor's queue.
    pub async fn drain(&self, id: &str) -> Vec<Trigger> {
        let queue = &self.queues[id];
        let mut triggers = Vec::new();
        while let Some(msg) = self
            .channel
            .basic_get(queue.as_str().into(), BasicGetOptions::default())
            .await
            .expect("basic.get")
        {
            let batch: TriggerBatch = serde_json::from_slice(&msg.data).expect("a trigger batch");
            triggers.extend(batch.triggers);
            msg.ack(BasicAckOptions::default()).await.expect("ack");
        }
        triggers
    }

    /// Stops beating and closes the broker connection.
    pub async fn stop(self) {
        self.beat.abort();
        let _ = self.conn.close(200, "bye".into()).await;
    }
}

impl Drop for FakeExecutors {
    /// No beat outlives the fakes: none re-registers an executor once the
    /// world removes the namespace.
    fn drop(&mut self) {
        self.beat.abort();
    }
}

async fn beat_forever(
    pool: Pool,
    names: Names,
    app: String,
    reports: Arc<Mutex<BTreeMap<String, Report>>>,
) {
    loop {
        tokio::time::sleep(BEAT_EVERY).await;
        beat_all(&pool, &names, &app, &reports).await;
    }
}

async fn beat_all(
    pool: &Pool,
    names: &Names,
    app: &str,
    reports: &Mutex<BTreeMap<String, Report>>,
) {
    let reports = reports.lock().await;
    write_beats(pool, names, app, &reports).await;
}

/// Writes every executor's registry score and hash, as a real beat does.
async fn write_beats(pool: &Pool, names: &Names, app: &str, reports: &BTreeMap<String, Report>) {
    let now = clock::now_ms();
    let mut pipe = redis::pipe();
    for (id, report) in reports {
        let beat_ms = now - report.lag_ms;
        let fields = [
            ("app", app.to_owned()),
            ("host", "127.0.0.1".to_owned()),
            ("handlers", "demo".to_owned()),
            ("started_ms", now.to_string()),
            ("heartbeat_ms", beat_ms.to_string()),
            ("running_jobs", report.running_jobs.clone()),
        ];
        pipe.zadd(names.registry(app), id, beat_ms)
            .ignore()
            .hset_multiple(names.executor(id), &fields)
            .ignore();
    }
    let Ok(mut conn) = pool.get().await else {
        return;
    };
    let _: Result<(), _> = pipe.query_async(&mut conn).await;
}
