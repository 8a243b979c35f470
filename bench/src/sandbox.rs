//! A fresh namespace and a fresh, migrated database for one measurement,
//! removed afterwards, so measurements never see each other's rows or
//! queues and a run leaves nothing behind: the database, the namespace's
//! Redis keys (SCAN + UNLINK in batches, so a million keys never make one
//! giant DEL), its ZooKeeper nodes, its queues and exchanges.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;
use rondo_core::{Config, testkit};
use rondo_history::testing::{drop_database, fresh_database};
use sqlx::MySqlPool;

/// Keys per SCAN step and per UNLINK.
const KEYS_PER_BATCH: usize = 1_000;

pub(crate) struct Sandbox {
    /// The caller's config with the sandbox's namespace and database URL.
    pub config: Config,
    /// A small pool on the sandbox's database, for the bench's own queries.
    pub pool: MySqlPool,
    base_url: String,
    database: String,
}

impl Sandbox {
    /// Makes the namespace `t_<tag>_<random>` and the database
    /// `rondo_t_<random>` (panics if MySQL refuses: like the test helpers
    /// it uses, a bench has no one to report to but its operator).
    pub async fn open(base: &Config, tag: &str) -> Sandbox {
        let mut config = base.clone();
        config.namespace = testkit::unique_namespace(tag);
        let (pool, url, database) = fresh_database(&base.mysql.url).await;
        config.mysql.url = url;
        tracing::info!(namespace = %config.namespace, %database, "sandbox opened");
        Sandbox {
            config,
            pool,
            base_url: base.mysql.url.clone(),
            database,
        }
    }

    /// Drops the database and the namespace's queues and exchanges, Redis
    /// keys and ZooKeeper nodes.
    pub async fn close(self) {
        self.close_with(&[]).await;
    }

    /// [`Sandbox::close`], also deleting `queues` (executor queues, the
    /// broker benchmark's queue).
    pub async fn close_with(self, queues: &[String]) {
        self.pool.close().await;
        drop_database(&self.base_url, &self.database).await;
        testkit::cleanup_amqp(&self.config, queues).await;
        let keys = unlink_namespace(&self.config).await;
        delete_zk_tree(&self.config).await;
        tracing::info!(namespace = %self.config.namespace, redis_keys = keys, "sandbox removed");
    }
}

/// Runs `body` on a fresh sandbox and removes the sandbox afterwards, also
/// when `body` fails or panics (the panic goes on after the cleanup).
/// `body` returns its result and the extra queues to delete.
pub(crate) async fn with_sandbox<T, F, Fut>(base: &Config, tag: &str, body: F) -> anyhow::Result<T>
where
    F: FnOnce(Sandbox) -> Fut,
    Fut: Future<Output = (Sandbox, Vec<String>, anyhow::Result<T>)>,
{
    let sandbox = Sandbox::open(base, tag).await;
    // The body owns the sandbox while it runs and hands it back; if it
    // panics, a copy of the names is enough to clean up.
    let spare = Spare {
        config: sandbox.config.clone(),
        base_url: sandbox.base_url.clone(),
        database: sandbox.database.clone(),
    };
    // A statement of its own: the body's future (its child processes
    // included, killed on drop) is gone before the cleanup starts.
    let outcome = AssertUnwindSafe(body(sandbox)).catch_unwind().await;
    match outcome {
        Ok((sandbox, queues, result)) => {
            sandbox.close_with(&queues).await;
            result
        }
        Err(panic) => {
            spare.clean().await;
            std::panic::resume_unwind(panic)
        }
    }
}

/// What is needed to remove a sandbox whose owner panicked.
struct Spare {
    config: Config,
    base_url: String,
    database: String,
}

impl Spare {
    async fn clean(self) {
        drop_database(&self.base_url, &self.database).await;
        testkit::cleanup_amqp(&self.config, &[]).await;
        unlink_namespace(&self.config).await;
        delete_zk_tree(&self.config).await;
    }
}

/// Deletes every Redis key of the namespace with SCAN and UNLINK batches;
/// returns how many it removed.
pub(crate) async fn unlink_namespace(config: &Config) -> usize {
    let Ok(client) = redis::Client::open(config.redis.url.as_str()) else {
        return 0;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let pattern = format!("{}:*", config.namespace);
    let mut cursor: u64 = 0;
    let mut removed = 0;
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
            break;
        };
        for chunk in keys.chunks(KEYS_PER_BATCH) {
            let unlinked: Result<usize, _> =
                redis::cmd("UNLINK").arg(chunk).query_async(&mut conn).await;
            removed += unlinked.unwrap_or(0);
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    removed
}

/// Deletes the namespace's ZooKeeper chroot, children first.
async fn delete_zk_tree(config: &Config) {
    let connect = zookeeper_client::Client::connect(&config.zookeeper.connect);
    let Ok(Ok(client)) = tokio::time::timeout(std::time::Duration::from_secs(10), connect).await
    else {
        return;
    };
    let root = config.names().zk_root();
    let mut stack = vec![root];
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
