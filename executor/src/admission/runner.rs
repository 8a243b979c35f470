//! The runner: takes one trigger from admission to a confirmed result.
//!
//! [`Runner::admit`] is the single entry point, in five steps:
//!
//! 1. **reserve** the trigger id in this process: a second delivery of an id
//!    already in flight here waits for the first instead of running it. The
//!    reservation holds the trigger's [`Interrupt`], so a kill finds the
//!    trigger in whatever phase it is;
//! 2. **enter** its job's worker ([`crate::workers::worker`]), which applies the
//!    block strategy: run now, wait for the running trigger
//!    (SERIAL_EXECUTION), refuse (DISCARD_LATER), or replace the running
//!    one (COVER_EARLY);
//! 3. **claim** it in Redis ([`crate::admission::dedupe`]) once it has its turn:
//!    exactly one executor gets to run an id; a mark left by an earlier
//!    attempt says what to do instead. COVER_EARLY triggers claim before
//!    step 2, so a redelivery of a trigger that already ran never stops
//!    the job's current run;
//! 4. **wait for a permit**: at most `executor.prefetch` handlers run at
//!    once (the cap counts triggers, not messages; see [`Runner`]'s
//!    `permits`);
//! 5. **execute**: run the handler under supervision while shipping its
//!    log, hand the turn back, store the result in the mark, publish log
//!    and result, mark it confirmed.
//!
//! Every Redis write of these steps (claim, result stored, confirmed) and
//! every publish (last log lines, result) is group-committed with those of
//! the other triggers in flight ([`crate::admission::dedupe`], [`crate::transport::publisher`]):
//! one pipeline or one message for many triggers, while each trigger still
//! waits for *its* answer, so the guarantees below hold per trigger
//! however many triggers a message carries.
//!
//! A trigger that does not run (refused, killed or replaced before it
//! started, unknown handler) is claimed all the same, and its result stored
//! and published like a run's, so a redelivery answers it the same way.
//!
//! # Redelivery
//!
//! A delivery is acked only once every trigger in it has [`Settled::Done`]:
//! its result confirmed by the broker, or proven to be someone else's to
//! answer. The handler runs at most once per trigger id: before it starts,
//! the `running` mark is set with `SET NX`; after it ends, the result itself
//! is stored in the mark, so a delivery redelivered after a lost publish or
//! ack republishes the stored result instead of running the handler again,
//! and a confirmed result is never lost. A process that dies mid-run leaves
//! a `running` mark of an older incarnation: the redelivery reports the run
//! as failed (500, retryable by the scheduler) and does not re-run it. A
//! trigger that was still waiting for its turn has no mark yet, and one
//! that was waiting for its permit when the executor shut down gives its
//! mark back (`DEL`): either way its redelivery runs it normally. (Only if
//! Redis refuses that `DEL` is the trigger answered with 500 "shut down
//! before the run started" instead.)
//!
//! Why one file of ~500 lines: [`Runner::admit`]'s five steps, each
//! durable before the next, read in order; the slots, the dedupe and the
//! workers it calls are files of their own.

use std::sync::Arc;
use std::time::Duration;

use rondo_core::clock::now_ms;
use rondo_core::{BlockStrategy, Event, ExecResult, Trigger};
use tokio::sync::{Notify, Semaphore, SemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::admission::dedupe::{Claim, Dedupe, Mark};
use crate::admission::slots::{Kill, Reservation, Settled, SlotGuard, Slots, wait_settled};
use crate::context::JobContext;
use crate::handler::{Handlers, SharedHandler};
use crate::joblog::JobLog;
use crate::lifecycle::Lifecycle;
use crate::outcome::Outcome;
use crate::transport::publisher::Publisher;
use crate::transport::shipper::LogShipper;
use crate::workers::interrupt::{Interrupt, KILLED};
use crate::workers::jobs::{Entry, Jobs};
use crate::workers::shared::Turn;
use crate::workers::supervisor::supervise;

/// What a runner needs; built by the executor.
pub(crate) struct RunnerParts {
    pub(crate) executor_id: String,
    pub(crate) incarnation: String,
    pub(crate) handlers: Handlers,
    pub(crate) jobs: Jobs,
    pub(crate) dedupe: Dedupe,
    pub(crate) publisher: Publisher,
    pub(crate) log_flush: Duration,
    pub(crate) max_running: usize,
    pub(crate) lifecycle: Lifecycle,
    /// Notified whenever [`Runner::running_jobs`] may have changed.
    pub(crate) changes: Arc<Notify>,
}

pub(crate) struct Runner {
    executor_id: String,
    incarnation: String,
    handlers: Handlers,
    jobs: Jobs,
    dedupe: Dedupe,
    publisher: Publisher,
    log_flush: Duration,
    lifecycle: Lifecycle,
    /// Handlers running at once at most: `executor.prefetch`, counted in
    /// triggers, over all deliveries. (The AMQP prefetch counts messages,
    /// each of which may carry hundreds of triggers: those beyond the cap
    /// wait here, claimed, for a permit.) A trigger takes its permit after
    /// its claim and gives it back when its handler ended, so the cap
    /// bounds handlers, not Redis round trips or publishes.
    permits: Semaphore,
    /// Trigger ids in flight in this process.
    slots: Slots,
    /// Triggers that ran here but whose `finished` or `confirmed` mark
    /// could not be written: their `running` mark of this incarnation
    /// means "ran". Any other `running` mark of this incarnation comes from
    /// a claim whose answer was lost (a pipeline that failed after Redis
    /// applied it): the trigger never started, and is ours to run.
    unmarked: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Entries of `Runner::unmarked` at most (each a failed mark write; the
/// set is emptied past it, which can only make a lost claim answer be
/// taken for a run, as before).
const UNMARKED_MAX: usize = 100_000;

/// Why a claim did not make the trigger ours to run.
enum NotMine {
    Held(Mark),
    Foreign(String),
    Unavailable,
}

impl Runner {
    pub(crate) fn new(parts: RunnerParts) -> Self {
        Runner {
            executor_id: parts.executor_id,
            incarnation: parts.incarnation,
            handlers: parts.handlers,
            jobs: parts.jobs,
            dedupe: parts.dedupe,
            publisher: parts.publisher,
            log_flush: parts.log_flush,
            slots: Slots::new(parts.lifecycle.kill.clone(), parts.changes),
            lifecycle: parts.lifecycle,
            permits: Semaphore::new(parts.max_running.max(1)),
            unmarked: std::sync::Mutex::default(),
        }
    }

    /// Job ids with a trigger running or waiting here, sorted (the
    /// registry's `running_jobs`).
    pub(crate) fn running_jobs(&self) -> Vec<u64> {
        self.slots.running_jobs()
    }

    /// Stops trigger `trigger_id` of job `job_id` if it is here and its
    /// handler has not ended: it ends with 500 "killed", not retryable.
    pub(crate) fn kill(&self, trigger_id: &str, job_id: u64) -> Kill {
        self.slots.kill(trigger_id, job_id)
    }

    /// Takes one trigger to the point where its delivery may be acked.
    pub(crate) async fn admit(&self, trigger: &Trigger) -> Settled {
        let guard = match self.slots.reserve(&trigger.trigger_id, trigger.job_id) {
            Reservation::Reserved(guard) => guard,
            Reservation::Joined(rx) => {
                tracing::info!(trigger_id = %trigger.trigger_id, "trigger already in flight here; not running it again");
                return wait_settled(rx).await;
            }
        };
        let settled = self.enter_and_run(trigger, &guard).await;
        guard.settle(settled);
        settled
    }

    async fn enter_and_run(&self, trigger: &Trigger, guard: &SlotGuard<'_>) -> Settled {
        let Some(handler) = self.handlers.get(&trigger.handler) else {
            tracing::warn!(handler = %trigger.handler, "unknown handler");
            guard.end();
            let outcome = if crate::handler::COMMAND_HANDLERS.contains(&trigger.handler.as_str()) {
                // Not retried: another try would meet the same executor.
                Outcome {
                    retryable: false,
                    ..Outcome::fail(format!(
                        "handler {:?} runs commands and is off on executor {}: enable it there with executor.command_handlers = true (RONDO_EXECUTOR_COMMAND_HANDLERS=true)",
                        trigger.handler, self.executor_id
                    ))
                }
            } else if trigger.handler == "script:groovy" {
                Outcome {
                    retryable: false,
                    ..Outcome::fail(format!(
                        "GLUE_GROOVY jobs run only on XXL-JOB's own executors (xxl-job-core behind rondo-xxl-gateway), not on rondo executor {}: put the job in such a group",
                        self.executor_id
                    ))
                }
            } else if let Some(interpreter) = trigger.handler.strip_prefix("script:") {
                Outcome {
                    retryable: false,
                    ..Outcome::fail(format!(
                        "script jobs run with {interpreter:?} are off on executor {}: enable them there with executor.script_handlers = [\"{interpreter}\"] (RONDO_EXECUTOR_SCRIPT_HANDLERS={interpreter}), with {interpreter} installed",
                        self.executor_id
                    ))
                }
            } else {
                Outcome::fail(format!(
                    "no handler named {:?} on executor {} (it has: {})",
                    trigger.handler,
                    self.executor_id,
                    self.handlers.names().join(",")
                ))
            };
            return Box::pin(self.answer(trigger, false, outcome)).await;
        };
        let claimed = trigger.block == BlockStrategy::CoverEarly;
        if claimed && let Err(not_mine) = self.claim(trigger).await {
            guard.end();
            return Box::pin(self.not_mine(trigger, not_mine)).await;
        }
        match self.jobs.enter(trigger, guard.interrupt()).await {
            Entry::Run(turn) => self.start(trigger, handler, turn, claimed, guard).await,
            Entry::Refuse(outcome) => {
                guard.end();
                Box::pin(self.answer(trigger, claimed, outcome)).await
            }
            Entry::Shutdown => {
                guard.end();
                Box::pin(self.abandon(trigger, claimed)).await
            }
        }
    }

    /// The trigger has its job's turn: claim, take a permit, run.
    async fn start(
        &self,
        trigger: &Trigger,
        handler: SharedHandler,
        turn: Turn,
        claimed: bool,
        guard: &SlotGuard<'_>,
    ) -> Settled {
        // The claim comes before the permit, so the permits bound handlers
        // running, not Redis round trips, and claims of triggers waiting for
        // a permit share pipelines. A trigger still waiting for its permit
        // at shutdown gives its claim back (see `abandon`).
        if !claimed && let Err(not_mine) = self.claim(trigger).await {
            drop(turn);
            guard.end();
            return Box::pin(self.not_mine(trigger, not_mine)).await;
        }
        let permit = tokio::select! {
            biased;
            () = self.lifecycle.shutdown.cancelled() => {
                drop(turn);
                guard.end();
                return Box::pin(self.abandon(trigger, true)).await;
            }
            () = guard.interrupt().token().cancelled() => {
                drop(turn);
                guard.end();
                let reason = guard.interrupt().reason().unwrap_or(KILLED);
                return Box::pin(self.answer(trigger, true, Outcome::stopped(reason))).await;
            }
            permit = self.permits.acquire() => permit.expect("the permits are never closed"),
        };
        if let Some(reason) = guard.interrupt().reason() {
            drop((permit, turn));
            guard.end();
            return Box::pin(self.answer(trigger, true, Outcome::stopped(reason))).await;
        }
        Box::pin(self.execute(trigger, handler, (permit, turn), guard)).await
    }

    /// Claims the trigger id for this executor.
    async fn claim(&self, trigger: &Trigger) -> Result<(), NotMine> {
        let mark = Mark::Running {
            executor: self.executor_id.clone(),
            incarnation: self.incarnation.clone(),
            since_ms: now_ms(),
        };
        match self.dedupe.claim(&trigger.trigger_id, &mark).await {
            Ok(Claim::Won) => Ok(()),
            Ok(Claim::Held(Mark::Running {
                executor,
                incarnation,
                ..
            })) if executor == self.executor_id
                && incarnation == self.incarnation
                && !self.ran_unmarked(&trigger.trigger_id) =>
            {
                tracing::info!(trigger_id = %trigger.trigger_id, "an earlier claim of this trigger set its mark but lost its answer; running it now");
                Ok(())
            }
            Ok(Claim::Held(mark)) => Err(NotMine::Held(mark)),
            Ok(Claim::Foreign(holder)) => Err(NotMine::Foreign(holder)),
            Err(e) => {
                tracing::warn!(error = %e, "dedupe claim failed; the delivery will be retried");
                Err(NotMine::Unavailable)
            }
        }
    }

    async fn not_mine(&self, trigger: &Trigger, not_mine: NotMine) -> Settled {
        match not_mine {
            NotMine::Held(mark) => self.resume(trigger, mark).await,
            NotMine::Foreign(holder) => {
                tracing::info!(trigger_id = %trigger.trigger_id, %holder, "trigger already taken; not running it");
                Settled::Done
            }
            NotMine::Unavailable => Settled::Requeue,
        }
    }

    /// Answers a trigger that does not run with `outcome`, claimed (unless
    /// it is already), stored and published like a run's result.
    async fn answer(&self, trigger: &Trigger, claimed: bool, outcome: Outcome) -> Settled {
        if !claimed && let Err(not_mine) = self.claim(trigger).await {
            return self.not_mine(trigger, not_mine).await;
        }
        tracing::info!(code = outcome.code, msg = %outcome.msg, "trigger answered without running");
        let now = now_ms();
        let result = outcome.into_result(trigger, &self.executor_id, now, now);
        self.store_finished(&result).await;
        self.publish_result(result).await
    }

    /// The executor shuts down before the trigger started: leave it for
    /// its redelivery, which runs it normally.
    async fn abandon(&self, trigger: &Trigger, claimed: bool) -> Settled {
        if !claimed {
            return Settled::Abandoned;
        }
        // Its `running` mark would make the redelivery report a crash: take
        // it back, or, when Redis will not let us, say what happened.
        match self.dedupe.release(&trigger.trigger_id).await {
            Ok(()) => return Settled::Abandoned,
            Err(e) => {
                tracing::warn!(error = %e, "could not release the dedupe mark of a trigger that did not run")
            }
        }
        let msg = format!(
            "executor {} shut down before the run started",
            self.executor_id
        );
        self.answer(trigger, true, Outcome::fail(msg)).await
    }

    /// A mark was there before us: decide without running the handler.
    async fn resume(&self, trigger: &Trigger, mark: Mark) -> Settled {
        let trigger_id = trigger.trigger_id.as_str();
        if let Mark::Killed { by, .. } = &mark {
            // Killed before any executor took it: answer, never run. Every
            // executor that receives it answers the same; the first result
            // counts.
            tracing::info!(trigger_id, by = %by, "trigger was killed before it started; not running it");
            let now = now_ms();
            let result = Outcome::stopped(KILLED).into_result(trigger, &self.executor_id, now, now);
            return self.publish_result(result).await;
        }
        if mark.executor() != Some(self.executor_id.as_str()) {
            tracing::info!(
                trigger_id,
                holder = mark.executor().unwrap_or_default(),
                "trigger already handled by another executor; not running it"
            );
            return Settled::Done;
        }
        match mark {
            Mark::Running { incarnation, .. } if incarnation == self.incarnation => {
                // Ours, not in flight, and (see `claim`) it ran here: its
                // later marks could not be written; its result went out
                // then.
                tracing::info!(trigger_id, "trigger already ran here; not running it again");
                Settled::Done
            }
            Mark::Running {
                incarnation,
                since_ms,
                ..
            } => {
                tracing::warn!(trigger_id, %incarnation, "trigger was running when this executor last stopped; reporting it failed");
                let msg = format!(
                    "executor {} restarted while the handler ran (incarnation {incarnation}); the run's outcome is unknown",
                    self.executor_id
                );
                let result =
                    Outcome::fail(msg).into_result(trigger, &self.executor_id, since_ms, now_ms());
                self.publish_result(result).await
            }
            Mark::Finished { result, .. } => {
                tracing::info!(
                    trigger_id,
                    "trigger already ran; republishing its stored result"
                );
                self.publish_result(result).await
            }
            Mark::Confirmed { .. } | Mark::Killed { .. } => {
                tracing::info!(
                    trigger_id,
                    "trigger already ran and its result is confirmed; not running it"
                );
                Settled::Done
            }
        }
    }

    async fn execute(
        &self,
        trigger: &Trigger,
        handler: SharedHandler,
        running: (SemaphorePermit<'_>, Turn),
        guard: &SlotGuard<'_>,
    ) -> Settled {
        let log = JobLog::for_trigger(trigger);
        let start_ms = now_ms();
        metrics::histogram!("rondo_executor_queue_wait_seconds")
            .record((start_ms - trigger.sent_ms).max(0) as f64 / 1000.0);
        let running_gauge = metrics::gauge!("rondo_executor_running");
        running_gauge.increment(1.0);
        let outcome = self
            .run_handler(trigger, handler, &log, guard.interrupt())
            .await;
        running_gauge.decrement(1.0);
        // The job's next trigger may start while this result goes out.
        drop(running);
        guard.end();
        let end_ms = now_ms();
        let kind = match outcome.code {
            rondo_core::trigger::code::SUCCESS => "success",
            rondo_core::trigger::code::TIMEOUT => "timeout",
            _ => "failure",
        };
        metrics::counter!("rondo_executor_runs_total", "outcome" => kind).increment(1);
        metrics::histogram!("rondo_executor_run_seconds")
            .record((end_ms - start_ms).max(0) as f64 / 1000.0);
        tracing::info!(code = outcome.code, elapsed_ms = end_ms - start_ms, msg = %outcome.msg, "trigger finished");
        let result = outcome.into_result(trigger, &self.executor_id, start_ms, end_ms);
        self.store_finished(&result).await;
        let shipper = LogShipper::new(&log, &self.publisher, self.log_flush);
        if !shipper.flush_all(&self.lifecycle.abandon).await {
            return Settled::Abandoned;
        }
        self.publish_result(result).await
    }

    /// Runs the handler while shipping its log lines.
    async fn run_handler(
        &self,
        trigger: &Trigger,
        handler: SharedHandler,
        log: &JobLog,
        interrupt: &Interrupt,
    ) -> Outcome {
        let token = interrupt.token().clone();
        let ctx = JobContext::new(trigger, &self.executor_id, log.clone(), token);
        let shipper = LogShipper::new(log, &self.publisher, self.log_flush);
        let handler_done = CancellationToken::new();
        let supervised = async {
            let outcome = supervise(handler, ctx, trigger.timeout_s, interrupt).await;
            handler_done.cancel();
            outcome
        };
        let (outcome, ()) = tokio::join!(supervised, shipper.run(&handler_done));
        // Lines from tasks the handler left behind would arrive after the
        // result; drop them.
        log.close();
        outcome
    }

    async fn store_finished(&self, result: &ExecResult) {
        let mark = Mark::Finished {
            executor: self.executor_id.clone(),
            result: result.clone(),
        };
        if let Err(e) = self.dedupe.set(&result.trigger_id, &mark).await {
            tracing::warn!(error = %e, "could not store the result in the dedupe mark");
            self.set_unmarked(&result.trigger_id, true);
        }
    }

    /// Whether the trigger ran here with its later marks unwritten.
    fn ran_unmarked(&self, trigger_id: &str) -> bool {
        self.unmarked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(trigger_id)
    }

    fn set_unmarked(&self, trigger_id: &str, unmarked: bool) {
        let mut set = self.unmarked.lock().unwrap_or_else(|e| e.into_inner());
        if !unmarked {
            set.remove(trigger_id);
            return;
        }
        if set.len() >= UNMARKED_MAX {
            set.clear();
        }
        set.insert(trigger_id.to_owned());
    }

    /// Publishes the result until confirmed, then marks it confirmed.
    async fn publish_result(&self, result: ExecResult) -> Settled {
        let trigger_id = result.trigger_id.clone();
        let mark = Mark::Confirmed {
            executor: self.executor_id.clone(),
            code: result.code,
        };
        if !self
            .publisher
            .publish_until_confirmed(Event::Result(result), &self.lifecycle.abandon)
            .await
        {
            tracing::warn!(
                trigger_id,
                "result not confirmed before shutdown; it stays stored for the redelivery"
            );
            return Settled::Abandoned;
        }
        match self.dedupe.set(&trigger_id, &mark).await {
            Ok(()) => self.set_unmarked(&trigger_id, false),
            Err(e) => {
                tracing::warn!(error = %e, trigger_id, "could not mark the result confirmed");
                self.set_unmarked(&trigger_id, true);
            }
        }
        Settled::Done
    }
}
