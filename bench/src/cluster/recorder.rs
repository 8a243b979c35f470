//! Executors in this process whose handler `record` records every run
//! (trigger id, job, scheduled instant, start instant) and returns at once,
//! so the figures are rondo's path, not a handler's work.

use std::sync::{Arc, Mutex};

use rondo_core::{Config, clock};
use rondo_executor::{Executor, JobContext, JobError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The handler name the bench's jobs use.
pub(crate) const HANDLER: &str = "record";

/// One run of the recording handler.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub trigger_id: String,
    pub job_id: u64,
    pub fire_ms: i64,
    pub start_ms: i64,
}

/// The shared record of runs.
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<Run>>>);

impl Recorder {
    /// The runs whose scheduled instant is in `[from_ms, to_ms)`.
    pub fn runs_between(&self, from_ms: i64, to_ms: i64) -> Vec<Run> {
        self.0
            .lock()
            .expect("runs lock")
            .iter()
            .filter(|r| (from_ms..to_ms).contains(&r.fire_ms))
            .cloned()
            .collect()
    }

    /// Runs with a scheduled instant in `[from_ms, to_ms)`, counted.
    pub fn count_between(&self, from_ms: i64, to_ms: i64) -> usize {
        self.0
            .lock()
            .expect("runs lock")
            .iter()
            .filter(|r| (from_ms..to_ms).contains(&r.fire_ms))
            .count()
    }

    /// Starts an executor of `config.executor.app` with id `id`; returns
    /// its task and its queue.
    pub fn start_executor(
        &self,
        config: &Config,
        id: &str,
        shutdown: CancellationToken,
    ) -> anyhow::Result<(
        JoinHandle<Result<(), rondo_executor::ExecutorError>>,
        String,
    )> {
        let mut config = config.clone();
        config.executor.id = id.to_owned();
        let runs = self.0.clone();
        let record = move |ctx: JobContext| {
            let run = Run {
                trigger_id: ctx.trigger_id().to_owned(),
                job_id: ctx.job_id(),
                fire_ms: ctx.fire_ms(),
                start_ms: clock::now_ms(),
            };
            runs.lock().expect("runs lock").push(run);
            async { Ok::<(), JobError>(()) }
        };
        let executor = Executor::builder(config).handler(HANDLER, record).build()?;
        let queue = executor.queue();
        Ok((tokio::spawn(executor.run(shutdown)), queue))
    }
}
