//! The persistence worker's harness: a test's own database and namespace,
//! a running worker, publishing events and reading queues. The event
//! fixtures are `rondo_history::testing::story`.
//!
//! Why not `rondo-testkit`: it is built on the scheduler and the executor
//! (it runs them), so `cargo test -p rondo-persist-worker` would build both
//! first, and a worker test needs no node. This harness uses the pieces
//! testkit is itself built on: `rondo_core::testkit`'s namespace, cleanup
//! and `eventually`, and `rondo_history::testing`'s databases.

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;

use lapin::options::{BasicPublishOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection};
use rondo_core::testkit::{self, Namespace, Signal};
use rondo_core::{Config, Event, amqp};
use rondo_history::testing::TestDatabase;
use rondo_persist_worker::Worker;
use sqlx::MySqlPool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use rondo_history::testing::story::*;

/// How long a test waits for something that should happen in well under
/// it: the one patience of every test (`rondo_core::testkit`).
pub use rondo_core::testkit::PATIENCE;

/// A test's own database and AMQP namespace, removed when dropped (also
/// when the test panics).
pub struct Harness {
    pub config: Config,
    pub pool: MySqlPool,
    amqp: Connection,
    channel: Channel,
    _namespace: Namespace,
    _db: TestDatabase,
}

/// A fresh migrated database; dropped with the guard.
pub async fn fresh_database() -> (MySqlPool, TestDatabase) {
    let db = TestDatabase::migrated(&testkit::config("persist").mysql.url).await;
    (db.pool.clone(), db)
}

impl Harness {
    /// A fresh database, namespace and declared topology (so events
    /// published before the worker starts wait in the persist queue).
    pub async fn start() -> Harness {
        rondo_core::telemetry::init(&rondo_core::config::LogConfig {
            format: "plain".into(),
            filter: "warn".into(),
        });
        let mut config = testkit::config("persist");
        config.persist.linger_ms = 20;
        config.persist.shutdown_grace_ms = 3000;
        let db = TestDatabase::migrated(&config.mysql.url).await;
        config.mysql.url = db.url.clone();
        let pool = db.pool.clone();
        let namespace = Namespace::with_config(config.clone());
        let amqp = amqp::connect(&config.amqp.url, "persist-test")
            .await
            .unwrap();
        let channel = amqp::confirm_channel(&amqp).await.unwrap();
        amqp::declare_topology(&channel, &config.names())
            .await
            .unwrap();
        Harness {
            config,
            pool,
            amqp,
            channel,
            _namespace: namespace,
            _db: db,
        }
    }

    /// Starts a worker with this harness's config on `pool`.
    pub fn spawn_worker(&self, config: Config, pool: MySqlPool) -> RunningWorker {
        let shutdown = CancellationToken::new();
        let history = rondo_history::History::from_pool(pool);
        let handle =
            tokio::spawn(Worker::new(config, history, Default::default()).run(shutdown.clone()));
        RunningWorker { shutdown, handle }
    }

    pub fn worker(&self) -> RunningWorker {
        self.spawn_worker(self.config.clone(), self.pool.clone())
    }

    /// Publishes each event as its own message (confirms pipelined).
    pub async fn publish(&self, events: &[Event]) {
        let bodies: Vec<(String, Vec<u8>)> = events
            .iter()
            .map(|e| {
                (
                    e.routing_key().to_owned(),
                    serde_json::to_vec(&[e]).unwrap(),
                )
            })
            .collect();
        self.publish_bodies(&bodies).await;
    }

    /// Publishes raw bodies with their routing keys, confirms pipelined,
    /// signed as a scheduler node's (`user_id`: the worker stores group,
    /// job, trigger, alarm and audit events from its own user by default).
    pub async fn publish_bodies(&self, bodies: &[(String, Vec<u8>)]) {
        let names = self.config.names();
        let exchange = names.events_exchange();
        let user = names.publisher().unwrap_or_default();
        let mut confirms = Vec::with_capacity(bodies.len());
        for (key, body) in bodies {
            let props = BasicProperties::default()
                .with_delivery_mode(amqp::PERSISTENT)
                .with_user_id(user.into());
            let confirm = self
                .channel
                .basic_publish(
                    exchange.as_str().into(),
                    key.as_str().into(),
                    BasicPublishOptions::default(),
                    body,
                    props,
                )
                .await
                .unwrap();
            confirms.push(confirm);
        }
        for confirm in confirms {
            assert!(confirm.await.unwrap().is_ack());
        }
    }

    /// (ready messages, consumers) of a queue.
    pub async fn queue_counts(&self, queue: &str) -> (u32, u32) {
        let ch = self.amqp.create_channel().await.unwrap();
        let opts = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let q = ch
            .queue_declare(queue.into(), opts, FieldTable::default())
            .await
            .unwrap();
        let _ = ch.close(200, "ok".into()).await;
        (q.message_count(), q.consumer_count())
    }

    /// Waits until the dead queue holds `n` messages and takes them.
    pub async fn wait_dead(&self, n: usize) -> Vec<(Vec<u8>, String)> {
        let queue = self.config.names().dead_queue();
        eventually("dead-lettered messages", || async {
            self.queue_counts(&queue).await.0 as usize >= n
        })
        .await;
        testkit::take_dead(&self.config).await
    }

    /// Closes the connections, then the guards drop the database and the
    /// namespace.
    pub async fn cleanup(self) {
        self.pool.close().await;
        let _ = self.amqp.close(200, "bye".into()).await;
    }
}

pub struct RunningWorker {
    shutdown: CancellationToken,
    handle: JoinHandle<anyhow::Result<()>>,
}

impl RunningWorker {
    /// Cancels and waits for the drain.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(PATIENCE, self.handle)
            .await
            .expect("worker stops within the patience")
            .expect("worker task")
            .expect("worker result");
    }
}

/// [`testkit::eventually`] with this harness's patience.
pub async fn eventually<S: Signal, F, Fut>(what: &str, check: F) -> S::Output
where
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    testkit::eventually(what, PATIENCE, check).await
}
