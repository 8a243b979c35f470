//! Loading: every `scheduler.load_interval_ms`, read this node's rings for
//! fires due within `scheduler.load_ahead_ms` and put the new ones on the
//! wheel.

use std::sync::Arc;
use std::time::Duration;

use rondo_core::clock;
use rondo_core::names::parse_ring_member;
use tokio_util::sync::CancellationToken;

use super::{Entry, Firing};

/// Every this many loads, the loader reads the rings from the start; the
/// loads in between read only past the previous load's horizon. Steady
/// schedules are claimed seconds ahead, far beyond that horizon, so the
/// incremental reads see them; what lands below it (a new job's first
/// fire, a dead node's fires moved here) waits for the next full read at
/// most `FULL_LOAD_EVERY × load_interval_ms`. At high fire rates this keeps
/// the loader from re-reading every loaded member ten times a second.
const FULL_LOAD_EVERY: u64 = 5;

impl Firing {
    pub(super) async fn load_loop(self: Arc<Self>, shutdown: CancellationToken) {
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
        let read_at = clock::now_ms();
        let until = read_at + self.config.load_ahead_ms;
        let after = {
            let mut loads = self.loads.lock().expect("loads lock");
            let (count, horizon) = *loads;
            *loads = (count + 1, until);
            (count % FULL_LOAD_EVERY != 0).then_some(horizon)
        };
        let members = self.store.read_rings(&self.node, after, until).await?;
        let fresh: Vec<(u32, String, u64, i64)> = {
            let mut loaded = self.loaded.lock().expect("loaded lock");
            let fresh = members
                .into_iter()
                .filter(|(_, m)| !loaded.members.contains(m))
                .filter_map(|(p, m)| parse_ring_member(&m).map(|(job, fire)| (p, m, job, fire)))
                .collect();
            // Acked before this read was sent: gone from the ring for it
            // and every later read.
            loaded.forget_acked_before(read_at);
            fresh
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
                .members
                .insert(member.clone());
            let entry = Entry {
                partition,
                misfire: rondo_core::names::is_misfire_member(&member),
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
}
