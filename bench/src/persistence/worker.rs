//! rondo's side: the persistence worker (in-process, [`Worker`]) draining a
//! backlog, then keeping up with a stream; and `write_events` alone, the
//! worker's MySQL half without the broker, to split the time between the
//! two.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures_util::{StreamExt as _, TryStreamExt as _};
use lapin::{Channel, Connection};
use rondo_core::{Config, Event, Names, amqp};
use rondo_history::{History, write_events};
use rondo_persist_worker::Worker;
use sqlx::MySqlPool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cpu::{CpuShare, Snapshot};

/// Confirms awaited at once while publishing (the broker's pipelined
/// ceiling needs a deep window).
const PUBLISH_WINDOW: usize = 128;
/// Give up when the stored rows stop growing for this long.
const STALL: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(20);

/// One measured window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub elapsed: Duration,
    pub cpu: CpuShare,
}

/// Publishes every message before the worker starts, then measures from
/// its start until every `job_log` row has both sides. Returns the
/// publishing time and the drain.
pub(crate) async fn drain_backlog(
    config: &Config,
    db: &MySqlPool,
    messages: &[Vec<Event>],
    triggers: usize,
    poll: Duration,
) -> anyhow::Result<(Duration, Window)> {
    let (conn, channel) = publisher(config).await?;
    let published = publish_all(&channel, &config.names(), messages).await?;
    let _ = conn.close(200, "published".into()).await;
    let running = RunningWorker::start(config).await?;
    let before = Snapshot::take();
    let started = Instant::now();
    let complete = wait_complete(db, triggers, poll, &running.task).await;
    let window = Window {
        elapsed: started.elapsed(),
        cpu: Snapshot::take().since(&before),
    };
    running.stop().await;
    complete?;
    Ok((published, window))
}

/// Starts the worker on an empty queue, then publishes every message and
/// measures from the first publish until every row has both sides. Returns
/// the publishing time and the whole window.
pub(crate) async fn steady_state(
    config: &Config,
    db: &MySqlPool,
    messages: &[Vec<Event>],
    triggers: usize,
    poll: Duration,
) -> anyhow::Result<(Duration, Window)> {
    let (conn, channel) = publisher(config).await?;
    let running = RunningWorker::start(config).await?;
    let before = Snapshot::take();
    let started = Instant::now();
    let published = publish_all(&channel, &config.names(), messages).await;
    let complete = match published {
        Ok(_) => wait_complete(db, triggers, poll, &running.task).await,
        Err(_) => Ok(()),
    };
    let window = Window {
        elapsed: started.elapsed(),
        cpu: Snapshot::take().since(&before),
    };
    running.stop().await;
    let _ = conn.close(200, "published".into()).await;
    let published = published?;
    complete?;
    Ok((published, window))
}

/// `write_events` on batches of `batch_size` events, one after the other,
/// with no broker and no JSON: the worker's MySQL half. Returns its time.
pub(crate) async fn write_path(
    db: &MySqlPool,
    messages: &[Vec<Event>],
    batch_size: usize,
) -> anyhow::Result<Duration> {
    let events: Vec<Event> = messages.iter().flatten().cloned().collect();
    let started = Instant::now();
    for batch in events.chunks(batch_size.max(1)) {
        let report = write_events(db, batch).await.context("write_events")?;
        if !report.rejected.is_empty() {
            bail!(
                "mysql rejected {} events: {:?}",
                report.rejected.len(),
                report.rejected[0]
            );
        }
    }
    Ok(started.elapsed())
}

async fn publisher(config: &Config) -> anyhow::Result<(Connection, Channel)> {
    let conn = amqp::connect(&config.amqp.url, "rondo-bench-publisher")
        .await
        .context("connecting to rabbitmq")?;
    let channel = amqp::confirm_channel(&conn)
        .await
        .context("confirm channel")?;
    // Declared before the first publish: a message published before the
    // persist queue exists would be dropped.
    amqp::declare_topology(&channel, &config.names())
        .await
        .context("declaring the topology")?;
    Ok((conn, channel))
}

/// Publishes every message with up to [`PUBLISH_WINDOW`] confirms pending.
async fn publish_all(
    channel: &Channel,
    names: &Names,
    messages: &[Vec<Event>],
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    futures_util::stream::iter(messages)
        .map(|events| amqp::publish_events(channel, names, events))
        .buffer_unordered(PUBLISH_WINDOW)
        .try_collect::<()>()
        .await
        .context("publishing events")?;
    Ok(started.elapsed())
}

/// Waits until `triggers` rows have a trigger code and a handle code.
async fn wait_complete(
    db: &MySqlPool,
    triggers: usize,
    poll: Duration,
    worker: &JoinHandle<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let mut last = -1;
    let mut last_change = Instant::now();
    loop {
        let complete = complete_rows(db).await?;
        if complete >= triggers as i64 {
            return Ok(());
        }
        if worker.is_finished() {
            bail!("the worker stopped with {complete} of {triggers} rows complete");
        }
        if complete != last {
            (last, last_change) = (complete, Instant::now());
        } else if last_change.elapsed() > STALL {
            bail!("no progress for {STALL:?}: {complete} of {triggers} rows complete");
        }
        tokio::time::sleep(poll).await;
    }
}

/// `job_log` rows holding both the trigger and the result.
pub(crate) async fn complete_rows(db: &MySqlPool) -> anyhow::Result<i64> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM job_log WHERE trigger_code IS NOT NULL AND handle_code IS NOT NULL",
    )
    .fetch_one(db)
    .await
    .context("counting complete job_log rows")
}

/// The worker running in this process on its own pool, as the binary
/// would run it (without the maintenance loop, which is not on the write
/// path).
struct RunningWorker {
    task: JoinHandle<anyhow::Result<()>>,
    shutdown: CancellationToken,
    pool: MySqlPool,
}

impl RunningWorker {
    async fn start(config: &Config) -> anyhow::Result<RunningWorker> {
        let history = History::connect(&config.mysql)
            .await
            .context("the worker's mysql pool")?;
        let pool = history.pool().clone();
        let shutdown = CancellationToken::new();
        let worker = Worker::new(config.clone(), history, Default::default());
        let task = tokio::spawn(worker.run(shutdown.clone()));
        Ok(RunningWorker {
            task,
            shutdown,
            pool,
        })
    }

    async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(STOP_GRACE, self.task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => {
                tracing::warn!(error = %format!("{error:#}"), "the worker failed")
            }
            Ok(Err(panicked)) => tracing::warn!(error = %panicked, "the worker panicked"),
            Err(_) => tracing::warn!("the worker did not stop within {STOP_GRACE:?}"),
        }
        self.pool.close().await;
    }
}
