//! [`EventPublisher`]: how a scheduler node tells the rest of rondo what
//! happened — trigger events from the dispatcher, `job.*` and `group.*`
//! from the admin API, lost-trigger results and alarm outcomes from the
//! monitor. Events of one routing key that are ready together share one
//! confirmed message (group commit, see [`Batcher`]); each caller waits for
//! the confirm of the message that carries its events.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::try_join_all;
use rondo_core::batcher::{Batcher, Limits};
use rondo_core::{Error, Event, amqp};

use crate::link::Link;

/// Events per AMQP message at most (all of one routing key), and messages
/// awaiting their confirm at once.
pub(crate) const LIMITS: Limits = Limits {
    max_items: 1_000,
    max_flushes: 2,
    // Trigger events go to the history, not to the executor: gather more.
    linger: std::time::Duration::from_millis(10),
};

/// Publishes events on the events exchange. Cheap to clone.
#[derive(Clone)]
pub struct EventPublisher {
    batcher: Batcher<&'static str, Event, ()>,
}

impl EventPublisher {
    pub fn new(link: Arc<Link>) -> EventPublisher {
        let batcher = Batcher::spawn("event", LIMITS, move |_key, events: Vec<Event>| {
            let link = link.clone();
            async move {
                let ch = link.channel().await?;
                let outcome = amqp::publish_events(&ch, &link.names, &events).await;
                link.note(&outcome).await;
                outcome
            }
        });
        EventPublisher { batcher }
    }

    /// Publishes `events` and waits until the broker confirmed every one.
    pub async fn publish(&self, events: &[Event]) -> Result<(), Error> {
        self.publish_within(events, LIMITS.linger).await
    }

    /// [`EventPublisher::publish`], each event waiting at most `linger` for
    /// others of its routing key.
    pub(crate) async fn publish_within(
        &self,
        events: &[Event],
        linger: Duration,
    ) -> Result<(), Error> {
        let sends = events
            .iter()
            .cloned()
            .map(|e| self.batcher.submit_within(e.routing_key(), e, linger));
        try_join_all(sends).await?;
        Ok(())
    }
}
