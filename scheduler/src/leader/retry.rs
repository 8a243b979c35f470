//! Due retries: the leader dispatches the retries whose backoff has passed.
//! A retry stays in `{pK}:retry` until its dispatch is decided, so a crash
//! or a lost leadership re-dispatches it with the same trigger id (run
//! once). Reading and taking a retry are fenced by the leader's term, like
//! the claim: a deposed leader is refused before it dispatches anything.

use std::sync::Arc;
use std::time::Duration;

use rondo_core::{Error, ErrorKind, Names, TriggerType, clock};
use rondo_dispatcher::{Dispatcher, Fire};
use tokio_util::sync::CancellationToken;

use super::fence::carry_on;
use crate::store::Store;
use crate::store::triggers::{RetryItem, TriggerStore};

/// How often the leader looks for due retries.
const POLL: Duration = Duration::from_millis(250);
/// Retries dispatched per partition per poll at most.
const BATCH: usize = 500;

pub struct Retries {
    triggers: TriggerStore,
    store: Store,
    dispatcher: Arc<Dispatcher>,
    names: Names,
}

impl Retries {
    pub fn new(triggers: TriggerStore, store: Store, dispatcher: Arc<Dispatcher>) -> Arc<Self> {
        let names = store.names().clone();
        Arc::new(Retries {
            triggers,
            store,
            dispatcher,
            names,
        })
    }

    /// Dispatches due retries for `term` until `stop`; `Err` only for
    /// `StaleTerm`.
    pub async fn run(self: Arc<Self>, term: u64, stop: CancellationToken) -> Result<(), Error> {
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(POLL) => {}
            }
            for p in 0..self.names.partitions() {
                let outcome = self.retry_partition(p, term).await;
                if carry_on("dispatching retries", term, outcome)?.is_none() {
                    break;
                }
            }
        }
    }

    /// Dispatches a partition's due retries; how many.
    pub async fn retry_partition(&self, p: u32, term: u64) -> Result<usize, Error> {
        let due = self
            .triggers
            .due_retries(p, term, clock::now_ms(), BATCH)
            .await?;
        for member in &due {
            match serde_json::from_str::<RetryItem>(member) {
                Ok(item) => self.dispatch(&item).await?,
                Err(e) => {
                    tracing::error!(partition = p, member = %member, error = %e, "unreadable retry dropped")
                }
            }
            self.triggers.take_retry(p, term, member).await?;
        }
        Ok(due.len())
    }

    async fn dispatch(&self, item: &RetryItem) -> Result<(), Error> {
        let job = match self.store.get_job(item.job_id).await {
            Ok(job) => job,
            Err(e) if e.kind == ErrorKind::NotFound => {
                tracing::info!(job_id = item.job_id, trigger_id = %item.trigger_id, "job deleted; retry dropped");
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let fire = Fire {
            job: Arc::new(job),
            fire_ms: item.fire_ms,
            trigger_type: TriggerType::Retry,
            params: Some(item.params.clone()),
            retry_count: item.retry_count,
            trigger_id: Some(item.trigger_id.clone()),
            shard: Some((item.shard_index, item.shard_total)),
            executors: Vec::new(),
        };
        self.dispatcher.dispatch(&fire).await?;
        Ok(())
    }
}
