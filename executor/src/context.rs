//! The context a handler receives: what the trigger says, a logger, and a
//! cancellation token.

use std::fmt;
use std::sync::Arc;

use rondo_core::trigger::Script;
use rondo_core::{Trigger, TriggerType};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::joblog::JobLog;

/// Everything a handler knows about its run. Cheap to clone (handlers may
/// hand clones to their own tasks).
///
/// The token is cancelled when the trigger's timeout expires or the executor
/// shuts down; a handler should stop soon after (it gets about a second
/// before its task is aborted).
#[derive(Clone)]
pub struct JobContext {
    inner: Arc<Inner>,
}

struct Inner {
    trigger_id: String,
    job_id: u64,
    executor_id: String,
    params: String,
    shard_index: u32,
    shard_total: u32,
    fire_ms: i64,
    trigger_type: TriggerType,
    retry_count: u32,
    script: Option<Script>,
    secrets: std::collections::BTreeMap<String, String>,
    log: JobLog,
    token: CancellationToken,
}

impl JobContext {
    pub(crate) fn new(
        trigger: &Trigger,
        executor_id: &str,
        log: JobLog,
        token: CancellationToken,
    ) -> Self {
        JobContext {
            inner: Arc::new(Inner {
                trigger_id: trigger.trigger_id.clone(),
                job_id: trigger.job_id,
                executor_id: executor_id.to_owned(),
                params: rondo_core::model::secrets::expand(&trigger.params, &trigger.secrets),
                shard_index: trigger.shard_index,
                shard_total: trigger.shard_total,
                fire_ms: trigger.fire_ms,
                trigger_type: trigger.trigger_type,
                retry_count: trigger.retry_count,
                script: trigger.script.clone(),
                secrets: trigger.secrets.clone(),
                log,
                token,
            }),
        }
    }

    /// The job's named secrets (name → value). `params` has its
    /// `${secret.NAME}` placeholders filled already; shell and script jobs
    /// get these as environment variables. A value a handler writes to the
    /// job log shows as `***`.
    pub fn secrets(&self) -> &std::collections::BTreeMap<String, String> {
        &self.inner.secrets
    }

    /// The script a script job's trigger carries (`None` for a handler
    /// job).
    pub fn script(&self) -> Option<&Script> {
        self.inner.script.as_ref()
    }

    /// Unique per run; results and log lines are keyed by it.
    pub fn trigger_id(&self) -> &str {
        &self.inner.trigger_id
    }

    pub fn job_id(&self) -> u64 {
        self.inner.job_id
    }

    /// The executor running this trigger.
    pub fn executor_id(&self) -> &str {
        &self.inner.executor_id
    }

    /// The job's parameters, as configured (XXL-JOB's `executorParams`).
    pub fn params(&self) -> &str {
        &self.inner.params
    }

    /// This run's shard (0-based) under `SHARDING_BROADCAST`; 0 otherwise.
    pub fn shard_index(&self) -> u32 {
        self.inner.shard_index
    }

    /// How many shards the broadcast has; 1 otherwise.
    pub fn shard_total(&self) -> u32 {
        self.inner.shard_total
    }

    /// The scheduled instant (ms since the epoch, UTC).
    pub fn fire_ms(&self) -> i64 {
        self.inner.fire_ms
    }

    pub fn trigger_type(&self) -> TriggerType {
        self.inner.trigger_type
    }

    /// How many times this fire was retried before this run (0 on the first).
    pub fn retry_count(&self) -> u32 {
        self.inner.retry_count
    }

    /// Writes a line to the run's log (shipped to the console in batches).
    /// Cheap and never waits for the broker.
    pub fn log(&self, line: impl Into<String>) {
        self.inner.log.push(line.into());
    }

    /// Resolves when the run should stop (timeout or shutdown).
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.inner.token.cancelled()
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.token.is_cancelled()
    }

    /// The run's token, for `select!`s in the handler's own tasks.
    pub fn token(&self) -> CancellationToken {
        self.inner.token.clone()
    }
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("trigger_id", &self.inner.trigger_id)
            .field("job_id", &self.inner.job_id)
            .field("params", &self.inner.params)
            .field("shard_index", &self.inner.shard_index)
            .field("shard_total", &self.inner.shard_total)
            .finish_non_exhaustive()
    }
}
