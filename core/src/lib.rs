//! rondo-core: what every rondo process shares beside the model.
//!
//! rondo is a distributed job scheduler: jobs live in Redis sorted sets, a
//! ZooKeeper-elected leader claims due fires and spreads them over every
//! scheduler node's millisecond wheel, triggers travel over RabbitMQ to
//! executors, and a persistence worker writes history to MySQL.
//!
//! The pure part (the model, schedules, names, the messages and records,
//! validation) is `rondo-model`, which the CLI links alone; this crate
//! re-exports its modules (`rondo_core::model`, `rondo_core::names`, …)
//! and adds what needs a service or a runtime. Nothing here runs on its
//! own.
//!
//! # Layout
//!
//! * Re-exported from `rondo-model`: `model`, `schedule`, `trigger`,
//!   `trigger_id`, `event`, `dedupe`, `names`, `error`, `redact`, `clock`,
//!   `language`, `mail_domains`.
//! * [`destination`]: the destination rule with this host's own addresses
//!   (read from `/proc/net`, kept fresh).
//! * The records two processes share, each written once with a round-trip
//!   test, kept in Redis: [`inflight`] (dispatcher → monitor, reaper),
//!   [`registry`] (executor → scheduler); the dead-letter headers in
//!   [`amqp`].
//! * [`config`]: TOML + `RONDO_*` configuration, loaded by a pure function.
//! * [`auth`]: roles, password hashing (Argon2id) and token digests.
//! * [`amqp`], [`redis`]: connecting to the broker and to Redis the way every
//!   process must (confirms, topology, dead-lettering, response timeouts;
//!   the start-up check that Redis's `default` user is not open).
//! * [`daemon`]: the one shape every binary starts and stops in (arguments,
//!   config, telemetry, run, drain within a grace, exit codes);
//!   [`telemetry`], [`signals`]: its tracing set-up and SIGINT/SIGTERM.
//! * [`outbound`]: HTTP clients that reach only the destinations their
//!   allow-list permits (the `http` handler, the alarm webhook).
//! * [`backoff`]: the one capped exponential backoff every retry loop uses.
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
pub mod config;
pub mod daemon;
pub mod destination;
pub mod histogram;
pub mod inflight;
pub mod metrics;
pub mod outbound;
pub mod redis;
pub mod registry;
pub mod senders;
pub mod signals;
pub mod telemetry;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use config::Config;
pub use rondo_model::{
    BlockStrategy, Error, ErrorKind, Event, ExecResult, Group, Job, JobSpec, Misfire, Names,
    Routing, Schedule, Trigger, TriggerBatch, TriggerType,
};
pub use rondo_model::{
    clock, dedupe, error, event, language, mail_domains, model, names, redact, schedule, trigger,
    trigger_id,
};
