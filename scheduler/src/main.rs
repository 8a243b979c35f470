//! `rondo-scheduler`: the daemon shape of [`rondo_core::daemon`] around
//! [`rondo_scheduler::run`].

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use rondo_core::daemon::{self, Ready, Spec};
use rondo_core::redis::refuse_open_default;

/// On top of `scheduler.shutdown_grace_ms` (the fires in flight), time to
/// stop the API and the monitor, leave ZooKeeper and close the broker
/// connection before the drain counts as stuck.
const DRAIN_MARGIN: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let spec = Spec {
        name: "rondo-scheduler",
        about: "a rondo scheduler node: election, claim, wheel, monitor and the admin API",
        version: env!("CARGO_PKG_VERSION"),
    };
    daemon::main(spec, |config| {
        refuse_open_default(&config.redis, &config.names()).map_err(|e| e.to_string())?;
        let grace = Duration::from_millis(config.scheduler.shutdown_grace_ms) + DRAIN_MARGIN;
        Ok(Ready::new(grace, move |shutdown| {
            rondo_scheduler::run(config, shutdown)
        }))
    })
}
