//! Scenario "scale": a million jobs in one namespace, one scheduler node.
//!
//! 1. **Creation.** N jobs not due for hours (half `CRON` once a day at an
//!    hour twelve hours away, half `FIX_RATE` 6 h) through the admin API,
//!    with many requests in flight, for at most `--scale-api-seconds`. What
//!    the API has not created by then is written by the **direct path**:
//!    `rondo_scheduler::store::Store::save_job`, the function the API calls
//!    (the same keys: the definition in `{pK}:defs`, the job index, the
//!    group's set, the due set), without HTTP, validation round trips or the
//!    job event. The two rates are reported apart.
//! 2. **Redis memory.** `INFO memory` `used_memory` before and after the N
//!    jobs, ÷ N, minus the average stored definition (`HSTRLEN` of a sample
//!    of the definitions): the bytes rondo spends per job beyond the
//!    definition. The Redis server is shared with whatever else runs on the
//!    machine, so the same figure is also computed from `MEMORY USAGE` of
//!    the namespace's own keys (definition hashes and sets, sampled).
//! 3. **Claim tick.** D more jobs due at one instant T a few seconds ahead
//!    (a daily `CRON` at T's second; not a one-shot expression with a
//!    year: finding that such a job never fires again costs the claim
//!    about 85 µs a job here, which would dominate the tick), the nodes'
//!    stats reset,
//!    then the leader's tick that claims them: `claim.tick_ms` and
//!    `claim.last_tick` from `GET /api/v1/cluster`. Their fires are
//!    recorded too (lost, duplicates, lateness of a burst of D).
//! 4. The namespace's keys are removed with SCAN + UNLINK batches (timed).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{DateTime, Timelike as _, Utc};
use futures_util::{StreamExt as _, TryStreamExt as _};
use rondo_core::{Config, JobSpec, clock};
use rondo_scheduler::store::Store;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::fires::{self, Created, FireCount};
use crate::cluster::latency::Latency;
use crate::cluster::{Binaries, Cluster, Creation, Spec, create_jobs, eventually, job_spec};
use crate::machine::Machine;
use crate::options::Options;
use crate::output::Report;
use crate::sandbox::{Sandbox, with_sandbox};
use crate::throughput::executor_queues;

/// The goal of the issue: Redis bytes per job beyond its definition.
pub const TARGET_BYTES_PER_JOB: f64 = 300.0;
/// The goal of the issue: the claim tick with the due jobs.
pub const TARGET_TICK_MS: i64 = 50;
/// Definitions sampled for their size.
const SAMPLE: usize = 1_000;
/// Writes in flight on the direct path.
const DIRECT_CONCURRENCY: usize = 64;

#[derive(Debug, Clone)]
pub struct Params {
    pub jobs: usize,
    pub due: usize,
    pub api_budget: Duration,
    /// At most this many jobs through the API (the rest direct); the smoke
    /// run sends half each way so both paths run.
    pub api_max: usize,
    pub concurrency: usize,
    pub routing: String,
    pub executor_prefetch: Option<u16>,
    pub smoke: bool,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        let jobs = options.scale_jobs();
        Params {
            jobs,
            due: options.scale_due(),
            api_budget: Duration::from_secs(options.scale_api_seconds()),
            api_max: if options.smoke { jobs / 2 } else { jobs },
            concurrency: options.concurrency.max(1),
            routing: options.routing.clone(),
            executor_prefetch: options.executor_prefetch(),
            smoke: options.smoke,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub namespace: String,
    /// Jobs not due soon, plus the due ones below.
    pub jobs: usize,
    pub due_jobs: usize,
    pub partitions: u32,
    pub concurrency: usize,
    /// The recording executor's `executor.prefetch`.
    pub executor_prefetch: u16,
    /// Creation through the admin API.
    pub api_created: usize,
    pub api_seconds: f64,
    pub api_jobs_per_s: f64,
    pub api_retries: u64,
    /// The API's time budget; when it ran out before `jobs`,
    /// `api_estimated_seconds_for_all` extrapolates.
    pub api_budget_s: f64,
    pub api_estimated_seconds_for_all: f64,
    /// Created by `Store::save_job` directly (no HTTP, no job event): the
    /// rest of `jobs` once the API's budget (or share) was spent.
    pub direct_created: usize,
    pub direct_seconds: f64,
    pub direct_jobs_per_s: f64,
    /// `used_memory` after − before the `jobs` jobs, ÷ jobs.
    pub redis_bytes_per_job: f64,
    /// Average stored definition (`def` JSON) length.
    pub definition_bytes: f64,
    /// redis_bytes_per_job − definition_bytes (goal ≤ 300).
    pub redis_bytes_per_job_beyond_definition: f64,
    /// The same from `MEMORY USAGE` of the namespace's keys (immune to
    /// other users of the server): sampled hashes and sets ÷ jobs.
    pub redis_key_bytes_per_job: f64,
    pub redis_key_bytes_per_job_beyond_definition: f64,
    pub redis_used_memory_before: u64,
    pub redis_used_memory_after: u64,
    /// The leader's claim ticks from the reset to after T (max: the tick
    /// that claimed the due jobs). Goal: ≤ 50 ms.
    pub claim_tick_ms: Latency,
    /// The tick that claimed the most jobs: `{jobs,fires,misfires,skipped}`.
    pub claim_tick: Value,
    /// Whether every due job existed before the tick that claims T (else
    /// they were claimed over several ticks).
    pub due_claimed_in_one_tick: bool,
    /// The burst of `due_jobs` fires at T.
    pub fires_per_s: f64,
    pub lost: u64,
    pub duplicates: u64,
    /// Handler start − T of the burst.
    pub lateness_ms: Latency,
    pub due_fires: FireCount,
    /// SCAN + UNLINK of the namespace.
    pub unlinked_keys: usize,
    pub unlink_seconds: f64,
    pub binaries: Binaries,
    pub machine: Machine,
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<ScaleReport> {
    let mut config = config.clone();
    if let Some(prefetch) = params.executor_prefetch {
        config.executor.prefetch = prefetch;
    }
    with_sandbox(&config, "bench_scale", |sandbox| async move {
        let queues = executor_queues(&sandbox.config, 1);
        let result = run_in(&sandbox, params).await;
        (sandbox, queues, result)
    })
    .await
}

async fn run_in(sandbox: &Sandbox, params: &Params) -> anyhow::Result<ScaleReport> {
    let started_at = Utc::now();
    let config = &sandbox.config;
    let machine = Machine::describe(&sandbox.pool).await;
    let spec = Spec {
        nodes: 1,
        executors: 1,
        // One "job created" line per job would be a million lines.
        node_log: "warn",
        persist_worker: true,
        executor: crate::options::ExecutorKind::Bench,
        legacy_gateway: None,
    };
    let cluster = Cluster::start(config, &spec).await?;
    let measured = measure(sandbox, &cluster, params, started_at, machine).await;
    cluster.stop(measured.is_err()).await;
    let mut report = measured?;
    tracing::info!("scale: removing the namespace's keys");
    let unlink = Instant::now();
    report.unlinked_keys = rondo_core::testkit::cleanup_redis(config).await;
    report.unlink_seconds = unlink.elapsed().as_secs_f64();
    Ok(report)
}

async fn measure(
    sandbox: &Sandbox,
    cluster: &Cluster,
    params: &Params,
    started_at: DateTime<Utc>,
    machine: Machine,
) -> anyhow::Result<ScaleReport> {
    let config = &sandbox.config;
    let client = redis::Client::open(config.redis.url.as_str())?;
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .context("redis")?;
    let memory_before = used_memory(&mut redis).await?;

    // 1. Creation: the API first, within its budget and share.
    let hour = (Utc::now().hour() + 12) % 24;
    let daily = job_spec("CRON", &format!("0 0 {hour} * * ?"), &params.routing);
    let six_hours = job_spec("FIX_RATE", "21600", &params.routing);
    let spec = |i: usize| {
        if i.is_multiple_of(2) {
            daily.clone()
        } else {
            six_hours.clone()
        }
    };
    let apis = cluster.apis();
    let api_n = params.jobs.min(params.api_max);
    tracing::info!(
        jobs = api_n,
        budget_s = params.api_budget.as_secs(),
        "scale: creating through the API"
    );
    let api = create_jobs(
        &apis,
        api_n,
        params.concurrency,
        None,
        Some(Instant::now() + params.api_budget),
        spec,
    )
    .await?;
    tracing::info!(
        created = api.jobs.len(),
        per_s = api.per_s(),
        "scale: API creation done"
    );
    let rest = params.jobs - api.jobs.len();
    tracing::info!(jobs = rest, "scale: creating the rest directly");
    let direct = create_direct(config, rest, |i| spec(api.jobs.len() + i)).await?;
    tracing::info!(
        created = direct.jobs.len(),
        per_s = direct.per_s(),
        "scale: direct creation done"
    );
    let memory_after = used_memory(&mut redis).await?;
    let ids: Vec<u64> = api.jobs.iter().chain(&direct.jobs).map(|j| j.id).collect();
    let definition_bytes = average_definition(&mut redis, config, &ids).await?;
    let key_bytes = key_bytes_per_job(&mut redis, config, &ids).await?;
    let n = params.jobs.max(1) as f64;
    let redis_bytes_per_job = memory_after.saturating_sub(memory_before) as f64 / n;

    // 3. The due jobs, at one instant T far enough ahead for them all to
    // exist before the tick that claims T (at T − pre-read).
    let preread = config.claim_ahead_ms();
    let rate = if api.jobs.is_empty() {
        500.0
    } else {
        api.per_s()
    };
    let create_ms = (params.due as f64 / rate.max(1.0) * 1500.0) as i64;
    let due_at = (clock::now_ms() + create_ms + preread + 2_000).div_euclid(1000) * 1000 + 1000;
    let at = DateTime::from_timestamp_millis(due_at).context("T")?;
    let once = format!("{} {} {} * * ?", at.second(), at.minute(), at.hour());
    tracing::info!(due = params.due, cron = %once, "scale: creating the due jobs");
    let due_spec = job_spec("CRON", &once, &params.routing);
    let due = create_jobs(&apis, params.due, params.concurrency, None, None, |_| {
        due_spec.clone()
    })
    .await?;
    let claim_at = due_at - preread;
    let due_claimed_in_one_tick = clock::now_ms() < claim_at - 200;
    if let Some(job) = due.jobs.iter().find(|j| j.first_fire_ms != due_at) {
        anyhow::bail!(
            "a due job's first fire is {} instead of T = {due_at}",
            job.first_fire_ms
        );
    }
    cluster.reset_stats().await;

    // Watch the claims until after T.
    let node = cluster.api();
    let mut biggest = Value::Null;
    let mut tick_ms = Latency::default();
    while clock::now_ms() < due_at + 1_000 {
        if let Some(status) = node.cluster().await {
            let tick = &status["claim"]["last_tick"];
            if tick["jobs"].as_u64() > biggest["jobs"].as_u64() || biggest.is_null() {
                biggest = tick.clone();
            }
            tick_ms = Latency::from_json(&status["claim"]["tick_ms"]).unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The burst's fires.
    let window = (due_at, due_at + 1);
    let wanted = params.due;
    let recorder = cluster.recorder.clone();
    let _ = eventually("the due jobs' fires", Duration::from_secs(60), || {
        let ran = recorder.count_between(window.0, window.1);
        std::future::ready((ran >= wanted).then_some(()))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let runs = recorder.runs_between(window.0, window.1);
    let count = fires::count(&runs, &due.jobs, 86_400_000, window.0, window.1);
    let burst_s = runs
        .iter()
        .map(|r| r.start_ms)
        .max()
        .map_or(1.0, |last| (last - due_at).max(1) as f64 / 1000.0);

    let api_estimated_seconds_for_all = params.jobs as f64 / api.per_s().max(1e-9);
    Ok(ScaleReport {
        scenario: "scale",
        started_at,
        smoke: params.smoke,
        namespace: config.namespace.clone(),
        jobs: params.jobs,
        due_jobs: params.due,
        partitions: config.partitions,
        concurrency: params.concurrency,
        executor_prefetch: config.executor.prefetch,
        api_created: api.jobs.len(),
        api_seconds: api.elapsed.as_secs_f64(),
        api_jobs_per_s: api.per_s(),
        api_retries: api.retries,
        api_budget_s: params.api_budget.as_secs_f64(),
        api_estimated_seconds_for_all,
        direct_created: direct.jobs.len(),
        direct_seconds: direct.elapsed.as_secs_f64(),
        direct_jobs_per_s: if direct.jobs.is_empty() {
            0.0
        } else {
            direct.per_s()
        },
        redis_bytes_per_job,
        definition_bytes,
        redis_bytes_per_job_beyond_definition: redis_bytes_per_job - definition_bytes,
        redis_key_bytes_per_job: key_bytes,
        redis_key_bytes_per_job_beyond_definition: key_bytes - definition_bytes,
        redis_used_memory_before: memory_before,
        redis_used_memory_after: memory_after,
        claim_tick_ms: tick_ms,
        claim_tick: biggest,
        due_claimed_in_one_tick,
        fires_per_s: count.executed as f64 / burst_s,
        lost: count.lost,
        duplicates: count.duplicates.max(count.duplicate_trigger_ids),
        lateness_ms: count.handler_lateness_ms,
        due_fires: count,
        unlinked_keys: 0,
        unlink_seconds: 0.0,
        binaries: cluster.binaries.clone(),
        machine,
    })
}

/// Writes `n` jobs (`spec(i)`) with the store's `save_job`, as the API
/// does after its checks: a new id, the definition, the first fire.
async fn create_direct(
    config: &Config,
    n: usize,
    spec: impl Fn(usize) -> Value,
) -> anyhow::Result<Creation> {
    let pool = rondo_core::redis::pool(&config.redis)?;
    let store = Store::new(pool, config.names());
    let started = Instant::now();
    let store = &store;
    let jobs: Vec<Created> = futures_util::stream::iter(0..n)
        .map(|i| {
            let spec: anyhow::Result<JobSpec> = serde_json::from_value(spec(i)).map_err(Into::into);
            async move {
                let id = store.api().next_job_id().await?;
                let now = clock::now_ms();
                let job = spec?.validate(id, now, None)?;
                let next = job.schedule()?.next_after(now);
                store.api().save_job(&job, next, None).await?;
                Ok::<_, anyhow::Error>(Created {
                    id,
                    first_fire_ms: next.unwrap_or(0),
                })
            }
        })
        .buffer_unordered(DIRECT_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(Creation {
        jobs,
        elapsed: started.elapsed(),
        retries: 0,
    })
}

async fn used_memory(redis: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<u64> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(redis)
        .await
        .context("INFO memory")?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no used_memory in INFO memory")
}

/// Ids spread evenly over `ids`, at most [`SAMPLE`].
fn sample(ids: &[u64]) -> Vec<u64> {
    let step = (ids.len() / SAMPLE).max(1);
    ids.iter().step_by(step).copied().take(SAMPLE).collect()
}

/// The average length of the stored definitions of a sample of `ids` (0
/// without ids): `HSTRLEN` of each one's field in its partition's hash.
async fn average_definition(
    redis: &mut redis::aio::MultiplexedConnection,
    config: &Config,
    ids: &[u64],
) -> anyhow::Result<f64> {
    let names = config.names();
    let sample = sample(ids);
    if sample.is_empty() {
        return Ok(0.0);
    }
    let mut pipe = redis::pipe();
    for id in &sample {
        pipe.cmd("HSTRLEN")
            .arg(names.defs(names.partition_of(*id)))
            .arg(*id);
    }
    let answers: Vec<Option<u64>> = pipe
        .query_async(redis)
        .await
        .context("sampling definitions")?;
    Ok(answers.iter().flatten().sum::<u64>() as f64 / sample.len() as f64)
}

/// Members `MEMORY USAGE` samples per shared set.
const SET_SAMPLES: u64 = 1_000;

/// Bytes per job from `MEMORY USAGE`: the partitions' definition hashes,
/// job indexes, the group's sets and the due sets (estimated from
/// [`SET_SAMPLES`] members each: an exact `SAMPLES 0` walks a million
/// members and outlasts the response timeout), divided by the jobs.
async fn key_bytes_per_job(
    redis: &mut redis::aio::MultiplexedConnection,
    config: &Config,
    ids: &[u64],
) -> anyhow::Result<f64> {
    if ids.is_empty() {
        return Ok(0.0);
    }
    let names = config.names();
    let mut shared = Vec::new();
    for p in 0..names.partitions() {
        shared.push(names.defs(p));
        shared.push(names.job_bits(p));
        shared.push(names.group_job_ids(p, crate::cluster::APP));
        shared.push(names.due(p));
    }
    let mut pipe = redis::pipe();
    for key in &shared {
        pipe.cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(SET_SAMPLES);
    }
    let sets: Vec<Option<u64>> = pipe.query_async(redis).await.context("MEMORY USAGE")?;
    Ok(sets.iter().flatten().sum::<u64>() as f64 / ids.len().max(1) as f64)
}

impl Report for ScaleReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        markdown(self)
    }
}

fn markdown(r: &ScaleReport) -> String {
    let k = |rate: f64| format!("{:.1} k", rate / 1000.0);
    let smoke = if r.smoke {
        " (smoke sizes: the figures mean nothing)"
    } else {
        ""
    };
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let api_note = if r.api_created < r.jobs && r.api_seconds >= r.api_budget_s * 0.99 {
        format!(
            " — too slow for all {} within {:.0} s (≈ {:.0} s needed at this rate)",
            r.jobs, r.api_budget_s, r.api_estimated_seconds_for_all
        )
    } else {
        String::new()
    };
    let direct_row = if r.direct_created > 0 {
        format!(
            "| creation, **direct path** (`Store::save_job`, no HTTP, no job event) | {} jobs in {:.1} s = {}/s |\n",
            r.direct_created,
            r.direct_seconds,
            k(r.direct_jobs_per_s)
        )
    } else {
        String::new()
    };
    format!(
        "## scale, {started}{smoke}\n\n\
         {jobs} jobs not due for hours (CRON daily / FIX_RATE 6 h) + {due} due at one instant; \
         1 scheduler node, {partitions} partitions; {conc} API requests in flight. {build} build; \
         {cores} cores, {cpu_model}.\n\n\
         | measurement | value |\n\
         | --- | ---: |\n\
         | creation through the admin API | {api_n} jobs in {api_s:.1} s = {api_rate}/s{api_note} |\n\
         {direct_row}\
         | Redis `used_memory` per job | {bpj:.0} B |\n\
         | average definition (`def` JSON) | {defs:.0} B |\n\
         | **Redis bytes per job beyond the definition** (goal ≤ 300: {mem_verdict}) | **{beyond:.0} B** |\n\
         | the same from `MEMORY USAGE` of the namespace's keys | {kbeyond:.0} B |\n\
         | **claim tick, max** (goal ≤ 50 ms: {tick_verdict}) | **{tmax} ms** |\n\
         | claim ticks since the reset: count / p50 / p99 | {tcount} / {tp50} / {tp99} ms |\n\
         | the tick with the due jobs | `{tick}` (in one tick: {one}) |\n\
         | the burst: lost / duplicates | {lost} / {dup} |\n\
         | the burst: handler lateness p50 / p99 / max | {lp50} / {lp99} / {lmax} ms |\n\
         | removing the namespace (SCAN + UNLINK) | {keys} keys in {unlink:.1} s |\n",
        started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        jobs = r.jobs,
        due = r.due_jobs,
        partitions = r.partitions,
        conc = r.concurrency,
        build = r.machine.build,
        cores = r.machine.cores,
        cpu_model = r.machine.cpu_model,
        api_n = r.api_created,
        api_s = r.api_seconds,
        api_rate = k(r.api_jobs_per_s),
        bpj = r.redis_bytes_per_job,
        defs = r.definition_bytes,
        beyond = r.redis_bytes_per_job_beyond_definition,
        mem_verdict = verdict(r.redis_bytes_per_job_beyond_definition <= TARGET_BYTES_PER_JOB),
        kbeyond = r.redis_key_bytes_per_job_beyond_definition,
        tmax = r.claim_tick_ms.max,
        tick_verdict = verdict(r.claim_tick_ms.max <= TARGET_TICK_MS),
        tcount = r.claim_tick_ms.count,
        tp50 = r.claim_tick_ms.p50,
        tp99 = r.claim_tick_ms.p99,
        tick = r.claim_tick,
        one = r.due_claimed_in_one_tick,
        lost = r.lost,
        dup = r.duplicates,
        lp50 = r.lateness_ms.p50,
        lp99 = r.lateness_ms.p99,
        lmax = r.lateness_ms.max,
        keys = r.unlinked_keys,
        unlink = r.unlink_seconds,
    )
}
