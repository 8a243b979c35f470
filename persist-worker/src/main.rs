//! `rondo-persist-worker`: config → telemetry → run → drain on SIGINT/SIGTERM.

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rondo_core::Config;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// Exit code for a configuration that cannot be used (`EX_USAGE`).
const EXIT_BAD_CONFIG: u8 = 64;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "rondo's persistence worker: events from RabbitMQ into MySQL"
)]
struct Args {
    /// TOML config file; `RONDO_*` variables override its keys.
    #[arg(long, env = "RONDO_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let config = match load_config(&args) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("rondo-persist-worker: {message}");
            return ExitCode::from(EXIT_BAD_CONFIG);
        }
    };
    rondo_core::telemetry::init(&config.log);
    serve(config).await
}

fn load_config(args: &Args) -> Result<Config, String> {
    let text = match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?,
        None => String::new(),
    };
    let config = Config::load(&text, std::env::vars()).map_err(|e| e.to_string())?;
    rondo_persist_worker::connect_options(&config.mysql.url)
        .map_err(|e| format!("invalid config: mysql.url: {e}"))?;
    Ok(config)
}

async fn serve(config: Config) -> ExitCode {
    let grace = Duration::from_millis(config.persist.shutdown_grace_ms);
    let shutdown = CancellationToken::new();
    let span = tracing::info_span!("rondo_persist_worker");
    let mut worker =
        tokio::spawn(rondo_persist_worker::run(config, shutdown.clone()).instrument(span));
    tokio::select! {
        joined = &mut worker => return exit_code(joined),
        () = shutdown_signal() => {
            tracing::info!(grace_ms = grace.as_millis() as u64, "shutdown requested; draining");
            shutdown.cancel();
        }
    }
    match tokio::time::timeout(grace, worker).await {
        Ok(joined) => exit_code(joined),
        Err(_) => {
            tracing::warn!("grace period over; unacked events will be redelivered");
            ExitCode::FAILURE
        }
    }
}

fn exit_code(joined: Result<anyhow::Result<()>, tokio::task::JoinError>) -> ExitCode {
    match joined {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            tracing::error!(error = %format!("{error:#}"), "persist worker failed");
            ExitCode::FAILURE
        }
        Err(error) => {
            tracing::error!(%error, "persist worker task panicked");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
