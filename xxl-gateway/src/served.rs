//! One XXL-JOB executor as this gateway instance serves it: a rondo
//! executor of group `app` with its own durable queue.
//!
//! Three tasks per executor, every instance running them for every
//! executor of the fleet (so losing an instance loses nothing but a
//! connection):
//! * **beat**: `/beat` every `registry.lease_ms / 4`; each answer renews
//!   the executor's lease in rondo's registry, so routing stops within the
//!   lease once it stops answering (not XXL-JOB's 90 s).
//! * **registration**: the full registry hash (its `running_jobs` are the
//!   jobs with a trigger handed to it and not yet called back, from Redis,
//!   so every instance writes the same), at every `registry.heartbeat_ms`
//!   and within [`CHANGE_COALESCE`] of a change, while it answers.
//! * **consumer**: its queue, consumed while it answers (the hand-offs are
//!   `handoff`'s); while it does not, its triggers wait in the queue, and
//!   once its lease ran out the leader moves them to a live executor.
//!
//! Removed from the fleet (`/api/registryRemove`, no registration for
//! `xxl.registration_ttl_ms`, dropped from its group's list) it retires at
//! once (routing stops) and leaves once this instance stopped consuming.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, BasicQosOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use rondo_core::{Error, clock, registry};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::client::Target;
use crate::ctx::Ctx;
use crate::executors::Record;
use crate::wire::Generation;

/// Changes of `running_jobs` within this window are written together.
pub(crate) const CHANGE_COALESCE: Duration = Duration::from_millis(50);

pub(crate) struct Served {
    pub(crate) id: String,
    record: RwLock<Record>,
    /// When `/beat` was last answered (ms); 0: never.
    answered_ms: AtomicI64,
    /// Whether it answers: its queue is consumed only then.
    reachable: watch::Sender<bool>,
    /// `running_jobs` may have changed.
    dirty: Notify,
    /// Stops its tasks (removed from the fleet, or the gateway stops).
    pub(crate) stop: CancellationToken,
    /// Removed from the fleet (not only this gateway stopping): retire.
    removed: AtomicBool,
    /// Its hand-offs in progress.
    pub(crate) handoffs: TaskTracker,
}

impl Served {
    pub(crate) fn new(record: Record, stop: CancellationToken) -> Served {
        Served {
            id: record.id.clone(),
            record: RwLock::new(record),
            answered_ms: AtomicI64::new(0),
            reachable: watch::Sender::new(false),
            dirty: Notify::new(),
            stop,
            removed: AtomicBool::new(false),
            handoffs: TaskTracker::new(),
        }
    }

    pub(crate) fn record(&self) -> Record {
        self.record.read().expect("record lock").clone()
    }

    /// Takes what another instance (or a registration) changed.
    pub(crate) fn update(&self, record: Record) {
        let mut mine = self.record.write().expect("record lock");
        if record.generation.is_none() {
            // This instance may know it already; the record not yet.
            let generation = mine.generation;
            *mine = Record {
                generation,
                ..record
            };
        } else {
            *mine = record;
        }
    }

    pub(crate) fn target(&self) -> Target {
        let r = self.record.read().expect("record lock");
        Target {
            address: r.address.clone(),
            app: r.app.clone(),
            generation: r.generation.unwrap_or(Generation::Two),
        }
    }

    pub(crate) fn set_generation(&self, generation: Generation) {
        self.record.write().expect("record lock").generation = Some(generation);
    }

    pub(crate) fn is_reachable(&self) -> bool {
        *self.reachable.borrow()
    }

    /// A send found it unreachable: stop consuming now, before the next
    /// beat says so.
    pub(crate) fn unreachable(&self) {
        self.reachable
            .send_if_modified(|r| std::mem::replace(r, false));
    }

    pub(crate) fn jobs_changed(&self) {
        self.dirty.notify_one();
    }

    /// Removes it from this instance's service for good (it left the
    /// fleet): its tasks retire it from rondo's registry.
    pub(crate) fn remove(&self) {
        self.removed.store(true, Ordering::Relaxed);
        self.stop.cancel();
    }

    /// Runs the executor's tasks until it is removed or the gateway stops.
    pub(crate) async fn run(self: Arc<Self>, ctx: Arc<Ctx>) {
        let span = tracing::info_span!("xxl_executor", executor_id = %self.id);
        async move {
            let tasks = TaskTracker::new();
            tasks.spawn(self.clone().beat(ctx.clone()).in_current_span());
            tasks.spawn(self.clone().register(ctx.clone()).in_current_span());
            tasks.spawn(self.clone().consume(ctx.clone()).in_current_span());
            tasks.close();
            tasks.wait().await;
            if self.removed.load(Ordering::Relaxed)
                && let Err(e) = self.leave(&ctx).await
            {
                tracing::warn!(error = %e, "cannot remove the executor from the registry");
            }
        }
        .instrument(span)
        .await;
    }

    async fn beat(self: Arc<Self>, ctx: Arc<Ctx>) {
        let lease = ctx.lease();
        let mut tick = tokio::time::interval(ctx.registry.lease_renew());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let timeout = ctx.client.timeout().min(lease / 2);
        while !self.stop.is_cancelled() {
            tokio::select! {
                () = self.stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let answered = ctx.client.beat(&self.target(), timeout).await;
            let now = clock::now_ms();
            match answered {
                Ok(reply) if reply.is_success() => self.answered(&ctx, now).await,
                outcome => {
                    let since = self.answered_ms.load(Ordering::Relaxed);
                    if now - since >= lease.as_millis() as i64 && self.is_reachable() {
                        tracing::warn!(outcome = ?outcome, "the executor stopped answering /beat");
                        self.unreachable();
                    }
                }
            }
        }
    }

    async fn answered(&self, ctx: &Ctx, now: i64) {
        self.answered_ms.store(now, Ordering::Relaxed);
        if !self.removed.load(Ordering::Relaxed) {
            let app = self.record().app;
            let mut pipe = redis::pipe();
            registry::renew(&mut pipe, &ctx.names, &app, &self.id, now);
            if let Err(e) = ctx.runs.write(&pipe).await {
                tracing::warn!(error = %e, "cannot renew the executor's lease");
            }
        }
        if self
            .reachable
            .send_if_modified(|r| !std::mem::replace(r, true))
        {
            tracing::info!("the executor answers /beat");
        }
    }

    /// Writes the registry hash at every heartbeat and when `running_jobs`
    /// changed, while the executor answers.
    async fn register(self: Arc<Self>, ctx: Arc<Ctx>) {
        let heartbeat = Duration::from_millis(ctx.registry.heartbeat_ms);
        let mut reachable = self.reachable.subscribe();
        let mut written: Option<Vec<u64>> = None;
        let mut next_beat = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep_until(next_beat) => written = None,
                () = self.dirty.notified() => {
                    tokio::time::sleep(CHANGE_COALESCE).await;
                }
                _ = reachable.changed() => written = None,
            }
            if !self.is_reachable() {
                // Nothing is written for an executor that does not answer:
                // the next write is the first once it does.
                next_beat = tokio::time::Instant::now() + heartbeat;
                continue;
            }
            match self.write_entry(&ctx, written.as_deref()).await {
                Ok(Some(jobs)) => {
                    written = Some(jobs);
                    next_beat = tokio::time::Instant::now() + heartbeat;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot write the executor's registration");
                    next_beat = tokio::time::Instant::now() + ctx.registry.lease_renew();
                }
            }
        }
    }

    /// Writes the entry unless `running_jobs` equals `written`; the jobs
    /// written, if it wrote.
    async fn write_entry(
        &self,
        ctx: &Ctx,
        written: Option<&[u64]>,
    ) -> Result<Option<Vec<u64>>, Error> {
        let mut jobs = ctx.runs.running_jobs(&self.id).await?;
        jobs.sort_unstable();
        jobs.dedup();
        if written == Some(jobs.as_slice()) {
            return Ok(None);
        }
        let record = self.record();
        let now = clock::now_ms();
        let entry = registry::Entry {
            app: record.app.clone(),
            host: record.address.clone(),
            handlers: Vec::new(),
            started_ms: record.first_ms,
            pid: 0,
            incarnation: record.incarnation.clone(),
            heartbeat_ms: self.answered_ms.load(Ordering::Relaxed).max(1).min(now),
            running_jobs: jobs.clone(),
        };
        let mut pipe = redis::pipe();
        registry::beat(&mut pipe, &ctx.names, &self.id, &entry, hash_ttl(ctx));
        ctx.runs.write(&pipe).await?;
        Ok(Some(jobs))
    }

    /// Leaves rondo's registry after removal: retired (routing stops, the
    /// leader moves what waits in its queue), then the hash goes.
    async fn leave(&self, ctx: &Ctx) -> Result<(), Error> {
        let app = self.record().app;
        let mut pipe = redis::pipe();
        registry::retire(&mut pipe, &ctx.names, &app, &self.id);
        registry::leave(&mut pipe, &ctx.names, &self.id);
        ctx.runs.write(&pipe).await?;
        tracing::info!("the executor left the fleet; retired from the registry");
        Ok(())
    }

    /// Consumes the executor's queue whenever the broker is there and the
    /// executor answers.
    async fn consume(self: Arc<Self>, ctx: Arc<Ctx>) {
        let mut reachable = self.reachable.subscribe();
        let mut connection = ctx.fleet.connection();
        while !self.stop.is_cancelled() {
            let conn = connection.borrow_and_update().clone();
            let ready = conn.filter(|c| c.status().connected() && self.is_reachable());
            let Some(conn) = ready else {
                tokio::select! {
                    () = self.stop.cancelled() => break,
                    _ = reachable.changed() => {}
                    _ = connection.changed() => {}
                }
                continue;
            };
            if let Err(e) = self.consume_on(&ctx, &conn, &mut reachable).await {
                tracing::warn!(error = %e, "consuming the executor's queue stopped");
                tokio::select! {
                    () = self.stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
        self.handoffs.close();
        self.handoffs.wait().await;
    }

    /// One consumer on a channel of `conn`, until the executor stops
    /// answering, the channel goes, or the executor's service ends.
    async fn consume_on(
        self: &Arc<Self>,
        ctx: &Arc<Ctx>,
        conn: &Connection,
        reachable: &mut watch::Receiver<bool>,
    ) -> Result<(), Error> {
        let record = self.record();
        let channel = conn.create_channel().await?;
        let queue =
            rondo_core::amqp::declare_executor_queue(&channel, &ctx.names, &record.app, &self.id)
                .await?;
        bind_control(ctx, &channel, &self.id).await?;
        channel
            .basic_qos(ctx.xxl.prefetch, BasicQosOptions::default())
            .await?;
        let tag = format!("{}.{}", self.id, ctx.me());
        let mut consumer = channel
            .basic_consume(
                queue.as_str().into(),
                tag.as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        tracing::info!(queue, "consuming the executor's queue");
        // Registration waits for the queue: write it now.
        self.jobs_changed();
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                changed = reachable.changed() => {
                    if changed.is_err() || !*reachable.borrow() {
                        break;
                    }
                }
                next = consumer.next() => match next {
                    Some(Ok(delivery)) => {
                        let served = self.clone();
                        let ctx = ctx.clone();
                        self.handoffs.spawn(
                            crate::handoff::handle(ctx, served, delivery).in_current_span(),
                        );
                    }
                    Some(Err(e)) => return Err(e.into()),
                    None => return Err(Error::unavailable("the consumer was cancelled by the broker")),
                },
            }
        }
        let _ = channel
            .basic_cancel(tag.as_str().into(), BasicCancelOptions::default())
            .await;
        unbind_control(ctx, &channel, &self.id).await;
        // Deliveries the broker sent before the cancel are handed back by
        // their hand-offs (the executor does not answer) or sent (it
        // stopped for another reason); wait for them before closing.
        self.drain_unstarted(&mut consumer).await;
        self.handoffs.close();
        self.handoffs.wait().await;
        self.handoffs.reopen();
        let _ = channel.close(200, "stop consuming".into()).await;
        Ok(())
    }

    /// Hands back (requeues) deliveries that arrived after the cancel.
    async fn drain_unstarted(&self, consumer: &mut lapin::Consumer) {
        while let Ok(Some(Ok(delivery))) =
            tokio::time::timeout(Duration::from_millis(300), consumer.next()).await
        {
            let _ = delivery
                .nack(lapin::options::BasicNackOptions {
                    requeue: true,
                    ..Default::default()
                })
                .await;
        }
    }
}

/// The hash outlives an executor the gateways stopped writing by this much.
fn hash_ttl(ctx: &Ctx) -> Duration {
    let r = &ctx.registry;
    Duration::from_millis(2 * r.dead_after_ms.max(3 * r.heartbeat_ms))
}

/// Declares this instance's control queue: kills of every executor it
/// serves come to it (exclusive to its connection, gone with it).
pub(crate) async fn declare_control(ctx: &Ctx, channel: &Channel) -> Result<String, Error> {
    let queue = ctx.names.control_queue(ctx.me());
    let opts = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(
            queue.as_str().into(),
            opts,
            rondo_core::amqp::queue_args(&ctx.names),
        )
        .await?;
    Ok(queue)
}

/// Binds this instance's control queue to an executor's id.
async fn bind_control(ctx: &Ctx, channel: &Channel, executor_id: &str) -> Result<(), Error> {
    let queue = declare_control(ctx, channel).await?;
    channel
        .queue_bind(
            queue.as_str().into(),
            ctx.names.control_exchange().into(),
            executor_id.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok(())
}

async fn unbind_control(ctx: &Ctx, channel: &Channel, executor_id: &str) {
    let queue = ctx.names.control_queue(ctx.me());
    let _ = channel
        .queue_unbind(
            queue.as_str().into(),
            ctx.names.control_exchange().into(),
            executor_id.into(),
            FieldTable::default(),
        )
        .await;
}
