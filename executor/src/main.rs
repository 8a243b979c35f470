//! `rondo-executor`: config → telemetry → run the built-in handlers → drain.

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rondo_core::Config;
use rondo_executor::{Executor, builtin};
use tokio_util::sync::CancellationToken;

/// Exit code for bad configuration or usage (EX_USAGE).
const EXIT_CONFIG: u8 = 64;
/// On top of `executor.shutdown_grace_ms`, the executor's own drain
/// deadlines (kill grace 1 s, publishing 5 s, abandon 2 s, destroy hooks
/// 11 s) and some slack, before giving up.
const DRAIN_MARGIN: Duration = Duration::from_secs(25);

/// Runs rondo jobs with the built-in `shell`, `http` and `demo` handlers.
#[derive(Debug, Parser)]
#[command(name = "rondo-executor", version)]
struct Args {
    /// TOML config file; RONDO_* environment variables override it.
    #[arg(long, env = "RONDO_CONFIG")]
    config: Option<PathBuf>,
}

fn load_config(args: &Args) -> Result<Config, String> {
    let text = match &args.config {
        Some(path) => {
            std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?
        }
        None => String::new(),
    };
    Config::load(&text, std::env::vars()).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(help) => {
            let _ = help.print();
            return ExitCode::SUCCESS;
        }
    };
    let config = match load_config(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("rondo-executor: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    rondo_core::telemetry::init(&config.log);
    let drain_limit = Duration::from_millis(config.executor.shutdown_grace_ms) + DRAIN_MARGIN;
    let executor = match builtin::register(Executor::builder(config)).build() {
        Ok(executor) => executor,
        Err(e) => {
            eprintln!("rondo-executor: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let shutdown = CancellationToken::new();
    let mut run = tokio::spawn(executor.run(shutdown.clone()));
    tokio::spawn(rondo_core::signals::cancel_on_signal(shutdown.clone()));
    tokio::select! {
        joined = &mut run => return exit_code(joined),
        () = shutdown.cancelled() => {}
    }
    match tokio::time::timeout(drain_limit, run).await {
        Ok(joined) => exit_code(joined),
        Err(_) => {
            tracing::error!("the drain did not finish in time; exiting");
            ExitCode::FAILURE
        }
    }
}

fn exit_code(
    joined: Result<Result<(), rondo_executor::ExecutorError>, tokio::task::JoinError>,
) -> ExitCode {
    match joined {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "rondo-executor failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            tracing::error!(error = %e, "rondo-executor crashed");
            ExitCode::FAILURE
        }
    }
}
