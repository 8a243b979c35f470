//! The node side of a fire: load this node's rings into the wheel, release
//! each fire at its millisecond, dispatch it, and remove it from the ring
//! once the broker confirmed it.
//!
//! A fire whose dispatch fails (broker or Redis unavailable) stays in the
//! ring and goes back on the wheel with a backoff, so a claimed fire is
//! published at least once. A fire whose job was deleted or stopped since
//! the claim is dropped from the ring.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rondo_core::batcher::{Batcher, Limits};
use rondo_core::config::SchedulerConfig;
use rondo_core::histogram::Histogram;
use rondo_core::names::parse_ring_member;
use rondo_core::{Job, clock};
use rondo_dispatcher::{Dispatcher, Fire};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::store::Store;
use crate::wheel::Wheel;

/// The longest wait between two dispatch attempts of one fire.
const MAX_RETRY_BACKOFF_MS: i64 = 5_000;

/// Every this many loads, the loader reads the rings from the start; the
/// loads in between read only past the previous load's horizon. Steady
/// schedules are claimed seconds ahead, far beyond that horizon, so the
/// incremental reads see them; what lands below it (a new job's first
/// fire, a dead node's fires moved here) waits for the next full read at
/// most `FULL_LOAD_EVERY × load_interval_ms`. At high fire rates this keeps
/// the loader from re-reading every loaded member ten times a second.
const FULL_LOAD_EVERY: u64 = 5;

/// Ring acks per Redis command at most, and commands in flight.
const ACK_LIMITS: Limits = Limits {
    max_items: 1_000,
    max_flushes: 2,
};

/// A fire on the wheel.
#[derive(Debug, Clone)]
struct Entry {
    partition: u32,
    member: String,
    job: Arc<Job>,
    fire_ms: i64,
    attempt: u32,
}

/// Counters the API reports.
#[derive(Debug, Default)]
pub struct FiringStats {
    pub fired: std::sync::atomic::AtomicU64,
    pub retried: std::sync::atomic::AtomicU64,
    /// Broker-confirmed publish minus the scheduled instant, per fire.
    pub publish_lateness: Histogram,
}

pub struct Firing {
    store: Store,
    dispatcher: Arc<Dispatcher>,
    node: String,
    config: SchedulerConfig,
    wheel: std::sync::Mutex<Wheel<Entry>>,
    /// Members on the wheel or being dispatched, so a reload skips them.
    loaded: std::sync::Mutex<HashSet<String>>,
    wake: Notify,
    /// Ring acks of one partition, batched (group commit).
    acks: Batcher<u32, String, ()>,
    /// Loads done, and the horizon of the last one.
    loads: std::sync::Mutex<(u64, i64)>,
    pub stats: FiringStats,
}

impl Firing {
    pub fn new(
        store: Store,
        dispatcher: Arc<Dispatcher>,
        node: String,
        config: SchedulerConfig,
    ) -> Arc<Self> {
        let (acker, ack_node) = (store.clone(), node.clone());
        let acks = Batcher::spawn(
            "ring ack",
            ACK_LIMITS,
            move |p: u32, members: Vec<String>| {
                let (store, node) = (acker.clone(), ack_node.clone());
                async move { store.ack_many(p, &node, &members).await }
            },
        );
        Arc::new(Firing {
            acks,
            loads: std::sync::Mutex::new((0, 0)),
            store,
            dispatcher,
            node,
            config,
            wheel: std::sync::Mutex::new(Wheel::default()),
            loaded: std::sync::Mutex::new(HashSet::new()),
            wake: Notify::new(),
            stats: FiringStats::default(),
        })
    }

    /// Fires waiting on the wheel.
    pub fn wheel_len(&self) -> usize {
        self.wheel.lock().expect("wheel lock").len()
    }

    /// Runs the loader and the firing loop until `shutdown`; fires already
    /// handed to the dispatcher are tracked by `tracker`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken, tracker: TaskTracker) {
        let loader = tokio::spawn(
            self.clone()
                .load_loop(shutdown.clone())
                .instrument(tracing::info_span!("loader", node = %self.node)),
        );
        self.clone()
            .fire_loop(shutdown, tracker)
            .instrument(tracing::info_span!("wheel", node = %self.node))
            .await;
        let _ = loader.await;
    }

    async fn load_loop(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.config.load_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.load_once().await {
                // The next load reads everything again.
                *self.loads.lock().expect("loads lock") = (0, 0);
                tracing::warn!(error = %e, "loading the ring failed; retrying");
            }
        }
    }

    /// Reads this node's rings for fires due within the load window and puts
    /// the new ones on the wheel.
    async fn load_once(&self) -> Result<(), rondo_core::Error> {
        let until = clock::now_ms() + self.config.load_ahead_ms;
        let after = {
            let mut loads = self.loads.lock().expect("loads lock");
            let (count, horizon) = *loads;
            *loads = (count + 1, until);
            (count % FULL_LOAD_EVERY != 0).then_some(horizon)
        };
        let members = self.store.read_rings(&self.node, after, until).await?;
        let fresh: Vec<(u32, String, u64, i64)> = {
            let loaded = self.loaded.lock().expect("loaded lock");
            members
                .into_iter()
                .filter(|(_, m)| !loaded.contains(m))
                .filter_map(|(p, m)| parse_ring_member(&m).map(|(job, fire)| (p, m, job, fire)))
                .collect()
        };
        if fresh.is_empty() {
            return Ok(());
        }
        let mut ids: Vec<u64> = fresh.iter().map(|f| f.2).collect();
        ids.sort_unstable();
        ids.dedup();
        let jobs = self.store.get_jobs(&ids).await?;
        let mut earliest = i64::MAX;
        for (partition, member, job_id, fire_ms) in fresh {
            let Some(job) = jobs.get(&job_id).filter(|j| j.enabled) else {
                tracing::info!(
                    job_id,
                    fire_ms,
                    "job deleted or stopped since the claim; fire dropped"
                );
                self.store.ack(partition, &self.node, &member).await?;
                continue;
            };
            self.loaded
                .lock()
                .expect("loaded lock")
                .insert(member.clone());
            let entry = Entry {
                partition,
                member,
                job: job.clone(),
                fire_ms,
                attempt: 0,
            };
            self.wheel
                .lock()
                .expect("wheel lock")
                .insert(fire_ms, entry);
            earliest = earliest.min(fire_ms);
        }
        if earliest != i64::MAX {
            self.wake.notify_one();
        }
        Ok(())
    }

    async fn fire_loop(self: Arc<Self>, shutdown: CancellationToken, tracker: TaskTracker) {
        loop {
            let next = self.wheel.lock().expect("wheel lock").next_due();
            let wait_ms = next.map_or(1_000, |due| (due - clock::now_ms()).clamp(0, 1_000));
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.wake.notified() => continue,
                _ = tokio::time::sleep(Duration::from_millis(wait_ms as u64)) => {}
            }
            let due = self
                .wheel
                .lock()
                .expect("wheel lock")
                .pop_due(clock::now_ms());
            for (_, entry) in due {
                let span = tracing::info_span!("fire", job_id = entry.job.id, fire_ms = entry.fire_ms, node = %self.node);
                tracker.spawn(self.clone().fire_one(entry).instrument(span));
            }
        }
    }

    async fn fire_one(self: Arc<Self>, entry: Entry) {
        let fire = Fire::scheduled(entry.job.clone(), entry.fire_ms);
        let outcome = match self.dispatcher.dispatch(&fire).await {
            Ok(dispatched) => self
                .acks
                .submit(entry.partition, entry.member.clone())
                .await
                .map(|()| dispatched.confirmed_ms),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(confirmed_ms) => {
                self.stats
                    .publish_lateness
                    .record(confirmed_ms - entry.fire_ms);
                self.loaded
                    .lock()
                    .expect("loaded lock")
                    .remove(&entry.member);
                self.stats
                    .fired
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => self.retry_later(entry, &e),
        }
    }

    /// Puts a fire that could not be dispatched back on the wheel; it stays
    /// in the persisted ring meanwhile.
    fn retry_later(&self, mut entry: Entry, error: &rondo_core::Error) {
        let backoff = (100_i64 << entry.attempt.min(6)).min(MAX_RETRY_BACKOFF_MS);
        tracing::warn!(error = %error, attempt = entry.attempt, backoff_ms = backoff, "dispatch failed; will retry");
        entry.attempt += 1;
        self.stats
            .retried
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.wheel
            .lock()
            .expect("wheel lock")
            .insert(clock::now_ms() + backoff, entry);
        self.wake.notify_one();
    }
}
