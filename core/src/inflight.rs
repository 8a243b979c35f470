//! The in-flight record of a trigger, written once: the dispatcher records
//! every trigger the broker confirmed, the result monitor forgets it when
//! the trigger's outcome is handled, and the reaper reads what is left.
//!
//! Per partition `p` of the trigger's job (both keys carry the partition's
//! hash tag, so one `MULTI` holds them on a Redis Cluster too):
//!
//! * `<ns>:{pK}:inflight` (ZSET): trigger id scored by `sent_ms`, the
//!   lost-trigger scan's index;
//! * `<ns>:{pK}:inflight:data` (HASH): trigger id → the [`Trigger`] as JSON.
//!
//! A trigger that never reached an executor (a failed dispatch) is not
//! recorded. Records are added and forgotten through the pipeline helpers
//! here, so every writer writes the same two keys the same way.

use crate::error::Error;
use crate::names::Names;
use crate::trigger::Trigger;

/// Adds the records of `triggers`, all of partition `p`, to `pipe` as one
/// transaction (the score and the data together, or neither).
pub fn record(
    pipe: &mut redis::Pipeline,
    names: &Names,
    p: u32,
    triggers: &[Trigger],
) -> Result<(), Error> {
    let (scores, data) = (names.inflight(p), names.inflight_data(p));
    debug_assert!(triggers.iter().all(|t| names.partition_of(t.job_id) == p));
    if triggers.is_empty() {
        return Ok(());
    }
    // One variadic `ZADD` and `HSET` for the whole batch, not two commands
    // per trigger.
    let mut members = Vec::with_capacity(triggers.len());
    let mut fields = Vec::with_capacity(triggers.len());
    for trigger in triggers {
        members.push((trigger.sent_ms, trigger.trigger_id.as_str()));
        fields.push((trigger.trigger_id.as_str(), serde_json::to_string(trigger)?));
    }
    pipe.atomic()
        .zadd_multiple(&scores, &members)
        .ignore()
        .cmd("HSET")
        .arg(&data)
        .arg(&fields)
        .ignore();
    Ok(())
}

/// Adds the removal of the records of `trigger_ids` (partition `p`) to
/// `pipe`: one variadic `ZREM` and `HDEL`.
pub fn forget(pipe: &mut redis::Pipeline, names: &Names, p: u32, trigger_ids: &[&str]) {
    if trigger_ids.is_empty() {
        return;
    }
    pipe.zrem(names.inflight(p), trigger_ids)
        .ignore()
        .hdel(names.inflight_data(p), trigger_ids)
        .ignore();
}

/// Adds the read of one record to `pipe`; its reply goes to [`decode`].
pub fn read(pipe: &mut redis::Pipeline, names: &Names, job_id: u64, trigger_id: &str) {
    pipe.hget(names.inflight_data(names.partition_of(job_id)), trigger_id);
}

/// A record as read: `None` when absent or unreadable (an unreadable record
/// is as good as none: the trigger is treated as not in flight).
pub fn decode(json: Option<&str>) -> Option<Trigger> {
    json.and_then(|j| serde_json::from_str(j).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BlockStrategy;
    use crate::trigger::TriggerType;

    fn trigger(job_id: u64, id: &str) -> Trigger {
        Trigger {
            trigger_id: id.into(),
            job_id,
            group: "g".into(),
            executor_id: "e1".into(),
            handler: "demo".into(),
            params: "{\"a\":1}".into(),
            trigger_type: TriggerType::Cron,
            fire_ms: 1_000,
            sent_ms: 1_002,
            shard_index: 0,
            shard_total: 1,
            timeout_s: 0,
            block: BlockStrategy::SerialExecution,
            retry_count: 0,
            script: None,
            secrets: Default::default(),
        }
    }

    #[test]
    fn a_record_is_one_transaction_of_two_variadic_commands() {
        let names = Names::new("ns", 4);
        let mut pipe = redis::pipe();
        record(
            &mut pipe,
            &names,
            1,
            &[trigger(5, "5-1000-0"), trigger(9, "9-1000-0")],
        )
        .unwrap();
        let packed = String::from_utf8_lossy(&pipe.get_packed_pipeline()).into_owned();
        assert!(packed.starts_with("*1\r\n$5\r\nMULTI"), "{packed}");
        assert!(
            packed.contains("ns:{p1}:inflight\r\n") && packed.contains("ns:{p1}:inflight:data")
        );
        assert_eq!(packed.matches("ZADD").count(), 1);
        assert_eq!(packed.matches("HSET").count(), 1);
        for member in ["5-1000-0", "9-1000-0"] {
            assert_eq!(
                packed.matches(member).count(),
                3,
                "{member}: ZADD, HSET field, JSON"
            );
        }
    }

    #[test]
    fn the_data_decodes_to_the_trigger_written() {
        let t = trigger(5, "5-1000-0");
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(decode(Some(&json)), Some(t));
        assert_eq!(decode(Some("{not json")), None);
        assert_eq!(decode(None), None);
    }
}
