//! The scheduler's state in Redis.
//!
//! * [`Store`] (`handle`): the handle; what it stores, a file each:
//!   `groups`; `jobs` (a definition is its field in its partition's hash
//!   `{pK}:defs`, its existence a bit of `{pK}:job-bits` ([`index`]), its
//!   next fire its score in the partition's due set, so the claim script
//!   never touches a key outside the partition's hash tag); `due` (the
//!   leader's claim); `rings` (every node's reads and acks, the leader's
//!   reassignment); `lease` (every node's leases on its rings, and a
//!   standby's take of a lapsed one). `defs` reads many definitions at once, `parsed` keeps
//!   them decoded.
//! * [`LeaderStore`], [`NodeStore`], [`ApiStore`] (`views`): each role's
//!   part, reached as `store.leader()`, `store.node()`, `store.api()`;
//!   what several roles share stays on [`Store`].
//! * [`triggers`]: what happens to a trigger after its dispatch: in-flight
//!   records, handled marks, retries waiting for their backoff, and the
//!   executor registry's dead entries.
//!
//! Writes a leader makes under its term (claim, reassign, due retries, lost
//! triggers) go through the fenced scripts in `lua/`, each prefixed with
//! `lua/fence.lua`, which refuses a term the partition no longer accepts.

mod channels;
pub(crate) mod defs;
mod due;
mod fence;
mod groups;
mod handle;
pub(crate) mod index;
mod jobs;
mod lease;
pub(crate) mod parsed;
mod rings;
pub mod triggers;
mod views;

pub use due::ClaimItem;
pub use handle::Store;
pub use jobs::Due;
pub use lease::Renewal;
pub use rings::{Move, RingRead};
pub use views::{ApiStore, LeaderStore, NodeStore};
