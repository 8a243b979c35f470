//! rondo's kill of a trigger, as XXL-JOB's: `/kill {jobId}` to the executor
//! that has it, which stops the job's running run and drops its queued
//! ones there (XXL-JOB kills a job's thread, not one run).
//!
//! The API sends a kill to the control exchange with the executor id as
//! routing key. Every gateway instance binds its own control queue to the
//! id of every executor it serves, so each one hears it; the first to take
//! `ns:xxl:kill:<trigger id>` carries it out. Before `/kill` goes, every
//! run of that job waiting for its callback on that executor is marked
//! killed, so their failures come back final (not retried), as a rondo
//! executor's killed run.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use rondo_core::trigger::{Control, ControlAction};
use rondo_core::{Error, amqp};
use tokio_util::sync::CancellationToken;

use crate::client::CallError;
use crate::ctx::Ctx;
use crate::runs::Run;

/// How long a kill's claim (who carries it out) is kept.
const KILL_CLAIM_S: u64 = 300;

/// Consumes this instance's control queue on every consuming connection,
/// until `stop`.
pub(crate) async fn consume(ctx: Arc<Ctx>, stop: CancellationToken) {
    let mut connection = ctx.fleet.connection();
    while !stop.is_cancelled() {
        let conn = connection.borrow_and_update().clone();
        if let Some(conn) = conn.filter(|c| c.status().connected())
            && let Err(e) = consume_on(&ctx, &conn, &stop).await
        {
            tracing::warn!(error = %e, "consuming kills stopped");
        }
        tokio::select! {
            () = stop.cancelled() => break,
            _ = connection.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

async fn consume_on(
    ctx: &Arc<Ctx>,
    conn: &Connection,
    stop: &CancellationToken,
) -> Result<(), Error> {
    let channel = amqp::confirm_channel(conn).await?;
    let queue = declare_control(ctx, &channel).await?;
    channel.basic_qos(16, BasicQosOptions::default()).await?;
    let tag = format!("{}.ctl", ctx.me());
    let mut consumer = channel
        .basic_consume(
            queue.as_str().into(),
            tag.as_str().into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    loop {
        let delivery = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            next = consumer.next() => match next {
                Some(d) => d?,
                None => return Ok(()),
            },
        };
        handle(ctx, &channel, &queue, delivery).await;
    }
}

async fn handle(
    ctx: &Arc<Ctx>,
    channel: &Channel,
    queue: &str,
    delivery: lapin::message::Delivery,
) {
    let control = match Control::decode(&delivery.data) {
        Ok(c) => c,
        Err(reason) => {
            if let Err(e) = amqp::dead_letter(channel, &ctx.names, &delivery, queue, &reason).await
            {
                tracing::warn!(error = %e, "cannot dead-letter a control message");
            }
            return;
        }
    };
    let ControlAction::Kill = control.action;
    if let Err(e) = kill(ctx, &control.group, &control.trigger_id, control.job_id).await {
        tracing::warn!(trigger_id = %control.trigger_id, error = %e, "cannot carry out a kill");
    }
    if let Err(e) = delivery.ack(BasicAckOptions::default()).await {
        tracing::warn!(error = %e, "cannot ack a control message");
    }
}

/// Kills a trigger's run on its executor, if this instance is the one to.
/// A kill that did not reach the executor (refused, no connection, or an
/// error before it went) is undone: its runs' failures are not final, and
/// its claim goes so that the kill can be sent again. One whose answer did
/// not come may have worked: it stays.
async fn kill(ctx: &Ctx, group: &str, trigger_id: &str, job_id: u64) -> Result<(), Error> {
    let claim = ctx.names.xxl_kill(trigger_id);
    let taken: Option<String> = redis::cmd("SET")
        .arg(&claim)
        .arg(ctx.me())
        .arg("NX")
        .arg("EX")
        .arg(KILL_CLAIM_S)
        .query_async(&mut ctx.pool.get().await?)
        .await?;
    if taken.is_none() {
        return Ok(());
    }
    let mut marked = Vec::new();
    let failed = match carry_out(ctx, group, trigger_id, job_id, &mut marked).await {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let undo = async {
        unmark(ctx, &marked, |r| std::mem::replace(&mut r.killed, false)).await?;
        let () = redis::cmd("DEL")
            .arg(&claim)
            .query_async(&mut ctx.pool.get().await?)
            .await?;
        Ok::<(), Error>(())
    };
    if let Err(e) = undo.await {
        tracing::warn!(trigger_id, error = %e, "cannot undo a kill that failed");
    }
    Err(failed)
}

/// Marks the runs of the job killed (their log ids into `marked`) and sends
/// `/kill`; `Err` when the kill did not reach the executor.
async fn carry_out(
    ctx: &Ctx,
    group: &str,
    trigger_id: &str,
    job_id: u64,
    marked: &mut Vec<i64>,
) -> Result<(), Error> {
    let Some(run) = ctx
        .runs
        .run_of(group, trigger_id)
        .await?
        .filter(|r| !r.answered)
    else {
        tracing::info!(
            trigger_id,
            "kill: no run of it waits for a callback (finished, or not handed off yet)"
        );
        return Ok(());
    };
    if run.job_id != job_id {
        tracing::warn!(
            trigger_id,
            job_id,
            "kill: the trigger belongs to another job; ignored"
        );
        return Ok(());
    }
    let Some(served) = ctx.fleet.get(&run.executor_id) else {
        return Ok(());
    };
    *marked = mark_job(ctx, &run.executor_id, run.job_id, |r| {
        !std::mem::replace(&mut r.killed, true)
    })
    .await?;
    let job = i32::try_from(run.job_id).unwrap_or(i32::MAX);
    match ctx.client.kill(&served.target(), job).await {
        Ok(reply) if reply.is_success() => {
            tracing::info!(trigger_id, job_id, executor_id = %run.executor_id, "kill sent to the executor");
            Ok(())
        }
        Ok(reply) => Err(Error::unavailable(format!(
            "the executor refused the kill: {}",
            reply.msg.unwrap_or_default()
        ))),
        Err(e @ (CallError::Unreachable { .. } | CallError::Late { .. })) => {
            Err(Error::unavailable(e.to_string()))
        }
        Err(e) => {
            tracing::warn!(trigger_id, error = %e, "kill: no answer from the executor; it may have worked, so it stands");
            Ok(())
        }
    }
}

/// Changes every run of `job_id` waiting for its callback on executor
/// `executor_id` with `change` (a kill, a COVER_EARLY replacement), which
/// says whether it changed the run; the log ids of the runs changed. A run
/// its callback removed meanwhile is not brought back.
pub(crate) async fn mark_job(
    ctx: &Ctx,
    executor_id: &str,
    job_id: u64,
    change: impl Fn(&mut Run) -> bool,
) -> Result<Vec<i64>, Error> {
    let log_ids: Vec<i64> = ctx
        .runs
        .inflight_before(executor_id, i64::MAX)
        .await?
        .into_iter()
        .filter(|(_, job)| *job == job_id)
        .map(|(log, _)| log)
        .collect();
    change_runs(ctx, &log_ids, change).await
}

/// Changes the runs of `log_ids` back with `change`.
pub(crate) async fn unmark(
    ctx: &Ctx,
    log_ids: &[i64],
    change: impl Fn(&mut Run) -> bool,
) -> Result<(), Error> {
    change_runs(ctx, log_ids, change).await.map(drop)
}

async fn change_runs(
    ctx: &Ctx,
    log_ids: &[i64],
    change: impl Fn(&mut Run) -> bool,
) -> Result<Vec<i64>, Error> {
    let mut pipe = redis::pipe();
    let mut changed = Vec::new();
    for mut run in ctx.runs.runs(log_ids).await?.into_iter().flatten() {
        if change(&mut run) {
            ctx.runs.rewrite_run(&mut pipe, &run)?;
            changed.push(run.log_id);
        }
    }
    ctx.runs.write(&pipe).await?;
    Ok(changed)
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
pub(crate) async fn bind_control(
    ctx: &Ctx,
    channel: &Channel,
    executor_id: &str,
) -> Result<(), Error> {
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

pub(crate) async fn unbind_control(ctx: &Ctx, channel: &Channel, executor_id: &str) {
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
