//! rondo-model: what every rondo process and client agrees on, and nothing
//! that does I/O. No service client, no web framework, no runtime: the
//! CLI links this and an HTTP client to check a job before it sends it.
//! `rondo-core` re-exports every module, so processes name them
//! `rondo_core::model`, `rondo_core::names`… as before.
//!
//! # Layout
//!
//! * [`model`]: executor groups and jobs, their enums (routing, block,
//!   misfire) and validation of user input.
//! * [`schedule`]: `CRON` (Quartz syntax), `FIX_RATE` and `NONE` schedules,
//!   next fire computation and the misfire rule used at claim time.
//! * [`trigger`]: the trigger message an executor consumes and the result
//!   it publishes; [`trigger_id`]: the grammar of every trigger id.
//! * [`event`]: the events on the `events` exchange that the persistence
//!   worker stores.
//! * [`dedupe`]: the dedupe mark an executor, the API's kill and the
//!   reaper share.
//! * [`names`]: every Redis key, AMQP exchange / queue and znode name.
//! * [`error`]: the closed error kind callers branch on (with `From`
//!   conversions of Redis and broker errors behind the features `redis`
//!   and `lapin`).
//! * [`redact`]: secrets out of URLs and values before they are shown.
//! * [`destination`]: where outbound HTTP may go (no loopback, private or
//!   metadata address unless allowed).
//! * [`mail_domains`]: the domains an e-mail alarm may be sent to
//!   (`alarm.email_allow`).
//! * [`clock`]: wall-clock milliseconds.
//! * [`language`]: the languages of the web console a user may choose.

pub mod clock;
pub mod dedupe;
pub mod destination;
pub mod error;
pub mod event;
pub mod language;
pub mod mail_domains;
pub mod model;
mod named;
pub mod names;
pub mod redact;
pub mod schedule;
pub mod trigger;
pub mod trigger_id;

pub use error::{Error, ErrorKind};
pub use event::Event;
pub use model::{BlockStrategy, Group, Job, JobSpec, Misfire, Routing};
pub use names::Names;
pub use schedule::Schedule;
pub use trigger::{ExecResult, Trigger, TriggerBatch, TriggerType};
