//! An executor handler that records every run, for tests that count fires.

use std::sync::{Arc, Mutex};

use rondo_core::{Config, clock};
use rondo_executor::{Executor, JobContext, JobError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One run of the recording handler.
#[derive(Debug, Clone)]
pub struct Run {
    pub trigger_id: String,
    pub job_id: u64,
    pub fire_ms: i64,
    pub start_ms: i64,
    pub executor: String,
}

/// Shared record of runs; clone it into as many executors as needed.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Run>>>);

impl Recorder {
    pub fn runs(&self) -> Vec<Run> {
        self.0.lock().expect("runs lock").clone()
    }

    /// Starts an in-process executor of `config.executor.app` with id `id`
    /// whose handler `record` records runs. Returns its task and queue.
    pub fn start_executor(
        &self,
        config: &Config,
        id: &str,
        shutdown: CancellationToken,
    ) -> (
        JoinHandle<Result<(), rondo_executor::ExecutorError>>,
        String,
    ) {
        let mut config = config.clone();
        config.executor.id = id.to_owned();
        let runs = self.0.clone();
        let record = move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                let run = Run {
                    trigger_id: ctx.trigger_id().to_owned(),
                    job_id: ctx.job_id(),
                    fire_ms: ctx.fire_ms(),
                    start_ms: clock::now_ms(),
                    executor: ctx.executor_id().to_owned(),
                };
                runs.lock().expect("runs lock").push(run);
                Ok::<(), JobError>(())
            }
        };
        let executor = Executor::builder(config)
            .handler("record", record)
            .build()
            .expect("executor builds");
        let queue = executor.queue();
        (tokio::spawn(executor.run(shutdown)), queue)
    }
}
