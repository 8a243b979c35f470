//! Percentiles of a sample, for lateness reports.

/// p50, p99 and max of a sample (nearest-rank); zeros when empty.
pub fn summary(sample: &[i64]) -> (i64, i64, i64) {
    if sample.is_empty() {
        return (0, 0, 0);
    }
    let mut s = sample.to_vec();
    s.sort_unstable();
    let rank = |p: f64| s[(((p * s.len() as f64).ceil() as usize).max(1) - 1).min(s.len() - 1)];
    (rank(0.50), rank(0.99), s[s.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<i64> = (1..=100).collect();
        assert_eq!(summary(&s), (50, 99, 100));
        assert_eq!(summary(&[7]), (7, 7, 7));
        assert_eq!(summary(&[]), (0, 0, 0));
    }
}
