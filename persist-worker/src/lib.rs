//! rondo-persist-worker: the sidecar that makes MySQL rondo's system of
//! record.
//!
//! Every rondo process publishes what happens (groups and jobs defined or
//! deleted, triggers sent, results, handler log lines, alarm outcomes) as
//! events on the `events` exchange; the `persist` queue receives them all.
//! This crate consumes that queue and hands each batch to
//! [`rondo_history::write_events`] (one transaction per batch, multi-row
//! idempotent upserts), acking after commit. The schema and every SQL
//! statement belong to `rondo-history`; this crate is the AMQP side.
//!
//! # Layout
//!
//! * `batch`: deliveries gathered into a batch, its deadline and ack tag.
//! * `consumer`: the AMQP side: consume, batch, write with backoff,
//!   dead-letter, ack, drain on shutdown ([`Worker`]).
//!
//! [`run`] is what the `rondo-persist-worker` binary calls.

mod batch;
mod consumer;

use anyhow::Context as _;
use rondo_core::Config;
use rondo_history::{History, Maintenance};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use consumer::Worker;

/// The whole worker: connect to MySQL (retrying until it answers), migrate,
/// consume until `shutdown` while the log maintenance loop runs beside it,
/// drain, close. An error (the schema cannot be brought up to date, a task
/// panicked) is a failed run.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    rondo_core::metrics::install();
    // `/metrics`, `/healthz`, `/readyz` (ready: consuming), served from the
    // start so a worker waiting for MySQL is seen alive and not ready.
    let readiness = rondo_core::metrics::Readiness::default();
    let observe_stop = CancellationToken::new();
    let _observe_stop = observe_stop.clone().drop_guard();
    if !config.persist.metrics_addr.is_empty() {
        let addr = &config.persist.metrics_addr;
        let bound = rondo_core::metrics::serve(addr, readiness.clone(), observe_stop)
            .await
            .with_context(|| format!("serving metrics on {addr}"))?;
        tracing::info!(%bound, "metrics served");
    }
    let Some(history) = History::connect_with_retry(&config.mysql, &shutdown).await? else {
        return Ok(());
    };
    history
        .migrate()
        .await
        .context("migrating the mysql schema")?;
    // Its own token, so that it also stops when the consumer fails.
    let stop_maintenance = shutdown.child_token();
    let maintenance = Maintenance::new(&config, history.pool().clone());
    let maintenance = tokio::spawn(
        maintenance
            .run(stop_maintenance.clone())
            .instrument(tracing::info_span!("maintenance")),
    );
    let consumed = Worker::new(config, history.clone(), readiness)
        .run(shutdown)
        .await;
    stop_maintenance.cancel();
    maintenance.await.context("the maintenance task panicked")?;
    consumed?;
    history.close().await;
    Ok(())
}
