//! `rondo-scheduler`: config → telemetry → run → drain.

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use rondo_core::Config;
use tokio_util::sync::CancellationToken;

/// Exit code for a bad configuration (EX_CONFIG-like, as linkerd uses 64).
const EXIT_CONFIG: u8 = 64;

fn load_config() -> Result<Config, String> {
    let path = std::env::args()
        .skip_while(|a| a != "--config")
        .nth(1)
        .or_else(|| std::env::var("RONDO_CONFIG").ok());
    let text = match &path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| format!("reading {p}: {e}"))?,
        None => String::new(),
    };
    Config::load(&text, std::env::vars()).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    let config = match load_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rondo-scheduler: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    rondo_core::telemetry::init(&config.log);
    let shutdown = CancellationToken::new();
    tokio::spawn(rondo_core::signals::cancel_on_signal(shutdown.clone()));
    match rondo_scheduler::run(config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "rondo-scheduler failed");
            ExitCode::FAILURE
        }
    }
}
