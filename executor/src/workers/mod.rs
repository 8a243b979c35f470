//! The per-job workers (XXL-JOB's JobThread) and what runs a handler: the
//! block strategies and hooks of a job's worker, the supervisor that runs a
//! handler in its own task with its timeout and kill, and interrupts.

pub(crate) mod hooks;
pub(crate) mod interrupt;
pub(crate) mod jobs;
pub(crate) mod panic;
pub(crate) mod shared;
pub(crate) mod supervisor;
pub(crate) mod worker;
