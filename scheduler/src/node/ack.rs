//! Acks: a fired member leaves this node's ring once its trigger is
//! confirmed. Acks of one partition that are ready together share one
//! `ZREM` (group commit); each fire waits for its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rondo_core::batcher::{Batcher, Limits};

use crate::store::Store;

/// Ring acks per Redis command at most, and commands in flight.
const LIMITS: Limits = Limits {
    max_items: 1_000,
    max_flushes: 2,
    // The fire is published, recorded in flight and announced already; the
    // ack only tidies its ring, and nothing waits for it but the fire's
    // slot among `scheduler.max_fires_in_flight`.
    linger: std::time::Duration::from_millis(25),
};

/// The node's ack batcher: partition → members. A member already gone
/// from the ring was taken by a standby or moved by the leader, which
/// publish it too: counted in `double_published`.
pub(super) fn batcher(
    store: Store,
    node: String,
    double_published: Arc<AtomicU64>,
) -> Batcher<u32, String, ()> {
    Batcher::spawn("ring ack", LIMITS, move |p: u32, members: Vec<String>| {
        let (store, node, doubles) = (store.clone(), node.clone(), double_published.clone());
        async move {
            let removed = store.node().ack_many(p, &node, &members).await?;
            let gone = (members.len() as u64).saturating_sub(removed);
            if gone > 0 {
                doubles.fetch_add(gone, Ordering::Relaxed);
                metrics::counter!("rondo_fire_double_publishes_total").increment(gone);
                tracing::warn!(
                    partition = p,
                    gone,
                    "fired members already gone from the ring: published by another node too"
                );
            }
            Ok(())
        }
    })
}
