//! Which fires should have run in a window and which did: lost, duplicate
//! and unexpected fires, and the handlers' lateness.
//!
//! A job created with a fixed rate of `period` fires at `first + k·period`
//! (`first`: the `next_fire_ms` the API answered at creation). Every such
//! instant inside the window is an expected fire; one that never ran is
//! lost, one that ran more than once is a duplicate (per trigger id and per
//! job and instant: a scheduled fire's trigger id is `<job>-<fire>-0`, so
//! the two agree unless something else ran).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::latency::Latency;
use super::recorder::Run;

/// A job as created: its id and first fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Created {
    pub id: u64,
    pub first_fire_ms: i64,
}

/// What a window's runs add up to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FireCount {
    /// Fires the schedules put in the window.
    pub expected: u64,
    /// Distinct (job, instant) pairs that ran with an instant in the window.
    pub executed: u64,
    /// Expected fires that never ran.
    pub lost: u64,
    /// Up to 20 of them, `[job id, scheduled instant]`, earliest first.
    pub lost_sample: Vec<(u64, i64)>,
    /// Runs beyond the first of a (job, instant).
    pub duplicates: u64,
    /// Runs beyond the first of a trigger id.
    pub duplicate_trigger_ids: u64,
    /// Distinct (job, instant) runs no schedule expected (a misfire's
    /// replacement, a job that drifted).
    pub unexpected: u64,
    /// Handler start minus scheduled instant, first run of each fire.
    pub handler_lateness_ms: Latency,
    /// Fires whose handler started more than a second late.
    pub late_over_1s: u64,
}

/// Counts `runs` against the fires `jobs` expect in `[from_ms, to_ms)` with
/// a fixed `period_ms`.
pub(crate) fn count(
    runs: &[Run],
    jobs: &[Created],
    period_ms: i64,
    from_ms: i64,
    to_ms: i64,
) -> FireCount {
    let mut per_fire: HashMap<(u64, i64), (u64, i64)> = HashMap::new();
    let mut per_trigger: HashMap<&str, u64> = HashMap::new();
    for run in runs
        .iter()
        .filter(|r| (from_ms..to_ms).contains(&r.fire_ms))
    {
        let entry = per_fire
            .entry((run.job_id, run.fire_ms))
            .or_insert((0, run.start_ms - run.fire_ms));
        entry.0 += 1;
        entry.1 = entry.1.min(run.start_ms - run.fire_ms);
        *per_trigger.entry(run.trigger_id.as_str()).or_default() += 1;
    }
    let mut expected = HashSet::new();
    for job in jobs {
        let mut fire = first_at_or_after(job.first_fire_ms, period_ms, from_ms);
        while fire < to_ms {
            expected.insert((job.id, fire));
            fire += period_ms;
        }
    }
    let mut lost: Vec<(u64, i64)> = expected
        .iter()
        .filter(|f| !per_fire.contains_key(*f))
        .copied()
        .collect();
    lost.sort_unstable_by_key(|(job, fire)| (*fire, *job));
    let unexpected = per_fire.keys().filter(|f| !expected.contains(*f)).count();
    let lateness: Vec<i64> = per_fire.values().map(|(_, late)| *late).collect();
    FireCount {
        expected: expected.len() as u64,
        executed: per_fire.len() as u64,
        lost: lost.len() as u64,
        lost_sample: lost.into_iter().take(20).collect(),
        duplicates: per_fire.values().map(|(n, _)| n - 1).sum(),
        duplicate_trigger_ids: per_trigger.values().map(|n| n - 1).sum(),
        unexpected: unexpected as u64,
        late_over_1s: lateness.iter().filter(|l| **l > 1000).count() as u64,
        handler_lateness_ms: Latency::of(&lateness),
    }
}

/// Distinct (job, instant) pairs among `runs`.
pub(crate) fn distinct(runs: &[Run]) -> u64 {
    runs.iter()
        .map(|r| (r.job_id, r.fire_ms))
        .collect::<HashSet<_>>()
        .len() as u64
}

/// The first `first + k·period` (k ≥ 0) at or after `at`.
pub(crate) fn first_at_or_after(first: i64, period: i64, at: i64) -> i64 {
    if first >= at {
        return first;
    }
    let periods = (at - first + period - 1) / period;
    first + periods * period
}

/// Expected fires of `jobs` in `[from_ms, to_ms)`, counted without
/// building them.
pub(crate) fn expected_between(jobs: &[Created], period_ms: i64, from_ms: i64, to_ms: i64) -> u64 {
    jobs.iter()
        .map(|job| {
            let first = first_at_or_after(job.first_fire_ms, period_ms, from_ms);
            if first >= to_ms {
                0
            } else {
                ((to_ms - 1 - first) / period_ms + 1) as u64
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(job_id: u64, fire_ms: i64, start_ms: i64) -> Run {
        Run {
            trigger_id: format!("{job_id}-{fire_ms}-0"),
            job_id,
            fire_ms,
            start_ms,
            executor: String::new(),
        }
    }

    #[test]
    fn lost_duplicate_and_unexpected_fires_are_told_apart() {
        let jobs = [
            Created {
                id: 1,
                first_fire_ms: 100,
            },
            Created {
                id: 2,
                first_fire_ms: 600,
            },
        ];
        // Window [1000, 3000): job 1 at 1100, 2100; job 2 at 1600, 2600.
        let runs = vec![
            run(1, 1100, 1105),
            run(1, 1100, 1300),
            run(1, 2100, 2110),
            run(2, 1600, 3700),
            run(2, 2650, 2651),
            run(2, 600, 601),
        ];
        let c = count(&runs, &jobs, 1000, 1000, 3000);
        assert_eq!(c.expected, 4);
        assert_eq!(c.executed, 4);
        assert_eq!(c.lost, 1, "job 2 at 2600");
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.duplicate_trigger_ids, 1);
        assert_eq!(c.unexpected, 1, "job 2 at 2650");
        assert_eq!(c.late_over_1s, 1);
        assert_eq!(c.handler_lateness_ms.max, 2100);
        assert_eq!(expected_between(&jobs, 1000, 1000, 3000), 4);
    }

    #[test]
    fn the_first_fire_in_a_window() {
        assert_eq!(first_at_or_after(100, 1000, 1000), 1100);
        assert_eq!(first_at_or_after(1000, 1000, 1000), 1000);
        assert_eq!(first_at_or_after(5000, 1000, 1000), 5000);
        assert_eq!(
            expected_between(
                &[Created {
                    id: 1,
                    first_fire_ms: 0
                }],
                1000,
                0,
                1000
            ),
            1
        );
    }
}
