//! Connecting to Redis the way every rondo process must: one Redis through
//! a few shared multiplexed connections, or a Redis Cluster through the
//! cluster client, behind one [`Pool`] and one [`Connection`] that every
//! caller uses the same way (`AsyncCommands`, pipelines, scripts). The
//! response timeout is long enough for big pipelines (redis-rs's default of
//! 500 ms fails them under load).
//!
//! `redis.url` chooses: one `redis://` URL is one Redis; a `redis+cluster://`
//! URL (`redis+cluster://[user:password@]host:port[,host:port…]`), or several
//! `redis://` URLs separated by commas, are the seed nodes of a cluster.
//!
//! On a cluster, every command, script and `MULTI` goes to the master of its
//! keys' slot, following `MOVED` and `ASK` redirects and a failover (the
//! client re-reads the slot map and retries). A script or a transaction
//! must keep to one slot (rondo's keys are laid out so that they do). A
//! plain pipeline whose commands fall in several slots is split here into
//! one pipeline per slot, sent concurrently, and its replies put back in
//! the pipeline's order; the commands of different slots are then not
//! ordered among themselves, so a caller that needs an order of writes
//! across slots sends them one after the other (see `Store::save_job`).
//!
//!
//! # Layout
//!
//! * here: [`Pool`], [`Connection`] and [`pool`], the one face of both;
//! * `single`: one Redis through shared multiplexed connections;
//! * `cluster`: a Redis Cluster, and its pipelines split by slot;
//! * `health`: outages seen by this process, for lease judgements;
//! * [`default_user`]: the start-up check that Redis's `default` user is
//!   not open ([`refuse_open_default`]);
//! * `script`: `EVALSHA` commands built in one buffer.

mod cluster;
pub mod default_user;
mod health;
mod script;
mod single;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::config::RedisConfig;
use crate::error::Error;

use cluster::cluster_pipeline;
pub use cluster::{ClusterPool, Wait};
pub use default_user::{OpenDefault, refuse_open_default};
pub use health::Health;
use health::{RESET_AFTER_MS, UNREPLICATED_BACKOFF_MS, recorded, unanswered};
pub use script::{run_script, script_cmd};
use single::SharedSlot;
pub use single::{SingleConnection, SinglePool};

/// The connection handed out by [`Pool::get`].
pub type PooledConnection = Connection;

/// One Redis or a Redis Cluster, as `redis.url` says.
#[derive(Clone)]
pub enum Pool {
    Single(Box<SinglePool>),
    Cluster(Box<ClusterPool>),
}

/// Builds the pool; connections are opened lazily, so this fails only on a
/// malformed URL.
pub fn pool(config: &RedisConfig) -> Result<Pool, Error> {
    let timeout = Duration::from_millis(config.response_timeout_ms);
    if let Some(seeds) = config.cluster_seeds()? {
        let client = ClusterClientBuilder::new(seeds)
            .response_timeout(timeout)
            .connection_timeout(Duration::from_secs(5))
            // A failover takes the cluster a few seconds (node timeout,
            // election): retries with backoff ride it out.
            .retries(12)
            .min_retry_wait(50)
            .max_retry_wait(1_000)
            .build()
            .map_err(|e| Error::invalid("redis.url", format!("{e}")))?;
        return Ok(Pool::Cluster(Box::new(ClusterPool {
            client,
            conn: Arc::new(tokio::sync::RwLock::new(None)),
            health: Arc::default(),
            wait: Wait {
                replicas: config.wait_replicas.unwrap_or(1),
                timeout_ms: config.wait_timeout_ms,
            },
        })));
    }
    let conn_config = AsyncConnectionConfig::new()
        .set_response_timeout(Some(timeout))
        .set_connection_timeout(Some(Duration::from_secs(5)));
    let client = redis::Client::open(config.url.as_str())
        .map_err(|e| Error::invalid("redis.url", format!("{e}")))?;
    let slots: Vec<Arc<SharedSlot>> = (0..config.pool_size.max(1))
        .map(|_| Arc::default())
        .collect();
    Ok(Pool::Single(Box::new(SinglePool {
        client,
        config: conn_config,
        slots: slots.into(),
        next: Arc::default(),
        generations: Arc::default(),
        health: Arc::default(),
    })))
}

impl Pool {
    /// A connection: one of the shared ones (one Redis), or the cluster's
    /// shared connection, opened on first use.
    pub async fn get(&self) -> RedisResult<Connection> {
        match self {
            Pool::Single(pool) => pool.get().await.map(Connection::Single),
            Pool::Cluster(cluster) => {
                // The common case: callers share the open connection
                // without waiting on each other.
                if !cluster.health.stuck()
                    && let Some(conn) = cluster.conn.read().await.as_ref()
                {
                    return Ok(Connection::Cluster(
                        conn.clone(),
                        cluster.wait,
                        cluster.health.clone(),
                    ));
                }
                let mut slot = cluster.conn.write().await;
                if slot.is_some() && cluster.health.stuck() {
                    tracing::warn!(
                        "redis cluster requests have failed unanswered for {} s; reconnecting from the seed nodes",
                        RESET_AFTER_MS / 1000
                    );
                    *slot = None;
                    // Give the new connection its own period.
                    cluster
                        .health
                        .failing_since_ms
                        .store(crate::clock::now_ms(), std::sync::atomic::Ordering::Relaxed);
                }
                let conn = match &*slot {
                    Some(conn) => conn.clone(),
                    None => {
                        let asked = crate::clock::now_ms();
                        let conn =
                            cluster
                                .client
                                .get_async_connection()
                                .await
                                .inspect_err(|e| {
                                    if unanswered(e) {
                                        cluster.health.note_outage(asked, crate::clock::now_ms());
                                    }
                                })?;
                        *slot = Some(conn.clone());
                        conn
                    }
                };
                Ok(Connection::Cluster(
                    conn,
                    cluster.wait,
                    cluster.health.clone(),
                ))
            }
        }
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Pool::Cluster(_))
    }

    /// [`Health::lease_cutoff`] of this pool's connections: the registry
    /// score below which an executor's lease has run out, allowing for an
    /// outage this process just saw.
    pub fn lease_cutoff(&self, now: i64, lease_ms: i64) -> i64 {
        match self {
            Pool::Single(pool) => pool.health.lease_cutoff(now, lease_ms),
            Pool::Cluster(cluster) => cluster.health.lease_cutoff(now, lease_ms),
        }
    }
}

/// A connection to one Redis or to a cluster; implements redis-rs's
/// `ConnectionLike`, so commands, pipelines and scripts take it as they
/// take any connection.
pub enum Connection {
    Single(SingleConnection),
    Cluster(ClusterConnection, Wait, Arc<Health>),
}

impl Connection {
    /// Waits until what this process wrote so far is on `redis.wait_replicas`
    /// replicas of every master (`WAIT`, sent to each master), for at most
    /// `redis.wait_timeout_ms`: a write acknowledged after this survives
    /// its master's failover. Replication is asynchronous, so without it a
    /// promoted replica may lack the last writes its master acknowledged
    /// (scheduler/README.md says which writes wait, and why). Returns how
    /// many replicas the least replicated master reached; fewer than asked
    /// (a replica down or lagging) is counted and not an error: the write
    /// stands, unprotected until the replica is back, and for the next 10 s
    /// no `WAIT` is sent (it would hold the process's other requests to
    /// that master for its whole timeout each time). On one Redis, and with
    /// `wait_replicas = 0`, it returns at once.
    pub async fn replicate(&mut self) -> RedisResult<u32> {
        use std::sync::atomic::Ordering::Relaxed;
        let Connection::Cluster(conn, wait, health) = self else {
            return Ok(0);
        };
        if wait.replicas == 0 {
            return Ok(0);
        }
        let now = crate::clock::now_ms();
        if now < health.unreplicated_until_ms.load(Relaxed) {
            // A master has lacked its replicas moments ago: `WAIT` would
            // only stall every request behind it on the shared connection.
            metrics::counter!("rondo_redis_unreplicated_writes_total").increment(1);
            return Ok(0);
        }
        let reached: u32 = redis::cmd("WAIT")
            .arg(wait.replicas)
            .arg(wait.timeout_ms)
            .query_async(conn)
            .await?;
        if reached < wait.replicas {
            health
                .unreplicated_until_ms
                .store(now + UNREPLICATED_BACKOFF_MS, Relaxed);
            metrics::counter!("rondo_redis_unreplicated_writes_total").increment(1);
            tracing::warn!(
                reached,
                wanted = wait.replicas,
                "a redis master lacks its replicas: writes go on unreplicated (no WAIT for {} s)",
                UNREPLICATED_BACKOFF_MS / 1000
            );
        }
        Ok(reached)
    }

    /// Sends write pipelines so that each takes effect after the ones
    /// before it, replies dropped: on one Redis as one pipeline (a
    /// connection's commands run in order), on a cluster one after the
    /// other (a pipeline split over slots is not ordered across them). A
    /// transaction among them is sent on its own on either.
    pub async fn write_in_order(&mut self, steps: &[&Pipeline]) -> RedisResult<()> {
        let steps: Vec<&&Pipeline> = steps.iter().filter(|s| !s.is_empty()).collect();
        let merge =
            matches!(self, Connection::Single(..)) && steps.iter().all(|s| !s.is_transaction());
        if merge {
            let mut all = redis::pipe();
            for step in &steps {
                for cmd in step.cmd_iter() {
                    all.add_command(cmd.clone()).ignore();
                }
            }
            if !all.is_empty() {
                let () = all.query_async(self).await?;
            }
            return Ok(());
        }
        for step in steps {
            let _: Value = step.query_async(self).await?;
        }
        Ok(())
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.checked(|conn| conn.req_packed_command(cmd)),
            Connection::Cluster(c, _, health) => recorded(health, c.req_packed_command(cmd)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => {
                c.checked(|conn| conn.req_packed_commands(pipeline, offset, count))
            }
            Connection::Cluster(c, _, health) => recorded(
                health,
                Box::pin(cluster_pipeline(c, pipeline, offset, count)),
            ),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.conn.get_db(),
            Connection::Cluster(c, _, _) => c.get_db(),
        }
    }
}
