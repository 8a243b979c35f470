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
//! Why one file of ~800 lines: [`Pool`] and [`Connection`] are one
//! abstraction over two clients (one Redis, a Redis Cluster), and the
//! cluster's health, slot grouping and pipelines exist only to give both
//! arms the same behaviour; a split into `single`, `cluster` and `health`
//! files is the next step when either client grows.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::config::RedisConfig;
use crate::error::Error;

/// The connection handed out by [`Pool::get`].
pub type PooledConnection = Connection;

/// One Redis or a Redis Cluster, as `redis.url` says.
#[derive(Clone)]
pub enum Pool {
    Single(Box<SinglePool>),
    Cluster(Box<ClusterPool>),
}

/// One Redis: `redis.pool_size` multiplexed connections, each opened on
/// first use and shared by every caller (a request is pipelined on one of
/// them, taken in turn: no checkout, no per-use `PING`). A connection that
/// breaks (dropped, reset) or lets a request time out is opened anew by the
/// next caller that takes it; after a failed open, callers of that slot
/// fail at once for [`REOPEN_AFTER_MS`] instead of each waiting out its own
/// connect timeout.
///
/// A checked-out pool (deadpool's) sent `UNWATCH` + `PING` each time a
/// connection was taken, which at 1,000 fires/s was half of every Redis
/// round trip a fire made. rondo uses neither `WATCH` nor blocking
/// commands, so connections hold no per-caller state and can be shared.
#[derive(Clone)]
pub struct SinglePool {
    client: redis::Client,
    config: AsyncConnectionConfig,
    slots: Arc<[Arc<SharedSlot>]>,
    next: Arc<std::sync::atomic::AtomicUsize>,
    /// Numbers each connection opened, so that only the one that broke is
    /// dropped from its slot.
    generations: Arc<std::sync::atomic::AtomicU64>,
    health: Arc<Health>,
}

/// After a slot failed to open its connection, its callers are refused at
/// once for this long (then the next one tries again).
const REOPEN_AFTER_MS: i64 = 1_000;

/// One shared connection (`None` until opened, or after it broke) with its
/// generation, and when opening it last failed.
#[derive(Default)]
struct SharedSlot {
    open: tokio::sync::RwLock<Option<(u64, MultiplexedConnection)>>,
    failed_at_ms: std::sync::atomic::AtomicI64,
}

impl SharedSlot {
    /// Drops the connection of `generation`, if the slot still holds it.
    async fn drop_broken(&self, generation: u64) {
        let holds = |open: &Option<(u64, MultiplexedConnection)>| {
            open.as_ref().is_some_and(|(g, _)| *g == generation)
        };
        if !holds(&*self.open.read().await) {
            return;
        }
        let mut open = self.open.write().await;
        if holds(&open) {
            *open = None;
        }
    }
}

impl SinglePool {
    async fn get(&self) -> RedisResult<Connection> {
        use std::sync::atomic::Ordering::Relaxed;
        let slot = self.slots[self.next.fetch_add(1, Relaxed) % self.slots.len()].clone();
        if let Some((generation, conn)) = slot.open.read().await.as_ref() {
            return Ok(self.handed_out(conn.clone(), &slot, *generation));
        }
        let mut open = slot.open.write().await;
        if let Some((generation, conn)) = open.as_ref() {
            return Ok(self.handed_out(conn.clone(), &slot, *generation));
        }
        let asked = crate::clock::now_ms();
        let failed_at = slot.failed_at_ms.load(Relaxed);
        if failed_at != 0 && asked - failed_at < REOPEN_AFTER_MS {
            // Opening it failed moments ago (each try may take the whole
            // connect timeout): part of the same outage.
            self.health.note_outage(asked, asked);
            return Err(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "connecting to redis failed moments ago",
            )));
        }
        let conn = match self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
        {
            Ok(conn) => conn,
            Err(e) => {
                let now = crate::clock::now_ms();
                slot.failed_at_ms.store(now, Relaxed);
                if unanswered(&e) {
                    self.health.note_outage(asked, now);
                }
                return Err(e);
            }
        };
        slot.failed_at_ms.store(0, Relaxed);
        let generation = self.generations.fetch_add(1, Relaxed);
        *open = Some((generation, conn.clone()));
        Ok(self.handed_out(conn, &slot, generation))
    }

    fn handed_out(
        &self,
        conn: MultiplexedConnection,
        slot: &Arc<SharedSlot>,
        generation: u64,
    ) -> Connection {
        Connection::Single(SingleConnection {
            conn,
            health: self.health.clone(),
            slot: slot.clone(),
            generation,
        })
    }
}

/// A shared connection to one Redis, as handed out.
pub struct SingleConnection {
    conn: MultiplexedConnection,
    health: Arc<Health>,
    slot: Arc<SharedSlot>,
    generation: u64,
}

impl SingleConnection {
    /// `reply`, noted in `health`; a reply that says the connection broke,
    /// or a request that timed out (Redis gone without a reset: the
    /// connection would wait on it until the kernel gives up), drops it from
    /// its slot, so the next caller opens a new one.
    fn checked<'a, T: Send + 'a>(
        &'a mut self,
        send: impl FnOnce(&'a mut MultiplexedConnection) -> RedisFuture<'a, T>,
    ) -> RedisFuture<'a, T> {
        let (slot, generation) = (self.slot.clone(), self.generation);
        let reply = recorded(&self.health.clone(), send(&mut self.conn));
        Box::pin(async move {
            let reply = reply.await;
            if let Err(e) = &reply
                && (e.is_unrecoverable_error() || e.is_timeout())
            {
                slot.drop_broken(generation).await;
            }
            reply
        })
    }
}

/// A Redis Cluster: one multiplexed connection per node, shared by every
/// caller (the cluster client reconnects and re-reads the slot map itself).
#[derive(Clone)]
pub struct ClusterPool {
    client: ClusterClient,
    conn: Arc<tokio::sync::RwLock<Option<ClusterConnection>>>,
    health: Arc<Health>,
    wait: Wait,
}

/// After this long with every request failing for want of an answer
/// (timeouts, refused connections, `CLUSTERDOWN`), the next
/// [`Pool::get`] opens a new cluster connection from the seed nodes. The
/// client follows redirects and re-reads the slot map by itself, but was
/// seen to keep timing out after a second failover in a row while the
/// cluster was whole again.
const RESET_AFTER_MS: i64 = 3_000;

/// How long [`Connection::replicate`] stops waiting after a `WAIT` found
/// a master without its replicas.
const UNREPLICATED_BACKOFF_MS: i64 = 10_000;

/// Unanswered requests further apart than this are two outages.
const OUTAGE_GAP_MS: i64 = 10_000;

/// How long before this process's first unanswered request an outage may
/// have begun: a scheduler node asks every Redis (master) something at
/// least every claim tick (1 s), an executor every quarter lease.
const OUTAGE_SLACK_MS: i64 = 1_000;

/// After this process's last unanswered request, how long beyond a lease
/// an executor has to renew it before its score is trusted again. Its own
/// client may see the outage end later than this process did (a slot map
/// re-read, a replica promoted a moment later, [`RESET_AFTER_MS`] to
/// replace a stuck connection), then wait a renewal period: seen on two
/// cores under 200 jobs a second, 5 s was not enough.
const RENEW_AFTER_OUTAGE_MS: i64 = 10_000;

/// The connection's health: since when requests fail without an answer (0:
/// they do not), when this process's last outage (requests unanswered, no
/// more than [`OUTAGE_GAP_MS`] apart) began and last failed, and until when
/// a master is known to lack its replicas.
#[derive(Default)]
pub struct Health {
    failing_since_ms: std::sync::atomic::AtomicI64,
    outage: std::sync::Mutex<Outage>,
    unreplicated_until_ms: std::sync::atomic::AtomicI64,
}

#[derive(Default, Clone, Copy)]
struct Outage {
    began_ms: i64,
    last_ms: i64,
}

impl Health {
    /// Notes the outcome of a request sent at `sent_ms`.
    fn record<T>(&self, result: &RedisResult<T>, sent_ms: i64) {
        use std::sync::atomic::Ordering::Relaxed;
        match result {
            Err(e) if unanswered(e) => {
                let now = crate::clock::now_ms();
                let _ = self
                    .failing_since_ms
                    .compare_exchange(0, now, Relaxed, Relaxed);
                self.note_outage(sent_ms, now);
            }
            Err(e) if slot_unserved(e) => {
                self.failing_since_ms.store(0, Relaxed);
                self.note_outage(sent_ms, crate::clock::now_ms());
            }
            _ => self.failing_since_ms.store(0, Relaxed),
        }
    }

    /// A request sent at `sent_ms` went unanswered, as known at `now`. The
    /// outage began before the first such request was sent: up to
    /// [`OUTAGE_SLACK_MS`] before, as a process may not have asked the
    /// dead node anything for that long.
    fn note_outage(&self, sent_ms: i64, now: i64) {
        let mut outage = self.outage.lock().expect("outage lock");
        let began = sent_ms - OUTAGE_SLACK_MS;
        if sent_ms - outage.last_ms > OUTAGE_GAP_MS {
            outage.began_ms = began;
        } else {
            outage.began_ms = outage.began_ms.min(began);
        }
        outage.last_ms = outage.last_ms.max(now);
    }

    /// The registry score below which an executor's lease of `lease_ms`
    /// has run out, as of `now`: `now - lease_ms`, except just after an
    /// outage this process saw. Executors could not renew while Redis did
    /// not answer, so until they had a lease and [`RENEW_AFTER_OUTAGE_MS`]
    /// to renew after it, only leases that ran out before the outage began
    /// count as run out.
    pub fn lease_cutoff(&self, now: i64, lease_ms: i64) -> i64 {
        let outage = *self.outage.lock().expect("outage lock");
        let cutoff = now - lease_ms;
        if outage.last_ms == 0 || now - outage.last_ms > lease_ms + RENEW_AFTER_OUTAGE_MS {
            cutoff
        } else {
            cutoff.min(outage.began_ms - lease_ms)
        }
    }

    /// Whether requests have failed unanswered for [`RESET_AFTER_MS`].
    fn stuck(&self) -> bool {
        let since = self
            .failing_since_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        since != 0 && crate::clock::now_ms() - since >= RESET_AFTER_MS
    }
}

/// An error that says no node answered (rather than a node's answer).
fn unanswered(e: &redis::RedisError) -> bool {
    e.is_timeout()
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_cluster_error()
        || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown)
}

/// An answer that says the key's slot has no master serving it now, or
/// moved (a failover or a resharding under way: `CLUSTERDOWN`,
/// `MASTERDOWN`, `TRYAGAIN`, `MOVED`, `ASK`, also inside an aborted
/// transaction): part of an outage for [`Health::lease_cutoff`], though a
/// node answered.
fn slot_unserved(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    moved(e)
        || ["ClusterDown", "CLUSTERDOWN", "MasterDown", "MASTERDOWN"]
            .iter()
            .any(|sign| text.contains(sign))
}

/// How [`Connection::replicate`] waits for replicas (`WAIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub replicas: u32,
    pub timeout_ms: u64,
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
            Pool::Single(pool) => pool.get().await,
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

/// `reply`, its outcome noted in `health` (an unanswered request is part
/// of an outage).
fn recorded<'a, T: Send + 'a>(
    health: &Arc<Health>,
    reply: RedisFuture<'a, T>,
) -> RedisFuture<'a, T> {
    let health = health.clone();
    let sent = crate::clock::now_ms();
    Box::pin(async move {
        let reply = reply.await;
        health.record(&reply, sent);
        reply
    })
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

/// A pipeline on a cluster: as it is when its commands keep to one slot (a
/// transaction must), otherwise split by slot (see the module's comment).
async fn cluster_pipeline(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    let slots: Vec<Option<Slot>> = pipeline.cmd_iter().map(slot_of).collect();
    let groups = group_by_slot(&slots);
    if groups.len() <= 1 {
        return one_slot_pipeline(conn, pipeline, offset, count).await;
    }
    if pipeline.is_transaction() {
        let kind: redis::ErrorKind = redis::ServerErrorKind::CrossSlot.into();
        return Err(redis::RedisError::from((
            kind,
            "a transaction spans several hash slots",
        )));
    }
    let commands: Vec<&Cmd> = pipeline.cmd_iter().collect();
    let parts = groups.iter().map(|indexes| {
        let mut part = redis::pipe();
        for i in indexes {
            part.add_command(commands[*i].clone());
        }
        let mut conn = conn.clone();
        async move {
            let n = part.len();
            conn.req_packed_commands(&part, 0, n).await
        }
    });
    let replies = futures_util::future::try_join_all(parts).await?;
    let mut ordered: Vec<Option<Value>> = vec![None; commands.len()];
    for (indexes, values) in groups.iter().zip(replies) {
        for (i, value) in indexes.iter().zip(values) {
            ordered[*i] = Some(value);
        }
    }
    Ok(ordered
        .into_iter()
        .skip(offset)
        .take(count)
        .map(|v| v.unwrap_or(Value::Nil))
        .collect())
}

/// A pipeline of one slot. The cluster client follows `MOVED` and `ASK`
/// for single commands and plain pipelines, but a transaction whose slot
/// moved (a failover, a resharding) comes back aborted, every command
/// refused with `MOVED`, `ASK` or `TRYAGAIN`, nothing applied: then one
/// plain command of the slot teaches the client where the slot is, and the
/// transaction is sent again, for up to [`SLOT_SETTLES`].
async fn one_slot_pipeline(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    let started = std::time::Instant::now();
    let mut attempt = 0u64;
    loop {
        let reply = conn.req_packed_commands(pipeline, offset, count).await;
        let redirected = matches!(&reply, Err(e) if pipeline.is_transaction() && moved(e));
        if !redirected || started.elapsed() >= SLOT_SETTLES {
            return reply;
        }
        attempt += 1;
        if let Some(key) = pipeline.cmd_iter().find_map(first_key) {
            let _: RedisResult<Value> = redis::cmd("EXISTS").arg(key).query_async(conn).await;
        }
        tokio::time::sleep(Duration::from_millis((50 * attempt).min(500))).await;
    }
}

/// How long a transaction refused for its slot's move is retried: a
/// failover's new master is known within moments, but a slot being
/// migrated (resharding) answers `ASK` for the keys already moved, and a
/// transaction over keys on both sides can only wait until the last key
/// moved.
const SLOT_SETTLES: Duration = Duration::from_secs(5);

/// Whether an error is (or holds) a `MOVED` or `ASK` redirect, or a
/// `TRYAGAIN` (keys of one command split by a slot's migration).
fn moved(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::Server(
            redis::ServerErrorKind::Moved
                | redis::ServerErrorKind::Ask
                | redis::ServerErrorKind::TryAgain
        )
    ) || {
        let text = e.to_string();
        text.contains("Moved")
            || text.contains("MOVED")
            || text.contains("Ask:")
            || text.contains("TRYAGAIN")
            || text.contains("TryAgain")
    }
}

/// Indexes of the commands of each slot, in order of first appearance; a
/// command without a key goes with the first group.
fn group_by_slot(slots: &[Option<Slot>]) -> Vec<Vec<usize>> {
    let mut order: Vec<Vec<usize>> = Vec::new();
    let mut of_slot: HashMap<Slot, usize> = HashMap::new();
    let mut keyless = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        match slot {
            Some(slot) => {
                let g = *of_slot.entry(*slot).or_insert_with(|| {
                    order.push(Vec::new());
                    order.len() - 1
                });
                order[g].push(i);
            }
            None => keyless.push(i),
        }
    }
    match order.first_mut() {
        Some(first) => {
            first.extend(keyless);
            first.sort_unstable();
        }
        None if !keyless.is_empty() => order.push(keyless),
        None => {}
    }
    order
}

/// An `EVALSHA` of `script` with `numkeys` keys, to which the caller adds
/// the keys and arguments; run it with [`run_script`]. Arguments go
/// straight into the command's one buffer, where a
/// [`redis::ScriptInvocation`] allocates each and copies them all once
/// more: it matters for scripts called with thousands of them.
///
/// `capacity`, (arguments, bytes), is what the caller expects to add: the
/// command's buffers are made that large at once, where growing them by
/// doubling touches (and has the kernel zero) about twice the memory.
pub fn script_cmd(script: &redis::Script, numkeys: usize, capacity: (usize, usize)) -> Cmd {
    let (args, bytes) = capacity;
    let mut cmd = Cmd::with_capacity(args + 3, bytes + 64);
    cmd.arg("EVALSHA");
    cmd.arg(script.get_hash()).arg(numkeys);
    cmd
}

/// Runs a command from [`script_cmd`]. When Redis does not know the script
/// (a restart, a replica promoted, `SCRIPT FLUSH`) it is loaded and the
/// command sent again, as [`redis::ScriptInvocation`] does.
pub async fn run_script<T: redis::FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &redis::Script,
    cmd: &Cmd,
) -> RedisResult<T> {
    match cmd.query_async(conn).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        other => other,
    }
}

/// The slot of a command's first key (see [`first_key`]).
fn slot_of(cmd: &Cmd) -> Option<Slot> {
    first_key(cmd).map(Slot::for_key)
}

/// A command's first key: the argument after the command name, or after
/// `numkeys` for scripts; `None` for a command without a key.
fn first_key(cmd: &Cmd) -> Option<Vec<u8>> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .filter_map(|a| match a {
            redis::Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
        .collect();
    let name = args.first()?.to_ascii_uppercase();
    let key = match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let numkeys: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
            if numkeys == 0 {
                return None;
            }
            args.get(3)?
        }
        b"PING" | b"TIME" | b"SCRIPT" | b"INFO" | b"MULTI" | b"EXEC" | b"WAIT" | b"CLUSTER"
        | b"DBSIZE" | b"FLUSHDB" | b"ECHO" => return None,
        _ => args.get(1)?,
    };
    Some(key.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_judged_by_their_scores_except_just_after_an_outage() {
        let lease = 2_000;
        let health = Health::default();
        assert_eq!(
            health.lease_cutoff(100_000, lease),
            98_000,
            "no outage seen"
        );
        // Requests sent from 100 s on went unanswered, the last known at
        // 109 s (a client's retries and timeouts answer late); gaps < 10 s:
        // one outage, which may have begun a second before the first.
        for (sent, known) in [(100_000, 105_000), (102_000, 107_000), (104_000, 109_000)] {
            health.note_outage(sent, known);
        }
        let began = 100_000 - OUTAGE_SLACK_MS;
        // Until a lease and the renewal allowance after the last one, only
        // leases that ran out before the outage began have run out.
        assert_eq!(health.lease_cutoff(109_500, lease), began - lease);
        let until = 109_000 + lease + RENEW_AFTER_OUTAGE_MS;
        assert_eq!(health.lease_cutoff(until, lease), began - lease);
        // Then scores count again.
        assert_eq!(health.lease_cutoff(until + 1, lease), until + 1 - lease);
        // A failure long after is a new outage, judged from its own start.
        health.note_outage(200_000, 201_000);
        assert_eq!(
            health.lease_cutoff(201_000, lease),
            200_000 - OUTAGE_SLACK_MS - lease
        );
    }

    #[test]
    fn commands_group_by_the_slot_of_their_first_key() {
        let mut pipe = redis::pipe();
        pipe.zcard("ns:{p0}:due")
            .zcard("ns:{p1}:due")
            .hget("ns:{p0}:job:1", "def")
            .cmd("PING");
        let slots: Vec<Option<Slot>> = pipe.cmd_iter().map(slot_of).collect();
        assert_eq!(slots[0], Some(Slot::for_key("p0")));
        assert_eq!(slots[3], None);
        assert_eq!(group_by_slot(&slots), vec![vec![0, 2, 3], vec![1]]);
    }

    #[test]
    fn a_script_is_routed_by_its_first_key() {
        let script = redis::Script::new("return 1");
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(1).arg("ns:{p7}:term").arg(1);
        assert_eq!(slot_of(&cmd), Some(Slot::for_key("p7")));
        let mut keyless = redis::cmd("EVALSHA");
        keyless.arg(script.get_hash()).arg(0);
        assert_eq!(slot_of(&keyless), None);
    }
}
