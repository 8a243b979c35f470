//! rondo-executor: the SDK that runs rondo jobs inside your process, and the
//! `rondo-executor` binary with built-in handlers.
//!
//! An executor serves one executor group (`executor.app`). It registers in
//! Redis with a heartbeat, consumes its own durable queue
//! (`<ns>.exec.<app>.<executor id>`) on RabbitMQ, and hands each trigger to
//! its job's worker, which applies the job's block strategy
//! (`SERIAL_EXECUTION`, `DISCARD_LATER`, `COVER_EARLY`) and calls the
//! handler's `init` / `destroy` hooks. Each run is deduped by trigger id,
//! has its timeout, can be killed through the control exchange, and ships
//! its log while it runs; its result is published to the events exchange
//! with publisher confirms, and a message (a batch of triggers) is acked
//! only once the results of all its triggers are confirmed. Dedupe marks and
//! results of concurrent triggers share Redis pipelines and AMQP messages,
//! so a message of hundreds of triggers costs a few round trips, not
//! hundreds. At most `executor.prefetch` handlers run at once. On shutdown
//! it retires from the registry (routing stops at once), stops consuming,
//! hands back the triggers it had not started, lets running ones finish
//! within a grace period, publishes their results, runs the `destroy`
//! hooks, and leaves the registry.
//! `README.md` next to this crate describes the control message, the block
//! strategies, the hooks and the built-in handlers for operators.
//!
//! ```no_run
//! use rondo_executor::{Executor, HookContext, JobContext, JobError};
//! use tokio_util::sync::CancellationToken;
//!
//! async fn report(ctx: JobContext) -> Result<(), JobError> {
//!     ctx.log(format!("shard {}/{}: {}", ctx.shard_index(), ctx.shard_total(), ctx.params()));
//!     if ctx.params().is_empty() {
//!         return Err(JobError::abort("no report name given"));
//!     }
//!     Ok(())
//! }
//!
//! async fn open_reports(ctx: HookContext) -> Result<(), JobError> {
//!     tracing::info!(job_id = ctx.job_id(), "opening the report store");
//!     Ok(())
//! }
//!
//! async fn close_reports(ctx: HookContext) -> Result<(), JobError> {
//!     tracing::info!(job_id = ctx.job_id(), "closing the report store");
//!     Ok(())
//! }
//!
//! # async fn start() -> Result<(), Box<dyn std::error::Error>> {
//! let config = rondo_core::Config::load("", std::env::vars())?;
//! let executor = Executor::builder(config)
//!     .handler("report", report)
//!     .hooks("report", open_reports, close_reports)
//!     .handler("shell", rondo_executor::builtin::shell)
//!     .build()?;
//! let shutdown = CancellationToken::new();
//! executor.run(shutdown).await?; // returns after the graceful drain
//! # Ok(()) }
//! ```
//!
//! Handlers are tested without a broker with [`testing::run_handler`].
//!
//! # Layout
//!
//! The public surface:
//! * [`Executor`] / [`ExecutorBuilder`] (`executor`): building (handler and
//!   hook validation, executor id, worker idle timeout) and `run` with its
//!   ordered drain.
//! * [`Handler`], [`JobContext`], [`JobError`], [`Outcome`]: what a handler
//!   is, receives, returns, and how a run ended.
//! * [`Hook`], [`HookContext`]: a handler's `init` / `destroy`.
//! * [`control`]: the kill message and [`control::send_kill`] for senders.
//! * [`builtin`]: the `shell`, `http` and `demo` handlers.
//! * [`testing`]: run a handler as the executor would, without services.
//!
//! Inside, by concern (one concept a file):
//! * `transport/`: the outside links. `session` (the AMQP connection,
//!   consuming triggers and control messages, reconnecting with backoff),
//!   `delivery` (one queue message: decode or dead-letter, admit each
//!   trigger, ack), `publisher` (confirmed publishes of events; results and
//!   last log lines of many triggers share messages), `shipper` (a run's
//!   log lines, published while it runs), `control` (kill messages),
//!   `registration` (the Redis registry entry, heartbeat and prompt
//!   `running_jobs` updates, in the format of `rondo_core::registry`).
//! * `admission/`: from a trigger to its confirmed result. `runner`
//!   (explains the dedupe and redelivery guarantees and the cap on
//!   handlers running at once: `executor.prefetch`, counted in triggers;
//!   the AMQP prefetch of the same value counts messages), `dedupe` (the
//!   Redis marks behind "at most once per trigger id", in shared
//!   pipelines), `slots` (trigger ids in flight, their interrupts, the
//!   `running_jobs` they add up to), `intake` (the task set the drain
//!   waits for).
//! * `workers/`: running handlers. `jobs` (the map of per-job workers),
//!   `worker` (one job's worker: the block strategies, the hooks'
//!   timing, idle exit), `shared` (what the
//!   map and its workers share), `hooks`, `supervisor` (the handler in its
//!   own task: timeout, kill grace, panics), `interrupt` (stopping one
//!   trigger on purpose), `panic`.
//! * at the root, the small types: `handler`, `context`, `outcome`,
//!   `error`, `joblog` (a run's log lines), `lifecycle` (shutdown phases).

mod admission;
pub mod builtin;
mod context;
mod error;
mod executor;
mod handler;
mod joblog;
mod lifecycle;
mod outcome;
pub mod testing;
pub(crate) mod transport;
mod workers;

pub use transport::control;

pub use context::JobContext;
pub use error::{ExecutorError, JobError};
pub use executor::{Executor, ExecutorBuilder};
pub use handler::Handler;
pub use outcome::Outcome;
pub use workers::hooks::{Hook, HookContext};
