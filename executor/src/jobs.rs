//! The per-job workers of one executor: started on a job's first trigger,
//! found by job id, gone when idle (see `worker` for what one does).
//!
//! [`Jobs::enter`] is how an admission meets its job's worker: it hands the
//! trigger over and waits for the decision, while also watching the
//! trigger's [`Interrupt`] (a kill while it waits) and the executor's
//! shutdown (a trigger still waiting then is left for redelivery).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rondo_core::Trigger;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::handler::Handlers;
use crate::interrupt::Interrupt;
use crate::outcome::Outcome;
use crate::worker::{Decision, Submit, Turn, Worker};

/// XXL-JOB's JobThread exits after 30 empty polls of 3 s.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How many SERIAL_EXECUTION triggers may wait (see `worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) per_job: usize,
    pub(crate) total: usize,
}

impl Limits {
    /// A quarter of the prefetch window per job, half of it in all.
    pub(crate) fn for_prefetch(prefetch: u16) -> Self {
        let prefetch = usize::from(prefetch);
        Limits {
            per_job: (prefetch / 4).max(1),
            total: (prefetch / 2).max(1),
        }
    }
}

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

/// A job's worker as the map knows it.
pub(crate) struct WorkerEntry {
    /// `None` once the worker retired (it is running `destroy`).
    pub(crate) inbox: Option<mpsc::UnboundedSender<Submit>>,
    pub(crate) generation: u64,
    /// Fires when the worker is gone.
    pub(crate) exited: CancellationToken,
}

/// What the workers share.
pub(crate) struct Shared {
    pub(crate) executor_id: String,
    pub(crate) handlers: Handlers,
    pub(crate) idle_timeout: Duration,
    pub(crate) limits: Limits,
    pub(crate) shutdown: CancellationToken,
    /// SERIAL triggers waiting, over all workers.
    pub(crate) waiting_total: AtomicUsize,
    workers: Mutex<HashMap<u64, WorkerEntry>>,
    generations: AtomicU64,
    tracker: TaskTracker,
}

impl Shared {
    pub(crate) fn workers(&self) -> MutexGuard<'_, HashMap<u64, WorkerEntry>> {
        self.workers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the executor builds its workers from.
pub(crate) struct JobsParts {
    pub(crate) executor_id: String,
    pub(crate) handlers: Handlers,
    pub(crate) idle_timeout: Duration,
    pub(crate) limits: Limits,
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
                limits: parts.limits,
                shutdown: parts.shutdown,
                waiting_total: AtomicUsize::new(0),
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

    #[test]
    fn limits_keep_half_the_window_free() {
        assert_eq!(
            Limits::for_prefetch(64),
            Limits {
                per_job: 16,
                total: 32
            }
        );
        assert_eq!(
            Limits::for_prefetch(1),
            Limits {
                per_job: 1,
                total: 1
            }
        );
        assert_eq!(
            Limits::for_prefetch(6),
            Limits {
                per_job: 1,
                total: 3
            }
        );
    }
}
