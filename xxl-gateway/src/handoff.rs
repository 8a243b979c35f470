//! One message of an XXL-JOB executor's queue: its triggers handed to the
//! executor (`/run`, `/trigger`), then the message acked.
//!
//! For each trigger, in this order (each step durable before the next, so
//! a gateway killed between any two loses nothing and sends nothing twice):
//! 1. **claim**: the trigger's dedupe mark, `running` by this executor, set
//!    only if it has none (a redelivered trigger finds its mark: step 5);
//! 2. **record**: its log id and its [`Run`] (with this instance's name),
//!    and its member of the executor's in-flight set;
//! 3. **send** it; the executor's answer decides:
//!    * accepted (or "repeat trigger job": it already waits there): it is
//!      the executor's now; its callback brings the result;
//!    * refused (its block strategy, an unknown handler): a failed result
//!      with the executor's own message;
//!    * no connection (the executor is gone): claim and records are undone
//!      and the trigger handed back to the queue, the executor's consumer
//!      stops, and once its lease ran out the leader moves its triggers;
//!    * no answer in time, or garbage: a failed result with the first bytes
//!      of the answer, never sent again in a loop;
//! 4. **ack** the message once every trigger of it is settled;
//! 5. a trigger whose mark was there is settled by what Redis holds: a kill
//!    from the API, a result to republish, someone else's trigger, or a
//!    hand-off cut short. A hand-off whose instance is alive is that
//!    instance's; one whose instance died before its records is taken over;
//!    one whose instance died after its records may or may not have reached
//!    the executor: the executor is asked (`/log`: a run that started has a
//!    log file; a send of a trigger still waiting there is refused as a
//!    repeat) and the trigger is sent only if it has neither.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use rondo_core::dedupe::Mark;
use rondo_core::model::BlockStrategy;
use rondo_core::trigger::code;
use rondo_core::{ExecResult, Trigger, TriggerBatch, amqp, clock};

use crate::answer;
use crate::client::{CallError, Target};
use crate::ctx::Ctx;
use crate::runs::{Claim, Run};
use crate::served::Served;
use crate::wire::{self, Generation, TriggerParam};

/// How long a delivery waits before going back to the queue after a
/// transient failure (Redis down), so an outage is no redelivery storm.
const REQUEUE_DELAY: Duration = Duration::from_secs(1);
/// How often a redelivered trigger checks whether the instance that was
/// sending it is still alive.
const OWNER_CHECK: Duration = Duration::from_millis(250);

/// How one trigger of a message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Sent to the executor now, which took it.
    Sent,
    /// With the executor already, answered, or someone else's.
    Done,
    /// Not sent, claim undone: it goes back to the queue.
    HandBack,
    /// Could not be settled now (Redis): the message goes back.
    Requeue,
}

/// Handles one delivery of `served`'s queue.
pub(crate) async fn handle(ctx: Arc<Ctx>, served: Arc<Served>, delivery: Delivery) {
    let batch = match TriggerBatch::decode(&delivery.data) {
        Ok(batch) => batch,
        Err(reason) => return dead_letter(&ctx, &served, &delivery, &reason).await,
    };
    let settled = join_all(batch.triggers.iter().map(|t| settle(&ctx, &served, t))).await;
    for s in &settled {
        let outcome = match s {
            Settled::Sent => "sent",
            Settled::Done => "settled",
            Settled::HandBack | Settled::Requeue => "back",
        };
        metrics::counter!("rondo_xxl_handoffs_total", "outcome" => outcome).increment(1);
        if delivery.redelivered {
            metrics::counter!("rondo_xxl_redelivered_total", "outcome" => outcome).increment(1);
        }
    }
    let outcome = if settled.contains(&Settled::Requeue) {
        tokio::time::sleep(REQUEUE_DELAY).await;
        delivery.nack(requeue()).await
    } else if settled.iter().all(|s| *s == Settled::HandBack) {
        delivery.nack(requeue()).await
    } else if settled.contains(&Settled::HandBack) {
        let back: Vec<Trigger> = batch
            .triggers
            .iter()
            .zip(&settled)
            .filter(|(_, s)| **s == Settled::HandBack)
            .map(|(t, _)| t.clone())
            .collect();
        match hand_back(&ctx, &served, back).await {
            Ok(()) => delivery.ack(BasicAckOptions::default()).await,
            Err(e) => {
                tracing::warn!(error = %e, "cannot hand triggers back; the message goes back whole");
                delivery.nack(requeue()).await
            }
        }
    } else {
        delivery.ack(BasicAckOptions::default()).await
    };
    if let Err(e) = outcome {
        // The channel is gone: the broker redelivers the message, and the
        // marks settle what was done.
        tracing::warn!(error = %e, "cannot settle the message with the broker");
    }
}

fn requeue() -> BasicNackOptions {
    BasicNackOptions {
        requeue: true,
        ..BasicNackOptions::default()
    }
}

async fn dead_letter(ctx: &Ctx, served: &Served, delivery: &Delivery, reason: &str) {
    let queue = ctx.names.executor_queue(&served.record().app, &served.id);
    let moved = async {
        let ch = ctx.link.channel().await?;
        amqp::dead_letter(&ch, &ctx.names, delivery, &queue, reason).await
    }
    .await;
    if let Err(e) = moved {
        tracing::warn!(error = %e, reason, "cannot dead-letter a message; the broker does");
        let _ = delivery
            .nack(BasicNackOptions {
                requeue: false,
                ..BasicNackOptions::default()
            })
            .await;
    }
}

/// Republishes unsent triggers of a message, part of which was sent, to
/// the executor's own queue (the leader moves them once it is offline).
async fn hand_back(
    ctx: &Ctx,
    served: &Served,
    triggers: Vec<Trigger>,
) -> Result<(), rondo_core::Error> {
    let body = serde_json::to_vec(&TriggerBatch::new(triggers))?;
    let ch = ctx.link.channel().await?;
    let exchange = ctx.names.trigger_exchange();
    let publish = amqp::Publish {
        exchange: &exchange,
        routing_key: &served.id,
        mandatory: true,
        ..amqp::Publish::default()
    };
    let outcome = amqp::publish_confirmed(&ch, publish, &body).await;
    ctx.link.note(&outcome).await;
    if !outcome? {
        return Err(rondo_core::Error::unavailable(
            "the executor's queue is gone",
        ));
    }
    Ok(())
}

/// Settles one trigger of a delivery.
async fn settle(ctx: &Ctx, served: &Served, trigger: &Trigger) -> Settled {
    match try_settle(ctx, served, trigger).await {
        Ok(settled) => settled,
        Err(e) => {
            tracing::warn!(trigger_id = %trigger.trigger_id, error = %e, "cannot hand the trigger off now; it goes back to the queue");
            Settled::Requeue
        }
    }
}

async fn try_settle(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
) -> Result<Settled, rondo_core::Error> {
    if i32::try_from(trigger.job_id).is_err() {
        let msg = format!(
            "job id {} is beyond what XXL-JOB's executors take (a Java int, at most {})",
            trigger.job_id,
            i32::MAX
        );
        answer::unsent(ctx, served, trigger, fail(msg, false)).await?;
        return Ok(Settled::Done);
    }
    let _local = ctx.local.enter(&trigger.trigger_id);
    // A round ends in a settlement, or reads the trigger's state again
    // after waiting for whoever else was handing it off.
    for _ in 0..MAX_ROUNDS {
        let record = served.record();
        let running = Mark::Running {
            executor: served.id.clone(),
            incarnation: record.incarnation.clone(),
            since_ms: clock::now_ms(),
        };
        let run = new_run(ctx, served, trigger, ctx.runs.log_ids(1).await?[0]);
        let found = match ctx.runs.claim(&running, &run).await? {
            Claim::Won => return send_recorded(ctx, served, trigger, run).await,
            Claim::Found(f) => {
                let crate::runs::Found { mark, log_id, run } = *f;
                found(ctx, served, trigger, &record.incarnation, mark, log_id, run).await?
            }
        };
        if let Some(settled) = found {
            return Ok(settled);
        }
    }
    Ok(Settled::Requeue)
}

/// Rounds of [`try_settle`] before the message goes back to the queue.
const MAX_ROUNDS: usize = 5;

/// A trigger whose mark was already there (step 5 of the module doc);
/// `None`: read it again.
async fn found(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    incarnation: &str,
    mark: Option<Mark>,
    log_id: Option<i64>,
    run: Option<Run>,
) -> Result<Option<Settled>, rondo_core::Error> {
    let mine = |executor: &str| executor == served.id;
    match mark {
        Some(Mark::Killed { .. }) => {
            answer::unsent(ctx, served, trigger, fail("killed".into(), false)).await?;
            Ok(Some(Settled::Done))
        }
        Some(Mark::Finished { executor, result }) if mine(&executor) => {
            answer::republish(ctx, served, &trigger.trigger_id, result).await?;
            Ok(Some(Settled::Done))
        }
        Some(Mark::Running {
            executor,
            incarnation: theirs,
            since_ms,
        }) if mine(&executor) => {
            if theirs != incarnation {
                let msg = format!(
                    "executor {} restarted while the handler ran (incarnation {theirs}); the run's outcome is unknown",
                    served.id
                );
                let result = ExecResult {
                    start_ms: since_ms,
                    ..fail(msg, true).into_result(trigger, &served.id)
                };
                answer::republish(ctx, served, &trigger.trigger_id, result).await?;
                return Ok(Some(Settled::Done));
            }
            cut_short(ctx, served, trigger, log_id, run).await
        }
        // Confirmed, someone else's, a foreign value, or gone (expired):
        // nothing of this executor's to do.
        _ => Ok(Some(Settled::Done)),
    }
}

/// A trigger claimed for this executor by an earlier hand-off, which may
/// have been cut short; `None`: read it again.
async fn cut_short(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    log_id: Option<i64>,
    run: Option<Run>,
) -> Result<Option<Settled>, rondo_core::Error> {
    match (log_id, run) {
        // Records never written: it was never sent. Take it over.
        (None, _) => {
            let log_id = ctx.runs.log_ids(1).await?[0];
            if !ctx.runs.take_log_id(&trigger.trigger_id, log_id).await? {
                // Another redelivery took it over a moment ago.
                return Ok(None);
            }
            send_new(ctx, served, trigger, log_id, false)
                .await
                .map(Some)
        }
        // The log id without its run: both are written in one pipeline
        // before the send, so it was not sent either.
        (Some(log_id), None) => send_new(ctx, served, trigger, log_id, false)
            .await
            .map(Some),
        (Some(_), Some(run)) if run.answered => Ok(Some(Settled::Done)),
        (Some(_), Some(run)) if run.instance == ctx.me() => {
            // An earlier delivery of it here: done with it, or (a
            // redelivery after this instance's link broke) still at it.
            if ctx.local.wait_others(&trigger.trigger_id).await {
                Ok(None)
            } else {
                Ok(Some(Settled::Done))
            }
        }
        (Some(_), Some(run)) => match owner(ctx, &run).await? {
            Owner::Gone => probe(ctx, served, trigger, run).await.map(Some),
            Owner::DoneWithIt => {
                // It either sent it (the executor has it), answered it, or
                // gave it back (its mark is gone): only the last is ours.
                match ctx.runs.found(&trigger.trigger_id).await? {
                    Claim::Found(f) if f.mark.is_some() => Ok(Some(Settled::Done)),
                    _ => Ok(None),
                }
            }
        },
    }
}

enum Owner {
    /// Its lease ran out: its hand-off may have been cut anywhere.
    Gone,
    /// It lives on past any hand-off it had in progress: what it did is
    /// in Redis now.
    DoneWithIt,
}

/// Waits until the instance that was handing `run` off is either gone or
/// alive beyond any send it could have had in progress (its link to the
/// broker may have broken while it lives on and sends).
async fn owner(ctx: &Ctx, run: &Run) -> Result<Owner, rondo_core::Error> {
    let past =
        clock::now_ms() + ctx.client.timeout().as_millis() as i64 + OWNER_MARGIN.as_millis() as i64;
    loop {
        match ctx.instances.lease_of(&run.instance).await? {
            None => return Ok(Owner::Gone),
            Some(renewed) if renewed >= past => return Ok(Owner::DoneWithIt),
            Some(_) => tokio::time::sleep(OWNER_CHECK).await,
        }
    }
}

/// Beyond its call's timeout, what a hand-off takes at most to record its
/// outcome.
const OWNER_MARGIN: Duration = Duration::from_secs(2);

/// Asks the executor whether a trigger whose sender died reached it, and
/// sends it if not.
async fn probe(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    run: Run,
) -> Result<Settled, rondo_core::Error> {
    let target = served.target();
    match ctx
        .client
        .log(&target, run.log_id, run.log_date_ms, 1)
        .await
    {
        Ok(Some(page)) if !(page.is_end && page.to_line_num == 0) => {
            tracing::info!(trigger_id = %trigger.trigger_id, log_id = run.log_id, "a redelivered trigger had reached the executor (it has a log); not sent again");
            metrics::counter!("rondo_xxl_probes_total", "outcome" => "there").increment(1);
            return Ok(Settled::Done);
        }
        Ok(_) => {}
        Err(CallError::Unreachable { .. }) => {
            served.unreachable();
            ctx.runs.release(&[&run], &[&trigger.trigger_id]).await?;
            return Ok(Settled::HandBack);
        }
        Err(e) => {
            metrics::counter!("rondo_xxl_probes_total", "outcome" => "unknown").increment(1);
            // Whether it is there cannot be told: its outcome is unknown.
            let msg = format!(
                "lost: the gateway sending it stopped, and executor {} cannot tell whether it got it ({e}); the run's outcome is unknown",
                target.address
            );
            answer::sent_unanswered(ctx, served, &run, fail(msg, true)).await?;
            return Ok(Settled::Done);
        }
    }
    metrics::counter!("rondo_xxl_probes_total", "outcome" => "resent").increment(1);
    let run = Run {
        instance: ctx.me().to_owned(),
        ..run
    };
    let mut pipe = redis::pipe();
    ctx.runs.put_run(&mut pipe, &run)?;
    ctx.runs.write(&pipe).await?;
    send(ctx, served, trigger, run).await
}

/// The run of `trigger` handed off now by this instance under `log_id`.
fn new_run(ctx: &Ctx, served: &Served, trigger: &Trigger, log_id: i64) -> Run {
    Run {
        trigger_id: trigger.trigger_id.clone(),
        job_id: trigger.job_id,
        fire_ms: trigger.fire_ms,
        executor_id: served.id.clone(),
        log_id,
        log_date_ms: trigger.fire_ms,
        instance: ctx.me().to_owned(),
        since_ms: clock::now_ms(),
        killed: false,
        covered_by: None,
        answered: false,
    }
}

/// Records and sends a trigger whose mark is this hand-off's, under
/// `log_id` (`with_log_id`: its log id is not written yet).
async fn send_new(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    log_id: i64,
    with_log_id: bool,
) -> Result<Settled, rondo_core::Error> {
    let run = new_run(ctx, served, trigger, log_id);
    ctx.runs.record(&[&run], with_log_id).await?;
    send_recorded(ctx, served, trigger, run).await
}

/// Sends a recorded trigger; a COVER_EARLY one first marks the runs of its
/// job it replaces there.
async fn send_recorded(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    run: Run,
) -> Result<Settled, rondo_core::Error> {
    if trigger.block == BlockStrategy::CoverEarly {
        crate::kill::mark_job(ctx, &served.id, trigger.job_id, |r| {
            if r.trigger_id != trigger.trigger_id {
                r.covered_by = Some(trigger.trigger_id.clone());
            }
        })
        .await?;
    }
    served.jobs_changed();
    send(ctx, served, trigger, run).await
}

/// Sends a recorded trigger and settles it by the executor's answer.
async fn send(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    run: Run,
) -> Result<Settled, rondo_core::Error> {
    let param = trigger_param(trigger, run.log_id);
    let mut target = served.target();
    let mut reply = ctx.client.trigger(&target, &param).await;
    if let Ok(r) = &reply
        && wire::is_unknown_path(r)
    {
        // It runs the other generation: learn it, and send there (the
        // refusal had no effect on the executor).
        let other: Generation = target.generation.other();
        served.set_generation(other);
        if let Err(e) = ctx.executors.set_generation(&served.id, other).await {
            tracing::warn!(error = %e, "cannot note the executor's generation");
        }
        target = Target {
            generation: other,
            ..target
        };
        reply = ctx.client.trigger(&target, &param).await;
    }
    match reply {
        Ok(r) if r.is_success() => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "sent").increment(1);
            ctx.tails.track(&run);
            Ok(Settled::Sent)
        }
        Ok(r) if wire::is_repeat(&r) => {
            // It waits in the job's queue there already (a probe's send).
            ctx.tails.track(&run);
            Ok(Settled::Done)
        }
        Ok(r) => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "refused").increment(1);
            let msg = r
                .msg
                .unwrap_or_else(|| format!("refused with code {}", r.code));
            let retryable = !wire::is_block_refusal(&msg);
            answer::refused(ctx, served, &run, fail(msg, retryable)).await?;
            Ok(Settled::Done)
        }
        Err(CallError::Unreachable { detail, .. }) => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "handed_back").increment(1);
            tracing::warn!(trigger_id = %trigger.trigger_id, detail, "the executor cannot be reached; the trigger goes back to its queue");
            served.unreachable();
            ctx.runs.release(&[&run], &[&trigger.trigger_id]).await?;
            served.jobs_changed();
            Ok(Settled::HandBack)
        }
        Err(e) => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "no_answer").increment(1);
            answer::sent_unanswered(ctx, served, &run, fail(e.to_string(), true)).await?;
            Ok(Settled::Done)
        }
    }
}

/// rondo's trigger as XXL-JOB's executor takes it.
pub(crate) fn trigger_param(trigger: &Trigger, log_id: i64) -> TriggerParam {
    let (glue_type, glue_source, glue_updatetime, handler) = match &trigger.script {
        Some(s) => (
            s.glue_type.clone(),
            s.source.clone(),
            if s.updated_ms > 0 {
                s.updated_ms
            } else {
                i64::from(s.version)
            },
            String::new(),
        ),
        None => ("BEAN".to_owned(), String::new(), 0, trigger.handler.clone()),
    };
    TriggerParam {
        job_id: i32::try_from(trigger.job_id).unwrap_or(i32::MAX),
        executor_handler: handler,
        executor_params: trigger.params.clone(),
        executor_block_strategy: trigger.block.as_str().to_owned(),
        executor_timeout: i32::try_from(trigger.timeout_s).unwrap_or(i32::MAX),
        log_id,
        log_date_time: trigger.fire_ms,
        glue_type,
        glue_source,
        glue_updatetime,
        broadcast_index: i32::try_from(trigger.shard_index).unwrap_or(i32::MAX),
        broadcast_total: i32::try_from(trigger.shard_total).unwrap_or(i32::MAX),
    }
}

/// A failure the gateway answers a trigger with.
pub(crate) struct Failure {
    pub(crate) msg: String,
    pub(crate) retryable: bool,
}

pub(crate) fn fail(msg: String, retryable: bool) -> Failure {
    Failure { msg, retryable }
}

impl Failure {
    pub(crate) fn into_result(self, trigger: &Trigger, executor_id: &str) -> ExecResult {
        let now = clock::now_ms();
        ExecResult {
            trigger_id: trigger.trigger_id.clone(),
            job_id: trigger.job_id,
            executor_id: executor_id.to_owned(),
            fire_ms: trigger.fire_ms,
            start_ms: now,
            end_ms: now,
            code: code::FAIL,
            msg: answer::cut(self.msg),
            retryable: self.retryable,
        }
    }
}
