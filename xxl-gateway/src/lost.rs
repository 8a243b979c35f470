//! Runs whose callback can no longer come are failed as lost (retryable,
//! so the job's retries apply, as for rondo's own executors):
//! * the executor has not answered `/beat` for `xxl.lost_after_ms` (its
//!   lease in rondo's registry is that old): it died with them;
//! * the executor answers, but `/idleBeat` has shown the run's job neither
//!   running nor queued there for `xxl.lost_after_ms / 2`, and the run
//!   was handed off more than `xxl.lost_after_ms` ago: the executor
//!   restarted and forgot it.
//!
//! * the executor left the fleet (`/api/registryRemove`, no registration)
//!   `xxl.lost_after_ms` ago with runs still waiting.
//!
//! `xxl-job-core` sends a callback it failed to deliver again every 30 s,
//! so `xxl.lost_after_ms` must be well above that; a callback that still
//! comes later brings the executor's own outcome (the run was kept).
//! One live instance scans each executor (rendezvous hashing). A run is
//! failed only by the instance that took its claim over, and a hand-off
//! that sends a trigger again (a redelivery that asked the executor) checks
//! the claim right before: the scan and a hand-off never both answer it,
//! and a trigger the scan failed is not sent again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::{Error, clock};
use tokio_util::sync::CancellationToken;

use crate::answer::{self, Keep, fail};
use crate::ctx::Ctx;
use crate::roster::Served;

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
        // What this instance no longer scans starts afresh if it comes back.
        idle_since.retain(|(id, _), _| ctx.fleet.get(id).is_some() && ctx.instances.leads(id));
        for served in ctx.fleet.all() {
            if !ctx.instances.leads(&served.id) {
                continue;
            }
            if let Err(e) = scan_one(&ctx, &served, &mut idle_since).await {
                tracing::warn!(executor_id = %served.id, error = %e, "cannot scan for lost runs");
            }
        }
        if let Err(e) = scan_departed(&ctx).await {
            tracing::warn!(error = %e, "cannot scan departed executors for lost runs");
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
    // Members whose run is gone or answered only leave the set.
    let log_ids: Vec<i64> = old.iter().map(|(log, _)| *log).collect();
    let runs = ctx.runs.runs(&log_ids).await?;
    let (waiting, stale): (Vec<_>, Vec<_>) = old
        .into_iter()
        .zip(runs)
        .partition(|(_, run)| run.as_ref().is_some_and(|r| !r.answered));
    let stale: Vec<(i64, u64)> = stale.into_iter().map(|(m, _)| m).collect();
    ctx.runs.drop_inflight(&served.id, &stale).await?;
    let mut by_job: BTreeMap<u64, Vec<(i64, u64)>> = BTreeMap::new();
    for ((log_id, job), _) in waiting {
        by_job.entry(job).or_default().push((log_id, job));
    }
    // A job's idle time counts only while a run of it waits.
    idle_since.retain(|(id, job), _| *id != served.id || by_job.contains_key(job));
    if by_job.is_empty() {
        return Ok(());
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
        for members in by_job.values() {
            fail_lost(ctx, &served.id, members, &why).await?;
        }
        return Ok(());
    }
    for (job, members) in by_job {
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
            fail_lost(ctx, &served.id, &members, &why).await?;
            idle_since.remove(&key);
        }
    }
    Ok(())
}

/// Fails the runs still waiting on executors that left the fleet
/// `xxl.lost_after_ms` ago, and forgets those that have none left.
async fn scan_departed(ctx: &Ctx) -> Result<(), Error> {
    let now = clock::now_ms();
    let lost_after = ctx.xxl.lost_after_ms as i64;
    let departed: Vec<(String, i64)> = ctx
        .pool
        .get()
        .await?
        .zrangebyscore_withscores(ctx.names.xxl_departed(), "-inf", now - lost_after)
        .await?;
    for (id, _) in departed {
        if !ctx.instances.leads(&id) {
            continue;
        }
        let back: Option<i64> = ctx
            .pool
            .get()
            .await?
            .zscore(ctx.names.xxl_executors(), &id)
            .await?;
        let waiting = ctx.runs.inflight_before(&id, i64::MAX).await?;
        if back.is_some() || waiting.is_empty() {
            // Back in the fleet (its own scan goes on), or nothing waits.
            let () = ctx
                .pool
                .get()
                .await?
                .zrem(ctx.names.xxl_departed(), &id)
                .await?;
            continue;
        }
        let why = format!(
            "lost: XXL-JOB executor {id} left the fleet {} s ago and sent no callback; the run's outcome is unknown",
            lost_after / 1000
        );
        fail_lost(ctx, &id, &waiting, &why).await?;
    }
    Ok(())
}

/// Fails the runs of `members` (`(log id, job id)`) of an executor as
/// lost, each once its claim is taken over; members that have no run, or
/// whose trigger is claimed under another log id, only leave the set.
async fn fail_lost(
    ctx: &Ctx,
    executor_id: &str,
    members: &[(i64, u64)],
    why: &str,
) -> Result<(), Error> {
    let log_ids: Vec<i64> = members.iter().map(|(log, _)| *log).collect();
    let mut stale = Vec::new();
    for (member, run) in members.iter().zip(ctx.runs.runs(&log_ids).await?) {
        let Some(run) = run.filter(|r| !r.answered) else {
            stale.push(*member);
            continue;
        };
        let tid = run.trigger_id.clone();
        let _local = ctx.local.enter(&tid);
        if ctx.local.wait_others(&tid).await {
            // A hand-off of it here just ended: the next scan sees what
            // it did.
            continue;
        }
        let held = ctx.runs.found(&run.group, &tid).await?.claimant;
        let Some(held) = held.filter(|c| c.log_id == run.log_id) else {
            stale.push(*member);
            continue;
        };
        let mine = ctx.claimant(run.log_id);
        if !ctx
            .runs
            .take_over(&run.group, &tid, Some(&held), &mine)
            .await?
        {
            continue;
        }
        metrics::counter!("rondo_xxl_lost_triggers_total").increment(1);
        tracing::warn!(trigger_id = %tid, log_id = run.log_id, "{why}");
        answer::claimed(ctx, &run, &mine, fail(why.to_owned(), true), Keep::Run).await?;
    }
    ctx.runs.drop_inflight(executor_id, &stale).await
}
