//! Fast and slow lanes (XXL-JOB's fast / slow trigger pools).
//!
//! Every dispatch runs inside a lane: a bounded number of dispatches may be
//! in progress in each. A job whose dispatch took longer than
//! [`LaneConfig::slow_after`] more than [`LaneConfig::slow_count`] times
//! within [`LaneConfig::window`] runs in the small slow lane until the window
//! no longer holds that many slow dispatches; every other job keeps the
//! large fast lane, so a few jobs with slow routing or a slow broker path
//! cannot take every dispatch slot.
//!
//! A dispatch counts as slow only when it is also slow *for this node now*:
//! more than [`SLOW_FACTOR`] times the moving average of recent dispatches.
//! In XXL-JOB a slow trigger is one job's slow executor RPC; in rondo
//! dispatches share batches and confirms, so when the whole node is loaded
//! every dispatch takes longer, and counting those would move every job to
//! the small slow lane at once (measured: a node fell from 5 k to 2 k
//! fires/s that way). A job singled out is one slower than its peers.
//!
//! XXL-JOB counts per calendar minute and forgets everything when the minute
//! changes, so a job slow at 12:00:59 is fast again at 12:01:00; rondo's
//! window slides, so a job leaves the slow lane only after a full minute
//! with at most `slow_count` slow dispatches.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Lane sizes and the slowness rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneConfig {
    /// Dispatches in progress at once in the fast lane.
    pub fast_permits: usize,
    /// Dispatches in progress at once in the slow lane.
    pub slow_permits: usize,
    /// A dispatch that takes longer than this is slow (XXL-JOB: 500 ms).
    pub slow_after: Duration,
    /// More slow dispatches than this within `window` move a job to the
    /// slow lane (XXL-JOB: 10).
    pub slow_count: usize,
    /// The sliding window slow dispatches are counted in (XXL-JOB: 1 min).
    pub window: Duration,
}

impl Default for LaneConfig {
    fn default() -> Self {
        LaneConfig {
            fast_permits: 1024,
            slow_permits: 64,
            slow_after: Duration::from_millis(500),
            slow_count: 10,
            window: Duration::from_secs(60),
        }
    }
}

/// Which lane a dispatch runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    Fast,
    Slow,
}

/// A slow dispatch must also take this many times the recent average.
pub const SLOW_FACTOR: u64 = 4;
/// Weight of one dispatch in the moving average (1/32).
const AVERAGE_SHIFT: u32 = 5;

/// The two lanes and the slowness record of every job.
pub struct Lanes {
    config: LaneConfig,
    fast: LaneState,
    slow: LaneState,
    window: Mutex<SlowWindow>,
    /// Exponential moving average of dispatch durations (µs).
    typical_us: AtomicU64,
}

struct LaneState {
    capacity: usize,
    permits: Semaphore,
    waiting: AtomicUsize,
    dispatched: AtomicU64,
    slow_dispatches: AtomicU64,
}

impl LaneState {
    fn new(capacity: usize) -> Self {
        debug_assert!(capacity > 0);
        LaneState {
            capacity,
            permits: Semaphore::new(capacity),
            waiting: AtomicUsize::new(0),
            dispatched: AtomicU64::new(0),
            slow_dispatches: AtomicU64::new(0),
        }
    }

    fn stat(&self) -> LaneStat {
        LaneStat {
            capacity: self.capacity,
            busy: self.capacity - self.permits.available_permits(),
            waiting: self.waiting.load(Ordering::Relaxed),
            dispatched: self.dispatched.load(Ordering::Relaxed),
            slow_dispatches: self.slow_dispatches.load(Ordering::Relaxed),
        }
    }
}

impl Lanes {
    pub fn new(config: LaneConfig) -> Self {
        Lanes {
            fast: LaneState::new(config.fast_permits.max(1)),
            slow: LaneState::new(config.slow_permits.max(1)),
            window: Mutex::new(SlowWindow::new(config.window, config.slow_count)),
            typical_us: AtomicU64::new(0),
            config,
        }
    }

    /// The lane a dispatch of `job_id` starting now runs in.
    pub fn lane_of(&self, job_id: u64) -> Lane {
        let window = self.window.lock().expect("lane window lock");
        if window.is_slow(job_id, Instant::now()) {
            Lane::Slow
        } else {
            Lane::Fast
        }
    }

    /// Runs one dispatch of `job_id` in its lane: waits for a slot, runs
    /// `dispatch`, and records how long it took (the wait is not counted).
    pub async fn run<F: Future>(&self, job_id: u64, dispatch: F) -> F::Output {
        let lane = self.lane_of(job_id);
        let state = self.state(lane);
        let waiting = Waiting::new(&state.waiting);
        let permit = state.permits.acquire().await;
        drop(waiting);
        let _permit = permit.expect("lane semaphores are never closed");
        let started = Instant::now();
        let output = dispatch.await;
        let took = started.elapsed();
        state.dispatched.fetch_add(1, Ordering::Relaxed);
        let typical = self.update_typical(took);
        if took > self.config.slow_after && took > typical * SLOW_FACTOR as u32 {
            state.slow_dispatches.fetch_add(1, Ordering::Relaxed);
            self.record_slow(job_id, took);
        }
        output
    }

    /// Folds `took` into the moving average; returns the average before.
    fn update_typical(&self, took: Duration) -> Duration {
        let took_us = took.as_micros().min(u128::from(u64::MAX)) as u64;
        let before = self
            .typical_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| {
                Some(if took_us >= avg {
                    avg + ((took_us - avg) >> AVERAGE_SHIFT)
                } else {
                    avg - ((avg - took_us) >> AVERAGE_SHIFT)
                })
            })
            .unwrap_or_else(|avg| avg);
        Duration::from_micros(before)
    }

    fn record_slow(&self, job_id: u64, took: Duration) {
        let now = Instant::now();
        let mut window = self.window.lock().expect("lane window lock");
        let was_slow = window.is_slow(job_id, now);
        window.record_slow(job_id, now);
        if !was_slow && window.is_slow(job_id, now) {
            tracing::warn!(
                job_id,
                took_ms = took.as_millis() as u64,
                "job moved to the slow dispatch lane"
            );
        }
    }

    fn state(&self, lane: Lane) -> &LaneState {
        match lane {
            Lane::Fast => &self.fast,
            Lane::Slow => &self.slow,
        }
    }

    /// Counts per lane and the jobs now in the slow lane, for the status API.
    pub fn stats(&self) -> LaneStats {
        let now = Instant::now();
        let mut window = self.window.lock().expect("lane window lock");
        window.sweep(now);
        LaneStats {
            fast: self.fast.stat(),
            slow: self.slow.stat(),
            slow_jobs: window.slow_jobs(now),
        }
    }
}

/// Counts a dispatch as waiting for a slot until dropped, also when the
/// caller gives up on the dispatch while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Waiting(counter)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A snapshot of the lanes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaneStats {
    pub fast: LaneStat,
    pub slow: LaneStat,
    /// Jobs whose next dispatch runs in the slow lane, by job id.
    pub slow_jobs: Vec<SlowJob>,
}

/// One lane's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaneStat {
    /// Dispatches that may be in progress at once.
    pub capacity: usize,
    /// Dispatches in progress now.
    pub busy: usize,
    /// Dispatches waiting for a slot now.
    pub waiting: usize,
    /// Dispatches finished since start.
    pub dispatched: u64,
    /// Of those, the ones slower than the threshold.
    pub slow_dispatches: u64,
}

/// A job in the slow lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlowJob {
    pub job_id: u64,
    /// Its slow dispatches within the window.
    pub slow_in_window: usize,
}

/// The slow dispatches of each job within a sliding window. Pure: the
/// caller passes the time.
#[derive(Debug)]
pub struct SlowWindow {
    window: Duration,
    slow_count: usize,
    /// Per job, the instants of its recent slow dispatches, oldest first.
    jobs: HashMap<u64, VecDeque<Instant>>,
    records_since_sweep: usize,
}

/// Slow instants kept per job; a job past `slow_count` needs no more.
const MAX_KEPT_PER_JOB: usize = 1024;
/// The window forgets idle jobs after this many records.
const SWEEP_EVERY: usize = 256;

impl SlowWindow {
    pub fn new(window: Duration, slow_count: usize) -> Self {
        SlowWindow {
            window,
            slow_count,
            jobs: HashMap::new(),
            records_since_sweep: 0,
        }
    }

    /// Notes a slow dispatch of `job_id` that ended at `now`.
    pub fn record_slow(&mut self, job_id: u64, now: Instant) {
        let window = self.window;
        let instants = self.jobs.entry(job_id).or_default();
        instants.push_back(now);
        while instants.len() > MAX_KEPT_PER_JOB.max(self.slow_count + 1) {
            instants.pop_front();
        }
        forget_before(instants, now, window);
        self.records_since_sweep += 1;
        if self.records_since_sweep >= SWEEP_EVERY {
            self.sweep(now);
        }
    }

    /// Slow dispatches of `job_id` within the window ending at `now`.
    pub fn slow_in_window(&self, job_id: u64, now: Instant) -> usize {
        self.jobs.get(&job_id).map_or(0, |instants| {
            instants
                .iter()
                .filter(|t| within(**t, now, self.window))
                .count()
        })
    }

    /// Whether `job_id` belongs in the slow lane at `now`: more than
    /// `slow_count` slow dispatches within the window.
    pub fn is_slow(&self, job_id: u64, now: Instant) -> bool {
        self.slow_in_window(job_id, now) > self.slow_count
    }

    /// The jobs in the slow lane at `now`, by job id.
    pub fn slow_jobs(&self, now: Instant) -> Vec<SlowJob> {
        let mut slow: Vec<SlowJob> = self
            .jobs
            .keys()
            .map(|&job_id| SlowJob {
                job_id,
                slow_in_window: self.slow_in_window(job_id, now),
            })
            .filter(|j| j.slow_in_window > self.slow_count)
            .collect();
        slow.sort_by_key(|j| j.job_id);
        slow
    }

    /// Forgets slow dispatches older than the window, and jobs left with none.
    pub fn sweep(&mut self, now: Instant) {
        let window = self.window;
        self.jobs.retain(|_, instants| {
            forget_before(instants, now, window);
            !instants.is_empty()
        });
        self.records_since_sweep = 0;
    }

    /// Jobs with slow dispatches still remembered.
    pub fn tracked_jobs(&self) -> usize {
        self.jobs.len()
    }
}

fn within(t: Instant, now: Instant, window: Duration) -> bool {
    now.saturating_duration_since(t) < window
}

fn forget_before(instants: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    while instants.front().is_some_and(|t| !within(*t, now, window)) {
        instants.pop_front();
    }
}

#[cfg(test)]
mod tests;
