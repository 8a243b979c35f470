//! A handler's `init` and `destroy` hooks (XXL-JOB's `IJobHandler.init()` /
//! `destroy()`): set-up and tear-down around a job's worker, not around
//! each run.
//!
//! A job's worker (see `worker`) calls `init` before the first trigger it
//! runs, and `destroy` when it exits: after its idle timeout, when the
//! executor shuts down, or before `init` of another handler when the job's
//! handler was changed. Each call runs in its own task (a panic is an
//! error, not a crash) and gets [`HOOK_TIMEOUT`], then the task is aborted.
//!
//! A failing `init` fails the trigger that was about to run with
//! `init of handler "<name>" failed: <error>` (retryable unless the hook
//! returned [`JobError::Abort`]); the job's next trigger tries `init`
//! again. A failing `destroy` is logged.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tracing::Instrument;

use crate::error::JobError;
use crate::workers::panic::panic_message;

/// How long one `init` or `destroy` call may take.
pub(crate) const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// What a hook knows: the job whose worker starts or stops, and the handler.
#[derive(Debug, Clone)]
pub struct HookContext {
    job_id: u64,
    handler: String,
    executor_id: String,
}

impl HookContext {
    pub(crate) fn new(job_id: u64, handler: &str, executor_id: &str) -> Self {
        HookContext {
            job_id,
            handler: handler.to_owned(),
            executor_id: executor_id.to_owned(),
        }
    }

    /// The job whose worker starts (`init`) or stops (`destroy`).
    pub fn job_id(&self) -> u64 {
        self.job_id
    }

    /// The handler the hook belongs to.
    pub fn handler(&self) -> &str {
        &self.handler
    }

    pub fn executor_id(&self) -> &str {
        &self.executor_id
    }
}

/// An `init` or `destroy` hook.
///
/// Implemented for every `Fn(HookContext) -> impl Future<Output =
/// Result<(), JobError>>` that is `Send + Sync + 'static`: an `async fn
/// open_pool(ctx: HookContext) -> Result<(), JobError>` or a closure
/// returning an `async move` block.
pub trait Hook: Send + Sync + 'static {
    fn call(&self, ctx: HookContext) -> BoxFuture<'static, Result<(), JobError>>;
}

impl<F, Fut> Hook for F
where
    F: Fn(HookContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    fn call(&self, ctx: HookContext) -> BoxFuture<'static, Result<(), JobError>> {
        Box::pin(self(ctx))
    }
}

pub(crate) type SharedHook = Arc<dyn Hook>;

/// Which of a handler's two hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookKind {
    Init,
    Destroy,
}

impl fmt::Display for HookKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HookKind::Init => "init",
            HookKind::Destroy => "destroy",
        })
    }
}

/// Runs one hook call in its own task, within [`HOOK_TIMEOUT`].
pub(crate) async fn run_hook(hook: SharedHook, ctx: HookContext) -> Result<(), JobError> {
    let mut task = tokio::spawn(async move { hook.call(ctx).await }.in_current_span());
    match tokio::time::timeout(HOOK_TIMEOUT, &mut task).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) if e.is_panic() => Err(JobError::fail(format!(
            "panicked: {}",
            panic_message(e.into_panic())
        ))),
        Ok(Err(_)) => Err(JobError::fail("its task was cancelled")),
        Err(_) => {
            task.abort();
            Err(JobError::fail(format!(
                "timed out after {}s",
                HOOK_TIMEOUT.as_secs()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> HookContext {
        HookContext::new(7, "report", "ex-1")
    }

    #[tokio::test]
    async fn a_hook_returns_its_result() {
        let ok: SharedHook = Arc::new(|ctx: HookContext| async move {
            assert_eq!((ctx.job_id(), ctx.handler()), (7, "report"));
            Ok(())
        });
        assert_eq!(run_hook(ok, ctx()).await, Ok(()));
        let abort: SharedHook =
            Arc::new(|_ctx: HookContext| async move { Err(JobError::abort("no database")) });
        assert_eq!(
            run_hook(abort, ctx()).await,
            Err(JobError::abort("no database"))
        );
    }

    #[tokio::test]
    async fn a_panic_is_an_error() {
        let boom: SharedHook = Arc::new(|_ctx: HookContext| async move {
            if true {
                panic!("init exploded");
            }
            Ok(())
        });
        assert_eq!(
            run_hook(boom, ctx()).await,
            Err(JobError::fail("panicked: init exploded"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_hook_times_out() {
        let hung: SharedHook = Arc::new(|_ctx: HookContext| async move {
            std::future::pending::<()>().await;
            Ok(())
        });
        let started = tokio::time::Instant::now();
        assert_eq!(
            run_hook(hung, ctx()).await,
            Err(JobError::fail("timed out after 10s"))
        );
        assert_eq!(started.elapsed(), HOOK_TIMEOUT);
    }
}
