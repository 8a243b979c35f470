//! Scenario "throughput" (and lateness): J jobs, each firing once a second,
//! on N scheduler nodes (separate release `rondo-scheduler` processes), M
//! executors (recording ones in the bench process, or with `--executor
//! real` `rondo-executor` processes running the built-in `demo` handler) and
//! the persistence worker; J steps up until rondo falls behind. Each step
//! runs on a fresh namespace and database.
//!
//! Per step: create the jobs through the admin API (`FIX_RATE` 1 s,
//! concurrently, paced so their creation, hence their phases, covers at
//! least one second), warm up, reset the nodes' histograms, measure a
//! window of W seconds, let it drain, then count:
//!
//! * `fires_per_s`: the nodes' `firing.fired` counters (fires the broker
//!   confirmed) over the window ÷ W;
//! * `executed_per_s`: distinct fires scheduled inside the window whose
//!   handler started within the misfire threshold of their instant ÷ W;
//! * `lost` / `duplicates`: expected fires inside the window (from each
//!   job's first fire) that never ran / ran more than once;
//! * publish lateness from the nodes' histograms, handler lateness from the
//!   runs: the recorder's, or with real executors their results as the
//!   broker carried them (a queue of the bench's own on the events
//!   exchange: each result's handler start), never the history, which may
//!   lag behind;
//! * CPU per process over the window, and per fire: each process's and
//!   service's CPU time ÷ the fires of the window;
//! * the history, apart: `job_log` rows of the window's fires with both
//!   sides (`stored`), the fires run but not stored yet when the wait ended
//!   (`stored_missing`), and how long the wait for them took
//!   (`store_wait_s`).
//!
//! The ceiling is the broker scenario's one-trigger-per-message publish
//! rate, measured at the start of the same run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rondo_core::{Config, clock};
use serde::Serialize;
use sqlx::MySqlPool;

use crate::broker;
use crate::cluster::fires::{self, FireCount};
use crate::cluster::latency::Latency;
use crate::cluster::recorder::Run;
use crate::cluster::{self, Binaries, Cluster, Spec, create_jobs, job_spec_for};
use crate::counts::{Counters, PerFire};
use crate::cpu::{ProcSnapshot, ProcessCpu};
use crate::machine::Machine;
use crate::options::{ExecutorKind, Options};
use crate::output::Report;
use crate::sandbox::{Sandbox, with_sandbox};

/// A step keeps up when it executes at least this share of J per second.
pub const KEEP_UP_RATIO: f64 = 0.90;
const PERIOD_MS: i64 = 1_000;

#[derive(Debug, Clone)]
pub struct Params {
    pub jobs: Vec<usize>,
    pub nodes: usize,
    pub executors: usize,
    pub window: Duration,
    pub warmup: Duration,
    pub routing: String,
    pub concurrency: usize,
    pub executor_prefetch: Option<u16>,
    pub ceiling_seconds: f64,
    pub in_flight: usize,
    pub smoke: bool,
    pub executor: ExecutorKind,
    /// Without the persistence worker (`--no-history`).
    pub no_history: bool,
    /// `--executor xxl`: an earlier gateway build instead of the one built
    /// beside the bench (`--xxl-baseline-gateway`).
    pub legacy_gateway: Option<std::path::PathBuf>,
    /// `--executor xxl`: how long each run of a stand-in takes
    /// (`--xxl-handler-ms`; 0: at once).
    pub xxl_handler_ms: u64,
    /// Every job at the same instant of the second (`--same-instant`).
    pub same_instant: bool,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        Params {
            jobs: options.jobs(),
            nodes: options.nodes.max(1),
            executors: options.executors.max(1),
            window: Duration::from_secs(options.seconds()),
            warmup: Duration::from_secs(options.warmup()),
            routing: options.routing.clone(),
            concurrency: options.concurrency.max(1),
            executor_prefetch: options.executor_prefetch(),
            ceiling_seconds: options.broker_seconds(),
            in_flight: options.in_flight.max(1),
            smoke: options.smoke,
            executor: options.executor,
            no_history: options.no_history,
            legacy_gateway: None,
            xxl_handler_ms: options.xxl_handler_ms,
            same_instant: options.same_instant,
        }
    }
}

/// One J.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub jobs: usize,
    /// The step's namespace (removed afterwards; node logs are kept under
    /// the temp dir only when the step failed).
    pub namespace: String,
    pub window_s: f64,
    /// Seconds to create the J jobs, and the rate (paced: at most J per
    /// second, so that phases cover the second; the scale scenario
    /// measures the API's own rate).
    pub create_s: f64,
    pub create_per_s: f64,
    pub create_retries: u64,
    pub expected_per_s: f64,
    /// The nodes' confirmed publishes (`firing.fired`) during the window ÷ W.
    pub fires_per_s: f64,
    /// Distinct fires scheduled in the window whose handler had started by
    /// `grace_ms` after the window's end, ÷ W.
    pub executed_per_s: f64,
    /// The same after the whole drain (late runs included).
    pub executed_after_drain_per_s: f64,
    /// The misfire threshold: a fire later than this is behind.
    pub grace_ms: i64,
    pub ceiling_msgs_per_s: f64,
    pub ratio_to_ceiling: f64,
    /// Expected fires of the window that had not run after the drain.
    pub lost: u64,
    pub duplicates: u64,
    /// Publish lateness (broker confirm − scheduled instant), nodes'
    /// histograms combined: count-weighted p50, largest p99 and max.
    pub lateness_ms: Latency,
    /// Each node's publish lateness.
    pub publish_lateness_by_node: Vec<Latency>,
    /// Handler start − scheduled instant, from the recorder.
    pub handler_lateness_ms: Latency,
    /// The fires of the window in detail.
    pub fires: FireCount,
    /// Nodes whose histograms were reset at the window's start (fewer than
    /// the nodes: the lateness includes the warm-up).
    pub stats_reset_nodes: usize,
    pub cpu: ProcessCpu,
    /// Each process's and service's CPU time per fire (µs): its cores ÷
    /// fires/s. The bench process counts only when it hosts part of the
    /// pipeline (the recording executors, an in-process worker).
    pub cpu_us_per_fire: BTreeMap<String, f64>,
    /// Their sum: what one fire costs the whole pipeline (µs of CPU).
    pub total_cpu_us_per_fire: f64,
    /// Redis commands and round trips, AMQP messages per fire (the
    /// services' own counters over the window; single topology only).
    pub ops: PerFire,
    /// Each node's part of the window: its fires, its cores and, for the
    /// leader, its claim ticks.
    pub per_node: Vec<NodeShare>,
    /// The leader's claim ticks over the window (the node that led at its
    /// end; empty if none did).
    pub claim_tick_ms: Latency,
    /// The leader's median tick ÷ the fires one tick claims (fires/s × the
    /// claim interval): the claim's cost per due fire, in µs.
    pub claim_us_per_fire: f64,
    pub scheduler_cores: f64,
    /// Scheduler cores (all nodes) per 1,000 fires/s.
    pub scheduler_cores_per_1k_fires_per_s: f64,
    /// `job_log` rows of the window's fires holding both sides after the
    /// drain.
    pub stored: u64,
    /// Executed window fires without a complete row after the drain.
    pub stored_missing: u64,
    /// Stored window rows whose handle code is not 200: triggers answered
    /// with an error, mostly without running (e.g. an executor's
    /// SERIAL_EXECUTION waiting bound); these fires count as lost.
    pub stored_failed: u64,
    /// Rows that received their result (handle side) during the window, ÷ W.
    pub stored_per_s: f64,
    /// Seconds waited after the window for the runs and for the rows.
    pub drain_s: f64,
    pub store_wait_s: f64,
    /// executed_per_s and fires_per_s ≥ 90 % of J, and nothing lost.
    pub kept_up: bool,
}

/// One scheduler node's part of a window.
#[derive(Debug, Clone, Serialize)]
pub struct NodeShare {
    pub node: String,
    /// It led at the window's end.
    pub leader: bool,
    /// Its confirmed publishes (the fires of its wheel) ÷ W.
    pub fires_per_s: f64,
    /// Its process's cores over the window.
    pub cores: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThroughputReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub nodes: usize,
    pub executors: usize,
    /// `bench` (recording executors in the bench) or `real`
    /// (`rondo-executor` processes).
    pub executor: ExecutorKind,
    /// Whether the persistence worker ran (`--no-history`: not).
    pub history: bool,
    pub window_s: f64,
    pub warmup_s: f64,
    pub routing: String,
    /// The recording executors' `executor.prefetch`.
    pub executor_prefetch: u16,
    pub partitions: u32,
    pub zookeeper_session_timeout_ms: u64,
    /// One confirmed message per fire: the broker scenario's single rate,
    /// measured at the start of this run.
    pub ceiling_msgs_per_s: f64,
    pub ceiling_message_bytes: usize,
    pub ceiling_in_flight: usize,
    /// The headline step: the largest J that kept up, else the first.
    pub jobs: usize,
    pub fires_per_s: f64,
    pub executed_per_s: f64,
    pub ratio_to_ceiling: f64,
    pub lost: u64,
    pub duplicates: u64,
    pub lateness_ms: Latency,
    pub handler_lateness_ms: Latency,
    /// Every step run, in order.
    pub steps: Vec<Step>,
    /// The J that fell behind (stepping stopped there), if one did.
    pub fell_behind_at: Option<usize>,
    pub binaries: Option<Binaries>,
    pub machine: Machine,
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<ThroughputReport> {
    let started_at = Utc::now();
    let mut config = config.clone();
    if let Some(prefetch) = params.executor_prefetch {
        config.executor.prefetch = prefetch;
    }
    let config = &config;
    tracing::info!(
        seconds = params.ceiling_seconds,
        "throughput: the broker's ceiling"
    );
    let ceiling = broker::ceiling(config, params.ceiling_seconds, params.in_flight).await?;
    let mut steps = Vec::new();
    let mut binaries = None;
    let mut machine = None;
    let mut fell_behind_at = None;
    for &jobs in &params.jobs {
        tracing::info!(
            jobs,
            nodes = params.nodes,
            executors = params.executors,
            "throughput: step"
        );
        let (step, bins, described) = run_step(config, params, jobs, ceiling.msgs_per_s).await?;
        binaries.get_or_insert(bins);
        machine.get_or_insert(described);
        tracing::info!(
            jobs,
            fires_per_s = step.fires_per_s,
            executed_per_s = step.executed_per_s,
            lost = step.lost,
            duplicates = step.duplicates,
            kept_up = step.kept_up,
            "throughput: step done"
        );
        let kept_up = step.kept_up;
        steps.push(step);
        if !kept_up {
            fell_behind_at = Some(jobs);
            break;
        }
    }
    let headline = steps
        .iter()
        .filter(|s| s.kept_up)
        .max_by_key(|s| s.jobs)
        .or(steps.first())
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no step to run (--jobs is empty)"))?;
    Ok(ThroughputReport {
        scenario: "throughput",
        started_at,
        smoke: params.smoke,
        nodes: params.nodes,
        executors: params.executors,
        executor: params.executor,
        history: !params.no_history,
        window_s: params.window.as_secs_f64(),
        warmup_s: params.warmup.as_secs_f64(),
        routing: params.routing.clone(),
        executor_prefetch: config.executor.prefetch,
        partitions: config.partitions,
        zookeeper_session_timeout_ms: config.zookeeper.session_timeout_ms,
        ceiling_msgs_per_s: ceiling.msgs_per_s,
        ceiling_message_bytes: ceiling.message_bytes,
        ceiling_in_flight: params.in_flight,
        jobs: headline.jobs,
        fires_per_s: headline.fires_per_s,
        executed_per_s: headline.executed_per_s,
        ratio_to_ceiling: headline.ratio_to_ceiling,
        lost: headline.lost,
        duplicates: headline.duplicates,
        lateness_ms: headline.lateness_ms,
        handler_lateness_ms: headline.handler_lateness_ms,
        steps,
        fell_behind_at,
        binaries,
        machine: machine.expect("a step ran"),
    })
}

/// The executor queues a cluster of `executors` declares (known before it
/// starts, so a failed start still cleans them).
pub(crate) fn executor_queues(config: &Config, executors: usize) -> Vec<String> {
    let names = config.names();
    (1..=executors)
        .map(|i| names.executor_queue(cluster::APP, &format!("{}-e{i}", cluster::APP)))
        .collect()
}

/// One step on a fresh sandbox of `config`'s services.
pub(crate) async fn run_step(
    config: &Config,
    params: &Params,
    jobs: usize,
    ceiling: f64,
) -> anyhow::Result<(Step, Binaries, Machine)> {
    with_sandbox(config, "bench_tp", |sandbox| async move {
        let mut queues = executor_queues(&sandbox.config, params.executors);
        let machine = Machine::describe(&sandbox.pool).await;
        let spec = Spec {
            nodes: params.nodes,
            executors: params.executors,
            node_log: "info",
            persist_worker: !params.no_history,
            executor: params.executor,
            legacy_gateway: params.legacy_gateway.clone(),
        };
        let result = match Cluster::start(&sandbox.config, &spec).await {
            Ok(cluster) => {
                let binaries = cluster.binaries.clone();
                let measured = measure(&sandbox, &cluster, params, jobs, ceiling).await;
                // The queues of executors named once they started (the
                // stand-ins') are among these.
                queues.extend(cluster.stop(measured.is_err()).await);
                measured.map(|step| (step, binaries, machine))
            }
            Err(e) => Err(e),
        };
        queues.sort_unstable();
        queues.dedup();
        (sandbox, queues, result)
    })
    .await
}

async fn measure(
    sandbox: &Sandbox,
    cluster: &Cluster,
    params: &Params,
    jobs: usize,
    ceiling: f64,
) -> anyhow::Result<Step> {
    let (kind, conf) = if params.same_instant {
        ("CRON", "* * * * * ?")
    } else {
        ("FIX_RATE", "1")
    };
    let mut spec = job_spec_for(kind, conf, &params.routing, params.executor);
    if params.executor == ExecutorKind::Xxl && params.xxl_handler_ms > 0 {
        spec["handler"] = serde_json::json!("sleepJobHandler");
        spec["params"] = serde_json::json!(params.xxl_handler_ms.to_string());
    }
    // With real executors, the runs are counted from their results as the
    // broker carries them (bound before the jobs exist), not from the
    // history, which may lag behind: the history's own lag is reported
    // apart (`stored`, `stored_missing`, `store_wait_s`).
    let results = match params.executor {
        ExecutorKind::Real => Some(rondo_testkit::witness::Results::bind(&sandbox.config).await),
        _ => None,
    };
    let runs = Runs {
        cluster,
        results: results.as_ref(),
        executor: params.executor,
    };
    let creation = create_jobs(
        &cluster.apis(),
        jobs,
        params.concurrency,
        Some(Duration::from_secs(1)),
        None,
        |_| spec.clone(),
    )
    .await?;
    tracing::info!(
        jobs,
        seconds = creation.elapsed.as_secs_f64(),
        per_s = creation.per_s(),
        "jobs created"
    );
    tokio::time::sleep(params.warmup).await;

    // The services' counters bracket the window (reading RabbitMQ's takes
    // a second), outside the fired counts and CPU readings.
    let ops_before = Counters::take(&sandbox.config).await;
    let stored_before = results_stored(&sandbox.pool).await.unwrap_or(0);
    let sources = cluster.cpu_sources();
    let stats_reset_nodes = cluster.reset_stats().await;
    let before = cluster.statuses().await;
    let cpu_before = ProcSnapshot::take(&sources);
    let w0 = clock::now_ms();
    tokio::time::sleep(params.window).await;
    let w1 = clock::now_ms();
    let cpu = ProcSnapshot::take(&sources).since(&cpu_before);
    let after = cluster.statuses().await;
    let stored_after = results_stored(&sandbox.pool).await.unwrap_or(0);
    let ops_after = Counters::take(&sandbox.config).await;
    let window_s = (w1 - w0) as f64 / 1000.0;

    let per_node: Vec<NodeShare> = before
        .iter()
        .zip(&after)
        .map(|((i, b), (_, a))| {
            let b = b.as_ref().and_then(cluster::fired).unwrap_or(0);
            let fired = a.as_ref().and_then(cluster::fired).unwrap_or(b);
            let node = cluster.nodes[*i].as_ref().map_or("?", |n| n.id.as_str());
            NodeShare {
                node: node.to_owned(),
                leader: a.as_ref().is_some_and(|a| a["role"]["leader"] == true),
                fires_per_s: fired.saturating_sub(b) as f64 / window_s,
                cores: cpu
                    .cores
                    .get(&format!("scheduler {node}"))
                    .copied()
                    .unwrap_or(0.0),
            }
        })
        .collect();
    let claim_tick_ms = after
        .iter()
        .filter_map(|(_, s)| s.as_ref())
        .find(|s| s["role"]["leader"] == true)
        .and_then(|s| Latency::from_json(&s["claim"]["tick_ms"]))
        .unwrap_or_default();
    let publish_lateness_by_node: Vec<Latency> = after
        .iter()
        .map(|(_, s)| {
            s.as_ref()
                .and_then(cluster::publish_lateness)
                .unwrap_or_default()
        })
        .collect();

    let grace_ms = sandbox.config.scheduler.misfire_threshold_ms;
    cluster::sleep_until_ms(w1 + grace_ms).await;

    // Drain: until every expected fire of the window ran, or nothing new
    // ran for 3 s, or a cap.
    let expected = fires::expected_between(&creation.jobs, PERIOD_MS, w0, w1);
    let drain_started = Instant::now();
    let cap = Duration::from_secs(30).max(params.window);
    let mut last = (0, Instant::now());
    loop {
        let ran = runs.count_between(w0, w1).await?;
        if ran >= expected || drain_started.elapsed() > cap {
            break;
        }
        if ran != last.0 {
            last = (ran, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(3) && clock::now_ms() > w1 + 1_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drain_s = drain_started.elapsed().as_secs_f64();
    let window_runs = runs.between(w0, w1).await?;
    // On time: the window's fires whose handler started within the misfire
    // threshold of their instant (later than that, rondo itself calls a
    // fire missed).
    let on_time = fires::distinct(
        &window_runs
            .iter()
            .filter(|r| r.start_ms - r.fire_ms <= grace_ms)
            .cloned()
            .collect::<Vec<_>>(),
    );
    let count = fires::count(&window_runs, &creation.jobs, PERIOD_MS, w0, w1);

    // The history: bounded wait for the window's rows.
    let store_started = Instant::now();
    let mut stored = 0;
    let mut last = (u64::MAX, Instant::now());
    while !params.no_history && store_started.elapsed() < Duration::from_secs(60) {
        stored = complete_rows_between(&sandbox.pool, w0, w1)
            .await
            .unwrap_or(0);
        if stored >= count.executed {
            break;
        }
        if stored != last.0 {
            last = (stored, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(5) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let store_wait_s = store_started.elapsed().as_secs_f64();
    let stored_failed = failed_rows_between(&sandbox.pool, w0, w1)
        .await
        .unwrap_or(0);

    let fires_per_s: f64 = per_node.iter().map(|n| n.fires_per_s).sum();
    let fires_per_tick = fires_per_s * sandbox.config.scheduler.claim_interval_ms as f64 / 1000.0;
    let executed_per_s = on_time as f64 / window_s;
    let keep_up = KEEP_UP_RATIO * jobs as f64;
    let scheduler_cores = cpu.sum("scheduler");
    let cpu_us_per_fire: BTreeMap<String, f64> = cpu
        .cores
        .iter()
        .filter(|(label, _)| label.as_str() != cluster::BENCH_ITSELF)
        .map(|(label, cores)| (label.clone(), cores * 1e6 / fires_per_s.max(1e-9)))
        .collect();
    Ok(Step {
        ops: ops_after.per_fire(&ops_before, (fires_per_s * window_s).round() as u64),
        total_cpu_us_per_fire: cpu_us_per_fire.values().sum(),
        cpu_us_per_fire,
        jobs,
        namespace: sandbox.config.namespace.clone(),
        window_s,
        create_s: creation.elapsed.as_secs_f64(),
        create_per_s: creation.per_s(),
        create_retries: creation.retries,
        expected_per_s: count.expected as f64 / window_s,
        fires_per_s,
        executed_per_s,
        executed_after_drain_per_s: count.executed as f64 / window_s,
        grace_ms,
        ceiling_msgs_per_s: ceiling,
        ratio_to_ceiling: fires_per_s / ceiling.max(1e-9),
        lost: count.lost,
        duplicates: count.duplicates.max(count.duplicate_trigger_ids),
        lateness_ms: Latency::combine(&publish_lateness_by_node),
        publish_lateness_by_node,
        handler_lateness_ms: count.handler_lateness_ms,
        stats_reset_nodes,
        scheduler_cores,
        scheduler_cores_per_1k_fires_per_s: if fires_per_s > 0.0 {
            scheduler_cores / (fires_per_s / 1000.0)
        } else {
            0.0
        },
        cpu,
        per_node,
        claim_us_per_fire: if fires_per_tick > 0.0 {
            claim_tick_ms.p50 as f64 * 1000.0 / fires_per_tick
        } else {
            0.0
        },
        claim_tick_ms,
        stored,
        stored_missing: count.executed.saturating_sub(stored),
        stored_failed,
        stored_per_s: stored_after.saturating_sub(stored_before) as f64 / window_s,
        drain_s,
        store_wait_s,
        kept_up: executed_per_s >= keep_up && fires_per_s >= keep_up && count.lost == 0,
        fires: count,
    })
}

/// Where a window's runs are read from.
struct Runs<'a> {
    cluster: &'a Cluster,
    /// Real executors: every result the broker carried.
    results: Option<&'a rondo_testkit::witness::Results>,
    executor: ExecutorKind,
}

impl Runs<'_> {
    /// Runs of fires scheduled in `[from_ms, to_ms)`.
    async fn between(&self, from_ms: i64, to_ms: i64) -> anyhow::Result<Vec<Run>> {
        match (self.executor, self.results) {
            (ExecutorKind::Real, Some(results)) => Ok(results
                .results()
                .into_iter()
                .filter(|r| (from_ms..to_ms).contains(&r.fire_ms) && r.start_ms > 0)
                .map(|r| Run {
                    trigger_id: r.trigger_id,
                    job_id: r.job_id,
                    fire_ms: r.fire_ms,
                    start_ms: r.start_ms,
                    executor: r.executor_id,
                })
                .collect()),
            // What the executors themselves saw start (a run twice would
            // show here, where MySQL keeps one row per trigger id).
            (ExecutorKind::Xxl, _) => Ok(self.cluster.standin_runs_between(from_ms, to_ms)),
            _ => Ok(self.cluster.recorder.runs_between(from_ms, to_ms)),
        }
    }

    async fn count_between(&self, from_ms: i64, to_ms: i64) -> anyhow::Result<u64> {
        match (self.executor, self.results) {
            (ExecutorKind::Real, Some(results)) => Ok(results
                .count(|r| (from_ms..to_ms).contains(&r.fire_ms) && r.start_ms > 0)
                as u64),
            (ExecutorKind::Xxl, _) => {
                Ok(self.cluster.standin_runs_between(from_ms, to_ms).len() as u64)
            }
            _ => Ok(self.cluster.recorder.count_between(from_ms, to_ms) as u64),
        }
    }
}

/// Rows holding a result (index-only on `handle_code`).
async fn results_stored(pool: &MySqlPool) -> anyhow::Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_log WHERE handle_code IS NOT NULL")
        .fetch_one(pool)
        .await?;
    Ok(n as u64)
}

/// Rows of fires in `[from_ms, to_ms)` holding both sides.
pub(crate) async fn complete_rows_between(
    pool: &MySqlPool,
    from_ms: i64,
    to_ms: i64,
) -> anyhow::Result<u64> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM job_log WHERE fire_ms >= ? AND fire_ms < ? \
         AND trigger_code IS NOT NULL AND handle_code IS NOT NULL",
    )
    .bind(from_ms)
    .bind(to_ms)
    .fetch_one(pool)
    .await?;
    Ok(n as u64)
}

/// Rows of fires in `[from_ms, to_ms)` whose result is not a success.
async fn failed_rows_between(pool: &MySqlPool, from_ms: i64, to_ms: i64) -> anyhow::Result<u64> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM job_log WHERE fire_ms >= ? AND fire_ms < ? \
         AND handle_code IS NOT NULL AND handle_code <> 200",
    )
    .bind(from_ms)
    .bind(to_ms)
    .fetch_one(pool)
    .await?;
    Ok(n as u64)
}

impl Report for ThroughputReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        markdown(self)
    }
}

fn markdown(r: &ThroughputReport) -> String {
    let k = |rate: f64| {
        if rate >= 10_000.0 {
            format!("{:.1} k", rate / 1000.0)
        } else {
            format!("{rate:.0}")
        }
    };
    let lat = |l: &Latency| format!("{} / {} / {}", l.p50, l.p99, l.max);
    let smoke = if r.smoke {
        " (smoke sizes: the figures mean nothing)"
    } else {
        ""
    };
    let mut rows = String::new();
    let mut cpu_lines = String::new();
    for s in &r.steps {
        rows.push_str(&format!(
            "| {jobs} | {create} | {fires} | {exec} | {ratio:.0} % | {lost} | {dup} | {publat} | {hlat} | {sched:.2} | {per1k:.3} | {us:.0} | {stored} | {kept} |\n",
            jobs = s.jobs,
            create = k(s.create_per_s),
            fires = k(s.fires_per_s),
            exec = k(s.executed_per_s),
            ratio = s.ratio_to_ceiling * 100.0,
            lost = s.lost,
            dup = s.duplicates,
            publat = lat(&s.lateness_ms),
            hlat = lat(&s.handler_lateness_ms),
            sched = s.scheduler_cores,
            per1k = s.scheduler_cores_per_1k_fires_per_s,
            us = s.total_cpu_us_per_fire,
            stored = k(s.stored_per_s),
            kept = if s.kept_up { "yes" } else { "**no**" },
        ));
        let per_fire: Vec<String> = s
            .cpu_us_per_fire
            .iter()
            .map(|(label, us)| format!("{label} {us:.0}"))
            .collect();
        cpu_lines.push_str(&format!(
            "* J = {}: {}; CPU µs per fire: {} (total {:.0}); per fire: {}; history: {} rows of the window's fires stored ({} of them failed, e.g. refused by the executor), {} executed fires without a row after {:.0} s.\n",
            s.jobs,
            s.cpu.line(),
            per_fire.join(", "),
            s.total_cpu_us_per_fire,
            s.ops.line(),
            s.stored,
            s.stored_failed,
            s.stored_missing,
            s.store_wait_s,
        ));
    }
    let stopped = match r.fell_behind_at {
        Some(j) => format!(
            "Stepping stopped at J = {j}: it fell behind (fires/s or executed/s under 90 % of J, or lost fires)."
        ),
        None => "Every step kept up.".to_owned(),
    };
    format!(
        "## throughput, {started}{smoke}\n\n\
         Jobs firing every second (FIX_RATE 1 s, phases spread over the second, {routing}); \
         {nodes} scheduler node(s) (separate processes), {execs} {executors} \
         (prefetch {prefetch}), the persistence worker; window {window:.0} s after {warmup:.0} s of \
         warm-up; {partitions} partitions. Ceiling: {ceiling} confirmed {bytes}-byte messages/s \
         (one trigger per message, {in_flight} in flight), measured in this run. {build} build; \
         {cores} cores, {cpu_model}.\n\n\
         | J | created/s | fires/s | executed/s | ÷ ceiling | lost | dup | publish lateness p50 / p99 / max ms | handler lateness p50 / p99 / max ms | scheduler cores | cores per 1k fires/s | CPU µs per fire, all processes | results stored/s | kept up |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |\n\
         {rows}\n\
         {stopped}\n\n\
         Cores over each window:\n\n{cpu_lines}",
        started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        routing = r.routing,
        nodes = r.nodes,
        execs = r.executors,
        executors = match r.executor {
            ExecutorKind::Bench => "recording executor(s) in the bench process",
            ExecutorKind::Real => "`rondo-executor` process(es) (handler `demo`)",
            ExecutorKind::Xxl =>
                "stand-in XXL-JOB executor(s) (handler `demoJobHandler`) behind `rondo-xxl-gateway`",
        },
        prefetch = r.executor_prefetch,
        window = r.window_s,
        warmup = r.warmup_s,
        partitions = r.partitions,
        ceiling = k(r.ceiling_msgs_per_s),
        bytes = r.ceiling_message_bytes,
        in_flight = r.ceiling_in_flight,
        build = r.machine.build,
        cores = r.machine.cores,
        cpu_model = r.machine.cpu_model,
    )
}
