//! `rondo-persist-worker`: the daemon shape of [`rondo_core::daemon`] around
//! [`rondo_persist_worker::run`].

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use rondo_core::daemon::{self, Ready, Spec};

/// On top of `persist.shutdown_grace_ms` (the last batch's write), time to
/// ack it and close the connections before the drain counts as stuck.
const DRAIN_MARGIN: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let spec = Spec {
        name: "rondo-persist-worker",
        about: "rondo's persistence worker: events from RabbitMQ into MySQL",
        version: env!("CARGO_PKG_VERSION"),
    };
    daemon::main(spec, |config| {
        rondo_history::connect_options(&config.mysql.url).map_err(|e| format!("mysql.url: {e}"))?;
        let grace = Duration::from_millis(config.persist.shutdown_grace_ms) + DRAIN_MARGIN;
        Ok(Ready::new(grace, move |shutdown| {
            rondo_persist_worker::run(config, shutdown)
        }))
    })
}
