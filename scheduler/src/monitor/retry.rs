//! The leader dispatches retries whose backoff has passed. A retry stays in
//! `{pK}:retry` until its dispatch is decided, so a crash or a lost
//! leadership re-dispatches it with the same trigger id (run once).

use std::sync::Arc;
use std::time::Duration;

use rondo_core::{Error, ErrorKind, TriggerType, clock};
use rondo_dispatcher::Fire;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Monitor;
use super::state::RetryItem;
use crate::cluster::Role;

/// How often the leader looks for due retries.
const POLL: Duration = Duration::from_millis(250);
/// Retries dispatched per partition per poll at most.
const BATCH: usize = 500;

impl Monitor {
    /// Dispatches due retries while this node leads, until `shutdown`.
    pub async fn run_retries(
        self: Arc<Self>,
        role: watch::Receiver<Role>,
        shutdown: CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            if !matches!(*role.borrow(), Role::Leader { .. }) {
                continue;
            }
            for p in 0..self.names.partitions() {
                if let Err(e) = self.retry_partition(p).await {
                    tracing::warn!(partition = p, error = %e, "dispatching retries failed; next poll retries");
                    break;
                }
            }
        }
    }

    async fn retry_partition(&self, p: u32) -> Result<(), Error> {
        for member in self.state.due_retries(p, clock::now_ms(), BATCH).await? {
            let Ok(item) = serde_json::from_str::<RetryItem>(&member) else {
                tracing::error!(partition = p, member = %member, "unreadable retry dropped");
                self.state.remove_retry(p, &member).await?;
                continue;
            };
            self.dispatch_retry(&item).await?;
            self.state.remove_retry(p, &member).await?;
        }
        Ok(())
    }

    async fn dispatch_retry(&self, item: &RetryItem) -> Result<(), Error> {
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
        };
        self.dispatcher.dispatch(&fire).await?;
        Ok(())
    }
}
