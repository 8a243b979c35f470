//! `rondo-xxl-gateway`: the daemon shape of [`rondo_core::daemon`] around
//! [`rondo_xxl_gateway::run`].

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use rondo_core::daemon::{self, Ready, Spec};
use rondo_core::redis::refuse_open_default;

/// On top of `xxl.request_timeout_ms` (the hand-offs in progress finish
/// their calls), time to publish, ack and close before the drain counts as
/// stuck.
const DRAIN_MARGIN: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    let spec = Spec {
        name: "rondo-xxl-gateway",
        about: "the admin of unchanged XXL-JOB executors (xxl-job-core), and one rondo executor for each of them",
        version: env!("CARGO_PKG_VERSION"),
    };
    daemon::main(spec, |config| {
        config.xxl.check_token().map_err(|e| e.to_string())?;
        refuse_open_default(&config.redis, &config.names()).map_err(|e| e.to_string())?;
        let grace = Duration::from_millis(config.xxl.request_timeout_ms) + DRAIN_MARGIN;
        let workers = config.xxl.worker_threads;
        Ok(Ready::new(grace, move |shutdown| async move {
            Ok(rondo_xxl_gateway::run(config, shutdown).await?)
        })
        .with_workers(workers))
    })
}
