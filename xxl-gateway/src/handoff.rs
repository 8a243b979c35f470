//! One message of an XXL-JOB executor's queue: its triggers handed to the
//! executor (`/run`, `/trigger`), then the message acked.
//!
//! For each trigger, in this order (each step durable before the next):
//! 1. **claim and record**, in one round trip: the trigger's dedupe mark
//!    (`running` by this executor) and its claim (`<log id> <instance>`),
//!    both only if it has no mark, with its [`Run`] and its member of the
//!    executor's in-flight set. A redelivered trigger finds its mark
//!    (step 4). The claim is the one token of who sends the trigger: it
//!    changes hands only by a compare-and-set.
//! 2. **send** it, if this instance renewed its lease lately (else it goes
//!    back: the others may be taking this instance's hand-offs over). An
//!    error before the send gives the claim back; after it, the claim
//!    stays. The executor's answer decides:
//!    * accepted (or "repeat trigger job": it already waits there): it is
//!      the executor's now; its callback brings the result;
//!    * refused (its block strategy, an unknown handler): a failed result
//!      with the executor's own message;
//!    * no connection (the executor is gone): the claim is given back and
//!      the trigger handed back to the queue, the executor's consumer
//!      stops, and once its lease ran out the leader moves its triggers;
//!    * no answer in time, or garbage: a failed result with the first bytes
//!      of the answer (it may have it: a callback that still comes brings
//!      its own outcome), never sent again in a loop;
//! 3. **ack** the message once every trigger of it is settled;
//! 4. a trigger whose mark was there is settled by what Redis holds: a kill
//!    from the API, a result to republish, someone else's trigger, or a
//!    hand-off cut short. That one's claim is taken over once its instance
//!    is gone (its lease ran out) or lives on past any send it had in
//!    progress, and the executor is asked (`/log`: a run that started has
//!    a log file; a send of a trigger still waiting there is refused as a
//!    repeat): the trigger is sent again only if it has neither.
//!
//! Why one file of ~700 lines: the hand-off is one protocol (claim, send,
//! answer, settle) whose steps fence each other; each step's failure rules
//! are read beside the step they guard.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use rondo_core::dedupe::Mark;
use rondo_core::model::BlockStrategy;
use rondo_core::{ExecResult, Trigger, TriggerBatch, amqp, clock};

use crate::answer::{self, Keep, fail};
use crate::client::{CallError, Target};
use crate::ctx::Ctx;
use crate::roster::Served;
use crate::runs::{Claim, Claimant, Found, Run};
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
    let key = ctx.names.trigger_key(&served.record().app, &served.id);
    let publish = amqp::Publish {
        exchange: &exchange,
        routing_key: &key,
        mandatory: true,
        user_id: ctx.names.publisher(),
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

/// Rounds of [`try_settle`] before the message goes back to the queue.
const MAX_ROUNDS: usize = 5;

async fn try_settle(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
) -> Result<Settled, rondo_core::Error> {
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
        let run = new_run(served, trigger, ctx.runs.log_id());
        let found = match ctx.runs.claim(&running, &run, ctx.me()).await? {
            Claim::Won => {
                let claimant = ctx.claimant(run.log_id);
                return hand_off(ctx, served, trigger, &run, &claimant, Attempt::First).await;
            }
            Claim::Found(f) => found(ctx, served, trigger, &record.incarnation, *f).await?,
        };
        if let Some(settled) = found {
            return Ok(settled);
        }
    }
    Ok(Settled::Requeue)
}

/// A trigger whose mark was already there (step 5 of the module doc);
/// `None`: read it again.
async fn found(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    incarnation: &str,
    f: Found,
) -> Result<Option<Settled>, rondo_core::Error> {
    let Found {
        mark,
        claimant,
        run,
    } = f;
    let mine = |executor: &str| executor == served.id;
    match mark {
        Some(Mark::Killed { .. }) => {
            answer::unclaimed(ctx, &served.id, trigger, fail("killed".into(), false)).await?;
            Ok(Some(Settled::Done))
        }
        Some(Mark::Finished { executor, result }) if mine(&executor) => {
            answer::republish(ctx, &trigger.group, result, run.as_ref()).await?;
            Ok(Some(Settled::Done))
        }
        Some(Mark::Running {
            executor,
            incarnation: theirs,
            since_ms,
        }) if mine(&executor) => {
            if theirs != incarnation && restarted(ctx, served, &theirs).await? {
                let msg = format!(
                    "executor {} restarted while the handler ran (incarnation {theirs}); the run's outcome is unknown",
                    served.id
                );
                let Some(held) = claimant else {
                    let result = ExecResult {
                        start_ms: since_ms,
                        ..fail(msg, true).into_result(trigger, &served.id)
                    };
                    answer::republish(ctx, &trigger.group, result, None).await?;
                    return Ok(Some(Settled::Done));
                };
                // Answered under the claim, taken over (a callback that
                // still comes brings the run's own outcome).
                let mine = ctx.claimant(held.log_id);
                if !ctx
                    .runs
                    .take_over(&trigger.group, &trigger.trigger_id, Some(&held), &mine)
                    .await?
                {
                    return Ok(None);
                }
                let run = run.unwrap_or_else(|| Run {
                    since_ms,
                    ..new_run(served, trigger, held.log_id)
                });
                answer::claimed(ctx, &run, &mine, fail(msg, true), Keep::Run).await?;
                return Ok(Some(Settled::Done));
            }
            cut_short(ctx, served, trigger, claimant, run).await
        }
        // Confirmed, someone else's, a foreign value, or gone (expired):
        // nothing of this executor's to do.
        _ => Ok(Some(Settled::Done)),
    }
}

/// Whether the executor left and re-entered the fleet since a mark of
/// `incarnation` was written (read from Redis: this instance's record may
/// lag a registration another instance took).
async fn restarted(
    ctx: &Ctx,
    served: &Served,
    incarnation: &str,
) -> Result<bool, rondo_core::Error> {
    let current = ctx.executors.get(&served.id).await?;
    Ok(current.is_some_and(|r| r.incarnation != incarnation))
}

/// A trigger claimed for this executor by an earlier hand-off, which may
/// have been cut short; `None`: read it again.
async fn cut_short(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    claimant: Option<Claimant>,
    run: Option<Run>,
) -> Result<Option<Settled>, rondo_core::Error> {
    let tid = &trigger.trigger_id;
    match claimant {
        // A running mark without a claim (the claim was lost: it expires
        // and is refreshed with the mark, so only an eviction does this):
        // no hand-off holds the trigger. Take it over.
        None => {
            let claimant = ctx.claimant(ctx.runs.log_id());
            if !ctx
                .runs
                .take_over(&trigger.group, tid, None, &claimant)
                .await?
            {
                return Ok(None);
            }
            record_and_hand_off(ctx, served, trigger, &claimant)
                .await
                .map(Some)
        }
        Some(_) if run.as_ref().is_some_and(|r| r.answered) => Ok(Some(Settled::Done)),
        Some(claimant) if claimant.instance == ctx.me() => {
            if ctx.local.wait_others(tid).await {
                // An earlier delivery here was at it: read what it did.
                return Ok(None);
            }
            // An earlier hand-off here ended without settling it (an
            // error it could not undo): whether it was sent is unknown.
            probe(ctx, served, trigger, &claimant, run).await.map(Some)
        }
        Some(theirs) => {
            let mut run = run;
            if let Owner::DoneWithIt = owner(ctx, &theirs.instance).await? {
                // It lives on past any send it had in progress: what it did
                // is in Redis now. A trigger it settled, answered or gave
                // back is read again; one it still holds, running, had an
                // error after its send (or the send's outcome is unknown).
                let now = ctx.runs.found(&trigger.group, tid).await?;
                let still = now.claimant.as_ref() == Some(&theirs)
                    && matches!(&now.mark, Some(Mark::Running { executor, .. }) if *executor == served.id);
                if !still {
                    return Ok(None);
                }
                run = now.run;
            }
            // Whether its send reached the executor is unknown: ask it.
            let claimant = ctx.claimant(theirs.log_id);
            if !ctx
                .runs
                .take_over(&trigger.group, tid, Some(&theirs), &claimant)
                .await?
            {
                return Ok(None);
            }
            probe(ctx, served, trigger, &claimant, run).await.map(Some)
        }
    }
}

enum Owner {
    /// Its lease ran out: its hand-off may have been cut anywhere.
    Gone,
    /// It lives on past any send it had in progress.
    DoneWithIt,
}

/// Waits until the instance that was handing a trigger off is either gone
/// or alive beyond any send it could have had in progress (its link to the
/// broker may have broken while it lives on and sends).
async fn owner(ctx: &Ctx, instance: &str) -> Result<Owner, rondo_core::Error> {
    // A hand-off makes two calls at most before its send ends (a probe's
    // `/log`, then the send).
    let past = clock::now_ms()
        + 2 * ctx.client.timeout().as_millis() as i64
        + OWNER_MARGIN.as_millis() as i64;
    loop {
        match ctx.instances.lease_of(instance).await? {
            None => return Ok(Owner::Gone),
            Some(renewed) if renewed >= past => return Ok(Owner::DoneWithIt),
            Some(_) => tokio::time::sleep(OWNER_CHECK).await,
        }
    }
}

/// Beyond its calls' timeouts, what a hand-off takes at most to record its
/// outcome.
const OWNER_MARGIN: Duration = Duration::from_secs(2);

/// Asks the executor whether a trigger whose hand-off was cut short reached
/// it, and sends it if not. `claimant` (this instance) holds its claim.
async fn probe(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    claimant: &Claimant,
    run: Option<Run>,
) -> Result<Settled, rondo_core::Error> {
    let Some(run) = run else {
        // The claim without its run, read once its holder was gone or past
        // any send: a run is recorded before its send, so it was not sent.
        return record_and_hand_off(ctx, served, trigger, claimant).await;
    };
    let target = served.target();
    match ctx
        .client
        .log(&target, run.log_id, run.log_date_ms, 1)
        .await
    {
        Ok(Some(page)) if !(page.is_end && page.to_line_num == 0) => {
            tracing::info!(trigger_id = %trigger.trigger_id, log_id = run.log_id, "a trigger whose hand-off was cut short had reached the executor (it has a log); not sent again");
            metrics::counter!("rondo_xxl_probes_total", "outcome" => "there").increment(1);
            return Ok(Settled::Done);
        }
        Ok(_) => {}
        Err(CallError::Unreachable { .. }) => {
            // It may have it, running: the trigger waits for its callback,
            // or for the lost-run scan if the executor stays away.
            metrics::counter!("rondo_xxl_probes_total", "outcome" => "unreachable").increment(1);
            served.unreachable();
            return Ok(Settled::Done);
        }
        Err(e) => {
            metrics::counter!("rondo_xxl_probes_total", "outcome" => "unknown").increment(1);
            // Whether it is there cannot be told: its outcome is unknown.
            let msg = format!(
                "lost: the gateway sending it stopped, and executor {} cannot tell whether it got it ({e}); the run's outcome is unknown",
                target.address
            );
            answer::claimed(ctx, &run, claimant, fail(msg, true), Keep::Run).await?;
            return Ok(Settled::Done);
        }
    }
    metrics::counter!("rondo_xxl_probes_total", "outcome" => "resent").increment(1);
    hand_off(ctx, served, trigger, &run, claimant, Attempt::Again).await
}

/// The run of `trigger` handed off now under `log_id`.
fn new_run(served: &Served, trigger: &Trigger, log_id: i64) -> Run {
    Run {
        trigger_id: trigger.trigger_id.clone(),
        group: trigger.group.clone(),
        job_id: trigger.job_id,
        fire_ms: trigger.fire_ms,
        executor_id: served.id.clone(),
        log_id,
        log_date_ms: trigger.fire_ms,
        since_ms: clock::now_ms(),
        killed: false,
        covered_by: None,
        answered: false,
        secrets: trigger.secrets.clone(),
    }
}

/// Records the run of a trigger `claimant` holds, then hands it off.
async fn record_and_hand_off(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    claimant: &Claimant,
) -> Result<Settled, rondo_core::Error> {
    let run = new_run(served, trigger, claimant.log_id);
    ctx.runs.record(&run).await?;
    hand_off(ctx, served, trigger, &run, claimant, Attempt::First).await
}

/// Whether a hand-off's trigger may have been sent before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Never sent: a failure before the send gives the claim back, and its
    /// redelivery claims it afresh.
    First,
    /// Sent again after the executor said it has none of it (a probe): an
    /// earlier send may still be on its way, so the claim is never given
    /// back (the message goes back to the queue instead, and its
    /// redelivery asks the executor again), and it is checked to still be
    /// this hand-off's right before the send (a callback, the lost-run
    /// scan or a kill may have settled the trigger while the executor was
    /// asked).
    Again,
}

/// Sends a trigger `claimant` holds, its run recorded. A first attempt's
/// error before the send gives it back (its redelivery claims it afresh);
/// after the send, or on another attempt, the claim stays (its redelivery
/// asks the executor).
async fn hand_off(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    run: &Run,
    claimant: &Claimant,
    attempt: Attempt,
) -> Result<Settled, rondo_core::Error> {
    let (covered, send_by) = match prepare(ctx, served, trigger, run, claimant, attempt).await {
        Ok(Ready::Send { covered, send_by }) => (covered, send_by),
        Ok(Ready::Settled(settled)) => return Ok(settled),
        Err(e) => {
            if attempt == Attempt::First
                && let Err(undo) = ctx.runs.release(run, claimant).await
            {
                tracing::warn!(trigger_id = %trigger.trigger_id, error = %undo, "cannot give a claimed trigger back; its redelivery asks the executor");
            }
            return Err(e);
        }
    };
    served.jobs_changed();
    let sent = send(ctx, served, trigger, run, claimant, send_by, attempt).await;
    if !covered.is_empty() && !matches!(sent, Ok((_, true))) {
        // It replaced nothing: the runs it marked are not covered.
        let uncovered = crate::kill::unmark(ctx, &covered, |r| {
            r.covered_by
                .take_if(|by| *by == trigger.trigger_id)
                .is_some()
        })
        .await;
        if let Err(e) = uncovered {
            tracing::warn!(trigger_id = %trigger.trigger_id, error = %e, "cannot unmark the runs a COVER_EARLY trigger did not replace");
        }
    }
    sent.map(|(settled, _)| settled)
}

/// What comes of a claimed trigger before its send.
enum Ready {
    /// Send it before `send_by`; the log ids of the runs it replaces
    /// (COVER_EARLY).
    Send {
        covered: Vec<i64>,
        send_by: tokio::time::Instant,
    },
    /// Settled without a send.
    Settled(Settled),
}

async fn prepare(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    run: &Run,
    claimant: &Claimant,
    attempt: Attempt,
) -> Result<Ready, rondo_core::Error> {
    if i32::try_from(trigger.job_id).is_err() {
        let msg = format!(
            "job id {} is beyond what XXL-JOB's executors take (a Java int, at most {})",
            trigger.job_id,
            i32::MAX
        );
        answer::claimed(ctx, run, claimant, fail(msg, false), Keep::Nothing).await?;
        return Ok(Ready::Settled(Settled::Done));
    }
    let Some(send_by) = ctx.instances.send_by() else {
        // This instance has not renewed its lease lately (Redis away, or
        // the process stalled): the others may be taking its hand-offs
        // over. Sending now could send twice.
        return not_sent(ctx, run, claimant, attempt)
            .await
            .map(Ready::Settled);
    };
    if attempt == Attempt::Again
        && !ctx
            .runs
            .holds(&trigger.group, &trigger.trigger_id, claimant)
            .await?
    {
        // Settled by someone else while the executor was asked.
        return Ok(Ready::Settled(Settled::Done));
    }
    let covered = if trigger.block == BlockStrategy::CoverEarly {
        crate::kill::mark_job(ctx, &served.id, trigger.job_id, |r| {
            if r.trigger_id == trigger.trigger_id || r.covered_by.is_some() {
                return false;
            }
            r.covered_by = Some(trigger.trigger_id.clone());
            true
        })
        .await?
    } else {
        Vec::new()
    };
    Ok(Ready::Send { covered, send_by })
}

/// A claimed trigger not sent now: a first attempt is given back to the
/// queue (if the claim is still `claimant`'s); another keeps its claim and
/// its message goes back, so that its redelivery asks the executor again.
async fn not_sent(
    ctx: &Ctx,
    run: &Run,
    claimant: &Claimant,
    attempt: Attempt,
) -> Result<Settled, rondo_core::Error> {
    if attempt == Attempt::Again {
        return Ok(Settled::Requeue);
    }
    Ok(if ctx.runs.release(run, claimant).await? {
        Settled::HandBack
    } else {
        Settled::Done
    })
}

/// Sends a claimed, recorded trigger and settles it by the executor's
/// answer; also whether the executor has it.
async fn send(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    run: &Run,
    claimant: &Claimant,
    send_by: tokio::time::Instant,
    attempt: Attempt,
) -> Result<(Settled, bool), rondo_core::Error> {
    let param = trigger_param(trigger, run.log_id);
    let mut target = served.target();
    let mut reply = ctx.client.trigger(&target, &param, send_by).await;
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
        reply = ctx.client.trigger(&target, &param, send_by).await;
    }
    match reply {
        Ok(r) if r.is_success() => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "sent").increment(1);
            ctx.tails.track(run);
            Ok((Settled::Sent, true))
        }
        Ok(r) if wire::is_repeat(&r) => {
            // It waits in the job's queue there already (a probe's send).
            ctx.tails.track(run);
            Ok((Settled::Done, true))
        }
        Ok(r) => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "refused").increment(1);
            let msg = r
                .msg
                .unwrap_or_else(|| format!("refused with code {}", r.code));
            let retryable = !wire::is_block_refusal(&msg);
            answer::claimed(ctx, run, claimant, fail(msg, retryable), Keep::Nothing).await?;
            Ok((Settled::Done, false))
        }
        Err(CallError::Unreachable { detail, .. }) => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "handed_back").increment(1);
            tracing::warn!(trigger_id = %trigger.trigger_id, detail, "the executor cannot be reached; the trigger goes back to its queue");
            served.unreachable();
            let settled = match attempt {
                Attempt::First => not_sent(ctx, run, claimant, attempt).await?,
                // An earlier send may be there: the trigger waits for its
                // callback, or for the lost-run scan.
                Attempt::Again => Settled::Done,
            };
            served.jobs_changed();
            Ok((settled, false))
        }
        Err(CallError::Late { .. }) => {
            // This instance stalled between its lease check and the send:
            // another may be taking the trigger over. It was not sent.
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "late").increment(1);
            tracing::warn!(trigger_id = %trigger.trigger_id, "this gateway stalled before the send; the trigger goes back to its queue");
            Ok((not_sent(ctx, run, claimant, attempt).await?, false))
        }
        Err(e) => {
            metrics::counter!("rondo_xxl_triggers_total", "outcome" => "no_answer").increment(1);
            answer::claimed(ctx, run, claimant, fail(e.to_string(), true), Keep::Run).await?;
            // It may have it: the runs it marked stay covered.
            Ok((Settled::Done, true))
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
        executor_params: rondo_core::model::secrets::expand(&trigger.params, &trigger.secrets),
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
