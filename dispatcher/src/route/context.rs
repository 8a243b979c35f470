//! What every routing strategy reads ([`RouteContext`]) and answers
//! ([`Routed`], [`Target`]).

use std::sync::Arc;

use rondo_core::Names;
use rondo_core::redis::Pool;

use super::hash::RingCache;
use crate::registry::Registry;

/// One executor picked for a trigger, with its shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub executor_id: String,
    pub shard_index: u32,
    pub shard_total: u32,
}

impl Target {
    pub(crate) fn single(executor_id: &str) -> Self {
        Target {
            executor_id: executor_id.to_owned(),
            shard_index: 0,
            shard_total: 1,
        }
    }
}

/// The outcome of routing one fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    /// Publish one trigger to each.
    To(Vec<Target>),
    /// No executor fits (all stale, all busy): a failed trigger with this
    /// message.
    Refused(String),
}

/// Shared state strategies may read or update.
#[derive(Clone)]
pub struct RouteContext {
    pub pool: Pool,
    pub names: Names,
    pub registry: Registry,
    /// FAILOVER takes an executor whose registry score is at most this old.
    pub fresh_within_ms: i64,
    /// CONSISTENT_HASH rings of recently seen executor lists.
    pub rings: Arc<RingCache>,
}

impl RouteContext {
    /// The context of a dispatcher: FAILOVER's freshness is half the
    /// liveness lease, so one late renewal is tolerated and two missed ones
    /// are not.
    pub fn new(pool: Pool, names: Names, registry: Registry, lease_ms: u64) -> Self {
        RouteContext {
            pool,
            names,
            registry,
            fresh_within_ms: fresh_within_ms(lease_ms),
            rings: Arc::new(RingCache::default()),
        }
    }
}

/// FAILOVER's freshness bound: half the lease, two lease renewals. An
/// executor whose score is older has missed a renewal; it is still live
/// (routing drops it only after four), but FAILOVER prefers one that is
/// surely up.
pub fn fresh_within_ms(lease_ms: u64) -> i64 {
    (lease_ms as i64) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_is_half_the_lease() {
        assert_eq!(fresh_within_ms(2_000), 1_000);
        assert_eq!(fresh_within_ms(3_000), 1_500);
    }
}
