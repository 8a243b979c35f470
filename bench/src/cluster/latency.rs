//! Latency summaries as the nodes report them, and of the bench's own
//! samples. The API client is testkit's [`Api`](rondo_testkit::Api).

use serde::Serialize;
use serde_json::Value;

/// A latency summary as the nodes report it (`{count,p50,p99,max}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

impl Latency {
    /// Reads `{count,p50,p99,max}`; `None` if absent.
    pub fn from_json(value: &Value) -> Option<Latency> {
        Some(Latency {
            count: value.get("count")?.as_u64()?,
            p50: value.get("p50")?.as_i64()?,
            p99: value.get("p99")?.as_i64()?,
            max: value.get("max")?.as_i64()?,
        })
    }

    /// Nearest-rank p50, p99 and max of a sample.
    pub fn of(sample: &[i64]) -> Latency {
        let (p50, p99, max) = rondo_testkit::stats::summary(sample);
        Latency {
            count: sample.len() as u64,
            p50,
            p99,
            max,
        }
    }

    /// Summaries of several nodes as one: the count-weighted mean of the
    /// p50s, the largest p99 and the largest max (the percentiles of the
    /// union are not recoverable from summaries; the max of p99 is an upper
    /// bound of the union's p99).
    pub fn combine(parts: &[Latency]) -> Latency {
        let count: u64 = parts.iter().map(|l| l.count).sum();
        if count == 0 {
            return Latency::default();
        }
        let weighted: f64 = parts
            .iter()
            .map(|l| l.p50 as f64 * l.count as f64)
            .sum::<f64>()
            / count as f64;
        Latency {
            count,
            p50: weighted.round() as i64,
            p99: parts
                .iter()
                .filter(|l| l.count > 0)
                .map(|l| l.p99)
                .max()
                .unwrap_or(0),
            max: parts.iter().map(|l| l.max).max().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<i64> = (1..=100).rev().collect();
        assert_eq!(
            Latency::of(&s),
            Latency {
                count: 100,
                p50: 50,
                p99: 99,
                max: 100
            }
        );
        assert_eq!(Latency::of(&[]), Latency::default());
    }

    #[test]
    fn summaries_combine_conservatively() {
        let a = Latency {
            count: 300,
            p50: 2,
            p99: 10,
            max: 40,
        };
        let b = Latency {
            count: 100,
            p50: 6,
            p99: 30,
            max: 35,
        };
        let c = Latency::combine(&[a, b, Latency::default()]);
        assert_eq!((c.count, c.p50, c.p99, c.max), (400, 3, 30, 40));
    }
}
