//! Broker-side witnesses: a queue of the test's own, bound to the trigger
//! exchange with the executor ids a test names, sees every trigger
//! published to them ([`Witness`]); one bound to the events exchange with
//! `result.*` sees every result ([`Results`]). A test's verdict on what was
//! sent and answered then does not rest on rondo's own bookkeeping.

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use rondo_core::event::decode_events;
use rondo_core::{Config, Event, ExecResult, TriggerBatch, amqp, clock};
use tokio::task::JoinHandle;

/// One trigger as the broker routed it.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The routing key: the executor it was sent to.
    pub executor: String,
    pub trigger_id: String,
    pub job_id: u64,
    pub fire_ms: i64,
    /// When the witness received it.
    pub seen_ms: i64,
}

/// A witness queue and what it has seen so far; the queue (exclusive) goes
/// with the witness.
pub struct Witness {
    sent: Arc<Mutex<Vec<Sent>>>,
    undecodable: Arc<Mutex<usize>>,
    task: JoinHandle<()>,
    _conn: lapin::Connection,
}

impl Witness {
    /// Binds a fresh exclusive queue to the trigger exchange for each of
    /// `executors` (of any group) and starts recording.
    pub async fn bind(config: &Config, executors: &[&str]) -> Witness {
        let exchange = config.names().trigger_exchange();
        let keys: Vec<String> = executors.iter().map(|id| format!("*.{id}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let (conn, mut consumer) = bind_queue(config, &exchange, &keys).await;
        let sent: Arc<Mutex<Vec<Sent>>> = Arc::default();
        let undecodable: Arc<Mutex<usize>> = Arc::default();
        let (record, bad) = (sent.clone(), undecodable.clone());
        let task = tokio::spawn(async move {
            while let Some(Ok(delivery)) = consumer.next().await {
                let seen_ms = clock::now_ms();
                let key = delivery.routing_key.as_str();
                // `<app>.<executor id>`
                let executor = key.split_once('.').map_or(key, |(_, id)| id).to_owned();
                let Ok(batch) = serde_json::from_slice::<TriggerBatch>(&delivery.data) else {
                    *bad.lock().expect("witness lock") += 1;
                    continue;
                };
                let mut sent = record.lock().expect("witness lock");
                sent.extend(batch.triggers.into_iter().map(|t| Sent {
                    executor: executor.clone(),
                    trigger_id: t.trigger_id,
                    job_id: t.job_id,
                    fire_ms: t.fire_ms,
                    seen_ms,
                }));
            }
        });
        Witness {
            sent,
            undecodable,
            task,
            _conn: conn,
        }
    }

    /// Every trigger seen so far, in order of arrival.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().expect("witness lock").clone()
    }

    /// Messages on the bound keys that were not trigger batches.
    pub fn undecodable(&self) -> usize {
        *self.undecodable.lock().expect("witness lock")
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every result published on the events exchange, as the broker routed it.
pub struct Results {
    seen: Arc<Mutex<Vec<ExecResult>>>,
    task: JoinHandle<()>,
    _conn: lapin::Connection,
}

impl Results {
    pub async fn bind(config: &Config) -> Results {
        let exchange = config.names().events_exchange();
        let (conn, mut consumer) = bind_queue(config, &exchange, &["result.*"]).await;
        let seen: Arc<Mutex<Vec<ExecResult>>> = Arc::default();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            while let Some(Ok(delivery)) = consumer.next().await {
                let Ok(events) = decode_events(&delivery.data) else {
                    continue;
                };
                let mut seen = record.lock().expect("witness lock");
                seen.extend(events.into_iter().filter_map(|e| match e {
                    Event::Result(r) => Some(r),
                    _ => None,
                }));
            }
        });
        Results {
            seen,
            task,
            _conn: conn,
        }
    }

    /// Every result so far, in order of arrival.
    pub fn results(&self) -> Vec<ExecResult> {
        self.seen.lock().expect("witness lock").clone()
    }

    /// How many results so far `keep` keeps (without copying them).
    pub fn count(&self, keep: impl Fn(&ExecResult) -> bool) -> usize {
        self.seen
            .lock()
            .expect("witness lock")
            .iter()
            .filter(|r| keep(r))
            .count()
    }
}

impl Drop for Results {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A fresh exclusive queue bound to `exchange` with `keys`, consumed
/// without acks.
async fn bind_queue(
    config: &Config,
    exchange: &str,
    keys: &[&str],
) -> (lapin::Connection, lapin::Consumer) {
    let conn = amqp::connect(&config.amqp.url, "rondo-test-witness")
        .await
        .expect("the witness connects");
    let ch = conn.create_channel().await.expect("witness channel");
    amqp::declare_topology(&ch, &config.names())
        .await
        .expect("topology");
    let options = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    let queue = ch
        .queue_declare("".into(), options, FieldTable::default())
        .await
        .expect("witness queue");
    for key in keys {
        ch.queue_bind(
            queue.name().clone(),
            exchange.into(),
            (*key).into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("witness binding");
    }
    let consume = BasicConsumeOptions {
        no_ack: true,
        exclusive: true,
        ..BasicConsumeOptions::default()
    };
    let consumer = ch
        .basic_consume(
            queue.name().clone(),
            "witness".into(),
            consume,
            FieldTable::default(),
        )
        .await
        .expect("witness consumer");
    (conn, consumer)
}
