//! An executor handler that records every run (trigger id, job, scheduled
//! instant, start instant) and returns at once, for tests and benchmark
//! scenarios that count fires: what they measure is rondo's path, not a
//! handler's work.

use std::sync::{Arc, Mutex};

use rondo_core::clock;
use rondo_executor::{ExecutorBuilder, JobContext, JobError};

/// One run of the recording handler.
#[derive(Debug, Clone)]
pub struct Run {
    pub trigger_id: String,
    pub job_id: u64,
    pub fire_ms: i64,
    pub start_ms: i64,
    pub executor: String,
}

/// Shared record of runs; clone it into as many executors as needed.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Run>>>);

impl Recorder {
    pub fn runs(&self) -> Vec<Run> {
        self.0.lock().expect("runs lock").clone()
    }

    /// The runs whose scheduled instant is in `[from_ms, to_ms)`.
    pub fn runs_between(&self, from_ms: i64, to_ms: i64) -> Vec<Run> {
        let runs = self.0.lock().expect("runs lock");
        let window = from_ms..to_ms;
        runs.iter()
            .filter(|r| window.contains(&r.fire_ms))
            .cloned()
            .collect()
    }

    /// How many runs have a scheduled instant in `[from_ms, to_ms)`.
    pub fn count_between(&self, from_ms: i64, to_ms: i64) -> usize {
        let runs = self.0.lock().expect("runs lock");
        let window = from_ms..to_ms;
        runs.iter().filter(|r| window.contains(&r.fire_ms)).count()
    }

    /// Waits up to `timeout` for a run of a fire scheduled at or after
    /// `fire_ms`: the positive signal that the schedule got that far.
    pub async fn until_fire(&self, fire_ms: i64, timeout: std::time::Duration) {
        crate::eventually("a run of a fire that late", timeout, || async {
            self.runs()
                .iter()
                .any(|r| r.fire_ms >= fire_ms)
                .then_some(())
        })
        .await;
    }

    /// Waits up to `timeout` until jobs `1..=jobs` each ran their fire at
    /// `fire_ms`: the positive signal that scheduling moved past it.
    pub async fn until_every_job_ran(&self, jobs: u64, fire_ms: i64, timeout: std::time::Duration) {
        crate::eventually("every job's fire to run", timeout, || async {
            let runs = self.runs();
            (1..=jobs)
                .all(|job| runs.iter().any(|r| r.job_id == job && r.fire_ms == fire_ms))
                .then_some(())
        })
        .await;
    }

    /// Waits until every job `1..=jobs` ran every second of `[from, to]`
    /// (a fire delayed by an outage may run after later ones); panics
    /// naming fires that never ran.
    pub async fn until_each_ran(
        &self,
        jobs: u64,
        from: i64,
        to: i64,
        timeout: std::time::Duration,
    ) {
        let missing = || {
            let per_fire = self.runs_per_fire();
            (1..=jobs)
                .flat_map(|job| (from..=to).step_by(1000).map(move |fire| (job, fire)))
                .filter(|f| !per_fire.contains_key(f))
                .collect::<Vec<_>>()
        };
        let waited = rondo_core::testkit::try_eventually(
            "every fire of the window to run",
            timeout,
            || async { missing().is_empty().then_some(()) },
        )
        .await;
        if let Err(timed_out) = waited {
            let missing = missing();
            panic!(
                "{timed_out}: {} (job, fire) never ran, e.g. {:?}",
                missing.len(),
                &missing[..missing.len().min(10)]
            );
        }
    }

    /// How many times each (job, fire) ran; `assert_each_ran_once` checks
    /// a window with it.
    pub fn runs_per_fire(&self) -> std::collections::HashMap<(u64, i64), usize> {
        let mut per_fire = std::collections::HashMap::new();
        for r in self.runs() {
            *per_fire.entry((r.job_id, r.fire_ms)).or_default() += 1;
        }
        per_fire
    }

    /// Every job `1..=jobs` ran every second of `[from, to]` exactly once.
    pub fn assert_each_ran_once(&self, jobs: u64, from: i64, to: i64) {
        let per_fire = self.runs_per_fire();
        for job in 1..=jobs {
            for fire in (from..=to).step_by(1000) {
                assert_eq!(
                    per_fire.get(&(job, fire)),
                    Some(&1),
                    "job {job} fire {fire}"
                );
            }
        }
    }

    /// Registers the handler `record`, which records every run here.
    pub fn register(&self, builder: ExecutorBuilder) -> ExecutorBuilder {
        self.register_as(builder, "record")
    }

    /// Registers a recording handler under another name (say `demo`, to
    /// stand beside `rondo-executor` processes of the same group).
    pub fn register_as(&self, builder: ExecutorBuilder, name: &str) -> ExecutorBuilder {
        let runs = self.0.clone();
        // Recorded when the executor calls the handler, not when its future
        // is first polled: the start is the executor's, without the wait of
        // a spawned task on a busy runtime.
        builder.handler(name, move |ctx: JobContext| {
            let run = Run {
                trigger_id: ctx.trigger_id().to_owned(),
                job_id: ctx.job_id(),
                fire_ms: ctx.fire_ms(),
                start_ms: clock::now_ms(),
                executor: ctx.executor_id().to_owned(),
            };
            runs.lock().expect("runs lock").push(run);
            std::future::ready(Ok::<(), JobError>(()))
        })
    }
}
