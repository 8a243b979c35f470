//! How a run ended, before it becomes an `ExecResult` on the wire.

use rondo_core::trigger::code;
use rondo_core::{ExecResult, Trigger};

use crate::error::JobError;
use crate::joblog::truncate;

/// The longest result message kept (XXL-JOB's `handle_msg`).
const MAX_MSG_BYTES: usize = 4096;

/// How a run ended: the result code and message the executor publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// [`code::SUCCESS`] (200), [`code::FAIL`] (500) or [`code::TIMEOUT`] (502).
    pub code: i32,
    pub msg: String,
    /// Whether the handler allowed a retry (false for success and for
    /// [`JobError::Abort`]).
    pub retryable: bool,
}

impl Outcome {
    pub fn is_success(&self) -> bool {
        self.code == code::SUCCESS
    }

    pub(crate) fn success() -> Self {
        Outcome {
            code: code::SUCCESS,
            msg: String::new(),
            retryable: false,
        }
    }

    /// A failure the executor itself observed (panic, unknown handler, kill).
    pub(crate) fn fail(msg: impl Into<String>) -> Self {
        Outcome {
            code: code::FAIL,
            msg: msg.into(),
            retryable: true,
        }
    }

    /// A run stopped, or refused before it started, on purpose (a kill, a
    /// block strategy): a retry would undo the decision, so none is allowed.
    pub(crate) fn stopped(msg: impl Into<String>) -> Self {
        Outcome {
            code: code::FAIL,
            msg: msg.into(),
            retryable: false,
        }
    }

    pub(crate) fn timeout(timeout_s: u32) -> Self {
        Outcome {
            code: code::TIMEOUT,
            msg: format!("timeout after {timeout_s}s"),
            retryable: true,
        }
    }

    /// What the handler returned.
    pub(crate) fn of_handler(result: Result<(), JobError>) -> Self {
        match result {
            Ok(()) => Outcome::success(),
            Err(e) => Outcome {
                code: code::FAIL,
                retryable: e.is_retryable(),
                msg: e.to_string(),
            },
        }
    }

    /// The result to publish for `trigger`.
    pub(crate) fn into_result(
        self,
        trigger: &Trigger,
        executor_id: &str,
        start_ms: i64,
        end_ms: i64,
    ) -> ExecResult {
        ExecResult {
            trigger_id: trigger.trigger_id.clone(),
            job_id: trigger.job_id,
            executor_id: executor_id.to_owned(),
            fire_ms: trigger.fire_ms,
            start_ms,
            end_ms,
            code: self.code,
            msg: truncate(
                rondo_core::model::secrets::Masker::new(&trigger.secrets).mask(self.msg),
                MAX_MSG_BYTES,
            ),
            retryable: self.retryable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_errors_map_to_500_with_their_text() {
        let fail = Outcome::of_handler(Err(JobError::fail("exit code 3")));
        assert_eq!(
            (fail.code, fail.msg.as_str(), fail.retryable),
            (500, "exit code 3", true)
        );
        let abort = Outcome::of_handler(Err(JobError::abort("bad input")));
        assert_eq!((abort.code, abort.retryable), (500, false));
        assert!(abort.msg.contains("bad input"));
        assert!(Outcome::of_handler(Ok(())).is_success());
        assert_eq!(Outcome::timeout(3).msg, "timeout after 3s");
        let killed = Outcome::stopped("killed");
        assert_eq!((killed.code, killed.retryable), (500, false));
    }
}
