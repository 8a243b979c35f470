//! rondo-persist-worker: the sidecar that makes MySQL rondo's system of
//! record.
//!
//! Every rondo process publishes what happens (groups and jobs defined or
//! deleted, triggers sent, results, handler log lines, alarm outcomes) as
//! events on the `events` exchange; the `persist` queue receives them all.
//! This crate consumes that queue, writes the events to MySQL in batches
//! (one transaction per batch, multi-row upserts, acked after commit) and
//! owns the schema. Writes are idempotent and independent of arrival order,
//! so a redelivered, duplicated or reordered event ends in the same rows.
//!
//! # Layout
//!
//! * [`schema`]: the migrations under `migrations/` and [`migrate`].
//! * `mysql`: connecting (strict SQL mode, UTC), retrying until the server
//!   answers, and telling a bad row from an unavailable server.
//! * `rows`: events turned into rows, grouped by table (pure); a trigger
//!   and its result met in one batch become one complete `job_log` row,
//!   written once instead of twice.
//! * `upsert`: the multi-row statements and their last-writer-by-version
//!   rules, chunked under MySQL's placeholder and packet limits.
//! * `write`: one batch in one transaction; bisection under savepoints to
//!   isolate the events MySQL refuses ([`write_events`]).
//! * `batch`: deliveries gathered into a batch, its deadline and ack tag.
//! * `consumer`: the AMQP side: consume, batch, write with backoff,
//!   dead-letter, ack, drain on shutdown ([`Worker`]).
//! * `backoff`: capped exponential backoff.
//! * [`partitions`]: the day partitions of the log tables: made ahead,
//!   dropped by retention.
//! * [`report`]: the daily running / success / fail counts.
//! * [`maintenance`]: the loop that refreshes the report, makes partitions
//!   and applies retention, one worker at a time ([`Maintenance`]).
//! * [`testing`]: throw-away databases for tests of any crate.
//!
//! [`run`] is what the `rondo-persist-worker` binary calls.

mod backoff;
mod batch;
mod consumer;
mod error;
pub mod maintenance;
mod mysql;
pub mod partitions;
pub mod report;
mod rows;
pub mod schema;
pub mod testing;
mod upsert;
mod write;

use rondo_core::Config;
use tokio_util::sync::CancellationToken;

pub use consumer::Worker;
pub use error::Error;
pub use maintenance::{Maintenance, Retention};
pub use schema::MIGRATOR;
pub use write::{Rejected, WriteReport, write_events};

/// Brings the database's schema up to date (idempotent).
pub async fn migrate(pool: &sqlx::MySqlPool) -> Result<(), Error> {
    Ok(schema::migrate(pool).await?)
}

/// Parses a MySQL URL into the options the worker connects with.
pub fn connect_options(url: &str) -> Result<sqlx::mysql::MySqlConnectOptions, Error> {
    Ok(mysql::connect_options(url)?)
}

/// Connects once to check MySQL answers, then returns a pool.
pub async fn connect(config: &rondo_core::config::MysqlConfig) -> Result<sqlx::MySqlPool, Error> {
    Ok(mysql::connect(config).await?)
}

/// Connects, retrying with backoff until MySQL answers; `None` on shutdown.
pub async fn connect_with_retry(
    config: &rondo_core::config::MysqlConfig,
    shutdown: &CancellationToken,
) -> Result<Option<sqlx::MySqlPool>, Error> {
    Ok(mysql::connect_with_retry(config, shutdown).await?)
}

/// The whole worker: connect to MySQL (retrying until it answers), migrate,
/// consume until `shutdown` while the log maintenance loop runs beside it,
/// drain, close.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use tracing::Instrument as _;
    let Some(pool) = connect_with_retry(&config.mysql, &shutdown).await? else {
        return Ok(());
    };
    migrate(&pool).await.context("migrating the mysql schema")?;
    // Its own token, so that it also stops when the consumer fails.
    let stop_maintenance = shutdown.child_token();
    let maintenance = Maintenance::new(&config.persist, pool.clone()).run(stop_maintenance.clone());
    let maintenance = tokio::spawn(maintenance.instrument(tracing::info_span!("maintenance")));
    let consumed = Worker::new(config, pool.clone()).run(shutdown).await;
    stop_maintenance.cancel();
    maintenance.await.context("the maintenance task panicked")?;
    consumed?;
    pool.close().await;
    Ok(())
}
