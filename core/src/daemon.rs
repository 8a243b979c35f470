//! The one shape every rondo daemon starts and stops in (linkerd's
//! disciplined `main`):
//!
//! 1. **arguments**: `--config FILE` (or `RONDO_CONFIG`), `--help`,
//!    `--version`; a usage error exits [`EXIT_CONFIG`];
//! 2. **config**: the file plus `RONDO_*` overrides ([`Config::load`]),
//!    then the daemon's own checks; any error exits [`EXIT_CONFIG`] with
//!    one line on stderr;
//! 3. **telemetry**: tracing on stderr ([`crate::telemetry`]);
//! 4. **run**: the daemon's future with a root [`CancellationToken`] that
//!    SIGINT / SIGTERM cancel;
//! 5. **drain**: after a signal the daemon drains within its own deadlines;
//!    the outer grace bounds the whole drain, and a drain that overruns it
//!    exits non-zero.
//!
//! The exit code says how it ended: 0 after a clean stop, [`EXIT_CONFIG`]
//! for a bad config, [`EXIT_FAILURE`] when the run failed (a core task
//! returned an error or panicked) or the drain overran its grace.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// A configuration (or usage) that cannot be used (`EX_CONFIG` in spirit;
/// linkerd uses 64 too).
pub const EXIT_CONFIG: u8 = 64;
/// The run failed, or the drain overran its grace.
pub const EXIT_FAILURE: u8 = 1;

/// A daemon's name and one-line description, for `--help` and logs.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub about: &'static str,
    pub version: &'static str,
}

/// What a daemon runs once its config is accepted.
pub struct Ready {
    /// The outer bound on the drain after a signal.
    pub grace: Duration,
    /// The daemon itself: runs until the token is cancelled, then drains.
    pub run: Box<dyn FnOnce(CancellationToken) -> RunFuture + Send>,
    /// The runtime's worker threads, unless `TOKIO_WORKER_THREADS` says
    /// otherwise; `None`: one per core.
    pub workers: Option<usize>,
}

/// The daemon's run: `Err` (or a panic) is a failure.
pub type RunFuture = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

impl Ready {
    pub fn new<F, Fut>(grace: Duration, run: F) -> Ready
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Ready {
            grace,
            run: Box::new(move |token| Box::pin(run(token))),
            workers: None,
        }
    }

    /// Runs on `workers` worker threads (unless `TOKIO_WORKER_THREADS`
    /// names another number).
    pub fn with_workers(mut self, workers: usize) -> Ready {
        self.workers = Some(workers.max(1));
        self
    }
}

#[derive(Debug, Parser)]
struct Args {
    /// TOML config file; `RONDO_*` environment variables override its keys.
    #[arg(long, env = "RONDO_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Runs a daemon from `main`: arguments, config, telemetry, `prepare` (the
/// daemon's own checks and set-up; an error is a bad config), run, drain.
/// Builds the tokio runtime itself, so `--help` and config errors cost no
/// threads.
pub fn main(spec: Spec, prepare: impl FnOnce(Config) -> Result<Ready, String>) -> ExitCode {
    let config = match parse_args(spec).and_then(|args| load(&args)) {
        Ok(Some(config)) => config,
        Ok(None) => return ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{}: {message}", spec.name);
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Before `prepare`, so what set-up logs (an interpreter not found, TLS
    // checks off) is seen.
    crate::telemetry::init(&config.log);
    let ready = match prepare(config) {
        Ok(ready) => ready,
        Err(message) => {
            eprintln!("{}: invalid config: {message}", spec.name);
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = ready.workers
        && std::env::var_os("TOKIO_WORKER_THREADS").is_none()
    {
        builder.worker_threads(workers);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{}: cannot start the runtime: {e}", spec.name);
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    runtime.block_on(async {
        let shutdown = CancellationToken::new();
        tokio::spawn(crate::signals::cancel_on_signal(shutdown.clone()));
        supervise(spec.name, ready, shutdown).await
    })
}

/// `Ok(None)` after printing help or the version.
fn parse_args(spec: Spec) -> Result<Option<Args>, String> {
    let command = Args::command()
        .name(spec.name)
        .bin_name(spec.name)
        .about(spec.about)
        .version(spec.version);
    match command.try_get_matches() {
        Ok(matches) => Args::from_arg_matches(&matches)
            .map(Some)
            .map_err(|e| e.to_string()),
        Err(e) if e.use_stderr() => Err(e.to_string().trim_end().to_owned()),
        Err(help) => {
            let _ = help.print();
            Ok(None)
        }
    }
}

fn load(args: &Option<Args>) -> Result<Option<Config>, String> {
    let Some(args) = args else { return Ok(None) };
    let text = match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?,
        None => String::new(),
    };
    Config::load(&text, std::env::vars())
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Runs the daemon until it ends or `shutdown` fires, then bounds its drain
/// by the grace; the exit code says how it ended.
pub async fn supervise(name: &str, ready: Ready, shutdown: CancellationToken) -> ExitCode {
    let mut run = tokio::spawn((ready.run)(shutdown.clone()));
    let joined = tokio::select! {
        joined = &mut run => joined,
        () = shutdown.cancelled() => {
            tracing::info!(grace_ms = ready.grace.as_millis() as u64, "{name}: draining");
            match tokio::time::timeout(ready.grace, &mut run).await {
                Ok(joined) => joined,
                Err(_) => {
                    run.abort();
                    tracing::error!("{name}: the drain overran its grace; exiting");
                    return ExitCode::from(EXIT_FAILURE);
                }
            }
        }
    };
    match joined {
        Ok(Ok(())) => {
            tracing::info!("{name}: stopped");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            tracing::error!(error = format!("{e:#}"), "{name} failed");
            ExitCode::from(EXIT_FAILURE)
        }
        Err(e) => {
            tracing::error!(error = %e, "{name} crashed");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(
        grace_ms: u64,
        run: impl Future<Output = anyhow::Result<()>> + Send + 'static,
    ) -> Ready {
        Ready::new(Duration::from_millis(grace_ms), move |_| run)
    }

    #[tokio::test(start_paused = true)]
    async fn a_clean_stop_after_a_signal_exits_zero() {
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let run = Ready::new(
            Duration::from_secs(5),
            move |t: CancellationToken| async move {
                t.cancelled().await;
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(())
            },
        );
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            token.cancel();
        });
        assert_eq!(supervise("t", run, shutdown).await, ExitCode::SUCCESS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_or_panicked_run_exits_non_zero_without_a_signal() {
        let failed = ready(1_000, async { Err(anyhow::anyhow!("core task failed")) });
        let code = supervise("t", failed, CancellationToken::new()).await;
        assert_eq!(code, ExitCode::from(EXIT_FAILURE));
        let panicked = ready(1_000, async { panic!("bug") });
        let code = supervise("t", panicked, CancellationToken::new()).await;
        assert_eq!(code, ExitCode::from(EXIT_FAILURE));
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_that_overruns_the_grace_exits_non_zero_at_the_grace() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let stuck = ready(3_000, std::future::pending());
        let started = tokio::time::Instant::now();
        let code = supervise("t", stuck, shutdown).await;
        assert_eq!(code, ExitCode::from(EXIT_FAILURE));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
