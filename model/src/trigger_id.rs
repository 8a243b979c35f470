//! The trigger-id grammar, written once: every id rondo gives a trigger, and
//! the few things read back out of one.
//!
//! | trigger | id |
//! | --- | --- |
//! | scheduled fire (`CRON`, `MISFIRE`) | `<job>-<fire_ms>-<shard>` |
//! | manual, or any fire without a given id | `<job>-<ms>-<shard>-<tag><8 hex>` (`m` manual, `r` retry, `p` parent, `c` other) |
//! | one shard of a broadcast fired with a given id | `<id>-s<shard>` |
//! | retry *n* of a failed trigger | `<first id>-retry<n>` |
//! | a child job after its parent succeeded | `<child job>-p<parent job>-<24 hex>-<depth>`: the hex is the first 96 bits of the parent id's SHA-256, so the id has a bounded length however long the chain; the depth counts the hops, at most [`MAX_CHAIN_DEPTH`] |
//!
//! Every id starts with its job id, and ids that matter for exactly-once are
//! deterministic: a scheduled fire, a retry and a child carry the same id
//! however often they are dispatched, so an executor's dedupe runs each once.
//! Ids are at most [`MAX_LEN`] bytes (the `job_log.trigger_id` column).

use crate::error::Error;
use crate::trigger::TriggerType;

/// The longest trigger id that is stored (`VARCHAR(96)` in MySQL).
pub const MAX_LEN: usize = 96;

/// Separator of a retry's count.
const RETRY: &str = "-retry";

/// The id of a scheduled fire: deterministic, so a fire published twice in a
/// crash window carries the same id and the executor runs it once.
pub fn scheduled(job_id: u64, fire_ms: i64, shard_index: u32) -> String {
    format!("{job_id}-{fire_ms}-{shard_index}")
}

/// The id of a manual (or any other unnamed) trigger: unique per call.
pub fn adhoc(job_id: u64, now_ms: i64, kind: TriggerType, shard_index: u32) -> String {
    let nonce: u32 = rand::random();
    let tag = match kind {
        TriggerType::Manual => 'm',
        TriggerType::Retry => 'r',
        TriggerType::Parent => 'p',
        TriggerType::Cron | TriggerType::Misfire => 'c',
    };
    format!("{job_id}-{now_ms}-{shard_index}-{tag}{nonce:08x}")
}

/// One shard of a broadcast that was dispatched with a given id.
pub fn shard(id: &str, shard_index: u32) -> String {
    format!("{id}-s{shard_index}")
}

/// A retry's id: the first trigger's id with `-retry<n>`, so a retry
/// dispatched twice (a crash between dispatch and bookkeeping) is the same
/// trigger to the executor's dedupe. Retries do not nest.
pub fn retry(failed_id: &str, retry_count: u32) -> String {
    format!("{}{RETRY}{retry_count}", base(failed_id))
}

/// The id without a `-retry<n>` suffix.
pub fn base(id: &str) -> &str {
    match id.rsplit_once(RETRY) {
        Some((first, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => first,
        _ => id,
    }
}

/// Whether an id is a scheduled fire's (`CRON`, `MISFIRE`) or a retry of
/// one: `<job>-<fire_ms>-<shard>`, perhaps with `-retry<n>`.
pub fn is_scheduled(id: &str) -> bool {
    let parts: Vec<&str> = base(id).split('-').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The retry count an id carries (0 for a first run).
pub fn retry_count(id: &str) -> u32 {
    id.rsplit_once(RETRY)
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// How many hops a chain of child jobs may take: a job's child's child …
/// The API refuses cycles, but two updates racing, or jobs stored before
/// the check, could still close one; the chain stops here then.
pub const MAX_CHAIN_DEPTH: u32 = 32;

/// A child job's id, derived from its parent's so a parent's result handled
/// twice triggers the child once: `<child>-p<parent job>-<24 hex>-<depth>`,
/// the hex the first 96 bits of the parent id's SHA-256, the depth the
/// parent's plus one. Its length is bounded (at most 20 + 2 + 20 + 1 + 24 +
/// 1 + 2 characters) however long the chain.
pub fn child(child_job: u64, parent_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(parent_id.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    let parent_job = parent_id.split('-').next().unwrap_or_default();
    let depth = chain_depth(parent_id) + 1;
    format!("{child_job}-p{parent_job}-{hex}-{depth}")
}

/// How many child hops led to this trigger (0 for any trigger that is not
/// a child job's; a retry or a broadcast shard keeps its trigger's depth).
pub fn chain_depth(id: &str) -> u32 {
    let id = base(id);
    let id = match id.rsplit_once("-s") {
        Some((rest, shard)) if !shard.is_empty() && shard.bytes().all(|b| b.is_ascii_digit()) => {
            rest
        }
        _ => id,
    };
    let parts: Vec<&str> = id.split('-').collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        [_, parent, hex, depth]
            if parent.strip_prefix('p').is_some_and(digits) && hex.len() == 24 && digits(depth) =>
        {
            depth.parse().unwrap_or(0)
        }
        _ => 0,
    }
}

/// The job an id belongs to, checking its length and its leading job id:
/// what the API accepts as a trigger id.
pub fn job_of(id: &str) -> Result<u64, Error> {
    if id.len() > MAX_LEN {
        return Err(Error::invalid(
            "trigger_id",
            format!("is longer than {MAX_LEN} characters"),
        ));
    }
    id.split('-')
        .next()
        .and_then(|job| job.parse().ok())
        .ok_or_else(|| Error::invalid("trigger_id", format!("{id:?} is not a rondo trigger id")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduled_ids_are_deterministic_and_distinct() {
        assert_eq!(scheduled(7, 1000, 0), "7-1000-0");
        assert_eq!(scheduled(7, 1000, 0), scheduled(7, 1000, 0));
        assert_ne!(scheduled(7, 1000, 0), scheduled(7, 1000, 1));
        assert_ne!(scheduled(7, 1000, 0), scheduled(71, 100, 0));
    }

    #[test]
    fn adhoc_ids_differ_per_call_and_carry_their_kind() {
        assert!(is_scheduled(&scheduled(7, 1000, 0)));
        assert!(is_scheduled(&retry(&scheduled(7, 1000, 1), 2)));
        assert!(!is_scheduled(&adhoc(7, 1000, TriggerType::Manual, 0)));
        assert!(!is_scheduled(&child(8, &scheduled(7, 1000, 0))));
        assert!(!is_scheduled(&shard(&scheduled(7, 1000, 0), 1)));
        let a = adhoc(7, 1000, TriggerType::Manual, 0);
        let b = adhoc(7, 1000, TriggerType::Manual, 0);
        assert_ne!(a, b);
        assert!(a.starts_with("7-1000-0-m") && a.len() == "7-1000-0-m".len() + 8);
        assert!(adhoc(7, 1, TriggerType::Parent, 2).starts_with("7-1-2-p"));
    }

    #[test]
    fn retry_ids_are_deterministic_and_do_not_nest() {
        assert_eq!(retry("1-1000-0", 1), "1-1000-0-retry1");
        assert_eq!(retry("1-1000-0-retry1", 2), "1-1000-0-retry2");
        assert_eq!(retry_count("1-1000-0-retry12"), 12);
        assert_eq!(retry_count("1-1000-0"), 0);
        assert_eq!(base("1-1000-0-m0a1b2c3d"), "1-1000-0-m0a1b2c3d");
        assert_eq!(base("1-1000-0-retry"), "1-1000-0-retry");
    }

    #[test]
    fn every_kind_of_id_reads_back_its_job_and_retry_count() {
        let first = scheduled(42, 1_700_000_000_000, 3);
        let ids = [
            (first.clone(), 42, 0),
            (adhoc(42, 5, TriggerType::Manual, 0), 42, 0),
            (shard(&first, 2), 42, 0),
            (retry(&first, 4), 42, 4),
            (retry(&shard(&first, 1), 1), 42, 1),
            (child(9, &first), 9, 0),
            (retry(&child(9, &first), 2), 9, 2),
        ];
        for (id, job, retries) in ids {
            assert_eq!(job_of(&id).unwrap(), job, "{id}");
            assert_eq!(retry_count(&id), retries, "{id}");
        }
    }

    #[test]
    fn child_ids_keep_a_bounded_length_and_count_their_hops() {
        let mut id = scheduled(u64::MAX, i64::MAX, u32::MAX);
        assert_eq!(chain_depth(&id), 0);
        for hop in 1..=MAX_CHAIN_DEPTH + 5 {
            let job = u64::MAX - u64::from(hop % 2);
            let next = child(job, &id);
            assert!(next.len() <= MAX_LEN - "-retry4294967295".len(), "{next}");
            assert_eq!(next, child(job, &id), "deterministic");
            assert_eq!(job_of(&next).unwrap(), job);
            assert_eq!(chain_depth(&next), hop, "{next}");
            assert_eq!(chain_depth(&retry(&next, 3)), hop, "a retry keeps it");
            assert_eq!(chain_depth(&shard(&next, 2)), hop, "a shard keeps it");
            id = next;
        }
        assert_ne!(child(3, "1-1000-0"), child(3, "1-1000-1"));
        assert!(child(3, "12-1000-0").starts_with("3-p12-"));
        assert_eq!(chain_depth("7-1000-0-m0a1b2c3d"), 0);
    }

    #[test]
    fn ids_that_are_too_long_or_not_rondo_ids_are_refused_naming_the_field() {
        let long = format!("1-{}", "9".repeat(MAX_LEN));
        for bad in [long.as_str(), "abc-1-0", "", "-1-0"] {
            let e = job_of(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("trigger_id"), "{bad}");
        }
        assert_eq!(job_of(&"1".repeat(MAX_LEN)).ok(), None, "overflows u64");
    }
}
