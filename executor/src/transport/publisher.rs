//! Publishing events (log lines, results) to the events exchange on the
//! current connection's confirm channel.
//!
//! The channel is swapped by the session on every reconnect, so a run that
//! outlives its connection still publishes its result on the next one; a
//! publish that fails is retried until the broker confirms it or the
//! executor gives up at the end of its shutdown.
//!
//! # Group commit
//!
//! [`Publisher::publish_until_confirmed`] does not publish its event alone:
//! it hands it to a [`Batcher`] keyed by routing key, which puts every event
//! of that key submitted meanwhile (results of many triggers, or the last
//! log lines of many runs) in one message, a JSON array, which is the wire
//! format (`rondo_core::event`). Each caller still returns only once the
//! message holding *its* event is confirmed, so "result confirmed, then
//! ack" holds per trigger. A lone event goes out alone at once; under load
//! the messages grow while earlier ones wait for their confirms (at most
//! [`BATCH_LIMITS`]`.max_flushes` at once). A batch whose publish fails
//! fails each of its callers, which retry (batched again) with backoff.
//! A batch larger than [`MAX_MESSAGE_BYTES`] is split into several
//! messages, all of which must be confirmed.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::try_join_all;
use lapin::Channel;
use rondo_core::amqp::{self, Publish};
use rondo_core::batcher::{Batcher, Limits};
use rondo_core::{Error, Event, Names};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use rondo_core::backoff::Backoff;

/// One attempt waits this long for the broker's confirm at most.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(15);
/// Events per message at most, and messages waiting for confirms at once.
pub(crate) const BATCH_LIMITS: Limits = Limits {
    max_items: 500,
    max_flushes: 2,
    // Results are not on the scheduling path: gather a few under light load.
    linger: std::time::Duration::from_millis(10),
};

/// A batch is split so that no message is much larger than this (one event
/// larger than it goes alone).
pub(crate) const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// Where and on what the events go: shared by the publisher's callers and
/// its batcher's flushes.
struct Target {
    names: Names,
    channel: watch::Sender<Option<Channel>>,
    /// Publishes refused in a row, and where the session hears that they
    /// were too many ([`amqp::RefusalStreak`]): it rebuilds the link.
    /// Each caller notes its own outcome, so one refused message that
    /// carried three events is a streak on its own: the link is rebuilt
    /// sooner under load, which costs a reconnect at most.
    refusals: amqp::RefusalStreak,
    relink: Notify,
}

#[derive(Clone)]
pub(crate) struct Publisher {
    target: Arc<Target>,
    /// Key: the routing key of the events.
    batches: Batcher<&'static str, Event, ()>,
}

impl Publisher {
    /// Must be called inside a tokio runtime (it starts the batching task,
    /// which ends once every clone of the publisher is dropped).
    pub(crate) fn new(names: Names) -> Self {
        let target = Arc::new(Target {
            names,
            channel: watch::Sender::new(None),
            refusals: amqp::RefusalStreak::default(),
            relink: Notify::new(),
        });
        let flusher = target.clone();
        let batches = Batcher::spawn("events", BATCH_LIMITS, move |_key, events: Vec<Event>| {
            let target = flusher.clone();
            async move { target.publish_once(&events).await }
        });
        Publisher { target, batches }
    }

    /// Resolves once publishes were refused [`amqp::RefusalStreak::LIMIT`]
    /// times in a row while this was awaited: the link should be rebuilt.
    pub(crate) async fn refused_repeatedly(&self) {
        self.target.relink.notified().await;
    }

    /// Sets (or clears, while disconnected) the channel to publish on.
    pub(crate) fn set_channel(&self, channel: Option<Channel>) {
        self.target.channel.send_replace(channel);
    }

    /// Publishes `events` (all of one routing key) as one message, once,
    /// without batching.
    pub(crate) async fn publish_once(&self, events: &[Event]) -> Result<(), Error> {
        self.target.publish_once(events).await
    }

    /// Publishes `event` (batched with others of its routing key, see the
    /// module doc) until the broker confirms it; false if `stop` fired
    /// first.
    pub(crate) async fn publish_until_confirmed(
        &self,
        event: Event,
        stop: &CancellationToken,
    ) -> bool {
        let key = event.routing_key();
        let mut backoff = Backoff::jittered(Duration::from_millis(100), Duration::from_secs(5));
        let mut changes = self.target.channel.subscribe();
        loop {
            let attempt = tokio::select! {
                r = self.batches.submit(key, event.clone()) => r,
                () = stop.cancelled() => return false,
            };
            if self.target.refusals.note(&attempt) {
                self.target.relink.notify_waiters();
            }
            let Err(e) = attempt else {
                return true;
            };
            tracing::warn!(error = %e, "publishing events failed; retrying");
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(backoff.next_delay()) => {}
                _ = changes.changed() => {}
            }
        }
    }
}

impl Target {
    /// Publishes `events` (all of one routing key) once: one message, or
    /// several when they are too big for one, each confirmed.
    async fn publish_once(&self, events: &[Event]) -> Result<(), Error> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let Some(channel) = self.channel.borrow().clone() else {
            return Err(Error::unavailable("not connected to the broker"));
        };
        let exchange = self.names.events_exchange();
        let routing_key = first.routing_key();
        let bodies = bodies(events, MAX_MESSAGE_BYTES)?;
        let publishes = bodies.iter().map(|body| {
            // Mandatory: with no queue bound to take them (the persist and
            // monitor queues are the scheduler nodes' and the worker's to
            // declare), they come back and are sent again later, never
            // dropped.
            let publish = Publish {
                exchange: &exchange,
                routing_key,
                mandatory: true,
                user_id: self.names.publisher(),
                ..Publish::default()
            };
            amqp::publish_confirmed(&channel, publish, body)
        });
        match tokio::time::timeout(CONFIRM_TIMEOUT, try_join_all(publishes)).await {
            Ok(Ok(routed)) if routed.iter().all(|r| *r) => Ok(()),
            Ok(Ok(_)) => Err(Error::unavailable(
                "no queue takes the events yet (a scheduler node or the persistence worker declares them)",
            )),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::unavailable("no confirm from the broker in time")),
        }
    }
}

/// The message bodies for `events`: JSON arrays of about `max_bytes` at
/// most, in order (a bigger event goes alone).
fn bodies(events: &[Event], max_bytes: usize) -> Result<Vec<Vec<u8>>, Error> {
    debug_assert!(
        events
            .iter()
            .all(|e| e.routing_key() == events[0].routing_key())
    );
    let mut bodies = Vec::new();
    let mut body = vec![b'['];
    for event in events {
        let json = serde_json::to_vec(event)?;
        if body.len() > 1 && body.len() + json.len() + 2 > max_bytes {
            body.push(b']');
            bodies.push(std::mem::replace(&mut body, vec![b'[']));
        }
        if body.len() > 1 {
            body.push(b',');
        }
        body.extend_from_slice(&json);
    }
    body.push(b']');
    bodies.push(body);
    Ok(bodies)
}

#[cfg(test)]
mod tests {
    use rondo_core::ExecResult;
    use rondo_core::event::decode_events;

    use super::*;

    fn result(id: &str, msg_bytes: usize) -> Event {
        Event::Result(ExecResult {
            trigger_id: id.into(),
            job_id: 1,
            executor_id: "e".into(),
            fire_ms: 1,
            start_ms: 2,
            end_ms: 3,
            code: 200,
            msg: "m".repeat(msg_bytes),
            retryable: false,
        })
    }

    #[test]
    fn a_batch_is_one_array_in_order() {
        let events: Vec<Event> = (0..5).map(|i| result(&i.to_string(), 10)).collect();
        let bodies = bodies(&events, MAX_MESSAGE_BYTES).unwrap();
        assert_eq!(bodies.len(), 1);
        assert_eq!(decode_events(&bodies[0]).unwrap(), events);
    }

    #[test]
    fn big_batches_are_split_without_losing_or_reordering_events() {
        let events: Vec<Event> = (0..10).map(|i| result(&i.to_string(), 300)).collect();
        let one = serde_json::to_vec(&events[0]).unwrap().len();
        let bodies = bodies(&events, 3 * one + 4).unwrap();
        assert_eq!(bodies.len(), 4, "3 + 3 + 3 + 1");
        assert!(bodies.iter().all(|b| b.len() <= 3 * one + 4));
        let decoded: Vec<Event> = bodies
            .iter()
            .flat_map(|b| decode_events(b).unwrap())
            .collect();
        assert_eq!(decoded, events);
        // An event bigger than the limit goes alone.
        let bodies = super::bodies(&events[..2], 10).unwrap();
        assert_eq!(bodies.len(), 2);
    }
}
