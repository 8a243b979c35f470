//! The live gateway instances: `ns:xxl:gateways`, each instance scored by
//! its last renewal (every `registry.lease_ms / 4`).
//!
//! Two things go by it. A trigger redelivered after the instance that was
//! handing it off stopped is probed and sent again only once that
//! instance's lease ran out (before, the instance may still be sending
//! it). And duties that need doing once, not by every instance (the
//! lost-trigger scan of an executor), go to the live instance that
//! rendezvous hashing of the executor id picks.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::redis::Pool;
use rondo_core::{Error, Names, clock};
use tokio_util::sync::CancellationToken;

/// Entries older than this many leases are swept from the set.
const SWEEP_LEASES: i64 = 30;

#[derive(Clone)]
pub struct Instances {
    pool: Pool,
    names: Names,
    me: String,
    lease_ms: i64,
    /// The instances live at the last renewal, sorted.
    live: Arc<RwLock<Vec<String>>>,
    /// When the last renewal that went through began (ms); 0: none yet.
    renewed_ms: Arc<AtomicI64>,
}

impl Instances {
    pub fn new(pool: Pool, names: Names, me: String, lease_ms: u64) -> Instances {
        Instances {
            pool,
            names,
            live: Arc::new(RwLock::new(vec![me.clone()])),
            renewed_ms: Arc::new(AtomicI64::new(0)),
            me,
            lease_ms: lease_ms as i64,
        }
    }

    pub fn me(&self) -> &str {
        &self.me
    }

    /// Renews this instance's lease and reads who else is live, every
    /// `lease_ms / 4` until `stop`; on the way out the lease is dropped, so
    /// the others take over at once (`stop` comes once this instance's
    /// hand-offs ended).
    pub async fn run(self, stop: CancellationToken) {
        let period = Duration::from_millis((self.lease_ms / 4).max(1) as u64);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.renew().await {
                tracing::warn!(error = %e, "cannot renew the gateway's lease");
            }
        }
        let removed: Result<(), Error> = async {
            let mut conn = self.pool.get().await?;
            let () = conn.zrem(self.names.xxl_gateways(), &self.me).await?;
            Ok(())
        }
        .await;
        if let Err(e) = removed {
            tracing::warn!(error = %e, "cannot drop the gateway's lease");
        }
    }

    async fn renew(&self) -> Result<(), Error> {
        let now = clock::now_ms();
        let key = self.names.xxl_gateways();
        let (live,): (Vec<String>,) = redis::pipe()
            .zadd(&key, &self.me, now)
            .ignore()
            .zrembyscore(&key, "-inf", now - SWEEP_LEASES * self.lease_ms)
            .ignore()
            .zrangebyscore(&key, now - self.lease_ms, "+inf")
            .query_async(&mut self.pool.get().await?)
            .await?;
        let mut live = live;
        live.sort_unstable();
        *self.live.write().expect("live lock") = live;
        self.renewed_ms.store(now, Ordering::Relaxed);
        Ok(())
    }

    /// Until when this instance may send a trigger: half a lease after its
    /// last renewal that went through (`None`: that has passed). An
    /// instance whose renewals stopped (Redis away, the process stalled) is
    /// taken for dead by the others once its lease ran out, and they take
    /// its hand-offs over; the half lease left is the margin for clock
    /// skew between instances.
    pub fn send_by(&self) -> Option<tokio::time::Instant> {
        let left = self.renewed_ms.load(Ordering::Relaxed) + self.lease_ms / 2 - clock::now_ms();
        (left > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(left as u64))
    }

    /// When instance `id` last renewed its lease, if it holds one now
    /// (read from Redis).
    pub async fn lease_of(&self, id: &str) -> Result<Option<i64>, Error> {
        let score: Option<i64> = self
            .pool
            .get()
            .await?
            .zscore(self.names.xxl_gateways(), id)
            .await?;
        Ok(score.filter(|s| *s >= clock::now_ms() - self.lease_ms))
    }

    /// Whether this instance is the one that does `duty` once for the
    /// fleet (rendezvous hashing over the live instances).
    pub fn leads(&self, duty: &str) -> bool {
        let live = self.live.read().expect("live lock");
        live.iter()
            .max_by_key(|instance| weight(instance, duty))
            .is_none_or(|chosen| *chosen == self.me)
    }
}

/// The rendezvous weight of `instance` for `duty`: FNV-1a of both, mixed
/// (murmur3's finalizer) so that names differing in a character spread.
fn weight(instance: &str, duty: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in instance.bytes().chain([0]).chain(duty.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_send_is_allowed_only_within_half_a_lease_of_the_last_renewal() {
        let config = rondo_core::config::RedisConfig::default();
        let pool = rondo_core::redis::pool(&config).expect("a pool (not connected)");
        let names = rondo_core::Config::default().names();
        let instances = Instances::new(pool, names, "g".into(), 2_000);
        assert!(instances.send_by().is_none(), "never renewed");
        let now = clock::now_ms();
        instances.renewed_ms.store(now, Ordering::Relaxed);
        let by = instances.send_by().expect("just renewed");
        let left = by - tokio::time::Instant::now();
        assert!(left <= Duration::from_millis(1_000), "{left:?}");
        assert!(left >= Duration::from_millis(900), "{left:?}");
        instances.renewed_ms.store(now - 1_001, Ordering::Relaxed);
        assert!(instances.send_by().is_none(), "more than half a lease ago");
    }

    #[test]
    fn duties_spread_over_instances_and_each_has_one_leader() {
        let live = ["g-a", "g-b", "g-c"];
        let mut led = [0; 3];
        for duty in 0..300 {
            let duty = format!("exec-{duty}");
            let chosen = live
                .iter()
                .enumerate()
                .max_by_key(|(_, i)| weight(i, &duty))
                .map(|(n, _)| n)
                .unwrap();
            led[chosen] += 1;
        }
        assert!(led.iter().all(|n| *n > 60), "{led:?}");
    }
}
