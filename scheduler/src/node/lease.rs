//! Leases: a node fires its rings only while it holds its lease on them
//! (one key per partition, `scheduler.lease_ms`, renewed every
//! `scheduler.lease_renew_ms`), and it stands by for one other node: when
//! that node's lease lapses (killed, frozen, cut off from Redis), it takes
//! the coming fires of its rings into its own ring and fires them, well
//! before ZooKeeper ends the dead node's session and the leader moves what
//! is left.
//!
//! * **Holding.** A renewal sent at `t` that Redis answered keeps the
//!   lease until `t + lease_ms`; the node counts on it until
//!   `t + lease_ms - lease_renew_ms` (a slow answer ends firing early,
//!   never late). Past that, nothing leaves the wheel.
//! * **Lapsed.** A renewal that finds the lease gone (the node was frozen
//!   or unreachable past it) means a standby may have taken fires: the node
//!   drops everything it loaded, takes its lease again and reloads its
//!   rings from the start, so it never fires a member that was taken. A
//!   fire it had published just as the lease lapsed, and that the standby
//!   takes too, runs once (the executor's trigger-id dedupe); its ack finds
//!   the member gone and counts a double publish.
//! * **Standing by.** The standby of a node is the same rendezvous rule as
//!   a job's node, over the live nodes but that one. A take is
//!   `lua/take_ring.lua`: it checks the lease in the same step, so a node
//!   that renewed keeps its ring.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rondo_core::clock;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Entry, Firing, Loaded, Loads};
use crate::leader::assign::standby_of;
use crate::store::Renewal;

/// Members one take moves per partition, at most (a backlog is taken over
/// the following renewals).
const TAKE_LIMIT: usize = 10_000;

impl Firing {
    /// Whether this node may fire now: it holds its lease.
    pub(super) fn lease_held(&self) -> bool {
        self.config.lease_ms == 0 || clock::now_ms() < self.lease.held_until.load(Ordering::Acquire)
    }

    /// How many times the lease has lapsed: a load that read under an
    /// earlier count drops what it read.
    pub(super) fn lease_generation(&self) -> u64 {
        self.lease.generation.load(Ordering::Acquire)
    }

    /// Puts `entry` back on the wheel at `due_ms`, unless the lease lapsed
    /// since it was loaded: then it is dropped (the lapse cleared the wheel,
    /// a standby may have taken it, and the reload reads the ring again).
    /// Checked under the wheel's lock, which a lapse holds.
    pub(super) fn requeue(&self, due_ms: i64, entry: Entry) {
        let mut wheel = self.wheel.lock().expect("wheel lock");
        if entry.generation == self.lease_generation() {
            wheel.insert(due_ms, entry);
        }
    }

    /// Renews the leases (and stands by) until `shutdown`; then gives them
    /// up, so the standby takes what is left at once.
    pub(super) async fn lease_loop(
        self: Arc<Self>,
        nodes: watch::Receiver<Vec<String>>,
        shutdown: CancellationToken,
    ) {
        if self.config.lease_ms == 0 {
            // Leases off: nothing to hold, no one to stand by for.
            return;
        }
        let every = Duration::from_millis(self.config.lease_renew_ms.max(1));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut acquire = true;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            match self.renew(acquire).await {
                Ok(held) => acquire = !held,
                Err(e) => tracing::warn!(error = %e, "renewing the ring leases failed; retrying"),
            }
            if self.lease_held() {
                let live = nodes.borrow().clone();
                if let Err(e) = self.stand_by(&live).await {
                    tracing::warn!(error = %e, "looking at the leases stood by for failed");
                }
            }
        }
    }

    /// One renewal (or taking the leases, after a lapse or at start);
    /// whether the node holds them now.
    async fn renew(&self, acquire: bool) -> Result<bool, rondo_core::Error> {
        let sent = clock::now_ms();
        let lease_ms = self.config.lease_ms;
        let answers = self
            .store
            .node()
            .renew_leases(&self.node, &self.lease.token, lease_ms, acquire)
            .await?;
        if answers.iter().all(|a| *a == Renewal::Held) {
            let until = sent + (lease_ms - self.config.lease_renew_ms) as i64;
            self.lease.held_until.fetch_max(until, Ordering::AcqRel);
            if acquire {
                // Taken (again): what is in the rings now is this node's.
                self.wake.notify_one();
                self.load_now.notify_one();
            }
            return Ok(true);
        }
        // Lapsed: a standby may have taken fires. Stop, forget what was
        // loaded, and take the lease again on the next tick.
        self.lease.held_until.store(0, Ordering::Release);
        {
            // All under the wheel's lock: a load or a fire that checks the
            // generation under it sees the lapse, or finishes before it.
            let mut wheel = self.wheel.lock().expect("wheel lock");
            self.lease.generation.fetch_add(1, Ordering::AcqRel);
            wheel.clear();
            *self.loaded.lock().expect("loaded lock") = Loaded::default();
            *self.loads.lock().expect("loads lock") = Loads::default();
        }
        metrics::counter!("rondo_lease_lapses_total").increment(1);
        tracing::warn!(
            "this node's ring lease lapsed: dropped what it had loaded; taking it again"
        );
        Ok(false)
    }

    /// Takes the coming fires of the nodes this one stands by for, where
    /// their lease has lapsed.
    async fn stand_by(&self, live: &[String]) -> Result<(), rondo_core::Error> {
        let mine: Vec<&String> = live
            .iter()
            .filter(|n| **n != self.node && standby_of(n, live) == Some(&self.node))
            .collect();
        let until = clock::now_ms() + self.config.load_ahead_ms;
        let mut taken_all = 0;
        for other in mine {
            let held = self.store.node().leases_held(other).await?;
            for (p, held) in held.into_iter().enumerate() {
                if held {
                    continue;
                }
                let p = p as u32;
                if let Some(taken) = self
                    .store
                    .node()
                    .take_ring(p, other, &self.node, until, TAKE_LIMIT)
                    .await?
                    && taken > 0
                {
                    tracing::warn!(node = %other, partition = p, taken, "took the fires of a node whose lease lapsed");
                    metrics::counter!("rondo_lease_taken_fires_total").increment(taken);
                    self.stats.taken.fetch_add(taken, Ordering::Relaxed);
                    taken_all += taken;
                }
            }
        }
        if taken_all > 0 {
            // Below the loads' horizon: read the rings from the start now.
            *self.loads.lock().expect("loads lock") = Loads::default();
            self.load_now.notify_one();
        }
        Ok(())
    }

    /// Gives up the leases (a graceful stop).
    pub(super) async fn release_leases(&self) {
        if self.config.lease_ms == 0 {
            return;
        }
        self.lease.held_until.store(0, Ordering::Release);
        if let Err(e) = self.store.node().release_leases(&self.node).await {
            tracing::warn!(error = %e, "releasing the ring leases failed; they lapse by themselves");
        }
    }
}
