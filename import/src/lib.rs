//! rondo-import: brings another scheduler's jobs into rondo through the
//! admin API. `rondo import …` runs the `rondo-import` binary, so the
//! `rondo` command line itself reaches no database.
//!
//! * [`xxl_job`]: XXL-JOB's groups and jobs, from its MySQL tables.

pub mod xxl_job;
