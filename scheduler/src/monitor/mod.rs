//! The result monitor: reacts to how triggers end (XXL-JOB's fail monitor,
//! child-job trigger and lose monitor, on a queue instead of a table scan).
//! (Over 500 lines: one consumer and the reactions that share an ending's
//! state; the decisions are in `decide`, the alarms in `crate::alarm`.)
//!
//! * Every node consumes the `monitor` queue (`result.*` and
//!   `trigger.failed` events) as a competing consumer. Per ending it applies
//!   [`decide`](mod@decide): child jobs on success; an alarm and, while retries remain, a
//!   retry after the job's backoff on failure. Retries wait in the durable
//!   `{pK}:retry` set; the leader dispatches them when due
//!   ([`crate::leader::retry`]).
//! * Reactions are idempotent: a retry's and a child's trigger ids derive
//!   from the ending trigger's id, so a result handled twice (redelivered
//!   after a crash) dispatches the same trigger ids, which executors run
//!   once; a handled mark (`{pK}:handled:<minute of fire_ms>`) skips plain
//!   duplicates.
//! * Deliveries are handled in groups (whatever the broker already pushed,
//!   up to [`MAX_GROUP_EVENTS`] events): one Redis pipeline reads the
//!   group's jobs and failures' in-flight records; one pipeline marks and
//!   forgets every ending that needs no reaction (the common success
//!   without child jobs); the others have their handled marks read (a
//!   third pipeline) and are reacted to one by one; then the group is
//!   acked at once (`multiple`).
//! * The leader also reaps ([`crate::leader::reaper`]): triggers with no result after
//!   `monitor.lost_after_ms` whose executor is gone become failed ("lost")
//!   results, which this monitor then retries and alarms like any failure;
//!   triggers waiting in an offline executor's queue are routed again to live
//!   executors of the group, or failed after `monitor.reroute_timeout_ms`.
//!
//! Why one file of ~550 lines: the consumer of the `monitor` queue and its
//! group handling (two round trips per group); the decisions are
//! [`decide`](mod@decide), pure and tested alone.

pub mod decide;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use lapin::Acker;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions};
use lapin::types::FieldTable;
use rondo_core::backoff::Backoff;
use rondo_core::event::decode_events;
use rondo_core::trigger::code;
use rondo_core::{Config, Error, ErrorKind, Event, Job, Names, Trigger, TriggerType, amqp, clock};
use rondo_dispatcher::{Dispatcher, Fire};
use tokio_util::sync::CancellationToken;

use crate::alarm::Alarmer;
use crate::alarm::outbox::{Outbox, OutboxConfig};
use crate::store::Store;
use crate::store::triggers::{GroupQuery, GroupWrite, HandledId, RetryItem, TriggerStore};
use decide::{Decision, Ending, decide};
use rondo_core::senders::{JobGroups, Senders};
use rondo_core::trigger_id;

/// Events handled together at most: one Redis read and one write pipeline,
/// one cumulative ack. A group takes the deliveries the broker has already
/// pushed (at most `monitor.prefetch` messages), so it grows with the load.
const MAX_GROUP_EVENTS: usize = 4096;

/// Deliveries handled together.
#[derive(Default)]
struct Group {
    events: Vec<Event>,
    messages: usize,
    /// The latest decodable delivery: acking it with `multiple` acks the
    /// group.
    last: Option<Acker>,
}

/// What ended: a result from an executor, or a trigger that never reached one.
struct Ended<'a> {
    trigger_id: &'a str,
    job_id: u64,
    fire_ms: i64,
    /// When the run ended (the executor's clock), or when the dispatcher
    /// gave the trigger up.
    end_ms: i64,
    code: i32,
    msg: &'a str,
    executor_id: &'a str,
    ending: Ending,
    /// The trigger, when known (in flight, or carried by a trigger event).
    trigger: Option<Trigger>,
}

pub struct Monitor {
    state: TriggerStore,
    store: Store,
    dispatcher: Arc<Dispatcher>,
    alarmer: Alarmer,
    outbox: Outbox,
    names: Names,
    config: Config,
    senders: Senders,
    job_groups: JobGroups,
}

impl Monitor {
    pub fn new(
        config: &Config,
        state: TriggerStore,
        store: Store,
        dispatcher: Arc<Dispatcher>,
    ) -> Arc<Self> {
        Arc::new(Monitor {
            state,
            alarmer: Alarmer::new(&config.alarm),
            outbox: Outbox::new(store.clone(), OutboxConfig::of(&config.alarm)),
            names: config.names(),
            config: config.clone(),
            senders: Senders::new(&config.amqp),
            job_groups: JobGroups::default(),
            store,
            dispatcher,
        })
    }

    /// Sends the alarms the outbox holds until `shutdown`.
    pub async fn send_alarms(self: Arc<Self>, shutdown: CancellationToken) {
        self.outbox
            .clone()
            .run(
                self.alarmer.clone(),
                self.dispatcher.events().clone(),
                shutdown,
            )
            .await;
    }

    /// Consumes the monitor queue until `shutdown`, reconnecting as needed.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut backoff = Backoff::jittered(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            match self.consume(&shutdown).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "result monitor lost the broker; reconnecting")
                }
            }
            if !backoff.wait(&shutdown).await {
                return;
            }
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
            // The group: this delivery and whatever else the broker has
            // already pushed (up to the prefetch), without waiting for more.
            let mut group = Group::default();
            self.take(&ch, &queue, delivery?, &mut group).await?;
            let mut closed = false;
            while group.events.len() < MAX_GROUP_EVENTS {
                match deliveries.next().now_or_never() {
                    Some(Some(delivery)) => self.take(&ch, &queue, delivery?, &mut group).await?,
                    Some(None) => {
                        closed = true;
                        break;
                    }
                    None => break,
                }
            }
            // Acked once, cumulatively, after the group's writes are done;
            // on a failure the whole group is redelivered, and what was
            // already handled is then only forgotten again.
            if let Some(last) = group.last {
                match self.handle_group(&group.events).await {
                    Ok(()) => {
                        last.ack(BasicAckOptions { multiple: true }).await?;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, messages = group.messages, "handling results failed; they will be redelivered");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        last.nack(BasicNackOptions {
                            multiple: true,
                            requeue: true,
                        })
                        .await?;
                    }
                }
            }
            if closed {
                return Err(Error::unavailable("monitor consumer closed"));
            }
        }
    }

    /// Adds a delivery's events to the group, or moves an undecodable one to
    /// the dead-letter queue (acked on its own).
    async fn take(
        &self,
        ch: &lapin::Channel,
        queue: &str,
        delivery: Delivery,
        group: &mut Group,
    ) -> Result<(), Error> {
        match decode_events(&delivery.data) {
            Ok(events) => {
                // A failed trigger's retry carries its params: only a
                // scheduler node may say a trigger failed. A result is
                // taken only from its job's group's executors.
                let sender = delivery.properties.user_id().as_ref().map(|u| u.as_str());
                let refusals = self.refusals(sender, &events).await?;
                if !events.is_empty() && refusals.iter().all(Option::is_some) {
                    metrics::counter!("rondo_monitor_forbidden_total").increment(1);
                    let reason = refusals.into_iter().flatten().next().unwrap_or_default();
                    amqp::dead_letter(ch, &self.names, &delivery, queue, &reason).await?;
                    return Ok(());
                }
                // Only the refused events of a message go (the worker
                // dead-letters its copy of each); the others are handled.
                for (event, refusal) in events.into_iter().zip(refusals) {
                    match refusal {
                        None => group.events.push(event),
                        Some(reason) => {
                            metrics::counter!("rondo_monitor_forbidden_total").increment(1);
                            tracing::warn!(%reason, "a refused event dropped");
                        }
                    }
                }
                group.messages += 1;
                group.last = Some(delivery.acker);
            }
            Err(_) => {
                amqp::dead_letter(
                    ch,
                    &self.names,
                    &delivery,
                    queue,
                    "monitor: body is not a JSON array of events",
                )
                .await?
            }
        }
        Ok(())
    }

    /// Why `sender` may not send each of `events`, if it may not (see
    /// [`Senders`]); the groups of the jobs it reports on are read from
    /// their definitions.
    async fn refusals(
        &self,
        sender: Option<&str>,
        events: &[Event],
    ) -> Result<Vec<Option<String>>, Error> {
        let jobs = self.senders.jobs_to_check(sender, events);
        let (mut groups, missing) = self.job_groups.lookup(&jobs);
        if !missing.is_empty() {
            let found = self.store.get_jobs(&missing).await?;
            let read: Vec<(u64, Option<String>)> = missing
                .iter()
                .map(|id| (*id, found.get(id).map(|job| job.group.clone())))
                .collect();
            groups.extend(read.iter().cloned());
            // Only a job found is remembered: an id made up by a sender
            // must not hide a job created a moment later.
            self.job_groups
                .remember(read.into_iter().filter(|(_, g)| g.is_some()));
        }
        Ok(self.senders.refusals(sender, events, &groups))
    }

    /// Reacts to every ending among `events` once, with the outcome of
    /// handling them one at a time in order, and two Redis round trips for
    /// the common endings (a success without child jobs, a duplicate, a
    /// deleted job's): one pipeline reads the jobs and the failures'
    /// in-flight records; one marks them handled and forgets their
    /// in-flight entries. Whether such an ending was handled before does not
    /// matter (handling it again writes the same), so its mark is not read:
    /// only the rare endings (failures with a retry or an alarm, successes
    /// with child jobs) have their `handled` marks read (one more pipeline)
    /// and are then reacted to one by one, exactly as a lone ending. On an
    /// error the caller requeues the whole group.
    async fn handle_group(&self, events: &[Event]) -> Result<(), Error> {
        let endings: Vec<Ended<'_>> = events.iter().filter_map(ended).collect();
        if endings.is_empty() {
            return Ok(());
        }
        // First occurrence of each trigger id; a later one is a duplicate,
        // handled by then.
        let mut first: HashMap<&str, usize> = HashMap::with_capacity(endings.len());
        let mut query = GroupQuery::default();
        let mut job_index: HashMap<u64, usize> = HashMap::new();
        let mut inflight_index: HashMap<usize, usize> = HashMap::new();
        for (i, e) in endings.iter().enumerate() {
            if first.contains_key(e.trigger_id) {
                continue;
            }
            first.insert(e.trigger_id, i);
            if e.needs_inflight() {
                inflight_index.insert(i, query.inflight.len());
                query.inflight.push((e.job_id, e.trigger_id));
            }
            job_index.entry(e.job_id).or_insert_with(|| {
                query.jobs.push(e.job_id);
                query.jobs.len() - 1
            });
        }
        let mut redis = self.state.conn().await?;
        let read = self.state.read_group(&mut redis, &query).await?;
        let jobs: Vec<Option<Result<Arc<Job>, Error>>> =
            self.store.decode_jobs(&query.jobs, read.jobs);

        let mut write = GroupWrite::default();
        let mut rare: Vec<(Ended<'_>, Arc<Job>)> = Vec::new();
        let mut failed: Option<Error> = None;
        let mut inflight = read.inflight;
        for (i, mut e) in endings.into_iter().enumerate() {
            if first[e.trigger_id] != i {
                // A duplicate: the first occurrence reacts (and forgets).
                continue;
            }
            if let Some(k) = inflight_index.get(&i) {
                e.set_inflight(inflight[*k].take());
            }
            let job = match &jobs[job_index[&e.job_id]] {
                None => {
                    tracing::info!(
                        job_id = e.job_id,
                        trigger_id = e.trigger_id,
                        "job deleted; its ending needs nothing"
                    );
                    write.mark.push(e.handled_id());
                    write.forget.push((e.job_id, e.trigger_id));
                    continue;
                }
                Some(Ok(job)) => job.clone(),
                Some(Err(err)) => {
                    // Left unhandled (the group is redelivered), as a lone
                    // ending whose job does not decode.
                    failed.get_or_insert_with(|| err.clone());
                    continue;
                }
            };
            if decide(&job, e.ending, clock::now_ms()) == Decision::default() {
                write.mark.push(e.handled_id());
                write.forget.push((e.job_id, e.trigger_id));
            } else {
                rare.push((e, job));
            }
        }
        if !rare.is_empty() {
            let ids: Vec<HandledId<'_>> = rare.iter().map(|(e, _)| e.handled_id()).collect();
            let handled = self.state.handled(&mut redis, &ids).await?;
            let mut unhandled = Vec::with_capacity(rare.len());
            for ((e, job), handled) in rare.into_iter().zip(handled) {
                if handled {
                    write.forget.push((e.job_id, e.trigger_id));
                } else {
                    unhandled.push((e, job));
                }
            }
            rare = unhandled;
        }
        self.state.finish_group(&mut redis, &write).await?;
        drop(redis);
        for (ended, job) in rare {
            self.react(ended, &job).await?;
        }
        failed.map_or(Ok(()), Err)
    }

    /// Applies a decision that does something (children, retry, alarm) to an
    /// ending not handled yet, then marks it handled.
    async fn react(&self, ended: Ended<'_>, job: &Job) -> Result<(), Error> {
        let decision = decide(job, ended.ending, clock::now_ms());
        for child in &decision.children {
            self.trigger_child(*child, &ended).await?;
        }
        if let Some((retry_count, due_ms)) = decision.retry {
            let item = retry_item(job, &ended, retry_count);
            tracing::info!(job_id = job.id, trigger_id = %item.trigger_id, retry_count, due_ms, "retry scheduled");
            self.state.push_retry(&item, due_ms).await?;
            metrics::counter!("rondo_retries_scheduled_total").increment(1);
        }
        if decision.alarm {
            self.alarm(job, &ended).await?;
        }
        if let Some(next) = decision.rearm {
            // Counted once per scheduled fire (its instant), however many
            // of its endings arrive (redeliveries, broadcast shards).
            let armed = self
                .store
                .rearm_fix_delay(job.id, ended.fire_ms, next)
                .await?;
            tracing::debug!(
                job_id = job.id,
                trigger_id = ended.trigger_id,
                next,
                armed,
                "fixed delay: next fire"
            );
        }
        // On a Redis Cluster the mark may live on another master than the
        // retry, the re-arm or the children's records: they reach a replica
        // first, so a failover cannot keep the mark and lose the reaction.
        self.store.replicate().await?;
        self.state.mark_handled(ended.handled_id()).await?;
        self.state.forget(ended.job_id, ended.trigger_id).await
    }

    /// Dispatches a child job after its parent's success. Its trigger id
    /// and its fire instant (the parent's end) come from the parent's
    /// result alone, so a result handled twice (the monitor stopped before
    /// its handled mark) dispatches the same trigger: the executor runs it
    /// once, and its handled mark and in-flight record agree on its minute.
    async fn trigger_child(&self, child_id: u64, parent: &Ended<'_>) -> Result<(), Error> {
        let parent_trigger_id = parent.trigger_id;
        if trigger_id::chain_depth(parent_trigger_id) >= trigger_id::MAX_CHAIN_DEPTH {
            tracing::warn!(
                child_job = child_id,
                parent = parent_trigger_id,
                max = trigger_id::MAX_CHAIN_DEPTH,
                "chain of child jobs too deep (a cycle?); child skipped"
            );
            return Ok(());
        }
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
            fire_ms: child_fire_ms(parent, clock::now_ms()),
            trigger_type: TriggerType::Parent,
            params: None,
            retry_count: 0,
            trigger_id: Some(trigger_id::child(child_id, parent_trigger_id)),
            shard: None,
            executors: Vec::new(),
        };
        self.dispatcher.dispatch(&fire).await?;
        metrics::counter!("rondo_child_triggers_total").increment(1);
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
            failures: 1,
        };
        // Off the monitor's path: the failure is folded into the job's
        // pending alarm, which a sender sends (`alarm::outbox`).
        let record = if job.alarm_email.trim().is_empty()
            && job.alarm_webhook.trim().is_empty()
            && job.alarm_channels.is_empty()
        {
            metrics::counter!("rondo_alarms_total", "outcome" => "not_needed").increment(1);
            rondo_core::event::AlarmRecord {
                trigger_id: failure.trigger_id.clone(),
                job_id: job.id,
                fire_ms: failure.fire_ms,
                status: rondo_core::event::alarm_status::NOT_NEEDED,
                msg: "no alarm channel: alarm_email, alarm_webhook and alarm_channels are empty"
                    .into(),
            }
        } else {
            self.outbox.fold(job, &failure).await?
        };
        self.dispatcher
            .events()
            .publish(&[Event::Alarm(record)])
            .await
    }
}

/// How far ahead of the monitor's clock an executor's `end_ms` may be and
/// still be a child's fire instant.
const MAX_END_SKEW_MS: i64 = 60_000;

/// A child job's fire instant: its parent's end as the parent's result
/// reports it, so a result handled twice gives the same instant. An end
/// before the parent's fire or more than [`MAX_END_SKEW_MS`] ahead of `now`
/// (an executor's clock far off) is not believed: the parent's fire
/// instant is used, also the same on every handling.
fn child_fire_ms(parent: &Ended<'_>, now_ms: i64) -> i64 {
    let end = parent.end_ms;
    if end >= parent.fire_ms && end <= now_ms.saturating_add(MAX_END_SKEW_MS) {
        return end;
    }
    tracing::warn!(
        parent = parent.trigger_id,
        end_ms = end,
        fire_ms = parent.fire_ms,
        "the parent's reported end is before its fire or far ahead of this clock; the child fires at the parent's fire instant"
    );
    parent.fire_ms
}

/// The ending an event reports, if any.
fn ended(event: &Event) -> Option<Ended<'_>> {
    match event {
        Event::Result(r) => Some(Ended {
            trigger_id: &r.trigger_id,
            job_id: r.job_id,
            fire_ms: r.fire_ms,
            end_ms: r.end_ms,
            code: r.code,
            msg: &r.msg,
            executor_id: &r.executor_id,
            // Completed from the in-flight record, for a failure.
            ending: Ending {
                success: r.is_success(),
                retryable: r.retryable,
                retry_count: trigger_id::retry_count(&r.trigger_id),
                scheduled: trigger_id::is_scheduled(&r.trigger_id),
            },
            trigger: None,
        }),
        Event::Triggered(rec) if rec.code != code::SUCCESS => {
            let t = &rec.trigger;
            Some(Ended {
                trigger_id: &t.trigger_id,
                job_id: t.job_id,
                fire_ms: t.fire_ms,
                end_ms: t.sent_ms,
                code: rec.code,
                msg: &rec.msg,
                executor_id: &t.executor_id,
                ending: Ending {
                    success: false,
                    retryable: true,
                    retry_count: t.retry_count,
                    scheduled: trigger_id::is_scheduled(&t.trigger_id),
                },
                trigger: Some(t.clone()),
            })
        }
        _ => None,
    }
}

impl<'a> Ended<'a> {
    /// Whether the in-flight record matters: only a failed result's retry
    /// and alarm use it (its retry count, shard, params); a success's
    /// decision does not depend on it.
    fn needs_inflight(&self) -> bool {
        self.trigger.is_none() && !self.ending.success
    }

    /// Where its handled mark is kept.
    fn handled_id(&self) -> HandledId<'a> {
        HandledId {
            job_id: self.job_id,
            fire_ms: self.fire_ms,
            trigger_id: self.trigger_id,
        }
    }

    fn set_inflight(&mut self, trigger: Option<Trigger>) {
        if let Some(t) = &trigger {
            self.ending.retry_count = t.retry_count;
        }
        self.trigger = trigger;
    }
}

fn retry_item(job: &Job, ended: &Ended<'_>, retry_count: u32) -> RetryItem {
    let (shard_index, shard_total, params) = match &ended.trigger {
        Some(t) => (t.shard_index, t.shard_total, t.params.clone()),
        None => (0, 1, job.params.clone()),
    };
    RetryItem {
        job_id: job.id,
        trigger_id: trigger_id::retry(ended.trigger_id, retry_count),
        fire_ms: ended.fire_ms,
        retry_count,
        shard_index,
        shard_total,
        params,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(fire_ms: i64, end_ms: i64) -> Ended<'static> {
        Ended {
            trigger_id: "7-1000-0",
            job_id: 7,
            fire_ms,
            end_ms,
            code: code::SUCCESS,
            msg: "",
            executor_id: "e1",
            ending: Ending {
                success: true,
                retryable: true,
                retry_count: 0,
                scheduled: true,
            },
            trigger: None,
        }
    }

    #[test]
    fn a_child_fires_at_its_parents_reported_end_when_that_is_believable() {
        let now = 1_000_000;
        assert_eq!(child_fire_ms(&ended(990_000, 995_000), now), 995_000);
        // A little ahead of this clock: another host's clock.
        assert_eq!(
            child_fire_ms(&ended(990_000, now + 5_000), now),
            now + 5_000
        );
        // Before the parent's fire, or far ahead: the parent's fire.
        assert_eq!(child_fire_ms(&ended(990_000, 989_999), now), 990_000);
        assert_eq!(child_fire_ms(&ended(990_000, 0), now), 990_000);
        assert_eq!(
            child_fire_ms(&ended(990_000, now + MAX_END_SKEW_MS + 1), now),
            990_000
        );
        assert_eq!(child_fire_ms(&ended(990_000, i64::MAX), now), 990_000);
    }
}
