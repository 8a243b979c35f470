//! In-flight triggers, for the scheduler's lost-trigger monitor: every
//! trigger the broker confirmed is recorded in its job's partition as
//! `ZADD inflight(p) <sent_ms> <trigger id>` and
//! `HSET inflight_data(p) <trigger id> <trigger JSON>`, in one atomic
//! pipeline (both keys carry the partition's hash tag). The monitor removes
//! both when the trigger's result arrives. Failed triggers never reached an
//! executor and are not recorded.

use deadpool_redis::Pool;
use rondo_core::event::TriggerRecord;
use rondo_core::trigger::code;
use rondo_core::{Error, Names};

#[derive(Clone)]
pub(crate) struct Inflight {
    pool: Pool,
    names: Names,
}

impl Inflight {
    pub(crate) fn new(pool: Pool, names: Names) -> Self {
        Inflight { pool, names }
    }

    /// Records the sent triggers among `records` (all of one job).
    pub(crate) async fn record(&self, records: &[TriggerRecord]) -> Result<(), Error> {
        let sent: Vec<&TriggerRecord> =
            records.iter().filter(|r| r.code == code::SUCCESS).collect();
        let Some(first) = sent.first() else {
            return Ok(());
        };
        debug_assert!(
            sent.iter()
                .all(|r| r.trigger.job_id == first.trigger.job_id)
        );
        let p = self.names.partition_of(first.trigger.job_id);
        let (scores, data) = (self.names.inflight(p), self.names.inflight_data(p));
        let mut pipe = redis::pipe();
        pipe.atomic();
        for record in &sent {
            let trigger = &record.trigger;
            let json = serde_json::to_string(trigger)?;
            pipe.zadd(&scores, &trigger.trigger_id, trigger.sent_ms)
                .ignore()
                .hset(&data, &trigger.trigger_id, json)
                .ignore();
        }
        let mut conn = self.pool.get().await?;
        let () = pipe.query_async(&mut conn).await?;
        Ok(())
    }
}
