//! The log shipper: publishes a run's log lines while it runs (every
//! `executor.log_flush_ms`, or sooner when a full event is waiting), and
//! all remaining lines when it ends, before the result.

use std::time::Duration;

use rondo_core::Event;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::joblog::JobLog;
use crate::transport::publisher::Publisher;

pub(crate) struct LogShipper<'a> {
    log: &'a JobLog,
    publisher: &'a Publisher,
    every: Duration,
}

impl<'a> LogShipper<'a> {
    pub(crate) fn new(log: &'a JobLog, publisher: &'a Publisher, every: Duration) -> Self {
        LogShipper {
            log,
            publisher,
            every: every.max(Duration::from_millis(10)),
        }
    }

    /// Ships lines periodically until `done` fires. Failed publishes keep
    /// their lines for the next round. These publishes are not batched
    /// with other runs': only a run that lasts longer than
    /// `executor.log_flush_ms`, or logs a full event's worth of lines,
    /// ships this way, so they are not a cost of every trigger.
    pub(crate) async fn run(&self, done: &CancellationToken) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick.tick().await;
        // After a failed publish only the clock triggers the next attempt,
        // so a chatty handler cannot turn a broker outage into a busy loop.
        let mut healthy = true;
        loop {
            tokio::select! {
                () = done.cancelled() => return,
                _ = tick.tick() => {}
                () = self.log.full(), if healthy => {}
            }
            healthy = match self.flush_once().await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "shipping log lines failed; keeping them for the next round");
                    false
                }
            };
        }
    }

    /// Publishes every pending line, one attempt per event.
    async fn flush_once(&self) -> Result<(), rondo_core::Error> {
        while let Some(lines) = self.log.take_event() {
            let event = [Event::Log(lines)];
            if let Err(e) = self.publisher.publish_once(&event).await {
                if let [Event::Log(lines)] = event {
                    self.log.restore(lines);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Publishes every pending line, retrying until confirmed; false if
    /// `stop` fired first (the remaining lines are lost with the process).
    /// These publishes are batched with other runs' (see `publisher`): a
    /// run's last lines usually share a message with those of the runs
    /// that ended at the same time.
    pub(crate) async fn flush_all(&self, stop: &CancellationToken) -> bool {
        while let Some(lines) = self.log.take_event() {
            if !self
                .publisher
                .publish_until_confirmed(Event::Log(lines), stop)
                .await
            {
                return false;
            }
        }
        true
    }
}
