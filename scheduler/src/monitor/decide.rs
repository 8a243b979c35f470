//! What the monitor does with a trigger's outcome: pure rules, XXL-JOB's
//! fail monitor semantics.
//!
//! * success → the job's child jobs are triggered (`PARENT`);
//! * failure → an alarm, and, while retries remain and the failure is
//!   retryable (not an abort, not a kill, not a discard), a retry with
//!   `retry_count + 1` after the job's backoff.

use rondo_core::Job;

/// How a trigger ended, as the monitor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    pub success: bool,
    pub retryable: bool,
    /// The retry count of the trigger that ended (0 for a first run).
    pub retry_count: u32,
}

/// The reaction to one ending.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// Child job ids to trigger.
    pub children: Vec<u64>,
    /// The retry to schedule: its retry count and when it is due.
    pub retry: Option<(u32, i64)>,
    /// Whether to raise an alarm.
    pub alarm: bool,
}

pub fn decide(job: &Job, ending: Ending, now_ms: i64) -> Decision {
    if ending.success {
        return Decision {
            children: job.child_jobs.clone(),
            ..Decision::default()
        };
    }
    let retry = (ending.retryable && ending.retry_count < job.retries).then(|| {
        (
            ending.retry_count + 1,
            now_ms + i64::from(job.retry_backoff_s) * 1000,
        )
    });
    Decision {
        children: Vec::new(),
        retry,
        alarm: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_core::JobSpec;

    fn job(retries: u32, backoff: u32, children: Vec<u64>) -> Job {
        let spec = JobSpec {
            group: Some("g".into()),
            handler: Some("h".into()),
            retries: Some(retries),
            retry_backoff_s: Some(backoff),
            child_jobs: Some(children),
            ..JobSpec::default()
        };
        spec.validate(1, 0, None).unwrap()
    }

    fn failed(retry_count: u32) -> Ending {
        Ending {
            success: false,
            retryable: true,
            retry_count,
        }
    }

    #[test]
    fn success_triggers_children_and_nothing_else() {
        let d = decide(
            &job(3, 0, vec![7, 8]),
            Ending {
                success: true,
                retryable: true,
                retry_count: 0,
            },
            0,
        );
        assert_eq!(
            d,
            Decision {
                children: vec![7, 8],
                retry: None,
                alarm: false
            }
        );
    }

    #[test]
    fn failure_retries_while_retries_remain_after_the_backoff() {
        let j = job(2, 30, vec![7]);
        assert_eq!(
            decide(&j, failed(0), 1_000),
            Decision {
                children: vec![],
                retry: Some((1, 31_000)),
                alarm: true
            }
        );
        assert_eq!(decide(&j, failed(1), 1_000).retry, Some((2, 31_000)));
        assert_eq!(
            decide(&j, failed(2), 1_000).retry,
            None,
            "retries exhausted"
        );
    }

    #[test]
    fn aborted_or_killed_runs_are_not_retried_but_alarmed() {
        let d = decide(
            &job(5, 0, vec![]),
            Ending {
                success: false,
                retryable: false,
                retry_count: 0,
            },
            0,
        );
        assert_eq!((d.retry, d.alarm), (None, true));
    }
}
