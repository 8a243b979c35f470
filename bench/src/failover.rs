//! Scenario "failover": three scheduler nodes (separate processes), J jobs
//! firing every second (default 200), and `kill -9` of the leader, R times
//! (default 3), each time replaced by a fresh node.
//!
//! Per kill: the time from the kill until a survivor leads with a higher
//! term (`elected_ms`) and until it finished its first claim
//! (`last_claim_ms` of `GET /api/v1/cluster`: `kill_to_claim_ms`), and the
//! fires scheduled from 3 s before the kill until the next kill's window
//! starts: lost, duplicates, how late their handlers started.
//!
//! The dead leader's ring (about a third of the fires of the next
//! pre-read seconds) waits for its ZooKeeper session to expire; the
//! session timeout is the sandbox config's, and the misfire threshold is
//! raised above it (2 × session + 5 s) so that a late fire is reported as
//! late, and only a fire that never runs counts as lost.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use rondo_core::{Config, clock};
use serde::Serialize;

use crate::broker;
use crate::cluster::fires::{self, Created, FireCount};
use crate::cluster::latency::Latency;
use crate::cluster::{Binaries, Cluster, Spec, create_jobs, job_spec, sleep_until_ms};
use crate::machine::Machine;
use crate::options::Options;
use crate::output::Report;
use crate::sandbox::with_sandbox;
use crate::throughput::executor_queues;
use rondo_testkit::Api;

const NODES: usize = 3;
const PERIOD_MS: i64 = 1_000;
/// A run's fires start this long before its kill.
const BEFORE_KILL_MS: i64 = 3_000;

#[derive(Debug, Clone)]
pub struct Params {
    pub runs: usize,
    pub jobs: usize,
    /// From one kill to the next.
    pub cycle: Duration,
    pub warmup: Duration,
    pub routing: String,
    pub concurrency: usize,
    pub executor_prefetch: Option<u16>,
    pub ceiling_seconds: f64,
    pub in_flight: usize,
    pub smoke: bool,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        Params {
            runs: options.failover_runs(),
            jobs: options.failover_jobs(),
            cycle: Duration::from_secs(if options.smoke { 12 } else { 20 }),
            warmup: Duration::from_secs(options.warmup()),
            routing: options.routing.clone(),
            concurrency: options.concurrency.max(1),
            executor_prefetch: options.executor_prefetch(),
            ceiling_seconds: options.broker_seconds(),
            in_flight: options.in_flight.max(1),
            smoke: options.smoke,
        }
    }
}

/// One kill.
#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    pub killed: String,
    pub old_term: u64,
    pub new_leader: String,
    pub new_term: u64,
    /// Kill → a survivor was first seen leading with a higher term (polled
    /// every 50 ms; at most `kill_to_claim_ms`, as a new leader claims at
    /// once).
    pub elected_ms: i64,
    /// Kill → the end of the new leader's first successful claim.
    pub kill_to_claim_ms: i64,
    /// Fires from 3 s before the kill to the next run's window.
    pub window_from_ms: i64,
    pub window_to_ms: i64,
    pub lost: u64,
    pub duplicates: u64,
    pub fires: FireCount,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub namespace: String,
    pub nodes: usize,
    pub jobs: usize,
    pub zookeeper_session_timeout_ms: u64,
    pub misfire_threshold_ms: i64,
    /// The recording executor's `executor.prefetch`.
    pub executor_prefetch: u16,
    pub kills: Vec<Kill>,
    pub kill_to_claim_ms_median: i64,
    pub elected_ms_median: i64,
    /// Distinct fires run per second over every run's window (the killed
    /// nodes' counters die with them, so both rates come from the
    /// recorder).
    pub fires_per_s: f64,
    pub executed_per_s: f64,
    pub ceiling_msgs_per_s: f64,
    pub ratio_to_ceiling: f64,
    pub lost: u64,
    pub duplicates: u64,
    /// Handler start − scheduled instant over every run's window.
    pub lateness_ms: Latency,
    pub late_over_1s: u64,
    pub binaries: Option<Binaries>,
    pub machine: Machine,
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<FailoverReport> {
    let started_at = Utc::now();
    tracing::info!(
        seconds = params.ceiling_seconds,
        "failover: the broker's ceiling"
    );
    let ceiling = broker::ceiling(config, params.ceiling_seconds, params.in_flight).await?;
    let mut config = config.clone();
    if let Some(prefetch) = params.executor_prefetch {
        config.executor.prefetch = prefetch;
    }
    let session = config.zookeeper.session_timeout_ms as i64;
    config.scheduler.misfire_threshold_ms = config
        .scheduler
        .misfire_threshold_ms
        .max(2 * session + 5_000);
    let (kills, all, binaries, machine, namespace) =
        with_sandbox(&config, "bench_failover", |sandbox| async move {
            let queues = executor_queues(&sandbox.config, 1);
            let result = async {
                let machine = Machine::describe(&sandbox.pool).await;
                let spec = Spec {
                    nodes: NODES,
                    executors: 1,
                    node_log: "info",
                    persist_worker: false,
                    executor: crate::options::ExecutorKind::Bench,
                };
                let mut cluster = Cluster::start(&sandbox.config, &spec).await?;
                let binaries = cluster.binaries.clone();
                let measured = measure(&mut cluster, params).await;
                cluster.stop(measured.is_err()).await;
                let (kills, all) = measured?;
                Ok((
                    kills,
                    all,
                    binaries,
                    machine,
                    sandbox.config.namespace.clone(),
                ))
            }
            .await;
            (sandbox, queues, result)
        })
        .await?;
    let median = |mut v: Vec<i64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let span_s = kills
        .iter()
        .map(|k| (k.window_to_ms - k.window_from_ms) as f64 / 1000.0)
        .sum::<f64>()
        .max(1e-9);
    let executed_per_s = all.executed as f64 / span_s;
    Ok(FailoverReport {
        scenario: "failover",
        started_at,
        smoke: params.smoke,
        namespace,
        nodes: NODES,
        jobs: params.jobs,
        zookeeper_session_timeout_ms: config.zookeeper.session_timeout_ms,
        misfire_threshold_ms: config.scheduler.misfire_threshold_ms,
        executor_prefetch: config.executor.prefetch,
        kill_to_claim_ms_median: median(kills.iter().map(|k| k.kill_to_claim_ms).collect()),
        elected_ms_median: median(kills.iter().map(|k| k.elected_ms).collect()),
        fires_per_s: executed_per_s,
        executed_per_s,
        ceiling_msgs_per_s: ceiling.msgs_per_s,
        ratio_to_ceiling: executed_per_s / ceiling.msgs_per_s.max(1e-9),
        lost: all.lost,
        duplicates: all.duplicates.max(all.duplicate_trigger_ids),
        lateness_ms: all.handler_lateness_ms,
        late_over_1s: all.late_over_1s,
        kills,
        binaries: Some(binaries),
        machine,
    })
}

/// Creates the jobs, then kills the leader `runs` times; returns each kill
/// and the count over every run's window.
async fn measure(cluster: &mut Cluster, params: &Params) -> anyhow::Result<(Vec<Kill>, FireCount)> {
    let spec = job_spec("FIX_RATE", "1", &params.routing);
    let creation = create_jobs(
        &cluster.apis(),
        params.jobs,
        params.concurrency,
        Some(Duration::from_secs(1)),
        None,
        |_| spec.clone(),
    )
    .await?;
    tokio::time::sleep(params.warmup).await;

    let cycle_ms = params.cycle.as_millis() as i64;
    let mut kills = Vec::new();
    for run in 1..=params.runs {
        let (slot, killed, old_term) = leader(cluster).await?;
        tracing::info!(run, node = %killed, term = old_term, "failover: kill -9 the leader");
        let kill_ms = clock::now_ms();
        let mut node = cluster.nodes[slot].take().context("the leader's slot")?;
        node.proc.kill9().await;
        drop(node);
        let (new_leader, new_term, elected_ms, claimed_ms) =
            next_claim(cluster, old_term, kill_ms).await?;
        tracing::info!(
            run,
            leader = %new_leader,
            term = new_term,
            elected_ms = elected_ms - kill_ms,
            claim_ms = claimed_ms - kill_ms,
            "failover: claimed again"
        );
        cluster.add_node().await?;
        cluster.wait_for_leader(NODES).await?;
        kills.push(Kill {
            killed,
            old_term,
            new_leader,
            new_term,
            elected_ms: elected_ms - kill_ms,
            kill_to_claim_ms: claimed_ms - kill_ms,
            window_from_ms: kill_ms - BEFORE_KILL_MS,
            window_to_ms: kill_ms + cycle_ms - BEFORE_KILL_MS,
            lost: 0,
            duplicates: 0,
            fires: FireCount::default(),
        });
        sleep_until_ms(kill_ms + cycle_ms).await;
    }

    // Let the last window's fires run.
    let (from, to) = (
        kills.first().map_or(0, |k| k.window_from_ms),
        kills.last().map_or(0, |k| k.window_to_ms),
    );
    let expected = fires::expected_between(&creation.jobs, PERIOD_MS, from, to);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30)
        && (cluster.recorder.count_between(from, to) as u64) < expected
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let runs = cluster.recorder.runs_between(from, to);
    for kill in &mut kills {
        kill.fires = fires::count(
            &runs,
            &creation.jobs,
            PERIOD_MS,
            kill.window_from_ms,
            kill.window_to_ms,
        );
        kill.lost = kill.fires.lost;
        kill.duplicates = kill.fires.duplicates.max(kill.fires.duplicate_trigger_ids);
    }
    let all = count_windows(&runs, &creation.jobs, &kills);
    Ok((kills, all))
}

/// The count over the union of the kills' (disjoint, consecutive) windows.
fn count_windows(
    runs: &[crate::cluster::recorder::Run],
    jobs: &[Created],
    kills: &[Kill],
) -> FireCount {
    let (Some(first), Some(last)) = (kills.first(), kills.last()) else {
        return FireCount::default();
    };
    fires::count(
        runs,
        jobs,
        PERIOD_MS,
        first.window_from_ms,
        last.window_to_ms,
    )
}

/// The slot, id and term of the node that leads (waits for one).
async fn leader(cluster: &Cluster) -> anyhow::Result<(usize, String, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (slot, status) in cluster.statuses().await {
            let Some(s) = status else { continue };
            if s["role"]["leader"] == true {
                let id = s["node"].as_str().unwrap_or_default().to_owned();
                return Ok((slot, id, s["role"]["term"].as_u64().unwrap_or(0)));
            }
        }
        if Instant::now() > deadline {
            bail!("no node reports itself leader");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the survivors every 50 ms until one leads with a term above
/// `old_term` and has claimed after `kill_ms`; returns its id, term, when
/// it was first seen leading and when its claim ended.
async fn next_claim(
    cluster: &Cluster,
    old_term: u64,
    kill_ms: i64,
) -> anyhow::Result<(String, u64, i64, i64)> {
    let apis: Vec<Api> = cluster.apis();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut elected = None;
    loop {
        for api in &apis {
            let Some(s) = api.cluster().await else {
                continue;
            };
            let term = s["role"]["term"].as_u64().unwrap_or(0);
            if s["role"]["leader"] != true || term <= old_term {
                continue;
            }
            let now = clock::now_ms();
            let elected_ms = *elected.get_or_insert(now);
            let claimed = s["last_claim_ms"].as_i64().unwrap_or(0);
            if claimed > kill_ms {
                let id = s["node"].as_str().unwrap_or_default().to_owned();
                return Ok((id, term, elected_ms.min(claimed), claimed));
            }
        }
        if Instant::now() > deadline {
            bail!("no survivor claimed within 60 s of the kill");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Report for FailoverReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        markdown(self)
    }
}

fn markdown(r: &FailoverReport) -> String {
    let smoke = if r.smoke {
        " (smoke sizes: the figures mean nothing)"
    } else {
        ""
    };
    let mut rows = String::new();
    for (i, k) in r.kills.iter().enumerate() {
        rows.push_str(&format!(
            "| {run} | {killed} (term {old}) → {new} (term {term}) | {elected} | **{claim}** | {lost} | {dup} | {p50} / {p99} / {max} | {late} |\n",
            run = i + 1,
            killed = k.killed,
            old = k.old_term,
            new = k.new_leader,
            term = k.new_term,
            elected = k.elected_ms,
            claim = k.kill_to_claim_ms,
            lost = k.lost,
            dup = k.duplicates,
            p50 = k.fires.handler_lateness_ms.p50,
            p99 = k.fires.handler_lateness_ms.p99,
            max = k.fires.handler_lateness_ms.max,
            late = k.fires.late_over_1s,
        ));
    }
    format!(
        "## failover, {started}{smoke}\n\n\
         {nodes} scheduler nodes (separate processes), {jobs} jobs firing every second; \
         `kill -9` of the leader, replaced by a fresh node each time. ZooKeeper session \
         timeout {session} ms, misfire threshold {misfire} ms, executor prefetch {prefetch}. {build} build; {cores} cores, \
         {cpu_model}.\n\n\
         | run | leader killed → new leader | elected after ms | **first claim after ms** | lost | dup | handler lateness p50 / p99 / max ms | late > 1 s |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n\
         {rows}\n\
         Median time from the kill to the next claim: **{median} ms** (elected: {emedian} ms). \
         Over all windows: {executed:.0} fires/s run, lost {lost}, duplicates {dup}.\n",
        started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        nodes = r.nodes,
        jobs = r.jobs,
        session = r.zookeeper_session_timeout_ms,
        misfire = r.misfire_threshold_ms,
        prefetch = r.executor_prefetch,
        build = r.machine.build,
        cores = r.machine.cores,
        cpu_model = r.machine.cpu_model,
        median = r.kill_to_claim_ms_median,
        emedian = r.elected_ms_median,
        executed = r.executed_per_s,
        lost = r.lost,
        dup = r.duplicates,
    )
}
