//! Job threads, as xxl-job-core's JobThread and the trigger admission of its
//! ExecutorBizImpl: one thread (a tokio task) per jobId, with a FIFO queue of
//! triggers, the set of logIds queued, a `running` flag, the handler it was
//! made for, and a stop reason once stopped.
//!
//! Locking: the map of threads, then (inside it) one thread's state; never
//! the other way round, never across an await.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::callback::CallbackQueue;
use crate::config::Generation;
use crate::handlers::{self, Handler, Outcome, RunContext};
use crate::joblog::{LogDir, RunLog, RunsFile};
use crate::wire::{Callback, FAIL, TIMEOUT, Trigger};

pub const KILL_REASON: &str = "scheduling center kill job.";
pub const SHUTDOWN_REASON: &str = "web container destroy and kill the job.";
const IDLE_REASON: &str = "excutor idel times over limit.";
const ORIGIN: &str = "com.xxl.job.core.thread.JobThread#run";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the job threads need around them.
pub struct Env {
    pub generation: Generation,
    pub logs: LogDir,
    pub runs: RunsFile,
    pub callbacks: CallbackQueue,
    pub idle_remove: Duration,
}

#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

struct Inner {
    env: Env,
    threads: Mutex<HashMap<i32, Arc<JobThread>>>,
    tasks: TaskTracker,
}

struct JobThread {
    job_id: i32,
    handler: Handler,
    state: Mutex<State>,
    wake: Notify,
    stop: CancellationToken,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Trigger>,
    queued: HashSet<i64>,
    running: bool,
    stop_reason: Option<String>,
}

impl JobThread {
    fn busy(&self) -> bool {
        let state = lock(&self.state);
        state.running || !state.queue.is_empty()
    }

    fn push(&self, t: Trigger, repeat_word: &str) -> Result<(), String> {
        let mut state = lock(&self.state);
        if !state.queued.insert(t.log_id) {
            return Err(format!("{repeat_word} trigger job, logId:{}", t.log_id));
        }
        state.queue.push_back(t);
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    /// Marks the thread stopped (the first reason wins) and cancels its run.
    fn stop(&self, reason: &str) {
        lock(&self.state)
            .stop_reason
            .get_or_insert_with(|| reason.to_string());
        self.stop.cancel();
    }

    fn stop_reason(&self) -> Option<String> {
        lock(&self.state).stop_reason.clone()
    }
}

impl Jobs {
    pub fn new(env: Env) -> Self {
        Jobs {
            inner: Arc::new(Inner {
                env,
                threads: Mutex::new(HashMap::new()),
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// Admits a trigger (`/run`, `/trigger`): `Err` is the failure to answer.
    pub fn trigger(&self, t: Trigger) -> Result<(), String> {
        let handler = Handler::resolve(&t)?;
        let mut threads = lock(&self.inner.threads);
        let mut reason = None;
        let mut current = threads.get(&t.job_id).cloned();
        if current
            .as_ref()
            .is_some_and(|th| !th.handler.same_as(&handler))
        {
            reason = Some(handler.change_reason());
            current = None;
        }
        if current.as_ref().is_some_and(|th| th.busy()) {
            match t.executor_block_strategy.as_deref() {
                Some("DISCARD_LATER") => return Err("block strategy effect：Discard Later".into()),
                Some("COVER_EARLY") => {
                    reason = Some("block strategy effect：Cover Early");
                    current = None;
                }
                _ => {}
            }
        }
        let thread = match current {
            Some(thread) => thread,
            None => {
                let thread = self.spawn(t.job_id, handler);
                if let Some(old) = threads.insert(t.job_id, thread.clone()) {
                    old.stop(reason.unwrap_or(KILL_REASON));
                }
                thread
            }
        };
        thread.push(t, self.inner.env.generation.repeat_word())
    }

    /// `/idleBeat`: whether the job's thread is running or has a queue.
    pub fn busy(&self, job_id: i32) -> bool {
        lock(&self.inner.threads)
            .get(&job_id)
            .is_some_and(|th| th.busy())
    }

    pub fn any_busy(&self) -> bool {
        lock(&self.inner.threads).values().any(|th| th.busy())
    }

    /// `/kill`: stops the job's thread; false when there was none.
    pub fn kill(&self, job_id: i32) -> bool {
        let removed = lock(&self.inner.threads).remove(&job_id);
        removed.map(|th| th.stop(KILL_REASON)).is_some()
    }

    pub fn stop_all(&self, reason: &str) {
        let threads: Vec<_> = lock(&self.inner.threads).drain().collect();
        for (_, thread) in threads {
            thread.stop(reason);
        }
    }

    /// Waits (at most `limit`) for every thread stopped so far to end, i.e.
    /// to have queued its callbacks.
    pub async fn join(&self, limit: Duration) {
        self.inner.tasks.close();
        if tokio::time::timeout(limit, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("job threads still running after {limit:?}");
        }
        self.inner.tasks.reopen();
    }

    fn spawn(&self, job_id: i32, handler: Handler) -> Arc<JobThread> {
        let thread = Arc::new(JobThread {
            job_id,
            handler,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            stop: CancellationToken::new(),
        });
        let inner = self.inner.clone();
        self.inner.tasks.spawn(inner.thread_loop(thread.clone()));
        thread
    }
}

impl Inner {
    async fn thread_loop(self: Arc<Self>, thread: Arc<JobThread>) {
        loop {
            let next = {
                let mut state = lock(&thread.state);
                if state.stop_reason.is_some() {
                    break;
                }
                let next = state.queue.pop_front();
                if let Some(t) = &next {
                    state.queued.remove(&t.log_id);
                }
                state.running = next.is_some();
                next
            };
            match next {
                Some(t) => self.run_one(&thread, t).await,
                None => tokio::select! {
                    () = thread.wake.notified() => {}
                    () = thread.stop.cancelled() => {}
                    () = tokio::time::sleep(self.env.idle_remove) => self.remove_if_idle(&thread),
                },
            }
        }
        // Stopped: what is still queued never runs.
        let (reason, left) = {
            let mut state = lock(&thread.state);
            state.running = false;
            state.queued.clear();
            let reason = state.stop_reason.clone().unwrap_or_default();
            (reason, std::mem::take(&mut state.queue))
        };
        for t in left {
            self.env.callbacks.push(Callback {
                log_id: t.log_id,
                log_date_time: t.log_date_time,
                handle_code: FAIL,
                handle_msg: Some(format!(
                    "{reason} [job not executed, in the job queue, killed.]"
                )),
            });
        }
        tracing::debug!(job_id = thread.job_id, %reason, "job thread stopped");
    }

    /// An idle thread leaves the map, unless a trigger came in meanwhile.
    fn remove_if_idle(&self, thread: &Arc<JobThread>) {
        let mut threads = lock(&self.threads);
        let ours = threads
            .get(&thread.job_id)
            .is_some_and(|th| Arc::ptr_eq(th, thread));
        if ours && !thread.busy() {
            threads.remove(&thread.job_id);
            thread.stop(IDLE_REASON);
        }
    }

    async fn run_one(&self, thread: &JobThread, t: Trigger) {
        let log = RunLog::new(
            self.env.logs.run_log(t.log_date_time, t.log_id),
            format!("xxl-job, JobThread-{}", t.job_id),
        );
        log.log(
            ORIGIN,
            121,
            &format!(
                "<br>----------- xxl-job job execute start -----------<br>----------- Param:{}",
                t.executor_params.as_deref().unwrap_or("null")
            ),
        );
        self.env.runs.start(&t);

        let glue_dir = self.env.logs.glue_sources();
        let ctx = RunContext {
            trigger: &t,
            log: &log,
            glue_dir: &glue_dir,
        };
        let work = async {
            let run = handlers::execute(&thread.handler, &ctx);
            let Ok(secs) = u64::try_from(t.executor_timeout) else {
                return run.await;
            };
            if secs == 0 {
                return run.await;
            }
            match tokio::time::timeout(Duration::from_secs(secs), run).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    log.log(ORIGIN, 157, "<br>----------- xxl-job job execute timeout");
                    Outcome {
                        code: TIMEOUT,
                        msg: Some("job execute timeout ".into()),
                    }
                }
            }
        };
        let finished = tokio::select! {
            outcome = work => Some(outcome),
            () = thread.stop.cancelled() => None,
        };

        let mut result = match &finished {
            Some(outcome) => {
                log.log(
                    ORIGIN,
                    187,
                    &format!(
                        "<br>----------- xxl-job job execute end(finish) -----------<br>----------- Result: handleCode={}, handleMsg = {}",
                        outcome.code,
                        outcome.msg.as_deref().unwrap_or("null")
                    ),
                );
                outcome.clone()
            }
            None => Outcome::fail(""),
        };
        // Stopped while running: the result, if any, is replaced.
        if let Some(reason) = thread.stop_reason() {
            if finished.is_none() {
                log.log(
                    ORIGIN,
                    196,
                    &format!("<br>----------- JobThread toStop, stopReason:{reason}"),
                );
                log.log(
                    ORIGIN,
                    205,
                    "<br>----------- JobThread Exception:java.lang.InterruptedException<br>----------- xxl-job job execute end(error) -----------",
                );
            }
            result = Outcome::fail(format!("{reason} [job running, killed]"));
        }

        self.env.runs.end(&t, result.code, result.msg.as_deref());
        self.env.callbacks.push(Callback {
            log_id: t.log_id,
            log_date_time: t.log_date_time,
            handle_code: result.code,
            handle_msg: result.msg,
        });
    }
}

#[cfg(test)]
mod tests;
