//! rondo-dispatcher: turns a fire into triggers on executors' queues.
//!
//! Given a job and a fire instant, the dispatcher resolves the live
//! executors of the job's group from the Redis registry, routes (picks the
//! targets with one of XXL-JOB's ten strategies), publishes each target's
//! trigger in a persistent, `mandatory` message to the trigger exchange
//! (triggers for the same executor that are ready at once share a message:
//! group commit), waits for the broker's confirm of that message, records each sent
//! trigger as in flight for the lost-trigger monitor, and publishes a
//! trigger event. A fire with no live executor, no executor that fits the
//! strategy (FAILOVER, BUSYOVER), or whose message comes back unroutable
//! becomes a failed trigger with a clear message: never a silent drop.
//!
//! Every dispatch runs in a bounded lane: the fast lane, or the small slow
//! lane for a job whose dispatches were slow lately, so such jobs cannot
//! take every slot. `README.md` next to this crate explains the strategies,
//! their cluster-wide state and the lanes.
//!
//! # Layout
//!
//! * [`registry`]: the live executors of a group (liveness lease fresher
//!   than `registry.lease_ms`) and what their hashes say (`running_jobs`).
//! * [`route`]: the routing strategies, one file per family (`order`,
//!   `hash`, `usage`, `health`); the extension point for new ones. Lua
//!   scripts for the stateful ones are in `lua/`.
//! * [`lanes`]: the fast and slow lanes and the sliding window of slow
//!   dispatches per job.
//! * `inflight`: the in-flight record of every confirmed trigger.
//! * [`Link`]: the one broker connection the node publishes on.
//! * [`events`]: [`EventPublisher`], the node's events (trigger events, and
//!   the API's and the monitor's).
//! * [`dispatch`]: [`Dispatcher`], which routes, publishes and records;
//!   also the one path that re-sends a trigger to another executor.

pub mod dispatch;
pub mod events;
mod inflight;
pub mod lanes;
mod link;
pub mod registry;
pub mod route;

pub use dispatch::{Dispatched, Dispatcher, Fire};
pub use events::EventPublisher;
pub use lanes::{Lane, LaneConfig, LaneStats, Lanes};
pub use link::Link;
pub use registry::{LiveExecutor, Registry};
pub use route::{RouteContext, Routed, Target};
