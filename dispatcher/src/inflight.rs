//! In-flight triggers, for the scheduler's lost-trigger monitor: every
//! trigger the broker confirmed is recorded in its job's partition, in the
//! format of [`rondo_core::inflight`] (one transaction on the partition's
//! two keys). The monitor forgets it when the trigger's result arrives.
//! Failed triggers never reached an executor and are not recorded.
//!
//! Records of concurrent fires in one partition share one pipeline (group
//! commit, see [`Batcher`]); each fire still waits for its own record.

use std::time::Duration;

use futures_util::future::try_join_all;
use rondo_core::batcher::{Batcher, Limits};
use rondo_core::event::TriggerRecord;
use rondo_core::redis::Pool;
use rondo_core::trigger::code;
use rondo_core::{Error, Names, Trigger, inflight};

/// Triggers per pipeline at most, and pipelines in flight at once.
pub(crate) const LIMITS: Limits = Limits {
    max_items: 1_000,
    max_flushes: 2,
    // Short: a result that overtakes its record leaves the record for the
    // reaper to tidy (see `reap_lost`), and a failed one is retried without
    // the record's shard and params. It is also on the way of every caller
    // that dispatches one trigger after another (retries, child jobs);
    // scheduled fires but a broadcast's ask for longer (`Lingers::of`).
    linger: std::time::Duration::from_millis(1),
};

#[derive(Clone)]
pub(crate) struct Inflight {
    names: Names,
    batcher: Batcher<u32, Trigger, ()>,
}

impl Inflight {
    pub(crate) fn new(pool: Pool, names: Names) -> Self {
        let keys = names.clone();
        let batcher = Batcher::spawn("inflight", LIMITS, move |p: u32, triggers: Vec<Trigger>| {
            let (pool, keys) = (pool.clone(), keys.clone());
            async move { write(&pool, &keys, p, &triggers).await }
        });
        Inflight { names, batcher }
    }

    /// Records the sent triggers among `records`, each waiting at most
    /// `linger` for other fires' records of its partition.
    pub(crate) async fn record(
        &self,
        records: &[TriggerRecord],
        linger: Duration,
    ) -> Result<(), Error> {
        let sent = records.iter().filter(|r| r.code == code::SUCCESS);
        let writes = sent.map(|r| {
            let p = self.names.partition_of(r.trigger.job_id);
            self.batcher.submit_within(p, r.trigger.clone(), linger)
        });
        try_join_all(writes).await?;
        Ok(())
    }
}

/// One transaction for a partition's triggers ([`rondo_core::inflight`]).
async fn write(pool: &Pool, names: &Names, p: u32, triggers: &[Trigger]) -> Result<(), Error> {
    let mut pipe = redis::pipe();
    inflight::record(&mut pipe, names, p, triggers)?;
    let mut conn = pool.get().await?;
    let () = pipe.query_async(&mut conn).await?;
    Ok(())
}
