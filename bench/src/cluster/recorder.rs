//! Executors in this process with testkit's recording handler, `record`:
//! every run is recorded (trigger id, job, scheduled instant, start
//! instant) and returns at once, so the figures are rondo's path, not a
//! handler's work.

use rondo_core::Config;
use rondo_executor::Executor;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) use rondo_testkit::recorder::{Recorder, Run};

/// The handler name the bench's jobs use.
pub(crate) const HANDLER: &str = "record";

/// Starts an executor of `config.executor.app` with id `id` whose handler
/// [`HANDLER`] records into `recorder`; returns its task and its queue.
pub(crate) fn start_executor(
    recorder: &Recorder,
    config: &Config,
    id: &str,
    shutdown: CancellationToken,
) -> anyhow::Result<(
    JoinHandle<Result<(), rondo_executor::ExecutorError>>,
    String,
)> {
    let mut config = config.clone();
    config.executor.id = id.to_owned();
    let executor = recorder
        .register_as(Executor::builder(config), HANDLER)
        .build()?;
    let queue = executor.queue();
    Ok((tokio::spawn(executor.run(shutdown)), queue))
}
