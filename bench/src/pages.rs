//! Scenario `pages`: the console's jobs page and logs page at scale. The
//! issue: *the jobs page and the logs page answer in ≤ 200 ms at 1,000,000
//! jobs and 10,000,000 log rows*.
//!
//! The sandbox's MySQL gets N jobs in the `job` mirror and M rows in
//! `job_log` (server-side `INSERT … SELECT` from MariaDB's sequence engine,
//! in chunks), then one scheduler node starts on the empty namespace and
//! rebuilds Redis from MySQL (its bootstrap, timed), so Redis holds what a
//! cluster of that size holds. Each page request of the console (the same
//! API calls its screens make) is then timed over HTTP, `REPEAT` times after
//! a warm-up, beside the ceiling measured in the same run:
//! `GET /api/v1/auth/me` (a signed-in round trip that reads no data) and
//! `GET /api/v1/jobs/{id}` (one job read).

use std::time::Instant;

use anyhow::Context as _;
use chrono::{DateTime, Timelike as _, Utc};
use rondo_core::Config;
use serde::Serialize;

use crate::cluster::latency::Latency;
use crate::cluster::{Cluster, Spec, eventually};
use crate::machine::Machine;
use crate::options::Options;
use crate::output::Report;
use crate::sandbox::{Sandbox, with_sandbox};
use rondo_testkit::Api;

/// The bound for a page, on the p99 of its requests.
pub const TARGET_MS: i64 = 200;
const GROUPS: u64 = 100;
const CHUNK: u64 = 250_000;
/// A million jobs are rebuilt in a minute or two here.
const REBUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

#[derive(Debug, Clone)]
pub struct Params {
    pub jobs: u64,
    pub logs: u64,
    pub repeat: usize,
    pub smoke: bool,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        let (jobs, logs, repeat) = if options.smoke {
            (2_000, 20_000, 3)
        } else {
            (1_000_000, 10_000_000, 30)
        };
        Params {
            jobs: options.pages_jobs.unwrap_or(jobs).max(10),
            logs: options.pages_logs.unwrap_or(logs).max(10),
            repeat,
            smoke: options.smoke,
        }
    }
}

/// One page request, timed.
#[derive(Debug, Clone, Serialize)]
pub struct PageTiming {
    pub page: &'static str,
    pub request: String,
    /// Microseconds.
    pub us: Latency,
    /// Rows on the page (the request did real work).
    pub rows: usize,
    pub within_target: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct PagesReport {
    pub scenario: &'static str,
    pub smoke: bool,
    pub started_at: DateTime<Utc>,
    pub machine: Machine,
    pub jobs: u64,
    pub log_rows: u64,
    pub fill_jobs_seconds: f64,
    pub fill_logs_seconds: f64,
    /// The node's rebuild of Redis from MySQL (its bootstrap).
    pub rebuild_seconds: f64,
    /// Microseconds.
    pub ceiling_me_us: Latency,
    /// Microseconds.
    pub ceiling_one_job_us: Latency,
    pub target_ms: i64,
    pub timings: Vec<PageTiming>,
    /// Every request the console's pages make met the target (the text
    /// search for a word nothing contains is reported, not counted: it
    /// reads the whole mirror by design, see `history::search`).
    pub target_met: bool,
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<PagesReport> {
    with_sandbox(config, "bench_pages", |sandbox| async move {
        let result = run_in(&sandbox, params).await;
        (sandbox, Vec::new(), result)
    })
    .await
}

async fn run_in(sandbox: &Sandbox, params: &Params) -> anyhow::Result<PagesReport> {
    let started_at = Utc::now();
    let machine = Machine::describe(&sandbox.pool).await;
    let fill = Instant::now();
    fill_jobs(sandbox, params.jobs).await?;
    let fill_jobs_seconds = fill.elapsed().as_secs_f64();
    let fill = Instant::now();
    let newest_ms = fill_logs(sandbox, params.jobs, params.logs).await?;
    let fill_logs_seconds = fill.elapsed().as_secs_f64();

    let spec = Spec {
        nodes: 1,
        executors: 0,
        node_log: "warn",
        persist_worker: false,
        executor: crate::options::ExecutorKind::Bench,
        legacy_gateway: None,
    };
    let rebuild = Instant::now();
    let cluster = Cluster::start(&sandbox.config, &spec).await?;
    let measured = async {
        let api = cluster.api();
        let jobs = params.jobs;
        eventually(
            "the node rebuilds redis from mysql",
            REBUILD_TIMEOUT,
            || {
                let api = api.clone();
                async move {
                    let page = api.try_get("/api/v1/jobs?limit=0").await.ok()?;
                    (page["total"].as_u64() == Some(jobs)).then_some(())
                }
            },
        )
        .await?;
        let rebuild_seconds = rebuild.elapsed().as_secs_f64();
        tracing::info!(rebuild_seconds, "pages: redis rebuilt; timing the pages");
        let ceiling_me_us = time(&api, "/api/v1/auth/me", params.repeat).await?.0;
        let ceiling_one_job_us = time(&api, "/api/v1/jobs/1", params.repeat).await?.0;
        let mut timings = Vec::new();
        let mid = params.jobs / 2;
        let day_ago = newest_ms - 86_400_000;
        let first = api.try_get("/api/v1/logs?limit=50").await?;
        let next = first["next"].as_str().unwrap_or_default().to_owned();
        let requests: Vec<(&'static str, String)> = vec![
            ("jobs", "/api/v1/jobs?sort=-id&limit=20".into()),
            (
                "jobs",
                format!("/api/v1/jobs?limit=20&offset={}", params.jobs - 20),
            ),
            ("jobs", "/api/v1/jobs?group=g42&limit=20".into()),
            ("jobs", "/api/v1/jobs?enabled=false&limit=20".into()),
            (
                "jobs",
                "/api/v1/jobs?schedule_type=FIX_RATE&enabled=true&sort=-updated&limit=20".into(),
            ),
            (
                "jobs",
                "/api/v1/jobs?sort=description&limit=20&offset=1000".into(),
            ),
            ("jobs", "/api/v1/jobs?sort=-updated&limit=20".into()),
            ("jobs", format!("/api/v1/jobs?q={mid}&limit=20")),
            ("jobs", "/api/v1/jobs?q=tenant%2042&limit=20".into()),
            ("jobs", "/api/v1/jobs?q=handler_7&group=g7&limit=20".into()),
            ("logs", "/api/v1/logs?limit=50".into()),
            ("logs", format!("/api/v1/logs?limit=50&before={next}")),
            ("logs", "/api/v1/logs?status=failure&limit=50".into()),
            ("logs", "/api/v1/logs?status=running&limit=50".into()),
            ("logs", "/api/v1/logs?group=g42&limit=50".into()),
            (
                "logs",
                "/api/v1/logs?group=g42&status=failure&limit=50".into(),
            ),
            ("logs", format!("/api/v1/logs?job_id={mid}&limit=50")),
            (
                "logs",
                format!(
                    "/api/v1/logs?from_ms={day_ago}&until_ms={}&limit=50",
                    day_ago + 3_600_000
                ),
            ),
        ];
        for (page, request) in requests {
            let (us, rows) = time(&api, &request, params.repeat).await?;
            timings.push(PageTiming {
                page,
                within_target: us.p99 <= TARGET_MS * 1000,
                request,
                us,
                rows,
            });
        }
        // Reported beside the rest, not counted (see `target_met`).
        let (us, rows) = time(&api, "/api/v1/jobs?q=zzzz&limit=20", params.repeat.min(5)).await?;
        let target_met = timings.iter().all(|t| t.within_target);
        timings.push(PageTiming {
            page: "jobs (a text nothing contains)",
            within_target: us.p99 <= TARGET_MS * 1000,
            request: "/api/v1/jobs?q=zzzz&limit=20".into(),
            us,
            rows,
        });
        Ok::<_, anyhow::Error>(PagesReport {
            scenario: "pages",
            smoke: params.smoke,
            started_at,
            machine,
            jobs: params.jobs,
            log_rows: params.logs,
            fill_jobs_seconds,
            fill_logs_seconds,
            rebuild_seconds,
            ceiling_me_us,
            ceiling_one_job_us,
            target_ms: TARGET_MS,
            timings,
            target_met,
        })
    }
    .await;
    cluster.stop(measured.is_err()).await;
    measured
}

/// `repeat` timed GETs of `path` after two untimed ones; the latency in
/// µs and the rows of the last answer (`items`).
async fn time(api: &Api, path: &str, repeat: usize) -> anyhow::Result<(Latency, usize)> {
    let mut rows = 0;
    for _ in 0..2 {
        api.try_get(path).await?;
    }
    let mut sample = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let answer = api.try_get(path).await?;
        sample.push(t.elapsed().as_micros() as i64);
        rows = answer["items"].as_array().map_or(0, Vec::len);
    }
    Ok((Latency::of(&sample), rows))
}

/// `n` rows `INSERT … SELECT`ed from MariaDB's sequence engine, `CHUNK`
/// at a time: `sql` has `{from}` and `{to}` for the chunk's `seq` range.
async fn fill(sandbox: &Sandbox, n: u64, what: &str, sql: &str) -> anyhow::Result<()> {
    let mut from = 1;
    while from <= n {
        let to = (from + CHUNK - 1).min(n);
        let chunk = sql
            .replace("{from}", &from.to_string())
            .replace("{to}", &to.to_string());
        sqlx::query(sqlx::AssertSqlSafe(chunk))
            .execute(&sandbox.pool)
            .await
            .with_context(|| format!("filling {what} (MariaDB's sequence engine)"))?;
        tracing::info!(what, rows = to, of = n, "pages: filling");
        from = to + 1;
    }
    Ok(())
}

/// The groups and `n` jobs: a hundred groups, daily crons and 6-hour
/// rates not due for hours, a tenth stopped, descriptions and handlers to
/// search.
async fn fill_jobs(sandbox: &Sandbox, n: u64) -> anyhow::Result<()> {
    let now = rondo_core::clock::now_ms();
    fill(
        sandbox,
        GROUPS,
        "groups",
        &format!(
            "INSERT INTO executor_group (app, title, updated_ms) \
             SELECT CONCAT('g', seq - 1), CONCAT('group ', seq - 1), {now} FROM seq_{{from}}_to_{{to}}"
        ),
    )
    .await?;
    let hour = (Utc::now().hour() + 12) % 24;
    fill(
        sandbox,
        n,
        "jobs",
        &format!(
            "INSERT INTO job (id, group_app, description, schedule_type, schedule_conf, handler, \
             enabled, created_ms, updated_ms) \
             SELECT seq, CONCAT('g', seq % {GROUPS}), \
             CONCAT('nightly report ', seq, ' for tenant ', seq % 7919), \
             IF(seq % 3 = 0, 'FIX_RATE', 'CRON'), IF(seq % 3 = 0, '21600', '0 0 {hour} * * ?'), \
             CONCAT('handler_', seq % 500), seq % 10 <> 0, {now}, {now} + seq \
             FROM seq_{{from}}_to_{{to}}"
        ),
    )
    .await
}

/// `n` trigger logs over the last 7 days, newest at now: 94 % succeeded,
/// 5 % failed, 1 % running. Returns the newest `fire_ms`.
async fn fill_logs(sandbox: &Sandbox, jobs: u64, n: u64) -> anyhow::Result<i64> {
    let now = rondo_core::clock::now_ms();
    let span = 7 * 86_400_000_i64;
    let step = (span / n as i64).max(1);
    let start = now - step * n as i64;
    fill(
        sandbox,
        n,
        "logs",
        &format!(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, executor_id, handler, \
             params, trigger_type, trigger_time, trigger_code, trigger_msg, handle_start, \
             handle_time, handle_code, handle_msg) \
             SELECT CONCAT(seq % {jobs} + 1, '-', {start} + seq * {step}, '-0'), {start} + seq * {step}, \
             seq % {jobs} + 1, CONCAT('g', (seq % {jobs} + 1) % {GROUPS}), 'app-host-1', \
             CONCAT('handler_', (seq % {jobs} + 1) % 500), '{{\"n\": 1}}', 'CRON', \
             FROM_UNIXTIME(({start} + seq * {step}) / 1000), 200, 'sent', \
             FROM_UNIXTIME(({start} + seq * {step}) / 1000), \
             IF(seq % 100 = 0, NULL, FROM_UNIXTIME(({start} + seq * {step}) / 1000 + 1)), \
             CASE WHEN seq % 100 = 0 THEN NULL WHEN seq % 20 = 1 THEN 500 ELSE 200 END, \
             IF(seq % 20 = 1, 'handler failed', 'ok') \
             FROM seq_{{from}}_to_{{to}}"
        ),
    )
    .await?;
    Ok(start + step * n as i64)
}

impl Report for PagesReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        let smoke = if self.smoke {
            " (smoke sizes: the figures mean nothing)"
        } else {
            ""
        };
        let ms = |us: i64| format!("{:.1}", us as f64 / 1000.0);
        let mut rows = String::new();
        for t in &self.timings {
            rows.push_str(&format!(
                "| {} | `{}` | {} | {} / {} / {} | {} |\n",
                t.page,
                t.request,
                t.rows,
                ms(t.us.p50),
                ms(t.us.p99),
                ms(t.us.max),
                if t.within_target { "yes" } else { "**no**" }
            ));
        }
        format!(
            "## pages, {started}{smoke}\n\n\
             {jobs} jobs and {logs} log rows in MySQL (filled in {fj:.1} s and {fl:.1} s), Redis \
             rebuilt from them by a node in {rb:.1} s. {build} build; {cores} cores, {cpu}. \
             Each request {repeat}× after 2 warm-ups, over HTTP with a token.\n\n\
             Ceiling, same run: a signed-in round trip (`GET /api/v1/auth/me`) p50/p99 \
             {h50}/{h99} ms; one job \
             (`GET /api/v1/jobs/1`) {j50}/{j99} ms.\n\n\
             | page | request | rows | ms p50 / p99 / max | p99 ≤ {target} ms |\n\
             | --- | --- | --- | --- | --- |\n{rows}\n\
             Target (every page request but the search for a word nothing contains): **{verdict}**.\n",
            started = self.started_at.format("%Y-%m-%d %H:%M UTC"),
            jobs = self.jobs,
            logs = self.log_rows,
            fj = self.fill_jobs_seconds,
            fl = self.fill_logs_seconds,
            rb = self.rebuild_seconds,
            build = self.machine.build,
            cores = self.machine.cores,
            cpu = self.machine.cpu_model,
            repeat = self.timings.first().map_or(0, |t| t.us.count),
            h50 = ms(self.ceiling_me_us.p50),
            h99 = ms(self.ceiling_me_us.p99),
            j50 = ms(self.ceiling_one_job_us.p50),
            j99 = ms(self.ceiling_one_job_us.p99),
            target = self.target_ms,
            verdict = if self.target_met { "met" } else { "NOT met" },
        )
    }
}
