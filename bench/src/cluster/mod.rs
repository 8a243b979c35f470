//! A rondo cluster for the scenarios that fire jobs: scheduler nodes as
//! separate `rondo-scheduler` processes, executors (recording ones in this
//! process, or `rondo-executor` processes), the persistence worker (its own
//! process when its binary was built, else in this process), the bench's
//! executor group, and job creation through the admin API.
//!
//! Everything it starts is stopped by [`Cluster::stop`], and by `Drop` when
//! a scenario fails half-way (children are killed by pid).

pub(crate) mod fires;
pub(crate) mod latency;
pub(crate) mod procs;
pub(crate) mod recorder;

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures_util::{StreamExt as _, TryStreamExt as _};
use rondo_core::Config;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::cpu::Source;
use crate::options::ExecutorKind;
use fires::Created;
use latency::Latency;
use procs::{Binary, NodeProc, Proc};
use recorder::Recorder;
use rondo_testkit::Api;

/// The executor group of the bench's jobs.
pub(crate) const APP: &str = "bench";

/// What to start.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub nodes: usize,
    pub executors: usize,
    /// The nodes' `RUST_LOG`.
    pub node_log: &'static str,
    pub persist_worker: bool,
    /// Recording executors in this process, or `rondo-executor` processes.
    pub executor: ExecutorKind,
    /// `ExecutorKind::Xxl`: an earlier build of the gateway (one shared
    /// token, no destination rule) instead of the one beside the bench.
    pub legacy_gateway: Option<PathBuf>,
}

/// How the persistence worker runs.
enum Worker {
    Proc(Box<Proc>),
    InProcess {
        task: JoinHandle<anyhow::Result<()>>,
        shutdown: CancellationToken,
    },
}

/// The binaries a cluster ran, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct Binaries {
    pub scheduler: Binary,
    /// `None`: the worker ran inside the bench process.
    pub persist_worker: Option<Binary>,
    /// `Some` when the executors were `rondo-executor` processes (or
    /// stand-in XXL-JOB executors).
    pub executor: Option<Binary>,
    /// `Some` when they were behind the XXL-JOB gateway.
    pub gateway: Option<Binary>,
}

pub(crate) struct Cluster {
    pub config: Config,
    pub binaries: Binaries,
    /// Node slots; a killed node leaves `None`.
    pub nodes: Vec<Option<NodeProc>>,
    pub recorder: Recorder,
    pub queues: Vec<String>,
    pub log_dir: PathBuf,
    executors: Vec<JoinHandle<Result<(), rondo_executor::ExecutorError>>>,
    /// `rondo-executor` processes (`--executor real`), or stand-in XXL-JOB
    /// executors (`--executor xxl`).
    executor_procs: Vec<(String, Proc)>,
    /// The XXL-JOB gateway (`--executor xxl`).
    gateway: Option<Proc>,
    /// The stand-in XXL-JOB executors' runs files (`--executor xxl`).
    standin_runs: Vec<PathBuf>,
    executor_shutdown: CancellationToken,
    _executors_stop_on_drop: DropGuard,
    worker: Option<Worker>,
    node_log: &'static str,
    spawned: usize,
    /// The bench admin's API token, sent on every call.
    token: String,
}

impl Cluster {
    /// Starts the nodes, waits for a leader, creates the group, starts the
    /// executors and waits until the nodes see them, starts the worker.
    pub async fn start(config: &Config, spec: &Spec) -> anyhow::Result<Cluster> {
        let scheduler = procs::binary("rondo-scheduler")?;
        let worker_binary = if spec.persist_worker {
            procs::binary("rondo-persist-worker").ok()
        } else {
            None
        };
        let executor_binary = match spec.executor {
            ExecutorKind::Real => Some(procs::binary("rondo-executor")?),
            ExecutorKind::Xxl => Some(procs::binary("xxl-standin")?),
            ExecutorKind::Bench => None,
        };
        let gateway_binary = match (spec.executor, &spec.legacy_gateway) {
            (ExecutorKind::Xxl, Some(path)) => Some(procs::binary_at(path)?),
            (ExecutorKind::Xxl, None) => Some(procs::binary("rondo-xxl-gateway")?),
            _ => None,
        };
        let log_dir = procs::log_dir(&config.namespace)?;
        let mut config = config.clone();
        config.executor.app = APP.into();
        config.executor.shutdown_grace_ms = 2_000;
        let executor_shutdown = CancellationToken::new();
        // The sandbox's database is fresh: its one user is the bench's admin.
        let db = rondo_history::History::connect(&config.mysql)
            .await
            .context("the sandbox database")?;
        let token = rondo_history::testing::users::admin_token(db.pool(), "bench").await;
        db.close().await;
        let mut cluster = Cluster {
            binaries: Binaries {
                scheduler,
                persist_worker: worker_binary.clone(),
                executor: executor_binary.clone(),
                gateway: gateway_binary.clone(),
            },
            nodes: Vec::new(),
            recorder: Recorder::default(),
            queues: Vec::new(),
            log_dir,
            executors: Vec::new(),
            executor_procs: Vec::new(),
            gateway: None,
            standin_runs: Vec::new(),
            _executors_stop_on_drop: executor_shutdown.clone().drop_guard(),
            executor_shutdown,
            worker: None,
            node_log: spec.node_log,
            spawned: 0,
            token,
            config,
        };
        for _ in 0..spec.nodes.max(1) {
            cluster.add_node().await?;
        }
        cluster.wait_for_leader(spec.nodes.max(1)).await?;
        let api = cluster.api();
        let xxl = gateway_binary.is_some();
        let (status, body) = api
            .try_post("/api/v1/groups", &json!({ "app": APP, "xxl_gateway": xxl }))
            .await?;
        if status != 201 {
            bail!("creating the group: {status} {body}");
        }
        if xxl {
            let path = format!("/api/v1/groups/{APP}/xxl-token");
            let (status, body) = api.try_post(&path, &json!({ "token": XXL_TOKEN })).await?;
            if status != 200 {
                bail!("setting the group's access token: {status} {body}");
            }
        }
        if let (Some(gateway), Some(standin)) = (&gateway_binary, &executor_binary) {
            let legacy = spec
                .legacy_gateway
                .as_deref()
                .is_some_and(|path| !knows_group_tokens(path));
            cluster
                .start_xxl(gateway, standin, spec.executors, legacy)
                .await?;
        }
        for i in 1..=spec.executors {
            let id = format!("{APP}-e{i}");
            match &executor_binary {
                Some(_) if gateway_binary.is_some() => {}
                None => {
                    let (task, queue) = recorder::start_executor(
                        &cluster.recorder,
                        &cluster.config,
                        &id,
                        cluster.executor_shutdown.clone(),
                    )?;
                    cluster.executors.push(task);
                    cluster.queues.push(queue);
                }
                Some(binary) => {
                    cluster
                        .queues
                        .push(cluster.config.names().executor_queue(APP, &id));
                    let mut env = procs::config_env(&cluster.config);
                    env.extend([
                        ("RONDO_EXECUTOR_APP".to_owned(), APP.to_owned()),
                        ("RONDO_EXECUTOR_ID".to_owned(), id.clone()),
                        (
                            "RONDO_EXECUTOR_PREFETCH".to_owned(),
                            cluster.config.executor.prefetch.to_string(),
                        ),
                        (
                            "RONDO_EXECUTOR_SHUTDOWN_GRACE_MS".to_owned(),
                            cluster.config.executor.shutdown_grace_ms.to_string(),
                        ),
                    ]);
                    let proc = Proc::spawn(
                        &id,
                        binary,
                        env,
                        "warn,rondo_executor=info",
                        cluster.log_dir.join(format!("{id}.log")),
                    )
                    .await?;
                    cluster.executor_procs.push((id, proc));
                }
            }
        }
        let wanted = spec.executors;
        eventually("the executors to register", Duration::from_secs(30), || {
            let api = api.clone();
            async move {
                let live = api
                    .try_get(&format!("/api/v1/groups/{APP}/executors"))
                    .await;
                (live.ok()?.as_array()?.len() >= wanted).then_some(())
            }
        })
        .await?;
        if spec.persist_worker {
            cluster.worker = Some(match worker_binary {
                Some(binary) => Worker::Proc(Box::new(
                    Proc::spawn(
                        "persist-worker",
                        &binary,
                        procs::config_env(&cluster.config),
                        "warn,rondo_persist_worker=info",
                        cluster.log_dir.join("persist-worker.log"),
                    )
                    .await?,
                )),
                None => {
                    tracing::warn!(
                        "no rondo-persist-worker binary next to this one: the worker runs in this process"
                    );
                    let shutdown = CancellationToken::new();
                    let task = tokio::spawn(rondo_persist_worker::run(
                        cluster.config.clone(),
                        shutdown.clone(),
                    ));
                    Worker::InProcess { task, shutdown }
                }
            });
        }
        Ok(cluster)
    }

    /// Starts one more node (`n1`, `n2`, … in start order).
    pub async fn add_node(&mut self) -> anyhow::Result<usize> {
        self.spawned += 1;
        let id = format!("n{}", self.spawned);
        let node = NodeProc::spawn(
            &self.config,
            &self.binaries.scheduler,
            &id,
            self.node_log,
            &self.log_dir,
        )
        .await?;
        self.nodes.push(Some(node));
        Ok(self.nodes.len() - 1)
    }

    /// Waits until every live node answers, sees `count` nodes and a leader.
    pub async fn wait_for_leader(&mut self, count: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            for node in self.nodes.iter_mut().flatten() {
                if node.proc.exited() {
                    bail!(
                        "node {} exited; its log ({}):\n{}",
                        node.id,
                        node.proc.log.display(),
                        node.proc.log_tail(20)
                    );
                }
            }
            let mut ready = true;
            for node in self.nodes.iter().flatten() {
                let status = Api::new(node.addr).with_token(&self.token).cluster().await;
                let ok = status.is_some_and(|s| {
                    s["nodes"].as_array().is_some_and(|n| n.len() == count)
                        && s["leader"]["term"].as_u64().is_some()
                });
                ready &= ok;
            }
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "no cluster of {count} nodes with a leader within 60 s (logs in {})",
                    self.log_dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The API of the first live node.
    pub fn api(&self) -> Api {
        self.apis().into_iter().next().expect("a live node")
    }

    /// The APIs of the live nodes.
    pub fn apis(&self) -> Vec<Api> {
        self.nodes
            .iter()
            .flatten()
            .map(|n| Api::new(n.addr).with_token(&self.token))
            .collect()
    }

    /// `GET /api/v1/cluster` of every live node (`None` when one does not
    /// answer), in slot order.
    pub async fn statuses(&self) -> Vec<(usize, Option<Value>)> {
        let asks = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.as_ref()
                    .map(|n| (i, Api::new(n.addr).with_token(&self.token)))
            })
            .map(|(i, api)| async move { (i, api.cluster().await) });
        futures_util::future::join_all(asks).await
    }

    /// Resets every live node's histograms; how many did.
    pub async fn reset_stats(&self) -> usize {
        let resets = self
            .apis()
            .into_iter()
            .map(|api| async move { api.reset_stats().await });
        futures_util::future::join_all(resets)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count()
    }

    /// The processes to measure: each node, this process (the executors),
    /// the worker, and the services.
    pub fn cpu_sources(&self) -> Vec<(String, Source)> {
        let mut sources: Vec<(String, Source)> = self
            .nodes
            .iter()
            .flatten()
            .map(|n| (format!("scheduler {}", n.id), Source::Pid(n.proc.pid)))
            .collect();
        for (id, proc) in &self.executor_procs {
            sources.push((format!("executor {id}"), Source::Pid(proc.pid)));
        }
        if let Some(gateway) = &self.gateway {
            sources.push((XXL_GATEWAY.into(), Source::Pid(gateway.pid)));
        }
        let in_process = match (self.executor_procs.is_empty(), &self.worker) {
            (true, Some(Worker::InProcess { .. })) => "executors + persist worker",
            (true, _) => "executors",
            (false, Some(Worker::InProcess { .. })) => "persist worker",
            (false, _) => "",
        };
        if let Some(Worker::Proc(p)) = &self.worker {
            sources.push(("persist_worker".into(), Source::Pid(p.pid)));
        }
        let bench = if in_process.is_empty() {
            BENCH_ITSELF.to_owned()
        } else {
            format!("bench ({in_process})")
        };
        sources.push((bench, Source::This));
        sources.push(("rabbitmq".into(), Source::RABBITMQ));
        sources.push(("redis".into(), Source::REDIS));
        sources.push(("mysql".into(), Source::MYSQL));
        sources
    }

    /// Kills every node, stops the executors and the worker; returns the
    /// queues to delete. The logs are removed unless `keep_logs`.
    pub async fn stop(mut self, keep_logs: bool) -> Vec<String> {
        for node in self.nodes.iter_mut().flatten() {
            node.proc.kill9().await;
        }
        self.executor_shutdown.cancel();
        for task in self.executors.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        for (_, mut proc) in self.executor_procs.drain(..) {
            proc.terminate(Duration::from_secs(10)).await;
        }
        if let Some(mut gateway) = self.gateway.take() {
            gateway.terminate(Duration::from_secs(10)).await;
        }
        match self.worker.take() {
            Some(Worker::Proc(mut p)) => p.terminate(Duration::from_secs(10)).await,
            Some(Worker::InProcess { task, shutdown }) => {
                shutdown.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
            }
            None => {}
        }
        if !keep_logs && std::env::var_os("BENCH_KEEP_LOGS").is_none() {
            let _ = std::fs::remove_dir_all(&self.log_dir);
        } else {
            tracing::info!(logs = %self.log_dir.display(), "node logs kept");
        }
        std::mem::take(&mut self.queues)
    }
}

/// The CPU label of the bench process when it runs no part of the
/// pipeline (only its own polling): left out of the cost per fire.
pub(crate) const BENCH_ITSELF: &str = "bench (polling only)";

/// The CPU label of the XXL-JOB gateway.
pub(crate) const XXL_GATEWAY: &str = "xxl_gateway";

/// The access token of the bench's XXL-JOB group, which its stand-ins send.
const XXL_TOKEN: &str = "rondo-bench";

/// Settings an earlier gateway build (`--xxl-baseline-gateway`) does not
/// know and would refuse to start with.
const LEGACY_UNKNOWN: &[&str] = &[
    "RONDO_XXL_ADDRESS_ALLOW",
    "RONDO_XXL_SHARED_TOKEN",
    "RONDO_ALARM_EMAIL_ALLOW",
    "RONDO_REDIS_ALLOW_OPEN_DEFAULT",
];

/// Whether a gateway build takes a token per group: it knows the setting
/// `xxl.shared_token`, which came with them (read from its binary). An
/// earlier build (`--xxl-baseline-gateway`) without it is started as
/// those builds were: one shared token, ids without a digest.
fn knows_group_tokens(binary: &std::path::Path) -> bool {
    let needle = b"shared_token";
    std::fs::read(binary).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

impl Cluster {
    /// Starts the XXL-JOB gateway and `executors` stand-in XXL-JOB
    /// executors registered with it (as XXL-JOB's executors register every
    /// 30 s, but at once).
    async fn start_xxl(
        &mut self,
        gateway: &Binary,
        standin: &Binary,
        executors: usize,
        legacy: bool,
    ) -> anyhow::Result<()> {
        let listen = procs::free_addr();
        let mut config = self.config.clone();
        // The stand-ins listen on loopback; the group has the token.
        config.xxl.address_allow = vec!["127.0.0.1".into()];
        let mut env = procs::config_env(&config);
        if legacy {
            // An earlier build: one token for all, and it refuses keys it
            // does not know.
            env.retain(|(k, _)| !LEGACY_UNKNOWN.contains(&k.as_str()));
            env.push(("RONDO_XXL_ACCESS_TOKEN".to_owned(), XXL_TOKEN.to_owned()));
        }
        env.extend([
            ("RONDO_XXL_LISTEN_ADDR".to_owned(), listen.to_string()),
            (
                "RONDO_XXL_PREFETCH".to_owned(),
                self.config.executor.prefetch.to_string(),
            ),
        ]);
        let proc = Proc::spawn(
            "xxl-gateway",
            gateway,
            env,
            "warn,rondo_xxl_gateway=info",
            self.log_dir.join("xxl-gateway.log"),
        )
        .await?;
        self.gateway = Some(proc);
        let admin = format!("http://{listen}/xxl-job-admin");
        for i in 1..=executors {
            let port = procs::free_addr().port();
            let address = format!("http://127.0.0.1:{port}/");
            let id = if legacy {
                // An earlier build's id had no digest.
                rondo_xxl_gateway::readable_id(APP, &address)
            } else {
                rondo_xxl_gateway::executor_id(APP, &address)
            };
            self.queues
                .push(self.config.names().executor_queue(APP, &id));
            let dir = self.log_dir.join(format!("standin-{i}"));
            let runs = self.log_dir.join(format!("standin-{i}.runs.jsonl"));
            let args: Vec<String> = [
                "--port",
                &port.to_string(),
                "--address",
                &address,
                "--admin-addresses",
                &admin,
                "--access-token",
                XXL_TOKEN,
                "--appname",
                APP,
                "--log-path",
                &dir.to_string_lossy(),
                "--runs-file",
                &runs.to_string_lossy(),
                "--registry-interval-ms",
                "1000",
            ]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
            let proc = Proc::spawn_with_args(
                &id,
                standin,
                &args,
                Vec::new(),
                "warn",
                self.log_dir.join(format!("standin-{i}.log")),
            )
            .await?;
            self.executor_procs.push((id, proc));
            self.standin_runs.push(runs);
        }
        Ok(())
    }

    /// The handler starts the stand-in XXL-JOB executors wrote down (their
    /// runs files: the log id, the `logDateTime` rondo sends, which is the
    /// fire instant, and the start), of fires in `[from_ms, to_ms)`.
    pub fn standin_runs_between(&self, from_ms: i64, to_ms: i64) -> Vec<recorder::Run> {
        #[derive(serde::Deserialize)]
        struct Line {
            event: String,
            log_id: i64,
            log_date_time: i64,
            job_id: u64,
            ms: i64,
        }
        let mut runs = Vec::new();
        for path in &self.standin_runs {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for line in text.lines() {
                let Ok(l) = serde_json::from_str::<Line>(line) else {
                    continue;
                };
                if l.event == "start" && (from_ms..to_ms).contains(&l.log_date_time) {
                    runs.push(recorder::Run {
                        trigger_id: format!("{}-{}-log{}", l.job_id, l.log_date_time, l.log_id),
                        job_id: l.job_id,
                        fire_ms: l.log_date_time,
                        start_ms: l.ms,
                        executor: String::new(),
                    });
                }
            }
        }
        runs
    }
}

/// The bench's job: `schedule_type`/`schedule_conf`, the `record` handler.
pub(crate) fn job_spec(schedule_type: &str, conf: &str, routing: &str) -> Value {
    job_spec_for(schedule_type, conf, routing, ExecutorKind::Bench)
}

/// The bench's job for `executor`'s kind: the recording executors' `record`
/// handler, or `rondo-executor`'s built-in `demo` (with the bench's JSON
/// params it logs two lines and returns).
pub(crate) fn job_spec_for(
    schedule_type: &str,
    conf: &str,
    routing: &str,
    executor: ExecutorKind,
) -> Value {
    let handler = match executor {
        ExecutorKind::Bench => recorder::HANDLER,
        ExecutorKind::Real => "demo",
        ExecutorKind::Xxl => "demoJobHandler",
    };
    json!({
        "group": APP,
        "description": "rondo-bench",
        "handler": handler,
        "schedule_type": schedule_type,
        "schedule_conf": conf,
        "misfire": "DO_NOTHING",
        "routing": routing,
        "params": crate::broker::JOB_PARAMS,
    })
}

/// Jobs created through the API.
#[derive(Debug, Clone)]
pub(crate) struct Creation {
    pub jobs: Vec<Created>,
    pub elapsed: Duration,
    /// Requests sent again after a transport error or a 5xx.
    pub retries: u64,
}

impl Creation {
    pub fn per_s(&self) -> f64 {
        self.jobs.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Creates up to `n` jobs (`spec(i)`) through the APIs in turn, with
/// `concurrency` requests in flight. `spread`: job `i` is not sent before
/// `start + i·spread/n`, so that jobs whose first fire follows their
/// creation get phases spread over that time. `deadline`: no new request
/// after it (the creation stops short).
pub(crate) async fn create_jobs(
    apis: &[Api],
    n: usize,
    concurrency: usize,
    spread: Option<Duration>,
    deadline: Option<Instant>,
    spec: impl Fn(usize) -> Value,
) -> anyhow::Result<Creation> {
    let started = Instant::now();
    let retries = std::sync::atomic::AtomicU64::new(0);
    let retries_ref = &retries;
    let jobs: Vec<Created> = futures_util::stream::iter(0..n)
        .take_while(|_| std::future::ready(deadline.is_none_or(|d| Instant::now() < d)))
        .map(|i| {
            let api = apis[i % apis.len()].clone();
            let body = spec(i);
            let not_before = spread.map(|s| started + s.mul_f64(i as f64 / n.max(1) as f64));
            async move {
                if let Some(at) = not_before {
                    tokio::time::sleep_until(at.into()).await;
                }
                create_one(&api, &body, retries_ref).await
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await?;
    Ok(Creation {
        jobs,
        elapsed: started.elapsed(),
        retries: retries.into_inner(),
    })
}

async fn create_one(
    api: &Api,
    body: &Value,
    retries: &std::sync::atomic::AtomicU64,
) -> anyhow::Result<Created> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = api.try_post("/api/v1/jobs", body).await;
        let retryable = match &outcome {
            Ok((201, job)) => {
                let id = job["id"].as_u64().context("the created job has no id")?;
                let first_fire_ms = job["next_fire_ms"].as_i64().unwrap_or(0);
                return Ok(Created { id, first_fire_ms });
            }
            Ok((status, _)) => *status >= 500,
            Err(_) => true,
        };
        if !retryable || attempt >= 5 {
            return match outcome {
                Ok((status, answer)) => Err(anyhow::anyhow!(
                    "creating a job: {status} {answer} after {attempt} attempt(s)"
                )),
                Err(e) => Err(e.context(format!("creating a job, {attempt} attempts"))),
            };
        }
        retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
    }
}

/// `firing.fired` of a node status.
pub(crate) fn fired(status: &Value) -> Option<u64> {
    status["firing"]["fired"].as_u64()
}

/// `firing.publish_lateness_ms` of a node status.
pub(crate) fn publish_lateness(status: &Value) -> Option<Latency> {
    Latency::from_json(&status["firing"]["publish_lateness_ms"])
}

/// Polls `f` until it answers `Some`, or fails after `timeout`
/// (`rondo_core::testkit::try_eventually`, as an `anyhow` error).
pub(crate) async fn eventually<T, F, Fut>(what: &str, timeout: Duration, f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    rondo_core::testkit::try_eventually(what, timeout, f)
        .await
        .map_err(anyhow::Error::msg)
}

/// Sleeps until the wall clock reads `ms`.
pub(crate) async fn sleep_until_ms(ms: i64) {
    let wait = ms - rondo_core::clock::now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}
