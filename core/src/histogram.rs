//! A latency histogram in milliseconds: fixed buckets, lock-free recording,
//! percentiles on read. Exact to the millisecond below one second, to 10 ms
//! below 10 s, to 100 ms below 100 s; anything later counts in the last
//! bucket (and in `max`, which is exact).
//!
//! Used for a node's publish lateness (broker-confirmed publish minus the
//! scheduled instant), which the admin API reports and the benchmark reads.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use serde::Serialize;

const FINE: usize = 1_000; // 0..1_000 ms by 1 ms
const MID: usize = 900; // 1_000..10_000 ms by 10 ms
const COARSE: usize = 900; // 10_000..100_000 ms by 100 ms
const BUCKETS: usize = FINE + MID + COARSE + 1;

/// Counts of values per bucket; `record` and `summary` may race freely.
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicI64,
}

/// What a histogram holds, summarised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Summary {
    pub count: u64,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicI64::new(0),
        }
    }
}

fn bucket_of(ms: i64) -> usize {
    let ms = ms.max(0) as u64;
    match ms {
        m if m < 1_000 => m as usize,
        m if m < 10_000 => FINE + ((m - 1_000) / 10) as usize,
        m if m < 100_000 => FINE + MID + ((m - 10_000) / 100) as usize,
        _ => BUCKETS - 1,
    }
}

/// The upper bound of a bucket (what a percentile in it reports).
fn bucket_value(index: usize) -> i64 {
    match index {
        i if i < FINE => i as i64,
        i if i < FINE + MID => 1_000 + ((i - FINE) as i64 + 1) * 10 - 1,
        i if i < BUCKETS - 1 => 10_000 + ((i - FINE - MID) as i64 + 1) * 100 - 1,
        _ => i64::MAX,
    }
}

impl Histogram {
    /// Records one value (negative values count as 0: early is on time).
    pub fn record(&self, ms: i64) {
        self.buckets[bucket_of(ms)].fetch_add(1, Relaxed);
        self.max.fetch_max(ms.max(0), Relaxed);
    }

    /// Forgets everything recorded so far.
    pub fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Relaxed);
        }
        self.max.store(0, Relaxed);
    }

    pub fn summary(&self) -> Summary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let count: u64 = counts.iter().sum();
        let max = self.max.load(Relaxed);
        let at = |q: f64| -> i64 {
            if count == 0 {
                return 0;
            }
            let rank = ((count as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return bucket_value(i).min(max);
                }
            }
            max
        };
        Summary {
            count,
            p50: at(0.50),
            p99: at(0.99),
            max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_exact_below_a_second() {
        let h = Histogram::default();
        for ms in 1..=100 {
            h.record(ms);
        }
        let s = h.summary();
        assert_eq!((s.count, s.p50, s.p99, s.max), (100, 50, 99, 100));
    }

    #[test]
    fn later_values_land_in_coarser_buckets_and_max_stays_exact() {
        let h = Histogram::default();
        h.record(-5);
        h.record(1_234);
        h.record(25_050);
        h.record(3_600_000);
        let s = h.summary();
        assert_eq!(s.count, 4);
        assert_eq!(s.p50, 1_239, "1_234 reported as its 10 ms bucket's top");
        assert_eq!(s.max, 3_600_000);
        assert_eq!(s.p99, 3_600_000, "the overflow bucket reports the max");
        assert_eq!(bucket_value(bucket_of(25_050)), 25_099);
    }

    #[test]
    fn empty_and_reset() {
        let h = Histogram::default();
        assert_eq!(h.summary(), Summary::default());
        h.record(7);
        h.reset();
        assert_eq!(h.summary().count, 0);
    }
}
