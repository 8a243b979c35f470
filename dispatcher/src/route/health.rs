//! FAILOVER and BUSYOVER: the first executor, in id order, that is healthy
//! (FAILOVER) or not busy with this job (BUSYOVER).
//!
//! XXL-JOB asks each executor in turn over RPC (`beat`, `idleBeat`). rondo's
//! executors write the same facts to the registry (lease score, the
//! `running_jobs` field of their hash, kept fresh within ~100 ms), so routing
//! reads Redis instead: no RPC, one round trip at most, and no slow
//! executor can hold the dispatch up.

use rondo_core::{Error, Job, clock};

use super::context::{RouteContext, Routed, Target};
use crate::registry::{Activity, LiveExecutor};

/// FAILOVER: the first executor whose heartbeat is at most
/// `ctx.fresh_within_ms` old. Just after a Redis outage no heartbeat is
/// fresh: the bound then reaches back to the outage's start, as the
/// lease's does.
pub fn failover(job: &Job, executors: &[LiveExecutor], ctx: &RouteContext) -> Routed {
    let now_ms = clock::now_ms();
    let within = now_ms - ctx.registry.lease_cutoff(now_ms, ctx.fresh_within_ms);
    match pick_fresh(executors, now_ms, within) {
        Some(id) => Routed::To(vec![Target::single(id)]),
        None => Routed::Refused(stale_message(job, executors, now_ms, within)),
    }
}

/// The first executor whose heartbeat is no older than `fresh_within_ms`.
pub fn pick_fresh(executors: &[LiveExecutor], now_ms: i64, fresh_within_ms: i64) -> Option<&str> {
    executors
        .iter()
        .find(|e| now_ms - e.heartbeat_ms <= fresh_within_ms)
        .map(|e| e.id.as_str())
}

fn stale_message(job: &Job, executors: &[LiveExecutor], now_ms: i64, within: i64) -> String {
    let ages: Vec<String> = executors
        .iter()
        .map(|e| format!("{} {} ms ago", e.id, now_ms - e.heartbeat_ms))
        .collect();
    format!(
        "FAILOVER: no executor of group {} has a heartbeat within {within} ms (last beats: {})",
        job.group,
        ages.join(", ")
    )
}

/// BUSYOVER: the first executor on which this job is neither running nor
/// queued. If every executor is busy with it (or says nothing), the fire
/// fails, as XXL-JOB's does when no `idleBeat` succeeds.
pub async fn busyover(job: &Job, executors: &[&str], ctx: &RouteContext) -> Result<Routed, Error> {
    let activity = ctx.registry.activity(executors, job.id).await?;
    if let Some(id) = pick_idle(executors, &activity) {
        return Ok(Routed::To(vec![Target::single(id)]));
    }
    let states: Vec<String> = executors
        .iter()
        .zip(&activity)
        .map(|(id, a)| match a {
            Activity::Unknown => format!("{id} (no status)"),
            Activity::Busy | Activity::Idle => (*id).to_owned(),
        })
        .collect();
    Ok(Routed::Refused(format!(
        "BUSYOVER: every executor of group {} is busy with job {} ({})",
        job.group,
        job.id,
        states.join(", ")
    )))
}

/// The first executor known to be idle for the job.
pub fn pick_idle<'a>(executors: &[&'a str], activity: &[Activity]) -> Option<&'a str> {
    debug_assert_eq!(executors.len(), activity.len());
    executors
        .iter()
        .zip(activity)
        .find(|(_, a)| **a == Activity::Idle)
        .map(|(id, _)| *id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(id: &str, heartbeat_ms: i64) -> LiveExecutor {
        LiveExecutor {
            id: id.to_owned(),
            heartbeat_ms,
        }
    }

    #[test]
    fn failover_skips_stale_executors_in_order() {
        let now = 100_000;
        let ex = [
            live("a", now - 1_501),
            live("b", now - 1_500),
            live("c", now),
        ];
        assert_eq!(pick_fresh(&ex, now, 1_500), Some("b"));
        assert_eq!(pick_fresh(&ex[..1], now, 1_500), None);
        assert_eq!(pick_fresh(&ex, now, 2_000), Some("a"));
    }

    #[test]
    fn busyover_takes_the_first_known_idle_executor() {
        use Activity::{Busy, Idle, Unknown};
        let ex = ["a", "b", "c"];
        assert_eq!(pick_idle(&ex, &[Busy, Unknown, Idle]), Some("c"));
        assert_eq!(pick_idle(&ex, &[Idle, Idle, Idle]), Some("a"));
        assert_eq!(pick_idle(&ex, &[Busy, Busy, Unknown]), None);
    }
}
