//! Results the gateway publishes on an executor's behalf: what a callback
//! brings, and what the gateway must answer itself (a refusal, no answer,
//! a kill found in the mark, a lost run). Every path ends in the same
//! order as a rondo executor's (`docs/executor-protocol.md` §6.2): the
//! result is confirmed by the broker before the trigger's mark says so
//! and its records go.

use rondo_core::dedupe::Mark;
use rondo_core::event::Event;
use rondo_core::{Error, ExecResult, Trigger};

use crate::ctx::Ctx;
use crate::handoff::Failure;
use crate::runs::Run;
use crate::served::Served;

/// The longest `msg` published (as rondo's executors cut theirs).
const MAX_MSG_BYTES: usize = 4096;

/// `msg` cut to [`MAX_MSG_BYTES`] at a character boundary, with `…`.
pub(crate) fn cut(mut msg: String) -> String {
    if msg.len() <= MAX_MSG_BYTES {
        return msg;
    }
    let mut end = MAX_MSG_BYTES - '…'.len_utf8();
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    msg.truncate(end);
    msg.push('…');
    msg
}

/// What becomes of a run's records once its result is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// They go: the run is over.
    Nothing,
    /// The run stays, marked answered, for a callback that may still come
    /// (the executor may have it): its own outcome is published then.
    Run,
}

/// Answers a trigger that was never recorded (refused before the send).
pub(crate) async fn unsent(
    ctx: &Ctx,
    served: &Served,
    trigger: &Trigger,
    failure: Failure,
) -> Result<(), Error> {
    let result = failure.into_result(trigger, &served.id);
    publish_marked(ctx, served, &result, None, Keep::Nothing).await
}

/// Answers a sent trigger the executor refused.
pub(crate) async fn refused(
    ctx: &Ctx,
    served: &Served,
    run: &Run,
    failure: Failure,
) -> Result<(), Error> {
    let result = run_result(run, failure);
    publish_marked(ctx, served, &result, Some(run), Keep::Nothing).await?;
    served.jobs_changed();
    Ok(())
}

/// Answers a trigger whose send got no answer (or garbage), or whose run
/// is lost: its run stays for a late callback.
pub(crate) async fn sent_unanswered(
    ctx: &Ctx,
    served: &Served,
    run: &Run,
    failure: Failure,
) -> Result<(), Error> {
    let result = run_result(run, failure);
    publish_marked(ctx, served, &result, Some(run), Keep::Run).await?;
    served.jobs_changed();
    Ok(())
}

/// Publishes a stored or restarted-run result again (a redelivery).
pub(crate) async fn republish(
    ctx: &Ctx,
    served: &Served,
    trigger_id: &str,
    result: ExecResult,
) -> Result<(), Error> {
    debug_assert_eq!(result.trigger_id, trigger_id);
    publish_marked(ctx, served, &result, None, Keep::Nothing).await
}

fn run_result(run: &Run, failure: Failure) -> ExecResult {
    ExecResult {
        trigger_id: run.trigger_id.clone(),
        job_id: run.job_id,
        executor_id: run.executor_id.clone(),
        fire_ms: run.fire_ms,
        start_ms: run.since_ms,
        end_ms: rondo_core::clock::now_ms().max(run.since_ms),
        code: rondo_core::trigger::code::FAIL,
        msg: cut(failure.msg),
        retryable: failure.retryable,
    }
}

/// `finished` mark, the result confirmed, then `confirmed` and the
/// records' fate: a redelivery of the trigger in between republishes the
/// stored result instead of sending it again.
async fn publish_marked(
    ctx: &Ctx,
    served: &Served,
    result: &ExecResult,
    run: Option<&Run>,
    keep: Keep,
) -> Result<(), Error> {
    let finished = Mark::Finished {
        executor: served.id.clone(),
        result: result.clone(),
    };
    let mut pipe = redis::pipe();
    ctx.runs
        .put_mark(&mut pipe, &result.trigger_id, &finished)?;
    ctx.runs.write(&pipe).await?;
    ctx.events.publish(&[Event::Result(result.clone())]).await?;
    let mut pipe = redis::pipe();
    confirm(ctx, &mut pipe, result, run, keep)?;
    ctx.runs.write(&pipe).await
}

/// Adds to `pipe` a confirmed result's `confirmed` mark and its run's fate.
pub(crate) fn confirm(
    ctx: &Ctx,
    pipe: &mut redis::Pipeline,
    result: &ExecResult,
    run: Option<&Run>,
    keep: Keep,
) -> Result<(), Error> {
    let confirmed = Mark::Confirmed {
        executor: result.executor_id.clone(),
        code: result.code,
    };
    ctx.runs.put_mark(pipe, &result.trigger_id, &confirmed)?;
    match (run, keep) {
        (Some(run), Keep::Nothing) => ctx.runs.forget(pipe, run),
        (Some(run), Keep::Run) => {
            let answered = Run {
                answered: true,
                ..run.clone()
            };
            ctx.runs.put_run(pipe, &answered)?;
            ctx.runs.leave_inflight(pipe, run);
        }
        (None, _) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_with_an_ellipsis() {
        assert_eq!(cut("short".into()), "short");
        let long = cut("é".repeat(5000));
        assert!(long.len() <= MAX_MSG_BYTES);
        assert!(long.ends_with('…'));
    }
}
