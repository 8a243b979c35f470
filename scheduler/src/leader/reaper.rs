//! The leader's reaper: offline executors' queues every quarter of
//! `registry.lease_ms`, lost triggers every `monitor.scan_interval_ms`,
//! under the leader's term.
//!
//! * **Offline executors.** An executor whose registry score is older than
//!   `registry.lease_ms` (it crashed, froze, or retired on a graceful stop)
//!   gets no trigger from routing, and the reaper takes the messages
//!   waiting in its durable queue (`basic.get`) and settles each trigger
//!   in them by its dedupe mark ([`rondo_core::dedupe`]):
//!   - no mark (never started): routed again, same trigger id, to a live
//!     executor of the group;
//!   - a kill mark (killed before anyone took it): answered as killed
//!     here, never run;
//!     a scheduled fire later than `scheduler.misfire_threshold_ms` by
//!     now gets the job's misfire rule first: `DO_NOTHING` answers it as
//!     skipped, `FIRE_ONCE_NOW` sends one per job and answers the rest as
//!     folded into it;
//!   - `running` by the offline executor: its message came back unacked,
//!     so the process died with the handler running — failed at once as
//!     lost (retryable), not after `monitor.lost_after_ms`;
//!   - `finished` by the offline executor: its stored result is published;
//!   - anything else (another executor's mark, `confirmed`): someone else
//!     answers; dropped.
//!
//!   When no executor of the group is alive, the messages wait; after
//!   `monitor.reroute_timeout_ms` their triggers are failed with the
//!   reason. A queue is deleted (only if empty and unused, which the broker
//!   checks) and the executor leaves the registry once it is gone for good:
//!   it left after a graceful stop (its hash is gone) or it has been silent
//!   for `registry.dead_after_ms`. An executor that restarts under the
//!   same id declares its queue again before it registers.
//! * **Lost triggers.** A trigger in flight for longer than
//!   `monitor.lost_after_ms` whose executor no longer heartbeats will never
//!   answer: the reaper publishes a failed result for it ("lost"), which the
//!   persistence worker stores and the monitor retries and alarms like any
//!   failure. A trigger still running on a live executor is left alone.
//!
//! **Fencing.** Reading the old in-flight triggers and taking one off the
//! scan are fenced scripts, like the claim, so a deposed leader fails no
//! trigger. Draining a queue is broker work that Redis cannot fence; the
//! reaper checks its term before each offline executor, and a drain raced
//! by two leaders re-sends the same trigger ids, which executors run once.
//!
//! Why one file of ~650 lines: the reaper's two scans share the leader's
//! term, the in-flight reads and the moves they make; each scan's rules are
//! written once here, beside the code that applies them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use lapin::Channel;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicRejectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use rondo_core::config::Config;
use rondo_core::dedupe::Mark;
use rondo_core::event::TriggerRecord;
use rondo_core::registry;
use rondo_core::schedule::MisfireRule;
use rondo_core::trigger::code;
use rondo_core::{
    Error, Event, ExecResult, Job, Names, Routing, Trigger, TriggerBatch, TriggerType, amqp, clock,
};
use rondo_dispatcher::Dispatcher;
use tokio_util::sync::CancellationToken;

use super::fence::carry_on;
use crate::store::Store;
use crate::store::triggers::{HandledId, TriggerStore};

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
    /// The broker link for draining queues, made when first needed.
    link: tokio::sync::Mutex<Option<(lapin::Connection, Channel)>>,
    /// When this leader first saw a retired executor offline (a retired
    /// executor's score says nothing of when it stopped).
    first_seen: std::sync::Mutex<HashMap<String, i64>>,
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
            link: tokio::sync::Mutex::new(None),
            first_seen: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// Reaps for `term` until `stop`: offline executors every quarter
    /// lease, lost triggers every `monitor.scan_interval_ms`; `Err` only
    /// for `StaleTerm`.
    pub async fn run(self: Arc<Self>, term: u64, stop: CancellationToken) -> Result<(), Error> {
        let scan = Duration::from_millis(self.config.monitor.scan_interval_ms);
        let mut offline = tokio::time::interval(self.config.registry.lease_renew());
        offline.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_scan = tokio::time::Instant::now() + scan;
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                _ = offline.tick() => {}
            }
            let moved = self.reap_offline_executors(term).await;
            carry_on("moving offline executors' triggers", term, moved)?;
            if tokio::time::Instant::now() >= next_scan {
                next_scan = tokio::time::Instant::now() + scan;
                carry_on(
                    "looking for lost triggers",
                    term,
                    self.reap_lost(term).await,
                )?;
            }
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
                let id_of = HandledId {
                    job_id: t.job_id,
                    fire_ms: t.fire_ms,
                    trigger_id: &id,
                };
                if self.triggers.is_handled(id_of).await? {
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
                    metrics::counter!("rondo_lost_triggers_total").increment(1);
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
        tracing::warn!(trigger_id = %t.trigger_id, job_id = %t.job_id, executor_id = %t.executor_id, "trigger lost");
        self.answer(t, msg, true).await
    }

    /// Publishes a failed result for `t` that no executor will send.
    async fn answer(&self, t: &Trigger, msg: String, retryable: bool) -> Result<(), Error> {
        self.dispatcher
            .events()
            .publish(&[failure(t, msg, retryable)])
            .await
    }

    /// Moves what waits in offline executors' queues; deletes the queue and
    /// drops the executor from the registry once it is gone for good.
    pub async fn reap_offline_executors(&self, term: u64) -> Result<(), Error> {
        let now = clock::now_ms();
        // After an outage, a lease that lapsed only because Redis did not
        // answer is not an executor gone.
        let offline_before = self
            .triggers
            .lease_cutoff(now, self.config.registry.lease_ms as i64);
        let dead_before = now - self.config.registry.dead_after_ms as i64;
        let mut offline = Vec::new();
        for group in self.store.list_groups().await? {
            for (executor, score) in self
                .triggers
                .offline_executors(&group.app, offline_before)
                .await?
            {
                offline.push((group.app.clone(), executor, score));
            }
        }
        let since = self.offline_since(&offline, now);
        if offline.is_empty() {
            return Ok(());
        }
        // One broker link, kept across ticks while it works.
        let mut link = self.link.lock().await;
        for ((app, executor, score), offline_since) in offline.into_iter().zip(since) {
            self.triggers.check_term(0, term).await?;
            let usable = link
                .as_ref()
                .is_some_and(|(conn, ch)| conn.status().connected() && ch.status().connected());
            if !usable {
                let conn = amqp::connect(&self.config.amqp.url, "rondo-reaper").await?;
                let ch = amqp::confirm_channel(&conn).await?;
                *link = Some((conn, ch));
            }
            let Some((conn, ch)) = link.as_ref() else {
                continue;
            };
            let retired = score <= registry::RETIRED_SCORE;
            let mut drain = Drain {
                app: &app,
                offline: &executor,
                queue: self.names.executor_queue(&app, &executor),
                retired,
                offline_since,
                crashed: false,
                incarnation: self.triggers.incarnation(&executor).await?,
                fired_once_now: HashSet::new(),
            };
            let silent = !retired && score < dead_before;
            let moved = self
                .move_queue(conn, ch, &mut drain, silent, offline_before)
                .await;
            if let Err(e) = moved {
                *link = None;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Since when each offline executor's triggers are stranded: its last
    /// score, or, for a retired one (whose score says nothing of when it
    /// stopped), when this leader first saw it retired.
    fn offline_since(&self, offline: &[(String, String, i64)], now: i64) -> Vec<i64> {
        let mut first_seen = self
            .first_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let keys: Vec<String> = offline.iter().map(|(a, e, _)| format!("{a}/{e}")).collect();
        first_seen.retain(|key, _| keys.contains(key));
        offline
            .iter()
            .zip(keys)
            .map(|((_, _, score), key)| {
                let seen = *first_seen.entry(key).or_insert(now);
                if *score > registry::RETIRED_SCORE {
                    *score
                } else {
                    seen
                }
            })
            .collect()
    }

    /// Drains one offline executor's queue; once it is drained and the
    /// executor gone for good, deletes the queue and drops the executor.
    async fn move_queue(
        &self,
        conn: &lapin::Connection,
        ch: &Channel,
        drain: &mut Drain<'_>,
        silent: bool,
        offline_before: i64,
    ) -> Result<(), Error> {
        if !self.drain(conn, ch, drain).await? {
            return Ok(());
        }
        // A retired executor may still hold messages it will hand back: it
        // is gone once it left (its hash), or, had it crashed before
        // leaving, once its hash expired; a crashed one also once silent
        // for `registry.dead_after_ms`. The score is read again right
        // before the delete, so one that came back under the same id keeps
        // its fresh queue (the broker refuses to delete a queue in use).
        let (app, executor) = (drain.app, drain.offline);
        let gone = silent || !self.triggers.has_entry(executor).await?;
        if gone
            && !self
                .triggers
                .is_alive(app, executor, offline_before)
                .await?
            && self.delete_queue(conn, &drain.queue).await
            && self
                .triggers
                .drop_executor(app, executor, offline_before)
                .await?
        {
            tracing::info!(
                group = app,
                executor_id = executor,
                "executor gone: queue deleted, removed from the registry"
            );
        }
        Ok(())
    }

    /// Deletes an executor's queue if it is empty and unused; true when it
    /// is gone. A classic queue: the broker checks both (`if-empty`,
    /// `if-unused`). A quorum queue refuses those flags (RabbitMQ 3.x), so
    /// the counts are read first and the delete is plain: a trigger
    /// published between the two would go with the queue, but none is —
    /// the executor is out of the registry, so nothing routes to it.
    async fn delete_queue(&self, conn: &lapin::Connection, queue: &str) -> bool {
        let quorum = self.names.quorum_queues();
        let delete = QueueDeleteOptions {
            if_unused: !quorum,
            if_empty: !quorum,
            ..QueueDeleteOptions::default()
        };
        // A refused delete closes its channel: use a throw-away one.
        let Ok(ch) = conn.create_channel().await else {
            return false;
        };
        if quorum {
            let passive = QueueDeclareOptions {
                passive: true,
                durable: true,
                ..QueueDeclareOptions::default()
            };
            let idle = ch
                .queue_declare(queue.into(), passive, FieldTable::default())
                .await
                .is_ok_and(|q| q.message_count() == 0 && q.consumer_count() == 0);
            if !idle {
                return false;
            }
        }
        let deleted = ch.queue_delete(queue.into(), delete).await.is_ok();
        if deleted {
            let _ = ch.close(200, "deleted".into()).await;
        }
        deleted
    }

    /// Moves an offline executor's waiting triggers; true when its queue
    /// is empty (or gone) afterwards.
    async fn drain(
        &self,
        conn: &lapin::Connection,
        ch: &Channel,
        drain: &mut Drain<'_>,
    ) -> Result<bool, Error> {
        let passive = QueueDeclareOptions {
            passive: true,
            durable: true,
            ..QueueDeclareOptions::default()
        };
        // A passive declare of a missing queue closes its channel: probe on
        // a throw-away one.
        let probe = conn.create_channel().await?;
        let declared = probe
            .queue_declare(drain.queue.as_str().into(), passive, FieldTable::default())
            .await;
        let _ = probe.close(200, "probe".into()).await;
        let Ok(declared) = declared else {
            return Ok(true);
        };
        // Not retired, no lease and nobody consuming: the process is gone
        // (a crash closes its connection; the broker took its consumer
        // away and put its unacked messages back).
        drain.crashed = !drain.retired && declared.consumer_count() == 0;
        loop {
            let Some(msg) = ch
                .basic_get(drain.queue.as_str().into(), BasicGetOptions::default())
                .await?
            else {
                return Ok(true);
            };
            match self.reroute_message(ch, drain, &msg.delivery).await? {
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
    }

    async fn reroute_message(
        &self,
        ch: &Channel,
        drain: &mut Drain<'_>,
        delivery: &lapin::message::Delivery,
    ) -> Result<Stranded, Error> {
        let Ok(batch) = serde_json::from_slice::<TriggerBatch>(&delivery.data) else {
            amqp::dead_letter(
                ch,
                &self.names,
                delivery,
                &drain.queue,
                "reaper: stranded message is not a trigger batch",
            )
            .await?;
            return Ok(Stranded::Done);
        };
        let live: Vec<String> = self
            .dispatcher
            .registry()
            .live(drain.app)
            .await?
            .into_iter()
            .filter(|e| e != drain.offline)
            .collect();
        let now = clock::now_ms();
        let oldest = batch
            .triggers
            .iter()
            .map(|t| t.sent_ms)
            .min()
            .unwrap_or(now);
        let stranded_since = oldest.max(drain.offline_since);
        if live.is_empty() && now - stranded_since < self.config.monitor.reroute_timeout_ms {
            return Ok(Stranded::Wait);
        }
        // One round trip for the marks and one for the jobs of the whole
        // message; then every answer in one publish and every re-send at
        // once (the dispatcher batches them per executor), so a dead
        // executor's backlog moves in a few round trips, not one per trigger.
        let ids: Vec<(&str, &str)> = batch
            .triggers
            .iter()
            .map(|t| (t.group.as_str(), t.trigger_id.as_str()))
            .collect();
        let marks = self.triggers.marks(&ids).await?;
        let job_ids: Vec<u64> = batch.triggers.iter().map(|t| t.job_id).collect();
        let jobs = self.store.get_jobs(&job_ids).await?;
        let mut events = Vec::new();
        let mut resends = Vec::new();
        for (trigger, mark) in batch.triggers.into_iter().zip(marks) {
            let job = jobs.get(&trigger.job_id).map(|j| j.as_ref());
            match self.settle(trigger, mark.as_deref(), job, drain, live.is_empty()) {
                Settle::Publish(event) => events.push(event),
                Settle::Resend(trigger, routing) => resends.push((trigger, routing)),
                Settle::Drop => {}
            }
        }
        if !events.is_empty() {
            self.dispatcher.events().publish(&events).await?;
        }
        let sent = futures_util::future::join_all(
            resends
                .into_iter()
                .map(|(trigger, routing)| self.resend(trigger, routing, &live)),
        )
        .await;
        sent.into_iter().collect::<Result<Vec<()>, Error>>()?;
        Ok(Stranded::Done)
    }

    /// Decides what becomes of one trigger that came back from an offline
    /// executor's queue, by its dedupe mark (see the module docs) and, for
    /// one to send again, its lateness.
    fn settle(
        &self,
        trigger: Trigger,
        mark: Option<&str>,
        job: Option<&Job>,
        drain: &mut Drain<'_>,
        none_live: bool,
    ) -> Settle {
        let id = trigger.trigger_id.clone();
        match mark.map(|m| (m, Mark::parse(m))) {
            None => {}
            Some((_, Some(Mark::Killed { .. }))) => {
                // Killed before anyone took it: answer it so, never run it.
                return Settle::Publish(failure(&trigger, "killed".into(), false));
            }
            Some((
                _,
                Some(Mark::Running {
                    executor,
                    incarnation,
                    ..
                }),
            )) if executor == drain.offline => {
                // Its message came back unacked. Lost only if the process
                // is surely gone: nobody consumes its queue, or it has
                // restarted since (another incarnation). Otherwise it may
                // still run the handler: the lost-trigger scan decides
                // after `monitor.lost_after_ms`, if no result came.
                let restarted = drain.incarnation.as_deref() != Some(incarnation.as_str());
                if !drain.crashed && !restarted {
                    tracing::info!(trigger_id = %id, executor_id = drain.offline, "running on an offline executor that may still be alive; left to the lost-trigger scan");
                    return Settle::Drop;
                }
                let msg = format!(
                    "lost: executor {} went away while the handler ran (its message came back unacked); the run's outcome is unknown",
                    drain.offline
                );
                tracing::warn!(trigger_id = %id, executor_id = drain.offline, "trigger lost with its executor");
                return Settle::Publish(failure(&trigger, msg, true));
            }
            Some((_, Some(Mark::Finished { executor, result }))) if executor == drain.offline => {
                tracing::info!(trigger_id = %id, executor_id = drain.offline, "publishing the stored result of an offline executor");
                return Settle::Publish(Event::Result(result));
            }
            Some(_) => {
                tracing::info!(trigger_id = %id, executor_id = drain.offline, "taken by another executor or already answered; dropped");
                return Settle::Drop;
            }
        }
        if none_live {
            let failed = stranded_failure(
                trigger,
                drain.offline,
                self.config.monitor.reroute_timeout_ms,
            );
            return Settle::Publish(Event::Triggered(failed));
        }
        // The lateness the outage caused: since the fire's instant, or since
        // the executor went offline if the fire was waiting there already
        // (a SERIAL backlog waits by the user's choice).
        let late_ms = clock::now_ms() - trigger.fire_ms.max(drain.offline_since);
        let scheduled = matches!(
            trigger.trigger_type,
            TriggerType::Cron | TriggerType::Misfire
        );
        if let Some(job) = job
            && scheduled
            && late_ms
                > job
                    .misfire_threshold()
                    .unwrap_or(self.config.scheduler.misfire_threshold_ms)
        {
            let folded = match job.misfire.rule() {
                MisfireRule::DoNothing => Some("DO_NOTHING skips it".to_owned()),
                MisfireRule::FireOnceNow if !drain.fired_once_now.insert(job.id) => {
                    Some("FIRE_ONCE_NOW already fires this job once now".to_owned())
                }
                MisfireRule::FireOnceNow => None,
            };
            if let Some(why) = folded {
                let msg = format!(
                    "misfire: stranded {late_ms} ms on offline executor {}; {why}",
                    drain.offline
                );
                tracing::info!(trigger_id = %id, late_ms, "stranded fire misfired");
                return Settle::Publish(failure(&trigger, msg, false));
            }
        }
        Settle::Resend(trigger, job.map(|j| j.routing))
    }

    /// Sends a stranded trigger, same id, to a live executor, through the
    /// dispatcher's publish path (confirmed, recorded in flight, announced).
    async fn resend(
        &self,
        trigger: Trigger,
        routing: Option<Routing>,
        live: &[String],
    ) -> Result<(), Error> {
        let target = pick_live(&trigger, routing, live).to_owned();
        let record = self
            .dispatcher
            .redeliver(trigger, &target, "rerouted from an offline executor")
            .await?;
        if record.code == code::SUCCESS {
            tracing::info!(trigger_id = %record.trigger.trigger_id, executor_id = %target, "stranded trigger rerouted");
        }
        Ok(())
    }
}

/// What becomes of a stranded trigger.
enum Settle {
    /// An event answers it (a failure, a stored result, a stranded failure).
    Publish(Event),
    /// Sent again, same id, to a live executor.
    Resend(Trigger, Option<Routing>),
    /// Someone else answers it.
    Drop,
}

/// A failed result for `t` that no executor will send.
fn failure(t: &Trigger, msg: String, retryable: bool) -> Event {
    Event::Result(ExecResult {
        trigger_id: t.trigger_id.clone(),
        job_id: t.job_id,
        executor_id: t.executor_id.clone(),
        fire_ms: t.fire_ms,
        start_ms: 0,
        end_ms: clock::now_ms(),
        code: code::FAIL,
        msg,
        retryable,
    })
}

/// One offline executor's queue being drained.
struct Drain<'a> {
    app: &'a str,
    offline: &'a str,
    queue: String,
    /// It retired (a graceful stop) and may still be finishing runs.
    retired: bool,
    /// Since when its triggers are stranded: its last score, or when a
    /// retired one was first seen.
    offline_since: i64,
    /// Nobody consumes its queue and it did not retire: the process is gone.
    crashed: bool,
    /// The incarnation its registry hash names, if the hash is there.
    incarnation: Option<String>,
    /// Jobs whose FIRE_ONCE_NOW misfire was sent in this drain.
    fired_once_now: HashSet<u64>,
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

fn stranded_failure(mut trigger: Trigger, dead: &str, timeout_ms: i64) -> TriggerRecord {
    // An event: no secret in it (a retry takes the job's again).
    trigger.secrets.clear();
    let msg = format!(
        "executor {dead} went offline with this trigger queued and no executor of group {} came up within {} s",
        trigger.group,
        timeout_ms / 1000
    );
    TriggerRecord {
        trigger,
        code: code::FAIL,
        msg,
    }
}
