//! rondo-scheduler: one scheduler node.
//!
//! Every node joins ZooKeeper, takes part in the leader election, loads the
//! fires assigned to it into its millisecond wheel and dispatches them at
//! their instant; the leader also claims due jobs from the Redis due sets and
//! assigns their fires to the nodes' rings. Every node serves the admin API.
//! See `scheduler/README.md` for the algorithm (claim → assign → load → fire
//! → ack) and its failure rules.
//!
//! # Layout
//!
//! * [`bootstrap`]: rebuilding an empty Redis from MySQL before claiming.
//! * [`cluster`]: ZooKeeper membership, election, the fencing term.
//! * [`claim`]: the leader's claim loop and the node-balancing rule.
//! * [`failover`]: moving dead nodes' rings to live nodes.
//! * [`store`]: jobs, groups, due sets and rings in Redis (Lua in `lua/`).
//! * [`wheel`]: the in-memory millisecond wheel (pure).
//! * [`firing`]: loading rings into the wheel, firing, acking.
//! * [`alarm`]: failure alarms by e-mail (SMTP) and webhook.
//! * [`monitor`]: reactions to how triggers end (retry, child jobs,
//!   alarms), lost triggers and dead executors' queues.
//! * [`api`]: the admin HTTP API.
//!
//! [`start`] runs a node inside the caller's runtime (tests start several);
//! [`run`] is what the binary calls.

pub mod alarm;
pub mod api;
pub mod bootstrap;
pub mod claim;
pub mod cluster;
pub mod failover;
pub mod firing;
pub mod monitor;
pub mod store;
pub mod wheel;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rondo_core::Config;
use rondo_dispatcher::Dispatcher;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// A running node.
pub struct NodeHandle {
    pub node_id: String,
    pub api_addr: SocketAddr,
    done: JoinHandle<()>,
}

impl NodeHandle {
    /// Waits until the node has shut down (after its token is cancelled).
    pub async fn wait(self) {
        let _ = self.done.await;
    }
}

/// The node id: configured, or `<hostname>-<api port>`.
fn node_id(config: &Config, addr: SocketAddr) -> String {
    if !config.scheduler.node_id.is_empty() {
        return config.scheduler.node_id.clone();
    }
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "node".into());
    format!("{host}-{}", addr.port())
}

/// Starts a node: binds the API, connects to the services, joins the cluster.
/// Returns once it is serving; it stops when `shutdown` is cancelled.
pub async fn start(config: Config, shutdown: CancellationToken) -> anyhow::Result<NodeHandle> {
    let names = config.names();
    let pool = rondo_core::redis::pool(&config.redis).context("redis pool")?;
    let store = store::Store::new(pool.clone(), names.clone());
    let listener = tokio::net::TcpListener::bind(&config.scheduler.api_addr)
        .await
        .with_context(|| format!("binding the API to {}", config.scheduler.api_addr))?;
    let api_addr = listener.local_addr()?;
    let node = node_id(&config, api_addr);
    let dispatcher = Arc::new(
        Dispatcher::connect(&config, pool)
            .await
            .context("connecting to RabbitMQ")?,
    );
    let history = rondo_history::History::lazy(&config.mysql).context("mysql")?;

    let (cluster, view) = cluster::Cluster::new(
        config.zookeeper.clone(),
        names,
        node.clone(),
        api_addr.to_string(),
        store.clone(),
    );
    let claimer = claim::Claimer::new(
        store.clone(),
        config.scheduler.clone(),
        view.clone(),
        node.clone(),
        history.clone(),
    );
    let monitor = monitor::Monitor::new(&config, store.clone(), dispatcher.clone());
    let role = view.role.clone();
    let firing = firing::Firing::new(
        store.clone(),
        dispatcher.clone(),
        node.clone(),
        config.scheduler.clone(),
    );
    let state = api::AppState {
        store,
        dispatcher: dispatcher.clone(),
        view,
        node: node.clone(),
        history,
        firing: firing.clone(),
        claimer: claimer.clone(),
        monitor: monitor.clone(),
    };

    let span = tracing::info_span!("node", node = %node);
    // The node leaves ZooKeeper last: while it drains, it still counts as
    // alive, so the leader does not move the ring entries it is firing.
    let leave = CancellationToken::new();
    let membership = tokio::spawn(cluster.run(leave.clone()).instrument(span.clone()));
    let tasks = TaskTracker::new();
    let fires = TaskTracker::new();
    tasks.spawn(claimer.run(shutdown.clone()).instrument(span.clone()));
    tasks.spawn(
        firing
            .run(shutdown.clone(), fires.clone())
            .instrument(span.clone()),
    );
    tasks.spawn(
        monitor
            .clone()
            .run(shutdown.clone())
            .instrument(span.clone()),
    );
    tasks.spawn(
        monitor
            .clone()
            .run_retries(role.clone(), shutdown.clone())
            .instrument(span.clone()),
    );
    tasks.spawn(
        monitor
            .clone()
            .run_reaper(role, shutdown.clone())
            .instrument(span.clone()),
    );
    let server = axum::serve(listener, api::router(state))
        .with_graceful_shutdown(shutdown.clone().cancelled_owned());
    tasks.spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "api server failed");
        }
    });
    tasks.close();
    tracing::info!(node = %node, api = %api_addr, "scheduler node started");

    let grace = Duration::from_millis(config.scheduler.shutdown_grace_ms);
    let done = tokio::spawn(
        async move {
            shutdown.cancelled().await;
            // 1. Stop claiming, loading and firing; the API stops accepting.
            tasks.wait().await;
            // 2. Finish the publishes in flight (each acks its ring member).
            fires.close();
            if tokio::time::timeout(grace, fires.wait()).await.is_err() {
                tracing::warn!(
                    "grace period over with fires still in flight; they stay in the ring"
                );
            }
            // 3. Leave: the leader moves what is left in this node's rings.
            leave.cancel();
            let _ = membership.await;
            dispatcher.close().await;
            tracing::info!("scheduler node stopped");
        }
        .instrument(span),
    );
    Ok(NodeHandle {
        node_id: node,
        api_addr,
        done,
    })
}

/// Runs a node until `shutdown`, then drains.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    start(config, shutdown).await?.wait().await;
    Ok(())
}
