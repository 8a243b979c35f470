//! Scenario "persistence": events stored per second by the persistence
//! worker, side by side with the ceiling, multi-row `INSERT`s of the same
//! rows through sqlx on the same MySQL.
//!
//! Four measurements, each on its own fresh database (and namespace):
//!
//! 1. **ceiling**: the `job_log` rows the worker ends with (one per
//!    trigger, trigger and handle columns set), inserted directly, 1,000
//!    rows per statement, one transaction per statement (`ceiling`);
//! 2. **write path**: the same events through `write_events` in batches of
//!    `batch_size`, no broker (the worker's MySQL half);
//! 3. **backlog**: every event published first, then the worker started;
//!    from its start until every row has both sides;
//! 4. **steady state**: the worker started first, then every event
//!    published as fast as the broker confirms; from the first publish
//!    until every row has both sides.
//!
//! One `job_log` row is made of two events (a trigger and a result), so
//! the report gives the ratio to the ceiling both per event
//! (events/s ÷ ceiling rows/s) and per row (rows/s ÷ ceiling rows/s).

mod ceiling;
mod stream;
mod worker;

use std::time::Duration;

use chrono::{DateTime, Utc};
use rondo_core::Config;
use serde::Serialize;

use crate::cpu::{CpuShare, Snapshot};
use crate::machine::Machine;
use crate::options::Options;
use crate::output::Report;
use crate::sandbox::Sandbox;

/// Rows per statement (and per transaction) of the ceiling.
pub const CEILING_ROWS_PER_STATEMENT: usize = 1_000;
/// The goal of the issue: rondo at 70 % of the ceiling (per event).
pub const TARGET_RATIO: f64 = 0.70;

/// What one run measures.
#[derive(Debug, Clone)]
pub struct Params {
    /// Events in each measurement: `triggers` trigger events and as many
    /// results.
    pub triggers: usize,
    pub events_per_message: usize,
    /// The worker's `persist.batch_size`.
    pub batch_size: usize,
    /// How often the bench counts the stored rows.
    pub poll: Duration,
    pub smoke: bool,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        let default_batch = rondo_core::config::PersistConfig::default().batch_size;
        Params {
            triggers: (options.events() / 2).max(1),
            events_per_message: options.events_per_message.max(1),
            batch_size: options.batch_size.unwrap_or(default_batch).max(1),
            poll: if options.smoke {
                Duration::from_millis(20)
            } else {
                Duration::from_millis(100)
            },
            smoke: options.smoke,
        }
    }

    pub fn events(&self) -> usize {
        2 * self.triggers
    }
}

/// A run's figures. Rates are per second of wall time.
#[derive(Debug, Clone, Serialize)]
pub struct PersistenceReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    /// Events per measurement: half triggers, half results.
    pub events: usize,
    /// `job_log` rows per measurement (= events / 2).
    pub rows: usize,
    pub events_per_message: usize,
    /// The worker's events per transaction.
    pub batch_size: usize,
    pub ceiling_rows_per_statement: usize,
    /// Multi-row INSERTs of the finished rows through sqlx.
    pub ceiling_rows_per_s: f64,
    /// Cores used while the ceiling ran (the bench process is the client).
    pub ceiling_cpu: CpuShare,
    /// `write_events` alone (no broker), in events/s.
    pub write_path_events_per_s: f64,
    pub write_path_cpu: CpuShare,
    /// The worker draining a backlog: events stored per second.
    pub events_per_s: f64,
    /// The same, in complete `job_log` rows per second (events_per_s / 2).
    pub rows_per_s: f64,
    /// events_per_s ÷ ceiling_rows_per_s: the figure (goal 0.70).
    pub ratio_events_to_ceiling: f64,
    /// rows_per_s ÷ ceiling_rows_per_s: like for like rows.
    pub ratio_rows_to_ceiling: f64,
    /// Publishing the backlog (pipelined confirms), in events/s.
    pub publish_events_per_s: f64,
    pub backlog_seconds: f64,
    /// Cores used while the backlog drained.
    pub backlog_cpu: CpuShare,
    /// Worker running while the events are published: events stored per
    /// second from the first publish to the last row complete.
    pub steady_events_per_s: f64,
    pub steady_publish_events_per_s: f64,
    pub steady_cpu: CpuShare,
    pub machine: Machine,
}

/// Runs the four measurements, each in its own sandbox.
pub async fn run(config: &Config, params: &Params) -> anyhow::Result<PersistenceReport> {
    let started_at = Utc::now();
    let first_fire_ms = started_at.timestamp() * 1000;
    let messages = stream::messages(params.triggers, params.events_per_message, first_fire_ms);
    let events = params.events() as f64;
    let rows = params.triggers as f64;

    tracing::info!(rows = params.triggers, "ceiling: multi-row inserts");
    let sandbox = Sandbox::open(config, "bench_ceiling").await;
    let machine = Machine::describe(&sandbox.pool).await;
    let mut log_rows: Vec<_> = (0..params.triggers)
        .map(|i| stream::log_row(i, first_fire_ms))
        .collect();
    let before = Snapshot::take();
    let ceiling =
        ceiling::insert_all(&sandbox.pool, &mut log_rows, CEILING_ROWS_PER_STATEMENT).await;
    let ceiling_cpu = Snapshot::take().since(&before);
    sandbox.close().await;
    let ceiling = ceiling?;
    drop(log_rows);

    tracing::info!(
        events = params.events(),
        "write path: write_events without the broker"
    );
    let sandbox = Sandbox::open(config, "bench_write").await;
    let before = Snapshot::take();
    let write = worker::write_path(&sandbox.pool, &messages, params.batch_size).await;
    let write_path_cpu = Snapshot::take().since(&before);
    sandbox.close().await;
    let write = write?;

    tracing::info!(
        events = params.events(),
        "backlog: publish, then start the worker"
    );
    let sandbox = Sandbox::open(&worker_config(config, params), "bench_backlog").await;
    let backlog = worker::drain_backlog(
        &sandbox.config,
        &sandbox.pool,
        &messages,
        params.triggers,
        params.poll,
    )
    .await;
    sandbox.close().await;
    let (published, backlog) = backlog?;

    tracing::info!(
        events = params.events(),
        "steady state: worker running while publishing"
    );
    let sandbox = Sandbox::open(&worker_config(config, params), "bench_steady").await;
    let steady = worker::steady_state(
        &sandbox.config,
        &sandbox.pool,
        &messages,
        params.triggers,
        params.poll,
    )
    .await;
    sandbox.close().await;
    let (steady_published, steady) = steady?;

    let ceiling_rows_per_s = rate(rows, ceiling);
    let events_per_s = rate(events, backlog.elapsed);
    Ok(PersistenceReport {
        scenario: "persistence",
        started_at,
        smoke: params.smoke,
        events: params.events(),
        rows: params.triggers,
        events_per_message: params.events_per_message,
        batch_size: params.batch_size,
        ceiling_rows_per_statement: CEILING_ROWS_PER_STATEMENT,
        ceiling_rows_per_s,
        ceiling_cpu,
        write_path_events_per_s: rate(events, write),
        write_path_cpu,
        events_per_s,
        rows_per_s: events_per_s / 2.0,
        ratio_events_to_ceiling: events_per_s / ceiling_rows_per_s,
        ratio_rows_to_ceiling: events_per_s / 2.0 / ceiling_rows_per_s,
        publish_events_per_s: rate(events, published),
        backlog_seconds: backlog.elapsed.as_secs_f64(),
        backlog_cpu: backlog.cpu,
        steady_events_per_s: rate(events, steady.elapsed),
        steady_publish_events_per_s: rate(events, steady_published),
        steady_cpu: steady.cpu,
        machine,
    })
}

/// The caller's config with the worker's batch size (and a prefetch, in
/// messages, that lets a whole batch in).
fn worker_config(config: &Config, params: &Params) -> Config {
    let mut config = config.clone();
    config.persist.batch_size = params.batch_size;
    let prefetch = u16::try_from(params.batch_size).unwrap_or(u16::MAX);
    config.persist.prefetch = config.persist.prefetch.max(prefetch);
    config
}

fn rate(count: f64, elapsed: Duration) -> f64 {
    count / elapsed.as_secs_f64().max(1e-9)
}

impl Report for PersistenceReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        markdown(self)
    }
}

fn markdown(r: &PersistenceReport) -> String {
    let k = |rate: f64| format!("{:.1} k", rate / 1000.0);
    let pct = |ratio: f64| format!("{:.0} %", ratio * 100.0);
    let verdict = if r.ratio_events_to_ceiling >= TARGET_RATIO {
        "met"
    } else {
        "NOT met"
    };
    let cpu = |c: &CpuShare| {
        format!(
            "rondo process {:.2}, MySQL {:.2}, RabbitMQ {:.2}, machine {:.2} of {}",
            c.bench_cores, c.mysql_cores, c.rabbitmq_cores, c.machine_busy_cores, c.machine_cores
        )
    };
    let smoke = if r.smoke {
        " (smoke sizes: the figures mean nothing)"
    } else {
        ""
    };
    format!(
        "## persistence, {started}{smoke}\n\n\
         {events} events ({rows} triggers: one trigger event and one result event each, \
         {epm} events per AMQP message), worker batch {batch} events; {build} build; \
         {cores} cores, {cpu_model}; MySQL {mysql}.\n\n\
         | measurement | rate |\n\
         | --- | ---: |\n\
         | ceiling: sqlx multi-row INSERT, {per_stmt} rows/statement, 1 tx each | {ceiling} rows/s |\n\
         | rondo write path: `write_events`, no broker | {write} events/s |\n\
         | **rondo worker, backlog drained** | **{eps} events/s** = {rps} rows/s |\n\
         | ratio per event: events/s ÷ ceiling rows/s (goal ≥ 70 %: {verdict}) | **{ratio_e}** |\n\
         | ratio per row: rows/s ÷ ceiling rows/s (1 row = 2 events) | {ratio_r} |\n\
         | rondo worker, steady state (publishing while it runs) | {steady} events/s |\n\
         | publishing alone (confirms pipelined), backlog / steady | {publish} / {steady_pub} events/s |\n\n\
         Cores used (average over each window): ceiling: {ceiling_cpu}.  \n\
         Write path: {write_cpu}.  \n\
         Backlog drain ({backlog_s:.1} s): {backlog_cpu}.  \n\
         Steady state: {steady_cpu}.\n",
        started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        events = r.events,
        rows = r.rows,
        epm = r.events_per_message,
        batch = r.batch_size,
        build = r.machine.build,
        cores = r.machine.cores,
        cpu_model = r.machine.cpu_model,
        mysql = r.machine.mysql_version,
        per_stmt = r.ceiling_rows_per_statement,
        ceiling = k(r.ceiling_rows_per_s),
        write = k(r.write_path_events_per_s),
        eps = k(r.events_per_s),
        rps = k(r.rows_per_s),
        ratio_e = pct(r.ratio_events_to_ceiling),
        ratio_r = pct(r.ratio_rows_to_ceiling),
        steady = k(r.steady_events_per_s),
        publish = k(r.publish_events_per_s),
        steady_pub = k(r.steady_publish_events_per_s),
        backlog_s = r.backlog_seconds,
        backlog_cpu = cpu(&r.backlog_cpu),
        ceiling_cpu = cpu(&r.ceiling_cpu),
        write_cpu = cpu(&r.write_path_cpu),
        steady_cpu = cpu(&r.steady_cpu),
    )
}
