//! The executor's life against the real RabbitMQ and Redis: dedupe and
//! redelivery, dead-lettering, registration, graceful shutdown, reconnect.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Harness, PATIENCE, test_config};
use lapin::types::AMQPValue;
use redis::AsyncCommands;
use rondo_core::trigger::code;
use rondo_core::{Event, ExecResult};
use rondo_executor::{ExecutorBuilder, JobContext, JobError, builtin};

/// A handler that counts its runs and takes `params` ms.
fn counting(runs: &Arc<AtomicUsize>) -> impl Fn(ExecutorBuilder) -> ExecutorBuilder + use<> {
    let runs = runs.clone();
    move |builder: ExecutorBuilder| {
        let runs = runs.clone();
        builtin::register(builder).handler("count", move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                ctx.log("counted");
                let ms = ctx.params().parse().unwrap_or(0);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(()),
                    () = ctx.cancelled() => Err(JobError::fail("cancelled")),
                }
            }
        })
    }
}

fn reason(message: &lapin::message::BasicGetMessage) -> String {
    let headers = message
        .delivery
        .properties
        .headers()
        .clone()
        .unwrap_or_default();
    match headers.inner().get("x-rondo-reason") {
        Some(AMQPValue::LongString(s)) => s.to_string(),
        other => panic!("no x-rondo-reason header: {other:?}"),
    }
}

#[tokio::test]
async fn the_same_trigger_id_published_twice_runs_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("exec", counting(&runs)).await;
    let trigger = h.trigger("t-dup", "count", "300");
    h.publish(vec![trigger.clone()]).await;
    h.publish(vec![trigger.clone()]).await;
    let (result, _) = h.result_for("t-dup").await;
    assert_eq!(result.code, code::SUCCESS);
    // Once more after the result was confirmed, then a sentinel.
    h.publish(vec![trigger]).await;
    h.publish(vec![h.trigger("t-sentinel", "demo", "")]).await;
    let results = h.results_within(Duration::from_millis(1500)).await;
    let ids: Vec<&str> = results.iter().map(|r| r.trigger_id.as_str()).collect();
    assert_eq!(ids, vec!["t-sentinel"], "no second result for t-dup");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(h.ready_messages(&h.queue).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn malformed_messages_are_dead_lettered_with_a_reason() {
    let mut h = Harness::start("exec", builtin::register).await;
    h.publish_raw(b"not json at all").await;
    let dead = h.next_dead().await;
    assert!(
        reason(&dead).starts_with("malformed trigger batch"),
        "{}",
        reason(&dead)
    );
    assert_eq!(dead.delivery.data, b"not json at all");
    h.publish_raw(br#"{"v":2,"triggers":[]}"#).await;
    assert!(reason(&h.next_dead().await).contains("unsupported trigger batch version 2"));
    h.publish(vec![]).await;
    assert_eq!(reason(&h.next_dead().await), "empty trigger list");
    // Still running.
    h.publish(vec![h.trigger("t-fine", "demo", "")]).await;
    assert_eq!(h.result_for("t-fine").await.0.code, code::SUCCESS);
    h.stop().await;
}

#[tokio::test]
async fn registration_appears_in_redis_and_retires_after_shutdown() {
    let mut config = test_config("exec");
    config.executor.id = String::new(); // the default `<app>-<hostname>`
    let mut h = Harness::start_with(config, builtin::register).await;
    assert!(
        h.executor_id
            .starts_with(&format!("{}-", h.config.executor.app))
    );
    let registry = h.names.registry(&h.config.executor.app);
    let hash = h.names.executor(&h.executor_id);
    let mut redis = h.redis().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let score = loop {
        let score: Option<i64> = redis.zscore(&registry, &h.executor_id).await.unwrap();
        if let Some(score) = score {
            break score;
        }
        assert!(tokio::time::Instant::now() < deadline, "never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!((rondo_core::clock::now_ms() - score).abs() < 5000);
    let fields: std::collections::HashMap<String, String> = redis.hgetall(&hash).await.unwrap();
    assert_eq!(fields["app"], h.config.executor.app);
    assert_eq!(
        fields["handlers"], "demo,http",
        "no command handler unless enabled"
    );
    assert_eq!(fields["pid"], std::process::id().to_string());
    assert!(fields.contains_key("host") && fields.contains_key("started_ms"));
    // The heartbeat (1 s in tests) moves the score.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let later: Option<i64> = redis.zscore(&registry, &h.executor_id).await.unwrap();
    assert!(later.unwrap() > score);
    h.shutdown().await;
    // Retired (offline at once: the leader moves its queue and then drops
    // it from the registry) and left (its hash is gone).
    let retired: Option<i64> = redis.zscore(&registry, &h.executor_id).await.unwrap();
    assert_eq!(retired, Some(rondo_core::registry::RETIRED_SCORE));
    let exists: bool = redis.exists(&hash).await.unwrap();
    assert!(!exists);
    h.stop().await;
}

#[tokio::test]
async fn shutdown_lets_a_running_trigger_finish_and_acks_it() {
    let mut h = Harness::start("exec", builtin::register).await;
    h.publish(vec![h.trigger("t-drain", "demo", "800")]).await;
    // Wait until it runs (its first log line), then shut down.
    loop {
        match h.next_event(PATIENCE).await {
            Some(Event::Log(l)) if l.trigger_id == "t-drain" => break,
            Some(_) => {}
            None => panic!("the trigger never started"),
        }
    }
    h.shutdown().await;
    let (result, _) = h.result_for("t-drain").await;
    assert_eq!(result.code, code::SUCCESS);
    assert_eq!(
        h.ready_messages(&h.queue).await,
        0,
        "the delivery was acked"
    );
    h.stop().await;
}

#[tokio::test]
async fn shutdown_cancels_runs_that_outlive_the_grace() {
    let mut config = test_config("exec");
    config.executor.shutdown_grace_ms = 300;
    let mut h = Harness::start_with(config, builtin::register).await;
    h.publish(vec![h.trigger("t-long", "demo", "60000")]).await;
    loop {
        match h.next_event(PATIENCE).await {
            Some(Event::Log(l)) if l.trigger_id == "t-long" => break,
            Some(_) => {}
            None => panic!("the trigger never started"),
        }
    }
    let started = std::time::Instant::now();
    h.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let (result, _) = h.result_for("t-long").await;
    assert_eq!(
        (result.code, result.msg.as_str()),
        (code::FAIL, "demo: cancelled")
    );
    assert_eq!(h.ready_messages(&h.queue).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn a_trigger_still_waiting_for_a_handler_slot_at_shutdown_runs_after_the_restart() {
    let mut config = test_config("exec");
    // One handler at a time; both triggers come in one message.
    config.executor.prefetch = 1;
    let mut h = Harness::start_with(config.clone(), builtin::register).await;
    let first = h.trigger("t-running", "demo", "800");
    let mut second = h.trigger("t-waiting", "demo", "");
    second.job_id = 43;
    h.publish(vec![first, second]).await;
    loop {
        match h.next_event(PATIENCE).await {
            Some(Event::Log(l)) if l.trigger_id == "t-running" => break,
            Some(_) => {}
            None => panic!("the trigger never started"),
        }
    }
    // `t-waiting` is claimed and waits for the running one's slot.
    h.shutdown().await;
    assert_eq!(h.result_for("t-running").await.0.code, code::SUCCESS);
    let mut redis = h.redis().await;
    let mark: Option<String> = redis
        .get(h.names.dedupe(&h.config.executor.app, "t-waiting"))
        .await
        .unwrap();
    assert_eq!(
        mark, None,
        "the claim of a trigger that did not run is given back"
    );
    assert_eq!(h.ready_messages(&h.queue).await, 1, "the message is back");
    // The next incarnation runs it normally, and only it.
    let mut next = Harness::start_with(config, builtin::register).await;
    let (result, _) = next.result_for("t-waiting").await;
    assert_eq!(result.code, code::SUCCESS, "{result:?}");
    let extra = next.results_within(Duration::from_millis(500)).await;
    assert!(
        extra.is_empty(),
        "t-running is not answered again: {extra:?}"
    );
    assert_eq!(next.ready_messages(&next.queue).await, 0);
    drop(h);
    next.stop().await;
}

/// A stopping executor hands back at once the triggers of a message that
/// had not started (here: a SERIAL trigger waiting for its job's running
/// one), instead of holding them until the message's last run ends.
#[tokio::test]
async fn a_stopping_executor_hands_back_triggers_that_had_not_started_at_once() {
    let mut h = Harness::start("exec", builtin::register).await;
    let running = h.trigger("t-running", "demo", "3000");
    let waiting = h.trigger("t-waiting", "demo", "");
    h.publish(vec![running, waiting]).await;
    h.started("t-running").await;
    h.begin_shutdown();
    rondo_core::testkit::eventually(
        "the waiting trigger back in the queue",
        PATIENCE,
        || async { (h.ready_messages(&h.queue).await == 1).then_some(()) },
    )
    .await;
    assert!(
        h.next_event(Duration::ZERO)
            .await
            .is_none_or(|e| !matches!(e, Event::Result(_))),
        "handed back while the other trigger still runs"
    );
    h.shutdown().await;
    assert_eq!(h.result_for("t-running").await.0.code, code::SUCCESS);
    // The original message is acked; only the handed-back one is left, and
    // it holds just the trigger that did not run.
    let (ready, _) = rondo_core::testkit::queue_depth(&h.config, &h.queue)
        .await
        .expect("the queue");
    assert_eq!(ready, 1);
    let mut next = Harness::start_with(h.config.clone(), builtin::register).await;
    assert_eq!(next.result_for("t-waiting").await.0.code, code::SUCCESS);
    let extra = next.results_within(Duration::from_millis(500)).await;
    assert!(
        extra.is_empty(),
        "t-running is not answered again: {extra:?}"
    );
    drop(h);
    next.stop().await;
}

/// Writes a dedupe mark as an earlier attempt would have left it.
async fn seed_mark(h: &Harness, trigger_id: &str, mark: serde_json::Value) {
    let mut redis = h.redis().await;
    let () = redis
        .set(
            h.names.dedupe(&h.config.executor.app, trigger_id),
            mark.to_string(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn redeliveries_follow_the_dedupe_mark_and_never_rerun() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("exec", counting(&runs)).await;
    let stored = ExecResult {
        trigger_id: "t-finished".into(),
        job_id: 42,
        executor_id: h.executor_id.clone(),
        fire_ms: 1,
        start_ms: 2,
        end_ms: 3,
        code: code::SUCCESS,
        msg: "stored".into(),
        retryable: true,
    };
    let me = h.executor_id.clone();
    seed_mark(
        &h,
        "t-finished",
        serde_json::json!({"state": "finished", "executor": me, "result": stored}),
    )
    .await;
    seed_mark(&h, "t-crashed", serde_json::json!({"state": "running", "executor": me, "incarnation": "gone", "since_ms": 5})).await;
    seed_mark(
        &h,
        "t-confirmed",
        serde_json::json!({"state": "confirmed", "executor": me, "code": 200}),
    )
    .await;
    seed_mark(&h, "t-elsewhere", serde_json::json!({"state": "running", "executor": "other", "incarnation": "x", "since_ms": 5})).await;
    seed_mark(&h, "t-foreign", serde_json::json!("other-executor")).await;
    let ids = [
        "t-finished",
        "t-crashed",
        "t-confirmed",
        "t-elsewhere",
        "t-foreign",
    ];
    h.publish(ids.iter().map(|id| h.trigger(id, "count", "")).collect())
        .await;
    h.publish(vec![h.trigger("t-sentinel", "count", "")]).await;
    let mut results = h.results_within(Duration::from_millis(2000)).await;
    results.sort_by(|a, b| a.trigger_id.cmp(&b.trigger_id));
    let got: Vec<(&str, i32)> = results
        .iter()
        .map(|r| (r.trigger_id.as_str(), r.code))
        .collect();
    assert_eq!(
        got,
        vec![
            ("t-crashed", code::FAIL),
            ("t-finished", code::SUCCESS),
            ("t-sentinel", code::SUCCESS)
        ]
    );
    assert_eq!(results[1], stored, "the stored result is republished as is");
    assert!(results[0].msg.contains("restarted"), "{}", results[0].msg);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only the sentinel ran");
    assert_eq!(h.ready_messages(&h.queue).await, 0);
    let mut redis = h.redis().await;
    let mark: String = redis
        .get(h.names.dedupe(&h.config.executor.app, "t-sentinel"))
        .await
        .unwrap();
    assert!(mark.contains("\"confirmed\""), "{mark}");
    h.stop().await;
}

/// `rabbitmqctl args…`'s output; `None` when the tool is not usable here
/// (another machine, no root) or the command failed.
async fn rabbitmqctl(args: &[&str]) -> Option<String> {
    let out = tokio::process::Command::new("rabbitmqctl")
        .args(args)
        .arg("-q")
        .output()
        .await
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The broker's pid of the executor's AMQP connection (it names itself
/// `rondo-executor <id>`), if it has one.
async fn executor_connection(executor_id: &str) -> Option<String> {
    let listing = rabbitmqctl(&["list_connections", "pid", "client_properties"]).await?;
    let wanted = format!("\"rondo-executor {executor_id}\"");
    listing
        .lines()
        .find(|line| line.contains(&wanted))
        .and_then(|line| line.split('\t').next())
        .map(str::to_owned)
}

/// Closes the executor's AMQP connection from the broker side with
/// `rabbitmqctl`; false when it could not (no such connection, or the tool
/// is not usable here).
async fn close_executor_connection(executor_id: &str) -> bool {
    let Some(pid) = executor_connection(executor_id).await else {
        return false;
    };
    rabbitmqctl(&[
        "close_connection",
        &pid,
        "rondo executor test: forced close",
    ])
    .await
    .is_some()
}

/// A broker policy under which one queue refuses (`nack`s) every publish
/// routed to it: length 0, overflow `reject-publish`. Cleared by
/// [`Refusing::clear`], or when dropped (a failed test too).
struct Refusing {
    name: String,
    vhost: String,
    cleared: bool,
}

impl Refusing {
    /// Sets the policy and waits until the queue has it; `None` when
    /// `rabbitmqctl` is not usable here.
    async fn set(amqp_url: &str, queue: &str) -> Option<Refusing> {
        let name = format!("refuse-{queue}");
        let vhost = amqp_url
            .parse::<lapin::uri::AMQPUri>()
            .expect("the test's broker url")
            .vhost;
        let escaped: String = queue
            .chars()
            .flat_map(|c| {
                let escape = (!c.is_ascii_alphanumeric()).then_some('\\');
                escape.into_iter().chain([c])
            })
            .collect();
        let pattern = format!("^{escaped}$");
        let definition = r#"{"max-length":0,"overflow":"reject-publish"}"#;
        let args = [
            "set_policy",
            "-p",
            &vhost,
            "--apply-to",
            "queues",
            "--priority",
            "100",
        ];
        rabbitmqctl(&[&args[..], &[&name, &pattern, definition]].concat()).await?;
        let refusing = Refusing {
            name,
            vhost,
            cleared: false,
        };
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let listing =
                rabbitmqctl(&["list_queues", "-p", &refusing.vhost, "name", "policy"]).await?;
            let applied = listing.lines().any(|line| {
                let mut cols = line.split('\t');
                cols.next() == Some(queue) && cols.next() == Some(refusing.name.as_str())
            });
            if applied {
                return Some(refusing);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the policy never applied to {queue}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn clear(mut self) {
        let cleared = rabbitmqctl(&["clear_policy", "-p", &self.vhost, &self.name]).await;
        assert!(cleared.is_some(), "clearing {}", self.name);
        self.cleared = true;
    }
}

impl Drop for Refusing {
    fn drop(&mut self) {
        // A test that failed before clearing it.
        if !self.cleared {
            let _ = std::process::Command::new("rabbitmqctl")
                .args(["clear_policy", "-p", &self.vhost, &self.name, "-q"])
                .output();
        }
    }
}

#[tokio::test]
async fn publishes_refused_in_a_row_make_the_executor_open_a_new_connection() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("exec", counting(&runs)).await;
    h.publish(vec![h.trigger("t-before", "count", "")]).await;
    assert_eq!(h.result_for("t-before").await.0.code, code::SUCCESS);
    // scripts/services.sh installs RabbitMQ with its rabbitmqctl, as
    // tests/tests/service_rights.rs relies on too: no skip here.
    let first = executor_connection(&h.executor_id)
        .await
        .expect("rabbitmqctl lists the executor's connection");
    // Every result the executor publishes now reaches the persist queue's
    // policy and is refused: the broker's answer on the stuck channel seen
    // after a quorum queue's leader died, made on demand.
    let refusing = Refusing::set(&h.config.amqp.url, &h.names.persist_queue())
        .await
        .expect("rabbitmqctl sets a policy");
    h.publish(vec![h.trigger("t-refused", "count", "")]).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if executor_connection(&h.executor_id)
            .await
            .is_some_and(|pid| pid != first)
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "refused publishes did not make the executor open a new connection"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Once publishes are taken again, the result is confirmed (and marked
    // so) although its delivery came back on each new connection; the
    // trigger ran once.
    refusing.clear().await;
    let mut redis = h.redis().await;
    let key = h.names.dedupe(&h.config.executor.app, "t-refused");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mark: Option<String> = redis.get(&key).await.unwrap();
        if mark.is_some_and(|m| m.contains("\"confirmed\"")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the result was never confirmed after the policy was cleared"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    h.stop().await;
}

#[tokio::test]
async fn a_dropped_connection_is_reestablished_and_the_run_still_reports_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = Harness::start("exec", counting(&runs)).await;
    h.publish(vec![h.trigger("t-across", "count", "2500")])
        .await;
    loop {
        match h.next_event(PATIENCE).await {
            Some(Event::Log(l)) if l.trigger_id == "t-across" => break,
            Some(_) => {}
            None => panic!("the trigger never started"),
        }
    }
    // scripts/services.sh installs rabbitmqctl with the broker: no skip.
    assert!(
        close_executor_connection(&h.executor_id).await,
        "rabbitmqctl closes the executor's connection"
    );
    // The delivery comes back on the new connection, joins the run still in
    // flight, and the run's result goes out once on the new channel.
    let (result, _) = h.result_for("t-across").await;
    assert_eq!(result.code, code::SUCCESS);
    h.publish(vec![h.trigger("t-later", "count", "")]).await;
    assert_eq!(h.result_for("t-later").await.0.code, code::SUCCESS);
    let extra = h.results_within(Duration::from_millis(500)).await;
    assert!(extra.is_empty(), "{extra:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(h.ready_messages(&h.queue).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn a_channel_closed_by_the_broker_is_rebuilt_and_the_result_still_arrives() {
    let mut h = Harness::start("exec", builtin::register).await;
    h.publish(vec![h.trigger("t-before", "demo", "")]).await;
    assert_eq!(h.result_for("t-before").await.0.code, code::SUCCESS);
    // Without its exchange, the executor's next publish closes its events
    // channel (404); the session must notice and rebuild the link, whose
    // topology declaration brings the exchange back. The persist queue's
    // binding is a scheduler node's to restore (an executor may not bind
    // it): until one does, the result comes back unrouted and waits.
    let events = h.names.events_exchange();
    h.channel
        .exchange_delete(
            events.as_str().into(),
            lapin::options::ExchangeDeleteOptions::default(),
        )
        .await
        .unwrap();
    h.publish(vec![h.trigger("t-rebuilt", "demo", "")]).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let persist = h.names.persist_queue();
    let mut restored = false;
    let result = 'found: loop {
        // A passive declare of a missing exchange closes its channel: each
        // look is on a channel of its own.
        let probe = h.conn.create_channel().await.unwrap();
        let passive = lapin::options::ExchangeDeclareOptions {
            passive: true,
            ..Default::default()
        };
        if !restored
            && probe
                .exchange_declare(
                    events.as_str().into(),
                    lapin::ExchangeKind::Topic,
                    passive,
                    lapin::types::FieldTable::default(),
                )
                .await
                .is_ok()
        {
            // The executor brought the exchange back: a node now declares
            // the shared topology, as on its own reconnect.
            rondo_core::amqp::declare_topology(&h.channel, &h.names)
                .await
                .unwrap();
            restored = true;
        }
        let _ = probe.close(200, "probed".into()).await;
        assert!(
            tokio::time::Instant::now() < deadline,
            "the result never reached the persist queue"
        );
        let got = h
            .channel
            .basic_get(
                persist.as_str().into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .unwrap();
        let Some(message) = got else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        for event in rondo_core::event::decode_events(&message.delivery.data).unwrap() {
            if let Event::Result(r) = event
                && r.trigger_id == "t-rebuilt"
            {
                break 'found r;
            }
        }
    };
    assert_eq!(
        (result.trigger_id.as_str(), result.code),
        ("t-rebuilt", code::SUCCESS)
    );
    h.stop().await;
}

/// Ids are routing keys: an executor whose id a live executor of another
/// group uses refuses to start, before it declares (and binds) a queue
/// that would take the other's triggers.
#[tokio::test]
async fn an_id_live_in_another_group_is_refused_before_any_queue() {
    let h = Harness::start("idclash", builtin::register).await;
    h.registered().await;
    let mut other = h.config.clone();
    other.executor.app = "another".into();
    let clash = rondo_executor::Executor::builder(other.clone());
    let clash = builtin::register(clash).build().expect("valid executor");
    let queue = clash.queue();
    let stopped = tokio::time::timeout(PATIENCE, clash.run(Default::default()))
        .await
        .expect("refused at once");
    let Err(rondo_executor::ExecutorError::Config(message)) = stopped else {
        panic!("expected a refusal, got {stopped:?}");
    };
    assert!(message.contains("in use by a live executor"), "{message}");
    // No queue of the other group was declared.
    let passive = lapin::options::QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    let probe = h.conn.create_channel().await.unwrap();
    let declared = probe
        .queue_declare(queue.as_str().into(), passive, Default::default())
        .await;
    assert!(declared.is_err(), "queue {queue} exists");
    h.stop().await;
}
