//! Testing handlers without a broker or Redis: run a handler the way the
//! executor does (own task, timeout, panic capture) and get its outcome and
//! log lines back.
//!
//! ```
//! use rondo_executor::{JobContext, JobError, testing};
//!
//! async fn greet(ctx: JobContext) -> Result<(), JobError> {
//!     ctx.log(format!("hello {}", ctx.params()));
//!     Ok(())
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let (outcome, lines) = testing::run_handler(greet, "world").await;
//! assert!(outcome.is_success());
//! assert_eq!(lines, vec!["hello world"]);
//! # });
//! ```
//!
//! Timeouts run on tokio's clock, so a test with
//! `#[tokio::test(start_paused = true)]` checks a one-hour timeout instantly.

use std::sync::Arc;

use rondo_core::{BlockStrategy, Trigger, TriggerType};
use tokio_util::sync::CancellationToken;

use crate::context::JobContext;
use crate::handler::Handler;
use crate::joblog::JobLog;
use crate::outcome::Outcome;
use crate::workers::interrupt::Interrupt;
use crate::workers::supervisor::supervise;

/// Runs `handler` once with `params` (shard 0 of 1, no timeout).
pub async fn run_handler<H: Handler>(
    handler: H,
    params: impl Into<String>,
) -> (Outcome, Vec<String>) {
    TestRun::new(params).run(handler).await
}

/// A run with more of the trigger spelled out.
#[derive(Debug, Clone)]
pub struct TestRun {
    trigger: Trigger,
    token: CancellationToken,
}

impl TestRun {
    pub fn new(params: impl Into<String>) -> Self {
        TestRun {
            trigger: Trigger {
                trigger_id: "test-trigger".into(),
                job_id: 1,
                group: "test".into(),
                executor_id: "test-executor".into(),
                handler: "test".into(),
                params: params.into(),
                trigger_type: TriggerType::Manual,
                fire_ms: rondo_core::clock::now_ms(),
                sent_ms: rondo_core::clock::now_ms(),
                shard_index: 0,
                shard_total: 1,
                timeout_s: 0,
                block: BlockStrategy::SerialExecution,
                retry_count: 0,
                script: None,
                secrets: Default::default(),
            },
            token: CancellationToken::new(),
        }
    }

    pub fn shard(mut self, index: u32, total: u32) -> Self {
        self.trigger.shard_index = index;
        self.trigger.shard_total = total;
        self
    }

    /// Seconds; 0 = none.
    pub fn timeout_s(mut self, timeout_s: u32) -> Self {
        self.trigger.timeout_s = timeout_s;
        self
    }

    pub fn trigger_id(mut self, trigger_id: impl Into<String>) -> Self {
        self.trigger.trigger_id = trigger_id.into();
        self
    }

    pub fn job_id(mut self, job_id: u64) -> Self {
        self.trigger.job_id = job_id;
        self
    }

    /// A script job's trigger: its script type, source and version.
    pub fn script(mut self, glue_type: &str, source: &str, version: u32) -> Self {
        self.trigger.script = Some(rondo_core::trigger::Script {
            glue_type: glue_type.to_owned(),
            source: source.to_owned(),
            version,
            updated_ms: 0,
        });
        self
    }

    /// A token the test cancels to play an executor shutdown.
    pub fn shutdown_token(mut self, token: CancellationToken) -> Self {
        self.token = token;
        self
    }

    /// Runs the handler; returns its outcome and every line it logged.
    pub async fn run<H: Handler>(self, handler: H) -> (Outcome, Vec<String>) {
        let log = JobLog::for_trigger(&self.trigger);
        let interrupt = Interrupt::new(self.token.child_token());
        let ctx = JobContext::new(
            &self.trigger,
            &self.trigger.executor_id,
            log.clone(),
            interrupt.token().clone(),
        );
        let outcome = supervise(Arc::new(handler), ctx, self.trigger.timeout_s, &interrupt).await;
        log.close();
        (outcome, log.drain_texts())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rondo_core::trigger::code;

    use super::*;
    use crate::error::JobError;

    async fn sleepy(ctx: JobContext) -> Result<(), JobError> {
        ctx.log("going to sleep");
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(3600)) => Ok(()),
            () = ctx.cancelled() => {
                ctx.log("woken by cancellation");
                Err(JobError::fail("cancelled"))
            }
        }
    }

    async fn stubborn(ctx: JobContext) -> Result<(), JobError> {
        ctx.log("ignoring cancellation");
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_cancels_the_token_and_reports_502() {
        let started = tokio::time::Instant::now();
        let (outcome, lines) = TestRun::new("").timeout_s(5).run(sleepy).await;
        assert_eq!(outcome.code, code::TIMEOUT);
        assert_eq!(outcome.msg, "timeout after 5s");
        assert_eq!(lines, vec!["going to sleep", "woken by cancellation"]);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_ignoring_the_timeout_is_aborted_after_the_grace() {
        let started = tokio::time::Instant::now();
        let (outcome, _) = TestRun::new("").timeout_s(2).run(stubborn).await;
        assert_eq!(outcome.code, code::TIMEOUT);
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(2) + crate::workers::supervisor::KILL_GRACE
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_lets_the_handler_answer_within_the_grace() {
        let shutdown = CancellationToken::new();
        let cancel = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            cancel.cancel();
        });
        let (outcome, _) = TestRun::new("").shutdown_token(shutdown).run(sleepy).await;
        assert_eq!(
            (outcome.code, outcome.msg.as_str()),
            (code::FAIL, "cancelled")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout_means_none() {
        let handler = |ctx: JobContext| async move {
            tokio::time::sleep(Duration::from_secs(7200)).await;
            ctx.log("done");
            Ok(())
        };
        let (outcome, lines) = run_handler(handler, "").await;
        assert!(outcome.is_success());
        assert_eq!(lines, vec!["done"]);
    }

    #[tokio::test]
    async fn panics_become_failures() {
        let handler = |_ctx: JobContext| async move {
            if true {
                panic!("kaboom");
            }
            Ok(())
        };
        let (outcome, _) = run_handler(handler, "").await;
        assert_eq!(outcome.code, code::FAIL);
        assert_eq!(outcome.msg, "handler panicked: kaboom");
        let formatted = |_ctx: JobContext| async move {
            let n = 3;
            if n == 3 {
                panic!("bad {n}");
            }
            Ok(())
        };
        assert_eq!(
            run_handler(formatted, "").await.0.msg,
            "handler panicked: bad 3"
        );
    }

    #[tokio::test]
    async fn context_carries_the_trigger() {
        let handler = |ctx: JobContext| async move {
            ctx.log(format!(
                "{} {} {}/{} {}",
                ctx.trigger_id(),
                ctx.params(),
                ctx.shard_index(),
                ctx.shard_total(),
                ctx.job_id()
            ));
            Ok(())
        };
        let (_, lines) = TestRun::new("p")
            .trigger_id("t-9")
            .job_id(4)
            .shard(2, 3)
            .run(handler)
            .await;
        assert_eq!(lines, vec!["t-9 p 2/3 4"]);
    }
}
