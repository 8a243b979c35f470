//! Runs whose callback can no longer come are failed as lost (retryable,
//! so the job's retries apply, as for rondo's own executors):
//! * the executor has not answered `/beat` for `xxl.lost_after_ms` (its
//!   lease in rondo's registry is that old): it died with them;
//! * the executor answers, but `/idleBeat` has shown the run's job neither
//!   running nor queued there for `xxl.lost_after_ms / 2`, and the run
//!   was handed off more than `xxl.lost_after_ms` ago: the executor
//!   restarted and forgot it.
//!
//! `xxl-job-core` sends a callback it failed to deliver again every 30 s,
//! so `xxl.lost_after_ms` must be well above that; a callback that still
//! comes later brings the executor's own outcome (the run was kept).
//! One live instance scans each executor (rendezvous hashing).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::{Error, clock};
use tokio_util::sync::CancellationToken;

use crate::answer;
use crate::ctx::Ctx;
use crate::handoff::fail;
use crate::served::Served;

/// Scans until `stop`.
pub(crate) async fn scan(ctx: Arc<Ctx>, stop: CancellationToken) {
    let every = Duration::from_millis((ctx.xxl.lost_after_ms / 4).clamp(250, 5_000));
    // (executor, job) → when its job was first seen idle with runs waiting.
    let mut idle_since: HashMap<(String, u64), i64> = HashMap::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        for served in ctx.fleet.all() {
            if !ctx.instances.leads(&served.id) {
                continue;
            }
            if let Err(e) = scan_one(&ctx, &served, &mut idle_since).await {
                tracing::warn!(executor_id = %served.id, error = %e, "cannot scan for lost runs");
            }
        }
    }
}

async fn scan_one(
    ctx: &Ctx,
    served: &Served,
    idle_since: &mut HashMap<(String, u64), i64>,
) -> Result<(), Error> {
    let now = clock::now_ms();
    let lost_after = ctx.xxl.lost_after_ms as i64;
    let old = ctx
        .runs
        .inflight_before(&served.id, now - lost_after)
        .await?;
    idle_since.retain(|(id, _), _| *id != served.id || !old.is_empty());
    if old.is_empty() {
        return Ok(());
    }
    let mut by_job: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for (log_id, job) in old {
        by_job.entry(job).or_default().push(log_id);
    }
    let app = served.record().app;
    let lease: Option<i64> = ctx
        .pool
        .get()
        .await?
        .zscore(ctx.names.registry(&app), &served.id)
        .await?;
    if lease.is_none_or(|at| at < now - lost_after) {
        let why = format!(
            "lost: XXL-JOB executor {} has not answered for {} s; the run's outcome is unknown",
            served.record().address,
            lost_after / 1000
        );
        for log_ids in by_job.values() {
            fail_lost(ctx, served, log_ids, &why).await?;
        }
        return Ok(());
    }
    for (job, log_ids) in by_job {
        let key = (served.id.clone(), job);
        let idle = matches!(
            ctx.client.idle_beat(&served.target(), i32::try_from(job).unwrap_or(i32::MAX)).await,
            Ok(reply) if reply.is_success()
        );
        if !idle {
            idle_since.remove(&key);
            continue;
        }
        let since = *idle_since.entry(key.clone()).or_insert(now);
        if now - since >= lost_after / 2 {
            let why = format!(
                "lost: XXL-JOB executor {} runs nothing of job {job} and sent no callback (restarted?); the run's outcome is unknown",
                served.record().address
            );
            fail_lost(ctx, served, &log_ids, &why).await?;
            idle_since.remove(&key);
        }
    }
    Ok(())
}

async fn fail_lost(ctx: &Ctx, served: &Served, log_ids: &[i64], why: &str) -> Result<(), Error> {
    for run in ctx.runs.runs(log_ids).await?.into_iter().flatten() {
        if run.answered {
            continue;
        }
        metrics::counter!("rondo_xxl_lost_triggers_total").increment(1);
        tracing::warn!(trigger_id = %run.trigger_id, log_id = run.log_id, "{why}");
        answer::sent_unanswered(ctx, served, &run, fail(why.to_owned(), true)).await?;
    }
    Ok(())
}
