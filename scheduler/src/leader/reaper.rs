//! The leader's reaper: lost triggers and dead executors' queues, every
//! `monitor.scan_interval_ms`, under the leader's term.
//!
//! * **Lost triggers.** A trigger in flight for longer than
//!   `monitor.lost_after_ms` whose executor no longer heartbeats will never
//!   answer: the reaper publishes a failed result for it ("lost"), which the
//!   persistence worker stores and the monitor retries and alarms like any
//!   failure. A trigger still running on a live executor is left alone.
//! * **Dead executors.** An executor whose heartbeat is older than
//!   `registry.dead_after_ms` leaves the registry, but not before the
//!   triggers waiting in its durable queue are taken out (`basic.get`) and
//!   routed again to a live executor of the group with the same trigger id
//!   (so dedupe still holds). A trigger the dead executor had already
//!   started (its dedupe mark exists) is not sent again: it is a lost
//!   trigger, failed and retried by the scan above. When no executor of the group is alive, they
//!   wait; after `monitor.reroute_timeout_ms` they are failed with the
//!   reason (a `trigger.failed` event, which the monitor retries and
//!   alarms). A queue someone still consumes is never drained: its
//!   executor is alive, only late with its heartbeat.
//!
//! **Fencing.** Reading the old in-flight triggers and taking one off the
//! scan are fenced scripts, like the claim, so a deposed leader fails no
//! trigger. Draining a queue is broker work that Redis cannot fence; the
//! reaper checks its term before each dead executor, and a drain raced by
//! two leaders re-sends the same trigger ids, which executors run once.

use std::sync::Arc;
use std::time::Duration;

use lapin::Channel;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicRejectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use rondo_core::config::Config;
use rondo_core::event::TriggerRecord;
use rondo_core::trigger::code;
use rondo_core::{Error, Event, ExecResult, Names, Routing, Trigger, TriggerBatch, amqp, clock};
use rondo_dispatcher::Dispatcher;
use tokio_util::sync::CancellationToken;

use super::fence::carry_on;
use crate::store::Store;
use crate::store::triggers::TriggerStore;

/// Lost-trigger candidates read per partition per scan.
const LOST_BATCH: usize = 1000;

/// What became of one stranded message.
enum Stranded {
    /// Every trigger in it went to a live executor (or was failed).
    Done,
    /// No live executor yet: leave it in the queue.
    Wait,
}

pub struct Reaper {
    triggers: TriggerStore,
    store: Store,
    dispatcher: Arc<Dispatcher>,
    config: Config,
    names: Names,
}

impl Reaper {
    pub fn new(
        config: &Config,
        triggers: TriggerStore,
        store: Store,
        dispatcher: Arc<Dispatcher>,
    ) -> Arc<Self> {
        Arc::new(Reaper {
            names: config.names(),
            config: config.clone(),
            triggers,
            store,
            dispatcher,
        })
    }

    /// Reaps for `term` every `monitor.scan_interval_ms` until `stop`;
    /// `Err` only for `StaleTerm`.
    pub async fn run(self: Arc<Self>, term: u64, stop: CancellationToken) -> Result<(), Error> {
        let interval = Duration::from_millis(self.config.monitor.scan_interval_ms);
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(interval) => {}
            }
            let dead = self.reap_dead_executors(term).await;
            carry_on("reaping dead executors", term, dead)?;
            carry_on(
                "looking for lost triggers",
                term,
                self.reap_lost(term).await,
            )?;
        }
    }

    /// Turns triggers whose executor died without answering into failures.
    pub async fn reap_lost(&self, term: u64) -> Result<u64, Error> {
        let now = clock::now_ms();
        let before = now - self.config.monitor.lost_after_ms;
        let alive_since = now - self.config.registry.dead_after_ms as i64;
        let mut lost = 0;
        for p in 0..self.names.partitions() {
            for id in self
                .triggers
                .stale_inflight(p, term, before, LOST_BATCH)
                .await?
            {
                let Some(t) = self.triggers.inflight_data(p, &id).await? else {
                    self.triggers.unlist(p, term, &id).await?;
                    continue;
                };
                // A result can overtake the dispatcher's in-flight record;
                // the monitor has handled it: only the record is left.
                if self.triggers.is_handled(&id).await? {
                    self.triggers.forget(t.job_id, &id).await?;
                    continue;
                }
                if self
                    .triggers
                    .is_alive(&t.group, &t.executor_id, alive_since)
                    .await?
                {
                    continue;
                }
                if self.triggers.unlist(p, term, &id).await? {
                    self.publish_lost(&t, now).await?;
                    lost += 1;
                }
            }
        }
        Ok(lost)
    }

    async fn publish_lost(&self, t: &Trigger, now: i64) -> Result<(), Error> {
        let waited_s = (now - t.sent_ms) / 1000;
        let msg = format!(
            "lost: executor {} stopped answering; no result after {waited_s} s",
            t.executor_id
        );
        tracing::warn!(trigger_id = %t.trigger_id, job_id = t.job_id, executor_id = %t.executor_id, "trigger lost");
        let result = ExecResult {
            trigger_id: t.trigger_id.clone(),
            job_id: t.job_id,
            executor_id: t.executor_id.clone(),
            fire_ms: t.fire_ms,
            start_ms: 0,
            end_ms: now,
            code: code::FAIL,
            msg,
            retryable: true,
        };
        self.dispatcher
            .events()
            .publish(&[Event::Result(result)])
            .await
    }

    /// Drains dead executors' queues, then drops them from the registry.
    pub async fn reap_dead_executors(&self, term: u64) -> Result<(), Error> {
        let before = clock::now_ms() - self.config.registry.dead_after_ms as i64;
        let groups = self.store.list_groups().await?;
        let mut link = None;
        for group in groups {
            for dead in self.triggers.dead_executors(&group.app, before).await? {
                self.triggers.check_term(0, term).await?;
                if link.is_none() {
                    let conn = amqp::connect(&self.config.amqp.url, "rondo-reaper").await?;
                    let ch = amqp::confirm_channel(&conn).await?;
                    link = Some((conn, ch));
                }
                let Some((conn, ch)) = link.as_ref() else {
                    continue;
                };
                if self.drain(conn, ch, &group.app, &dead).await?
                    && self
                        .triggers
                        .drop_executor(&group.app, &dead, before)
                        .await?
                {
                    tracing::info!(group = %group.app, executor_id = %dead, "dead executor removed from the registry");
                }
            }
        }
        if let Some((conn, _)) = link {
            let _ = conn.close(200, "done".into()).await;
        }
        Ok(())
    }

    /// Moves a dead executor's waiting triggers; true when its queue is
    /// empty (or gone) afterwards.
    async fn drain(
        &self,
        conn: &lapin::Connection,
        ch: &Channel,
        app: &str,
        dead: &str,
    ) -> Result<bool, Error> {
        let queue = self.names.executor_queue(app, dead);
        let passive = QueueDeclareOptions {
            passive: true,
            durable: true,
            ..QueueDeclareOptions::default()
        };
        // A passive declare of a missing queue closes its channel: probe on
        // a throw-away one.
        let probe = conn.create_channel().await?;
        let declared = probe
            .queue_declare(queue.as_str().into(), passive, FieldTable::default())
            .await;
        let _ = probe.close(200, "probe".into()).await;
        let Ok(q) = declared else { return Ok(true) };
        if q.consumer_count() > 0 {
            return Ok(false);
        }
        loop {
            let Some(msg) = ch
                .basic_get(queue.as_str().into(), BasicGetOptions::default())
                .await?
            else {
                break;
            };
            match self
                .reroute_message(ch, app, dead, &queue, &msg.delivery)
                .await?
            {
                Stranded::Done => {
                    msg.delivery.ack(BasicAckOptions::default()).await?;
                }
                Stranded::Wait => {
                    msg.delivery
                        .reject(BasicRejectOptions { requeue: true })
                        .await?;
                    return Ok(false);
                }
            }
        }
        let delete = QueueDeleteOptions {
            if_unused: true,
            if_empty: true,
            ..QueueDeleteOptions::default()
        };
        let _ = ch.queue_delete(queue.as_str().into(), delete).await;
        Ok(true)
    }

    async fn reroute_message(
        &self,
        ch: &Channel,
        app: &str,
        dead: &str,
        queue: &str,
        delivery: &lapin::message::Delivery,
    ) -> Result<Stranded, Error> {
        let Ok(batch) = serde_json::from_slice::<TriggerBatch>(&delivery.data) else {
            amqp::dead_letter(
                ch,
                &self.names,
                delivery,
                queue,
                "reaper: stranded message is not a trigger batch",
            )
            .await?;
            return Ok(Stranded::Done);
        };
        let live: Vec<String> = self
            .dispatcher
            .registry()
            .live(app)
            .await?
            .into_iter()
            .filter(|e| e != dead)
            .collect();
        let now = clock::now_ms();
        let oldest = batch
            .triggers
            .iter()
            .map(|t| t.sent_ms)
            .min()
            .unwrap_or(now);
        if live.is_empty() && now - oldest < self.config.monitor.reroute_timeout_ms {
            return Ok(Stranded::Wait);
        }
        for trigger in batch.triggers {
            if self.triggers.was_started(&trigger.trigger_id).await? {
                tracing::info!(trigger_id = %trigger.trigger_id, executor_id = dead, "started on the dead executor; left to the lost-trigger scan");
                continue;
            }
            if live.is_empty() {
                let failed =
                    stranded_failure(trigger, dead, self.config.monitor.reroute_timeout_ms);
                let event = Event::Triggered(failed);
                self.dispatcher.events().publish(&[event]).await?;
            } else {
                self.resend(trigger, &live).await?;
            }
        }
        Ok(Stranded::Done)
    }

    /// Sends a stranded trigger, same id, to a live executor, through the
    /// dispatcher's publish path (confirmed, recorded in flight, announced).
    async fn resend(&self, trigger: Trigger, live: &[String]) -> Result<(), Error> {
        let routing = self
            .store
            .get_job(trigger.job_id)
            .await
            .map(|j| j.routing)
            .ok();
        let target = pick_live(&trigger, routing, live).to_owned();
        let record = self
            .dispatcher
            .redeliver(trigger, &target, "rerouted from a dead executor")
            .await?;
        if record.code == code::SUCCESS {
            tracing::info!(trigger_id = %record.trigger.trigger_id, executor_id = %target, "stranded trigger rerouted");
        }
        Ok(())
    }
}

/// The live executor a stranded trigger goes to: a broadcast shard keeps
/// its index's place; any other trigger goes to the executor its id hashes
/// to, spreading a dead executor's backlog over the group.
fn pick_live<'a>(trigger: &Trigger, routing: Option<Routing>, live: &'a [String]) -> &'a str {
    debug_assert!(!live.is_empty());
    let i = match routing {
        Some(Routing::ShardingBroadcast) => trigger.shard_index as usize,
        _ => trigger.trigger_id.bytes().fold(0usize, |h, b| {
            h.wrapping_mul(31).wrapping_add(usize::from(b))
        }),
    };
    &live[i % live.len()]
}

fn stranded_failure(trigger: Trigger, dead: &str, timeout_ms: i64) -> TriggerRecord {
    let msg = format!(
        "executor {dead} died with this trigger queued and no executor of group {} came up within {} s",
        trigger.group,
        timeout_ms / 1000
    );
    TriggerRecord {
        trigger,
        code: code::FAIL,
        msg,
    }
}
