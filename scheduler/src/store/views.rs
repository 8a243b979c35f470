//! Each role's view of the [`Store`]: what only the leader, only a node or
//! only the API writes or reads, reached as `store.leader()`,
//! `store.node()`, `store.api()`. What several roles use (a job's
//! definition, an ack, a FIX_DELAY re-arm, the group list) stays on the
//! [`Store`] itself.

use super::handle::Store;

/// The leader's: the terms, the claim of due fires, the rings' owners and
/// their reassignment.
#[derive(Clone, Copy)]
pub struct LeaderStore<'s>(pub(super) &'s Store);

/// A node's: reading its ring and acking what it published.
#[derive(Clone, Copy)]
pub struct NodeStore<'s>(pub(super) &'s Store);

/// The API's: groups and jobs written, pages, next and missed fires, the
/// sizes it reports.
#[derive(Clone, Copy)]
pub struct ApiStore<'s>(pub(super) &'s Store);

impl Store {
    pub fn leader(&self) -> LeaderStore<'_> {
        LeaderStore(self)
    }

    pub fn node(&self) -> NodeStore<'_> {
        NodeStore(self)
    }

    pub fn api(&self) -> ApiStore<'_> {
        ApiStore(self)
    }
}
