//! rondo-xxl-gateway: unchanged XXL-JOB executors (`@XxlJob` handlers and
//! GLUE scripts on `xxl-job-core`) run under rondo.
//!
//! Toward those executors the gateway is their admin: they register with
//! it and send it their callbacks (`xxl.job.admin.addresses` names one or
//! more gateways), and it calls their embedded server (`/beat`,
//! `/idleBeat`, `/run` or `/trigger`, `/kill`, `/log`). Toward rondo each
//! registered executor is an executor of group `appname` with its own
//! durable queue: its lease is renewed while it answers `/beat`, its
//! `running_jobs` are the triggers handed to it and not yet called back,
//! and each callback becomes rondo's result event. The gateway keeps the
//! dedupe marks on the executors' behalf, so a redelivered trigger is
//! never sent twice. Every instance is stateless but for Redis: any
//! instance takes any callback, and every instance serves every executor.
//! `README.md` next to this crate explains the life of a trigger through
//! the gateway and what each failure does; `docs/xxl-job-gateway.md` maps
//! every field both ways.
//!
//! # Layout
//!
//! * [`run`]: the gateway (its tasks, in the daemon shape's drain).
//! * `wire`: XXL-JOB's JSON, both generations; `client`: the calls to an
//!   executor and how each can fail; `http1`: the kept-alive HTTP/1.1
//!   connections they go over.
//! * `admin`: the admin API the executors call (registry, callback).
//! * `executors`: the fleet's records in Redis; `fleet`: serving them (and
//!   the consuming broker connection); `served`: one executor's beat,
//!   registration and queue.
//! * `handoff`: a queue message's triggers handed to the executor;
//!   `runs`: what Redis keeps of each; `local`: this instance's hand-offs
//!   in progress; `answer`: results the gateway publishes itself.
//! * `callback`: callbacks into results; `logs`: run logs into log events.
//! * `kill`: rondo's kills as `/kill`; `lost`: runs whose callback cannot
//!   come; `instances`: the live gateway instances.

mod admin;
mod answer;
mod callback;
mod client;
mod ctx;
mod executors;
mod fleet;
mod handoff;
pub mod http1;
mod instances;
mod kill;
mod local;
mod logs;
mod lost;
mod runs;
mod served;
pub mod wire;

pub use executors::executor_id;

use std::time::Duration;

use rondo_core::Config;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::ctx::Ctx;

/// Why the gateway could not run.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("invalid config: {0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
}

/// Runs a gateway instance until `shutdown`, then drains: the admin API
/// stops taking calls (executors send to the next gateway of their list),
/// queues stop being consumed, hand-offs in progress finish, and the
/// instance's lease goes so the others take over its redelivered triggers
/// at once.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), GatewayError> {
    config
        .xxl
        .check_token()
        .map_err(|e| GatewayError::Config(e.to_string()))?;
    let pool = rondo_core::redis::pool(&config.redis)
        .map_err(|e| GatewayError::Config(format!("redis.url: {}", e.message)))?;
    let timeout = Duration::from_millis(config.xxl.request_timeout_ms);
    let client = client::Client::new(&config.xxl.access_token, timeout)
        .map_err(|e| GatewayError::Config(format!("http client: {e}")))?;
    rondo_core::metrics::install();
    let ctx = Ctx::new(&config, pool, client, instance_id());
    let listener = tokio::net::TcpListener::bind(&config.xxl.listen_addr)
        .await
        .map_err(|source| GatewayError::Listen {
            addr: config.xxl.listen_addr.clone(),
            source,
        })?;
    let readiness = rondo_core::metrics::Readiness::default();
    if !config.xxl.metrics_addr.is_empty() {
        rondo_core::metrics::serve(
            &config.xxl.metrics_addr,
            readiness.clone(),
            shutdown.clone(),
        )
        .await
        .map_err(|source| GatewayError::Listen {
            addr: config.xxl.metrics_addr.clone(),
            source,
        })?;
    }
    let span = tracing::info_span!("xxl_gateway", instance = %ctx.me());
    async move {
        tracing::info!(listen = %config.xxl.listen_addr, "the XXL-JOB gateway serves");
        serve(ctx, listener, readiness, shutdown).await;
        Ok(())
    }
    .instrument(span)
    .await
}

async fn serve(
    ctx: std::sync::Arc<Ctx>,
    listener: tokio::net::TcpListener,
    readiness: rondo_core::metrics::Readiness,
    shutdown: CancellationToken,
) {
    let work = CancellationToken::new();
    let tasks = TaskTracker::new();
    tasks.spawn(ctx.instances.clone().run(work.clone()).in_current_span());
    tasks.spawn(fleet::Fleet::run(ctx.clone(), work.clone()).in_current_span());
    tasks.spawn(kill::consume(ctx.clone(), work.clone()).in_current_span());
    tasks.spawn(logs::tail(ctx.clone(), work.clone()).in_current_span());
    tasks.spawn(lost::scan(ctx.clone(), work.clone()).in_current_span());
    let api = axum::serve(listener, admin::router(ctx.clone()))
        .with_graceful_shutdown(shutdown.clone().cancelled_owned());
    readiness.set(true);
    if let Err(e) = api.await {
        tracing::warn!(error = %e, "the admin API stopped");
    }
    shutdown.cancelled().await;
    readiness.set(false);
    tracing::info!("stopping: no more calls taken; finishing the hand-offs in progress");
    work.cancel();
    tasks.close();
    tasks.wait().await;
    ctx.link.close().await;
    tracing::info!("stopped");
}

/// This process's name among the gateway instances:
/// `xxl-gateway-<host>-<random>` (a new one at every start).
fn instance_id() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "host".into());
    let host: String = host
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(32)
        .collect();
    format!("xxl-gateway-{host}-{:08x}", rand::random::<u32>())
}
