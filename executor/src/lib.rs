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
//! it stops consuming, lets in-flight runs finish within a grace period,
//! publishes their results, runs the `destroy` hooks, and deregisters.
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
//! * [`Hook`], [`HookContext`] (`hooks`): a handler's `init` / `destroy`.
//! * [`control`]: the kill message and [`control::send_kill`] for senders.
//! * [`builtin`]: the `shell`, `http` and `demo` handlers.
//! * [`testing`]: run a handler as the executor would, without services.
//!
//! Inside, one concept a file:
//! * `session`: the AMQP connection, consuming triggers and control
//!   messages, reconnecting with backoff.
//! * `delivery`: one queue message: decode or dead-letter, admit each
//!   trigger, ack.
//! * `runner`: one trigger from admission to confirmed result; explains the
//!   dedupe and redelivery guarantees and the cap on handlers running at
//!   once (`executor.prefetch`, counted in triggers; the AMQP prefetch of
//!   the same value counts messages, each a batch of triggers).
//! * `slots`: the trigger ids in flight here, their interrupts (kills) and
//!   the `running_jobs` they add up to.
//! * `jobs`, `worker`: the per-job workers (XXL-JOB's JobThread); `worker`
//!   explains the block strategies, the bound on waiting triggers, the
//!   hooks' timing and idle exit.
//! * `interrupt`: stopping one trigger on purpose (kill, COVER_EARLY) as
//!   opposed to by shutdown or timeout.
//! * `dedupe`: the Redis marks behind "at most once per trigger id",
//!   written in shared pipelines (group commit) with one answer per trigger.
//! * `supervisor`: the handler in its own task, timeout, kill grace, panics.
//! * `joblog`, `shipper`: a run's log lines, buffered and published.
//! * `publisher`: confirmed publishes of events on the current channel;
//!   results and last log lines of many triggers share messages (group
//!   commit), each caller waiting for the confirm of its own.
//! * `registration`: the Redis registry entry, heartbeat and prompt
//!   `running_jobs` updates (the hash's fields are listed there).
//! * `lifecycle`, `intake`: shutdown phases and the task set the drain waits for.
//! * `handler`, `context`, `outcome`, `error`, `backoff`: the small types.

mod backoff;
pub mod builtin;
mod context;
pub mod control;
mod dedupe;
mod delivery;
mod error;
mod executor;
mod handler;
mod hooks;
mod intake;
mod interrupt;
mod joblog;
mod jobs;
mod lifecycle;
mod outcome;
mod publisher;
mod registration;
mod runner;
mod session;
mod shipper;
mod slots;
mod supervisor;
pub mod testing;
mod worker;

pub use context::JobContext;
pub use error::{ExecutorError, JobError};
pub use executor::{Executor, ExecutorBuilder};
pub use handler::Handler;
pub use hooks::{Hook, HookContext};
pub use outcome::Outcome;
