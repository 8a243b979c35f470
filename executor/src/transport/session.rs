//! The broker session: connect, declare, consume the executor's queue, and
//! reconnect with backoff whenever the connection drops, until the drain is
//! over.
//!
//! Each connection has three confirm channels: one consumes triggers (and
//! dead-letters), one publishes events (handed to the [`Publisher`]), one
//! consumes the executor's control queue (kills; see `control`). The
//! control channel is optional: when its exclusive queue cannot be
//! declared (a previous connection that the broker has not noticed dead
//! yet still holds it) triggers are consumed all the same and the control
//! queue is retried every [`CONTROL_RETRY`]. Control messages are consumed
//! until the connection closes, so kills still work during the drain.
//! Nothing is lost across a reconnect: deliveries not yet acked are
//! redelivered by the broker, and runs in flight publish on the new channel.
//! After shutdown the session stops consuming but keeps (or re-establishes)
//! the connection so in-flight runs can still publish and ack.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, Consumer};
use rondo_core::{Error, ErrorKind, Names, amqp};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::admission::intake::Intake;
use crate::lifecycle::Lifecycle;
use crate::transport::control::{self, ControlLink};
use crate::transport::delivery::Deliveries;
use crate::transport::publisher::Publisher;
use rondo_core::backoff::Backoff;

/// How often the session double-checks that its connection is alive.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);
/// A graceful close waits this long for the broker at most.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Between attempts to (re)declare and consume the control queue.
const CONTROL_RETRY: Duration = Duration::from_secs(5);
/// After cancelling the consumer, how long to wait for each delivery the
/// broker sent before the cancel.
const UNTAKEN_WAIT: Duration = Duration::from_millis(300);

pub(crate) struct Session {
    pub(crate) url: String,
    pub(crate) names: Names,
    pub(crate) app: String,
    pub(crate) executor_id: String,
    pub(crate) consumer_tag: String,
    pub(crate) prefetch: u16,
    pub(crate) publisher: Publisher,
    pub(crate) deliveries: Arc<Deliveries>,
    pub(crate) intake: Arc<Intake>,
    pub(crate) lifecycle: Lifecycle,
    /// Cancelled once the executor's queue has been declared (registration
    /// waits for it, so no trigger is routed to a queue that does not exist).
    pub(crate) ready: CancellationToken,
    /// `/readyz`: true while a link consumes the executor queue.
    pub(crate) readiness: rondo_core::metrics::Readiness,
}

/// One live connection and its channels.
struct Link {
    conn: Connection,
    consume: Channel,
    events: Channel,
}

impl Link {
    /// What is no longer usable, if anything. A channel can be closed by
    /// the broker (a channel error) while the connection lives on; the
    /// whole link is then rebuilt, which also re-declares the topology.
    fn lost(&self) -> Option<&'static str> {
        if !self.conn.status().connected() {
            Some("connection")
        } else if !self.consume.status().connected() {
            Some("consuming channel")
        } else if !self.events.status().connected() {
            Some("events channel")
        } else {
            None
        }
    }
}

impl Session {
    /// Connects, consumes and reconnects with backoff until the close
    /// phase. Broker outages are retried; `Err` only when the broker
    /// refuses the executor's queue as declared (it exists with other
    /// arguments), which no retry can fix.
    pub(crate) async fn run(self) -> Result<(), Error> {
        let mut backoff = Backoff::jittered(Duration::from_millis(200), Duration::from_secs(10));
        while !self.lifecycle.close.is_cancelled() {
            let connected = tokio::select! {
                link = self.connect() => link,
                () = self.lifecycle.close.cancelled() => return Ok(()),
            };
            match connected {
                Ok(link) => {
                    backoff.reset();
                    self.serve(link).await;
                }
                Err(e) if e.kind == ErrorKind::Conflict => return Err(e),
                Err(e) => tracing::warn!(error = %e, "cannot connect to the broker; retrying"),
            }
            if !backoff.wait(&self.lifecycle.close).await {
                return Ok(());
            }
        }
        Ok(())
    }

    async fn connect(&self) -> Result<Link, Error> {
        let name = format!("rondo-executor {}", self.executor_id);
        let conn = amqp::connect(&self.url, &name).await?;
        let consume = amqp::confirm_channel(&conn).await?;
        amqp::declare_executor_topology(&consume, &self.names).await?;
        amqp::declare_executor_queue(&consume, &self.names, &self.app, &self.executor_id).await?;
        let events = amqp::confirm_channel(&conn).await?;
        Ok(Link {
            conn,
            consume,
            events,
        })
    }

    async fn start_consuming(&self, link: &Link) -> Result<Consumer, Error> {
        // The prefetch counts messages, not triggers: a message is one
        // `TriggerBatch` (up to some hundreds of triggers) and stays unacked
        // until every trigger in it has settled, so up to `prefetch` times
        // the batch size triggers are in flight here. How many of them run
        // their handler at once is the runner's cap (also
        // `executor.prefetch`, counted in triggers).
        link.consume
            .basic_qos(self.prefetch, BasicQosOptions::default())
            .await?;
        let consumer = link
            .consume
            .basic_consume(
                self.deliveries.queue.as_str().into(),
                self.consumer_tag.as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(consumer)
    }

    /// Serves one connection until it drops or the drain is over.
    async fn serve(&self, link: Link) {
        self.publisher.set_channel(Some(link.events.clone()));
        let mut consumer = None;
        if !self.lifecycle.shutdown.is_cancelled() {
            match self.start_consuming(&link).await {
                Ok(c) => consumer = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot consume the executor queue; reconnecting");
                    return self.drop_link(link).await;
                }
            }
            tracing::info!(queue = %self.deliveries.queue, "consuming");
        }
        // Registered (routed to) only once it consumes: a queue in use is
        // one the leader never deletes.
        self.ready.cancel();
        self.readiness.set(consumer.is_some());
        let mut events = link.conn.events_listener();
        let mut liveness = tokio::time::interval(LIVENESS_CHECK);
        let mut control = self.listen_control(&link).await;
        let mut control_retry = tokio::time::interval(CONTROL_RETRY);
        control_retry.tick().await;
        loop {
            tokio::select! {
                biased;
                () = self.lifecycle.close.cancelled() => break,
                next = next_control(&mut control) => match next {
                    Some(Ok(delivery)) => {
                        if let Some(link) = &control {
                            control::handle(&self.deliveries.runner, link, &self.names, delivery).await;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "control consumer failed; retrying");
                        control = None;
                    }
                    None => {
                        tracing::warn!("control consumer ended; retrying");
                        control = None;
                    }
                },
                _ = control_retry.tick(), if control.is_none() => {
                    control = self.listen_control(&link).await;
                }
                () = self.lifecycle.shutdown.cancelled(), if consumer.is_some() => {
                    self.stop_consuming(&link, consumer.take()).await;
                }
                next = next_delivery(&mut consumer) => match next {
                    Some(Ok(delivery)) => self.take(&link, delivery),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "consumer failed; reconnecting");
                        break;
                    }
                    None => {
                        tracing::warn!("the broker cancelled the consumer; reconnecting");
                        break;
                    }
                },
                event = events.next() => match event {
                    // Channel errors are reported here too; only those of
                    // the channels the link needs rebuild it (the control
                    // channel recovers on its own).
                    Some(lapin::Event::Error(e)) => {
                        if let Some(lost) = link.lost() {
                            tracing::warn!(error = %e, lost, "the broker reported an error; rebuilding the link");
                            break;
                        }
                        tracing::debug!(error = %e, "the broker reported an error on the control channel");
                    }
                    None => {
                        tracing::warn!("connection events ended; reconnecting");
                        break;
                    }
                    Some(_) => {}
                },
                () = self.publisher.refused_repeatedly() => {
                    tracing::warn!("the broker refused publishes several times in a row; rebuilding the link");
                    break;
                }
                _ = liveness.tick() => {
                    if let Some(lost) = link.lost() {
                        tracing::warn!(lost, "broker link lost; reconnecting");
                        break;
                    }
                }
            }
        }
        self.readiness.set(false);
        self.drop_link(link).await;
    }

    async fn listen_control(&self, link: &Link) -> Option<ControlLink> {
        let tag = format!("{}.ctl", self.consumer_tag);
        match control::listen(&link.conn, &self.names, &self.executor_id, &tag).await {
            Ok(control) => {
                tracing::debug!(queue = %control.queue, "consuming control messages");
                Some(control)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot consume the control queue; kills will not reach this executor until it can");
                None
            }
        }
    }

    /// Hands a delivery to its own task (or leaves it unacked, to be
    /// redelivered, when the intake closed meanwhile).
    fn take(&self, link: &Link, delivery: lapin::message::Delivery) {
        let span = tracing::info_span!(
            "delivery",
            executor_id = %self.executor_id,
            delivery_tag = delivery.delivery_tag,
        );
        let acker = delivery.acker.clone();
        let task = self
            .deliveries
            .clone()
            .handle(link.consume.clone(), delivery)
            .instrument(span);
        if !self.intake.spawn(task) {
            tracing::debug!("delivery arrived while shutting down; handing it back");
            tokio::spawn(hand_back(acker));
        }
    }

    /// Cancels the consumer, then hands back at once what the broker had
    /// sent it but nobody took, instead of holding it until the link
    /// closes: the leader moves it to a live executor meanwhile.
    async fn stop_consuming(&self, link: &Link, consumer: Option<Consumer>) {
        let Some(mut consumer) = consumer else { return };
        let cancel = link
            .consume
            .basic_cancel(consumer.tag(), BasicCancelOptions::default());
        if let Err(e) = cancel.await {
            tracing::warn!(error = %e, "cancelling the consumer failed");
        }
        let mut handed = 0;
        while let Ok(Some(Ok(delivery))) = tokio::time::timeout(UNTAKEN_WAIT, consumer.next()).await
        {
            hand_back(delivery.acker).await;
            handed += 1;
        }
        tracing::info!(handed_back = handed, "stopped consuming");
    }

    async fn drop_link(&self, link: Link) {
        self.publisher.set_channel(None);
        if link.conn.status().connected() {
            let close = link.conn.close(200, "executor closing".into());
            if tokio::time::timeout(CLOSE_TIMEOUT, close).await.is_err() {
                tracing::warn!("closing the connection timed out");
            }
        }
    }
}

/// Sends an untaken delivery back to the queue.
async fn hand_back(acker: lapin::Acker) {
    let requeue = lapin::options::BasicNackOptions {
        requeue: true,
        ..lapin::options::BasicNackOptions::default()
    };
    if let Err(e) = acker.nack(requeue).await {
        tracing::info!(error = %e, "could not hand a delivery back; the broker returns it when the link closes");
    }
}

/// The consumer's next delivery; pending forever without a consumer.
async fn next_delivery(
    consumer: &mut Option<Consumer>,
) -> Option<lapin::Result<lapin::message::Delivery>> {
    match consumer {
        Some(c) => c.next().await,
        None => std::future::pending().await,
    }
}

/// The control consumer's next message; pending forever without one.
async fn next_control(
    control: &mut Option<ControlLink>,
) -> Option<lapin::Result<lapin::message::Delivery>> {
    match control {
        Some(c) => c.consumer.next().await,
        None => std::future::pending().await,
    }
}
