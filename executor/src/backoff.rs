//! Bounded exponential backoff with jitter, for reconnects and retries.

use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        debug_assert!(initial <= max);
        Backoff {
            initial,
            max,
            next: initial,
        }
    }

    /// The next delay: doubles up to the bound, with ±20 % jitter so many
    /// executors do not reconnect in step after a broker restart.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jitter: f64 = rand::random_range(0.8..1.2);
        base.mul_f64(jitter)
    }

    pub(crate) fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_bound_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        assert!(delays[0] >= Duration::from_millis(80) && delays[0] <= Duration::from_millis(120));
        assert!(delays[1] >= Duration::from_millis(160));
        assert!(delays[5] <= Duration::from_millis(1200));
        assert!(delays[5] >= Duration::from_millis(800));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(120));
    }
}
