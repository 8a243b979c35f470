//! Control messages: requests to one executor about a trigger it holds —
//! today only a kill.
//!
//! # Format
//!
//! Exchange `<ns>.control` (direct), routing key = the executor id. Each
//! executor, while connected, consumes its own queue `<ns>.ctl.<executor
//! id>` (exclusive to its connection, auto-deleted with it, dead-letters to
//! `<ns>.dlx`). The body is JSON ([`rondo_core::trigger::Control`]):
//!
//! ```json
//! {"v": 1, "action": "kill", "trigger_id": "7-1795288815000-0", "job_id": 7}
//! ```
//!
//! A kill stops the trigger wherever it is on that executor:
//!
//! * running: its token fires; the handler gets the supervisor's one-second
//!   grace to return, then its task is aborted; its result is 500 `killed`,
//!   not retryable, whatever the handler answered;
//! * waiting for its turn (SERIAL_EXECUTION) or about to start: it is taken
//!   out and never runs; same result;
//! * its handler already ended, or not on this executor (never was, or
//!   long done), or `job_id` is not the trigger's job: nothing happens (the
//!   executor logs it).
//!
//! A kill is fire-and-forget: the answer is the trigger's result. Publish it
//! `mandatory` ([`send_kill`] does): a kill that comes back unroutable means
//! the executor is not connected now (a disconnected executor has no
//! control queue, so nothing is kept for it). A message that does not
//! decode is moved to the dead-letter queue with the reason.

use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, Consumer};
use rondo_core::amqp::{self, Publish};
use rondo_core::trigger::{Control, ControlAction};
use rondo_core::{Error, Names};

use crate::admission::runner::Runner;
use crate::admission::slots::Kill;

/// Control messages taken at once (they are handled in microseconds).
const CONTROL_PREFETCH: u16 = 16;

/// Asks executor `executor_id` to kill trigger `trigger_id` of job
/// `job_id` in `group`. Returns `Ok(false)` when no executor of that id is connected
/// (the message came back unroutable). `channel` must have publisher
/// confirms on ([`rondo_core::amqp::confirm_channel`]).
pub async fn send_kill(
    channel: &Channel,
    names: &Names,
    executor_id: &str,
    group: &str,
    trigger_id: &str,
    job_id: u64,
) -> Result<bool, Error> {
    let body = serde_json::to_vec(&kill_message(group, trigger_id, job_id))?;
    let exchange = names.control_exchange();
    let publish = Publish {
        exchange: &exchange,
        routing_key: executor_id,
        mandatory: true,
        user_id: names.publisher(),
        ..Publish::default()
    };
    amqp::publish_confirmed(channel, publish, &body).await
}

/// The control message that kills `trigger_id` of job `job_id` in `group`.
pub fn kill_message(group: &str, trigger_id: &str, job_id: u64) -> Control {
    Control::kill(group, trigger_id, job_id)
}

/// The executor's control queue and its consumer on a channel of its own
/// (a broker error on it never takes the trigger consumer down).
pub(crate) struct ControlLink {
    pub(crate) channel: Channel,
    pub(crate) consumer: Consumer,
    pub(crate) queue: String,
}

/// Declares the executor's control queue, binds it and starts consuming.
pub(crate) async fn listen(
    conn: &Connection,
    names: &Names,
    executor_id: &str,
    consumer_tag: &str,
) -> Result<ControlLink, Error> {
    let channel = amqp::confirm_channel(conn).await?;
    let queue = names.control_queue(executor_id);
    let options = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.as_str().into(), options, amqp::queue_args(names))
        .await?;
    channel
        .queue_bind(
            queue.as_str().into(),
            names.control_exchange().as_str().into(),
            executor_id.into(),
            lapin::options::QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    channel
        .basic_qos(CONTROL_PREFETCH, BasicQosOptions::default())
        .await?;
    let consumer = channel
        .basic_consume(
            queue.as_str().into(),
            consumer_tag.into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok(ControlLink {
        channel,
        consumer,
        queue,
    })
}

/// Handles one control message: acts on it and acks it, or dead-letters it.
pub(crate) async fn handle(runner: &Runner, link: &ControlLink, names: &Names, delivery: Delivery) {
    let control = match Control::decode(&delivery.data) {
        Ok(control) => control,
        Err(reason) => {
            let moved =
                amqp::dead_letter(&link.channel, names, &delivery, &link.queue, &reason).await;
            if let Err(e) = moved {
                // The queue's own DLX takes it then, without the reason.
                tracing::warn!(error = %e, reason, "could not dead-letter the control message; rejecting it");
                let reject = lapin::options::BasicRejectOptions { requeue: false };
                let _ = delivery.acker.reject(reject).await;
            }
            return;
        }
    };
    match control.action {
        ControlAction::Kill => kill(runner, &control),
    }
    if let Err(e) = delivery.ack(BasicAckOptions::default()).await {
        tracing::debug!(error = %e, "could not ack the control message");
    }
}

fn kill(runner: &Runner, control: &Control) {
    let trigger_id = control.trigger_id.as_str();
    let job_id = control.job_id;
    match runner.kill(trigger_id, job_id) {
        Kill::Sent => tracing::info!(trigger_id, job_id, "kill: trigger stopped"),
        Kill::Unknown => {
            tracing::info!(trigger_id, job_id, "kill: no such trigger here; ignored");
        }
        Kill::Ended => {
            tracing::info!(trigger_id, job_id, "kill: the run already ended; ignored");
        }
        Kill::OtherJob(actual) => tracing::warn!(
            trigger_id,
            job_id,
            actual_job_id = actual,
            "kill: the trigger belongs to another job; ignored"
        ),
    }
}
