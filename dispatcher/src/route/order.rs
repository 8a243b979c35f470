//! FIRST, LAST, ROUND and RANDOM: a position in the sorted executor list.

use rand::Rng;
use rondo_core::{Error, Job};

use super::context::RouteContext;

/// A ROUND counter unused this long is dropped (XXL-JOB clears its counters
/// every 24 h); a job in use keeps its rotation.
const ROUND_IDLE_TTL_MS: i64 = 24 * 3600 * 1000;
/// A new ROUND counter starts at a random value below this (XXL-JOB's
/// "random once at first use, to spread the first fires"), so the ROUND
/// jobs of a group do not all begin on the first executor.
const ROUND_RANDOM_START: u64 = 100;

/// FIRST: the first executor in id order.
pub fn first<'a>(executors: &[&'a str]) -> &'a str {
    executors[0]
}

/// LAST: the last executor in id order.
pub fn last<'a>(executors: &[&'a str]) -> &'a str {
    executors[executors.len() - 1]
}

/// RANDOM: a uniformly random executor.
pub fn random<'a>(executors: &[&'a str]) -> &'a str {
    executors[rand::rng().random_range(0..executors.len())]
}

/// ROUND: a per-job counter shared by the cluster (Redis `INCR`), so
/// consecutive fires go to consecutive executors whichever node fires them.
pub async fn round<'a>(
    job: &Job,
    executors: &[&'a str],
    ctx: &RouteContext,
) -> Result<&'a str, Error> {
    let key = ctx.names.round_counter(job.id);
    let start = rand::rng().random_range(0..ROUND_RANDOM_START);
    let mut conn = ctx.pool.get().await?;
    let (n,): (u64,) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg(&key)
        .arg(start)
        .arg("NX")
        .ignore()
        .incr(&key, 1)
        .pexpire(&key, ROUND_IDLE_TTL_MS)
        .ignore()
        .query_async(&mut conn)
        .await?;
    Ok(pick_round(executors, n))
}

/// The executor of the `counter`-th ROUND fire (counters start at 1).
pub fn pick_round<'a>(executors: &[&'a str], counter: u64) -> &'a str {
    let i = (counter.saturating_sub(1) % executors.len() as u64) as usize;
    executors[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    const EX: [&str; 3] = ["a", "b", "c"];

    #[test]
    fn round_cycles_through_every_executor_in_order() {
        let picks: Vec<&str> = (1..=7).map(|n| pick_round(&EX, n)).collect();
        assert_eq!(picks, ["a", "b", "c", "a", "b", "c", "a"]);
    }

    #[test]
    fn first_and_last_are_the_ends_of_the_sorted_list() {
        assert_eq!(first(&EX), "a");
        assert_eq!(last(&EX), "c");
        assert_eq!((first(&["x"]), last(&["x"])), ("x", "x"));
    }

    #[test]
    fn random_reaches_every_executor() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..300 {
            seen.insert(random(&EX));
        }
        assert_eq!(seen.len(), 3);
    }
}
