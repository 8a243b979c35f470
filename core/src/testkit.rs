//! Helpers for tests against the real services (feature `testkit`): a fresh
//! namespace per test, and cleanup of what a test left in Redis and RabbitMQ,
//! so tests run in parallel and twice in a row.

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};

use crate::config::Config;
use crate::names::Names;

/// A namespace no other test uses: `t_<tag>_<random>`.
pub fn unique_namespace(tag: &str) -> String {
    let nonce: u32 = rand::random();
    format!("t_{tag}_{nonce:08x}")
}

/// The default config with a fresh namespace, short registry timings and a
/// short ZooKeeper session, pointing at the services on loopback (overridable
/// with the usual `RONDO_*` variables, e.g. `RONDO_MYSQL_URL`).
pub fn config(tag: &str) -> Config {
    let env = std::env::vars().filter(|(k, _)| k.starts_with("RONDO_") && k != "RONDO_NAMESPACE");
    let mut config = Config::load("", env).expect("test config");
    config.namespace = unique_namespace(tag);
    config.partitions = 4;
    config.registry.heartbeat_ms = 1000;
    config.registry.dead_after_ms = 5000;
    config.zookeeper.session_timeout_ms = 4000;
    config.scheduler.api_addr = "127.0.0.1:0".into();
    config
}

/// Deletes every Redis key of the namespace.
pub async fn cleanup_redis(config: &Config) {
    let Ok(client) = redis::Client::open(config.redis.url.as_str()) else {
        return;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return;
    };
    let pattern = format!("{}:*", config.namespace);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    for chunk in keys.chunks(500) {
        let _: Result<(), _> = redis::cmd("DEL").arg(chunk).query_async(&mut conn).await;
    }
}

/// Deletes the namespace's shared queues and exchanges, and the given extra
/// queues (executor queues).
pub async fn cleanup_amqp(config: &Config, extra_queues: &[String]) {
    let names: Names = config.names();
    let Ok(conn) = crate::amqp::connect(&config.amqp.url, "rondo-test-cleanup").await else {
        return;
    };
    let Ok(ch) = conn.create_channel().await else {
        return;
    };
    let mut queues = vec![
        names.persist_queue(),
        names.dead_queue(),
        names.monitor_queue(),
    ];
    queues.extend_from_slice(extra_queues);
    for q in queues {
        let _ = ch
            .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    for x in [
        names.trigger_exchange(),
        names.control_exchange(),
        names.events_exchange(),
        names.dead_exchange(),
    ] {
        let _ = ch
            .exchange_delete(x.as_str().into(), ExchangeDeleteOptions::default())
            .await;
    }
    let _ = conn.close(200, "bye".into()).await;
}
