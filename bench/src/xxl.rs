//! Scenario "xxl": the same load twice in one run, each on a fresh
//! namespace: through `rondo-executor` processes (handler `demo`), then
//! through the XXL-JOB gateway to stand-in XXL-JOB executors (`xxl-standin`,
//! handler `demoJobHandler`: a log line, then success; its log is read back
//! by the gateway after each callback, as the product does). Each is one
//! throughput step (`throughput.rs`): J jobs firing every second, one
//! scheduler node, M executors, the persistence worker.
//!
//! Reported for each: fires/s, executed/s, lost and doubled fires, publish
//! lateness and handler-start lateness (rondo's executors: the history's
//! handler start; the stand-ins: their own start, from their runs files),
//! and CPU per fire of every process; then what the gateway adds to the
//! handler-start p99, and its own CPU per fire. The targets, at 1,000
//! fires/s: at most 5 ms added to the p99, at most 150 µs of the gateway's
//! CPU per fire.
//!
//! Beside them, measured in the same run: what one HTTP exchange with an
//! executor's embedded server costs its caller, with the gateway's own
//! client, `/beat` to a stand-in one after another on a kept connection.
//! XXL-JOB's protocol asks three exchanges of the gateway a fire, two as
//! the caller (`/run`, `/log`), one as the server (the callback): their
//! cost is a floor under the gateway's, whatever it does with the rest.

use chrono::{DateTime, Utc};
use rondo_core::Config;
use serde::Serialize;

use std::time::Duration;

use crate::broker;
use crate::cluster::XXL_GATEWAY;
use crate::cluster::procs::{self, Proc};
use crate::cpu::{ProcSnapshot, Source};
use crate::machine::Machine;
use crate::options::{ExecutorKind, Options};
use crate::output::Report;
use crate::throughput::{self, Step};

/// The targets the report is held to.
pub const TARGET_ADDED_P99_MS: i64 = 5;
pub const TARGET_GATEWAY_CPU_US_PER_FIRE: f64 = 150.0;

#[derive(Debug, Clone)]
pub struct Params {
    pub throughput: throughput::Params,
    pub jobs: usize,
    /// An earlier gateway build, run as a third step (`--xxl-baseline-gateway`).
    pub baseline: Option<std::path::PathBuf>,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        let throughput = throughput::Params::new(options);
        let jobs = if options.smoke {
            100
        } else {
            options
                .jobs
                .as_ref()
                .and_then(|j| j.first().copied())
                .unwrap_or(1_000)
        };
        Params {
            throughput,
            jobs,
            baseline: options.xxl_baseline_gateway.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct XxlReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub jobs: usize,
    pub executors: usize,
    pub window_s: f64,
    pub ceiling_msgs_per_s: f64,
    /// How long each stand-in run takes (`--xxl-handler-ms`; 0: at once).
    pub handler_ms: u64,
    /// Every job at the same instant of the second (`--same-instant`).
    pub same_instant: bool,
    /// Through `rondo-executor`.
    pub rondo: Step,
    /// Through the gateway to stand-in XXL-JOB executors.
    pub gateway: Step,
    /// Handler-start lateness p99 through the gateway minus through
    /// `rondo-executor` (ms).
    pub added_handler_p99_ms: i64,
    /// The same for publish lateness (the scheduler's side; the gateway
    /// should not move it).
    pub added_publish_p99_ms: i64,
    /// The gateway process's CPU ÷ the fires of the window (µs).
    pub gateway_cpu_us_per_fire: f64,
    /// The gateway's CPU per fire ÷ `rondo-executor`'s, same run.
    pub gateway_to_executor_cpu: f64,
    /// One HTTP exchange with an executor's server, measured in this run.
    pub exchange: Exchange,
    /// The same load through an earlier gateway build, in this run
    /// (`--xxl-baseline-gateway`): the before of a change to the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    pub added_p99_met: bool,
    pub gateway_cpu_met: bool,
    pub machine: Machine,
}

/// The gateway step of an earlier build, beside this build's.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// The earlier build's binary.
    pub gateway: std::path::PathBuf,
    pub step: Step,
    /// Its handler-start lateness p99 minus `rondo-executor`'s (ms).
    pub added_handler_p99_ms: i64,
    /// Its CPU ÷ the window's fires (µs).
    pub gateway_cpu_us_per_fire: f64,
}

/// The cost of one HTTP exchange with a stand-in executor's server.
#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    pub exchanges: u64,
    pub per_s: f64,
    /// The caller's CPU per exchange (µs): the gateway's client, in this
    /// process.
    pub caller_cpu_us: f64,
    /// The stand-in's CPU per exchange (µs).
    pub server_cpu_us: f64,
}

/// `/beat`s to a stand-in, `exchanges` of them one after another.
async fn exchange_cost(exchanges: u64) -> anyhow::Result<Exchange> {
    let binary = procs::binary("xxl-standin")?;
    let port = procs::free_addr().port();
    let dir = std::env::temp_dir().join(format!("rondo-bench-exchange-{port}"));
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--appname",
        "bench",
        "--access-token",
        "t",
        "--admin-addresses",
        "http://127.0.0.1:1/",
        "--log-path",
        &dir.to_string_lossy(),
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    let mut standin = Proc::spawn_with_args(
        "xxl-standin",
        &binary,
        &args,
        Vec::new(),
        "warn",
        dir.with_extension("log"),
    )
    .await?;
    let measured = async {
        let pool = rondo_xxl_gateway::http1::Pool::default();
        let authority = format!("127.0.0.1:{port}");
        let headers = [("XXL-JOB-ACCESS-TOKEN", "t")];
        let beat = || pool.post(&authority, "/beat", &headers, b"{}", Duration::from_secs(2));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while beat().await.is_err() {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the stand-in never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let sources = vec![
            ("caller".to_owned(), Source::This),
            ("server".to_owned(), Source::Pid(standin.pid)),
        ];
        let before = ProcSnapshot::take(&sources);
        for _ in 0..exchanges {
            beat()
                .await
                .map_err(|e| anyhow::anyhow!("a beat failed: {e:?}"))?;
        }
        let cpu = ProcSnapshot::take(&sources).since(&before);
        let per = |label: &str| cpu.sum(label) * cpu.window_s * 1e6 / exchanges as f64;
        Ok(Exchange {
            exchanges,
            per_s: exchanges as f64 / cpu.window_s,
            caller_cpu_us: per("caller"),
            server_cpu_us: per("server"),
        })
    }
    .await;
    standin.terminate(Duration::from_secs(5)).await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("log"));
    measured
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<XxlReport> {
    let started_at = Utc::now();
    let tp = &params.throughput;
    let exchanges = if tp.smoke { 500 } else { 20_000 };
    tracing::info!(exchanges, "xxl: one HTTP exchange's cost");
    let exchange = exchange_cost(exchanges).await?;
    tracing::info!(seconds = tp.ceiling_seconds, "xxl: the broker's ceiling");
    let ceiling = broker::ceiling(config, tp.ceiling_seconds, tp.in_flight).await?;
    let mut steps = Vec::new();
    let mut machine = None;
    for executor in [ExecutorKind::Real, ExecutorKind::Xxl] {
        let step_params = throughput::Params {
            executor,
            ..tp.clone()
        };
        tracing::info!(jobs = params.jobs, ?executor, "xxl: step");
        let (step, _, described) =
            throughput::run_step(config, &step_params, params.jobs, ceiling.msgs_per_s).await?;
        machine.get_or_insert(described);
        steps.push(step);
    }
    let baseline = match &params.baseline {
        Some(path) => {
            let step_params = throughput::Params {
                executor: ExecutorKind::Xxl,
                legacy_gateway: Some(path.clone()),
                ..tp.clone()
            };
            tracing::info!(jobs = params.jobs, gateway = %path.display(), "xxl: the earlier gateway's step");
            let (step, _, _) =
                throughput::run_step(config, &step_params, params.jobs, ceiling.msgs_per_s).await?;
            Some((path.clone(), step))
        }
        None => None,
    };
    let gateway = steps.pop().expect("the gateway's step");
    let rondo = steps.pop().expect("rondo-executor's step");
    let baseline = baseline.map(|(gateway, step)| Baseline {
        gateway,
        added_handler_p99_ms: step.handler_lateness_ms.p99 - rondo.handler_lateness_ms.p99,
        gateway_cpu_us_per_fire: step
            .cpu_us_per_fire
            .get(XXL_GATEWAY)
            .copied()
            .unwrap_or_default(),
        step,
    });
    let added_handler_p99_ms = gateway.handler_lateness_ms.p99 - rondo.handler_lateness_ms.p99;
    let added_publish_p99_ms = gateway.lateness_ms.p99 - rondo.lateness_ms.p99;
    let gateway_cpu_us_per_fire = gateway
        .cpu_us_per_fire
        .get(XXL_GATEWAY)
        .copied()
        .unwrap_or_default();
    Ok(XxlReport {
        scenario: "xxl",
        started_at,
        smoke: tp.smoke,
        jobs: params.jobs,
        executors: tp.executors,
        window_s: tp.window.as_secs_f64(),
        ceiling_msgs_per_s: ceiling.msgs_per_s,
        handler_ms: tp.xxl_handler_ms,
        same_instant: tp.same_instant,
        added_p99_met: added_handler_p99_ms <= TARGET_ADDED_P99_MS,
        gateway_cpu_met: gateway_cpu_us_per_fire <= TARGET_GATEWAY_CPU_US_PER_FIRE,
        added_handler_p99_ms,
        added_publish_p99_ms,
        gateway_cpu_us_per_fire,
        gateway_to_executor_cpu: gateway_cpu_us_per_fire
            / rondo
                .cpu_us_per_fire
                .iter()
                .filter(|(who, _)| who.starts_with("executor "))
                .map(|(_, us)| us)
                .sum::<f64>()
                .max(1e-9),
        exchange,
        baseline,
        rondo,
        gateway,
        machine: machine.expect("a step ran"),
    })
}

impl Report for XxlReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        let row = |name: &str, s: &Step| {
            format!(
                "| {name} | {:.0} | {:.0} | {} | {} | {} / {} / {} | {} / {} / {} | {:.0} |",
                s.fires_per_s,
                s.executed_per_s,
                s.lost,
                s.duplicates,
                s.lateness_ms.p50,
                s.lateness_ms.p99,
                s.lateness_ms.max,
                s.handler_lateness_ms.p50,
                s.handler_lateness_ms.p99,
                s.handler_lateness_ms.max,
                s.total_cpu_us_per_fire,
            )
        };
        let met = |ok: bool| if ok { "met" } else { "**not met**" };
        let cpu = |s: &Step| {
            s.cpu_us_per_fire
                .iter()
                .map(|(who, us)| format!("{who} {us:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let baseline = self.baseline.as_ref().map_or(String::new(), |b| {
            format!(
                "\nThe earlier gateway build `{path}` on the same load, in this run:\n\n\
                 | path | fires/s | executed/s | lost | dup | publish lateness p50 / p99 / max ms | handler start lateness p50 / p99 / max ms | CPU µs per fire, all processes |\n\
                 | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n\
                 {row}\n\n\
                 It added {added} ms to the handler-start p99 and cost {cpu:.0} µs of its own CPU \
                 per fire (this build: {now_added} ms, {now_cpu:.0} µs).\n",
                path = b.gateway.display(),
                row = row("earlier gateway + stand-ins", &b.step),
                added = b.added_handler_p99_ms,
                cpu = b.gateway_cpu_us_per_fire,
                now_added = self.added_handler_p99_ms,
                now_cpu = self.gateway_cpu_us_per_fire,
            )
        });
        format!(
            "## xxl, {started}{smoke}\n\n\
             {jobs} jobs firing every second{when}, one scheduler node, {execs} executor(s), the \
             persistence worker; window {window:.0} s; the same load through `rondo-executor` \
             (handler `demo`) and through `rondo-xxl-gateway` to stand-in XXL-JOB executors \
             (`xxl-standin`, handler {standin_handler}), each on a fresh namespace. Broker \
             ceiling {ceiling:.0} messages/s. {build} build; {cores} cores, {cpu_model}.\n\n\
             | path | fires/s | executed/s | lost | dup | publish lateness p50 / p99 / max ms | handler start lateness p50 / p99 / max ms | CPU µs per fire, all processes |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n\
             {rondo}\n{gateway}\n\n\
             The gateway adds **{added} ms** to the handler-start p99 (target ≤ {t_added} ms: {added_met}; \
             publish p99 moved {publish} ms) and costs **{gw_cpu:.0} µs** of its own CPU per fire \
             (target ≤ {t_cpu:.0} µs: {cpu_met}), {ratio:.2} times what `rondo-executor` costs a fire in \
             this run. One HTTP exchange with an executor's server (`/beat`, {exchanges} one after \
             another on a kept connection, {ex_rate:.0} a second) costs its caller {ex_caller:.0} µs \
             and the server {ex_server:.0} µs (the stand-in's axum, as the gateway's callback \
             server); XXL-JOB's protocol asks three a fire of the gateway, two as the caller \
             (`/run`, `/log`) and one as the server (the callback): {floor:.0} µs of its CPU a fire \
             before anything else.\n\n\
             CPU µs per fire, through `rondo-executor`: {rondo_cpu}.\n\n\
             CPU µs per fire, through the gateway: {gateway_cpu}.\n{baseline}",
            started = self.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
            smoke = if self.smoke {
                " (smoke: figures meaningless)"
            } else {
                ""
            },
            jobs = self.jobs,
            when = if self.same_instant {
                " at the same instant"
            } else {
                " at phases spread over the second"
            },
            standin_handler = if self.handler_ms > 0 {
                format!("`sleepJobHandler`, {} ms a run", self.handler_ms)
            } else {
                "`demoJobHandler`".to_owned()
            },
            execs = self.executors,
            window = self.window_s,
            ceiling = self.ceiling_msgs_per_s,
            build = self.machine.build,
            cores = self.machine.cores,
            cpu_model = self.machine.cpu_model,
            rondo = row("`rondo-executor`", &self.rondo),
            gateway = row("gateway + stand-ins", &self.gateway),
            added = self.added_handler_p99_ms,
            t_added = TARGET_ADDED_P99_MS,
            added_met = met(self.added_p99_met),
            publish = self.added_publish_p99_ms,
            gw_cpu = self.gateway_cpu_us_per_fire,
            t_cpu = TARGET_GATEWAY_CPU_US_PER_FIRE,
            cpu_met = met(self.gateway_cpu_met),
            ratio = self.gateway_to_executor_cpu,
            exchanges = self.exchange.exchanges,
            ex_rate = self.exchange.per_s,
            ex_caller = self.exchange.caller_cpu_us,
            ex_server = self.exchange.server_cpu_us,
            floor = 2.0 * self.exchange.caller_cpu_us + self.exchange.server_cpu_us,
            rondo_cpu = cpu(&self.rondo),
            gateway_cpu = cpu(&self.gateway),
        )
    }
}
