//! Routing strategies: which live executors of the group get a trigger.
//!
//! Every strategy gets the job, the group's live executors (sorted by id,
//! with their heartbeats) and a [`RouteContext`] with the cluster-wide state
//! a strategy may need, and decides a [`Routed`]: the targets, or why no
//! executor fits (a failed trigger, as XXL-JOB's router returning `FAIL`).
//! An `Err` means Redis did not answer: the fire is retried, not failed.
//!
//! Strategies whose choice depends on earlier choices (ROUND, LFU, LRU) keep
//! their state in Redis, per job, updated atomically, so they are fair
//! across every scheduler node rather than per node. The dispatcher crate's
//! README explains each algorithm.
//!
//! # Layout
//!
//! * [`order`]: FIRST, LAST, ROUND, RANDOM: a position in the sorted list.
//! * [`hash`]: CONSISTENT_HASH: XXL-JOB's MD5 ring with 100 virtual nodes.
//! * [`usage`]: LEAST_FREQUENTLY_USED and LEAST_RECENTLY_USED, Lua scripts
//!   over per-job Redis state.
//! * [`health`]: FAILOVER and BUSYOVER, read from the registry (no RPC).
//! * SHARDING_BROADCAST is here: every executor, one shard each.
//! * [`RouteContext`], [`Target`] and [`Routed`], what every strategy
//!   reads and answers, are `context`'s (so the strategies need nothing
//!   of this file).
//!
//! To add a strategy: a match arm in [`route`], a function in the family's
//! file, and the strategy in `rondo_core::model::SUPPORTED_ROUTING`.

mod context;
pub mod hash;
pub mod health;
pub mod order;
pub mod usage;

use rondo_core::{Error, Job, Routing};

use crate::registry::LiveExecutor;
pub use context::{RouteContext, Routed, Target, fresh_within_ms};

/// Picks the targets of one fire. `executors` is non-empty and sorted by id.
pub async fn route(
    job: &Job,
    executors: &[LiveExecutor],
    ctx: &RouteContext,
) -> Result<Routed, Error> {
    debug_assert!(!executors.is_empty());
    debug_assert!(executors.windows(2).all(|w| w[0].id < w[1].id));
    let ids: Vec<&str> = executors.iter().map(|e| e.id.as_str()).collect();
    let one = |id: &str| Routed::To(vec![Target::single(id)]);
    let routed = match job.routing {
        Routing::First => one(order::first(&ids)),
        Routing::Last => one(order::last(&ids)),
        Routing::Round => one(order::round(job, &ids, ctx).await?),
        Routing::Random => one(order::random(&ids)),
        Routing::ConsistentHash => one(&ctx.rings.pick(&job.group, &ids, job.id)),
        Routing::LeastFrequentlyUsed => one(&usage::least_frequently_used(job, &ids, ctx).await?),
        Routing::LeastRecentlyUsed => one(&usage::least_recently_used(job, &ids, ctx).await?),
        Routing::Failover => health::failover(job, executors, ctx),
        Routing::Busyover => health::busyover(job, &ids, ctx).await?,
        Routing::ShardingBroadcast => Routed::To(broadcast(&ids)),
    };
    Ok(routed)
}

/// SHARDING_BROADCAST: every live executor gets a trigger; its shard index
/// is its position in the sorted list, the total is the list's length.
pub fn broadcast(executors: &[&str]) -> Vec<Target> {
    let total = executors.len() as u32;
    executors
        .iter()
        .zip(0..)
        .map(|(id, index)| Target {
            executor_id: (*id).to_owned(),
            shard_index: index,
            shard_total: total,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_numbers_shards_in_sorted_order() {
        let targets = broadcast(&["a", "b", "c"]);
        let shards: Vec<(&str, u32, u32)> = targets
            .iter()
            .map(|t| (t.executor_id.as_str(), t.shard_index, t.shard_total))
            .collect();
        assert_eq!(shards, [("a", 0, 3), ("b", 1, 3), ("c", 2, 3)]);
    }
}
