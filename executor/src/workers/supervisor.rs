//! Running one handler under supervision: in its own task (so a panic is a
//! result, not a crash), with the trigger's timeout, and with a short grace
//! between asking the handler to stop (its token) and aborting its task.
//!
//! The token fires for one of three reasons, and the result says which:
//!
//! | why | result |
//! | --- | --- |
//! | the trigger's timeout | 502 `timeout after Ns`, retryable |
//! | an [`Interrupt`] with a reason (kill, COVER_EARLY) | 500 with the reason, not retryable, whatever the handler answers |
//! | executor shutdown (no reason) | the handler's own answer if it comes within the grace, else 500 `killed: the executor shut down …` |

use std::time::Duration;

use tokio::task::JoinError;
use tracing::Instrument;

use crate::context::JobContext;
use crate::error::JobError;
use crate::handler::SharedHandler;
use crate::outcome::Outcome;
use crate::workers::interrupt::Interrupt;
use crate::workers::panic::panic_message;

/// How long a cancelled handler has to return before its task is aborted.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(1);

/// Why the handler's token was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Timeout,
    /// The token was cancelled from outside: a kill, a replacement, or the
    /// executor shutting down.
    Cancelled,
}

/// Runs `handler` with `ctx`, whose token must be `interrupt`'s, and
/// returns how it ended (see the module doc).
pub(crate) async fn supervise(
    handler: SharedHandler,
    ctx: JobContext,
    timeout_s: u32,
    interrupt: &Interrupt,
) -> Outcome {
    let token = interrupt.token().clone();
    let log = ctx.clone();
    // Call the handler inside the task: a handler that panics before
    // returning its future is caught too.
    let mut task = tokio::spawn(async move { handler.call(ctx).await }.in_current_span());
    let timeout = async {
        match timeout_s {
            0 => std::future::pending().await,
            s => tokio::time::sleep(Duration::from_secs(u64::from(s))).await,
        }
    };
    let stop = tokio::select! {
        // The handler may return because it saw its token: a kill or a
        // replacement that fired meanwhile still decides the result.
        joined = &mut task => return match interrupt.reason() {
            Some(reason) => stopped(&log, reason),
            None => outcome_of(joined),
        },
        () = timeout => Stop::Timeout,
        () = token.cancelled() => Stop::Cancelled,
    };
    token.cancel();
    let joined = tokio::time::timeout(KILL_GRACE, &mut task).await;
    if joined.is_err() {
        task.abort();
        tracing::warn!(?stop, "handler ignored its cancellation; task aborted");
    }
    if stop == Stop::Timeout {
        return Outcome::timeout(timeout_s);
    }
    if let Some(reason) = interrupt.reason() {
        return stopped(&log, reason);
    }
    match joined {
        Ok(joined) => outcome_of(joined),
        Err(_) => Outcome::fail("killed: the executor shut down while the handler ran"),
    }
}

/// A run stopped on purpose (kill, COVER_EARLY), said in its log too.
fn stopped(log: &JobContext, reason: &str) -> Outcome {
    log.log(format!("[rondo] run stopped: {reason}"));
    Outcome::stopped(reason)
}

fn outcome_of(joined: Result<Result<(), JobError>, JoinError>) -> Outcome {
    match joined {
        Ok(result) => Outcome::of_handler(result),
        Err(e) if e.is_panic() => {
            let message = panic_message(e.into_panic());
            tracing::warn!(panic = %message, "handler panicked");
            Outcome::fail(format!("handler panicked: {message}"))
        }
        Err(_) => Outcome::fail("handler task was cancelled"),
    }
}
