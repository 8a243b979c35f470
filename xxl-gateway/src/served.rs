//! The tasks of one XXL-JOB executor as this gateway instance serves it
//! ([`Served`]): a rondo executor of group `app` with its own durable
//! queue.
//!
//! Three tasks per executor, every instance running them for every
//! executor of the fleet (so losing an instance loses nothing but a
//! connection):
//! * **beat**: `/beat` every `registry.lease_ms / 4`; each answer renews
//!   the executor's lease in rondo's registry (once its queue exists), so
//!   routing stops within the lease once it stops answering (not
//!   XXL-JOB's 90 s).
//! * **registration**: the full registry hash (its `running_jobs` are the
//!   jobs with a trigger handed to it and not yet called back, from Redis,
//!   so every instance writes the same), at every `registry.heartbeat_ms`
//!   and within [`CHANGE_COALESCE`] of a change, while it answers and once
//!   this instance declared its queue (no trigger is routed before the
//!   queue exists: the broker would return it).
//! * **consumer**: its queue, consumed while it answers (the hand-offs are
//!   `handoff`'s); while it does not, its triggers wait in the queue, and
//!   once its lease ran out the leader moves them to a live executor.
//!
//! Removed from the fleet (`/api/registryRemove`, no registration for
//! `xxl.registration_ttl_ms`, dropped from its group's list) it retires at
//! once (routing stops) and leaves once this instance stopped consuming.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::Connection;
use lapin::options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use rondo_core::{Error, clock, registry};
use tokio::sync::watch;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::ctx::Ctx;
use crate::kill::{bind_control, unbind_control};
use crate::roster::Served;

/// Changes of `running_jobs` within this window are written together.
pub(crate) const CHANGE_COALESCE: Duration = Duration::from_millis(50);

/// Runs the executor's tasks until it is removed or the gateway stops.
pub(crate) async fn run(s: Arc<Served>, ctx: Arc<Ctx>) {
    let span = tracing::info_span!("xxl_executor", executor_id = %s.id);
    async move {
        let tasks = TaskTracker::new();
        tasks.spawn(ctx.guard("beat", beat(s.clone(), ctx.clone()).in_current_span()));
        tasks.spawn(ctx.guard(
            "registration",
            register(s.clone(), ctx.clone()).in_current_span(),
        ));
        tasks.spawn(ctx.guard(
            "consumer",
            consume(s.clone(), ctx.clone()).in_current_span(),
        ));
        tasks.close();
        tasks.wait().await;
        if s.removed.load(Ordering::Relaxed)
            && let Err(e) = leave(&s, &ctx).await
        {
            tracing::warn!(error = %e, "cannot remove the executor from the registry");
        }
    }
    .instrument(span)
    .await;
}

async fn beat(s: Arc<Served>, ctx: Arc<Ctx>) {
    let lease = ctx.lease();
    let mut tick = tokio::time::interval(ctx.registry.lease_renew());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let timeout = ctx.client.timeout().min(lease / 2);
    while !s.stop.is_cancelled() {
        tokio::select! {
            () = s.stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let beat = ctx.client.beat(&s.target(), timeout).await;
        let now = clock::now_ms();
        match beat {
            Ok(reply) if reply.is_success() => answered(&s, &ctx, now).await,
            Ok(reply) if reply.msg.as_deref() == Some(crate::wire::WRONG_TOKEN) => {
                // Its group's token changed and it still has the one before
                // (a rotation ended before it restarted): it refuses us.
                metrics::counter!("rondo_xxl_token_mismatches_total").increment(1);
                if s.is_reachable() {
                    tracing::warn!(app = %s.record().app, "the executor refuses its group's access token (a rotation ended before it took the new one?); it leaves routing");
                    s.unreachable();
                }
            }
            outcome => {
                let since = s.answered_ms.load(Ordering::Relaxed);
                if now - since >= lease.as_millis() as i64 && s.is_reachable() {
                    tracing::warn!(outcome = ?outcome, "the executor stopped answering /beat");
                    s.unreachable();
                }
            }
        }
    }
}

async fn answered(s: &Served, ctx: &Ctx, now: i64) {
    s.answered_ms.store(now, Ordering::Relaxed);
    if !s.removed.load(Ordering::Relaxed) && s.queue_declared.load(Ordering::Acquire) {
        let app = s.record().app;
        let mut pipe = redis::pipe();
        renew(&mut pipe, ctx, &app, &s.id, now);
        if let Err(e) = ctx.runs.write(&pipe).await {
            tracing::warn!(error = %e, "cannot renew the executor's lease");
        }
    }
    if s.reachable
        .send_if_modified(|r| !std::mem::replace(r, true))
    {
        tracing::info!("the executor answers /beat");
    }
}

/// Writes the registry hash at every heartbeat and when `running_jobs`
/// changed, while the executor answers.
async fn register(s: Arc<Served>, ctx: Arc<Ctx>) {
    let heartbeat = Duration::from_millis(ctx.registry.heartbeat_ms);
    let mut reachable = s.reachable.subscribe();
    let mut written: Option<Vec<u64>> = None;
    let mut next_beat = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = s.stop.cancelled() => return,
            () = tokio::time::sleep_until(next_beat) => written = None,
            () = s.dirty.notified() => {
                tokio::time::sleep(CHANGE_COALESCE).await;
            }
            _ = reachable.changed() => written = None,
        }
        if !s.is_reachable() || !s.queue_declared.load(Ordering::Acquire) {
            // Nothing is written for an executor that does not answer, or
            // whose queue this instance has not declared yet: the next
            // write is the first once it does (the consumer wakes it).
            next_beat = tokio::time::Instant::now() + heartbeat;
            continue;
        }
        match write_entry(&s, &ctx, written.as_deref()).await {
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
    s: &Served,
    ctx: &Ctx,
    written: Option<&[u64]>,
) -> Result<Option<Vec<u64>>, Error> {
    let mut jobs = ctx.runs.running_jobs(&s.id).await?;
    jobs.sort_unstable();
    jobs.dedup();
    if written == Some(jobs.as_slice()) {
        return Ok(None);
    }
    let record = s.record();
    let now = clock::now_ms();
    let entry = registry::Entry {
        app: record.app.clone(),
        host: record.address.clone(),
        handlers: Vec::new(),
        started_ms: record.first_ms,
        pid: 0,
        incarnation: record.incarnation.clone(),
        heartbeat_ms: s.answered_ms.load(Ordering::Relaxed).max(1).min(now),
        running_jobs: jobs.clone(),
        via: registry::VIA_XXL_GATEWAY.into(),
    };
    let mut pipe = redis::pipe();
    renew(&mut pipe, ctx, &record.app, &s.id, entry.heartbeat_ms);
    let hash = ctx.names.executor(&s.id);
    pipe.hset_multiple(&hash, &entry.fields())
        .ignore()
        .pexpire(&hash, hash_ttl(ctx).as_millis() as i64)
        .ignore();
    ctx.runs.write(&pipe).await?;
    Ok(Some(jobs))
}

/// Leaves rondo's registry after removal: retired (routing stops, the
/// leader moves what waits in its queue), then the hash goes.
async fn leave(s: &Served, ctx: &Ctx) -> Result<(), Error> {
    let app = s.record().app;
    let mut pipe = redis::pipe();
    registry::retire(&mut pipe, &ctx.names, &app, &s.id);
    registry::leave(&mut pipe, &ctx.names, &s.id);
    ctx.runs.write(&pipe).await?;
    tracing::info!("the executor left the fleet; retired from the registry");
    Ok(())
}

/// Consumes the executor's queue whenever the broker is there and the
/// executor answers.
async fn consume(s: Arc<Served>, ctx: Arc<Ctx>) {
    let mut reachable = s.reachable.subscribe();
    let mut connection = ctx.fleet.connection();
    while !s.stop.is_cancelled() {
        let conn = connection.borrow_and_update().clone();
        let ready = conn.filter(|c| c.status().connected() && s.is_reachable());
        let Some(conn) = ready else {
            tokio::select! {
                () = s.stop.cancelled() => break,
                _ = reachable.changed() => {}
                _ = connection.changed() => {}
            }
            continue;
        };
        if let Err(e) = consume_on(&s, &ctx, &conn, &mut reachable).await {
            tracing::warn!(error = %e, "consuming the executor's queue stopped");
            tokio::select! {
                () = s.stop.cancelled() => break,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
    s.handoffs.close();
    s.handoffs.wait().await;
}

/// One consumer on a channel of `conn`, until the executor stops
/// answering, the channel goes, or the executor's service ends.
async fn consume_on(
    s: &Arc<Served>,
    ctx: &Arc<Ctx>,
    conn: &Connection,
    reachable: &mut watch::Receiver<bool>,
) -> Result<(), Error> {
    let record = s.record();
    let channel = conn.create_channel().await?;
    let queue =
        rondo_core::amqp::declare_executor_queue(&channel, &ctx.names, &record.app, &s.id).await?;
    s.queue_declared.store(true, Ordering::Release);
    bind_control(ctx, &channel, &s.id).await?;
    channel
        .basic_qos(ctx.xxl.prefetch, BasicQosOptions::default())
        .await?;
    let tag = format!("{}.{}", s.id, ctx.me());
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
    s.jobs_changed();
    let ended = consume_deliveries(s, ctx, &mut consumer, reachable).await;
    let _ = channel
        .basic_cancel(tag.as_str().into(), BasicCancelOptions::default())
        .await;
    unbind_control(ctx, &channel, &s.id).await;
    // Deliveries the broker sent before the cancel are handed back by
    // their hand-offs (the executor does not answer) or sent (it
    // stopped for another reason); wait for them before closing.
    drain_unstarted(&mut consumer).await;
    s.handoffs.close();
    s.handoffs.wait().await;
    s.handoffs.reopen();
    let _ = channel.close(200, "stop consuming".into()).await;
    ended
}

/// Hands each delivery off, until the executor stops answering, the
/// consumer ends, or the executor's service ends.
async fn consume_deliveries(
    s: &Arc<Served>,
    ctx: &Arc<Ctx>,
    consumer: &mut lapin::Consumer,
    reachable: &mut watch::Receiver<bool>,
) -> Result<(), Error> {
    loop {
        tokio::select! {
            () = s.stop.cancelled() => break,
            changed = reachable.changed() => {
                if changed.is_err() || !*reachable.borrow() {
                    break;
                }
            }
            next = consumer.next() => match next {
                Some(Ok(delivery)) => {
                    let served = s.clone();
                    let ctx = ctx.clone();
                    s.handoffs.spawn(
                        ctx.guard("hand-off", crate::handoff::handle(ctx.clone(), served, delivery).in_current_span()),
                    );
                }
                Some(Err(e)) => return Err(e.into()),
                None => return Err(Error::unavailable("the consumer was cancelled by the broker")),
            },
        }
    }
    Ok(())
}

/// Hands back (requeues) deliveries that arrived after the cancel.
async fn drain_unstarted(consumer: &mut lapin::Consumer) {
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

/// Adds a renewal of an executor's lease to `pipe`, never moving it back
/// (another instance may have renewed it later).
fn renew(pipe: &mut redis::Pipeline, ctx: &Ctx, app: &str, executor_id: &str, at_ms: i64) {
    pipe.cmd("ZADD")
        .arg(ctx.names.registry(app))
        .arg("GT")
        .arg(at_ms)
        .arg(executor_id)
        .ignore();
}

/// The hash outlives an executor the gateways stopped writing by this much.
fn hash_ttl(ctx: &Ctx) -> Duration {
    let r = &ctx.registry;
    Duration::from_millis(2 * r.dead_after_ms.max(3 * r.heartbeat_ms))
}
