//! The result monitor on the real services (Redis, RabbitMQ), fed batched
//! result messages as executors publish them: one AMQP message holding a JSON
//! array of many result events of one routing key.
//!
//! The monitor runs in-process; the test records the triggers as in flight
//! (as the dispatcher does), publishes the results, and checks what the
//! monitor left in Redis: no in-flight entry, a handled mark per trigger,
//! one retry per failed trigger however often its result came, and an empty
//! monitor queue (every message acked).
//!
//! `MONITOR_BATCH_RESULTS` (default 4000), `MONITOR_BATCH_SIZE` (default
//! 500 events a message) and `MONITOR_BATCH_JOBS` (default 50 jobs the
//! results spread over) size the success run, which prints (on stderr) the
//! rate the monitor handled them at; `MONITOR_BATCH_PREFETCH` overrides
//! `monitor.prefetch`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use redis::AsyncCommands;
use rondo_core::event::TriggerRecord;
use rondo_core::trigger::code;
use rondo_core::{
    BlockStrategy, Config, Event, ExecResult, Job, JobSpec, Names, Trigger, TriggerType, amqp,
    clock, testkit,
};
use rondo_dispatcher::Dispatcher;
use rondo_scheduler::monitor::Monitor;
use rondo_scheduler::store::Store;
use rondo_scheduler::store::triggers::TriggerStore;
use tokio_util::sync::CancellationToken;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time this process used so far (user + system), from /proc.
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(ticks * 10.0)
}

fn job(id: u64, retries: u32) -> Job {
    let spec = JobSpec {
        group: Some("batch".into()),
        handler: Some("ok".into()),
        retries: Some(retries),
        ..JobSpec::default()
    };
    spec.validate(id, clock::now_ms(), None)
        .expect("a valid job")
}

fn trigger(job_id: u64, fire_ms: i64) -> Trigger {
    Trigger {
        trigger_id: format!("{job_id}-{fire_ms}-0"),
        job_id,
        group: "batch".into(),
        executor_id: "batch-exec".into(),
        handler: "ok".into(),
        params: String::new(),
        trigger_type: TriggerType::Cron,
        fire_ms,
        sent_ms: clock::now_ms(),
        shard_index: 0,
        shard_total: 1,
        timeout_s: 0,
        block: BlockStrategy::SerialExecution,
        retry_count: 0,
        script: None,
        secrets: Default::default(),
    }
}

fn result(t: &Trigger, code: i32) -> Event {
    Event::Result(ExecResult {
        trigger_id: t.trigger_id.clone(),
        job_id: t.job_id,
        executor_id: t.executor_id.clone(),
        fire_ms: t.fire_ms,
        start_ms: t.fire_ms,
        end_ms: t.fire_ms + 1,
        code,
        msg: if code == code::SUCCESS {
            String::new()
        } else {
            "boom".into()
        },
        retryable: true,
    })
}

struct Fixture {
    config: Config,
    names: Names,
    store: Store,
    pool: rondo_core::redis::Pool,
    conn: lapin::Connection,
    ch: lapin::Channel,
    /// Removes the test's keys, queues and exchanges when dropped.
    _namespace: testkit::Namespace,
}

impl Fixture {
    async fn new(tag: &str) -> Fixture {
        Fixture::configured(tag, |_| {}).await
    }

    /// A fixture whose config `adjust` changed first.
    async fn configured(tag: &str, adjust: impl FnOnce(&mut Config)) -> Fixture {
        let mut config = testkit::config(tag);
        adjust(&mut config);
        if let Some(prefetch) = std::env::var("MONITOR_BATCH_PREFETCH")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            config.monitor.prefetch = prefetch;
        }
        let names = config.names();
        let namespace = testkit::Namespace::with_config(config.clone());
        let pool = rondo_core::redis::pool(&config.redis).expect("redis pool");
        let store = Store::new(pool.clone(), names.clone());
        let conn = amqp::connect(&config.amqp.url, "monitor-batch-test")
            .await
            .expect("rabbitmq");
        let ch = amqp::confirm_channel(&conn).await.expect("channel");
        // The monitor queue exists before anything is published to it.
        amqp::declare_topology(&ch, &names).await.expect("topology");
        Fixture {
            _namespace: namespace,
            config,
            names,
            store,
            pool,
            conn,
            ch,
        }
    }

    async fn save(&self, job: &Job) {
        self.store
            .api()
            .save_job(job, None, None)
            .await
            .expect("job saved");
    }

    /// Records triggers as in flight, as the dispatcher does after a confirm.
    async fn record_inflight(&self, triggers: &[Trigger]) {
        let mut conn = self.pool.get().await.unwrap();
        for chunk in triggers.chunks(1000) {
            let mut pipe = redis::pipe();
            for t in chunk {
                let p = self.names.partition_of(t.job_id);
                pipe.zadd(self.names.inflight(p), &t.trigger_id, t.sent_ms)
                    .ignore()
                    .hset(
                        self.names.inflight_data(p),
                        &t.trigger_id,
                        serde_json::to_string(t).unwrap(),
                    )
                    .ignore();
            }
            let () = pipe.query_async(&mut conn).await.unwrap();
        }
    }

    /// Publishes the events as one message (all of one routing key).
    async fn publish(&self, events: &[Event]) {
        amqp::publish_events(&self.ch, &self.names, events)
            .await
            .expect("published");
    }

    async fn inflight_left(&self) -> u64 {
        let mut conn = self.pool.get().await.unwrap();
        let mut pipe = redis::pipe();
        for p in 0..self.names.partitions() {
            pipe.zcard(self.names.inflight(p))
                .hlen(self.names.inflight_data(p));
        }
        let counts: Vec<u64> = pipe.query_async(&mut conn).await.unwrap();
        counts.iter().sum()
    }

    /// How many of `triggers` are marked handled, in the set of their
    /// partition and fire minute.
    async fn handled(&self, triggers: &[&Trigger]) -> usize {
        let mut conn = self.pool.get().await.unwrap();
        let mut pipe = redis::pipe();
        for t in triggers {
            pipe.sismember(
                self.names
                    .handled(self.names.partition_of(t.job_id), t.fire_ms),
                &t.trigger_id,
            );
        }
        let marks: Vec<bool> = pipe.query_async(&mut conn).await.unwrap();
        marks.iter().filter(|m| **m).count()
    }

    async fn retries(&self) -> Vec<String> {
        let mut conn = self.pool.get().await.unwrap();
        let mut all = Vec::new();
        for p in 0..self.names.partitions() {
            let members: Vec<String> = conn.zrange(self.names.retry(p), 0, -1).await.unwrap();
            all.extend(members);
        }
        all
    }

    /// Messages left in the monitor queue (ready ones; unacked ones return
    /// to ready once the monitor's connection is closed).
    async fn monitor_queue_depth(&self) -> u32 {
        let opts = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let queue = self.names.monitor_queue();
        self.ch
            .queue_declare(queue.as_str().into(), opts, FieldTable::default())
            .await
            .expect("monitor queue")
            .message_count()
    }

    /// Alarm events published so far, by trigger id (drains the persistence
    /// queue, which every event reaches).
    async fn alarms(&self) -> Vec<String> {
        let queue = self.names.persist_queue();
        let mut alarms = Vec::new();
        while let Some(msg) = self
            .ch
            .basic_get(
                queue.as_str().into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .expect("basic.get")
        {
            for event in rondo_core::event::decode_events(&msg.delivery.data).unwrap() {
                if let Event::Alarm(a) = event {
                    alarms.push(a.trigger_id);
                }
            }
        }
        alarms.sort();
        alarms
    }

    /// Starts a monitor in-process, as a scheduler node does.
    async fn start_monitor(&self, shutdown: &CancellationToken) -> tokio::task::JoinHandle<()> {
        let dispatcher = Dispatcher::connect(&self.config, self.pool.clone())
            .await
            .expect("dispatcher");
        let triggers = TriggerStore::new(
            self.pool.clone(),
            self.config.names(),
            self.config.monitor.handled_ttl_s,
        );
        let monitor = Monitor::new(
            &self.config,
            triggers,
            self.store.clone(),
            Arc::new(dispatcher),
        );
        tokio::spawn(monitor.run(shutdown.clone()))
    }

    async fn wait_inflight_gone(&self, what: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = self.inflight_left().await;
            if left == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {left} in-flight entries left"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Closes the test's connection; the namespace guard removes the rest.
    async fn cleanup(self) {
        let _ = self.conn.close(200, "bye".into()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_batched_successes_are_all_handled() {
    let total = env_usize("MONITOR_BATCH_RESULTS", 4000);
    let per_message = env_usize("MONITOR_BATCH_SIZE", 500).max(1);
    let f = Fixture::new("monbatch").await;
    let job_count = env_usize("MONITOR_BATCH_JOBS", 50).max(1) as u64;
    let jobs: Vec<Job> = (1..=job_count).map(|id| job(id, 0)).collect();
    for j in &jobs {
        f.save(j).await;
    }
    let base = clock::now_ms();
    let triggers: Vec<Trigger> = (0..total)
        .map(|i| trigger(jobs[i % jobs.len()].id, base + i as i64))
        .collect();
    f.record_inflight(&triggers).await;
    assert_eq!(f.inflight_left().await, 2 * total as u64);
    let messages: Vec<Vec<Event>> = triggers
        .chunks(per_message)
        .map(|c| c.iter().map(|t| result(t, code::SUCCESS)).collect())
        .collect();
    for m in &messages {
        f.publish(m).await;
    }
    // The last message again: a redelivery, handled twice, changes nothing.
    f.publish(messages.last().unwrap()).await;

    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let cpu_before = cpu_ms();
    let monitor = f.start_monitor(&shutdown).await;
    f.wait_inflight_gone("every result handled", Duration::from_secs(120))
        .await;
    let elapsed = started.elapsed();
    let cpu = cpu_before.zip(cpu_ms()).map(|(a, b)| b - a);
    eprintln!(
        "monitor handled {total} success results ({} messages of {per_message}) in {:.1} ms: {:.0} results/s, {} ms CPU (this process)",
        messages.len(),
        elapsed.as_secs_f64() * 1000.0,
        total as f64 / elapsed.as_secs_f64(),
        cpu.map_or_else(|| "?".into(), |ms| format!("{ms:.0}")),
    );
    let all: Vec<&Trigger> = triggers.iter().collect();
    assert_eq!(f.handled(&all).await, total, "a handled mark per trigger");
    // Every message acked: once the monitor is gone, nothing is left (an
    // unacked message would be ready again).
    tokio::time::sleep(Duration::from_millis(300)).await;
    shutdown.cancel();
    monitor.await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(f.monitor_queue_depth().await, 0, "every message acked");
    assert!(f.retries().await.is_empty(), "a success is not retried");
    f.cleanup().await;
}

/// A handled mark lives `monitor.handled_ttl_s`, not a fixed week: an
/// operator at a high rate sizes what every fire keeps in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handled_marks_expire_after_the_configured_time() {
    const TTL_S: u64 = 7_200;
    let f = Fixture::configured("monttl", |c| c.monitor.handled_ttl_s = TTL_S).await;
    let j = job(6, 0);
    f.save(&j).await;
    let t = trigger(j.id, clock::now_ms());
    f.record_inflight(std::slice::from_ref(&t)).await;
    f.publish(&[result(&t, code::SUCCESS)]).await;
    let shutdown = CancellationToken::new();
    let monitor = f.start_monitor(&shutdown).await;
    f.wait_inflight_gone("the result handled", Duration::from_secs(30))
        .await;
    assert_eq!(f.handled(&[&t]).await, 1, "marked handled");
    let key = f.names.handled(f.names.partition_of(t.job_id), t.fire_ms);
    let ttl: i64 = f.pool.get().await.unwrap().ttl(&key).await.unwrap();
    let ttl = u64::try_from(ttl).expect("the set has an expiry");
    assert!(
        (TTL_S - 60..=TTL_S).contains(&ttl),
        "{key} expires in {ttl} s, configured {TTL_S} s"
    );
    shutdown.cancel();
    monitor.await.unwrap();
    f.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_in_and_across_messages_are_reacted_to_once() {
    let f = Fixture::new("mondup").await;
    let ok_job = job(1, 0);
    let failing = job(2, 3);
    let gone = job(3, 3); // results for it arrive after it was deleted
    f.save(&ok_job).await;
    f.save(&failing).await;
    let base = clock::now_ms();
    let ok: Vec<Trigger> = (0..200).map(|i| trigger(ok_job.id, base + i)).collect();
    let failed: Vec<Trigger> = (0..3).map(|i| trigger(failing.id, base + i)).collect();
    let orphan = trigger(gone.id, base);
    let never_reached = trigger(failing.id, base + 100);
    let mut inflight = ok.clone();
    inflight.extend(failed.iter().cloned());
    inflight.push(orphan.clone());
    f.record_inflight(&inflight).await;

    // One message of successes, each twice.
    let mut successes: Vec<Event> = ok.iter().map(|t| result(t, code::SUCCESS)).collect();
    successes.extend(ok.iter().map(|t| result(t, code::SUCCESS)));
    successes.push(result(&orphan, code::SUCCESS));
    f.publish(&successes).await;
    // Failures: twice within a message, and the same message again.
    let mut failures: Vec<Event> = failed.iter().map(|t| result(t, code::FAIL)).collect();
    failures.extend(failed.iter().map(|t| result(t, code::FAIL)));
    f.publish(&failures).await;
    f.publish(&failures).await;
    // A trigger that never reached an executor, twice.
    let record = Event::Triggered(TriggerRecord {
        trigger: never_reached.clone(),
        code: code::FAIL,
        msg: "no live executor".into(),
    });
    f.publish(&[record.clone(), record]).await;

    let shutdown = CancellationToken::new();
    let monitor = f.start_monitor(&shutdown).await;
    f.wait_inflight_gone("every result handled", Duration::from_secs(30))
        .await;
    let mut ids: Vec<&Trigger> = inflight.iter().collect();
    ids.push(&never_reached);
    let deadline = Instant::now() + Duration::from_secs(30);
    while f.handled(&ids).await < ids.len() {
        assert!(Instant::now() < deadline, "every trigger marked handled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The failures once more, after they were handled: a group of their
    // own, where only their handled marks tell them from new endings. A
    // fresh failure published after them is handled after them (one
    // consumer, in order): its mark is the signal that they were seen.
    f.publish(&failures).await;
    let sentinel = trigger(failing.id, base + 200);
    f.record_inflight(std::slice::from_ref(&sentinel)).await;
    f.publish(&[result(&sentinel, code::FAIL)]).await;
    while f.handled(&[&sentinel]).await < 1 {
        assert!(
            Instant::now() < deadline,
            "the later failure marked handled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut retried: Vec<String> = f
        .retries()
        .await
        .iter()
        .map(|m| {
            let v: serde_json::Value = serde_json::from_str(m).unwrap();
            v["trigger_id"].as_str().unwrap().to_owned()
        })
        .collect();
    retried.sort();
    let mut want: Vec<String> = failed
        .iter()
        .chain([&never_reached, &sentinel])
        .map(|t| format!("{}-retry1", t.trigger_id))
        .collect();
    want.sort();
    assert_eq!(retried, want, "one retry per failed trigger");
    let mut alarmed: Vec<String> = failed
        .iter()
        .chain([&never_reached, &sentinel])
        .map(|t| t.trigger_id.clone())
        .collect();
    alarmed.sort();
    assert_eq!(f.alarms().await, alarmed, "one alarm per failed trigger");
    shutdown.cancel();
    monitor.await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(f.monitor_queue_depth().await, 0, "every message acked");
    f.cleanup().await;
}

/// A result can overtake the dispatcher's in-flight record: the monitor
/// handles the ending, then the record is written and goes stale. The
/// leader's lost-trigger scan finds the trigger's handled mark (in the set
/// of its partition and fire minute) and only forgets the record; a stale
/// record of a trigger nobody handled, whose executor is gone, is lost. A
/// mark an earlier build set (a key per trigger) still counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_record_of_a_handled_trigger_is_forgotten_not_lost() {
    use rondo_scheduler::leader::reaper::Reaper;
    use rondo_scheduler::store::triggers::HandledId;

    let f = Fixture::new("monreap").await;
    let j = job(4, 0);
    f.save(&j).await;
    // Sent an hour ago (the scan's age), fired two hours before that.
    let old = clock::now_ms() - 3_600_000;
    let mut handled = trigger(j.id, old - 2 * 3_600_000);
    handled.sent_ms = old;
    let mut unanswered = trigger(j.id, old - 2 * 3_600_000 + 1);
    unanswered.sent_ms = old;
    f.record_inflight(&[handled.clone(), unanswered.clone()])
        .await;
    let triggers = TriggerStore::new(
        f.pool.clone(),
        f.names.clone(),
        f.config.monitor.handled_ttl_s,
    );
    triggers
        .mark_handled(HandledId {
            job_id: handled.job_id,
            fire_ms: handled.fire_ms,
            trigger_id: &handled.trigger_id,
        })
        .await
        .unwrap();
    assert_eq!(f.handled(&[&handled, &unanswered]).await, 1);

    let term = 1;
    for p in 0..f.names.partitions() {
        f.store.leader().raise_term(p, term).await.unwrap();
    }
    let dispatcher = Dispatcher::connect(&f.config, f.pool.clone())
        .await
        .expect("dispatcher");
    let reaper = Reaper::new(&f.config, triggers, f.store.clone(), Arc::new(dispatcher));
    let lost = reaper.reap_lost(term).await.unwrap();
    assert_eq!(lost, 1, "only the unanswered trigger is lost");
    // None is listed any more; the lost one's record stays for the
    // monitor, which reads it when the lost result comes (retry count,
    // shard, params), and the handled ones' are gone.
    let p = f.names.partition_of(j.id);
    let mut conn = f.pool.get().await.unwrap();
    let listed: usize = conn.zcard(f.names.inflight(p)).await.unwrap();
    assert_eq!(listed, 0, "all unlisted");
    let kept: Vec<String> = conn.hkeys(f.names.inflight_data(p)).await.unwrap();
    assert_eq!(kept, vec![unanswered.trigger_id.clone()]);
    f.cleanup().await;
}
