//! The per-job workers of one executor: started on a job's first trigger,
//! found by job id, gone when idle (see `worker` for what one does).
//!
//! [`Jobs::enter`] is how an admission meets its job's worker: it hands the
//! trigger over and waits for the decision, while also watching the
//! trigger's [`Interrupt`] (a kill while it waits) and the executor's
//! shutdown (a trigger still waiting then is left for redelivery).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rondo_core::Trigger;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::shared::{Decision, Shared, Submit, Turn, WorkerEntry};
use super::worker::Worker;
use crate::handler::Handlers;
use crate::outcome::Outcome;
use crate::workers::interrupt::Interrupt;

/// XXL-JOB's JobThread exits after 30 empty polls of 3 s.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// What `enter` came back with.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Run the trigger now; drop the turn when the handler ended.
    Run(Turn),
    /// Do not run it; answer with this outcome.
    Refuse(Outcome),
    /// The executor is shutting down before the trigger got its turn.
    Shutdown,
}

/// What the executor builds its workers from.
pub(crate) struct JobsParts {
    pub(crate) executor_id: String,
    pub(crate) handlers: Handlers,
    pub(crate) idle_timeout: Duration,
    pub(crate) shutdown: CancellationToken,
}

#[derive(Clone)]
pub(crate) struct Jobs {
    shared: Arc<Shared>,
}

impl Jobs {
    pub(crate) fn new(parts: JobsParts) -> Self {
        Jobs {
            shared: Arc::new(Shared {
                executor_id: parts.executor_id,
                handlers: parts.handlers,
                idle_timeout: parts.idle_timeout,
                shutdown: parts.shutdown,
                workers: Mutex::new(HashMap::new()),
                generations: AtomicU64::new(0),
                tracker: TaskTracker::new(),
            }),
        }
    }

    /// Hands `trigger` to its job's worker and waits for its decision.
    pub(crate) async fn enter(&self, trigger: &Trigger, interrupt: &Interrupt) -> Entry {
        if self.shared.shutdown.is_cancelled() {
            return Entry::Shutdown;
        }
        let (reply, decision) = oneshot::channel();
        self.submit(
            trigger.job_id,
            Submit {
                trigger_id: trigger.trigger_id.clone(),
                handler: trigger.handler.clone(),
                block: trigger.block,
                interrupt: interrupt.clone(),
                reply,
            },
        );
        tokio::select! {
            biased;
            decision = decision => match decision {
                Ok(Decision::Run(turn)) => Entry::Run(turn),
                Ok(Decision::Refuse(outcome)) => Entry::Refuse(outcome),
                Err(_) => Entry::Refuse(Outcome::fail("the job's worker stopped unexpectedly")),
            },
            () = interrupt.token().cancelled() => match interrupt.reason() {
                Some(reason) => Entry::Refuse(Outcome::stopped(reason)),
                None => Entry::Shutdown,
            },
            () = self.shared.shutdown.cancelled() => Entry::Shutdown,
        }
    }

    /// Sends to the job's worker, starting one if it has none (or its
    /// worker retired).
    fn submit(&self, job_id: u64, submit: Submit) {
        let mut workers = self.shared.workers();
        let previous = match workers.get(&job_id) {
            Some(entry) => match &entry.inbox {
                Some(inbox) => match inbox.send(submit) {
                    Ok(()) => return,
                    // The worker task died (a panic): start another.
                    Err(mpsc::error::SendError(back)) => {
                        return self.spawn(&mut workers, job_id, None, back);
                    }
                },
                None => Some(entry.exited.clone()),
            },
            None => None,
        };
        self.spawn(&mut workers, job_id, previous, submit);
    }

    fn spawn(
        &self,
        workers: &mut HashMap<u64, WorkerEntry>,
        job_id: u64,
        previous: Option<CancellationToken>,
        submit: Submit,
    ) {
        let generation = self
            .shared
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (inbox, rx) = mpsc::unbounded_channel();
        // Queued before the worker starts, so it finds the trigger waiting;
        // this cannot fail, the receiver is right here.
        let _ = inbox.send(submit);
        let exited = CancellationToken::new();
        let worker = Worker::new(
            job_id,
            generation,
            self.shared.clone(),
            rx,
            previous,
            exited.clone(),
        );
        let span = tracing::info_span!(
            "job_worker",
            job_id,
            executor_id = %self.shared.executor_id
        );
        self.shared.tracker.spawn(worker.run().instrument(span));
        workers.insert(
            job_id,
            WorkerEntry {
                inbox: Some(inbox),
                generation,
                exited,
            },
        );
    }

    /// After shutdown: waits up to `limit` for the workers to finish their
    /// `destroy` hooks; false if some did not.
    pub(crate) async fn drain(&self, limit: Duration) -> bool {
        self.shared.tracker.close();
        tokio::time::timeout(limit, self.shared.tracker.wait())
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::SharedHandler;
    use crate::{JobContext, JobError};

    async fn ok(_ctx: JobContext) -> Result<(), JobError> {
        Ok(())
    }

    fn jobs(idle: Duration) -> Jobs {
        let handlers = Handlers::new(vec![("h".into(), Arc::new(ok) as SharedHandler)], vec![]);
        Jobs::new(JobsParts {
            executor_id: "e".into(),
            handlers: handlers.expect("valid handlers"),
            idle_timeout: idle,
            shutdown: CancellationToken::new(),
        })
    }

    /// Idle exit on paused time: the worker outlives 89 s without a
    /// trigger and is gone at 90 s (XXL-JOB's 30 × 3 s).
    #[tokio::test(start_paused = true)]
    async fn an_idle_worker_exits_at_its_idle_timeout_and_not_before() {
        let jobs = jobs(DEFAULT_IDLE_TIMEOUT);
        let trigger = Trigger {
            handler: "h".into(),
            ..rondo_core::testkit::fixtures::trigger("7-1-0", 7)
        };
        let interrupt = Interrupt::new(CancellationToken::new());
        let Entry::Run(turn) = jobs.enter(&trigger, &interrupt).await else {
            panic!("the first trigger runs");
        };
        drop(turn);
        let exited = jobs.shared.workers()[&7].exited.clone();
        tokio::time::sleep(DEFAULT_IDLE_TIMEOUT - Duration::from_secs(1)).await;
        assert!(
            !exited.is_cancelled(),
            "still there before the idle timeout"
        );
        let gone = tokio::time::timeout(Duration::from_secs(2), exited.cancelled()).await;
        assert!(gone.is_ok(), "gone once the idle timeout passed");
    }
}
