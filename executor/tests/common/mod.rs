//! A harness for tests against the real RabbitMQ and Redis: an executor
//! started in-process in a fresh namespace, a queue that sees its events,
//! and cleanup.
//!
//! Why not `rondo-testkit`: it is built on the scheduler, the gateway and
//! the persistence worker (it runs them), so `cargo test -p rondo-executor`
//! would build all of them first, and an executor test needs neither
//! MySQL nor a node. This harness uses the pieces testkit is itself built
//! on: `rondo_core::testkit`'s namespace, cleanup, `eventually` and
//! `PATIENCE`.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, Consumer};
use rondo_core::amqp::{self, Publish};
use rondo_core::event::{LogLines, decode_events};
use rondo_core::{
    BlockStrategy, Config, Event, ExecResult, Names, Trigger, TriggerBatch, TriggerType, testkit,
};
use rondo_executor::{Executor, ExecutorBuilder, ExecutorError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a test waits for something that should happen in well under
/// it: the one patience of every test (`rondo_core::testkit`).
pub use rondo_core::testkit::PATIENCE;

pub struct Harness {
    pub config: Config,
    pub names: Names,
    pub executor_id: String,
    pub queue: String,
    pub conn: Connection,
    pub channel: Channel,
    events: Consumer,
    seen: VecDeque<Event>,
    shutdown: CancellationToken,
    run: Option<JoinHandle<Result<(), ExecutorError>>>,
    /// Removes the test's keys, queues and exchanges when dropped.
    _namespace: testkit::Namespace,
}

/// A config in a fresh namespace, with a unique executor id and short timings.
pub fn test_config(tag: &str) -> Config {
    let mut config = testkit::config(tag);
    let suffix = &config.namespace[config.namespace.len() - 8..];
    config.executor.id = format!("ex-{suffix}");
    config.executor.log_flush_ms = 100;
    config.executor.shutdown_grace_ms = 3000;
    config
}

impl Harness {
    /// Starts an executor with the handlers `add` registers.
    pub async fn start(tag: &str, add: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder) -> Harness {
        Harness::start_with(test_config(tag), add).await
    }

    pub async fn start_with(
        config: Config,
        add: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
    ) -> Harness {
        if std::env::var_os("RUST_LOG").is_some() {
            rondo_core::telemetry::init(&config.log);
        }
        let names = config.names();
        let executor = add(Executor::builder(config.clone()))
            .build()
            .expect("valid executor");
        let executor_id = executor.id().to_owned();
        let queue = executor.queue();
        let namespace = testkit::Namespace::with_config(config.clone());
        namespace.track_queue(queue.clone());
        let conn = amqp::connect(&config.amqp.url, "rondo-executor-test")
            .await
            .expect("broker");
        let channel = amqp::confirm_channel(&conn).await.expect("channel");
        amqp::declare_topology(&channel, &names)
            .await
            .expect("topology");
        // Declared here too, so a trigger published before the executor
        // finished starting waits in the queue.
        amqp::declare_executor_queue(&channel, &names, &config.executor.app, &executor_id)
            .await
            .expect("executor queue");
        let events = events_consumer(&channel, &names).await;
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(executor.run(shutdown.clone()));
        Harness {
            config,
            names,
            executor_id,
            queue,
            conn,
            channel,
            events,
            seen: VecDeque::new(),
            shutdown,
            run: Some(run),
            _namespace: namespace,
        }
    }

    pub fn trigger(&self, trigger_id: &str, handler: &str, params: &str) -> Trigger {
        Trigger {
            trigger_id: trigger_id.into(),
            job_id: 42,
            group: self.config.executor.app.clone(),
            executor_id: self.executor_id.clone(),
            handler: handler.into(),
            params: params.into(),
            trigger_type: TriggerType::Manual,
            fire_ms: rondo_core::clock::now_ms(),
            sent_ms: rondo_core::clock::now_ms(),
            shard_index: 0,
            shard_total: 1,
            timeout_s: 0,
            block: BlockStrategy::SerialExecution,
            retry_count: 0,
            script: None,
            secrets: Default::default(),
        }
    }

    pub async fn publish(&self, triggers: Vec<Trigger>) {
        let body = serde_json::to_vec(&TriggerBatch::new(triggers)).unwrap();
        self.publish_raw(&body).await;
    }

    /// Publishes a body to the trigger exchange for this executor.
    pub async fn publish_raw(&self, body: &[u8]) {
        let exchange = self.names.trigger_exchange();
        let key = self
            .names
            .trigger_key(&self.config.executor.app, &self.executor_id);
        let publish = Publish {
            exchange: &exchange,
            routing_key: &key,
            mandatory: true,
            ..Publish::default()
        };
        let routed = amqp::publish_confirmed(&self.channel, publish, body)
            .await
            .expect("publish");
        assert!(routed, "the executor queue should take the trigger");
    }

    /// The next event on the executor's events, if one comes within `wait`.
    pub async fn next_event(&mut self, wait: Duration) -> Option<Event> {
        if let Some(event) = self.seen.pop_front() {
            return Some(event);
        }
        let delivery = tokio::time::timeout(wait, self.events.next())
            .await
            .ok()??
            .expect("delivery");
        delivery.ack(BasicAckOptions::default()).await.expect("ack");
        self.seen
            .extend(decode_events(&delivery.data).expect("events decode"));
        self.seen.pop_front()
    }

    /// Waits for the first event `wanted` accepts, leaving every other
    /// event for later calls.
    pub async fn wait_for(&mut self, what: &str, wanted: impl Fn(&Event) -> bool) -> Event {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut skipped = Vec::new();
        let found = loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(event) = self.next_event(left).await else {
                panic!("no {what} within {PATIENCE:?}");
            };
            if wanted(&event) {
                break event;
            }
            skipped.push(event);
        };
        for event in skipped.into_iter().rev() {
            self.seen.push_front(event);
        }
        found
    }

    /// Waits until `trigger_id` logged its first line (its handler runs).
    pub async fn started(&mut self, trigger_id: &str) {
        let what = format!("log line of {trigger_id}");
        self.wait_for(
            &what,
            |e| matches!(e, Event::Log(l) if l.trigger_id == trigger_id),
        )
        .await;
    }

    /// The result of `trigger_id`, leaving other events for later calls.
    pub async fn result(&mut self, trigger_id: &str) -> ExecResult {
        let what = format!("result of {trigger_id}");
        match self
            .wait_for(
                &what,
                |e| matches!(e, Event::Result(r) if r.trigger_id == trigger_id),
            )
            .await
        {
            Event::Result(r) => r,
            _ => unreachable!(),
        }
    }

    /// Sends a kill the way the scheduler does; false if no executor of
    /// that id listens.
    pub async fn kill(&self, trigger_id: &str, job_id: u64) -> bool {
        rondo_executor::control::send_kill(
            &self.channel,
            &self.names,
            &self.executor_id,
            &self.config.executor.app,
            trigger_id,
            job_id,
        )
        .await
        .expect("kill published")
    }

    /// Publishes a body to the control exchange for this executor.
    pub async fn publish_control_raw(&self, body: &[u8]) {
        let exchange = self.names.control_exchange();
        let publish = Publish {
            exchange: &exchange,
            routing_key: &self.executor_id,
            mandatory: true,
            ..Publish::default()
        };
        let routed = amqp::publish_confirmed(&self.channel, publish, body)
            .await
            .expect("publish");
        assert!(routed, "the control queue should take the message");
    }

    /// Waits until the executor's registry hash exists.
    pub async fn registered(&self) {
        let hash = self.names.executor(&self.executor_id);
        let redis = self.redis().await;
        testkit::eventually("the executor to register", PATIENCE, || {
            let (mut redis, hash) = (redis.clone(), hash.clone());
            async move {
                let exists: bool = redis::cmd("EXISTS")
                    .arg(&hash)
                    .query_async(&mut redis)
                    .await
                    .unwrap();
                exists
            }
        })
        .await;
    }

    /// Waits for the result of `trigger_id`; returns it and the log lines
    /// of that trigger seen before it.
    pub async fn result_for(&mut self, trigger_id: &str) -> (ExecResult, Vec<LogLines>) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut logs = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(event) = self.next_event(left).await else {
                panic!("no result for {trigger_id} within {PATIENCE:?}");
            };
            match event {
                Event::Result(r) if r.trigger_id == trigger_id => return (r, logs),
                Event::Log(l) if l.trigger_id == trigger_id => logs.push(l),
                _ => {}
            }
        }
    }

    /// The next `n` results, whichever triggers they are for.
    pub async fn results_until(&mut self, n: usize) -> Vec<ExecResult> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut results = Vec::new();
        while results.len() < n {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_event(left).await {
                Some(Event::Result(r)) => results.push(r),
                Some(_) => {}
                None => panic!("only {} of {n} results within {PATIENCE:?}", results.len()),
            }
        }
        results
    }

    /// Every result that arrives within `wait`.
    pub async fn results_within(&mut self, wait: Duration) -> Vec<ExecResult> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut results = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_event(left).await {
                Some(Event::Result(r)) => results.push(r),
                Some(_) => {}
                None => return results,
            }
        }
    }

    /// Messages ready in a queue (not counting unacked ones).
    pub async fn ready_messages(&self, queue: &str) -> u32 {
        let depth = testkit::queue_depth(&self.config, queue).await;
        depth.expect("the queue exists").0
    }

    /// Polls the dead queue for a message.
    pub async fn next_dead(&self) -> lapin::message::BasicGetMessage {
        let dead = self.names.dead_queue();
        testkit::eventually("a message in the dead queue", PATIENCE, || async {
            let get = BasicGetOptions { no_ack: true };
            let got = self.channel.basic_get(dead.as_str().into(), get).await;
            got.expect("basic_get")
        })
        .await
    }

    pub async fn redis(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.config.redis.url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .expect("redis")
    }

    /// Cancels the executor without waiting for its drain.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Cancels the executor and waits for its drain.
    pub async fn shutdown(&mut self) {
        self.shutdown.cancel();
        if let Some(run) = self.run.take() {
            let stopped = tokio::time::timeout(Duration::from_secs(20), run).await;
            stopped
                .expect("the executor stops in time")
                .expect("no panic")
                .expect("run ok");
        }
    }

    /// Stops the executor and closes the test's connection; the
    /// namespace guard removes what the test left behind when dropped.
    pub async fn stop(mut self) {
        self.shutdown().await;
        let _ = self.conn.close(200, "bye".into()).await;
    }
}

async fn events_consumer(channel: &Channel, names: &Names) -> Consumer {
    let options = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    let q = channel
        .queue_declare("".into(), options, FieldTable::default())
        .await
        .expect("events queue");
    for key in ["result.*", "log.*"] {
        channel
            .queue_bind(
                q.name().clone(),
                names.events_exchange().as_str().into(),
                key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind");
    }
    channel
        .basic_consume(
            q.name().clone(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume")
}
