//! The command line and the sizes a run uses.

use std::path::PathBuf;

/// `rondo-bench [--scenario NAME|all] [--smoke] [sizes…] [--out DIR]`
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "rondo-bench",
    version,
    about = "rondo's throughput next to the ceiling of the services it runs on"
)]
pub struct Options {
    /// Which scenario to run.
    #[arg(long, value_enum, default_value_t = Scenario::All)]
    pub scenario: Scenario,
    /// Events per measurement (persistence: half triggers, half results).
    /// Defaults to 200,000, or 2,000 with `--smoke`.
    #[arg(long)]
    pub events: Option<usize>,
    /// Where the JSON files and `latest.md` go.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// Tiny sizes: checks that everything runs, in seconds. The figures
    /// mean nothing.
    #[arg(long)]
    pub smoke: bool,
    /// Persistence: the worker's `persist.batch_size` (events per
    /// transaction); the worker's default when absent.
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Persistence: events per AMQP message (one JSON array). The
    /// dispatcher publishes a dispatch round's triggers as one message;
    /// executors publish one result per message.
    #[arg(long, default_value_t = 50)]
    pub events_per_message: usize,

    /// Broker: triggers per message of the batched measurement.
    #[arg(long, default_value_t = 100)]
    pub triggers_per_message: usize,
    /// Broker: publishes awaiting their confirm at once (the pipeline).
    #[arg(long, default_value_t = 512)]
    pub in_flight: usize,
    /// Broker: seconds each broker measurement publishes for. Defaults to
    /// 5 (1 with `--smoke`); the throughput and failover scenarios measure
    /// their own one-message-per-fire ceiling for the same time.
    #[arg(long)]
    pub broker_seconds: Option<f64>,

    /// Throughput: the steps, jobs each firing once a second
    /// (comma-separated). Defaults to 1000,5000,10000,20000,50000 (100 with
    /// `--smoke`). Stepping stops at the first step that falls behind.
    #[arg(long, value_delimiter = ',')]
    pub jobs: Option<Vec<usize>>,
    /// Throughput: scheduler nodes (separate `rondo-scheduler` processes).
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Throughput: recording executors (in this process).
    #[arg(long, default_value_t = 1)]
    pub executors: usize,
    /// Throughput: the measured window, seconds. Defaults to 20 (3 with
    /// `--smoke`).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Throughput and failover: seconds between the last job created and
    /// the window. Defaults to 5 (3 with `--smoke`).
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Throughput, scale, failover: the jobs' routing strategy.
    #[arg(long, default_value = "CONSISTENT_HASH")]
    pub routing: String,
    /// Throughput, scale, failover: the recording executors'
    /// `executor.prefetch` (deliveries in flight; SERIAL_EXECUTION lets a
    /// quarter of it wait per job, half in all). Defaults to the config's
    /// (rondo's default: 64); 256 with `--smoke`.
    #[arg(long)]
    pub executor_prefetch: Option<u16>,
    /// Job creation through the admin API: requests in flight.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Which executors run the throughput scenario's jobs: `bench`, recording
    /// executors inside the bench process (handler `record`, returns at
    /// once), or `real`, `rondo-executor` processes (the product's path:
    /// handler `demo`, two log lines a run), counted from their results
    /// as the broker carries them (the history's lag is reported apart).
    #[arg(long, value_enum, default_value_t = ExecutorKind::Bench)]
    pub executor: ExecutorKind,
    /// Throughput: no persistence worker. The scheduling path alone: the
    /// runs are counted as always, the history stays empty (`stored` 0).
    #[arg(long)]
    pub no_history: bool,
    /// Scenario `xxl`: an earlier build of `rondo-xxl-gateway` (one shared
    /// `xxl.access_token`, no destination rule) run as a third step on the
    /// same load, so the report holds before and after from one run.
    #[arg(long)]
    pub xxl_baseline_gateway: Option<PathBuf>,
    /// Stand-in XXL-JOB executors (`--executor xxl`, scenario `xxl`): each
    /// run takes this long (`sleepJobHandler`), as real handlers do; 0
    /// (the default): `demoJobHandler`, which returns at once.
    #[arg(long, default_value_t = 0)]
    pub xxl_handler_ms: u64,
    /// Throughput, `xxl`: every job fires at the same instant of each
    /// second (cron `* * * * * ?`, as XXL-JOB's jobs are usually written)
    /// instead of at phases spread over the second (`FIX_RATE`).
    #[arg(long)]
    pub same_instant: bool,

    /// Scale: jobs not due soon. Defaults to 1,000,000 (2,000 with
    /// `--smoke`).
    #[arg(long)]
    pub scale_jobs: Option<usize>,
    /// Scale: jobs due within seconds, all at one instant. Defaults to
    /// 10,000 (100 with `--smoke`).
    #[arg(long)]
    pub scale_due: Option<usize>,
    /// Scale: seconds the admin API may spend creating the jobs; the rest
    /// is written directly to Redis (and labelled so). Defaults to 300.
    #[arg(long)]
    pub scale_api_seconds: Option<u64>,
    /// Pages: jobs in the MySQL mirror (and Redis). Defaults to 1,000,000
    /// (2,000 with `--smoke`).
    #[arg(long)]
    pub pages_jobs: Option<u64>,
    /// Pages: trigger log rows. Defaults to 10,000,000 (20,000 with
    /// `--smoke`).
    #[arg(long)]
    pub pages_logs: Option<u64>,

    /// Scaling: jobs firing every second in each run. Defaults to 1,000
    /// (50 with `--smoke`).
    #[arg(long)]
    pub scaling_jobs: Option<usize>,
    /// Scaling: the node counts to run (comma-separated). Defaults to
    /// 1,2,3 (1,2 with `--smoke`).
    #[arg(long, value_delimiter = ',')]
    pub scaling_nodes: Option<Vec<usize>>,
    /// Scaling: the topologies to run them on (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "single,cluster")]
    pub topologies: Vec<Topology>,
    /// Scaling: due partitions on both topologies (the same, so that the
    /// claim's cost compares). Defaults to 64, the rule for three Redis
    /// masters (scheduler/README.md).
    #[arg(long, default_value_t = 64)]
    pub scaling_partitions: u32,

    /// Failover: kills of the leader, and then of a follower, per step
    /// (each measured). Defaults to 3 (1 with `--smoke`).
    #[arg(long)]
    pub failover_runs: Option<usize>,
    /// Failover: jobs firing every second, a step each (comma
    /// separated). Defaults to 500,2000 (50 with `--smoke`).
    #[arg(long, value_delimiter = ',')]
    pub failover_jobs: Vec<usize>,
    /// Failover: the nodes' ZooKeeper session timeout (ms). Defaults to
    /// the production default, 6000 (with `--smoke`, the sandbox's 4000).
    #[arg(long)]
    pub failover_session_ms: Option<u64>,

    /// Overload: jobs firing every second throughout. Defaults to 1,000
    /// (20 with `--smoke`).
    #[arg(long)]
    pub overload_base: Option<usize>,
    /// Overload: jobs firing every second in the window only, on top of
    /// the base. Defaults to 20,000 (about twice what one node publishes
    /// here; 400 with `--smoke`).
    #[arg(long)]
    pub overload_jobs: Option<usize>,
    /// Overload: the window, seconds (1 to 60, within one minute).
    /// Defaults to 60 (5 with `--smoke`).
    #[arg(long)]
    pub overload_window: Option<i64>,
    /// Overload: seconds observed after the window. Defaults to 90 (15
    /// with `--smoke`).
    #[arg(long)]
    pub overload_after: Option<i64>,
    /// Overload: the node's `scheduler.max_fires_loaded`. Defaults to
    /// rondo's (200 with `--smoke`).
    #[arg(long)]
    pub max_fires_loaded: Option<usize>,
}

impl Options {
    /// The options of `--smoke` with results in `out`.
    pub fn smoke(scenario: Scenario, out: PathBuf) -> Options {
        Options {
            scenario,
            events: None,
            out,
            smoke: true,
            batch_size: None,
            events_per_message: 50,
            triggers_per_message: 100,
            in_flight: 512,
            broker_seconds: None,
            jobs: None,
            nodes: 1,
            executors: 1,
            seconds: None,
            warmup: None,
            routing: "CONSISTENT_HASH".into(),
            executor_prefetch: None,
            concurrency: 64,
            executor: ExecutorKind::Bench,
            no_history: false,
            xxl_baseline_gateway: None,
            xxl_handler_ms: 0,
            same_instant: false,
            scale_jobs: None,
            scale_due: None,
            scale_api_seconds: None,
            pages_jobs: None,
            pages_logs: None,
            failover_runs: None,
            failover_jobs: Vec::new(),
            failover_session_ms: None,
            overload_base: None,
            overload_jobs: None,
            overload_window: None,
            overload_after: None,
            max_fires_loaded: None,
            scaling_jobs: None,
            scaling_nodes: None,
            topologies: vec![Topology::Single, Topology::Cluster],
            scaling_partitions: 64,
        }
    }

    /// Events per measurement, after `--smoke`.
    pub fn events(&self) -> usize {
        match (self.events, self.smoke) {
            (Some(events), _) => events,
            (None, true) => 2_000,
            (None, false) => 200_000,
        }
    }

    /// Seconds each broker measurement lasts.
    pub fn broker_seconds(&self) -> f64 {
        let default = if self.smoke { 1.0 } else { 5.0 };
        self.broker_seconds.unwrap_or(default).max(0.1)
    }

    /// The throughput steps.
    pub fn jobs(&self) -> Vec<usize> {
        match (&self.jobs, self.smoke) {
            (Some(jobs), _) if !jobs.is_empty() => jobs.clone(),
            (_, true) => vec![100],
            (_, false) => vec![1_000, 5_000, 10_000, 20_000, 50_000],
        }
    }

    /// The throughput window, seconds.
    pub fn seconds(&self) -> u64 {
        let default = if self.smoke { 3 } else { 20 };
        self.seconds.unwrap_or(default).max(1)
    }

    /// Seconds of warm-up before a window.
    pub fn warmup(&self) -> u64 {
        let default = if self.smoke { 3 } else { 5 };
        self.warmup.unwrap_or(default)
    }

    /// The executors' prefetch, if overridden.
    pub fn executor_prefetch(&self) -> Option<u16> {
        self.executor_prefetch.map(|p| p.max(1))
    }

    pub fn scale_jobs(&self) -> usize {
        let default = if self.smoke { 2_000 } else { 1_000_000 };
        self.scale_jobs.unwrap_or(default)
    }

    pub fn scale_due(&self) -> usize {
        let default = if self.smoke { 100 } else { 10_000 };
        self.scale_due.unwrap_or(default)
    }

    pub fn scale_api_seconds(&self) -> u64 {
        self.scale_api_seconds.unwrap_or(300)
    }

    pub fn failover_runs(&self) -> usize {
        let default = if self.smoke { 1 } else { 3 };
        self.failover_runs.unwrap_or(default).max(1)
    }

    /// `None`: the sandbox's session.
    pub fn failover_session_ms(&self) -> Option<u64> {
        let default = rondo_core::Config::default().zookeeper.session_timeout_ms;
        self.failover_session_ms
            .or((!self.smoke).then_some(default))
    }

    pub fn scaling_jobs(&self) -> usize {
        let default = if self.smoke { 50 } else { 1_000 };
        self.scaling_jobs.unwrap_or(default).max(1)
    }

    pub fn scaling_nodes(&self) -> Vec<usize> {
        match (&self.scaling_nodes, self.smoke) {
            (Some(nodes), _) if !nodes.is_empty() => nodes.iter().map(|&n| n.max(1)).collect(),
            (_, true) => vec![1, 2],
            (_, false) => vec![1, 2, 3],
        }
    }

    pub fn overload_base(&self) -> usize {
        let default = if self.smoke { 20 } else { 1_000 };
        self.overload_base.unwrap_or(default)
    }

    pub fn overload_jobs(&self) -> usize {
        let default = if self.smoke { 400 } else { 20_000 };
        self.overload_jobs.unwrap_or(default)
    }

    pub fn overload_window(&self) -> i64 {
        let default = if self.smoke { 5 } else { 60 };
        self.overload_window.unwrap_or(default)
    }

    pub fn overload_after(&self) -> i64 {
        let default = if self.smoke { 15 } else { 90 };
        self.overload_after.unwrap_or(default).max(1)
    }

    pub fn failover_jobs(&self) -> Vec<usize> {
        if !self.failover_jobs.is_empty() {
            return self.failover_jobs.iter().map(|j| (*j).max(1)).collect();
        }
        if self.smoke {
            vec![50]
        } else {
            vec![500, 2_000]
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Events stored per second by the persistence worker, against raw
    /// multi-row INSERTs of the same rows.
    Persistence,
    /// RabbitMQ's ceiling: confirmed persistent publishes of trigger-sized
    /// messages, one trigger per message and batched.
    Broker,
    /// Fires per second, lateness and CPU for a stepping number of jobs
    /// firing every second, against the broker's ceiling.
    Throughput,
    /// A million jobs: creation rate, Redis memory per job, claim tick
    /// with ten thousand due.
    Scale,
    /// kill -9 of the leader of three nodes: time to the next claim, lost
    /// and duplicate fires.
    Failover,
    /// The console's jobs and logs pages at a million jobs and ten million
    /// log rows.
    Pages,
    /// The throughput scenario with 1, 2 and 3 nodes, on one Redis,
    /// ZooKeeper and RabbitMQ and on the cluster topology: each node's
    /// fires and cores, the leader's claim per tick.
    Scaling,
    /// One node offered about twice what it publishes for a minute:
    /// nothing lost, its memory, how long until it is on time again.
    Overload,
    /// The same load through the XXL-JOB gateway to stand-in XXL-JOB
    /// executors and through `rondo-executor`, in the same run: what the
    /// gateway adds to lateness, and its CPU per fire.
    Xxl,
    /// Every scenario, one after the other.
    All,
}

impl Scenario {
    /// The single scenarios this one stands for.
    pub fn expand(self) -> Vec<Scenario> {
        match self {
            Scenario::All => vec![
                Scenario::Persistence,
                Scenario::Broker,
                Scenario::Throughput,
                Scenario::Scale,
                Scenario::Failover,
                Scenario::Pages,
                Scenario::Scaling,
                Scenario::Overload,
                Scenario::Xxl,
            ],
            single => vec![single],
        }
    }
}

/// Which executors a firing scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// Recording executors inside the bench process.
    Bench,
    /// `rondo-executor` processes with the built-in handlers.
    Real,
    /// Stand-in XXL-JOB executors (`xxl-standin`, handler
    /// `demoJobHandler`) behind a `rondo-xxl-gateway` process.
    Xxl,
}

/// Where the scaling scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// The usual config's services: one Redis, one ZooKeeper, one RabbitMQ.
    Single,
    /// `scripts/services-cluster.sh`: a Redis Cluster of three masters, a
    /// ZooKeeper ensemble of three, a RabbitMQ cluster of three with quorum
    /// queues (started if it is not up).
    Cluster,
}
