//! `xxl-standin`: a stand-in XXL-JOB executor, run as a separate process by
//! rondo's integration tests where the real Java executor (built on
//! xxl-job-core) cannot run. It registers with its "admin" (rondo's XXL-JOB
//! gateway), serves the executor HTTP API, runs a few built-in handlers in
//! per-job threads and calls the results back, as xxl-job-core does.
//!
//! It was written from our understanding of the protocol, checked against
//! the behaviour of xxl-job-core; it contains no XXL-JOB code. `--generation`
//! picks the wire dialect: `2` (xxl-job-core 2.3 – 3.2), `3` (3.3 – 3.4.x),
//! `3.5` (3.5).
//!
//! Layout:
//! - `config`: the command line, the generations;
//! - `wire`: the JSON shapes per generation (envelopes, requests, callbacks);
//! - `server`: the embedded HTTP server (`/beat`, `/idleBeat`, `/run` or
//!   `/trigger`, `/kill`, `/log`) and its auth rules;
//! - `jobs`: the job threads: queues, block strategies, kill, timeout;
//! - `handlers`: the built-in BEAN handlers, pretend Groovy glue, shell glue;
//! - `joblog`: the per-run log files, `/log` reading, the runs file;
//! - `callback`: the callback thread and its failed-callback files;
//! - `admin`: the HTTP client towards the admins;
//! - `registry`: the registry thread and the registry removal on stop.

mod admin;
mod callback;
mod config;
mod handlers;
mod joblog;
mod jobs;
mod registry;
mod server;
mod wire;

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use tracing_subscriber::EnvFilter;

use crate::admin::AdminClient;
use crate::callback::{CallbackQueue, Callbacker};
use crate::config::{Cli, Generation};
use crate::joblog::{LogDir, RunsFile};
use crate::jobs::{Env, Jobs, SHUTDOWN_REASON};
use crate::server::App;

/// How long a graceful stop waits for running jobs before killing them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    run(Cli::parse()).await
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let generation = cli.generation;
    // 3.5 refuses to start without a token (its server would refuse all).
    if generation == Generation::V35 && cli.access_token.trim().is_empty() {
        anyhow::bail!("xxl-job executor accessToken empty.");
    }
    std::fs::create_dir_all(&cli.log_path)?;
    let logs = LogDir::new(cli.log_path.clone());
    let admin = AdminClient::new(
        generation,
        cli.admin_bases(),
        cli.access_token.clone(),
        cli.appname.clone(),
        cli.admin_timeout(),
    )?;

    let (callbacks, queued) = CallbackQueue::new();
    let callbacker = Arc::new(Callbacker {
        generation,
        admin: admin.clone(),
        logs: logs.clone(),
    });
    let sender = tokio::spawn(callbacker.clone().run(queued));
    let retry = tokio::spawn(callbacker.retry_forever(cli.callback_retry_interval()));

    let jobs = Jobs::new(Env {
        generation,
        logs: logs.clone(),
        runs: RunsFile::new(cli.runs_file.clone()),
        callbacks: callbacks.clone(),
        idle_remove: cli.idle_remove(),
    });
    let app = Arc::new(App {
        generation,
        access_token: cli.access_token.clone(),
        appname: cli.appname.clone(),
        jobs: jobs.clone(),
        logs,
    });

    let listener = TcpListener::bind((cli.bind.as_str(), cli.port)).await?;
    let stop = CancellationToken::new();
    let mut server = tokio::spawn(
        axum::serve(listener, server::router(app))
            .with_graceful_shutdown(stop.clone().cancelled_owned())
            .into_future(),
    );
    let registration = wire::registry_body(&cli.appname, &cli.address());
    let registry = tokio::spawn(registry::register_until(
        admin.clone(),
        registration.clone(),
        cli.registry_interval(),
        stop.clone(),
    ));
    info!(?generation, port = cli.port, address = %cli.address(), appname = %cli.appname, "xxl-standin up");

    shutdown_signal().await?;
    info!("stopping");
    stop.cancel();
    if tokio::time::timeout(Duration::from_secs(2), &mut server)
        .await
        .is_err()
    {
        warn!("HTTP server slow to stop, aborted");
        server.abort();
    }
    registry.await?;
    registry::deregister(&admin, &registration).await;

    let grace_end = tokio::time::Instant::now() + SHUTDOWN_GRACE;
    while jobs.any_busy() && tokio::time::Instant::now() < grace_end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    jobs.stop_all(SHUTDOWN_REASON);
    jobs.join(Duration::from_secs(5)).await;

    // One last send of what the job threads queued.
    callbacks.close();
    let flush = cli.admin_timeout() * (cli.admin_bases().len() as u32 + 1) + Duration::from_secs(1);
    if tokio::time::timeout(flush, sender).await.is_err() {
        warn!("callback flush timed out");
    }
    retry.abort();
    info!("stopped");
    Ok(())
}

async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        interrupted = tokio::signal::ctrl_c() => interrupted?,
    }
    Ok(())
}
