//! One job's worker (XXL-JOB's `JobThread`): the task that decides, by the
//! block strategy of each arriving trigger, which of the job's triggers on
//! this executor runs when, and that owns the handler's `init` / `destroy`
//! hooks.
//!
//! The worker does not run handlers itself: each trigger's admission (in
//! its delivery's task) asks the worker and gets a [`Decision`] — a
//! [`Turn`] to run now, or an outcome to answer with instead. The job's
//! next trigger gets its turn when the previous turn is dropped, which the
//! runner does as soon as the handler ends (before publishing its result).
//!
//! With a trigger running (or one waiting), a new trigger is handled by its
//! own `block`:
//!
//! * `SERIAL_EXECUTION`: it waits, first in first out, however many wait:
//!   a fire is never refused because of an internal bound. Its delivery
//!   stays unacked, so a crash loses nothing (it was not claimed yet and
//!   its redelivery runs it), and that is also the bound: every waiting
//!   trigger keeps its message unacked, and the broker sends no more than
//!   `executor.prefetch` unacked messages. When the window is full of
//!   waiting triggers, the executor takes nothing more from its queue
//!   (back-pressure) until a run ends; the triggers behind stay in the
//!   broker, durable, in order. A job whose runs fall far behind its
//!   schedule can so delay the executor's other jobs — the choice is the
//!   user's: DISCARD_LATER or COVER_EARLY, or a timeout, keep a job's
//!   backlog short.
//! * `DISCARD_LATER`: it is refused at once: 500 `block strategy
//!   DISCARD_LATER: job is running, trigger discarded`, not retryable.
//! * `COVER_EARLY`: the running trigger is stopped (its token fires; it
//!   ends with 500 `block strategy COVER_EARLY: replaced by trigger <id>`,
//!   not retryable), waiting ones are refused with the same result, and
//!   the new one runs as soon as the stopped one has ended — within the
//!   supervisor's one-second kill grace — so two runs of the job never
//!   overlap.
//!
//! Each trigger is judged by its own `block`, so a job whose strategy was
//! changed behaves by the new one from its next trigger on.
//!
//! The worker calls the handler's `init` before granting a turn when the
//! handler is not initialised yet (its first trigger, or the job's handler
//! was changed: the old handler's `destroy` runs first). It exits after
//! `idle_timeout` without a trigger (XXL-JOB: 30 empty polls of 3 s), or
//! once the executor shuts down and its last run ended, and calls
//! `destroy` then. A later trigger of the job starts a new worker, whose
//! `init` waits for the old worker's `destroy`, so a job's hooks never
//! overlap.

use std::collections::VecDeque;
use std::sync::Arc;

use rondo_core::BlockStrategy;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::shared::{Decision, Shared, Submit, Turn};
use crate::outcome::Outcome;
use crate::workers::hooks::{HookContext, HookKind, run_hook};
use crate::workers::interrupt::Interrupt;

/// The result of a DISCARD_LATER trigger that arrived while the job ran.
pub(crate) const DISCARDED: &str =
    "block strategy DISCARD_LATER: job is running, trigger discarded";

/// The trigger holding the turn.
struct Current {
    interrupt: Interrupt,
    /// Resolves (with an error) once the turn is dropped.
    ended: oneshot::Receiver<()>,
}

pub(crate) struct Worker {
    job_id: u64,
    generation: u64,
    shared: Arc<Shared>,
    inbox: mpsc::UnboundedReceiver<Submit>,
    current: Option<Current>,
    waiting: VecDeque<Submit>,
    /// The handler whose `init` succeeded (or that has none): `destroy` is
    /// owed for it.
    ready_for: Option<String>,
    /// Fires when the job's previous worker has finished its `destroy`.
    previous: Option<CancellationToken>,
    /// Fired when this worker is gone (also on a panic).
    exited: CancellationToken,
}

impl Worker {
    pub(crate) fn new(
        job_id: u64,
        generation: u64,
        shared: Arc<Shared>,
        inbox: mpsc::UnboundedReceiver<Submit>,
        previous: Option<CancellationToken>,
        exited: CancellationToken,
    ) -> Self {
        Worker {
            job_id,
            generation,
            shared,
            inbox,
            current: None,
            waiting: VecDeque::new(),
            ready_for: None,
            previous,
            exited,
        }
    }

    pub(crate) async fn run(mut self) {
        if let Some(previous) = self.previous.take() {
            previous.cancelled().await;
        }
        tracing::debug!("job worker started");
        loop {
            if self.current.is_none() {
                self.start_next().await;
            }
            let idle = self.is_idle();
            let shutdown = self.shared.shutdown.clone();
            tokio::select! {
                submit = self.inbox.recv() => match submit {
                    Some(submit) => self.on_submit(submit),
                    None => break,
                },
                () = run_ended(&mut self.current) => self.current = None,
                () = tokio::time::sleep(self.shared.idle_timeout), if idle => {
                    if self.retire() {
                        tracing::debug!("job worker idle; exiting");
                        break;
                    }
                }
                () = shutdown.cancelled(), if idle => {
                    if self.retire() {
                        break;
                    }
                }
            }
        }
        self.destroy().await;
        tracing::debug!("job worker stopped");
    }

    fn is_idle(&self) -> bool {
        self.current.is_none() && self.waiting.is_empty()
    }

    fn on_submit(&mut self, submit: Submit) {
        self.purge();
        if self.is_idle() {
            self.waiting.push_back(submit);
            return;
        }
        match submit.block {
            BlockStrategy::SerialExecution => self.waiting.push_back(submit),
            BlockStrategy::DiscardLater => refuse(submit, Outcome::stopped(DISCARDED)),
            BlockStrategy::CoverEarly => self.cover(submit),
        }
    }

    /// COVER_EARLY: stop the running trigger and the waiting ones; the new
    /// one runs next.
    fn cover(&mut self, submit: Submit) {
        let reason = format!(
            "block strategy COVER_EARLY: replaced by trigger {}",
            submit.trigger_id
        );
        while let Some(replaced) = self.pop_waiting() {
            replaced.interrupt.fire(&reason);
            refuse(replaced, Outcome::stopped(reason.as_str()));
        }
        if let Some(current) = &self.current {
            current.interrupt.fire(&reason);
        }
        self.waiting.push_back(submit);
    }

    /// Grants the turn to the first waiting trigger still there, after
    /// `init` if its handler needs it.
    async fn start_next(&mut self) {
        while let Some(next) = self.pop_waiting() {
            if let Err(outcome) = self.prepare(&next.handler).await {
                refuse(next, outcome);
                continue;
            }
            let (ended_tx, ended) = oneshot::channel();
            let Submit {
                interrupt, reply, ..
            } = next;
            if reply.send(Decision::Run(Turn { _ended: ended_tx })).is_ok() {
                self.current = Some(Current { interrupt, ended });
                return;
            }
            // It left (killed, or the executor is shutting down) meanwhile.
        }
    }

    /// The next waiting trigger whose admission still waits for an answer.
    fn pop_waiting(&mut self) -> Option<Submit> {
        while let Some(submit) = self.waiting.pop_front() {
            if !submit.reply.is_closed() {
                return Some(submit);
            }
        }
        None
    }

    /// Forgets waiting triggers that left (killed, executor shutting down).
    fn purge(&mut self) {
        self.waiting.retain(|w| !w.reply.is_closed());
    }

    /// Makes `handler` ready: `destroy` of the job's previous handler, then
    /// `init` of this one.
    async fn prepare(&mut self, handler: &str) -> Result<(), Outcome> {
        if self.ready_for.as_deref() == Some(handler) {
            return Ok(());
        }
        self.destroy().await;
        if let Some(init) = self.shared.handlers.hook(handler, HookKind::Init) {
            let ctx = HookContext::new(self.job_id, handler, &self.shared.executor_id);
            if let Err(e) = run_hook(init, ctx).await {
                tracing::warn!(handler, error = %e, "init hook failed");
                return Err(Outcome {
                    retryable: e.is_retryable(),
                    ..Outcome::fail(format!("init of handler {handler:?} failed: {e}"))
                });
            }
            tracing::debug!(handler, "init hook done");
        }
        self.ready_for = Some(handler.to_owned());
        Ok(())
    }

    async fn destroy(&mut self) {
        let Some(handler) = self.ready_for.take() else {
            return;
        };
        let Some(destroy) = self.shared.handlers.hook(&handler, HookKind::Destroy) else {
            return;
        };
        let ctx = HookContext::new(self.job_id, &handler, &self.shared.executor_id);
        match run_hook(destroy, ctx).await {
            Ok(()) => tracing::debug!(handler, "destroy hook done"),
            Err(e) => tracing::warn!(handler, error = %e, "destroy hook failed"),
        }
    }

    /// Stops taking triggers, unless one arrived meanwhile: the next
    /// trigger of the job starts a new worker.
    fn retire(&mut self) -> bool {
        let mut workers = self.shared.workers();
        if !self.inbox.is_empty() {
            return false;
        }
        if let Some(entry) = workers.get_mut(&self.job_id)
            && entry.generation == self.generation
        {
            entry.inbox = None;
        }
        drop(workers);
        self.inbox.close();
        true
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let mut workers = self.shared.workers();
        if workers
            .get(&self.job_id)
            .is_some_and(|entry| entry.generation == self.generation)
        {
            workers.remove(&self.job_id);
        }
        drop(workers);
        // Only after a panic are triggers still waiting: their admissions
        // see the worker gone.
        self.exited.cancel();
    }
}

fn refuse(submit: Submit, outcome: Outcome) {
    // An admission that left does not need the answer.
    let _ = submit.reply.send(Decision::Refuse(outcome));
}

/// Resolves when the current turn was dropped; pending without one.
async fn run_ended(current: &mut Option<Current>) {
    match current {
        Some(current) => {
            let _ = (&mut current.ended).await;
        }
        None => std::future::pending().await,
    }
}
