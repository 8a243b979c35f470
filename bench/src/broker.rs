//! Scenario "broker": the ceiling RabbitMQ sets on firing, measured with
//! raw publishes (`rondo_core::amqp::publish_confirmed`: persistent, to a
//! durable queue, mandatory, publisher confirms) of messages exactly like
//! the ones the dispatcher sends, on one channel as a node uses, with no
//! rondo logic around them.
//!
//! Two measurements, each on a fresh queue named after the sandbox's
//! namespace (deleted afterwards), each publishing for a fixed time with
//! `in_flight` publishes awaiting their confirm at once:
//!
//! * **single**: one trigger per message (a `TriggerBatch` of one), the
//!   "one confirmed message per fire" ceiling. The throughput and failover
//!   scenarios measure this one again in their own run (`ceiling_msgs_per_s`).
//! * **batched**: `K` triggers per message (`--triggers-per-message`), as a
//!   dispatcher that groups the fires of one instant and executor would.
//!
//! Nobody consumes the queue while it fills: this is the publish side only.
//! A measurement stops after `seconds` or 1 GiB of payload, whichever
//! comes first (the broker keeps it all until the queue is deleted).

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use futures_util::{StreamExt as _, TryStreamExt as _};
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use rondo_core::amqp::{self, Publish};
use rondo_core::{BlockStrategy, Config, Trigger, TriggerBatch, TriggerType};
use serde::Serialize;

use crate::cpu::{ProcSnapshot, ProcessCpu, Source};
use crate::machine::Machine;
use crate::options::Options;
use crate::output::Report;
use crate::sandbox::with_sandbox;

/// The most payload one measurement publishes: the queue is not consumed,
/// so the broker holds all of it until the queue is deleted.
const MAX_BYTES: usize = 1 << 30;

/// The params of every job the bench creates (and of the sample trigger).
pub(crate) const JOB_PARAMS: &str =
    r#"{"region":"eu-west-1","batchSize":500,"dryRun":false,"since":"PT1H"}"#;

#[derive(Debug, Clone)]
pub struct Params {
    pub seconds: f64,
    pub in_flight: usize,
    pub triggers_per_message: usize,
    pub smoke: bool,
}

impl Params {
    pub fn new(options: &Options) -> Params {
        Params {
            seconds: options.broker_seconds(),
            in_flight: options.in_flight.max(1),
            triggers_per_message: options.triggers_per_message.max(1),
            smoke: options.smoke,
        }
    }
}

/// One timed publishing run.
#[derive(Debug, Clone, Serialize)]
pub struct Rate {
    pub messages: u64,
    pub seconds: f64,
    pub msgs_per_s: f64,
    pub triggers_per_s: f64,
    pub message_bytes: usize,
    /// Cores used meanwhile: this process (the publisher), RabbitMQ, all.
    pub cpu: ProcessCpu,
}

#[derive(Debug, Clone, Serialize)]
pub struct BrokerReport {
    pub scenario: &'static str,
    pub started_at: DateTime<Utc>,
    pub smoke: bool,
    pub namespace: String,
    pub in_flight: usize,
    pub triggers_per_message: usize,
    /// One trigger per message: the ceiling of one confirmed message per fire.
    pub ceiling_msgs_per_s: f64,
    pub single: Rate,
    pub batched: Rate,
    /// batched triggers/s ÷ single messages/s: what batching buys at most.
    pub batching_gain: f64,
    pub machine: Machine,
}

pub async fn run(config: &Config, params: &Params) -> anyhow::Result<BrokerReport> {
    let started_at = Utc::now();
    let seconds = params.seconds;
    let (in_flight, k) = (params.in_flight, params.triggers_per_message);
    let (machine, single, batched, namespace) =
        with_sandbox(config, "bench_broker", |sandbox| async move {
            let machine = Machine::describe(&sandbox.pool).await;
            let queue = queue_name(&sandbox.config);
            let result = async {
                tracing::info!(seconds, in_flight, "broker: one trigger per message");
                let single = publish_for(&sandbox.config, &queue, 1, seconds, in_flight).await?;
                tracing::info!(seconds, in_flight, k, "broker: {k} triggers per message");
                let batched = publish_for(&sandbox.config, &queue, k, seconds, in_flight).await?;
                Ok((machine, single, batched, sandbox.config.namespace.clone()))
            }
            .await;
            (sandbox, vec![queue], result)
        })
        .await?;
    Ok(BrokerReport {
        scenario: "broker",
        started_at,
        smoke: params.smoke,
        namespace,
        in_flight,
        triggers_per_message: k,
        ceiling_msgs_per_s: single.msgs_per_s,
        batching_gain: batched.triggers_per_s / single.msgs_per_s.max(1e-9),
        single,
        batched,
        machine,
    })
}

/// The single measurement alone, in its own sandbox: the ceiling the
/// throughput and failover scenarios compare with.
pub(crate) async fn ceiling(
    config: &Config,
    seconds: f64,
    in_flight: usize,
) -> anyhow::Result<Rate> {
    with_sandbox(config, "bench_ceiling", |sandbox| async move {
        let queue = queue_name(&sandbox.config);
        let result = publish_for(&sandbox.config, &queue, 1, seconds, in_flight).await;
        (sandbox, vec![queue], result)
    })
    .await
}

fn queue_name(config: &Config) -> String {
    format!("{}.bench.broker", config.namespace)
}

/// A trigger as the dispatcher builds it for one of the bench's jobs.
pub(crate) fn sample_trigger(job_id: u64, fire_ms: i64) -> Trigger {
    Trigger {
        trigger_id: rondo_core::trigger_id::scheduled(job_id, fire_ms, 0),
        job_id,
        group: "bench".into(),
        executor_id: "bench-e1".into(),
        handler: crate::cluster::recorder::HANDLER.into(),
        params: JOB_PARAMS.into(),
        trigger_type: TriggerType::Cron,
        fire_ms,
        sent_ms: fire_ms + 2,
        shard_index: 0,
        shard_total: 1,
        timeout_s: 0,
        block: BlockStrategy::SerialExecution,
        retry_count: 0,
        script: None,
        secrets: Default::default(),
    }
}

/// The body of a message of `k` triggers, as the dispatcher encodes it.
pub(crate) fn message(k: usize) -> anyhow::Result<Vec<u8>> {
    let now = rondo_core::clock::now_ms();
    let triggers = (0..k as u64)
        .map(|i| sample_trigger(10_000 + i, now))
        .collect();
    Ok(serde_json::to_vec(&TriggerBatch::new(triggers))?)
}

/// Declares `queue` afresh, publishes `k`-trigger messages to it for
/// `seconds` with `in_flight` confirms pending, and deletes it.
async fn publish_for(
    config: &Config,
    queue: &str,
    k: usize,
    seconds: f64,
    in_flight: usize,
) -> anyhow::Result<Rate> {
    let body = message(k)?;
    let message_id = sample_trigger(10_000, rondo_core::clock::now_ms()).trigger_id;
    let conn = amqp::connect(&config.amqp.url, "rondo-bench-broker")
        .await
        .context("connecting to rabbitmq")?;
    let channel = amqp::confirm_channel(&conn)
        .await
        .context("confirm channel")?;
    let declare = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_delete(queue.into(), QueueDeleteOptions::default())
        .await
        .context("deleting the queue")?;
    channel
        .queue_declare(
            queue.into(),
            declare,
            amqp::durable_queue_args(&config.names(), false),
        )
        .await
        .context("declaring the queue")?;
    let sources = [
        ("bench".to_owned(), Source::This),
        ("rabbitmq".to_owned(), Source::RABBITMQ),
    ];
    let before = ProcSnapshot::take(&sources);
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    // Signed as the engine's messages are (`user_id`).
    let user = config.names().publisher().map(str::to_owned);
    let publish = |_| {
        amqp::publish_confirmed(
            &channel,
            Publish {
                exchange: "",
                routing_key: queue,
                mandatory: true,
                message_id: Some(&message_id),
                headers: None,
                user_id: user.as_deref(),
            },
            &body,
        )
    };
    let max_messages = MAX_BYTES / body.len().max(1);
    let messages = futures_util::stream::iter(0u64..)
        .take(max_messages)
        .take_while(|_| std::future::ready(Instant::now() < deadline))
        .map(publish)
        .buffer_unordered(in_flight)
        .map_err(anyhow::Error::from)
        .try_fold(0u64, |n, routed| async move {
            if !routed {
                bail!("the broker returned a message as unroutable");
            }
            Ok(n + 1)
        })
        .await;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = ProcSnapshot::take(&sources).since(&before);
    let _ = channel
        .queue_delete(queue.into(), QueueDeleteOptions::default())
        .await;
    let _ = conn.close(200, "measured".into()).await;
    let messages = messages.context("publishing")?;
    let msgs_per_s = messages as f64 / elapsed.max(1e-9);
    Ok(Rate {
        messages,
        seconds: elapsed,
        msgs_per_s,
        triggers_per_s: msgs_per_s * k as f64,
        message_bytes: body.len(),
        cpu,
    })
}

impl Report for BrokerReport {
    fn scenario(&self) -> &'static str {
        self.scenario
    }

    fn markdown(&self) -> String {
        let r = self;
        let k = |rate: f64| format!("{:.1} k", rate / 1000.0);
        let smoke = if r.smoke {
            " (smoke sizes: the figures mean nothing)"
        } else {
            ""
        };
        format!(
            "## broker, {started}{smoke}\n\n\
             Confirmed persistent publishes to one durable queue, one channel, \
             {in_flight} confirms in flight, {secs:.1} s each; nobody consumes. {build} build; \
             {cores} cores, {cpu_model}.\n\n\
             | measurement | message | messages/s | triggers/s |\n\
             | --- | ---: | ---: | ---: |\n\
             | **one trigger per message** (the ceiling) | {b1} B | **{m1}** | {t1} |\n\
             | {kk} triggers per message | {bk} B | {mk} | {tk} |\n\n\
             Batching gain (batched triggers/s ÷ single messages/s): {gain:.1}×.  \n\
             Cores, single: {cpu1}.  \n\
             Cores, batched: {cpuk}.\n",
            started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
            in_flight = r.in_flight,
            secs = r.single.seconds,
            build = r.machine.build,
            cores = r.machine.cores,
            cpu_model = r.machine.cpu_model,
            b1 = r.single.message_bytes,
            m1 = k(r.single.msgs_per_s),
            t1 = k(r.single.triggers_per_s),
            kk = r.triggers_per_message,
            bk = r.batched.message_bytes,
            mk = k(r.batched.msgs_per_s),
            tk = k(r.batched.triggers_per_s),
            gain = r.batching_gain,
            cpu1 = r.single.cpu.line(),
            cpuk = r.batched.cpu.line(),
        )
    }
}
