//! Scenario "scaling": the throughput scenario's step at one J, with 1, 2
//! and 3 scheduler nodes, on the single topology (the usual config's one
//! Redis, ZooKeeper and RabbitMQ) and on the cluster topology
//! (`scripts/services-cluster.sh`: a Redis Cluster of three masters, a
//! ZooKeeper ensemble, a RabbitMQ cluster with quorum queues).
//!
//! Each run reports each node's fires per second and cores, and the
//! leader's claim tick with its cost per claimed fire. On one small machine
//! the totals cannot grow with the nodes (they share the cores); what must
//! grow is how the work spreads: every node fires its share, the leader's
//! claim stays one small tick.
//!
//! Both topologies use the same number of due partitions (`--scaling-partitions`),
//! so that their claims compare. Each topology's ceiling (one confirmed
//! message per fire, on its own broker and queue type) is measured at its
//! start.

use chrono::{DateTime, Utc};
use rondo_core::Config;
use serde::Serialize;

use crate::broker;
use crate::cluster::Binaries;
use crate::cluster::latency::Latency;
use crate::machine::Machine;
use crate::options::{Options, Topology};
use crate::output::Report;
use crate::throughput::{self, NodeShare};

#[derive(Debug, Clone)]
pub struct Params {
    pub jobs: usize,
    pub nodes: Vec<usize>,
    pub topologies: Vec<Topology>,
    pub partitions: u32,
    /// Window, warm-up, executors, routing, ceiling: the throughput
    /// scenario's, with `nodes` set per run.
    pub throughput: throughput::Params,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        Params {
            jobs: options.scaling_jobs(),
            nodes: options.scaling_nodes(),
            topologies: options.topologies.clone(),
            partitions: options.scaling_partitions.max(1),
            throughput: throughput::Params::new(options),
        }
    }
}

/// One topology and node count: the throughput step's figures (each
/// node's share, the leader's claim ticks included), flattened.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub topology: Topology,
    pub nodes: usize,
    pub partitions: u32,
    #[serde(flatten)]
    pub step: throughput::Step,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalingReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub jobs: usize,
    pub executors: usize,
    pub window_s: f64,
    pub warmup_s: f64,
    pub claim_interval_ms: u64,
    pub runs: Vec<Run>,
    pub binaries: Option<Binaries>,
    pub machine: Machine,
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<ScalingReport> {
    let started_at = Utc::now();
    let mut runs = Vec::new();
    let mut binaries = None;
    let mut machine = None;
    for &topology in &params.topologies {
        let mut config = config.clone();
        config.partitions = params.partitions;
        if topology == Topology::Cluster {
            tracing::info!("scaling: the cluster topology (scripts/services-cluster.sh up)");
            tokio::task::spawn_blocking(rondo_testkit::topology::up).await?;
            rondo_testkit::topology::use_cluster(&mut config);
        }
        if let Some(prefetch) = params.throughput.executor_prefetch {
            config.executor.prefetch = prefetch;
        }
        let ceiling = broker::ceiling(
            &config,
            params.throughput.ceiling_seconds,
            params.throughput.in_flight,
        )
        .await?;
        for &nodes in &params.nodes {
            tracing::info!(?topology, nodes, jobs = params.jobs, "scaling: run");
            let step_params = throughput::Params {
                nodes,
                ..params.throughput.clone()
            };
            let (step, bins, described) =
                throughput::run_step(&config, &step_params, params.jobs, ceiling.msgs_per_s)
                    .await?;
            binaries.get_or_insert(bins);
            machine.get_or_insert(described);
            tracing::info!(
                ?topology,
                nodes,
                fires_per_s = step.fires_per_s,
                lost = step.lost,
                claim_p50_ms = step.claim_tick_ms.p50,
                "scaling: run done"
            );
            runs.push(Run {
                topology,
                nodes,
                partitions: config.partitions,
                step,
            });
        }
    }
    Ok(ScalingReport {
        scenario: "scaling",
        started_at,
        smoke: params.throughput.smoke,
        jobs: params.jobs,
        executors: params.throughput.executors,
        window_s: params.throughput.window.as_secs_f64(),
        warmup_s: params.throughput.warmup.as_secs_f64(),
        claim_interval_ms: config.scheduler.claim_interval_ms,
        runs,
        binaries,
        machine: machine
            .ok_or_else(|| anyhow::anyhow!("no run (empty --topologies or --scaling-nodes)"))?,
    })
}

impl Report for ScalingReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        markdown(self)
    }
}

fn markdown(r: &ScalingReport) -> String {
    let lat = |l: &Latency| format!("{} / {} / {}", l.p50, l.p99, l.max);
    let smoke = if r.smoke {
        " (smoke sizes: the figures mean nothing)"
    } else {
        ""
    };
    let mut rows = String::new();
    for run in &r.runs {
        let shares = |f: &dyn Fn(&NodeShare) -> String| {
            run.step
                .per_node
                .iter()
                .map(|n| format!("{}{}", f(n), if n.leader { "*" } else { "" }))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let step = &run.step;
        rows.push_str(&format!(
            "| {topology:?} | {nodes} | {partitions} | {fires:.0} | {exec:.0} | {lost} | {dup} | {per_node} | {cores} | {tick} | {per_fire:.1} | {publat} | {busy:.2} | {kept} |\n",
            topology = run.topology,
            nodes = run.nodes,
            partitions = run.partitions,
            fires = step.fires_per_s,
            exec = step.executed_per_s,
            lost = step.lost,
            dup = step.duplicates,
            per_node = shares(&|n| format!("{:.0}", n.fires_per_s)),
            cores = shares(&|n| format!("{:.2}", n.cores)),
            tick = lat(&step.claim_tick_ms),
            per_fire = step.claim_us_per_fire,
            publat = lat(&step.lateness_ms),
            busy = step.cpu.machine_busy_cores,
            kept = if step.kept_up { "yes" } else { "**no**" },
        ));
    }
    format!(
        "## scaling, {started}{smoke}\n\n\
         {jobs} jobs firing every second on 1…3 scheduler nodes (separate processes), \
         {execs} recording executor(s), the persistence worker; window {window:.0} s after \
         {warmup:.0} s of warm-up; a claim tick every {interval} ms. Single: one Redis, \
         ZooKeeper, RabbitMQ. Cluster: Redis Cluster (3 masters + 3 replicas), ZooKeeper \
         ensemble of 3, RabbitMQ cluster of 3 with quorum queues, all on this machine. \
         {build} build; {cores} cores, {cpu_model}. `*` marks the leader.\n\n\
         | topology | nodes | partitions | fires/s | executed/s | lost | dup | fires/s per node | cores per node | leader's claim tick p50 / p99 / max ms | claim µs per fire | publish lateness p50 / p99 / max ms | machine busy cores | kept up |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | :---: |\n\
         {rows}",
        started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        jobs = r.jobs,
        execs = r.executors,
        window = r.window_s,
        warmup = r.warmup_s,
        interval = r.claim_interval_ms,
        build = r.machine.build,
        cores = r.machine.cores,
        cpu_model = r.machine.cpu_model,
    )
}
