//! RabbitMQ the way rondo uses it: one topology declared identically by every
//! process, confirmed persistent publishes, and dead-lettering with a reason.
//!
//! Every queue rondo declares dead-letters to the namespace's `dlx` fanout
//! exchange, which feeds the `dead` queue. A consumer that cannot decode or
//! handle a message calls [`dead_letter`]: the message is republished there
//! with an `x-rondo-reason` header (and confirmed) before the original is
//! acked, so nothing is dropped and the operator sees why.

use lapin::Confirmation;
use lapin::options::{
    BasicAckOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};

use crate::error::Error;
use crate::names::Names;

pub use lapin;

/// Header naming why a message was dead-lettered.
pub const REASON_HEADER: &str = "x-rondo-reason";
/// Header naming the queue a dead-lettered message came from.
pub const SOURCE_QUEUE_HEADER: &str = "x-rondo-source-queue";

/// Delivery mode 2: the broker writes the message to disk.
pub const PERSISTENT: u8 = 2;

/// How long one broker address may take to accept a connection before the
/// next is tried (a node that is frozen or cut off does not refuse, it
/// hangs).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The broker addresses of `amqp.url`: one URL, or a cluster's nodes as
/// URLs separated by commas.
pub fn addresses(url: &str) -> Vec<&str> {
    url.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect()
}

/// The broker user `url` signs in as (its first address's; RabbitMQ's
/// `guest` when it names none): what this process's messages carry as
/// `user_id`. Empty when the URL does not parse (the connection fails
/// then anyway).
pub fn user_of(url: &str) -> String {
    addresses(url)
        .first()
        .and_then(|u| u.parse::<lapin::uri::AMQPUri>().ok())
        .map(|u| u.authority.userinfo.username)
        .unwrap_or_default()
}

/// The order in which a connection tries the addresses: from `start`
/// round, so successive connections (and each reconnection) begin at the
/// next node and spread over the cluster.
fn rotation(len: usize, start: usize) -> impl Iterator<Item = usize> {
    (0..len).map(move |i| (start + i) % len)
}

/// Opens a connection to the first broker address that accepts one,
/// starting one further along the list at each call. lapin reconnects
/// only to the address it was given, so a process whose node died gets
/// a live one by connecting again through here.
pub async fn connect(url: &str, name: &str) -> Result<Connection, Error> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let list = addresses(url);
    if list.is_empty() {
        return Err(Error::unavailable("amqp connect: no broker address"));
    }
    let start = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut failures = Vec::new();
    for i in rotation(list.len(), start) {
        let address = list[i];
        let props = ConnectionProperties::default().with_connection_name(name.into());
        let failure = match tokio::time::timeout(
            CONNECT_TIMEOUT,
            Connection::connect(address, props),
        )
        .await
        {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
        };
        failures.push(format!("{}: {failure}", crate::redact::url(address)));
    }
    Err(Error::unavailable(format!(
        "amqp connect: {}",
        failures.join("; ")
    )))
}

/// Opens a channel with publisher confirms on.
pub async fn confirm_channel(conn: &Connection) -> Result<Channel, Error> {
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok(channel)
}

/// Arguments of every rondo queue: dead-letter to the namespace's `dlx`.
pub fn queue_args(names: &Names) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(names.dead_exchange().into()),
    );
    args
}

/// Arguments of the durable shared queues (executors', persist, monitor,
/// dead letters): [`queue_args`], and `x-queue-type: quorum` when the
/// namespace uses quorum queues (a per-process exclusive queue cannot be
/// one and keeps [`queue_args`]).
pub fn durable_queue_args(names: &Names, dead_letter: bool) -> FieldTable {
    let mut args = if dead_letter {
        queue_args(names)
    } else {
        FieldTable::default()
    };
    if names.quorum_queues() {
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
    }
    args
}

async fn declare_exchange(ch: &Channel, name: String, kind: ExchangeKind) -> Result<(), Error> {
    let opts = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    ch.exchange_declare(name.into(), kind, opts, FieldTable::default())
        .await?;
    Ok(())
}

async fn declare_queue(ch: &Channel, name: &str, args: FieldTable) -> Result<(), Error> {
    let opts = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(name.into(), opts, args)
        .await
        .map_err(|e| declare_error(name, e))?;
    Ok(())
}

/// A declare the broker refused because the queue exists with other
/// properties (406 PRECONDITION_FAILED) is a `Conflict`: retrying cannot
/// help until someone deletes or migrates the queue. Anything else is the
/// broker being unavailable.
fn declare_error(queue: &str, e: lapin::Error) -> Error {
    use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
    let inequivalent = matches!(
        e.kind(),
        lapin::ErrorKind::ProtocolError(amqp)
            if *amqp.kind() == AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED)
    );
    if inequivalent {
        let msg = format!(
            "queue {queue} exists with other arguments than rondo declares ({e}); \
             delete or migrate it"
        );
        return Error::new(crate::error::ErrorKind::Conflict, msg);
    }
    e.into()
}

async fn bind(ch: &Channel, queue: &str, exchange: &str, key: &str) -> Result<(), Error> {
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        key.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}

/// Declares the shared topology: the trigger, control and events exchanges,
/// the dead-letter exchange and queue, the persistence queue bound to every
/// event, and the result monitor's queue bound to `result.*` and
/// `trigger.failed`. Idempotent; every process calls it at start.
pub async fn declare_topology(ch: &Channel, names: &Names) -> Result<(), Error> {
    declare_exchange(ch, names.trigger_exchange(), ExchangeKind::Topic).await?;
    declare_exchange(ch, names.control_exchange(), ExchangeKind::Direct).await?;
    declare_exchange(ch, names.events_exchange(), ExchangeKind::Topic).await?;
    declare_exchange(ch, names.dead_exchange(), ExchangeKind::Fanout).await?;
    declare_queue(ch, &names.dead_queue(), durable_queue_args(names, false)).await?;
    bind(ch, &names.dead_queue(), &names.dead_exchange(), "").await?;
    declare_queue(ch, &names.persist_queue(), durable_queue_args(names, true)).await?;
    bind(ch, &names.persist_queue(), &names.events_exchange(), "#").await?;
    declare_queue(ch, &names.monitor_queue(), durable_queue_args(names, true)).await?;
    for key in ["result.*", "trigger.failed"] {
        bind(ch, &names.monitor_queue(), &names.events_exchange(), key).await?;
    }
    Ok(())
}

/// What an executor (or the XXL-JOB gateway) declares: the exchanges it
/// publishes to or binds its queues to, and the dead letters' queue. Not
/// the persist and monitor queues: binding them needs read on the events
/// exchange, which an executor's broker user is not given (with it, it
/// could bind a queue of its own and copy every event, every group's job
/// definitions and secrets among them). The scheduler nodes and the
/// worker declare those, and an executor gets triggers only from a node
/// that did.
pub async fn declare_executor_topology(ch: &Channel, names: &Names) -> Result<(), Error> {
    declare_exchange(ch, names.trigger_exchange(), ExchangeKind::Topic).await?;
    declare_exchange(ch, names.control_exchange(), ExchangeKind::Direct).await?;
    declare_exchange(ch, names.events_exchange(), ExchangeKind::Topic).await?;
    declare_exchange(ch, names.dead_exchange(), ExchangeKind::Fanout).await?;
    declare_queue(ch, &names.dead_queue(), durable_queue_args(names, false)).await?;
    bind(ch, &names.dead_queue(), &names.dead_exchange(), "").await?;
    Ok(())
}

/// Declares an executor's durable queue, bound to the trigger exchange with
/// its routing key (`<app>.<executor id>`).
pub async fn declare_executor_queue(
    ch: &Channel,
    names: &Names,
    app: &str,
    executor_id: &str,
) -> Result<String, Error> {
    let queue = names.executor_queue(app, executor_id);
    declare_queue(ch, &queue, durable_queue_args(names, true)).await?;
    bind(
        ch,
        &queue,
        &names.trigger_exchange(),
        &names.trigger_key(app, executor_id),
    )
    .await?;
    Ok(queue)
}

/// The error message of a publish the broker refused (`nack`).
pub const NACKED: &str = "broker refused (nack) the message";

/// Whether `e` is a publish the broker refused (see [`NACKED`]).
pub fn is_nack(e: &Error) -> bool {
    e.message == NACKED
}

/// Publishes refused (`nack`) in a row on one connection's channel.
///
/// A RabbitMQ channel that published to a quorum queue whose leader died
/// can go on refusing every publish although the queue has a new leader
/// (seen for minutes by the dispatcher, and for 90 s by the executor in the
/// cluster topology test), while a new connection's publishes are taken at
/// once. So whoever publishes opens a new connection once
/// [`RefusalStreak::note`] says the refusals came [`RefusalStreak::LIMIT`]
/// times in a row.
#[derive(Debug, Default)]
pub struct RefusalStreak(std::sync::atomic::AtomicU32);

impl RefusalStreak {
    /// Refusals in a row after which the link should be rebuilt.
    pub const LIMIT: u32 = 3;

    /// Notes a publish's outcome; true when it completed a streak of
    /// [`Self::LIMIT`] refusals, and the count starts again. A confirm ends
    /// the streak; other errors (no connection, no confirm in time) leave
    /// it as it was.
    pub fn note<T>(&self, outcome: &Result<T, Error>) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        match outcome {
            Ok(_) => {
                self.0.store(0, Relaxed);
                false
            }
            Err(e) if is_nack(e) => {
                if self.0.fetch_add(1, Relaxed) + 1 >= Self::LIMIT {
                    self.0.store(0, Relaxed);
                    true
                } else {
                    false
                }
            }
            Err(_) => false,
        }
    }
}

/// Options of a publish.
#[derive(Debug, Clone, Default)]
pub struct Publish<'a> {
    pub exchange: &'a str,
    pub routing_key: &'a str,
    /// Returned by the broker if no queue takes it.
    pub mandatory: bool,
    pub message_id: Option<&'a str>,
    pub headers: Option<FieldTable>,
    /// The broker user the connection signed in as
    /// ([`crate::names::Names::publisher`]): RabbitMQ refuses a message
    /// whose `user_id` is another, so a consumer may trust it.
    pub user_id: Option<&'a str>,
}

/// Publishes a persistent JSON message and waits for the broker's confirm.
/// Returns `Ok(false)` when a mandatory message came back unroutable.
pub async fn publish_confirmed(ch: &Channel, p: Publish<'_>, body: &[u8]) -> Result<bool, Error> {
    let mut props = BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_content_type(ShortString::from("application/json"));
    if let Some(id) = p.message_id {
        props = props.with_message_id(id.into());
    }
    if let Some(headers) = p.headers {
        props = props.with_headers(headers);
    }
    if let Some(user) = p.user_id {
        props = props.with_user_id(user.into());
    }
    let opts = BasicPublishOptions {
        mandatory: p.mandatory,
        ..BasicPublishOptions::default()
    };
    let confirm = ch
        .basic_publish(p.exchange.into(), p.routing_key.into(), opts, body, props)
        .await?
        .await?;
    match confirm {
        Confirmation::Ack(None) | Confirmation::NotRequested => Ok(true),
        Confirmation::Ack(Some(_returned)) => Ok(false),
        Confirmation::Nack(_) => Err(Error::unavailable(NACKED)),
    }
}

/// `base` plus the dead-letter headers: why, and from which queue. Every
/// dead-lettering path (a whole delivery here, one event of a batch in the
/// persistence worker) sets them through this function.
pub fn dead_letter_headers(mut base: FieldTable, source_queue: &str, reason: &str) -> FieldTable {
    base.insert(REASON_HEADER.into(), AMQPValue::LongString(reason.into()));
    base.insert(
        SOURCE_QUEUE_HEADER.into(),
        AMQPValue::LongString(source_queue.into()),
    );
    base
}

/// Moves a delivery to the dead queue with the reason, then acks it.
/// The caller's channel must have confirms on.
pub async fn dead_letter(
    ch: &Channel,
    names: &Names,
    delivery: &lapin::message::Delivery,
    source_queue: &str,
    reason: &str,
) -> Result<(), Error> {
    let base = delivery.properties.headers().clone().unwrap_or_default();
    let headers = dead_letter_headers(base, source_queue, reason);
    let exchange = names.dead_exchange();
    let publish = Publish {
        exchange: &exchange,
        routing_key: "",
        headers: Some(headers),
        user_id: names.publisher(),
        ..Publish::default()
    };
    publish_confirmed(ch, publish, &delivery.data).await?;
    delivery.ack(BasicAckOptions::default()).await?;
    tracing::warn!(
        queue = source_queue,
        reason,
        "message moved to the dead-letter queue"
    );
    Ok(())
}

/// Publishes events of one routing key as one confirmed message on the
/// events exchange (body: a JSON array).
pub async fn publish_events(
    ch: &Channel,
    names: &Names,
    events: &[crate::event::Event],
) -> Result<(), Error> {
    let Some(first) = events.first() else {
        return Ok(());
    };
    debug_assert!(
        events
            .iter()
            .all(|e| e.routing_key() == first.routing_key())
    );
    let body = serde_json::to_vec(events)?;
    let exchange = names.events_exchange();
    let publish = Publish {
        exchange: &exchange,
        routing_key: first.routing_key(),
        user_id: names.publisher(),
        ..Publish::default()
    };
    publish_confirmed(ch, publish, &body).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_a_url_signs_in_as_is_what_messages_carry() {
        assert_eq!(user_of("amqp://bob:pw@mq:5672/rondo"), "bob");
        assert_eq!(user_of("amqp://b%40x:pw@mq:5672/rondo"), "b@x");
        assert_eq!(user_of("amqp://127.0.0.1:5672/%2f"), "guest");
        assert_eq!(
            user_of("amqp://ann:a@h1:5681/%2f,amqp://ann:a@h2:5682/%2f"),
            "ann"
        );
        assert_eq!(user_of(""), "");
    }

    #[test]
    fn a_list_of_brokers_is_tried_from_a_new_start_each_time() {
        assert_eq!(
            addresses("amqp://a:1/%2f, amqp://b:2/%2f,amqp://c:3/%2f"),
            ["amqp://a:1/%2f", "amqp://b:2/%2f", "amqp://c:3/%2f"]
        );
        assert_eq!(addresses("amqp://a/%2f"), ["amqp://a/%2f"]);
        assert_eq!(rotation(3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rotation(3, 4).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(rotation(1, 7).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn only_refusals_in_a_row_ask_for_a_new_link() {
        let streak = RefusalStreak::default();
        let nack: Result<(), Error> = Err(Error::unavailable(NACKED));
        let timeout: Result<(), Error> = Err(Error::unavailable("no confirm in time"));
        // Two refusals, a confirm: the streak starts again.
        assert!(!streak.note(&nack));
        assert!(!streak.note(&nack));
        assert!(!streak.note(&Ok(())));
        assert!(!streak.note(&nack));
        assert!(!streak.note(&nack));
        // Another error neither counts nor ends the streak.
        assert!(!streak.note(&timeout));
        assert!(streak.note(&nack), "the third refusal in a row");
        // And the count starts again after it.
        assert!(!streak.note(&nack));
        assert!(!streak.note(&nack));
        assert!(streak.note(&nack));
    }

    #[test]
    fn quorum_queues_are_asked_for_only_when_configured() {
        let classic = Names::new("ns", 1);
        assert!(
            !durable_queue_args(&classic, true)
                .inner()
                .contains_key("x-queue-type")
        );
        let quorum = Names::new("ns", 1).with_quorum_queues(true);
        let args = durable_queue_args(&quorum, true);
        assert_eq!(
            args.inner().get("x-queue-type"),
            Some(&AMQPValue::LongString("quorum".into()))
        );
        assert!(args.inner().contains_key("x-dead-letter-exchange"));
        assert!(
            !durable_queue_args(&quorum, false)
                .inner()
                .contains_key("x-dead-letter-exchange")
        );
        // The exclusive control queue never is one.
        assert!(!queue_args(&quorum).inner().contains_key("x-queue-type"));
    }
}
