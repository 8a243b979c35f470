//! What this process saw of Redis's health: since when its requests fail
//! unanswered, its last outage, and masters without their replicas.

use std::sync::Arc;

use redis::{RedisFuture, RedisResult};

/// After this long with every request failing for want of an answer
/// (timeouts, refused connections, `CLUSTERDOWN`), the next
/// [`Pool::get`](super::Pool::get) opens a new cluster connection from the seed nodes. The
/// client follows redirects and re-reads the slot map by itself, but was
/// seen to keep timing out after a second failover in a row while the
/// cluster was whole again.
pub(super) const RESET_AFTER_MS: i64 = 3_000;

/// How long [`Connection::replicate`](super::Connection::replicate) stops waiting after a `WAIT` found
/// a master without its replicas.
pub(super) const UNREPLICATED_BACKOFF_MS: i64 = 10_000;

/// Unanswered requests further apart than this are two outages.
const OUTAGE_GAP_MS: i64 = 10_000;

/// How long before this process's first unanswered request an outage may
/// have begun: a scheduler node asks every Redis (master) something at
/// least every claim tick (1 s), an executor every quarter lease.
const OUTAGE_SLACK_MS: i64 = 1_000;

/// After this process's last unanswered request, how long beyond a lease
/// an executor has to renew it before its score is trusted again. Its own
/// client may see the outage end later than this process did (a slot map
/// re-read, a replica promoted a moment later, [`RESET_AFTER_MS`] to
/// replace a stuck connection), then wait a renewal period: seen on two
/// cores under 200 jobs a second, 5 s was not enough.
const RENEW_AFTER_OUTAGE_MS: i64 = 10_000;

/// The connection's health: since when requests fail without an answer (0:
/// they do not), when this process's last outage (requests unanswered, no
/// more than [`OUTAGE_GAP_MS`] apart) began and last failed, and until when
/// a master is known to lack its replicas.
#[derive(Default)]
pub struct Health {
    pub(super) failing_since_ms: std::sync::atomic::AtomicI64,
    outage: std::sync::Mutex<Outage>,
    pub(super) unreplicated_until_ms: std::sync::atomic::AtomicI64,
}

#[derive(Default, Clone, Copy)]
struct Outage {
    began_ms: i64,
    last_ms: i64,
}

impl Health {
    /// Notes the outcome of a request sent at `sent_ms`.
    pub(super) fn record<T>(&self, result: &RedisResult<T>, sent_ms: i64) {
        use std::sync::atomic::Ordering::Relaxed;
        match result {
            Err(e) if unanswered(e) => {
                let now = crate::clock::now_ms();
                let _ = self
                    .failing_since_ms
                    .compare_exchange(0, now, Relaxed, Relaxed);
                self.note_outage(sent_ms, now);
            }
            Err(e) if slot_unserved(e) => {
                self.failing_since_ms.store(0, Relaxed);
                self.note_outage(sent_ms, crate::clock::now_ms());
            }
            _ => self.failing_since_ms.store(0, Relaxed),
        }
    }

    /// A request sent at `sent_ms` went unanswered, as known at `now`. The
    /// outage began before the first such request was sent: up to
    /// [`OUTAGE_SLACK_MS`] before, as a process may not have asked the
    /// dead node anything for that long.
    pub(super) fn note_outage(&self, sent_ms: i64, now: i64) {
        let mut outage = self.outage.lock().expect("outage lock");
        let began = sent_ms - OUTAGE_SLACK_MS;
        if sent_ms - outage.last_ms > OUTAGE_GAP_MS {
            outage.began_ms = began;
        } else {
            outage.began_ms = outage.began_ms.min(began);
        }
        outage.last_ms = outage.last_ms.max(now);
    }

    /// The registry score below which an executor's lease of `lease_ms`
    /// has run out, as of `now`: `now - lease_ms`, except just after an
    /// outage this process saw. Executors could not renew while Redis did
    /// not answer, so until they had a lease and [`RENEW_AFTER_OUTAGE_MS`]
    /// to renew after it, only leases that ran out before the outage began
    /// count as run out.
    pub fn lease_cutoff(&self, now: i64, lease_ms: i64) -> i64 {
        let outage = *self.outage.lock().expect("outage lock");
        let cutoff = now - lease_ms;
        if outage.last_ms == 0 || now - outage.last_ms > lease_ms + RENEW_AFTER_OUTAGE_MS {
            cutoff
        } else {
            cutoff.min(outage.began_ms - lease_ms)
        }
    }

    /// Whether requests have failed unanswered for [`RESET_AFTER_MS`].
    pub(super) fn stuck(&self) -> bool {
        let since = self
            .failing_since_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        since != 0 && crate::clock::now_ms() - since >= RESET_AFTER_MS
    }
}

/// An error that says no node answered (rather than a node's answer).
pub(super) fn unanswered(e: &redis::RedisError) -> bool {
    e.is_timeout()
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_cluster_error()
        || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown)
}

/// An answer that says the key's slot has no master serving it now, or
/// moved (a failover or a resharding under way: `CLUSTERDOWN`,
/// `MASTERDOWN`, `TRYAGAIN`, `MOVED`, `ASK`, also inside an aborted
/// transaction): part of an outage for [`Health::lease_cutoff`], though a
/// node answered.
fn slot_unserved(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    moved(e)
        || ["ClusterDown", "CLUSTERDOWN", "MasterDown", "MASTERDOWN"]
            .iter()
            .any(|sign| text.contains(sign))
}

/// `reply`, its outcome noted in `health` (an unanswered request is part
/// of an outage).
pub(super) fn recorded<'a, T: Send + 'a>(
    health: &Arc<Health>,
    reply: RedisFuture<'a, T>,
) -> RedisFuture<'a, T> {
    let health = health.clone();
    let sent = crate::clock::now_ms();
    Box::pin(async move {
        let reply = reply.await;
        health.record(&reply, sent);
        reply
    })
}

/// Whether an error is (or holds) a `MOVED` or `ASK` redirect, or a
/// `TRYAGAIN` (keys of one command split by a slot's migration).
pub(super) fn moved(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::Server(
            redis::ServerErrorKind::Moved
                | redis::ServerErrorKind::Ask
                | redis::ServerErrorKind::TryAgain
        )
    ) || {
        let text = e.to_string();
        text.contains("Moved")
            || text.contains("MOVED")
            || text.contains("Ask:")
            || text.contains("TRYAGAIN")
            || text.contains("TryAgain")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_judged_by_their_scores_except_just_after_an_outage() {
        let lease = 2_000;
        let health = Health::default();
        assert_eq!(
            health.lease_cutoff(100_000, lease),
            98_000,
            "no outage seen"
        );
        // Requests sent from 100 s on went unanswered, the last known at
        // 109 s (a client's retries and timeouts answer late); gaps < 10 s:
        // one outage, which may have begun a second before the first.
        for (sent, known) in [(100_000, 105_000), (102_000, 107_000), (104_000, 109_000)] {
            health.note_outage(sent, known);
        }
        let began = 100_000 - OUTAGE_SLACK_MS;
        // Until a lease and the renewal allowance after the last one, only
        // leases that ran out before the outage began have run out.
        assert_eq!(health.lease_cutoff(109_500, lease), began - lease);
        let until = 109_000 + lease + RENEW_AFTER_OUTAGE_MS;
        assert_eq!(health.lease_cutoff(until, lease), began - lease);
        // Then scores count again.
        assert_eq!(health.lease_cutoff(until + 1, lease), until + 1 - lease);
        // A failure long after is a new outage, judged from its own start.
        health.note_outage(200_000, 201_000);
        assert_eq!(
            health.lease_cutoff(201_000, lease),
            200_000 - OUTAGE_SLACK_MS - lease
        );
    }
}
