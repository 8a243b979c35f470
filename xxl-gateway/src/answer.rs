//! Results the gateway publishes on an executor's behalf when no callback
//! brings one: a refusal, no answer, a kill found in the mark, a lost run.
//! Every path keeps a rondo executor's order (`docs/executor-protocol.md`
//! §6.2): the `finished` mark, the result confirmed by the broker, then the
//! `confirmed` mark and the records' fate. For a claimed trigger the
//! `finished` mark is written only while the claim is still the answering
//! hand-off's, so a callback (or another instance) that settled the trigger
//! meanwhile keeps it.

use rondo_core::dedupe::Mark;
use rondo_core::event::Event;
use rondo_core::{Error, ExecResult, Trigger};

use crate::ctx::Ctx;
use crate::runs::{Claimant, Run};

pub(crate) use crate::runs::cut_msg as cut;

/// What becomes of a run's records once its result is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// They go: the run is over.
    Nothing,
    /// The run stays, marked answered, for a callback that may still come
    /// (the executor may have it): its own outcome is published then.
    Run,
}

/// Answers a trigger no hand-off claimed (a kill found in its mark).
pub(crate) async fn unclaimed(
    ctx: &Ctx,
    executor_id: &str,
    trigger: &Trigger,
    failure: Failure,
) -> Result<(), Error> {
    let result = failure.into_result(trigger, executor_id);
    let mut pipe = redis::pipe();
    ctx.runs.put_mark(
        &mut pipe,
        &trigger.group,
        &result.trigger_id,
        &finished(&result),
    )?;
    ctx.runs.write(&pipe).await?;
    ctx.events.publish(&[Event::Result(result.clone())]).await?;
    let mut pipe = redis::pipe();
    ctx.runs.put_mark(
        &mut pipe,
        &trigger.group,
        &result.trigger_id,
        &confirmed(&result),
    )?;
    ctx.runs.write(&pipe).await
}

/// Answers a trigger `claimant` holds (refused, no answer, lost); false
/// when someone else settles it.
pub(crate) async fn claimed(
    ctx: &Ctx,
    run: &Run,
    claimant: &Claimant,
    failure: Failure,
    keep: Keep,
) -> Result<bool, Error> {
    let result = run_result(run, failure);
    if !ctx
        .runs
        .finish(&run.group, &run.trigger_id, claimant, &finished(&result))
        .await?
    {
        return Ok(false);
    }
    ctx.events.publish(&[Event::Result(result.clone())]).await?;
    let mut pipe = redis::pipe();
    match keep {
        Keep::Nothing => ctx.runs.settle(&mut pipe, run, &confirmed(&result))?,
        Keep::Run => {
            ctx.runs
                .put_mark(&mut pipe, &run.group, &run.trigger_id, &confirmed(&result))?;
            let answered = Run {
                answered: true,
                ..run.clone()
            };
            ctx.runs.rewrite_run(&mut pipe, &answered)?;
            ctx.runs.leave_inflight(&mut pipe, run);
        }
    }
    ctx.runs.write(&pipe).await?;
    jobs_changed(ctx, &run.executor_id);
    Ok(true)
}

/// Publishes a stored (or a restarted run's) result again for a redelivered
/// trigger, and ends the run it has, if any.
pub(crate) async fn republish(
    ctx: &Ctx,
    group: &str,
    result: ExecResult,
    run: Option<&Run>,
) -> Result<(), Error> {
    ctx.events.publish(&[Event::Result(result.clone())]).await?;
    let mut pipe = redis::pipe();
    match run {
        // Answered by the gateway: its run stays for a late callback.
        Some(run) if run.answered => {
            ctx.runs
                .put_mark(&mut pipe, group, &result.trigger_id, &confirmed(&result))?;
            ctx.runs.leave_inflight(&mut pipe, run);
        }
        Some(run) => ctx.runs.settle(&mut pipe, run, &confirmed(&result))?,
        None => ctx
            .runs
            .put_mark(&mut pipe, group, &result.trigger_id, &confirmed(&result))?,
    }
    ctx.runs.write(&pipe).await?;
    if let Some(run) = run {
        jobs_changed(ctx, &run.executor_id);
    }
    Ok(())
}

fn finished(result: &ExecResult) -> Mark {
    Mark::Finished {
        executor: result.executor_id.clone(),
        result: result.clone(),
    }
}

pub(crate) fn confirmed(result: &ExecResult) -> Mark {
    Mark::Confirmed {
        executor: result.executor_id.clone(),
        code: result.code,
    }
}

/// The executor's `running_jobs` may have changed.
pub(crate) fn jobs_changed(ctx: &Ctx, executor_id: &str) {
    if let Some(served) = ctx.fleet.get(executor_id) {
        served.jobs_changed();
    }
}

fn run_result(run: &Run, failure: Failure) -> ExecResult {
    let now = rondo_core::clock::now_ms();
    run.result(
        rondo_core::trigger::code::FAIL,
        failure.msg,
        failure.retryable,
        now,
    )
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
        let now = rondo_core::clock::now_ms();
        ExecResult {
            trigger_id: trigger.trigger_id.clone(),
            job_id: trigger.job_id,
            executor_id: executor_id.to_owned(),
            fire_ms: trigger.fire_ms,
            start_ms: now,
            end_ms: now,
            code: rondo_core::trigger::code::FAIL,
            msg: cut(self.msg),
            retryable: self.retryable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_with_an_ellipsis() {
        assert_eq!(cut("short".into()), "short");
        let long = cut("é".repeat(5000));
        assert!(long.len() <= 4096);
        assert!(long.ends_with('…'));
    }
}
