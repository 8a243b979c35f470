//! Publishing triggers: route, publish with confirms, record.
//!
//! Why one file of ~600 lines: routing, publishing with confirms and
//! recording are the one path every fire takes, with one set of outcomes;
//! the batching it uses lives in `lanes` and `rondo_core::batcher`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rondo_core::amqp::{self, Publish};
use rondo_core::batcher::{Batcher, Limits};
use rondo_core::event::TriggerRecord;
use rondo_core::model::GlueType;
use rondo_core::redis::Pool;
use rondo_core::trigger::{Control, Script, code};
use rondo_core::{
    Config, Error, Event, Job, Routing, Trigger, TriggerBatch, TriggerType, clock, trigger_id,
};
use tokio::sync::Notify;

use crate::events::EventPublisher;
use crate::inflight::Inflight;
use crate::lanes::{LaneConfig, LaneStats, Lanes};
use crate::link::Link;
use crate::registry::{LiveExecutor, Registry};
use crate::route::{self, RouteContext, Routed, Target};

/// One fire of a job to dispatch.
#[derive(Debug, Clone)]
pub struct Fire {
    pub job: Arc<Job>,
    /// The scheduled instant (for manual triggers: the request time; for a
    /// child job: its parent's end).
    pub fire_ms: i64,
    pub trigger_type: TriggerType,
    /// Replaces the job's params for this fire (manual trigger, retry).
    pub params: Option<String>,
    pub retry_count: u32,
    /// The trigger id to use instead of a generated one (retries and child
    /// jobs derive theirs from the trigger they follow, so dispatching them
    /// twice is the same trigger to the executor).
    pub trigger_id: Option<String>,
    /// One shard (index, total) of a broadcast, for a retry of that shard:
    /// it goes to the executor at that index, as XXL-JOB retries a shard.
    pub shard: Option<(u32, u32)>,
    /// Route among these executors of the group only (a manual trigger on
    /// chosen executors, XXL-JOB's address list); empty: the whole group.
    pub executors: Vec<String>,
}

impl Fire {
    /// A fire of the schedule (trigger type `CRON`).
    pub fn scheduled(job: Arc<Job>, fire_ms: i64) -> Fire {
        Fire {
            job,
            fire_ms,
            trigger_type: TriggerType::Cron,
            params: None,
            retry_count: 0,
            trigger_id: None,
            shard: None,
            executors: Vec::new(),
        }
    }

    /// A misfire fired in place of the fires a job missed (trigger type
    /// `MISFIRE`); its trigger id is built like a scheduled fire's.
    pub fn misfire(job: Arc<Job>, fire_ms: i64) -> Fire {
        Fire {
            trigger_type: TriggerType::Misfire,
            ..Fire::scheduled(job, fire_ms)
        }
    }
}

/// What became of a fire: one record per target (or one failed record).
#[derive(Debug, Clone)]
pub struct Dispatched {
    pub records: Vec<TriggerRecord>,
    /// When the broker had confirmed every target's trigger (or the fire
    /// was refused), before the in-flight record and the trigger event.
    pub confirmed_ms: i64,
}

impl Dispatched {
    pub fn all_sent(&self) -> bool {
        self.records.iter().all(|r| r.code == code::SUCCESS)
    }
}

/// How long a group's live-executor list is reused between Redis reads.
/// Far below any heartbeat interval, so routing never sees a meaningfully
/// older registry than a fresh read; at high fire rates it turns one Redis
/// read per fire into a few per second per group.
const LIVE_CACHE: Duration = Duration::from_millis(100);
/// Past [`LIVE_CACHE`] a fresh read starts in the background and the fire
/// waits for it at most [`LIVE_WAIT`]; up to this age the old list is used
/// if the read takes longer: a fire does not wait for a registry read that
/// queues behind whatever Redis is busy with (a claim of
/// thousands of due jobs holds it for a few hundred ms; the fires that
/// waited on it were the publish lateness's p99). An executor that died
/// meanwhile only delays its triggers: its queue is durable and the reaper
/// moves them. One that left and deleted its queue fails the triggers
/// routed to it (the broker returns them); the first such return drops the
/// list, and a background read begun before that is not kept.
const LIVE_STALE: Duration = Duration::from_millis(1_000);
/// How long a fire waits for a background read of its group's list.
const LIVE_WAIT: Duration = Duration::from_millis(5);

/// Triggers per AMQP message at most (all for one executor).
const TRIGGERS_PER_MESSAGE: usize = 500;
/// Trigger messages awaiting their confirm at once, over all executors.
const TRIGGER_MESSAGES_IN_FLIGHT: usize = 2;
/// How long a trigger waits for others to the same executor before its
/// message goes: the publish lateness it adds at most, and under light load
/// what puts several triggers in one message.
const TRIGGER_LINGER: Duration = Duration::from_millis(2);

/// How long what follows a fire's confirm (its in-flight record, its
/// trigger event) waits for other fires' company. Nobody awaits a fire off
/// the wheel (scheduled, or a misfire) but its own slot among the fires in
/// flight, so under light load it waits longer and many fires share one
/// pipeline and one event message; its publish lateness is taken at the
/// confirm, before these. A dispatch that someone makes one after another
/// (a retry, a child job, a manual trigger, a trigger moved off a dead
/// executor) waits the batchers' short default. The in-flight record's
/// stays under the executors' result linger (10 ms), which a result spends
/// before it can overtake its record; a broadcast's shards keep the short
/// one, since a failed shard whose result overtakes its record is retried
/// without the record's shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lingers {
    inflight: Duration,
    events: Duration,
}

const WHEEL_LINGERS: Lingers = Lingers {
    inflight: Duration::from_millis(5),
    events: Duration::from_millis(25),
};

const PROMPT_LINGERS: Lingers = Lingers {
    inflight: crate::inflight::LIMITS.linger,
    events: crate::events::LIMITS.linger,
};

impl Lingers {
    fn of(trigger_type: TriggerType, routing: Routing) -> Lingers {
        match trigger_type {
            TriggerType::Cron | TriggerType::Misfire if routing == Routing::ShardingBroadcast => {
                Lingers {
                    inflight: PROMPT_LINGERS.inflight,
                    ..WHEEL_LINGERS
                }
            }
            TriggerType::Cron | TriggerType::Misfire => WHEEL_LINGERS,
            TriggerType::Manual | TriggerType::Retry | TriggerType::Parent => PROMPT_LINGERS,
        }
    }
}

/// Publishes triggers. Cheap to share (`Arc`); reconnects to the broker
/// lazily after a connection loss.
///
/// Every fire is routed and settled on its own, but what goes over the
/// wire is batched by group commit ([`Batcher`]): triggers for one
/// executor that are ready at the same time travel in one `TriggerBatch`
/// message, trigger events of one routing key in one event message, and
/// in-flight records of one partition in one Redis pipeline. Each fire
/// still waits for the broker's confirm of the message that carries *its*
/// trigger before it counts as sent.
pub struct Dispatcher {
    registry: Registry,
    route_ctx: RouteContext,
    inflight: Inflight,
    lanes: Lanes,
    link: Arc<Link>,
    triggers: Batcher<String, Trigger, bool>,
    events: EventPublisher,
    live: Arc<std::sync::Mutex<HashMap<String, LiveList>>>,
    /// Groups whose list is being read in the background, each with what
    /// wakes the fires waiting for it.
    refreshing: Arc<std::sync::Mutex<HashMap<String, Arc<Notify>>>>,
    /// Counts [`Dispatcher::forget_live`] calls: a background read begun
    /// before one is not kept.
    forgets: Arc<std::sync::atomic::AtomicU64>,
}

/// A group's live executors and when they were read.
type LiveList = (Instant, Arc<Vec<LiveExecutor>>);

impl Dispatcher {
    /// Connects to the broker and declares the shared topology, with the
    /// default lanes.
    pub async fn connect(config: &Config, pool: Pool) -> Result<Self, Error> {
        Self::connect_with_lanes(config, pool, LaneConfig::default()).await
    }

    /// Connects with the given lane sizes and slowness rule.
    pub async fn connect_with_lanes(
        config: &Config,
        pool: Pool,
        lanes: LaneConfig,
    ) -> Result<Self, Error> {
        let names = config.names();
        let registry = Registry::new(pool.clone(), names.clone(), config.registry.lease_ms);
        let link = Arc::new(Link::new(&config.amqp.url, names.clone()));
        let dispatcher = Dispatcher {
            route_ctx: RouteContext::new(
                pool.clone(),
                names.clone(),
                registry.clone(),
                config.registry.lease_ms,
            ),
            inflight: Inflight::new(pool, names.clone()),
            lanes: Lanes::new(lanes),
            registry,
            triggers: trigger_batcher(link.clone()),
            events: EventPublisher::new(link.clone()),
            link,
            live: Arc::default(),
            refreshing: Arc::default(),
            forgets: Arc::default(),
        };
        dispatcher.link.channel().await?;
        Ok(dispatcher)
    }

    /// The lanes' counters and the jobs in the slow lane.
    pub fn lane_stats(&self) -> LaneStats {
        self.lanes.stats()
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The publisher of events on the same broker connection, for the
    /// other processes' events (jobs, groups, lost results, alarms).
    pub fn events(&self) -> &EventPublisher {
        &self.events
    }

    /// Sends a control message (kill) to one executor's control queue.
    /// `Ok(false)` when the executor has no control queue (not connected).
    pub async fn publish_control(
        &self,
        executor_id: &str,
        control: &Control,
    ) -> Result<bool, Error> {
        let ch = self.link.channel().await?;
        let body = serde_json::to_vec(control)?;
        let exchange = self.link.names.control_exchange();
        let publish = Publish {
            exchange: &exchange,
            routing_key: executor_id,
            mandatory: true,
            message_id: None,
            headers: None,
            user_id: self.link.names.publisher(),
        };
        amqp::publish_confirmed(&ch, publish, &body).await
    }

    /// Closes the broker connection (after in-flight publishes).
    pub async fn close(&self) {
        self.link.close().await;
    }

    /// Routes and publishes one fire, in the job's lane (fast, or slow for a
    /// job whose dispatches have been slow). `Ok` means every target's
    /// outcome is decided and recorded (sent and in flight, or failed with a
    /// reason); `Err` means the broker or Redis is unavailable and the
    /// caller should retry the fire.
    pub async fn dispatch(&self, fire: &Fire) -> Result<Dispatched, Error> {
        self.lanes.run(fire.job.id, self.dispatch_now(fire)).await
    }

    /// The group's live executors, read from Redis at most every
    /// [`LIVE_CACHE`]; then read in the background, and up to [`LIVE_STALE`]
    /// the last list is used when that read takes over [`LIVE_WAIT`].
    async fn live_executors(&self, group: &str) -> Result<Arc<Vec<LiveExecutor>>, Error> {
        let cached = self.live.lock().expect("live lock").get(group).cloned();
        if let Some((at, list)) = cached {
            if at.elapsed() < LIVE_CACHE {
                return Ok(list);
            }
            if at.elapsed() < LIVE_STALE {
                let refreshed = self.refresh_in_background(group);
                let notified = refreshed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let _ = tokio::time::timeout(LIVE_WAIT, notified).await;
                match self.live.lock().expect("live lock").get(group).cloned() {
                    Some((read_at, fresh)) if read_at > at => return Ok(fresh),
                    // The read is slow (Redis is busy): the old list.
                    Some(_) => return Ok(list),
                    // Dropped (the group is empty, or an executor left):
                    // read it now.
                    None => {}
                }
            }
        }
        let (read_at, epoch) = (
            Instant::now(),
            self.forgets.load(std::sync::atomic::Ordering::SeqCst),
        );
        let list = Arc::new(self.registry.live_executors(group).await?);
        // An empty group is not cached: the fire fails, and the next one
        // should see an executor the moment it registers. A list read
        // before a forget is used by this fire only.
        let mut live = self.live.lock().expect("live lock");
        if !list.is_empty() && self.forgets.load(std::sync::atomic::Ordering::SeqCst) == epoch {
            live.insert(group.to_owned(), (read_at, list.clone()));
        }
        Ok(list)
    }

    /// Reads a group's list in a task of its own (one at a time per group);
    /// an empty list is not kept, a failed read leaves the old one to age.
    /// Returns what is notified when the read is over.
    fn refresh_in_background(&self, group: &str) -> Arc<Notify> {
        let notify = {
            let mut refreshing = self.refreshing.lock().expect("refreshing lock");
            if let Some(notify) = refreshing.get(group) {
                return notify.clone();
            }
            let notify = Arc::new(Notify::new());
            refreshing.insert(group.to_owned(), notify.clone());
            notify
        };
        /// Takes the group off `refreshing` and wakes its waiters, however
        /// the task ends (after the list is stored).
        struct Done(Arc<std::sync::Mutex<HashMap<String, Arc<Notify>>>>, String);
        impl Drop for Done {
            fn drop(&mut self) {
                if let Ok(mut refreshing) = self.0.lock()
                    && let Some(notify) = refreshing.remove(&self.1)
                {
                    notify.notify_waiters();
                }
            }
        }
        use std::sync::atomic::Ordering::SeqCst;
        let (registry, live, forgets) = (
            self.registry.clone(),
            self.live.clone(),
            self.forgets.clone(),
        );
        let done = Done(self.refreshing.clone(), group.to_owned());
        tokio::spawn(async move {
            let group = done.1.as_str();
            let (read_at, epoch) = (Instant::now(), forgets.load(SeqCst));
            let read = registry.live_executors(group).await;
            let mut live = live.lock().expect("live lock");
            if forgets.load(SeqCst) != epoch {
                return;
            }
            match read {
                Ok(list) if list.is_empty() => {
                    live.remove(group);
                }
                Ok(list) => {
                    live.insert(group.to_owned(), (read_at, Arc::new(list)));
                }
                Err(e) => tracing::debug!(%group, error = %e, "reading the group's live executors"),
            }
        });
        notify
    }

    /// Drops a group's cached executor list (one of them has no queue).
    fn forget_live(&self, group: &str) {
        let mut live = self.live.lock().expect("live lock");
        self.forgets
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        live.remove(group);
    }

    async fn dispatch_now(&self, fire: &Fire) -> Result<Dispatched, Error> {
        let mut executors = self.live_executors(&fire.job.group).await?;
        if !fire.executors.is_empty() {
            let chosen: Vec<LiveExecutor> = executors
                .iter()
                .filter(|e| fire.executors.contains(&e.id))
                .cloned()
                .collect();
            executors = Arc::new(chosen);
        }
        let routed = if executors.is_empty() && !fire.executors.is_empty() {
            Routed::Refused(format!(
                "none of the chosen executors ({}) is live in group {}",
                fire.executors.join(", "),
                fire.job.group
            ))
        } else if executors.is_empty() {
            Routed::Refused(format!("no live executor in group {}", fire.job.group))
        } else if let Some((index, total)) = fire
            .shard
            .filter(|_| fire.job.routing == Routing::ShardingBroadcast)
        {
            Routed::To(vec![shard_target(&executors, index, total)])
        } else {
            route::route(&fire.job, &executors, &self.route_ctx).await?
        };
        let records = match routed {
            Routed::To(targets) => self.publish_all(fire, &targets).await?,
            Routed::Refused(msg) => vec![failed(fire, msg)],
        };
        let confirmed_ms = clock::now_ms();
        let lingers = Lingers::of(fire.trigger_type, fire.job.routing);
        self.inflight.record(&records, lingers.inflight).await?;
        self.record(&records, lingers.events).await?;
        count(&records);
        Ok(Dispatched {
            records,
            confirmed_ms,
        })
    }

    async fn publish_all(
        &self,
        fire: &Fire,
        targets: &[Target],
    ) -> Result<Vec<TriggerRecord>, Error> {
        let sends = targets.iter().map(|t| self.publish_one(fire, t));
        join_all(sends).await.into_iter().collect()
    }

    /// Hands the trigger to the executor's batcher and waits for the
    /// confirm of the message that carried it.
    async fn publish_one(&self, fire: &Fire, target: &Target) -> Result<TriggerRecord, Error> {
        let trigger = build_trigger(fire, target);
        let routed = self
            .triggers
            .submit(self.trigger_key(&trigger), trigger.clone())
            .await?;
        if !routed {
            self.forget_live(&fire.job.group);
            let msg = format!(
                "executor {} has no queue (message returned by the broker)",
                target.executor_id
            );
            return Ok(TriggerRecord {
                trigger,
                code: code::FAIL,
                msg,
            });
        }
        Ok(TriggerRecord {
            trigger,
            code: code::SUCCESS,
            msg: String::new(),
        })
    }

    /// Where a trigger goes on the trigger exchange (also its batch).
    fn trigger_key(&self, trigger: &Trigger) -> String {
        self.link
            .names
            .trigger_key(&trigger.group, &trigger.executor_id)
    }

    /// Publishes the trigger events (batched with other fires' events of
    /// the same routing key) and waits for their confirms.
    async fn record(&self, records: &[TriggerRecord], linger: Duration) -> Result<(), Error> {
        // The script and the secrets stay with the trigger (and its
        // in-flight record, which a re-route sends again), not in the
        // events: history has the job's, and log rows show no secret.
        let events: Vec<Event> = records
            .iter()
            .cloned()
            .map(|mut record| {
                record.trigger.script = None;
                record.trigger.secrets.clear();
                Event::Triggered(record)
            })
            .collect();
        self.events.publish_within(&events, linger).await
    }

    /// Sends an already-built trigger again, same id, to `executor_id`
    /// (a dead executor's queued trigger moved to a live one): the same
    /// path as a fire — batched, `mandatory`, confirmed, recorded in flight,
    /// announced by a trigger event. A trigger whose target has no queue
    /// comes back as a failed record.
    pub async fn redeliver(
        &self,
        mut trigger: Trigger,
        executor_id: &str,
        why: &str,
    ) -> Result<TriggerRecord, Error> {
        trigger.executor_id = executor_id.to_owned();
        trigger.sent_ms = clock::now_ms();
        let routed = self
            .triggers
            .submit(self.trigger_key(&trigger), trigger.clone())
            .await?;
        let record = if routed {
            TriggerRecord {
                trigger,
                code: code::SUCCESS,
                msg: why.to_owned(),
            }
        } else {
            self.forget_live(&trigger.group);
            let msg = format!("{why}: executor {executor_id} has no queue");
            TriggerRecord {
                trigger,
                code: code::FAIL,
                msg,
            }
        };
        let records = [record];
        self.inflight
            .record(&records, PROMPT_LINGERS.inflight)
            .await?;
        self.record(&records, PROMPT_LINGERS.events).await?;
        let [record] = records;
        Ok(record)
    }
}

/// One `TriggerBatch` message per executor (its routing key) and batch,
/// `mandatory`, with the first trigger's id as message id. A returned message fails every
/// trigger in it (the executor's queue is gone for all of them).
fn trigger_batcher(link: Arc<Link>) -> Batcher<String, Trigger, bool> {
    let limits = Limits {
        max_items: TRIGGERS_PER_MESSAGE,
        max_flushes: TRIGGER_MESSAGES_IN_FLIGHT,
        linger: TRIGGER_LINGER,
    };
    Batcher::spawn(
        "trigger",
        limits,
        move |key: String, triggers: Vec<Trigger>| {
            let link = link.clone();
            async move {
                let ch = link.channel().await?;
                let message_id = triggers.first().map(|t| t.trigger_id.clone());
                let body = serde_json::to_vec(&TriggerBatch::new(triggers))?;
                let exchange = link.names.trigger_exchange();
                let publish = Publish {
                    exchange: &exchange,
                    routing_key: &key,
                    mandatory: true,
                    message_id: message_id.as_deref(),
                    headers: None,
                    user_id: link.names.publisher(),
                };
                let outcome = amqp::publish_confirmed(&ch, publish, &body).await;
                link.note(&outcome).await;
                outcome
            }
        },
    )
}

fn build_trigger(fire: &Fire, target: &Target) -> Trigger {
    let job = &fire.job;
    let trigger_id = match (&fire.trigger_id, fire.trigger_type) {
        (Some(id), _) if target.shard_total > 1 && fire.shard.is_none() => {
            trigger_id::shard(id, target.shard_index)
        }
        (Some(id), _) => id.clone(),
        (None, TriggerType::Cron | TriggerType::Misfire) => {
            trigger_id::scheduled(job.id, fire.fire_ms, target.shard_index)
        }
        (None, other) => trigger_id::adhoc(job.id, fire.fire_ms, other, target.shard_index),
    };
    Trigger {
        trigger_id,
        job_id: job.id,
        group: job.group.clone(),
        executor_id: target.executor_id.clone(),
        handler: job.handler.clone(),
        params: fire.params.clone().unwrap_or_else(|| job.params.clone()),
        trigger_type: fire.trigger_type,
        fire_ms: fire.fire_ms,
        sent_ms: clock::now_ms(),
        shard_index: target.shard_index,
        shard_total: target.shard_total,
        timeout_s: job.timeout_s,
        block: job.block,
        retry_count: fire.retry_count,
        script: (job.glue_type != GlueType::Bean).then(|| Script {
            glue_type: job.glue_type.as_str().to_owned(),
            source: job.glue_source.clone(),
            version: job.glue_version,
            updated_ms: job.glue_updated_ms,
        }),
        secrets: job.secrets.clone(),
    }
}

/// The target of one broadcast shard: the executor at its index in the
/// sorted live list, or the first if the group shrank (as XXL-JOB).
fn shard_target(executors: &[LiveExecutor], index: u32, total: u32) -> Target {
    let at = executors.get(index as usize).unwrap_or(&executors[0]);
    Target {
        executor_id: at.id.clone(),
        shard_index: index,
        shard_total: total,
    }
}

/// Counts dispatched triggers: `rondo_triggers_sent_total` (confirmed by
/// the broker) and `rondo_dispatch_failures_total` (reached no executor),
/// by trigger type.
fn count(records: &[TriggerRecord]) {
    for r in records {
        let kind = r.trigger.trigger_type.as_str();
        if r.code == code::SUCCESS {
            metrics::counter!("rondo_triggers_sent_total", "trigger_type" => kind).increment(1);
        } else {
            metrics::counter!("rondo_dispatch_failures_total", "trigger_type" => kind).increment(1);
        }
    }
}

/// A trigger that reached no executor.
fn failed(fire: &Fire, msg: String) -> TriggerRecord {
    tracing::warn!(job_id = fire.job.id, fire_ms = fire.fire_ms, reason = %msg, "trigger failed");
    let nowhere = Target {
        executor_id: String::new(),
        shard_index: 0,
        shard_total: 1,
    };
    TriggerRecord {
        trigger: build_trigger(fire, &nowhere),
        code: code::FAIL,
        msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheduler spawns dispatches on a multi-thread runtime: the
    /// future must stay `Send` (no thread-local RNG across an await).
    #[allow(dead_code)]
    fn dispatch_is_send(dispatcher: &Dispatcher, fire: &Fire) {
        fn send<T: Send>(_: T) {}
        send(dispatcher.dispatch(fire));
    }

    #[test]
    fn only_fires_off_the_wheel_wait_longer_for_company() {
        for wheel in [TriggerType::Cron, TriggerType::Misfire] {
            assert_eq!(Lingers::of(wheel, Routing::First), WHEEL_LINGERS);
            // A broadcast's shard records its flight at once.
            let shards = Lingers::of(wheel, Routing::ShardingBroadcast);
            assert_eq!(shards.inflight, PROMPT_LINGERS.inflight);
            assert_eq!(shards.events, WHEEL_LINGERS.events);
        }
        for awaited in [TriggerType::Manual, TriggerType::Retry, TriggerType::Parent] {
            for routing in [Routing::First, Routing::ShardingBroadcast] {
                assert_eq!(Lingers::of(awaited, routing), PROMPT_LINGERS);
            }
        }
        assert!(WHEEL_LINGERS.inflight > PROMPT_LINGERS.inflight);
        assert!(WHEEL_LINGERS.events > PROMPT_LINGERS.events);
    }
}
