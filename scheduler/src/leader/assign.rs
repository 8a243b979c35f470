//! Assignment: which live node's wheel fires a job. Rendezvous (highest
//! random weight) hashing of the job id over the live nodes: a job stays on
//! one node while the node set is stable, and when a node joins or leaves
//! only the jobs that hash to it move. The claim and the failover of dead
//! nodes' rings use the same rule, so a moved fire lands where the job's
//! next claims will go.

use std::collections::HashMap;

/// Rendezvous (highest random weight) hashing of a job over nodes.
pub fn pick_node(job_id: u64, nodes: &[String]) -> usize {
    debug_assert!(!nodes.is_empty());
    let weight = |node: &str| fnv1a(node.as_bytes(), job_id);
    (0..nodes.len())
        .max_by_key(|&i| weight(&nodes[i]))
        .unwrap_or(0)
}

/// The standby of `node`'s rings among `live` (the node itself left out):
/// the same rendezvous rule as a job's node, keyed by the node's name, so
/// every node agrees on it from the same live list.
pub fn standby_of<'a>(node: &str, live: &'a [String]) -> Option<&'a String> {
    // `pick_node` over the others, without copying them.
    let key = fnv1a(node.as_bytes(), 0);
    live.iter()
        .filter(|n| *n != node)
        .max_by_key(|n| fnv1a(n.as_bytes(), key))
}

/// FNV-1a over the node name then the job id: stable across processes and
/// Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8], job_id: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes.iter().chain(job_id.to_le_bytes().iter()) {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // Final avalanche so near ids spread well.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

/// Nodes' share of jobs, for tests and the status API.
pub fn spread(job_ids: impl Iterator<Item = u64>, nodes: &[String]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for id in job_ids {
        *counts
            .entry(nodes[pick_node(id, nodes)].clone())
            .or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i}")).collect()
    }

    #[test]
    fn jobs_spread_evenly_over_nodes() {
        let counts = spread(0..30_000, &nodes(3));
        for (node, c) in &counts {
            assert!((9_000..=11_000).contains(c), "{node} got {c}");
        }
    }

    #[test]
    fn a_leaving_node_moves_only_its_own_jobs() {
        let three = nodes(3);
        let two: Vec<String> = three[..2].to_vec();
        for id in 0..10_000u64 {
            let before = &three[pick_node(id, &three)];
            let after = &two[pick_node(id, &two)];
            if before != "node-2" {
                assert_eq!(before, after, "job {id} moved although its node stayed");
            }
        }
    }

    #[test]
    fn one_node_takes_everything() {
        assert_eq!(pick_node(42, &nodes(1)), 0);
    }
}
