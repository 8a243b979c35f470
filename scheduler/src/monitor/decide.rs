//! What the monitor does with a trigger's outcome: pure rules, XXL-JOB's
//! fail monitor semantics.
//!
//! * success → the job's child jobs are triggered (`PARENT`);
//! * failure → an alarm, and, while retries remain and the failure is
//!   retryable (not an abort, not a kill, not a discard), a retry with
//!   `retry_count + 1` after the job's backoff;
//! * the final ending (a success, or a failure not retried) of a scheduled
//!   fire of a `FIX_DELAY` job → its next fire, one delay from now.

use rondo_core::Job;
use rondo_core::schedule::Schedule;

/// How a trigger ended, as the monitor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    pub success: bool,
    pub retryable: bool,
    /// The retry count of the trigger that ended (0 for a first run).
    pub retry_count: u32,
    /// A scheduled fire (`CRON`, `MISFIRE`) or a retry of one: what a fixed
    /// delay counts from.
    pub scheduled: bool,
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
    /// A `FIX_DELAY` job's next fire (ms).
    pub rearm: Option<i64>,
}

pub fn decide(job: &Job, ending: Ending, now_ms: i64) -> Decision {
    let rearm = |retried: bool| match job.schedule() {
        Ok(Schedule::FixDelay(delay)) if job.enabled && ending.scheduled && !retried => {
            now_ms.checked_add(delay)
        }
        _ => None,
    };
    if ending.success {
        return Decision {
            children: job.child_jobs.clone(),
            rearm: rearm(false),
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
        rearm: rearm(retry.is_some()),
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
            scheduled: true,
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
                scheduled: true,
            },
            0,
        );
        assert_eq!(
            d,
            Decision {
                children: vec![7, 8],
                retry: None,
                alarm: false,
                rearm: None,
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
                alarm: true,
                rearm: None,
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
                scheduled: true,
            },
            0,
        );
        assert_eq!((d.retry, d.alarm), (None, true));
    }

    #[test]
    fn a_fixed_delay_rearms_after_the_final_ending_of_a_scheduled_fire() {
        let mut j = job(1, 0, vec![]);
        j.schedule_type = rondo_core::model::ScheduleType::FixDelay;
        j.schedule_conf = "30s".into();
        let success = Ending {
            success: true,
            retryable: true,
            retry_count: 0,
            scheduled: true,
        };
        assert_eq!(decide(&j, success, 1_000).rearm, Some(31_000));
        assert_eq!(
            decide(&j, failed(0), 1_000).rearm,
            None,
            "a retry follows: the delay counts from its ending"
        );
        assert_eq!(
            decide(&j, failed(1), 1_000).rearm,
            Some(31_000),
            "the last try"
        );
        let manual = Ending {
            scheduled: false,
            ..success
        };
        assert_eq!(
            decide(&j, manual, 1_000).rearm,
            None,
            "a manual run moves nothing"
        );
        j.enabled = false;
        assert_eq!(
            decide(&j, success, 1_000).rearm,
            None,
            "a stopped job stays stopped"
        );
    }
}
