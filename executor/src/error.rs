//! The crate's boundary errors: what a handler returns when a run did not
//! succeed, and what building an executor can refuse.

use std::fmt::Display;

/// Why a handler's run did not succeed. The text ends up in the result's
/// `msg`.
///
/// The variant says whether a retry can help: the scheduler retries a
/// [`JobError::Fail`] while the job has retries left, and never retries a
/// [`JobError::Abort`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The run failed; a retry may succeed (a service was down, a lock was
    /// taken, ...).
    #[error("{0}")]
    Fail(String),
    /// The run failed in a way a retry cannot fix (bad params, missing
    /// input): do not retry.
    #[error("aborted: {0}")]
    Abort(String),
}

impl JobError {
    /// A retryable failure, from anything printable (`JobError::fail(e)` in a
    /// `map_err`).
    pub fn fail(reason: impl Display) -> Self {
        JobError::Fail(reason.to_string())
    }

    /// A failure no retry can fix.
    pub fn abort(reason: impl Display) -> Self {
        JobError::Abort(reason.to_string())
    }

    /// Whether the scheduler may retry the trigger.
    pub fn is_retryable(&self) -> bool {
        matches!(self, JobError::Fail(_))
    }
}

/// What [`ExecutorBuilder::build`](crate::ExecutorBuilder::build) refuses,
/// and how [`Executor::run`](crate::Executor::run) fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorError {
    /// A handler name that cannot be advertised or routed to.
    #[error("invalid handler name {name:?}: {reason}")]
    InvalidHandlerName { name: String, reason: String },
    /// Two handlers registered under one name.
    #[error("handler {0:?} is registered twice")]
    DuplicateHandler(String),
    /// An `init` / `destroy` hook for a handler that is not registered, or
    /// a second hook of one kind for the same handler.
    #[error("invalid hooks for handler {name:?}: {reason}")]
    InvalidHooks { name: String, reason: String },
    /// An executor without handlers can run nothing.
    #[error("no handlers registered")]
    NoHandlers,
    /// A config value the executor cannot work with.
    #[error("invalid config: {0}")]
    Config(String),
    /// A core task (the broker session, the heartbeat) failed while
    /// running; the executor drained and stopped.
    #[error("{0}")]
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_the_text_and_abort_says_so() {
        assert_eq!(JobError::fail("disk full").to_string(), "disk full");
        assert_eq!(
            JobError::abort("bad params").to_string(),
            "aborted: bad params"
        );
        assert!(JobError::fail("x").is_retryable());
        assert!(!JobError::abort("x").is_retryable());
    }
}
