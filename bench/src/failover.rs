//! Scenario "failover": three scheduler nodes (separate processes), J jobs
//! firing every second (default 500, then 2,000: one step each, on a fresh
//! cluster), and `kill -9`, R times (default 3) of the leader and then R
//! times of a follower, each killed node replaced by a fresh one.
//!
//! Per kill, the fires due from the kill until the next kill's window:
//! lost, run twice, published twice (the survivors' `double_published`),
//! and how late their handlers started (p50, p99, max). A dead node's rings
//! are fired by its standby once its lease lapses (`scheduler.lease_ms`),
//! not when ZooKeeper ends its session; a leader kill also shows whether
//! the due sets keep flowing until a new leader claims (`kill_to_claim_ms`).
//! The misfire threshold is the configuration's: a fire skipped as a
//! misfire counts as lost. The target: max ≤ 1 s and p99 ≤ 200 ms, with
//! nothing lost or run twice (`target_met`).

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use rondo_core::{Config, clock};
use serde::Serialize;

use crate::broker;
use crate::cluster::fires::{self, FireCount};
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
/// The target: the latest fire at most this late …
const TARGET_MAX_MS: i64 = 1_000;
/// … and the 99th percentile at most this.
const TARGET_P99_MS: i64 = 200;

#[derive(Debug, Clone)]
pub struct Params {
    /// Kills of each kind (leader, follower) per step.
    pub runs: usize,
    /// Jobs firing every second, a step each.
    pub jobs: Vec<usize>,
    /// From one kill to the next.
    pub cycle: Duration,
    pub warmup: Duration,
    pub routing: String,
    pub concurrency: usize,
    pub executor_prefetch: Option<u16>,
    /// The nodes' ZooKeeper session (`None`: the sandbox's).
    pub session_ms: Option<u64>,
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
            session_ms: options.failover_session_ms(),
            ceiling_seconds: options.broker_seconds(),
            in_flight: options.in_flight.max(1),
            smoke: options.smoke,
        }
    }
}

/// What is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Leader,
    Follower,
}

/// One kill.
#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    pub target: Target,
    pub killed: String,
    pub old_term: u64,
    /// Leader kills: who leads next, with which term, and when.
    pub new_leader: Option<String>,
    pub new_term: Option<u64>,
    /// Kill → a survivor was first seen leading with a higher term (polled
    /// every 50 ms; at most `kill_to_claim_ms`, as a new leader claims at
    /// once).
    pub elected_ms: Option<i64>,
    /// Kill → the end of the new leader's first successful claim.
    pub kill_to_claim_ms: Option<i64>,
    /// The fires due from the kill to the next kill's window.
    pub window_from_ms: i64,
    pub window_to_ms: i64,
    pub lost: u64,
    /// Trigger ids that ran more than once.
    pub run_twice: u64,
    /// Fires the survivors published twice (counted at their acks).
    pub double_published: u64,
    pub fires: FireCount,
}

/// The worst of one step's kills of one kind.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Worst {
    pub kills: usize,
    /// Handler lateness of the fires due after the kill: the highest p50,
    /// p99 and max over the kills.
    pub p50_ms: i64,
    pub p99_ms: i64,
    pub max_ms: i64,
    pub lost: u64,
    pub run_twice: u64,
    pub double_published: u64,
    /// Leader kills: the median time to the next claim.
    pub kill_to_claim_ms_median: Option<i64>,
    pub target_met: bool,
}

/// One step: a cluster with `jobs` jobs firing every second.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub jobs: usize,
    pub namespace: String,
    pub kills: Vec<Kill>,
    pub leader: Worst,
    pub follower: Worst,
    /// Distinct fires run per second over the step's windows.
    pub executed_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub nodes: usize,
    /// The first step's jobs (every step's are in `steps`).
    pub jobs: usize,
    pub zookeeper_session_timeout_ms: u64,
    /// How far ahead the leader claims under that session.
    pub claim_ahead_ms: i64,
    pub misfire_threshold_ms: i64,
    pub lease_ms: u64,
    /// The recording executor's `executor.prefetch`.
    pub executor_prefetch: u16,
    pub steps: Vec<Step>,
    pub target_max_ms: i64,
    pub target_p99_ms: i64,
    /// Every step, both kinds: max and p99 within the target, nothing lost
    /// or run twice.
    pub target_met: bool,
    /// Over every step's windows (the killed nodes' counters die with
    /// them, so the rates come from the recorder).
    pub fires_per_s: f64,
    pub executed_per_s: f64,
    pub ceiling_msgs_per_s: f64,
    pub ratio_to_ceiling: f64,
    pub lost: u64,
    pub duplicates: u64,
    pub double_published: u64,
    /// The worst kill's p50, p99 and max.
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
    if let Some(session) = params.session_ms {
        config.zookeeper.session_timeout_ms = session;
    }
    let mut steps = Vec::new();
    let mut binaries = None;
    let mut machine = None;
    for &jobs in &params.jobs {
        let (step, b, m) = run_step(&config, params, jobs).await?;
        binaries = Some(b);
        machine = Some(m);
        steps.push(step);
    }
    let machine = machine.context("at least one step")?;
    let all_kills = || steps.iter().flat_map(|s| s.kills.iter());
    let span_s = all_kills()
        .map(|k| (k.window_to_ms - k.window_from_ms) as f64 / 1000.0)
        .sum::<f64>()
        .max(1e-9);
    let executed: u64 = all_kills().map(|k| k.fires.executed).sum();
    let executed_per_s = executed as f64 / span_s;
    let worst = |f: fn(&Kill) -> i64| all_kills().map(f).max().unwrap_or(0);
    let lateness = Latency {
        count: all_kills().map(|k| k.fires.handler_lateness_ms.count).sum(),
        p50: worst(|k| k.fires.handler_lateness_ms.p50),
        p99: worst(|k| k.fires.handler_lateness_ms.p99),
        max: worst(|k| k.fires.handler_lateness_ms.max),
    };
    Ok(FailoverReport {
        scenario: "failover",
        started_at,
        smoke: params.smoke,
        nodes: NODES,
        jobs: params.jobs.first().copied().unwrap_or(0),
        zookeeper_session_timeout_ms: config.zookeeper.session_timeout_ms,
        claim_ahead_ms: config.claim_ahead_ms(),
        misfire_threshold_ms: config.scheduler.misfire_threshold_ms,
        lease_ms: config.scheduler.lease_ms,
        executor_prefetch: config.executor.prefetch,
        target_max_ms: TARGET_MAX_MS,
        target_p99_ms: TARGET_P99_MS,
        target_met: steps
            .iter()
            .all(|s| s.leader.target_met && s.follower.target_met),
        fires_per_s: executed_per_s,
        executed_per_s,
        ceiling_msgs_per_s: ceiling.msgs_per_s,
        ratio_to_ceiling: executed_per_s / ceiling.msgs_per_s.max(1e-9),
        lost: all_kills().map(|k| k.lost).sum(),
        duplicates: all_kills()
            .map(|k| k.fires.duplicates.max(k.run_twice))
            .sum(),
        double_published: all_kills().map(|k| k.double_published).sum(),
        lateness_ms: lateness,
        late_over_1s: all_kills().map(|k| k.fires.late_over_1s).sum(),
        steps,
        binaries,
        machine,
    })
}

/// One step on a fresh cluster.
async fn run_step(
    config: &Config,
    params: &Params,
    jobs: usize,
) -> anyhow::Result<(Step, Binaries, Machine)> {
    let (kills, binaries, machine, namespace) =
        with_sandbox(config, "bench_failover", |sandbox| async move {
            let queues = executor_queues(&sandbox.config, 1);
            let result = async {
                let machine = Machine::describe(&sandbox.pool).await;
                let spec = Spec {
                    nodes: NODES,
                    executors: 1,
                    node_log: "info",
                    persist_worker: false,
                    executor: crate::options::ExecutorKind::Bench,
                    legacy_gateway: None,
                };
                let mut cluster = Cluster::start(&sandbox.config, &spec).await?;
                let binaries = cluster.binaries.clone();
                let measured = measure(&mut cluster, params, jobs).await;
                cluster.stop(measured.is_err()).await;
                Ok((
                    measured?,
                    binaries,
                    machine,
                    sandbox.config.namespace.clone(),
                ))
            }
            .await;
            (sandbox, queues, result)
        })
        .await?;
    let span_s = kills
        .iter()
        .map(|k| (k.window_to_ms - k.window_from_ms) as f64 / 1000.0)
        .sum::<f64>()
        .max(1e-9);
    let executed: u64 = kills.iter().map(|k| k.fires.executed).sum();
    let step = Step {
        jobs,
        namespace,
        leader: worst(&kills, Target::Leader),
        follower: worst(&kills, Target::Follower),
        executed_per_s: executed as f64 / span_s,
        kills,
    };
    Ok((step, binaries, machine))
}

/// The worst of the kills of `target`.
fn worst(kills: &[Kill], target: Target) -> Worst {
    let of: Vec<&Kill> = kills.iter().filter(|k| k.target == target).collect();
    let max = |f: fn(&Kill) -> i64| of.iter().map(|k| f(k)).max().unwrap_or(0);
    let sum = |f: fn(&Kill) -> u64| of.iter().map(|k| f(k)).sum::<u64>();
    let mut claims: Vec<i64> = of.iter().filter_map(|k| k.kill_to_claim_ms).collect();
    claims.sort_unstable();
    let (p50_ms, p99_ms, max_ms) = (
        max(|k| k.fires.handler_lateness_ms.p50),
        max(|k| k.fires.handler_lateness_ms.p99),
        max(|k| k.fires.handler_lateness_ms.max),
    );
    let (lost, run_twice) = (sum(|k| k.lost), sum(|k| k.run_twice));
    Worst {
        kills: of.len(),
        p50_ms,
        p99_ms,
        max_ms,
        lost,
        run_twice,
        double_published: sum(|k| k.double_published),
        kill_to_claim_ms_median: claims.get(claims.len() / 2).copied(),
        target_met: !of.is_empty()
            && max_ms <= TARGET_MAX_MS
            && p99_ms <= TARGET_P99_MS
            && lost == 0
            && run_twice == 0,
    }
}

/// Per node id, its `firing.double_published`.
async fn double_published(cluster: &Cluster) -> std::collections::HashMap<String, u64> {
    cluster
        .statuses()
        .await
        .into_iter()
        .filter_map(|(_, s)| {
            let s = s?;
            Some((
                s["node"].as_str()?.to_owned(),
                s["firing"]["double_published"].as_u64().unwrap_or(0),
            ))
        })
        .collect()
}

/// Creates the jobs, then kills the leader `runs` times and a follower
/// `runs` times; returns each kill with its fires counted.
async fn measure(cluster: &mut Cluster, params: &Params, jobs: usize) -> anyhow::Result<Vec<Kill>> {
    let spec = job_spec("FIX_RATE", "1", &params.routing);
    let creation = create_jobs(
        &cluster.apis(),
        jobs,
        params.concurrency,
        Some(Duration::from_secs(1)),
        None,
        |_| spec.clone(),
    )
    .await?;
    tokio::time::sleep(params.warmup).await;

    let cycle_ms = params.cycle.as_millis() as i64;
    let mut kills = Vec::new();
    for target in [Target::Leader, Target::Follower] {
        for run in 1..=params.runs {
            let (slot, killed, old_term) = match target {
                Target::Leader => leader(cluster).await?,
                Target::Follower => follower(cluster).await?,
            };
            let before = double_published(cluster).await;
            tracing::info!(run, ?target, node = %killed, term = old_term, jobs, "failover: kill -9");
            let kill_ms = clock::now_ms();
            let mut node = cluster.nodes[slot].take().context("the node's slot")?;
            node.proc.kill9().await;
            drop(node);
            let mut kill = Kill {
                target,
                killed: killed.clone(),
                old_term,
                new_leader: None,
                new_term: None,
                elected_ms: None,
                kill_to_claim_ms: None,
                window_from_ms: kill_ms,
                window_to_ms: kill_ms + cycle_ms - PERIOD_MS,
                lost: 0,
                run_twice: 0,
                double_published: 0,
                fires: FireCount::default(),
            };
            if target == Target::Leader {
                let (new_leader, new_term, elected_ms, claimed_ms) =
                    next_claim(cluster, old_term, kill_ms).await?;
                tracing::info!(run, leader = %new_leader, term = new_term, claim_ms = claimed_ms - kill_ms, "failover: claimed again");
                kill.new_leader = Some(new_leader);
                kill.new_term = Some(new_term);
                kill.elected_ms = Some(elected_ms - kill_ms);
                kill.kill_to_claim_ms = Some(claimed_ms - kill_ms);
            }
            cluster.add_node().await?;
            cluster.wait_for_leader(NODES).await?;
            sleep_until_ms(kill.window_to_ms).await;
            let after = double_published(cluster).await;
            kill.double_published = after
                .iter()
                .map(|(id, n)| n.saturating_sub(before.get(id).copied().unwrap_or(0)))
                .sum();
            kills.push(kill);
            sleep_until_ms(kill_ms + cycle_ms).await;
        }
    }

    // Let the last window's fires run.
    let (from, to) = (
        kills.first().map_or(0, |k| k.window_from_ms),
        kills.last().map_or(0, |k| k.window_to_ms),
    );
    let expected: u64 = kills
        .iter()
        .map(|k| {
            fires::expected_between(&creation.jobs, PERIOD_MS, k.window_from_ms, k.window_to_ms)
        })
        .sum();
    let started = Instant::now();
    let ran = |cluster: &Cluster| -> u64 {
        kills
            .iter()
            .map(|k| {
                cluster
                    .recorder
                    .count_between(k.window_from_ms, k.window_to_ms) as u64
            })
            .sum()
    };
    while started.elapsed() < Duration::from_secs(30) && ran(cluster) < expected {
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
        kill.run_twice = kill.fires.duplicate_trigger_ids;
    }
    Ok(kills)
}

/// The slot, id and term of a live node that does not lead.
async fn follower(cluster: &Cluster) -> anyhow::Result<(usize, String, u64)> {
    in_role(cluster, false).await
}

/// The slot, id and term of the node that leads (waits for one).
async fn leader(cluster: &Cluster) -> anyhow::Result<(usize, String, u64)> {
    in_role(cluster, true).await
}

/// The first live node whose role is `leader`: its slot, id, and the term
/// it leads in (a follower: the term of the leader it follows).
async fn in_role(cluster: &Cluster, leader: bool) -> anyhow::Result<(usize, String, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (slot, status) in cluster.statuses().await {
            let Some(s) = status else { continue };
            if s["role"]["leader"] == leader {
                let id = s["node"].as_str().unwrap_or_default().to_owned();
                let term = if leader {
                    &s["role"]["term"]
                } else {
                    &s["leader"]["term"]
                };
                return Ok((slot, id, term.as_u64().unwrap_or(0)));
            }
        }
        if Instant::now() > deadline {
            bail!(
                "no node reports itself {}",
                if leader { "leader" } else { "a follower" }
            );
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
    let opt = |v: Option<i64>| v.map_or_else(|| "—".to_owned(), |v| v.to_string());
    let mut rows = String::new();
    let mut summary = String::new();
    for step in &r.steps {
        for (i, k) in step.kills.iter().enumerate() {
            rows.push_str(&format!(
                "| {jobs} | {run} | {target:?} {killed} | {claim} | {lost} | {twice} | {double} | {p50} / {p99} / **{max}** |\n",
                jobs = step.jobs,
                run = i + 1,
                target = k.target,
                killed = k.killed,
                claim = opt(k.kill_to_claim_ms),
                lost = k.lost,
                twice = k.run_twice,
                double = k.double_published,
                p50 = k.fires.handler_lateness_ms.p50,
                p99 = k.fires.handler_lateness_ms.p99,
                max = k.fires.handler_lateness_ms.max,
            ));
        }
        for (kind, w) in [("leader", &step.leader), ("follower", &step.follower)] {
            summary.push_str(&format!(
                "| {jobs} | {kind} | {p50} | **{p99}** | **{max}** | {lost} | {twice} | {double} | {claim} | {met} |\n",
                jobs = step.jobs,
                p50 = w.p50_ms,
                p99 = w.p99_ms,
                max = w.max_ms,
                lost = w.lost,
                twice = w.run_twice,
                double = w.double_published,
                claim = opt(w.kill_to_claim_ms_median),
                met = if w.target_met { "yes" } else { "**no**" },
            ));
        }
    }
    format!(
        "## failover, {started}{smoke}\n\n\
         {nodes} scheduler nodes (separate processes), jobs firing every second; `kill -9` \
         of the leader, then of a follower, each replaced by a fresh node. ZooKeeper session \
         timeout {session} ms, ring lease {lease} ms, misfire threshold {misfire} ms, executor \
         prefetch {prefetch}. {build} build; {cores} cores, {cpu_model}. Lateness: handler start \
         minus the scheduled instant, of the fires due after each kill; the worst kill of each \
         kind. Target: max ≤ {tmax} ms and p99 ≤ {tp99} ms, nothing lost or run twice.\n\n\
         | jobs/s | killed | p50 ms | p99 ms | max ms | lost | run twice | published twice | kill → claim ms (median) | target met |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n\
         {summary}\n\
         Every kill:\n\n\
         | jobs/s | run | killed | kill → claim ms | lost | run twice | published twice | lateness p50 / p99 / max ms |\n\
         | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n\
         {rows}\n\
         Target met: **{met}**. Over all windows: {executed:.0} fires/s run.\n",
        started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        nodes = r.nodes,
        session = r.zookeeper_session_timeout_ms,
        lease = r.lease_ms,
        misfire = r.misfire_threshold_ms,
        prefetch = r.executor_prefetch,
        build = r.machine.build,
        cores = r.machine.cores,
        cpu_model = r.machine.cpu_model,
        tmax = r.target_max_ms,
        tp99 = r.target_p99_ms,
        met = if r.target_met { "yes" } else { "no" },
        executed = r.executed_per_s,
    )
}
