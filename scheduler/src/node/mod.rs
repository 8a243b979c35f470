//! What every node does with the fires assigned to it: **load** its rings
//! into the wheel, release each fire at its millisecond and **fire** it
//! (dispatch), and **ack** it (remove it from the ring) once the broker
//! confirmed it; all of it only while it holds its **lease** on its rings,
//! and standing by for another node's.
//!
//! A fire whose dispatch fails (broker or Redis unavailable) stays in the
//! ring and goes back on the wheel with a backoff, so a claimed fire is
//! published at least once. A fire whose job was deleted or stopped since
//! the claim is dropped from the ring.
//!
//! # Layout
//!
//! * [`Firing`] (here): the node's wheel, what is loaded, the counters:
//!   the state that `load` and `fire` work on (they use this file; it uses
//!   neither).
//! * [`wheel`]: the in-memory millisecond wheel (pure).
//! * `load`: reading the rings into the wheel, incrementally.
//! * `fire`: releasing due fires, dispatching, retrying with backoff.
//! * `ack`: ring acks of one partition, batched (group commit).
//! * `lease`: holding the lease on this node's rings, and taking a lapsed
//!   one's fires as its standby.

mod ack;
mod fire;
mod lease;
mod load;
pub mod wheel;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};

use rondo_core::Job;
use rondo_core::batcher::Batcher;
use rondo_core::config::SchedulerConfig;
use rondo_core::histogram::Histogram;
use rondo_dispatcher::Dispatcher;
use tokio::sync::{Notify, Semaphore, watch};
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
    /// The lease generation it was loaded under: once the lease lapsed
    /// since, it is dropped rather than fired or put back (a standby may
    /// have taken it; the reload reads the ring again).
    generation: u64,
}

/// The members a reload must skip: those on the wheel or being dispatched
/// (live), and those acked lately. A ring read sent before an ack's `ZREM`
/// landed may still list its member, so an acked member is skipped until a
/// load whose read was sent after the ack.
#[derive(Debug, Default)]
struct Loaded {
    /// Every member skipped, with its partition.
    members: HashMap<String, u32>,
    /// Acked members with the instant their ack was confirmed, oldest first.
    acked: VecDeque<(i64, String)>,
    /// Live members (not acked) per partition, and in all.
    live: HashMap<u32, usize>,
    live_total: usize,
}

impl Loaded {
    /// A member put on the wheel.
    fn insert(&mut self, member: String, partition: u32) {
        if self.members.insert(member, partition).is_none() {
            *self.live.entry(partition).or_default() += 1;
            self.live_total += 1;
        }
    }

    fn contains(&self, member: &str) -> bool {
        self.members.contains_key(member)
    }

    /// Fires on the wheel or in flight: what `scheduler.max_fires_loaded`
    /// bounds.
    fn live(&self) -> usize {
        self.live_total
    }

    fn live_in(&self, partition: u32) -> usize {
        self.live.get(&partition).copied().unwrap_or(0)
    }

    fn acked(&mut self, member: String, at_ms: i64) {
        if let Some(p) = self.members.get(&member)
            && let Some(n) = self.live.get_mut(p)
            && *n > 0
        {
            *n -= 1;
            self.live_total -= 1;
        }
        self.acked.push_back((at_ms, member));
    }

    /// Forgets the members acked before a read sent at `read_at_ms`: that
    /// read and every later one no longer list them.
    fn forget_acked_before(&mut self, read_at_ms: i64) {
        while let Some((at, _)) = self.acked.front()
            && *at < read_at_ms
        {
            let (_, member) = self.acked.pop_front().expect("front exists");
            self.members.remove(&member);
        }
    }
}

/// Where the loads stand.
#[derive(Debug, Default)]
struct Loads {
    /// Loads done since the last failure (the first reads everything).
    count: u64,
    /// Everything due by this instant is loaded (or acked).
    horizon: i64,
    /// The last load was cut: the rings hold fires it left there.
    behind: bool,
}

/// This node's lease on its rings.
#[derive(Debug)]
struct Lease {
    /// The value of its lease keys: this process's own.
    token: String,
    /// The node fires only before this instant (ms): its last answered
    /// renewal's sending plus `lease_ms - lease_renew_ms`.
    held_until: AtomicI64,
    /// Counts the lapses: a load read under an earlier one is dropped.
    generation: AtomicU64,
}

/// Counters the API reports.
#[derive(Debug, Default)]
pub struct FiringStats {
    pub fired: std::sync::atomic::AtomicU64,
    pub retried: std::sync::atomic::AtomicU64,
    /// Fires taken from nodes whose lease lapsed, as their standby.
    pub taken: AtomicU64,
    /// Fires this node published whose ring member was gone at the ack:
    /// taken by a standby, or moved by the leader, which publish them too
    /// (the executor runs a trigger id once).
    pub double_published: Arc<AtomicU64>,
    /// Broker-confirmed publish minus the scheduled instant, per fire.
    pub publish_lateness: Histogram,
}

pub struct Firing {
    store: Store,
    dispatcher: Arc<Dispatcher>,
    node: String,
    config: SchedulerConfig,
    wheel: std::sync::Mutex<Wheel<Entry>>,
    /// Members a reload skips.
    loaded: std::sync::Mutex<Loaded>,
    wake: Notify,
    /// Asks the loader for a load now (a take, a lease taken again).
    load_now: Notify,
    lease: Lease,
    /// Ring acks of one partition, batched (group commit).
    acks: Batcher<u32, String, ()>,
    /// A slot per fire handed to the dispatcher and not yet settled
    /// (`scheduler.max_fires_in_flight`).
    in_flight: Arc<Semaphore>,
    /// Where the loads stand (incremental or from the start).
    loads: std::sync::Mutex<Loads>,
    pub stats: FiringStats,
}

impl Firing {
    pub fn new(
        store: Store,
        dispatcher: Arc<Dispatcher>,
        node: String,
        config: SchedulerConfig,
    ) -> Arc<Self> {
        let stats = FiringStats::default();
        Arc::new(Firing {
            acks: ack::batcher(store.clone(), node.clone(), stats.double_published.clone()),
            in_flight: Arc::new(Semaphore::new(config.max_fires_in_flight.max(1))),
            loads: std::sync::Mutex::new(Loads::default()),
            store,
            dispatcher,
            node,
            config,
            wheel: std::sync::Mutex::new(Wheel::default()),
            loaded: std::sync::Mutex::new(Loaded::default()),
            wake: Notify::new(),
            load_now: Notify::new(),
            lease: Lease {
                token: rondo_core::auth::new_secret(),
                held_until: AtomicI64::new(0),
                generation: AtomicU64::new(0),
            },
            stats,
        })
    }

    /// Fires waiting on the wheel.
    pub fn wheel_len(&self) -> usize {
        self.wheel.lock().expect("wheel lock").len()
    }

    /// Fires this node holds: on the wheel or in flight (at most
    /// `scheduler.max_fires_loaded`).
    pub fn loaded(&self) -> usize {
        self.loaded.lock().expect("loaded lock").live()
    }

    /// Fires handed to the dispatcher and not yet settled.
    pub fn in_flight(&self) -> usize {
        self.config.max_fires_in_flight.max(1) - self.in_flight.available_permits()
    }

    /// Runs the lease (standing by for the node `nodes` make this one the
    /// standby of), the loader and the firing loop until `shutdown`; fires
    /// already handed to the dispatcher are tracked by `tracker`. The
    /// leases are given up once the firing loop has stopped.
    pub async fn run(
        self: Arc<Self>,
        nodes: watch::Receiver<Vec<String>>,
        shutdown: CancellationToken,
        tracker: TaskTracker,
    ) {
        let leases = CancellationToken::new();
        let lease = tokio::spawn(
            self.clone()
                .lease_loop(nodes, leases.clone())
                .instrument(tracing::info_span!("lease", node = %self.node)),
        );
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
        leases.cancel();
        let _ = lease.await;
        self.release_leases().await;
    }
}

#[cfg(test)]
mod tests {
    use super::Loaded;

    #[test]
    fn an_acked_member_is_skipped_until_a_read_sent_after_its_ack() {
        let mut loaded = Loaded::default();
        for m in ["a", "b", "c"] {
            loaded.insert(m.to_owned(), 0);
        }
        assert_eq!(loaded.live(), 3);
        loaded.acked("a".to_owned(), 100);
        loaded.acked("b".to_owned(), 105);
        assert_eq!((loaded.live(), loaded.live_in(0)), (1, 1), "c is live");
        // A read sent at 100 may have been answered before a's ZREM landed.
        loaded.forget_acked_before(100);
        assert!(loaded.contains("a") && loaded.contains("b"));
        // A read sent at 101 was answered after it: a is gone from the ring.
        loaded.forget_acked_before(101);
        assert!(!loaded.contains("a"));
        assert!(loaded.contains("b"), "acked after that read");
        assert!(loaded.contains("c"), "still on the wheel");
        loaded.forget_acked_before(200);
        assert_eq!(loaded.members.len(), 1);
        assert!(loaded.acked.is_empty());
    }
}
