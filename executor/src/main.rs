//! `rondo-executor`: the daemon shape of [`rondo_core::daemon`] around an
//! [`Executor`] with the built-in handlers.

/// mimalloc: far cheaper than glibc malloc for many small, short-lived
/// allocations across tokio worker threads.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use rondo_core::daemon::{self, Ready, Spec};
use rondo_core::redis::refuse_open_default;
use rondo_executor::{Executor, builtin};

/// On top of `executor.shutdown_grace_ms`, the executor's own drain
/// deadlines (kill grace 1 s, publishing 5 s, abandon 2 s, destroy hooks
/// 11 s) and some slack, before the drain counts as stuck.
const DRAIN_MARGIN: Duration = Duration::from_secs(25);

fn main() -> ExitCode {
    let spec = Spec {
        name: "rondo-executor",
        about: "runs rondo jobs with the built-in http and demo handlers, and shell when executor.command_handlers is on",
        version: env!("CARGO_PKG_VERSION"),
    };
    daemon::main(spec, |config| {
        let grace = Duration::from_millis(config.executor.shutdown_grace_ms) + DRAIN_MARGIN;
        builtin::check_config(&config.executor).map_err(|e| e.to_string())?;
        refuse_open_default(&config.redis, &config.names()).map_err(|e| e.to_string())?;
        let executor = builtin::register(Executor::builder(config))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Ready::new(grace, move |shutdown| async move {
            Ok(executor.run(shutdown).await?)
        }))
    })
}
