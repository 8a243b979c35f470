//! A fresh namespace and a fresh, migrated database for one measurement,
//! removed afterwards, so measurements never see each other's rows or
//! queues and a run leaves nothing behind.

use rondo_core::{Config, testkit};
use rondo_persist_worker::testing::{drop_database, fresh_database};
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

    /// Drops the database and the namespace's queues and exchanges.
    pub async fn close(self) {
        self.pool.close().await;
        drop_database(&self.base_url, &self.database).await;
        testkit::cleanup_amqp(&self.config, &[]).await;
    }
}
