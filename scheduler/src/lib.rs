//! rondo-scheduler: one scheduler node.
//!
//! Every node joins ZooKeeper and takes part in the leader election, loads
//! the fires assigned to it into its millisecond wheel and dispatches them
//! at their instant, reacts to how triggers end, and serves the admin API.
//! The leader, under its fencing term, also claims due jobs from the Redis
//! due sets and assigns their fires to the nodes' rings, moves dead nodes'
//! rings, rebuilds an empty Redis, dispatches due retries and reaps lost
//! triggers. `scheduler/README.md` explains the algorithm (claim → assign →
//! load → fire → ack → react) and its failure rules.
//!
//! # Layout
//!
//! * [`cluster`]: ZooKeeper membership, election, the fencing term.
//! * [`leader`]: everything done under a term, as one task set: the
//!   [`claim`](leader::claim), [`assign`](leader::assign)ment,
//!   [`failover`](leader::failover) of dead nodes' rings,
//!   [`bootstrap`](leader::bootstrap) of an empty Redis, due
//!   [`retry`](leader::retry)s and the [`reaper`](leader::reaper).
//! * [`node`]: what every node does with its fires: load, wheel, fire, ack.
//! * [`monitor`]: reactions to how triggers end (retries, child jobs,
//!   alarms); [`alarm`]: e-mail and webhook alarms.
//! * [`store`]: the scheduler's state in Redis (jobs, groups, due sets,
//!   rings; triggers after dispatch), Lua scripts in `lua/`.
//! * [`api`]: the admin HTTP API, one file per resource.
//!
//! [`start`] runs a node inside the caller's runtime (tests start several);
//! [`run`] is what the binary calls. [`Parts`] is a node connected but not
//! running, from which tests build the API without starting a node.

pub mod alarm;
pub mod api;
pub mod cluster;
pub mod leader;
pub mod monitor;
pub mod node;
pub mod store;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rondo_core::Config;
use rondo_dispatcher::Dispatcher;
use rondo_history::History;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use cluster::{Cluster, ClusterView};
use leader::Leader;
use leader::claim::Claimer;
use leader::reaper::Reaper;
use leader::retry::Retries;
use monitor::Monitor;
use node::Firing;
use store::Store;
use store::triggers::TriggerStore;

/// A running node.
pub struct NodeHandle {
    pub node_id: String,
    pub api_addr: SocketAddr,
    done: JoinHandle<anyhow::Result<()>>,
}

impl NodeHandle {
    /// Waits until the node has stopped and drained: after its token is
    /// cancelled, or after a core task failed (then `Err`, naming it).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.done.await.context("the node's supervisor panicked")?
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

/// A node connected to its services but not running: every part
/// [`start`] runs, built once.
pub struct Parts {
    pub config: Config,
    pub node_id: String,
    pub store: Store,
    pub triggers: TriggerStore,
    pub dispatcher: Arc<Dispatcher>,
    pub history: History,
    pub view: ClusterView,
    pub firing: Arc<Firing>,
    pub claimer: Arc<Claimer>,
    pub monitor: Arc<Monitor>,
    pub auth: Arc<api::Auth>,
    cluster: Cluster,
    leader: Leader,
}

impl Parts {
    /// Connects to Redis, RabbitMQ and (lazily) MySQL, and builds the
    /// node's parts; nothing runs yet.
    pub async fn connect(
        config: Config,
        node_id: String,
        api_addr: String,
    ) -> anyhow::Result<Parts> {
        let names = config.names();
        let pool = rondo_core::redis::pool(&config.redis).context("redis pool")?;
        let store = Store::new(pool.clone(), names.clone());
        let redis = pool.clone();
        let triggers = TriggerStore::new(pool.clone(), names.clone(), config.monitor.handled_ttl_s);
        let dispatcher = Arc::new(
            Dispatcher::connect(&config, pool)
                .await
                .context("connecting to RabbitMQ")?,
        );
        let history = History::lazy(&config.mysql).context("mysql")?;
        let (cluster, view) = Cluster::new(
            config.zookeeper.clone(),
            names,
            node_id.clone(),
            api_addr,
            store.clone(),
        );
        let scheduler = config.scheduler.clone();
        let claimer = Claimer::new(
            store.clone(),
            scheduler.clone(),
            config.zookeeper.session_timeout_ms,
            view.clone(),
            node_id.clone(),
            history.clone(),
        );
        let retries = Retries::new(triggers.clone(), store.clone(), dispatcher.clone());
        let reaper = Reaper::new(&config, triggers.clone(), store.clone(), dispatcher.clone());
        let leader = Leader::new(view.clone(), claimer.clone(), retries, reaper);
        let firing = Firing::new(
            store.clone(),
            dispatcher.clone(),
            node_id.clone(),
            scheduler,
        );
        let monitor = Monitor::new(&config, triggers.clone(), store.clone(), dispatcher.clone());
        let auth = Arc::new(api::Auth::new(
            config.auth.clone(),
            history.clone(),
            redis,
            config.names(),
        ));
        Ok(Parts {
            config,
            node_id,
            store,
            triggers,
            dispatcher,
            history,
            view,
            firing,
            claimer,
            monitor,
            auth,
            cluster,
            leader,
        })
    }

    /// The API's state over these parts.
    pub fn app_state(&self) -> api::AppState {
        api::AppState {
            store: self.store.clone(),
            triggers: self.triggers.clone(),
            dispatcher: self.dispatcher.clone(),
            events: self.dispatcher.events().clone(),
            view: self.view.clone(),
            node: self.node_id.clone(),
            history: self.history.clone(),
            firing: self.firing.clone(),
            claimer: self.claimer.clone(),
            retention_days: self.config.persist.retention_days,
            default_zone: self.config.default_zone(),
            report_zone: self.config.report_tz(),
            load_ahead_ms: self.config.scheduler.load_ahead_ms,
            dedupe_ttl_s: self.config.executor.dedupe_ttl_s,
            auth: self.auth.clone(),
            metrics_public: self.config.scheduler.metrics_public,
            // Checked when the config was loaded.
            xxl_address_rule: Arc::new(
                rondo_core::destination::Destinations::parse(
                    "xxl.address_allow",
                    &self.config.xxl.address_allow,
                )
                .unwrap_or_default(),
            ),
            // Checked when the config loaded; a list that does not parse
            // would allow nothing.
            mail_domains: rondo_core::mail_domains::MailDomains::parse(
                "alarm.email_allow",
                &self.config.alarm.email_allow,
                &self.config.alarm.smtp_from,
            )
            .unwrap_or_default(),
        }
    }
}

/// A core task's name and how it ended.
type Ended = (&'static str, anyhow::Result<()>);

/// Starts a node: binds the API, connects to the services, joins the
/// cluster, runs its core tasks (leader duties, firing, monitor, API).
/// Returns once it is serving; it stops when `shutdown` is cancelled, or by
/// itself when a core task fails ([`NodeHandle::wait`] then says which).
pub async fn start(config: Config, shutdown: CancellationToken) -> anyhow::Result<NodeHandle> {
    rondo_core::metrics::install();
    config.zookeeper.check().map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(&config.scheduler.api_addr)
        .await
        .with_context(|| format!("binding the API to {}", config.scheduler.api_addr))?;
    let api_addr = listener.local_addr()?;
    let node = node_id(&config, api_addr);
    let grace = Duration::from_millis(config.scheduler.shutdown_grace_ms);
    let parts = Parts::connect(config, node.clone(), api_addr.to_string()).await?;
    let router = api::router(parts.app_state());
    // Migrates the schema (users live in MySQL) and creates the first
    // admin from config on a fresh install; retried until MySQL answers.
    api::auth::spawn_bootstrap(
        parts.history.clone(),
        parts.config.auth.clone(),
        shutdown.clone(),
    );
    let Parts {
        cluster,
        leader,
        firing,
        monitor,
        dispatcher,
        view,
        ..
    } = parts;

    let span = tracing::info_span!("node", node = %node);
    // The node leaves ZooKeeper last: while it drains, it still counts as
    // alive, so the leader does not move the ring entries it is firing.
    let leave = CancellationToken::new();
    let membership = tokio::spawn(cluster.run(leave.clone()).instrument(span.clone()));
    let fires = TaskTracker::new();
    let mut core: JoinSet<Ended> = JoinSet::new();
    let (stop, tracker) = (shutdown.clone(), fires.clone());
    core.spawn(async move { ("leader", leader.run(stop).await) }.instrument(span.clone()));
    let stop = shutdown.clone();
    let nodes = view.nodes.clone();
    core.spawn(
        async move {
            firing.run(nodes, stop, tracker).await;
            ("firing", Ok(()))
        }
        .instrument(span.clone()),
    );
    let (stop, alarms) = (shutdown.clone(), monitor.clone());
    core.spawn(
        async move {
            monitor.run(stop).await;
            ("monitor", Ok(()))
        }
        .instrument(span.clone()),
    );
    let stop = shutdown.clone();
    core.spawn(
        async move {
            alarms.send_alarms(stop).await;
            ("alarms", Ok(()))
        }
        .instrument(span.clone()),
    );
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    let server =
        axum::serve(listener, service).with_graceful_shutdown(shutdown.clone().cancelled_owned());
    core.spawn(async move { ("api", server.await.context("serving the API")) });
    tracing::info!(node = %node, api = %api_addr, "scheduler node started");

    let drain = Drain {
        core,
        membership,
        shutdown,
        leave,
        fires,
        grace,
        dispatcher,
    };
    let done = tokio::spawn(drain.supervise().instrument(span));
    Ok(NodeHandle {
        node_id: node,
        api_addr,
        done,
    })
}

/// What the node's supervisor watches and drains, in order.
struct Drain {
    core: JoinSet<Ended>,
    membership: JoinHandle<()>,
    shutdown: CancellationToken,
    leave: CancellationToken,
    fires: TaskTracker,
    grace: Duration,
    dispatcher: Arc<Dispatcher>,
}

impl Drain {
    /// Runs until `shutdown`, or until a core task ends before it (a
    /// failure: the node then shuts itself down); then drains in order.
    async fn supervise(mut self) -> anyhow::Result<()> {
        let mut failure = None;
        let mut membership = Some(self.membership);
        tokio::select! {
            biased;
            () = self.shutdown.cancelled() => {}
            // A task may end because shutdown just fired: only an end
            // before it is a failure.
            Some(joined) = self.core.join_next() => {
                failure = failed(joined, self.shutdown.is_cancelled());
            }
            _ = async { membership.as_mut().expect("membership task").await } => {
                membership = None;
                failure = Some(anyhow::anyhow!("the zookeeper membership task ended"));
            }
        }
        if let Some(e) = &failure {
            tracing::error!(
                error = format!("{e:#}"),
                "a core task failed; the node stops"
            );
        }
        // 1. Stop claiming, loading and firing; the API stops accepting.
        self.shutdown.cancel();
        while let Some(joined) = self.core.join_next().await {
            let stopped = failed(joined, true);
            failure = failure.or(stopped);
        }
        // 2. Finish the publishes in flight (each acks its ring member).
        self.fires.close();
        if tokio::time::timeout(self.grace, self.fires.wait())
            .await
            .is_err()
        {
            tracing::warn!("grace period over with fires still in flight; they stay in the ring");
        }
        // 3. Leave: the leader moves what is left in this node's rings.
        self.leave.cancel();
        if let Some(membership) = membership {
            let _ = membership.await;
        }
        self.dispatcher.close().await;
        tracing::info!("scheduler node stopped");
        failure.map_or(Ok(()), Err)
    }
}

/// The failure a core task's end means, if any: an error or a panic, or,
/// before shutdown (`stopping` false), any end at all.
fn failed(joined: Result<Ended, tokio::task::JoinError>, stopping: bool) -> Option<anyhow::Error> {
    match joined {
        Ok((_, Ok(()))) if stopping => None,
        Ok((name, Ok(()))) => Some(anyhow::anyhow!("core task {name} ended on its own")),
        Ok((name, Err(e))) => Some(e.context(format!("core task {name} failed"))),
        Err(e) => Some(anyhow::anyhow!("a core task panicked: {e}")),
    }
}

/// Runs a node until `shutdown`, then drains. `Err` when it could not
/// start or a core task failed.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    start(config, shutdown).await?.wait().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_task_ending_before_shutdown_is_a_failure_and_after_it_is_not() {
        assert!(failed(Ok(("firing", Ok(()))), true).is_none());
        let early = failed(Ok(("firing", Ok(()))), false).expect("a failure");
        assert!(format!("{early:#}").contains("firing"));
        let err = failed(Ok(("api", Err(anyhow::anyhow!("accept")))), true).expect("a failure");
        assert!(format!("{err:#}").contains("core task api failed"));
    }

    #[tokio::test]
    async fn a_panicking_core_task_is_a_failure() {
        let mut set: JoinSet<Ended> = JoinSet::new();
        set.spawn(async { panic!("bug") });
        let joined = set.join_next().await.expect("one task");
        assert!(failed(joined, true).is_some());
    }
}
