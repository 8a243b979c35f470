//! Publishing triggers: route, publish with confirms, record.

use std::sync::Arc;

use deadpool_redis::Pool;
use futures_util::future::join_all;
use lapin::{Channel, Connection};
use rondo_core::amqp::{self, Publish};
use rondo_core::event::TriggerRecord;
use rondo_core::trigger::Control;
use rondo_core::trigger::{adhoc_trigger_id, code, scheduled_trigger_id};
use rondo_core::{
    Config, Error, Event, Job, Names, Routing, Trigger, TriggerBatch, TriggerType, clock,
};
use tokio::sync::Mutex;

use crate::inflight::Inflight;
use crate::lanes::{LaneConfig, LaneStats, Lanes};
use crate::registry::{LiveExecutor, Registry};
use crate::route::{self, RouteContext, Routed, Target};

/// One fire of a job to dispatch.
#[derive(Debug, Clone)]
pub struct Fire {
    pub job: Arc<Job>,
    /// The scheduled instant (for manual triggers: the request time).
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
        }
    }
}

/// What became of a fire: one record per target (or one failed record).
#[derive(Debug, Clone)]
pub struct Dispatched {
    pub records: Vec<TriggerRecord>,
}

impl Dispatched {
    pub fn all_sent(&self) -> bool {
        self.records.iter().all(|r| r.code == code::SUCCESS)
    }
}

/// Publishes triggers. Cheap to share (`Arc`); reconnects to the broker
/// lazily after a connection loss.
pub struct Dispatcher {
    amqp_url: String,
    names: Names,
    registry: Registry,
    route_ctx: RouteContext,
    inflight: Inflight,
    lanes: Lanes,
    link: Mutex<Option<(Connection, Channel)>>,
}

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
        let registry = Registry::new(pool.clone(), names.clone(), config.registry.dead_after_ms);
        let dispatcher = Dispatcher {
            amqp_url: config.amqp.url.clone(),
            route_ctx: RouteContext::new(
                pool.clone(),
                names.clone(),
                registry.clone(),
                config.registry.heartbeat_ms,
            ),
            inflight: Inflight::new(pool, names.clone()),
            lanes: Lanes::new(lanes),
            registry,
            names,
            link: Mutex::new(None),
        };
        dispatcher.channel().await?;
        Ok(dispatcher)
    }

    /// The lanes' counters and the jobs in the slow lane.
    pub fn lane_stats(&self) -> LaneStats {
        self.lanes.stats()
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The confirm channel, reopened if the connection dropped.
    async fn channel(&self) -> Result<Channel, Error> {
        let mut link = self.link.lock().await;
        if let Some((_, ch)) = link.as_ref()
            && ch.status().connected()
        {
            return Ok(ch.clone());
        }
        let conn = amqp::connect(&self.amqp_url, "rondo-dispatcher").await?;
        let ch = amqp::confirm_channel(&conn).await?;
        amqp::declare_topology(&ch, &self.names).await?;
        *link = Some((conn, ch.clone()));
        Ok(ch)
    }

    /// Publishes events (one routing key) on the dispatcher's confirm
    /// channel; the admin API uses it for job and group events.
    pub async fn publish_events(&self, events: &[Event]) -> Result<(), Error> {
        let ch = self.channel().await?;
        amqp::publish_events(&ch, &self.names, events).await
    }

    /// Sends a control message (kill) to one executor's control queue.
    /// `Ok(false)` when the executor has no control queue (not connected).
    pub async fn publish_control(
        &self,
        executor_id: &str,
        control: &Control,
    ) -> Result<bool, Error> {
        let ch = self.channel().await?;
        let body = serde_json::to_vec(control)?;
        let exchange = self.names.control_exchange();
        let publish = Publish {
            exchange: &exchange,
            routing_key: executor_id,
            mandatory: true,
            message_id: None,
            headers: None,
        };
        amqp::publish_confirmed(&ch, publish, &body).await
    }

    /// Closes the broker connection (after in-flight publishes).
    pub async fn close(&self) {
        if let Some((conn, _)) = self.link.lock().await.take() {
            let _ = conn.close(200, "shutdown".into()).await;
        }
    }

    /// Routes and publishes one fire, in the job's lane (fast, or slow for a
    /// job whose dispatches have been slow). `Ok` means every target's
    /// outcome is decided and recorded (sent and in flight, or failed with a
    /// reason); `Err` means the broker or Redis is unavailable and the
    /// caller should retry the fire.
    pub async fn dispatch(&self, fire: &Fire) -> Result<Dispatched, Error> {
        self.lanes.run(fire.job.id, self.dispatch_now(fire)).await
    }

    async fn dispatch_now(&self, fire: &Fire) -> Result<Dispatched, Error> {
        let ch = self.channel().await?;
        let executors = self.registry.live_executors(&fire.job.group).await?;
        let routed = if executors.is_empty() {
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
            Routed::To(targets) => self.publish_all(&ch, fire, &targets).await?,
            Routed::Refused(msg) => vec![failed(fire, msg)],
        };
        self.inflight.record(&records).await?;
        self.record(&ch, &records).await?;
        Ok(Dispatched { records })
    }

    async fn publish_all(
        &self,
        ch: &Channel,
        fire: &Fire,
        targets: &[Target],
    ) -> Result<Vec<TriggerRecord>, Error> {
        let sends = targets.iter().map(|t| self.publish_one(ch, fire, t));
        join_all(sends).await.into_iter().collect()
    }

    async fn publish_one(
        &self,
        ch: &Channel,
        fire: &Fire,
        target: &Target,
    ) -> Result<TriggerRecord, Error> {
        let trigger = build_trigger(fire, target);
        let body = serde_json::to_vec(&TriggerBatch::new(vec![trigger.clone()]))?;
        let exchange = self.names.trigger_exchange();
        let publish = Publish {
            exchange: &exchange,
            routing_key: &target.executor_id,
            mandatory: true,
            message_id: Some(&trigger.trigger_id),
            headers: None,
        };
        let routed = amqp::publish_confirmed(ch, publish, &body).await?;
        if !routed {
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

    /// Publishes the trigger events, grouped by routing key.
    async fn record(&self, ch: &Channel, records: &[TriggerRecord]) -> Result<(), Error> {
        let (sent, failed): (Vec<_>, Vec<_>) = records
            .iter()
            .cloned()
            .map(Event::Triggered)
            .partition(|e| e.routing_key() == "trigger.sent");
        for events in [sent, failed] {
            amqp::publish_events(ch, &self.names, &events).await?;
        }
        Ok(())
    }
}

fn build_trigger(fire: &Fire, target: &Target) -> Trigger {
    let job = &fire.job;
    let trigger_id = match (&fire.trigger_id, fire.trigger_type) {
        (Some(id), _) if target.shard_total > 1 && fire.shard.is_none() => {
            format!("{id}-s{}", target.shard_index)
        }
        (Some(id), _) => id.clone(),
        (None, TriggerType::Cron | TriggerType::Misfire) => {
            scheduled_trigger_id(job.id, fire.fire_ms, target.shard_index)
        }
        (None, other) => adhoc_trigger_id(job.id, fire.fire_ms, other, target.shard_index),
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
}
