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
//! * `admin`: the admin API the executors call (registry, callback);
//!   `access`: which group a caller's token opens, and the token each
//!   executor is sent.
//! * `executors`: the fleet's records in Redis; `roster`: who this
//!   instance serves (the state the other parts share); `fleet`: serving
//!   them (and the consuming broker connection); `served`: one executor's
//!   beat, registration and queue.
//! * `handoff`: a queue message's triggers handed to the executor;
//!   `runs`: what Redis keeps of each; `local`: this instance's hand-offs
//!   in progress; `answer`: results the gateway publishes itself.
//! * `callback`: callbacks into results; `logs`: run logs into log events
//!   (`tails`: the runs whose log is read while they run).
//! * `kill`: rondo's kills as `/kill`; `lost`: runs whose callback cannot
//!   come; `instances`: the live gateway instances.

mod access;
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
mod roster;
mod runs;
mod served;
mod tails;
pub mod wire;

pub use executors::{executor_id, readable_id};

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use rondo_core::Config;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
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
    #[error("{0}; the gateway stopped")]
    Failed(String),
}

/// Runs a gateway instance until `shutdown`, then drains: the admin API
/// stops taking calls (executors send to the next gateway of their list),
/// queues stop being consumed, hand-offs in progress finish, and then the
/// instance's lease goes so the others take over its redelivered triggers
/// at once. A task of the instance that ends before `shutdown` (a panic)
/// stops it the same way, with an error: the process supervisor restarts
/// it whole.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), GatewayError> {
    config
        .xxl
        .check_token()
        .map_err(|e| GatewayError::Config(e.to_string()))?;
    let pool = rondo_core::redis::pool(&config.redis)
        .map_err(|e| GatewayError::Config(format!("redis.url: {}", e.message)))?;
    let timeout = Duration::from_millis(config.xxl.request_timeout_ms);
    let rule = rondo_core::destination::Destinations::parse(
        "xxl.address_allow",
        &config.xxl.address_allow,
    )
    .map_err(|e| GatewayError::Config(format!("xxl.address_allow: {}", e.message)))?;
    let client = client::Client::new(timeout, rule)
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
        serve(ctx, listener, readiness, shutdown).await
    }
    .instrument(span)
    .await
}

async fn serve(
    ctx: std::sync::Arc<Ctx>,
    listener: tokio::net::TcpListener,
    readiness: rondo_core::metrics::Readiness,
    shutdown: CancellationToken,
) -> Result<(), GatewayError> {
    // The lease outlives the work: the others must not take over a
    // hand-off this instance still finishes.
    let lease_stop = CancellationToken::new();
    let lease = tokio::spawn(
        ctx.instances
            .clone()
            .run(lease_stop.clone())
            .in_current_span(),
    );
    let work = CancellationToken::new();
    let mut tasks: JoinSet<&'static str> = JoinSet::new();
    let named = |name: &'static str, task: BoxFuture<'static, ()>| {
        async move {
            task.await;
            name
        }
        .in_current_span()
    };
    tasks.spawn(named(
        "fleet",
        fleet::run(ctx.clone(), work.clone()).boxed(),
    ));
    tasks.spawn(named(
        "kills",
        kill::consume(ctx.clone(), work.clone()).boxed(),
    ));
    tasks.spawn(named("logs", logs::tail(ctx.clone(), work.clone()).boxed()));
    tasks.spawn(named(
        "lost-run scan",
        lost::scan(ctx.clone(), work.clone()).boxed(),
    ));
    let api = axum::serve(listener, admin::router(ctx.clone()))
        .with_graceful_shutdown(shutdown.clone().cancelled_owned());
    readiness.set(true);
    let mut failure = None;
    tokio::select! {
        served = api => {
            if let Err(e) = served {
                tracing::warn!(error = %e, "the admin API stopped");
            }
            if !shutdown.is_cancelled() {
                failure = Some("the admin API ended".to_owned());
            }
        }
        Some(joined) = tasks.join_next() => {
            failure = Some(match joined {
                Ok(name) => format!("task {name} ended on its own"),
                Err(e) => format!("a task panicked: {e}"),
            });
        }
        () = ctx.failed.cancelled() => {
            failure = ctx.failure.lock().expect("failure lock").clone();
        }
    }
    if let Some(why) = &failure {
        tracing::error!(error = %why, "the gateway stops");
    }
    readiness.set(false);
    tracing::info!("stopping: no more calls taken; finishing the hand-offs in progress");
    work.cancel();
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined {
            failure.get_or_insert_with(|| format!("a task panicked: {e}"));
        }
    }
    lease_stop.cancel();
    let _ = lease.await;
    ctx.link.close().await;
    tracing::info!("stopped");
    failure.map_or(Ok(()), |why| Err(GatewayError::Failed(why)))
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
