//! What every node does with the fires assigned to it: **load** its rings
//! into the wheel, release each fire at its millisecond and **fire** it
//! (dispatch), and **ack** it (remove it from the ring) once the broker
//! confirmed it.
//!
//! A fire whose dispatch fails (broker or Redis unavailable) stays in the
//! ring and goes back on the wheel with a backoff, so a claimed fire is
//! published at least once. A fire whose job was deleted or stopped since
//! the claim is dropped from the ring.
//!
//! # Layout
//!
//! * [`Firing`] (here): the node's wheel, what is loaded, the counters.
//! * [`wheel`]: the in-memory millisecond wheel (pure).
//! * `load`: reading the rings into the wheel, incrementally.
//! * `fire`: releasing due fires, dispatching, retrying with backoff.
//! * `ack`: ring acks of one partition, batched (group commit).

mod ack;
mod fire;
mod load;
pub mod wheel;

use std::collections::HashSet;
use std::sync::Arc;

use rondo_core::Job;
use rondo_core::batcher::Batcher;
use rondo_core::config::SchedulerConfig;
use rondo_core::histogram::Histogram;
use rondo_dispatcher::Dispatcher;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::store::Store;
use wheel::Wheel;

/// A fire on the wheel.
#[derive(Debug, Clone)]
struct Entry {
    partition: u32,
    member: String,
    job: Arc<Job>,
    fire_ms: i64,
    /// A misfire fired now (trigger type `MISFIRE`), not a scheduled fire.
    misfire: bool,
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
        Arc::new(Firing {
            acks: ack::batcher(store.clone(), node.clone()),
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
}
