//! One message from the executor's queue: decode the trigger batch (or
//! dead-letter it with the reason), admit every trigger concurrently, then
//! ack — or hand the message back when a trigger could not be settled.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use lapin::Channel;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use rondo_core::{Names, TriggerBatch};
use tracing::Instrument;

use crate::admission::runner::Runner;
use crate::admission::slots::Settled;
use crate::lifecycle::Lifecycle;

/// How long a delivery waits before going back to the queue after a
/// transient failure, so an outage does not turn into a redelivery storm.
const REQUEUE_DELAY: Duration = Duration::from_secs(1);

/// What every delivery task shares.
pub(crate) struct Deliveries {
    pub(crate) runner: Arc<Runner>,
    pub(crate) names: Names,
    pub(crate) queue: String,
    pub(crate) executor_id: String,
    /// This executor's routing key on the trigger exchange.
    pub(crate) trigger_key: String,
    pub(crate) lifecycle: Lifecycle,
}

impl Deliveries {
    /// Handles one delivery to the end. `channel` is the consuming channel
    /// (confirms on), used to dead-letter.
    pub(crate) async fn handle(self: Arc<Self>, channel: Channel, delivery: Delivery) {
        let batch = match TriggerBatch::decode(&delivery.data) {
            Ok(batch) => batch,
            Err(reason) => return self.dead_letter(&channel, &delivery, &reason).await,
        };
        let mut admissions: FuturesUnordered<_> = batch
            .triggers
            .iter()
            .enumerate()
            .map(|(i, trigger)| {
                let span = tracing::info_span!(
                    "trigger",
                    trigger_id = %trigger.trigger_id,
                    job_id = trigger.job_id,
                    executor_id = %self.executor_id,
                );
                let runner = &self.runner;
                async move { (i, runner.admit(trigger).await) }.instrument(span)
            })
            .collect();
        let mut settled = Vec::with_capacity(batch.triggers.len());
        while let Some((i, outcome)) = admissions.next().await {
            if outcome != Settled::Abandoned || admissions.is_empty() {
                settled.push(outcome);
                continue;
            }
            // The executor is stopping and this trigger never started, but
            // others of its message still run: hand it back now, not when
            // the message is, with the others abandoned at the same moment.
            let mut back = vec![i];
            while let Some(Some((j, outcome))) = admissions.next().now_or_never() {
                match outcome {
                    Settled::Abandoned => back.push(j),
                    other => settled.push(other),
                }
            }
            let triggers = back.iter().map(|&j| batch.triggers[j].clone()).collect();
            let handed = self.hand_back(&channel, triggers).await;
            settled.extend(back.iter().map(|_| handed));
        }
        let settled = combine(&settled);
        self.finish(&delivery, settled).await;
    }

    /// Publishes triggers that will not run here back to this executor's
    /// queue (confirmed), where the leader moves them to a live executor:
    /// the executor has retired. `Done` when the broker took them (their
    /// part of the message may be acked), else `Abandoned`. Should the
    /// process die before the message is acked, the triggers come back
    /// twice; their dedupe marks run each once.
    async fn hand_back(&self, channel: &Channel, triggers: Vec<rondo_core::Trigger>) -> Settled {
        let n = triggers.len();
        let body = match serde_json::to_vec(&TriggerBatch::new(triggers)) {
            Ok(body) => body,
            Err(_) => return Settled::Abandoned,
        };
        let exchange = self.names.trigger_exchange();
        let publish = rondo_core::amqp::Publish {
            exchange: &exchange,
            routing_key: &self.trigger_key,
            mandatory: true,
            user_id: self.names.publisher(),
            ..rondo_core::amqp::Publish::default()
        };
        match rondo_core::amqp::publish_confirmed(channel, publish, &body).await {
            Ok(true) => {
                tracing::info!(triggers = n, "handed back triggers that had not started");
                Settled::Done
            }
            Ok(false) | Err(_) => Settled::Abandoned,
        }
    }

    async fn dead_letter(&self, channel: &Channel, delivery: &Delivery, reason: &str) {
        let moved =
            rondo_core::amqp::dead_letter(channel, &self.names, delivery, &self.queue, reason)
                .await;
        let Err(e) = moved else { return };
        // Let the broker dead-letter it through the queue's DLX instead
        // (without the reason header, with its x-death record).
        tracing::warn!(error = %e, reason, "could not move the message to the dead queue; rejecting it");
        let nack = BasicNackOptions {
            requeue: false,
            ..BasicNackOptions::default()
        };
        if let Err(e) = delivery.acker.nack(nack).await {
            tracing::warn!(error = %e, "reject failed; the broker will redeliver the message");
        }
    }

    async fn finish(&self, delivery: &Delivery, settled: Settled) {
        let acked = match settled {
            Settled::Done => delivery.acker.ack(BasicAckOptions::default()).await,
            Settled::Requeue => {
                tokio::select! {
                    () = tokio::time::sleep(REQUEUE_DELAY) => {}
                    () = self.lifecycle.abandon.cancelled() => {}
                }
                delivery.acker.nack(requeue()).await
            }
            Settled::Abandoned => delivery.acker.nack(requeue()).await,
        };
        if let Err(e) = acked {
            // The channel is gone: the broker redelivers the message and the
            // dedupe marks settle it without running anything twice.
            tracing::info!(error = %e, ?settled, "could not settle the delivery; it will be redelivered");
        }
    }
}

fn requeue() -> BasicNackOptions {
    BasicNackOptions {
        requeue: true,
        ..BasicNackOptions::default()
    }
}

/// The delivery's fate is its least settled trigger's.
fn combine(settled: &[Settled]) -> Settled {
    if settled.contains(&Settled::Abandoned) {
        Settled::Abandoned
    } else if settled.contains(&Settled::Requeue) {
        Settled::Requeue
    } else {
        Settled::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_as_settled_as_its_least_settled_trigger() {
        use Settled::*;
        assert_eq!(combine(&[Done, Done]), Done);
        assert_eq!(combine(&[Done, Requeue]), Requeue);
        assert_eq!(combine(&[Requeue, Abandoned, Done]), Abandoned);
    }
}
