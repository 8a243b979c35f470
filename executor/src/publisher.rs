//! Publishing events (log lines, results) to the events exchange on the
//! current connection's confirm channel.
//!
//! The channel is swapped by the session on every reconnect, so a run that
//! outlives its connection still publishes its result on the next one; a
//! publish that fails is retried until the broker confirms it or the
//! executor gives up at the end of its shutdown.

use std::sync::Arc;
use std::time::Duration;

use lapin::Channel;
use rondo_core::{Error, Event, Names};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;

/// One attempt waits this long for the broker's confirm at most.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone)]
pub(crate) struct Publisher {
    names: Arc<Names>,
    channel: Arc<watch::Sender<Option<Channel>>>,
}

impl Publisher {
    pub(crate) fn new(names: Names) -> Self {
        Publisher {
            names: Arc::new(names),
            channel: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Sets (or clears, while disconnected) the channel to publish on.
    pub(crate) fn set_channel(&self, channel: Option<Channel>) {
        self.channel.send_replace(channel);
    }

    /// Publishes `events` (all of one routing key) as one message, once.
    pub(crate) async fn publish_once(&self, events: &[Event]) -> Result<(), Error> {
        let Some(channel) = self.channel.borrow().clone() else {
            return Err(Error::unavailable("not connected to the broker"));
        };
        let publish = rondo_core::amqp::publish_events(&channel, &self.names, events);
        match tokio::time::timeout(CONFIRM_TIMEOUT, publish).await {
            Ok(confirmed) => confirmed,
            Err(_) => Err(Error::unavailable("no confirm from the broker in time")),
        }
    }

    /// Publishes until the broker confirms; false if `stop` fired first.
    pub(crate) async fn publish_until_confirmed(
        &self,
        events: &[Event],
        stop: &CancellationToken,
    ) -> bool {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let mut changes = self.channel.subscribe();
        loop {
            let attempt = tokio::select! {
                r = self.publish_once(events) => r,
                () = stop.cancelled() => return false,
            };
            let Err(e) = attempt else { return true };
            tracing::warn!(error = %e, "publishing events failed; retrying");
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(backoff.next_delay()) => {}
                _ = changes.changed() => {}
            }
        }
    }
}
