//! rondo-core: the model every rondo process shares.
//!
//! rondo is a distributed job scheduler: jobs live in Redis sorted sets, a
//! ZooKeeper-elected leader claims due fires and spreads them over every
//! scheduler node's millisecond wheel, triggers travel over RabbitMQ to
//! executors, and a persistence worker writes history to MySQL.
//!
//! This crate holds what those processes agree on, and nothing that runs on
//! its own.
//!
//! # Layout
//!
//! * [`model`]: executor groups and jobs, their enums (routing, block, misfire)
//!   and validation of user input.
//! * [`schedule`]: `CRON` (Quartz syntax), `FIX_RATE` and `NONE` schedules, next
//!   fire computation and the misfire rule used at claim time.
//! * [`trigger`]: the trigger message an executor consumes and the result it
//!   publishes; [`trigger_id`]: the grammar of every trigger id.
//! * [`event`]: the events on the `events` exchange that the persistence worker
//!   stores.
//! * [`names`]: every Redis key, AMQP exchange / queue and znode name.
//! * The records two processes share, each written once with a round-trip
//!   test: [`inflight`] (dispatcher → monitor, reaper), [`registry`]
//!   (executor → scheduler), [`dedupe`] (executor, API kill → reaper), the
//!   dead-letter headers in [`amqp`].
//! * [`config`]: TOML + `RONDO_*` configuration, loaded by a pure function.
//! * [`error`]: the closed error kind callers branch on.
//! * [`amqp`], [`redis`]: connecting to the broker and to Redis the way every
//!   process must (confirms, topology, dead-lettering, response timeouts).
//! * [`daemon`]: the one shape every binary starts and stops in (arguments,
//!   config, telemetry, run, drain within a grace, exit codes);
//!   [`telemetry`], [`signals`]: its tracing set-up and SIGINT/SIGTERM.
//! * [`backoff`]: the one capped exponential backoff every retry loop uses.
//! * [`clock`]: wall-clock milliseconds.
//! * [`batcher`]: group commit (many callers, one message or pipeline per
//!   key), how triggers, events and Redis writes are batched.
//! * [`histogram`]: millisecond latency histograms (publish lateness).
//! * [`metrics`]: the Prometheus recorder every process installs, the list
//!   of every metric, and the `/metrics` `/healthz` `/readyz` server.
//! * `testkit` (feature `testkit`): a namespace per test, cleaned up on drop;
//!   `eventually`; queue depths; fixtures; daemon checks.

pub mod amqp;
pub mod auth;
pub mod backoff;
pub mod batcher;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod dedupe;
pub mod error;
pub mod event;
pub mod histogram;
pub mod inflight;
pub mod metrics;
pub mod model;
pub mod names;
pub mod redact;
pub mod redis;
pub mod registry;
pub mod schedule;
pub mod signals;
pub mod telemetry;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod trigger;
pub mod trigger_id;

pub use config::Config;
pub use error::{Error, ErrorKind};
pub use event::Event;
pub use model::{BlockStrategy, Group, Job, JobSpec, Misfire, Routing};
pub use names::Names;
pub use schedule::Schedule;
pub use trigger::{ExecResult, Trigger, TriggerBatch, TriggerType};
