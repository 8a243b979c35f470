//! A fresh namespace and a fresh, migrated database for one measurement,
//! removed afterwards, so measurements never see each other's rows or
//! queues and a run leaves nothing behind: the database, the namespace's
//! Redis keys, its ZooKeeper nodes, its queues and exchanges (the cleanup
//! of `rondo_core::testkit`, which unlinks keys in batches).

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;
use rondo_core::{Config, testkit};
use rondo_history::testing::{drop_database, fresh_database};
use sqlx::MySqlPool;

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
        let keys = testkit::cleanup_redis(&self.config).await;
        testkit::cleanup_zk(&self.config).await;
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
        testkit::cleanup_redis(&self.config).await;
        testkit::cleanup_zk(&self.config).await;
    }
}
