//! The result monitor: reacts to how triggers end (XXL-JOB's fail monitor,
//! child-job trigger and lose monitor, on a queue instead of a table scan).
//!
//! * Every node consumes the `monitor` queue (`result.*` and
//!   `trigger.failed` events) as a competing consumer. Per ending it applies
//!   [`decide`](mod@decide): child jobs on success; an alarm and, while retries remain, a
//!   retry after the job's backoff on failure. Retries wait in the durable
//!   `{pK}:retry` set; the leader dispatches them when due ([`retry`]).
//! * Reactions are idempotent: a retry's and a child's trigger ids derive
//!   from the ending trigger's id, so a result handled twice (redelivered
//!   after a crash) dispatches the same trigger ids, which executors run
//!   once; a `handled:<trigger id>` mark skips plain duplicates.
//! * The leader also reaps ([`reaper`]): triggers with no result after
//!   `monitor.lost_after_ms` whose executor is gone become failed ("lost")
//!   results, which this monitor then retries and alarms like any failure;
//!   triggers waiting in a dead executor's queue are routed again to live
//!   executors of the group, or failed after `monitor.reroute_timeout_ms`.

pub mod decide;
pub mod reaper;
pub mod retry;
pub mod state;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions};
use lapin::types::FieldTable;
use rondo_core::event::{TriggerRecord, decode_events};
use rondo_core::trigger::code;
use rondo_core::{
    Config, Error, ErrorKind, Event, ExecResult, Job, Names, Trigger, TriggerType, amqp, clock,
};
use rondo_dispatcher::{Dispatcher, Fire};
use tokio_util::sync::CancellationToken;

use crate::alarm::Alarmer;
use crate::store::Store;
use decide::{Ending, child_trigger_id, decide, retry_count_of, retry_trigger_id};
use state::{MonitorState, RetryItem};

/// What ended: a result from an executor, or a trigger that never reached one.
struct Ended<'a> {
    trigger_id: &'a str,
    job_id: u64,
    fire_ms: i64,
    code: i32,
    msg: &'a str,
    executor_id: &'a str,
    ending: Ending,
    /// The trigger, when known (in flight, or carried by a trigger event).
    trigger: Option<Trigger>,
}

pub struct Monitor {
    pub(crate) state: MonitorState,
    pub(crate) store: Store,
    pub(crate) dispatcher: Arc<Dispatcher>,
    pub(crate) alarmer: Alarmer,
    pub(crate) names: Names,
    pub(crate) config: Config,
}

impl Monitor {
    pub fn new(config: &Config, store: Store, dispatcher: Arc<Dispatcher>) -> Arc<Self> {
        Arc::new(Monitor {
            state: MonitorState::new(store.pool().clone(), config.names()),
            alarmer: Alarmer::new(&config.alarm),
            names: config.names(),
            config: config.clone(),
            store,
            dispatcher,
        })
    }

    /// Consumes the monitor queue until `shutdown`, reconnecting as needed.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(200);
        loop {
            match self.consume(&shutdown).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "result monitor lost the broker; reconnecting")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn consume(&self, shutdown: &CancellationToken) -> Result<(), Error> {
        let conn = amqp::connect(&self.config.amqp.url, "rondo-monitor").await?;
        let ch = amqp::confirm_channel(&conn).await?;
        amqp::declare_topology(&ch, &self.names).await?;
        ch.basic_qos(self.config.monitor.prefetch, BasicQosOptions::default())
            .await?;
        let queue = self.names.monitor_queue();
        let opts = BasicConsumeOptions::default();
        let mut deliveries = ch
            .basic_consume(
                queue.as_str().into(),
                "rondo-monitor".into(),
                opts,
                FieldTable::default(),
            )
            .await?;
        loop {
            let delivery = tokio::select! {
                _ = shutdown.cancelled() => {
                    let _ = conn.close(200, "shutdown".into()).await;
                    return Ok(());
                }
                d = deliveries.next() => d,
            };
            let Some(delivery) = delivery else {
                return Err(Error::unavailable("monitor consumer closed"));
            };
            let delivery = delivery?;
            let Ok(events) = decode_events(&delivery.data) else {
                amqp::dead_letter(
                    &ch,
                    &self.names,
                    &delivery,
                    &queue,
                    "monitor: body is not a JSON array of events",
                )
                .await?;
                continue;
            };
            match self.handle_all(&events).await {
                Ok(()) => {
                    delivery.ack(BasicAckOptions::default()).await?;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "handling a result failed; it will be redelivered");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    delivery
                        .nack(BasicNackOptions {
                            requeue: true,
                            ..BasicNackOptions::default()
                        })
                        .await?;
                }
            }
        }
    }

    async fn handle_all(&self, events: &[Event]) -> Result<(), Error> {
        for event in events {
            match event {
                Event::Result(r) => self.on_result(r).await?,
                Event::Triggered(rec) if rec.code != code::SUCCESS => {
                    self.on_failed_trigger(rec).await?
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn on_result(&self, r: &ExecResult) -> Result<(), Error> {
        let trigger = self.state.inflight(r.job_id, &r.trigger_id).await?;
        let retry_count = trigger
            .as_ref()
            .map_or_else(|| retry_count_of(&r.trigger_id), |t| t.retry_count);
        let ending = Ending {
            success: r.is_success(),
            retryable: r.retryable,
            retry_count,
        };
        let ended = Ended {
            trigger_id: &r.trigger_id,
            job_id: r.job_id,
            fire_ms: r.fire_ms,
            code: r.code,
            msg: &r.msg,
            executor_id: &r.executor_id,
            ending,
            trigger,
        };
        self.react(ended).await
    }

    async fn on_failed_trigger(&self, rec: &TriggerRecord) -> Result<(), Error> {
        let t = &rec.trigger;
        let ending = Ending {
            success: false,
            retryable: true,
            retry_count: t.retry_count,
        };
        let ended = Ended {
            trigger_id: &t.trigger_id,
            job_id: t.job_id,
            fire_ms: t.fire_ms,
            code: rec.code,
            msg: &rec.msg,
            executor_id: &t.executor_id,
            ending,
            trigger: Some(t.clone()),
        };
        self.react(ended).await
    }

    /// Applies the decision for one ending, once.
    async fn react(&self, ended: Ended<'_>) -> Result<(), Error> {
        if self.state.is_handled(ended.trigger_id).await? {
            return self.state.forget(ended.job_id, ended.trigger_id).await;
        }
        let job = match self.store.get_job(ended.job_id).await {
            Ok(job) => job,
            Err(e) if e.kind == ErrorKind::NotFound => {
                tracing::info!(
                    job_id = ended.job_id,
                    trigger_id = ended.trigger_id,
                    "job deleted; its ending needs nothing"
                );
                return self.finish(&ended).await;
            }
            Err(e) => return Err(e),
        };
        let decision = decide(&job, ended.ending, clock::now_ms());
        for child in &decision.children {
            self.trigger_child(*child, ended.trigger_id).await?;
        }
        if let Some((retry_count, due_ms)) = decision.retry {
            let item = retry_item(&job, &ended, retry_count);
            tracing::info!(job_id = job.id, trigger_id = %item.trigger_id, retry_count, due_ms, "retry scheduled");
            self.state.push_retry(&item, due_ms).await?;
        }
        if decision.alarm {
            self.alarm(&job, &ended).await?;
        }
        self.finish(&ended).await
    }

    async fn finish(&self, ended: &Ended<'_>) -> Result<(), Error> {
        self.state.mark_handled(ended.trigger_id).await?;
        self.state.forget(ended.job_id, ended.trigger_id).await
    }

    async fn trigger_child(&self, child_id: u64, parent_trigger_id: &str) -> Result<(), Error> {
        let child = match self.store.get_job(child_id).await {
            Ok(job) => job,
            Err(e) if e.kind == ErrorKind::NotFound => {
                tracing::warn!(
                    child_job = child_id,
                    parent = parent_trigger_id,
                    "child job does not exist; skipped"
                );
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let fire = Fire {
            job: Arc::new(child),
            fire_ms: clock::now_ms(),
            trigger_type: TriggerType::Parent,
            params: None,
            retry_count: 0,
            trigger_id: Some(child_trigger_id(child_id, parent_trigger_id)),
            shard: None,
        };
        self.dispatcher.dispatch(&fire).await?;
        Ok(())
    }

    async fn alarm(&self, job: &Job, ended: &Ended<'_>) -> Result<(), Error> {
        let failure = crate::alarm::Failure {
            trigger_id: ended.trigger_id.to_owned(),
            fire_ms: ended.fire_ms,
            executor_id: ended.executor_id.to_owned(),
            code: ended.code,
            msg: ended.msg.to_owned(),
            retry_count: ended.ending.retry_count,
            params: ended
                .trigger
                .as_ref()
                .map_or_else(|| job.params.clone(), |t| t.params.clone()),
        };
        let record = self.alarmer.alarm(job, &failure).await;
        self.dispatcher
            .publish_events(&[Event::Alarm(record)])
            .await
    }
}

fn retry_item(job: &Job, ended: &Ended<'_>, retry_count: u32) -> RetryItem {
    let (shard_index, shard_total, params) = match &ended.trigger {
        Some(t) => (t.shard_index, t.shard_total, t.params.clone()),
        None => (0, 1, job.params.clone()),
    };
    RetryItem {
        job_id: job.id,
        trigger_id: retry_trigger_id(ended.trigger_id, retry_count),
        fire_ms: ended.fire_ms,
        retry_count,
        shard_index,
        shard_total,
        params,
    }
}
