//! The consumer: deliveries from the `persist` queue, batched, written to
//! MySQL, acked after commit.
//!
//! One AMQP session is a connection with two channels: the consuming one
//! (prefetch = `persist.prefetch`) and a confirm channel for dead-letter
//! republishes. A session that fails (broker gone, ack refused) is dropped
//! without acking anything; the broker redelivers, the writes are
//! idempotent, and the worker opens a new session after a backoff.
//!
//! While MySQL fails, the batch is retried (100 ms doubling to 5 s) and the
//! consumer is not read: RabbitMQ stops delivering once `prefetch` messages
//! are unacked. That is the back-pressure; nothing is acked, so nothing is
//! lost.

use std::time::Duration;

use anyhow::{Context as _, bail};
use futures_util::StreamExt as _;
use lapin::options::{BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, Consumer};
use rondo_core::amqp::{self, Publish};
use rondo_core::senders::{JobGroups, Senders};
use rondo_core::{Config, Event, Names};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use rondo_core::backoff::Backoff;
use rondo_core::metrics::Readiness;
use rondo_history::{History, WriteReport};

use crate::batch::Batch;

/// A write attempt that takes longer counts as failed (a hung connection
/// must not stall the worker forever).
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the backlog gauge reads the queue's depth (one round trip).
const BACKLOG_EVERY: Duration = Duration::from_secs(5);

/// The persistence worker over an existing database (migrated by the
/// caller). [`crate::run`] builds one from the config.
pub struct Worker {
    config: Config,
    names: Names,
    history: History,
    readiness: Readiness,
    /// Who may send which event (`amqp.scheduler_users`,
    /// `amqp.executor_user`, `amqp.gateway_users`).
    senders: Senders,
    /// The groups of jobs whose results were checked lately, and of the
    /// jobs a scheduler's events defined.
    job_groups: JobGroups,
}

impl Worker {
    /// `readiness` is set while a broker session consumes.
    pub fn new(config: Config, history: History, readiness: Readiness) -> Self {
        let names = config.names();
        let senders = Senders::new(&config.amqp);
        Worker {
            config,
            names,
            history,
            readiness,
            senders,
            job_groups: JobGroups::default(),
        }
    }

    /// Why a message from `sender` (its `user_id`) carrying `events` is
    /// refused (see [`Senders`]). The groups of the jobs it reports on come
    /// from the job definitions this worker saw go by, else from MySQL.
    async fn refusals(
        &self,
        sender: Option<&str>,
        events: &[Event],
    ) -> Result<Vec<Option<String>>, rondo_core::Error> {
        let jobs = self.senders.jobs_to_check(sender, events);
        let (mut groups, missing) = self.job_groups.lookup(&jobs);
        if !missing.is_empty() {
            let found = self.history.job_groups(&missing).await?;
            let read: Vec<(u64, Option<String>)> = missing
                .iter()
                .map(|id| (*id, found.get(id).cloned()))
                .collect();
            groups.extend(read.iter().cloned());
            // Only a job found is remembered: an id made up by a sender
            // must not hide a job created a moment later.
            self.job_groups
                .remember(read.into_iter().filter(|(_, g)| g.is_some()));
        }
        let refusals = self.senders.refusals(sender, events, &groups);
        // A scheduler's definitions, in queue order: a job created and
        // fired at once has its group known before its first result (which
        // may come in the same batch, before MySQL holds it).
        self.job_groups.remember(
            events
                .iter()
                .zip(&refusals)
                .filter(|(_, refusal)| refusal.is_none())
                .filter_map(|(e, _)| match e {
                    Event::JobUpserted { job } => Some((job.id, Some(job.group.clone()))),
                    Event::JobDeleted { id, .. } => Some((*id, None)),
                    _ => None,
                }),
        );
        Ok(refusals)
    }

    /// Consumes until `shutdown`, then stops consuming, flushes the current
    /// batch (one attempt, at most `persist.shutdown_grace_ms`) and closes.
    /// Broker failures are retried with backoff, never returned.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let queue = self.names.persist_queue();
        let span =
            tracing::info_span!("persist_worker", namespace = self.names.namespace(), %queue);
        self.reconnect_loop(&queue, &shutdown)
            .instrument(span)
            .await;
        Ok(())
    }

    async fn reconnect_loop(&self, queue: &str, shutdown: &CancellationToken) {
        let mut backoff = Backoff::default();
        while !shutdown.is_cancelled() {
            let opened = tokio::select! {
                () = shutdown.cancelled() => return,
                opened = Session::open(self, queue) => opened,
            };
            match opened {
                Ok(session) => {
                    backoff.reset();
                    self.readiness.set(true);
                    let ended = session.run(shutdown).await;
                    self.readiness.set(false);
                    match ended {
                        Ok(()) => return,
                        Err(error) => {
                            tracing::warn!(error = %format!("{error:#}"), "amqp session failed; unacked events will be redelivered")
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "cannot consume from rabbitmq")
                }
            }
            let delay = backoff.next_delay();
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// One connection's worth of consuming.
struct Session<'w> {
    worker: &'w Worker,
    queue: &'w str,
    conn: Connection,
    consume: Channel,
    publish: Channel,
    consumer: Consumer,
    /// When the backlog gauge was last read.
    backlog_at: std::sync::Mutex<Option<Instant>>,
}

impl<'w> Session<'w> {
    async fn open(worker: &'w Worker, queue: &'w str) -> anyhow::Result<Session<'w>> {
        let conn = amqp::connect(&worker.config.amqp.url, "rondo-persist-worker").await?;
        let publish = amqp::confirm_channel(&conn).await?;
        amqp::declare_topology(&publish, &worker.names).await?;
        let consume = conn.create_channel().await?;
        consume
            .basic_qos(worker.config.persist.prefetch, BasicQosOptions::default())
            .await?;
        let consumer = consume
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .context("basic.consume")?;
        tracing::info!(prefetch = worker.config.persist.prefetch, "consuming");
        Ok(Session {
            worker,
            queue,
            conn,
            consume,
            publish,
            consumer,
            backlog_at: std::sync::Mutex::new(None),
        })
    }

    /// Runs until shutdown (`Ok`, after the drain) or a broker failure.
    async fn run(mut self, shutdown: &CancellationToken) -> anyhow::Result<()> {
        let mut batch = Batch::default();
        if let Err(error) = self.consume_until_shutdown(&mut batch, shutdown).await {
            let _ = self
                .conn
                .close(200, "persist worker session failed".into())
                .await;
            return Err(error);
        }
        self.drain(&mut batch).await;
        Ok(())
    }

    async fn consume_until_shutdown(
        &mut self,
        batch: &mut Batch,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<()> {
        let persist = &self.worker.config.persist;
        let linger = Duration::from_millis(persist.linger_ms);
        loop {
            let deadline = batch.deadline(linger);
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {}
                next = self.consumer.next() => {
                    let delivery = match next {
                        Some(delivery) => delivery.context("consumer stream")?,
                        None => bail!("the broker cancelled the consumer"),
                    };
                    self.accept(delivery, batch).await?;
                    if !batch.is_full(persist.batch_size) {
                        continue;
                    }
                }
            }
            if !self.flush(batch, shutdown).await? {
                return Ok(());
            }
        }
    }

    /// Adds a delivery to the batch, or dead-letters it if it does not
    /// decode or carries a scheduler's event from another sender.
    async fn accept(
        &self,
        delivery: lapin::message::Delivery,
        batch: &mut Batch,
    ) -> anyhow::Result<()> {
        let events = match rondo_core::event::decode_events(&delivery.data) {
            Ok(events) => events,
            Err(error) => {
                let reason = format!("undecodable event message: {error}");
                return self.refuse(&delivery, "undecodable", &reason).await;
            }
        };
        let sender = delivery.properties.user_id().as_ref().map(|u| u.as_str());
        let refusals = self
            .worker
            .refusals(sender, &events)
            .await
            .context("reading the groups of reported jobs")?;
        if !events.is_empty() && refusals.iter().all(Option::is_some) {
            let reason = refusals.into_iter().flatten().next().unwrap_or_default();
            return self.refuse(&delivery, "forbidden", &reason).await;
        }
        // Only the refused events of a message go to the dead letters; the
        // others are stored.
        let mut kept = Vec::with_capacity(events.len());
        for (event, refusal) in events.into_iter().zip(refusals) {
            match refusal {
                None => kept.push(event),
                Some(reason) => {
                    metrics::counter!("rondo_persist_dead_letters_total", "reason" => "forbidden")
                        .increment(1);
                    self.dead_letter_event(&event, delivery.delivery_tag, &reason)
                        .await?;
                }
            }
        }
        batch.push(delivery.delivery_tag, kept, Instant::now());
        Ok(())
    }

    /// Dead-letters a whole delivery with `reason`, counted under `kind`.
    async fn refuse(
        &self,
        delivery: &lapin::message::Delivery,
        kind: &'static str,
        reason: &str,
    ) -> anyhow::Result<()> {
        metrics::counter!("rondo_persist_dead_letters_total", "reason" => kind).increment(1);
        amqp::dead_letter(
            &self.publish,
            &self.worker.names,
            delivery,
            self.queue,
            reason,
        )
        .await
        .with_context(|| format!("dead-lettering a message ({kind})"))
    }

    /// Sets `rondo_persist_backlog` (messages waiting in the persist queue,
    /// unacked ones not counted) at most every [`BACKLOG_EVERY`].
    async fn note_backlog(&self) {
        {
            let mut at = self.backlog_at.lock().expect("backlog lock");
            if at.is_some_and(|t| t.elapsed() < BACKLOG_EVERY) {
                return;
            }
            *at = Some(Instant::now());
        }
        let passive = lapin::options::QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        if let Ok(q) = self
            .consume
            .queue_declare(self.queue.into(), passive, FieldTable::default())
            .await
        {
            metrics::gauge!("rondo_persist_backlog").set(f64::from(q.message_count()));
        }
    }

    /// Writes the batch (retrying while MySQL fails), dead-letters rejected
    /// events, acks. `Ok(false)` when shutdown interrupted the retries: the
    /// batch is left as it is, unacked.
    async fn flush(&self, batch: &mut Batch, shutdown: &CancellationToken) -> anyhow::Result<bool> {
        if batch.is_empty() {
            return Ok(true);
        }
        let span = tracing::debug_span!(
            "flush",
            events = batch.events().len(),
            deliveries = batch.deliveries()
        );
        let Some(report) = self
            .write_until_done(batch, shutdown)
            .instrument(span.clone())
            .await
        else {
            return Ok(false);
        };
        self.finish(batch, &report).instrument(span).await?;
        Ok(true)
    }

    async fn write_until_done(
        &self,
        batch: &Batch,
        shutdown: &CancellationToken,
    ) -> Option<WriteReport> {
        let mut backoff = Backoff::default();
        let mut attempt = 0u64;
        loop {
            attempt += 1;
            let error = match self.write_once(batch).await {
                Ok(report) => return Some(report),
                Err(error) => error,
            };
            let delay = backoff.next_delay();
            tracing::warn!(attempt, %error, retry_in_ms = delay.as_millis() as u64, "mysql write failed; batch kept unacked");
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn write_once(&self, batch: &Batch) -> anyhow::Result<WriteReport> {
        let started = Instant::now();
        let write = rondo_history::write_events(self.worker.history.pool(), batch.events());
        let report = tokio::time::timeout(WRITE_TIMEOUT, write)
            .await
            .context("write timed out")??;
        metrics::histogram!("rondo_persist_batch_seconds").record(started.elapsed().as_secs_f64());
        metrics::histogram!("rondo_persist_batch_events").record(batch.events().len() as f64);
        Ok(report)
    }

    /// After commit: rejected events to the dead queue, then one ack for the
    /// whole batch.
    async fn finish(&self, batch: &mut Batch, report: &WriteReport) -> anyhow::Result<()> {
        for rejected in &report.rejected {
            let event = &batch.events()[rejected.index];
            self.dead_letter_event(event, batch.tag_of(rejected.index), &rejected.reason)
                .await?;
        }
        if let Some(tag) = batch.ack_tag() {
            self.consume
                .basic_ack(tag, BasicAckOptions { multiple: true })
                .await
                .context("acking a committed batch")?;
        }
        tracing::debug!(
            written = report.written,
            rejected = report.rejected.len(),
            "batch stored"
        );
        metrics::counter!("rondo_persist_events_total").increment(report.written as u64);
        metrics::counter!("rondo_persist_dead_letters_total", "reason" => "rejected")
            .increment(report.rejected.len() as u64);
        batch.clear();
        self.note_backlog().await;
        Ok(())
    }

    /// Republishes one event MySQL refused, alone, to the dead queue.
    async fn dead_letter_event(&self, event: &Event, tag: u64, reason: &str) -> anyhow::Result<()> {
        let body = serde_json::to_vec(&[event])?;
        let headers = amqp::dead_letter_headers(FieldTable::default(), self.queue, reason);
        let exchange = self.worker.names.dead_exchange();
        let publish = Publish {
            exchange: &exchange,
            routing_key: event.routing_key(),
            headers: Some(headers),
            user_id: self.worker.names.publisher(),
            ..Publish::default()
        };
        amqp::publish_confirmed(&self.publish, publish, &body)
            .await
            .context("dead-lettering a refused event")?;
        let (job_id, trigger_id) = event_ids(event);
        tracing::warn!(
            delivery_tag = tag,
            job_id,
            trigger_id,
            reason,
            "event refused by mysql moved to the dead-letter queue"
        );
        Ok(())
    }

    /// Stop consuming, flush what was taken (one attempt within the grace
    /// period), close. What is not acked here goes back to the queue.
    async fn drain(self, batch: &mut Batch) {
        let tag = self.consumer.tag();
        if let Err(error) = self
            .consume
            .basic_cancel(tag, BasicCancelOptions::default())
            .await
        {
            tracing::warn!(%error, "basic.cancel failed");
        }
        let grace = Duration::from_millis(self.worker.config.persist.shutdown_grace_ms);
        if !batch.is_empty() {
            match tokio::time::timeout(grace, self.write_once(batch)).await {
                Ok(Ok(report)) => {
                    if let Err(error) = self.finish(batch, &report).await {
                        tracing::warn!(error = %format!("{error:#}"), "final batch written but not acked; it will be redelivered");
                    }
                }
                Ok(Err(error)) => {
                    tracing::warn!(error = %format!("{error:#}"), events = batch.events().len(), "final batch not written; left for redelivery")
                }
                Err(_) => tracing::warn!(
                    events = batch.events().len(),
                    "final batch timed out; left for redelivery"
                ),
            }
        }
        let _ = self.consume.close(200, "shutdown".into()).await;
        let _ = self.publish.close(200, "shutdown".into()).await;
        let _ = self.conn.close(200, "shutdown".into()).await;
        tracing::info!("stopped");
    }
}

/// The ids worth logging for an event.
fn event_ids(event: &Event) -> (Option<u64>, Option<&str>) {
    match event {
        Event::GroupUpserted { .. } | Event::GroupDeleted { .. } => (None, None),
        Event::JobUpserted { job } => (Some(job.id), None),
        Event::JobDeleted { id, .. } => (Some(*id), None),
        Event::Triggered(r) => (Some(r.trigger.job_id), Some(&r.trigger.trigger_id)),
        Event::Result(r) => (Some(r.job_id), Some(&r.trigger_id)),
        Event::Log(l) => (Some(l.job_id), Some(&l.trigger_id)),
        Event::Alarm(a) => (Some(a.job_id), Some(&a.trigger_id)),
        Event::Audit(_) => (None, None),
    }
}
