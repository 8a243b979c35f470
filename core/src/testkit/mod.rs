//! Helpers for tests against the real services (feature `testkit`), shared by
//! every crate's tests and by the cluster harness (`rondo-testkit`).
//!
//! * [`Namespace`]: a test's own namespace (Redis keys, AMQP names, the
//!   ZooKeeper chroot), removed when the guard drops, also when the test
//!   panics, so tests run in parallel and twice in a row.
//! * [`redis_admin_url`]: the tests' Redis admin (Redis's `default` user is
//!   off on the tests' Redis: see its doc).
//! * [`eventually`]: wait for a positive signal instead of sleeping.
//! * [`queue_depth`], [`take_dead`]: what a queue holds.
//! * [`fixtures`]: jobs, triggers and events with sensible defaults.
//! * [`daemon`]: running a daemon binary to its end, and the shape every
//!   daemon shares (`--help`, exit 64 on a bad config).
//! * [`ThrowawayRedis`]: a `redis-server` of the test's own, stopped with
//!   the test (one whose `default` user is open, which the shared one is
//!   not).
//!
//! Timing logic is tested on tokio's paused clock
//! (`#[tokio::test(start_paused = true)]`): every rondo loop waits with
//! `tokio::time`, so a paused test drives heartbeats, idle exits and
//! backoffs without real sleeps.

pub mod daemon;
pub mod fixtures;
mod throwaway;

pub use throwaway::ThrowawayRedis;

use std::future::Future;
use std::time::Duration;

use lapin::options::{
    BasicGetOptions, ExchangeDeleteOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};

use crate::config::Config;
use crate::names::Names;

/// How long a test waits for something that should happen well within it.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A namespace no other test uses: `t_<tag>_<random>`.
pub fn unique_namespace(tag: &str) -> String {
    let nonce: u32 = rand::random();
    format!("t_{tag}_{nonce:08x}")
}

/// Variables starting with `RONDO_` that the scripts and the testkit read,
/// not config keys.
const SCRIPT_VARS: &[&str] = &[
    "RONDO_NAMESPACE",
    "RONDO_SERVICES_DIR",
    "RONDO_SERVICES_WAIT",
];

/// The default config with a fresh namespace, short registry timings and a
/// short ZooKeeper session, pointing at the services on loopback (overridable
/// with the usual `RONDO_*` variables, e.g. `RONDO_MYSQL_URL`), signed in to
/// Redis as the tests' admin ([`redis_admin_url`]).
pub fn config(tag: &str) -> Config {
    let env = std::env::vars()
        .filter(|(k, _)| k.starts_with("RONDO_") && !SCRIPT_VARS.contains(&k.as_str()));
    let mut config = Config::load("", env).expect("test config");
    config.redis.url = redis_admin_url();
    config.namespace = unique_namespace(tag);
    config.partitions = 4;
    config.registry.heartbeat_ms = 1000;
    config.registry.dead_after_ms = 5000;
    config.zookeeper.session_timeout_ms = 4000;
    config.scheduler.api_addr = "127.0.0.1:0".into();
    // The tests' XXL-JOB executors (stand-ins) listen on loopback.
    config.xxl.address_allow = vec!["127.0.0.1".into()];
    config
}

/// The Redis URL of the tests' admin: a user with every right, for the
/// tests' own looks at Redis and to make each process's user (processes
/// under test get users of their own). `RONDO_REDIS_URL` when set
/// (`scripts/test.sh` sets it); else the admin `scripts/services.sh` keeps
/// in `$RONDO_SERVICES_DIR/redis-users.env` (`REDIS_ADMIN=<user>:<password>`),
/// on `127.0.0.1:6379`; else Redis's `default` user there, which only a
/// Redis not set up by `scripts/services.sh` still lets in.
pub fn redis_admin_url() -> String {
    if let Ok(url) = std::env::var("RONDO_REDIS_URL") {
        return url;
    }
    let dir = std::env::var("RONDO_SERVICES_DIR")
        .unwrap_or_else(|_| "/var/lib/rondo-services".to_owned());
    let kept = std::fs::read_to_string(format!("{dir}/redis-users.env")).unwrap_or_default();
    match kept
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("REDIS_ADMIN="))
    {
        Some(admin) => format!("redis://{admin}@127.0.0.1:6379"),
        None => "redis://127.0.0.1:6379".to_owned(),
    }
}

/// `(user, password)` of a `redis://user:password@host…` URL; `None`
/// without a user (Redis's `default`).
pub fn redis_userinfo(url: &str) -> Option<(String, String)> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let (userinfo, _) = authority.rsplit_once('@')?;
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    (!user.is_empty()).then(|| (user.to_owned(), password.to_owned()))
}

/// A test's namespace: its config, and the cleanup of everything named
/// after it when dropped (Redis keys, the shared queues and exchanges, the
/// executor queues it was told about, the ZooKeeper chroot).
pub struct Namespace {
    pub config: Config,
    queues: std::sync::Mutex<Vec<String>>,
}

impl Namespace {
    pub fn new(tag: &str) -> Namespace {
        Namespace::with_config(config(tag))
    }

    /// Takes ownership of the cleanup of `config`'s namespace.
    pub fn with_config(config: Config) -> Namespace {
        Namespace {
            config,
            queues: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub fn names(&self) -> Names {
        self.config.names()
    }

    /// An extra queue to delete at the end (an executor's durable queue).
    pub fn track_queue(&self, queue: String) {
        self.queues.lock().expect("queues lock").push(queue);
    }

    /// The durable queue of executor `id` of `app`, tracked for cleanup.
    pub fn executor_queue(&self, app: &str, id: &str) -> String {
        let queue = self.names().executor_queue(app, id);
        self.track_queue(queue.clone());
        queue
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let config = self.config.clone();
        let queues = std::mem::take(&mut *self.queues.lock().unwrap_or_else(|e| e.into_inner()));
        on_side_thread(async move {
            cleanup_redis(&config).await;
            cleanup_amqp(&config, &queues).await;
            cleanup_zk(&config).await;
        });
    }
}

/// Runs async cleanup to completion from `Drop`, on its own thread and
/// runtime, so it works inside a test's runtime and during a panic.
pub fn on_side_thread<F: Future<Output = ()> + Send + 'static>(cleanup: F) {
    let _ = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(cleanup);
    })
    .join();
}

/// What a condition polled by [`eventually`] answers: `bool` (held or
/// not), or `Option<T>` (the value, once there).
pub trait Signal {
    type Output;
    fn ready(self) -> Option<Self::Output>;
}

impl Signal for bool {
    type Output = ();
    fn ready(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Signal for Option<T> {
    type Output = T;
    fn ready(self) -> Option<T> {
        self
    }
}

/// Polls `f` every 50 ms until it signals (`true`, or `Some(value)`, which
/// is returned); panics naming `what` after `timeout`. Tests wait for a
/// positive signal this way instead of sleeping.
pub async fn eventually<S, F, Fut>(what: &str, timeout: Duration, f: F) -> S::Output
where
    S: Signal,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    match try_eventually(what, timeout, f).await {
        Ok(value) => value,
        Err(timed_out) => panic!("{timed_out}"),
    }
}

/// [`eventually`] for callers that report instead of panicking (the
/// benchmark): `Err` naming `what` after `timeout`.
pub async fn try_eventually<S, F, Fut>(
    what: &str,
    timeout: Duration,
    mut f: F,
) -> Result<S::Output, String>
where
    S: Signal,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await.ready() {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `(ready messages, consumers)` of a queue; `None` when it does not exist.
pub async fn queue_depth(config: &Config, queue: &str) -> Option<(u32, u32)> {
    let conn = crate::amqp::connect(&config.amqp.url, "rondo-test-depth")
        .await
        .ok()?;
    let ch = conn.create_channel().await.ok()?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let declared = ch
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await;
    let _ = conn.close(200, "bye".into()).await;
    declared
        .ok()
        .map(|q| (q.message_count(), q.consumer_count()))
}

/// Takes every message of the namespace's dead queue: `(body, reason)`.
pub async fn take_dead(config: &Config) -> Vec<(Vec<u8>, String)> {
    let conn = crate::amqp::connect(&config.amqp.url, "rondo-test-dead")
        .await
        .expect("broker");
    let ch = conn.create_channel().await.expect("channel");
    let queue = config.names().dead_queue();
    let mut out = Vec::new();
    let opts = BasicGetOptions { no_ack: true };
    while let Some(msg) = ch
        .basic_get(queue.as_str().into(), opts)
        .await
        .expect("basic.get on the dead queue")
    {
        let headers = msg
            .delivery
            .properties
            .headers()
            .clone()
            .unwrap_or_default();
        let reason = match headers
            .inner()
            .get(&ShortString::from(crate::amqp::REASON_HEADER))
        {
            Some(AMQPValue::LongString(s)) => s.to_string(),
            other => panic!("dead letter without a reason header: {other:?}"),
        };
        out.push((msg.delivery.data, reason));
    }
    let _ = conn.close(200, "bye".into()).await;
    out
}

/// Keys per SCAN step and per UNLINK.
const KEYS_PER_BATCH: usize = 1_000;

/// Deletes every Redis key of the namespace with SCAN and UNLINK batches
/// (a million keys never make one giant command); how many it removed. On
/// a Redis Cluster, on each master.
pub async fn cleanup_redis(config: &Config) -> usize {
    let nodes = match config.redis.cluster_seeds() {
        Ok(None) => vec![config.redis.url.clone()],
        Ok(Some(seeds)) => cluster_masters(&seeds).await,
        Err(_) => return 0,
    };
    let mut removed = 0;
    for node in nodes {
        removed += cleanup_node(&node, &config.namespace).await;
    }
    removed
}

/// The URLs of a cluster's masters, as the first seed that answers says.
async fn cluster_masters(seeds: &[String]) -> Vec<String> {
    for seed in seeds {
        let Ok(client) = redis::Client::open(seed.as_str()) else {
            continue;
        };
        let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
            continue;
        };
        let Ok(text) = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async::<String>(&mut conn)
            .await
        else {
            continue;
        };
        let scheme_and_auth = seed
            .rsplit_once('@')
            .map(|(front, _)| format!("{front}@"))
            .unwrap_or_else(|| "redis://".to_owned());
        return text
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                let flags = fields.get(2)?;
                (flags.contains("master") && !flags.contains("fail")).then_some(())?;
                let addr = fields.get(1)?.split('@').next()?;
                Some(format!("{scheme_and_auth}{addr}"))
            })
            .collect();
    }
    Vec::new()
}

/// [`cleanup_redis`] on one Redis, or one master of a cluster (one key per
/// `UNLINK` there: the keys of a node are in many slots).
async fn cleanup_node(url: &str, namespace: &str) -> usize {
    let Ok(client) = redis::Client::open(url) else {
        return 0;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let cluster = redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async::<String>(&mut conn)
        .await
        .is_ok();
    let pattern = format!("{namespace}:*");
    let (mut cursor, mut removed) = (0u64, 0);
    loop {
        let step: Result<(u64, Vec<String>), _> = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(KEYS_PER_BATCH)
            .query_async(&mut conn)
            .await;
        let Ok((next, keys)) = step else {
            return removed;
        };
        if cluster {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("UNLINK").arg(key);
            }
            if !keys.is_empty() {
                let unlinked: Result<Vec<usize>, _> = pipe.query_async(&mut conn).await;
                removed += unlinked.map(|u| u.iter().sum()).unwrap_or(0);
            }
        } else {
            for chunk in keys.chunks(KEYS_PER_BATCH) {
                let unlinked: Result<usize, _> =
                    redis::cmd("UNLINK").arg(chunk).query_async(&mut conn).await;
                removed += unlinked.unwrap_or(0);
            }
        }
        cursor = next;
        if cursor == 0 {
            return removed;
        }
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

/// Deletes the namespace's ZooKeeper chroot, children first.
/// Signs in with `zookeeper.auth` when set (the znodes are then that
/// identity's only).
pub async fn cleanup_zk(config: &Config) {
    let mut connector = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(5))
        .with_connection_timeout(Duration::from_secs(5));
    if !config.zookeeper.auth.is_empty() {
        connector = connector.with_auth("digest", config.zookeeper.auth.as_bytes());
    }
    let connect = connector.connect(&config.zookeeper.connect);
    let Ok(Ok(client)) = tokio::time::timeout(Duration::from_secs(5), connect).await else {
        return;
    };
    let mut stack = vec![config.names().zk_root()];
    let mut order = Vec::new();
    while let Some(path) = stack.pop() {
        let children = client.list_children(&path).await.unwrap_or_default();
        stack.extend(children.iter().map(|c| format!("{path}/{c}")));
        order.push(path);
    }
    for path in order.iter().rev() {
        let _ = client.delete(path, None).await;
    }
}
