//! Scenario "overload": one scheduler node offered more fires than it can
//! publish for a while, then the load drops.
//!
//! * `B` base jobs fire every second throughout (`FIX_RATE` 1 s).
//! * `O` overload jobs fire every second inside one window of `W` seconds
//!   only (a cron expression of those seconds of one minute, in UTC;
//!   `W = 60`: every second of one minute).
//! * Then `A` seconds more with the base jobs alone.
//!
//! Every fire the schedules put in the run is counted (lost, run twice,
//! how late its handler started), per scheduled second too. Sampled every
//! 500 ms: the node's resident memory (`/proc/<pid>/status` `VmRSS`), its
//! wheel and its ring in Redis (the backlog the bounded loads leave there).
//! **Recovered after**: from the end of the window to the first scheduled
//! second from which every later second's fires all started within
//! [`ON_TIME_MS`] of their instant.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{DateTime, Timelike as _, Utc};
use rondo_core::{Config, clock};
use serde::Serialize;

use crate::cluster::fires::{self, Created, FireCount};
use crate::cluster::latency::Latency;
use crate::cluster::recorder::Run;
use crate::cluster::{Binaries, Cluster, Spec, create_jobs, job_spec, sleep_until_ms};
use crate::machine::Machine;
use crate::options::{ExecutorKind, Options};
use crate::output::Report;
use crate::sandbox::with_sandbox;
use crate::throughput::executor_queues;

const PERIOD_MS: i64 = 1_000;
/// A scheduled second is on time when all its fires started within this.
pub const ON_TIME_MS: i64 = 1_000;
/// The goal of the issue: back on time this long after the load drops.
pub const TARGET_RECOVERY_S: f64 = 30.0;
/// Base-only seconds counted before the window.
const BEFORE_S: i64 = 10;

#[derive(Debug, Clone)]
pub struct Params {
    pub base_jobs: usize,
    pub overload_jobs: usize,
    pub window_s: i64,
    pub after_s: i64,
    pub routing: String,
    pub concurrency: usize,
    pub executor_prefetch: Option<u16>,
    /// The node's `scheduler.max_fires_loaded` and `max_fires_in_flight`
    /// (the config's when `None`).
    pub max_fires_loaded: Option<usize>,
    pub max_fires_in_flight: Option<usize>,
    pub smoke: bool,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        Params {
            base_jobs: options.overload_base(),
            overload_jobs: options.overload_jobs(),
            window_s: options.overload_window().clamp(1, 60),
            after_s: options.overload_after(),
            routing: options.routing.clone(),
            concurrency: options.concurrency.max(1),
            executor_prefetch: options.executor_prefetch(),
            max_fires_loaded: options.max_fires_loaded.or(options.smoke.then_some(200)),
            max_fires_in_flight: options.smoke.then_some(16),
            smoke: options.smoke,
        }
    }
}

/// One scheduled second.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    pub at_ms: i64,
    pub fires: u64,
    pub lateness_p99_ms: i64,
    pub lateness_max_ms: i64,
}

/// One sample of the node.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub at_ms: i64,
    pub rss_mb: f64,
    pub wheel: u64,
    pub ring: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OverloadReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub namespace: String,
    pub base_jobs: usize,
    pub overload_jobs: usize,
    pub window_s: i64,
    pub after_s: i64,
    /// Offered during the window: base + overload fires a second.
    pub offered_per_s: f64,
    pub max_fires_loaded: usize,
    pub max_fires_in_flight: usize,
    /// The window: `[window_from_ms, window_to_ms)`.
    pub window_from_ms: i64,
    pub window_to_ms: i64,
    /// Fires whose handler started during the window, per second.
    pub executed_per_s_in_window: f64,
    /// Fires whose handler started after the window until the backlog was
    /// gone (the last start of a fire scheduled before the recovery), per
    /// second.
    pub executed_per_s_draining: f64,
    /// Every fire of the run: base fires from 10 s before the window to the
    /// end of the observation, overload fires of the window.
    pub fires: FireCount,
    pub lost: u64,
    pub duplicates: u64,
    /// Window end → the first scheduled second from which every later one
    /// is on time; `None`: not on time again by the end of the observation.
    pub recovered_after_s: Option<f64>,
    /// Offered ÷ handlers started per second in the window: how many times
    /// what the node serves it was offered.
    pub overload_factor: f64,
    /// The draining rate (fires a second) a node firing in order needs to
    /// be on time within the goal after the window: the base load plus the
    /// window's backlog (offered − handlers started per second in it, times
    /// its length) ÷ the goal. Compare with `executed_per_s_draining`.
    pub drain_needed_per_s: f64,
    pub rss_mb_before: f64,
    pub rss_mb_max: f64,
    pub rss_mb_end: f64,
    pub wheel_max: u64,
    pub ring_max: u64,
    pub seconds: Vec<Second>,
    pub samples: Vec<Sample>,
    pub binaries: Option<Binaries>,
    pub machine: Machine,
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<OverloadReport> {
    let started_at = Utc::now();
    let mut config = config.clone();
    if let Some(prefetch) = params.executor_prefetch {
        config.executor.prefetch = prefetch;
    }
    if let Some(n) = params.max_fires_loaded {
        config.scheduler.max_fires_loaded = n;
    }
    if let Some(n) = params.max_fires_in_flight {
        config.scheduler.max_fires_in_flight = n;
    }
    let limits = (
        config.scheduler.max_fires_loaded,
        config.scheduler.max_fires_in_flight,
    );
    let mut report = with_sandbox(&config, "bench_overload", |sandbox| async move {
        let queues = executor_queues(&sandbox.config, 1);
        let result = async {
            let machine = Machine::describe(&sandbox.pool).await;
            let spec = Spec {
                nodes: 1,
                executors: 1,
                node_log: "info",
                persist_worker: false,
                executor: ExecutorKind::Bench,
                legacy_gateway: None,
            };
            let mut cluster = Cluster::start(&sandbox.config, &spec).await?;
            let binaries = cluster.binaries.clone();
            let head = Head {
                started_at,
                namespace: sandbox.config.namespace.clone(),
                limits,
                machine,
            };
            let measured = measure(&mut cluster, params, head).await;
            cluster.stop(measured.is_err()).await;
            let mut report = measured?;
            report.binaries = Some(binaries);
            Ok(report)
        }
        .await;
        (sandbox, queues, result)
    })
    .await?;
    report.started_at = started_at;
    Ok(report)
}

/// What the report says about the run that `measure` does not measure.
struct Head {
    started_at: DateTime<Utc>,
    namespace: String,
    /// `max_fires_loaded`, `max_fires_in_flight`.
    limits: (usize, usize),
    machine: Machine,
}

/// The next instant at least `lead_ms` away whose second of the minute
/// leaves room for `window_s` seconds in the same minute.
fn window_start(now_ms: i64, lead_ms: i64, window_s: i64) -> i64 {
    let mut at = (now_ms + lead_ms).div_euclid(1000) * 1000 + 1000;
    while at.div_euclid(1000).rem_euclid(60) > 60 - window_s {
        at += 1000;
    }
    at
}

/// The cron expression of the `window_s` seconds from `from_ms` (UTC).
fn window_cron(from_ms: i64, window_s: i64) -> String {
    let at = DateTime::<Utc>::from_timestamp_millis(from_ms).expect("a valid instant");
    let first = at.second() as i64;
    let seconds = if window_s >= 60 {
        "*".to_owned()
    } else {
        format!("{first}-{}", first + window_s - 1)
    };
    format!(
        "{seconds} {} {} {} {} ?",
        at.minute(),
        at.hour(),
        at.format("%-d"),
        at.format("%-m")
    )
}

/// Resident memory of a process, MB.
fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

async fn measure(
    cluster: &mut Cluster,
    params: &Params,
    head: Head,
) -> anyhow::Result<OverloadReport> {
    let node = cluster.nodes[0].as_ref().context("the node")?;
    let (pid, node_id) = (node.proc.pid, node.id.clone());
    let api = cluster.api();

    // The node, every 500 ms until told to stop.
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn({
        let (samples, stop, api) = (samples.clone(), stop.clone(), api.clone());
        async move {
            while !stop.is_cancelled() {
                let status = api.cluster().await;
                let wheel = status.as_ref().and_then(|s| s["wheel_len"].as_u64());
                let ring = status
                    .as_ref()
                    .and_then(|s| s["ring_sizes"][node_id.as_str()].as_u64());
                if let Some(rss_mb) = rss_mb(pid) {
                    samples.lock().expect("samples lock").push(Sample {
                        at_ms: clock::now_ms(),
                        rss_mb,
                        wheel: wheel.unwrap_or(0),
                        ring: ring.unwrap_or(0),
                    });
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        }
    });

    let base_spec = job_spec("FIX_RATE", "1", &params.routing);
    let base = create_jobs(
        &cluster.apis(),
        params.base_jobs,
        params.concurrency,
        Some(Duration::from_secs(1)),
        None,
        |_| base_spec.clone(),
    )
    .await?;
    // Room to create the overload jobs (about 3,000 a second here) before
    // the leader claims the window (its claim runs this far ahead), and to
    // see the base jobs on time before the window.
    let ahead_ms = cluster.config.claim_ahead_ms();
    let lead_ms =
        (params.overload_jobs as i64 / 2).max(3_000) + (BEFORE_S * 1000).max(ahead_ms + 1000);
    let from = window_start(clock::now_ms(), lead_ms, params.window_s);
    let to = from + params.window_s * 1000;
    let cron = window_cron(from, params.window_s);
    tracing::info!(%cron, jobs = params.overload_jobs, "overload: the window's jobs");
    let overload_spec = job_spec("CRON", &cron, &params.routing);
    let overload = create_jobs(
        &cluster.apis(),
        params.overload_jobs,
        params.concurrency,
        None,
        None,
        |_| overload_spec.clone(),
    )
    .await?;
    anyhow::ensure!(
        clock::now_ms() < from - ahead_ms,
        "creating the overload jobs took past the window's claim"
    );
    let overload: Vec<Created> = overload
        .jobs
        .iter()
        .map(|c| Created {
            id: c.id,
            first_fire_ms: from,
        })
        .collect();

    let observe_from = from - BEFORE_S * 1000;
    let observe_to = to + params.after_s * 1000;
    sleep_until_ms(observe_to).await;
    // The backlog drains: wait until every fire ran, or nothing new ran
    // for 10 s.
    let expected = fires::expected_between(&base.jobs, PERIOD_MS, observe_from, observe_to)
        + fires::expected_between(&overload, PERIOD_MS, from, to);
    let mut seen = 0;
    let mut progress = Instant::now();
    loop {
        let n = cluster.recorder.count_between(observe_from, observe_to);
        if n as u64 >= expected || progress.elapsed() > Duration::from_secs(10) {
            break;
        }
        if n > seen {
            seen = n;
            progress = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.cancel();
    let _ = sampler.await;
    let samples = std::mem::take(&mut *samples.lock().expect("samples lock"));

    let runs = cluster.recorder.runs_between(observe_from, observe_to);
    let base_ids: HashSet<u64> = base.jobs.iter().map(|c| c.id).collect();
    let (base_runs, overload_runs): (Vec<Run>, Vec<Run>) = runs
        .iter()
        .cloned()
        .partition(|r| base_ids.contains(&r.job_id));
    let b = fires::count(&base_runs, &base.jobs, PERIOD_MS, observe_from, observe_to);
    let o = fires::count(&overload_runs, &overload, PERIOD_MS, from, to);
    let fires = merge(b, o);

    let seconds = per_second(&runs);
    let recovered_after_s = recovered_at(&seconds, to).map(|at| (at - to) as f64 / 1000.0);
    let started_in = |a: i64, b: i64| runs.iter().filter(|r| (a..b).contains(&r.start_ms)).count();
    // Draining: from the end of the window until the backlog is gone (the
    // recovery), or the last start.
    let drained_at = recovered_at(&seconds, to).map_or_else(
        || runs.iter().map(|r| r.start_ms).max().unwrap_or(to),
        |at| {
            runs.iter()
                .filter(|r| r.fire_ms < at)
                .map(|r| r.start_ms)
                .max()
                .unwrap_or(to)
        },
    );
    let draining_s = ((drained_at - to) as f64 / 1000.0).max(1e-9);
    let rss_at = |at: i64| {
        samples
            .iter()
            .rev()
            .find(|s| s.at_ms <= at)
            .map_or(0.0, |s| s.rss_mb)
    };
    let offered_per_s = (params.base_jobs + params.overload_jobs) as f64;
    let executed_per_s_in_window = started_in(from, to) as f64 / params.window_s as f64;
    let executed_per_s_draining = started_in(to, drained_at + 1) as f64 / draining_s;
    Ok(OverloadReport {
        scenario: "overload",
        started_at: head.started_at,
        smoke: params.smoke,
        namespace: head.namespace,
        base_jobs: params.base_jobs,
        overload_jobs: params.overload_jobs,
        window_s: params.window_s,
        after_s: params.after_s,
        offered_per_s,
        max_fires_loaded: head.limits.0,
        max_fires_in_flight: head.limits.1,
        window_from_ms: from,
        window_to_ms: to,
        executed_per_s_in_window,
        executed_per_s_draining,
        lost: fires.lost,
        duplicates: fires.duplicates.max(fires.duplicate_trigger_ids),
        fires,
        recovered_after_s,
        overload_factor: offered_per_s / executed_per_s_in_window.max(1e-9),
        drain_needed_per_s: drain_needed_per_s(
            offered_per_s,
            executed_per_s_in_window,
            params.base_jobs as f64,
            params.window_s as f64,
            TARGET_RECOVERY_S,
        ),
        rss_mb_before: rss_at(from),
        rss_mb_max: samples.iter().map(|s| s.rss_mb).fold(0.0, f64::max),
        rss_mb_end: samples.last().map_or(0.0, |s| s.rss_mb),
        wheel_max: samples.iter().map(|s| s.wheel).max().unwrap_or(0),
        ring_max: samples.iter().map(|s| s.ring).max().unwrap_or(0),
        seconds,
        samples,
        binaries: None,
        machine: head.machine,
    })
}

/// The two counts as one.
fn merge(a: FireCount, b: FireCount) -> FireCount {
    let mut sample = a.lost_sample;
    sample.extend(b.lost_sample);
    sample.truncate(20);
    FireCount {
        expected: a.expected + b.expected,
        executed: a.executed + b.executed,
        lost: a.lost + b.lost,
        lost_sample: sample,
        duplicates: a.duplicates + b.duplicates,
        duplicate_trigger_ids: a.duplicate_trigger_ids + b.duplicate_trigger_ids,
        unexpected: a.unexpected + b.unexpected,
        // Not a merge of two summaries: the worse of the two.
        handler_lateness_ms: if a.handler_lateness_ms.max >= b.handler_lateness_ms.max {
            a.handler_lateness_ms
        } else {
            b.handler_lateness_ms
        },
        late_over_1s: a.late_over_1s + b.late_over_1s,
    }
}

/// Per scheduled second: its fires and how late they started (first run
/// of each).
fn per_second(runs: &[Run]) -> Vec<Second> {
    let mut first: BTreeMap<(u64, i64), i64> = BTreeMap::new();
    for r in runs {
        let late = first.entry((r.job_id, r.fire_ms)).or_insert(i64::MAX);
        *late = (*late).min(r.start_ms - r.fire_ms);
    }
    let mut by_second: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for ((_, fire), late) in first {
        by_second
            .entry(fire.div_euclid(PERIOD_MS) * PERIOD_MS)
            .or_default()
            .push(late);
    }
    by_second
        .into_iter()
        .map(|(at_ms, late)| {
            let l = Latency::of(&late);
            Second {
                at_ms,
                fires: l.count,
                lateness_p99_ms: l.p99,
                lateness_max_ms: l.max,
            }
        })
        .collect()
}

/// The first scheduled second at or after `from_ms` from which every later
/// second is on time.
fn recovered_at(seconds: &[Second], from_ms: i64) -> Option<i64> {
    let after: Vec<&Second> = seconds.iter().filter(|s| s.at_ms >= from_ms).collect();
    let late_last = after.iter().rposition(|s| s.lateness_max_ms > ON_TIME_MS);
    match late_last {
        None => after.first().map(|s| s.at_ms),
        Some(i) => after.get(i + 1).map(|s| s.at_ms),
    }
}

/// The rate (fires a second) at which a node that fires in order must
/// drain after a window of `window_s` at `offered` fires a second, of
/// which it started `served` a second, to be on time `goal_s` after it
/// while `base` fires a second keep arriving: the base plus the backlog the
/// window left ÷ the goal.
///
/// It says what the recovery goal asks: offered twice what the node serves
/// for 60 s, the backlog is 60 s of its work, and a 30 s goal needs it to
/// drain at twice the rate it served (plus the base load).
fn drain_needed_per_s(offered: f64, served: f64, base: f64, window_s: f64, goal_s: f64) -> f64 {
    base + (offered - served).max(0.0) * window_s / goal_s
}

impl Report for OverloadReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        let smoke = if self.smoke {
            " (smoke sizes: the figures mean nothing)"
        } else {
            ""
        };
        let recovered = self.recovered_after_s.map_or_else(
            || format!("not within the {} s observed", self.after_s),
            |s| format!("{s:.0} s"),
        );
        let goal = match self.recovered_after_s {
            Some(s) if s <= TARGET_RECOVERY_S => "met",
            _ => "NOT met",
        };
        format!(
            "## overload, {started}{smoke}\n\n\
             One node; {base} jobs every second throughout, {over} more every second for {window} s \
             (offered {offered:.0} fires/s), then {after} s with the base jobs alone. \
             `scheduler.max_fires_loaded` {loaded}, `max_fires_in_flight` {in_flight}; recording executors, \
             no persistence worker. {build} build; {cores} cores, {cpu_model}.\n\n\
             | measure | value |\n| --- | ---: |\n\
             | fires expected / run | {expected} / {executed} |\n\
             | **lost / run twice** | **{lost} / {dup}** |\n\
             | handlers started per second, in the window | {in_window:.0} |\n\
             | handlers started per second, draining after it | {draining:.0} |\n\
             | latest start after its instant | {late_max} ms |\n\
             | offered ÷ handlers started per second in the window | {factor:.2} |\n\
             | **back on time after the window** (goal ≤ {target:.0} s: {goal}) | **{recovered}** |\n\
             | draining rate the goal needs (base + backlog ÷ {target:.0} s) | {needed:.0} |\n\
             | node memory (RSS) before / max / end | {rss0:.0} / {rss_max:.0} / {rss_end:.0} MB |\n\
             | most fires on the wheel / in the ring (Redis) | {wheel} / {ring} |\n",
            started = self.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
            base = self.base_jobs,
            over = self.overload_jobs,
            window = self.window_s,
            offered = self.offered_per_s,
            after = self.after_s,
            loaded = self.max_fires_loaded,
            in_flight = self.max_fires_in_flight,
            build = self.machine.build,
            cores = self.machine.cores,
            cpu_model = self.machine.cpu_model,
            expected = self.fires.expected,
            executed = self.fires.executed,
            lost = self.lost,
            dup = self.duplicates,
            in_window = self.executed_per_s_in_window,
            draining = self.executed_per_s_draining,
            late_max = self.fires.handler_lateness_ms.max,
            target = TARGET_RECOVERY_S,
            factor = self.overload_factor,
            needed = self.drain_needed_per_s,
            rss0 = self.rss_mb_before,
            rss_max = self.rss_mb_max,
            rss_end = self.rss_mb_end,
            wheel = self.wheel_max,
            ring = self.ring_max,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_the_goal_needs_is_the_base_plus_the_backlog_over_the_goal() {
        // The sixth session's AMD run: 21 k offered, 8.29 k started a
        // second, 1 k of base load: 762 k left, 26.4 k a second to be gone
        // in 30 s (it drained at 9.76 k, and took 86 s).
        let needed = drain_needed_per_s(21_000.0, 8_292.0, 1_000.0, 60.0, 30.0);
        assert!((needed - 26_416.0).abs() < 1.0, "{needed}");
        // Twice what the node serves for a minute: twice its rate.
        assert_eq!(
            drain_needed_per_s(20_000.0, 10_000.0, 0.0, 60.0, 30.0),
            20_000.0
        );
        // Served all it was offered: only the base load.
        assert_eq!(
            drain_needed_per_s(5_000.0, 5_000.0, 1_000.0, 60.0, 30.0),
            1_000.0
        );
    }

    #[test]
    fn a_window_fits_in_one_minute_and_its_cron_names_its_seconds() {
        // 2026-11-26T02:10:50Z
        let now = 1_795_659_050_000;
        let from = window_start(now, 5_000, 10);
        assert_eq!(from % 60_000, 0, "55 s + 10 s would cross the minute");
        assert_eq!(window_cron(from, 10), "0-9 11 2 26 11 ?");
        assert_eq!(window_cron(from, 60), "* 11 2 26 11 ?");
        let early = window_start(now - 40_000, 5_000, 10);
        assert_eq!((early / 1000) % 60, 16);
    }

    #[test]
    fn recovery_is_the_first_second_after_which_all_are_on_time() {
        let s = |at_ms, max| Second {
            at_ms,
            fires: 1,
            lateness_p99_ms: max,
            lateness_max_ms: max,
        };
        let seconds = vec![
            s(0, 5_000),
            s(1_000, 9_000),
            s(2_000, 10),
            s(3_000, 2_000),
            s(4_000, 10),
            s(5_000, 20),
        ];
        assert_eq!(recovered_at(&seconds, 1_000), Some(4_000));
        assert_eq!(recovered_at(&seconds, 4_000), Some(4_000));
        assert_eq!(recovered_at(&[s(0, 10), s(1_000, 5_000)], 0), None);
    }
}
