//! `rondo-bench`: options → telemetry → the scenarios → the tables on
//! stdout (and the files in `--out`).

// A benchmark's job is to print its figures.
#![allow(clippy::print_stdout)]

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;
use rondo_bench::Options;

#[tokio::main]
async fn main() -> ExitCode {
    let options = Options::parse();
    // Progress on stderr, figures on stdout; RUST_LOG overrides. The
    // recording executors run in this process: their warnings (one per
    // trigger an overloaded executor refuses) would drown the progress, and
    // the reports count what they mean (lost fires, lateness).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("rondo_bench=info,rondo_executor=error,warn")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    // The services of the usual config (`RONDO_*` variables honoured); each
    // measurement makes its own namespace and database.
    let config = rondo_core::testkit::config("bench");
    match rondo_bench::run(&options, &config).await {
        Ok(written) => {
            for (markdown, path) in written {
                println!("{markdown}");
                println!("written: {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("rondo-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}
