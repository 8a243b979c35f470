//! Capped exponential backoff: the one way every rondo loop waits before
//! trying again (reconnects, failed dispatches, heartbeats, MySQL writes).
//!
//! Delays double from `initial` up to `max`. With jitter (the default for
//! reconnects) each delay is spread ±20 % so that many processes do not
//! retry in step after a broker or Redis restart. Waiting goes through
//! `tokio::time`, so tests drive it on paused time.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Jitter spread of [`Backoff::jittered`]: each delay is multiplied by a
/// factor in `1 ± JITTER`.
const JITTER: f64 = 0.2;

#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    jitter: bool,
}

impl Backoff {
    /// Exact delays: `initial`, doubled each time, capped at `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        debug_assert!(initial <= max);
        Backoff {
            initial,
            max,
            next: initial,
            jitter: false,
        }
    }

    /// The same delays spread by ±20 %.
    pub fn jittered(initial: Duration, max: Duration) -> Self {
        Backoff {
            jitter: true,
            ..Backoff::new(initial, max)
        }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        if self.jitter {
            base.mul_f64(rand::random_range(1.0 - JITTER..1.0 + JITTER))
        } else {
            base
        }
    }

    /// Starts again from `initial` (after a success).
    pub fn reset(&mut self) {
        self.next = self.initial;
    }

    /// Sleeps for the next delay; `false` when `shutdown` fired first.
    pub async fn wait(&mut self, shutdown: &CancellationToken) -> bool {
        let delay = self.next_delay();
        tokio::select! {
            () = shutdown.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }

    /// The exact delay before attempt `attempt` (0-based) of a sequence
    /// that starts at `initial`: for callers that keep the attempt count
    /// with the work item instead of a `Backoff` per item.
    pub fn nth(initial: Duration, max: Duration, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        initial.saturating_mul(factor).min(max)
    }
}

impl Default for Backoff {
    /// 100 ms, 200 ms, … capped at 5 s, exact.
    fn default() -> Self {
        Backoff::new(Duration::from_millis(100), Duration::from_secs(5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::default();
        let delays: Vec<u128> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
    }

    #[test]
    fn jitter_stays_within_a_fifth_of_the_exact_delay() {
        let mut b = Backoff::jittered(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        let exact = [100, 200, 400, 800, 1000, 1000];
        for (got, want) in delays.iter().zip(exact) {
            let want = Duration::from_millis(want);
            assert!(
                *got >= want.mul_f64(0.8) && *got <= want.mul_f64(1.2),
                "{got:?} vs {want:?}"
            );
        }
    }

    #[test]
    fn nth_is_the_same_sequence_without_state() {
        let (initial, max) = (Duration::from_millis(100), Duration::from_secs(5));
        let mut b = Backoff::new(initial, max);
        for attempt in 0..40 {
            assert_eq!(Backoff::nth(initial, max, attempt), b.next_delay());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn wait_sleeps_the_delay_on_paused_time_and_stops_on_shutdown() {
        let mut b = Backoff::new(Duration::from_secs(3), Duration::from_secs(60));
        let shutdown = CancellationToken::new();
        let started = tokio::time::Instant::now();
        assert!(b.wait(&shutdown).await);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        shutdown.cancel();
        assert!(!b.wait(&shutdown).await);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
