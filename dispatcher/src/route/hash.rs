//! CONSISTENT_HASH, exactly as XXL-JOB's `ExecutorRouteConsistentHash`: every
//! executor puts 100 virtual nodes on a 32-bit ring at
//! `hash("SHARD-<executor>-NODE-<i>")`; a job goes to the first virtual node
//! at or after `hash("<job id>")`, wrapping to the start. `hash` is the first
//! four bytes of the key's MD5 digest read little-endian. A job therefore
//! stays on its executor while the group is unchanged, and when an executor
//! leaves only the jobs it held move (about 1/n of them).
//!
//! The ring depends only on the executor ids, so every scheduler node
//! computes the same one without shared state; each node caches the ring of
//! the last executor list it saw per group.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use md5::{Digest, Md5};

/// Virtual nodes per executor (XXL-JOB's `VIRTUAL_NODE_NUM`).
pub const VIRTUAL_NODES: u32 = 100;
/// Groups whose ring a node keeps; past it the cache starts over.
const MAX_CACHED_RINGS: usize = 4096;

/// XXL-JOB's ring position of a key: MD5, first four digest bytes as a
/// little-endian `u32` (`(d[3]<<24)|(d[2]<<16)|(d[1]<<8)|d[0]`).
pub fn position(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// The key of an executor's `i`-th virtual node.
fn virtual_node_key(executor: &str, i: u32) -> String {
    format!("SHARD-{executor}-NODE-{i}")
}

/// The hash ring of one executor list.
#[derive(Debug)]
pub struct Ring {
    executors: Vec<String>,
    /// (position, index into `executors`), sorted by position.
    nodes: Vec<(u32, usize)>,
}

impl Ring {
    /// Builds the ring of `executors` (non-empty). As with XXL-JOB's
    /// `TreeMap.put`, when two virtual nodes collide the later executor in
    /// list order takes the position.
    pub fn new(executors: &[&str]) -> Ring {
        debug_assert!(!executors.is_empty());
        let mut positions = BTreeMap::new();
        for (index, executor) in executors.iter().enumerate() {
            for i in 0..VIRTUAL_NODES {
                positions.insert(position(&virtual_node_key(executor, i)), index);
            }
        }
        Ring {
            executors: executors.iter().map(|e| (*e).to_owned()).collect(),
            nodes: positions.into_iter().collect(),
        }
    }

    /// The executor of a job: the first virtual node at or after the job's
    /// position, wrapping around.
    pub fn pick(&self, job_id: u64) -> &str {
        let job_position = position(&job_id.to_string());
        let at = self.nodes.partition_point(|(p, _)| *p < job_position);
        let (_, index) = self.nodes.get(at).unwrap_or(&self.nodes[0]);
        &self.executors[*index]
    }

    fn is_for(&self, executors: &[&str]) -> bool {
        self.executors.len() == executors.len()
            && self.executors.iter().zip(executors).all(|(a, b)| a == b)
    }
}

/// The last ring built per group, rebuilt when the group's executors change.
#[derive(Debug, Default)]
pub struct RingCache {
    rings: Mutex<HashMap<String, Arc<Ring>>>,
}

impl RingCache {
    /// The executor of `job_id` among `executors` (non-empty, sorted).
    pub fn pick(&self, group: &str, executors: &[&str], job_id: u64) -> String {
        self.ring(group, executors).pick(job_id).to_owned()
    }

    fn ring(&self, group: &str, executors: &[&str]) -> Arc<Ring> {
        let cached = self
            .rings
            .lock()
            .expect("ring cache lock")
            .get(group)
            .cloned();
        if let Some(ring) = cached.filter(|r| r.is_for(executors)) {
            return ring;
        }
        // Built outside the lock: other groups' dispatches do not wait on it.
        let ring = Arc::new(Ring::new(executors));
        let mut rings = self.rings.lock().expect("ring cache lock");
        if rings.len() >= MAX_CACHED_RINGS {
            rings.clear();
        }
        rings.insert(group.to_owned(), ring.clone());
        ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Positions computed independently with Python:
    /// `int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "little")`.
    #[test]
    fn positions_match_xxl_job_byte_order() {
        // md5("7") = 8f14e45f…: bytes 8f 14 e4 5f read little-endian.
        assert_eq!(position("7"), 0x5fe4_148f);
        assert_eq!(position("7"), 1_608_782_991);
        assert_eq!(position("1"), 943_901_380);
        assert_eq!(position("SHARD-ex-a-NODE-0"), 1_143_610_581);
        assert_eq!(position("SHARD-127.0.0.1:9999-NODE-0"), 1_255_829_671);
    }

    #[test]
    fn every_executor_has_its_virtual_nodes() {
        let ring = Ring::new(&["ex-a", "ex-b", "ex-c"]);
        assert_eq!(ring.nodes.len(), 300, "no collision among these 300 keys");
        assert!(ring.nodes.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn a_job_lands_on_the_first_node_at_or_after_its_hash() {
        let ring = Ring::new(&["ex-a", "ex-b", "ex-c"]);
        for job in 0..200_u64 {
            let h = position(&job.to_string());
            let want = ring
                .nodes
                .iter()
                .find(|(p, _)| *p >= h)
                .unwrap_or(&ring.nodes[0]);
            assert_eq!(ring.pick(job), ring.executors[want.1]);
        }
    }

    #[test]
    fn a_job_stays_on_its_executor() {
        let ring = Ring::new(&["ex-a", "ex-b", "ex-c"]);
        let again = Ring::new(&["ex-a", "ex-b", "ex-c"]);
        for job in 0..1000_u64 {
            assert_eq!(ring.pick(job), again.pick(job));
        }
    }

    #[test]
    fn a_leaving_executor_moves_only_its_own_jobs() {
        let before = Ring::new(&["ex-a", "ex-b", "ex-c", "ex-d"]);
        let after = Ring::new(&["ex-a", "ex-b", "ex-d"]);
        let mut moved = 0;
        for job in 1..=1000_u64 {
            let (was, is) = (before.pick(job), after.pick(job));
            if was == "ex-c" {
                moved += 1;
            } else {
                assert_eq!(was, is, "job {job} moved although its executor stayed");
            }
        }
        assert!(moved <= 250 + 80, "{moved} of 1000 jobs moved");
    }

    #[test]
    fn the_cache_rebuilds_when_the_executors_change() {
        let cache = RingCache::default();
        let three = ["ex-a", "ex-b", "ex-c"];
        let first = cache.ring("g", &three);
        assert!(Arc::ptr_eq(&first, &cache.ring("g", &three)));
        let two = cache.ring("g", &three[..2]);
        assert!(two.is_for(&three[..2]));
        assert!(!Arc::ptr_eq(&first, &two));
    }
}
