//! Firing: release each fire at its millisecond, dispatch it, ack its ring
//! member once the broker confirmed it; a fire whose dispatch failed goes
//! back on the wheel with a backoff (it stays in the persisted ring).

use std::sync::Arc;
use std::time::Duration;

use rondo_core::backoff::Backoff;
use rondo_core::clock;
use rondo_dispatcher::Fire;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::{Entry, Firing};

/// The first and the longest wait between two dispatch attempts of a fire.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

impl Firing {
    pub(super) async fn fire_loop(
        self: Arc<Self>,
        shutdown: CancellationToken,
        tracker: TaskTracker,
    ) {
        loop {
            let next = self.wheel.lock().expect("wheel lock").next_due();
            let wait_ms = next.map_or(1_000, |due| (due - clock::now_ms()).clamp(0, 1_000));
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.wake.notified() => continue,
                _ = tokio::time::sleep(Duration::from_millis(wait_ms as u64)) => {}
            }
            // Without the lease, nothing leaves the wheel (a standby may be
            // firing these rings): wait for the renewal.
            if !self.lease_held() {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(self.config.lease_renew_ms.max(1))) => {}
                }
                continue;
            }
            // Admission: as many due fires as there are free slots; the
            // others stay on the wheel, in order, and go out late.
            let free = self.in_flight.available_permits();
            if free == 0 {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    permit = self.in_flight.clone().acquire_owned() => drop(permit),
                }
                continue;
            }
            let due = self
                .wheel
                .lock()
                .expect("wheel lock")
                .pop_due_at_most(clock::now_ms(), free);
            for (due_ms, entry) in due {
                let Ok(slot) = self.in_flight.clone().try_acquire_owned() else {
                    // Only this loop takes slots: cannot happen; keep the fire.
                    self.requeue(due_ms, entry);
                    continue;
                };
                let span = tracing::info_span!("fire", job_id = entry.job.id, fire_ms = entry.fire_ms, node = %self.node);
                tracker.spawn(self.clone().fire_one(entry, slot).instrument(span));
            }
        }
    }

    /// Dispatches one fire and acks it; `_slot` is its place among the fires
    /// in flight, freed when it is settled (or back on the wheel).
    async fn fire_one(self: Arc<Self>, entry: Entry, _slot: OwnedSemaphorePermit) {
        if !self.lease_held() || entry.generation != self.lease_generation() {
            // The lease ran out since the wheel released it: back on the
            // wheel for the renewal, or, if it lapsed since this was
            // loaded, dropped (never fire what a standby may have taken).
            self.requeue(entry.fire_ms, entry);
            return;
        }
        let fire = if entry.misfire {
            Fire::misfire(entry.job.clone(), entry.fire_ms)
        } else {
            Fire::scheduled(entry.job.clone(), entry.fire_ms)
        };
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
                let lateness_ms = confirmed_ms - entry.fire_ms;
                self.stats.publish_lateness.record(lateness_ms);
                metrics::histogram!("rondo_fire_lateness_seconds")
                    .record(lateness_ms.max(0) as f64 / 1000.0);
                metrics::counter!("rondo_fires_total").increment(1);
                self.loaded
                    .lock()
                    .expect("loaded lock")
                    .acked(entry.member, clock::now_ms());
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
        let backoff = Backoff::nth(RETRY_FIRST, RETRY_MAX, entry.attempt).as_millis() as i64;
        tracing::warn!(error = %error, attempt = entry.attempt, backoff_ms = backoff, "dispatch failed; will retry");
        entry.attempt += 1;
        self.stats
            .retried
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.requeue(clock::now_ms() + backoff, entry);
        self.wake.notify_one();
    }
}
