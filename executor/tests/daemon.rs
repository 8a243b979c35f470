//! `rondo-executor` as a daemon: it answers `--help` and `--version`,
//! exits 64 on a bad config, and exits non-zero when a core task fails
//! (here: its durable queue exists with other arguments than rondo
//! declares, which no reconnect can fix).

use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use rondo_core::daemon::{EXIT_CONFIG, EXIT_FAILURE};
use rondo_core::testkit::Namespace;
use rondo_core::testkit::daemon::{assert_daemon_shape, run_binary};

const BINARY: &str = env!("CARGO_BIN_EXE_rondo-executor");

#[test]
fn help_version_and_bad_config_follow_the_daemon_shape() {
    assert_daemon_shape(BINARY);
    let env = [("RONDO_EXECUTOR_ID", "not a valid id")];
    let out = run_binary(BINARY, &[], &env, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(i32::from(EXIT_CONFIG)), "{out:?}");
}

#[tokio::test]
async fn a_queue_the_broker_refuses_as_declared_fails_the_run() {
    let ns = Namespace::new("exdaemon");
    let config = ns.config.clone();
    let queue = ns.executor_queue(&config.executor.app, "ex-1");
    let conn = rondo_core::amqp::connect(&config.amqp.url, "daemon-test")
        .await
        .expect("broker");
    let ch = conn.create_channel().await.expect("channel");
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    // Durable, but without the dead-letter argument every rondo queue has.
    ch.queue_declare(queue.as_str().into(), durable, FieldTable::default())
        .await
        .expect("declare the queue another way");
    let _ = conn.close(200, "bye".into()).await;
    let (namespace, amqp, redis) = (config.namespace.clone(), config.amqp.url, config.redis.url);
    let out = tokio::task::spawn_blocking(move || {
        let env = [
            ("RONDO_NAMESPACE", namespace.as_str()),
            ("RONDO_AMQP_URL", amqp.as_str()),
            ("RONDO_REDIS_URL", redis.as_str()),
            ("RONDO_EXECUTOR_ID", "ex-1"),
        ];
        run_binary(BINARY, &[], &env, Duration::from_secs(60))
    })
    .await
    .expect("the run");
    assert_eq!(out.status.code(), Some(i32::from(EXIT_FAILURE)), "{out:?}");
}
