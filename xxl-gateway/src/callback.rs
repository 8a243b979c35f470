//! Callbacks (`/api/callback`): each run's outcome becomes rondo's result
//! event, whichever gateway instance handed the run off.
//!
//! A callback is answered with success only once every result in it is
//! confirmed by the broker (then the runs' records go): a gateway that dies
//! in between gets the callback again from `xxl-job-core`, which keeps
//! callbacks it could not deliver and sends them again.
//!
//! The code maps as XXL-JOB's: 200 success, 502 timeout, anything else a
//! failure with `handleMsg`. A failure of a run whose job was killed, or
//! that a COVER_EARLY trigger replaced, is final (not retried), as for
//! rondo's own executors. A log id no run has (never handed off, or
//! answered and gone) is acknowledged, logged and counted: sending it again
//! would change nothing.
//!
//! An entry is taken only for a run of a group the callback's access token
//! opens: the run was handed to an executor of that group, under a log id
//! only it was told (62 random bits, never a sequence). An entry for
//! another group's run is acknowledged like an unknown one (a caller
//! learns nothing of other groups' runs) and counted (`outcome =
//! "forbidden"`).

use std::sync::Arc;

use futures_util::future::try_join_all;
use rondo_core::event::Event;
use rondo_core::trigger::code;
use rondo_core::{Error, ExecResult, clock};

use crate::access::Verdict;
use crate::answer;
use crate::ctx::Ctx;
use crate::runs::Run;
use crate::wire::{self, CallbackEntry};

/// Handles a callback's entries, sent with access token `token`; `Err`
/// when it must be sent again.
pub(crate) async fn handle(
    ctx: &Arc<Ctx>,
    entries: Vec<CallbackEntry>,
    token: &str,
) -> Result<(), Error> {
    let log_ids: Vec<i64> = entries.iter().map(|e| e.log_id).collect();
    let runs = ctx.runs.runs(&log_ids).await?;
    let now = clock::now_ms();
    let mut settled: Vec<(Run, ExecResult)> = Vec::with_capacity(entries.len());
    for (entry, run) in entries.into_iter().zip(runs) {
        let Some(run) = run else {
            metrics::counter!("rondo_xxl_callbacks_total", "outcome" => "unknown").increment(1);
            tracing::warn!(
                log_id = entry.log_id,
                code = entry.code(),
                "a callback for a log id no trigger has; acknowledged"
            );
            continue;
        };
        if !matches!(ctx.access.verdict(&run.group, token), Verdict::Opens(_)) {
            metrics::counter!("rondo_xxl_callbacks_total", "outcome" => "forbidden").increment(1);
            tracing::warn!(
                log_id = entry.log_id,
                group = %run.group,
                "a callback for a run of a group its access token does not open; acknowledged, not taken"
            );
            continue;
        }
        let outcome = if run.answered { "late" } else { "handled" };
        metrics::counter!("rondo_xxl_callbacks_total", "outcome" => outcome).increment(1);
        let result = result_of(&run, &entry, now);
        settled.push((run, result));
    }
    if settled.is_empty() {
        return Ok(());
    }
    let events: Vec<Event> = settled
        .iter()
        .map(|(_, r)| Event::Result(r.clone()))
        .collect();
    publish_all(ctx, &events).await?;
    let mut pipe = redis::pipe();
    for (run, result) in &settled {
        ctx.runs
            .settle(&mut pipe, run, &answer::confirmed(result))?;
    }
    ctx.runs.write(&pipe).await?;
    for (run, _) in settled {
        answer::jobs_changed(ctx, &run.executor_id);
        crate::logs::after_callback(ctx, run);
    }
    Ok(())
}

/// Publishes results of any routing keys, each confirmed.
async fn publish_all(ctx: &Ctx, events: &[Event]) -> Result<(), Error> {
    let (ok, failed): (Vec<Event>, Vec<Event>) = events
        .iter()
        .cloned()
        .partition(|e| e.routing_key() == "result.success");
    try_join_all(
        [ok, failed]
            .iter()
            .filter(|batch| !batch.is_empty())
            .map(|batch| ctx.events.publish(batch)),
    )
    .await?;
    Ok(())
}

/// The result a callback entry makes of `run`.
pub(crate) fn result_of(run: &Run, entry: &CallbackEntry, now_ms: i64) -> ExecResult {
    let code = match entry.code() {
        wire::code::SUCCESS => code::SUCCESS,
        wire::code::TIMEOUT => code::TIMEOUT,
        _ => code::FAIL,
    };
    let text = entry.msg().map(wire::plain).unwrap_or_default();
    let (msg, retryable) = match (&run.covered_by, run.killed) {
        _ if code == code::SUCCESS => (text, false),
        (Some(by), _) => (
            format!("block strategy COVER_EARLY: replaced by trigger {by}: {text}"),
            false,
        ),
        (None, true) => (format!("killed: {text}"), false),
        (None, false) if code == code::TIMEOUT => (format!("timeout: {text}"), true),
        (None, false) => (text, true),
    };
    run.result(code, msg.trim_end().to_owned(), retryable, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Run {
        Run {
            trigger_id: "7-100-0".into(),
            group: "g".into(),
            job_id: 7,
            fire_ms: 100,
            executor_id: "a-h-1".into(),
            log_id: 3,
            log_date_ms: 100,
            since_ms: 110,
            killed: false,
            covered_by: None,
            answered: false,
            secrets: Default::default(),
        }
    }

    fn entry(code: i32, msg: Option<&str>) -> CallbackEntry {
        CallbackEntry {
            log_id: 3,
            handle_code: Some(code),
            handle_msg: msg.map(str::to_owned),
            execute_result: None,
        }
    }

    #[test]
    fn codes_map_as_xxl_jobs_and_kills_and_covers_are_final() {
        let ok = result_of(&run(), &entry(200, None), 150);
        assert_eq!(
            (ok.code, ok.msg.as_str(), ok.start_ms, ok.end_ms),
            (200, "", 110, 150)
        );
        let timeout = result_of(&run(), &entry(502, Some("job execute timeout ")), 150);
        assert_eq!((timeout.code, timeout.retryable), (502, true));
        let failed = result_of(&run(), &entry(500, Some("a<br>b")), 150);
        assert_eq!(
            (failed.code, failed.msg.as_str(), failed.retryable),
            (500, "a\nb", true)
        );
        let odd = result_of(&run(), &entry(0, None), 150);
        assert_eq!(odd.code, 500, "anything but 200 and 502 is a failure");
        let killed = Run {
            killed: true,
            ..run()
        };
        let r = result_of(
            &killed,
            &entry(
                500,
                Some("scheduling center kill job. [job running, killed]"),
            ),
            150,
        );
        assert!(!r.retryable && r.msg.starts_with("killed: "), "{r:?}");
        let covered = Run {
            covered_by: Some("7-200-0".into()),
            ..run()
        };
        let r = result_of(&covered, &entry(500, Some("x")), 150);
        assert!(
            !r.retryable && r.msg.contains("replaced by trigger 7-200-0"),
            "{r:?}"
        );
        let late = result_of(&run(), &entry(200, None), 50);
        assert_eq!(late.end_ms, 110, "never before its start");
    }
}
