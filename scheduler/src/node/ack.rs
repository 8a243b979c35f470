//! Acks: a fired member leaves this node's ring once its trigger is
//! confirmed. Acks of one partition that are ready together share one
//! `ZREM` (group commit); each fire waits for its own.

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

/// The node's ack batcher: partition → members.
pub(super) fn batcher(store: Store, node: String) -> Batcher<u32, String, ()> {
    Batcher::spawn("ring ack", LIMITS, move |p: u32, members: Vec<String>| {
        let (store, node) = (store.clone(), node.clone());
        async move { store.node().ack_many(p, &node, &members).await }
    })
}
