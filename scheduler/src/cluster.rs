//! ZooKeeper membership, leader election and the fencing term.
//!
//! * Each node holds an ephemeral `/nodes/<node>` with its API address.
//! * Election is the standard recipe: an ephemeral-sequential
//!   `/election/n_`; the lowest sequence leads, every other node watches its
//!   predecessor only (no herd effect).
//! * A new leader increments `/term` with a versioned compare-and-set, raises
//!   every partition's term in Redis (so a deposed leader's scripts are
//!   refused), writes the ephemeral `/leader`, and only then claims.
//! * When the session is lost (disconnected) the node stops leading at once;
//!   when it expires the node joins again with a new session.
//!
//! The outcome is published on watch channels: the node's [`Role`], the
//! live node list and the session timeout ZooKeeper granted, read by the
//! claim loop and the API.
//!
//! Why one file of over 500 lines: membership, election and the term are one
//! ZooKeeper session's work, and a session event changes all three at once.

use std::time::Duration;

use rondo_core::backoff::Backoff;
use rondo_core::config::ZkConfig;
use rondo_core::{Error, Names};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use zookeeper_client::{Acls, Client, CreateMode, SessionState};

use crate::store::Store;

/// What this node is right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Follower,
    /// Leading with this term; Redis partitions accept it.
    Leader {
        term: u64,
    },
}

/// The content of `/leader` and of the API's cluster status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LeaderInfo {
    pub node: String,
    pub term: u64,
}

/// What the rest of the node reads.
#[derive(Clone)]
pub struct ClusterView {
    pub role: watch::Receiver<Role>,
    /// Live node ids, sorted.
    pub nodes: watch::Receiver<Vec<String>>,
    pub leader: watch::Receiver<Option<LeaderInfo>>,
    /// The claimer reports a term Redis refused; a leader holding that term
    /// resigns.
    pub refused_term: Arc<watch::Sender<u64>>,
    /// The session timeout ZooKeeper granted (ms; 0 before the first
    /// session). A server clamps the one asked for to its own
    /// `minSessionTimeout`..`maxSessionTimeout`: a dead leader is found
    /// after this one, so the claim runs ahead of it.
    pub session_ms: watch::Receiver<u64>,
}

struct Channels {
    role: watch::Sender<Role>,
    nodes: watch::Sender<Vec<String>>,
    leader: watch::Sender<Option<LeaderInfo>>,
    session_ms: watch::Sender<u64>,
}

pub struct Cluster {
    config: ZkConfig,
    names: Names,
    node: String,
    api_addr: String,
    store: Store,
    tx: Channels,
    refused_term: watch::Receiver<u64>,
}

/// Why a session ended.
enum SessionEnd {
    Shutdown,
    Lost,
}

/// Who may touch the znodes a node makes: with `zookeeper.auth`, the
/// digest identity it signed in with only; without, anyone (loopback only,
/// `ZkConfig::check`).
fn acls(config: &ZkConfig) -> Acls<'static> {
    if config.auth.is_empty() {
        Acls::anyone_all()
    } else {
        Acls::creator_all()
    }
}

fn zk_err(what: &str, e: zookeeper_client::Error) -> Error {
    Error::unavailable(format!("zookeeper {what}: {e}"))
}

impl Cluster {
    pub fn new(
        config: ZkConfig,
        names: Names,
        node: String,
        api_addr: String,
        store: Store,
    ) -> (Self, ClusterView) {
        let (role, role_rx) = watch::channel(Role::Follower);
        let (nodes, nodes_rx) = watch::channel(Vec::new());
        let (leader, leader_rx) = watch::channel(None);
        let (refused_tx, refused_term) = watch::channel(0);
        let (session_ms, session_rx) = watch::channel(0);
        let view = ClusterView {
            role: role_rx,
            nodes: nodes_rx,
            leader: leader_rx,
            refused_term: Arc::new(refused_tx),
            session_ms: session_rx,
        };
        (
            Cluster {
                config,
                names,
                node,
                api_addr,
                store,
                tx: Channels {
                    role,
                    nodes,
                    leader,
                    session_ms,
                },
                refused_term,
            },
            view,
        )
    }

    /// Joins the cluster and takes part in elections until `shutdown`,
    /// reconnecting after a lost session.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut backoff = Backoff::jittered(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            match self.session(&shutdown).await {
                Ok(SessionEnd::Shutdown) => break,
                Ok(SessionEnd::Lost) => {
                    tracing::warn!(node = %self.node, "zookeeper session lost; joining again")
                }
                Err(e) => {
                    tracing::warn!(node = %self.node, error = %e, "zookeeper session failed; retrying")
                }
            }
            self.step_down();
            if !backoff.wait(&shutdown).await {
                break;
            }
        }
        self.step_down();
    }

    fn step_down(&self) {
        if *self.tx.role.borrow() != Role::Follower {
            tracing::warn!(node = %self.node, "stepping down as leader");
        }
        self.tx.role.send_replace(Role::Follower);
    }

    async fn connect(&self) -> Result<Client, Error> {
        let timeout = Duration::from_millis(self.config.session_timeout_ms);
        let mut connector = Client::connector()
            .with_session_timeout(timeout)
            .with_connection_timeout(timeout);
        if !self.config.auth.is_empty() {
            connector = connector.with_auth("digest", self.config.auth.as_bytes());
        }
        let persistent = CreateMode::Persistent.with_acls(acls(&self.config));
        let root = connector
            .connect(&self.config.connect)
            .await
            .map_err(|e| zk_err("connect", e))?;
        let granted = u64::try_from(root.session_timeout().as_millis()).unwrap_or(u64::MAX);
        if granted > self.config.session_timeout_ms {
            tracing::warn!(
                asked_ms = self.config.session_timeout_ms,
                granted_ms = granted,
                "ZooKeeper granted a longer session than zookeeper.session_timeout_ms \
                 (its minSessionTimeout, twice its tickTime by default): a dead node is \
                 found that much later; the claim runs ahead of the granted one"
            );
        }
        self.tx.session_ms.send_replace(granted);
        match root.mkdir(&self.names.zk_root(), &persistent).await {
            Ok(()) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => return Err(zk_err("mkdir root", e)),
        }
        if !self.config.auth.is_empty() {
            root.set_acl(&self.names.zk_root(), &Acls::creator_all(), None)
                .await
                .map_err(|e| zk_err("securing the chroot", e))?;
        }
        let client = root
            .chroot(self.names.zk_root())
            .map_err(|_| Error::internal("bad zookeeper chroot"))?;
        for dir in [self.names.zk_nodes(), self.names.zk_election()] {
            match client.create(dir, &[], &persistent).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => return Err(zk_err("create dir", e)),
            }
        }
        match client.create(self.names.zk_term(), b"0", &persistent).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => return Err(zk_err("create term", e)),
        }
        if !self.config.auth.is_empty() {
            // A znode made earlier, open (before `zookeeper.auth` was set,
            // or by anyone who reached ZooKeeper first), is taken over;
            // one this identity may not administer fails the session, so
            // the node never runs on znodes others can rewrite.
            let creator = Acls::creator_all();
            for path in [
                self.names.zk_nodes(),
                self.names.zk_election(),
                self.names.zk_term(),
            ] {
                client
                    .set_acl(path, &creator, None)
                    .await
                    .map_err(|e| zk_err(&format!("securing {path}"), e))?;
            }
        }
        Ok(client)
    }

    /// One ZooKeeper session: register, elect, lead or follow.
    async fn session(&self, shutdown: &CancellationToken) -> Result<SessionEnd, Error> {
        let client = self.connect().await?;
        self.register(&client).await?;
        let ephemeral_seq = CreateMode::EphemeralSequential.with_acls(acls(&self.config));
        let (_, seq) = client
            .create(
                self.names.zk_election_prefix(),
                self.node.as_bytes(),
                &ephemeral_seq,
            )
            .await
            .map_err(|e| zk_err("join election", e))?;
        let me = format!("n_{seq}");
        tracing::info!(node = %self.node, candidate = %me, "joined the election");
        let session_done = CancellationToken::new();
        let members = tokio::spawn(watch_members(
            client.clone(),
            self.names.zk_nodes(),
            self.tx.nodes.clone(),
            session_done.clone(),
        ));
        let leader = tokio::spawn(watch_leader(
            client.clone(),
            self.names.zk_leader(),
            self.tx.leader.clone(),
            session_done.clone(),
        ));
        let end = self.elect(&client, &me, shutdown).await;
        session_done.cancel();
        let _ = tokio::join!(members, leader);
        if matches!(end, Ok(SessionEnd::Shutdown)) {
            self.step_down();
            // Leave at once instead of waiting for the session to expire.
            let _ = client
                .delete(&format!("{}/{me}", self.names.zk_election()), None)
                .await;
            let _ = client.delete(&self.names.zk_node(&self.node), None).await;
        }
        end
    }

    async fn register(&self, client: &Client) -> Result<(), Error> {
        let path = self.names.zk_node(&self.node);
        let ephemeral = CreateMode::Ephemeral.with_acls(acls(&self.config));
        let data = self.api_addr.as_bytes();
        match client.create(&path, data, &ephemeral).await {
            Ok(_) => Ok(()),
            Err(zookeeper_client::Error::NodeExists) => {
                // Left by this node's previous session, not yet expired.
                let _ = client.delete(&path, None).await;
                client
                    .create(&path, data, &ephemeral)
                    .await
                    .map(|_| ())
                    .map_err(|e| zk_err("register", e))
            }
            Err(e) => Err(zk_err("register", e)),
        }
    }

    /// The election loop: lead while lowest, else watch the predecessor.
    async fn elect(
        &self,
        client: &Client,
        me: &str,
        shutdown: &CancellationToken,
    ) -> Result<SessionEnd, Error> {
        let mut state = client.state_watcher();
        loop {
            let mut candidates = client
                .list_children(self.names.zk_election())
                .await
                .map_err(|e| zk_err("list election", e))?;
            candidates.sort();
            let Some(pos) = candidates.iter().position(|c| c == me) else {
                return Ok(SessionEnd::Lost);
            };
            if pos == 0 {
                let term = self.lead(client).await?;
                return self.hold(client, me, term, &mut state, shutdown).await;
            }
            let predecessor = format!("{}/{}", self.names.zk_election(), candidates[pos - 1]);
            let (stat, watcher) = client
                .check_and_watch_stat(&predecessor)
                .await
                .map_err(|e| zk_err("watch", e))?;
            if stat.is_none() {
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(SessionEnd::Shutdown),
                _ = watcher.changed() => {}
                s = state.changed() => match self.ride_out(s, &mut state, shutdown).await {
                    // Connected again, to this member or another: the same
                    // session, so the same place in the election.
                    Reconnect::Connected => {}
                    Reconnect::Lost => return Ok(SessionEnd::Lost),
                    Reconnect::Shutdown => return Ok(SessionEnd::Shutdown),
                },
            }
        }
    }

    /// After a session state change: a terminal state ends the session; a
    /// disconnection (the member the session was on died, or the network
    /// blinked) is waited out while the client reconnects to a member of
    /// the connect string, up to the session timeout. The session, its
    /// ephemeral znodes and so its place in the election survive that;
    /// only an expiry (seen on reconnecting) ends it.
    async fn ride_out(
        &self,
        mut s: SessionState,
        state: &mut zookeeper_client::StateWatcher,
        shutdown: &CancellationToken,
    ) -> Reconnect {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(self.config.session_timeout_ms);
        loop {
            match s {
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                    return Reconnect::Connected;
                }
                SessionState::Disconnected => {}
                _ => return Reconnect::Lost,
            }
            tracing::warn!(node = %self.node, "zookeeper disconnected; waiting for the session to reconnect");
            tokio::select! {
                _ = shutdown.cancelled() => return Reconnect::Shutdown,
                _ = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(node = %self.node, "zookeeper did not reconnect within the session timeout");
                    return Reconnect::Lost;
                }
                next = state.changed() => s = next,
            }
        }
    }

    /// Becomes leader: bumps `/term` (compare-and-set), fences every Redis
    /// partition with it, publishes `/leader`. If a partition already
    /// accepts a higher term (a Redis that outlived a ZooKeeper, or a term
    /// raised by hand), `/term` is lifted above it and the bump retried, so
    /// terms only ever grow.
    async fn lead(&self, client: &Client) -> Result<u64, Error> {
        let mut floor = 0;
        let term = loop {
            let term = self.bump_term(client, floor).await?;
            let mut highest = term;
            for p in 0..self.names.partitions() {
                highest = highest.max(self.store.leader().raise_term(p, term).await?);
            }
            if highest == term {
                break term;
            }
            tracing::warn!(node = %self.node, term, accepted = highest, "redis accepts a higher term; bumping past it");
            floor = highest;
        };
        let info = serde_json::to_vec(&LeaderInfo {
            node: self.node.clone(),
            term,
        })?;
        let ephemeral = CreateMode::Ephemeral.with_acls(acls(&self.config));
        let _ = client.delete(self.names.zk_leader(), None).await;
        client
            .create(self.names.zk_leader(), &info, &ephemeral)
            .await
            .map_err(|e| zk_err("write leader", e))?;
        tracing::info!(node = %self.node, term, "became leader");
        self.tx.role.send_replace(Role::Leader { term });
        Ok(term)
    }

    /// Sets `/term` to max(current, floor) + 1 with a compare-and-set.
    async fn bump_term(&self, client: &Client, floor: u64) -> Result<u64, Error> {
        loop {
            let (data, stat) = client
                .get_data(self.names.zk_term())
                .await
                .map_err(|e| zk_err("read term", e))?;
            let current: u64 = std::str::from_utf8(&data)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            let next = current.max(floor) + 1;
            match client
                .set_data(
                    self.names.zk_term(),
                    next.to_string().as_bytes(),
                    Some(stat.version),
                )
                .await
            {
                Ok(_) => return Ok(next),
                Err(zookeeper_client::Error::BadVersion) => continue,
                Err(e) => return Err(zk_err("bump term", e)),
            }
        }
    }

    /// Whether this session still leads with `term`: its candidate znode is
    /// the lowest and `/term` has not moved.
    async fn still_leads(&self, client: &Client, me: &str, term: u64) -> Result<bool, Error> {
        let mut candidates = client
            .list_children(self.names.zk_election())
            .await
            .map_err(|e| zk_err("list election", e))?;
        candidates.sort();
        if candidates.first().map(String::as_str) != Some(me) {
            return Ok(false);
        }
        let (data, _) = client
            .get_data(self.names.zk_term())
            .await
            .map_err(|e| zk_err("read term", e))?;
        Ok(std::str::from_utf8(&data).ok().map(str::trim) == Some(term.to_string().as_str()))
    }

    /// Leads until the session ends, the claimer resigns, or shutdown. A
    /// disconnected leader stops claiming at once (its session may expire
    /// any moment, and then another node leads); when the client reconnects
    /// with the same session — the member it was on died and another took
    /// it over — it checks that it still holds the lowest candidate znode
    /// and the term, and leads on with the same term: no election, no new
    /// term.
    async fn hold(
        &self,
        client: &Client,
        me: &str,
        term: u64,
        state: &mut zookeeper_client::StateWatcher,
        shutdown: &CancellationToken,
    ) -> Result<SessionEnd, Error> {
        let mut refused = self.refused_term.clone();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(SessionEnd::Shutdown),
                _ = refused.changed() => {
                    if *refused.borrow_and_update() != term {
                        continue;
                    }
                    tracing::warn!(node = %self.node, term, "resigning: redis refused this term");
                    self.step_down();
                    return Ok(SessionEnd::Lost);
                }
                s = state.changed() => {
                    if matches!(s, SessionState::SyncConnected | SessionState::ConnectedReadOnly) {
                        continue;
                    }
                    tracing::warn!(node = %self.node, term, state = ?s, "zookeeper session state changed while leading; pausing");
                    // Stop claiming now; resume only with the same session.
                    self.step_down();
                    match self.ride_out(s, state, shutdown).await {
                        Reconnect::Connected => {}
                        Reconnect::Lost => return Ok(SessionEnd::Lost),
                        Reconnect::Shutdown => return Ok(SessionEnd::Shutdown),
                    }
                    if !self.still_leads(client, me, term).await? {
                        tracing::warn!(node = %self.node, term, "no longer the leader after reconnecting");
                        return Ok(SessionEnd::Lost);
                    }
                    tracing::info!(node = %self.node, term, "zookeeper reconnected; leading on with the same term");
                    self.tx.role.send_replace(Role::Leader { term });
                }
            }
        }
    }
}

/// How waiting out a disconnection ended.
enum Reconnect {
    Connected,
    Lost,
    Shutdown,
}

/// Keeps the live node list current (children of `/nodes`).
async fn watch_members(
    client: Client,
    path: &'static str,
    tx: watch::Sender<Vec<String>>,
    done: CancellationToken,
) {
    loop {
        let (mut nodes, _, watcher) = match client.get_and_watch_children(path).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "watching /nodes failed");
                return;
            }
        };
        nodes.sort();
        tx.send_replace(nodes);
        tokio::select! {
            _ = done.cancelled() => return,
            _ = watcher.changed() => {}
        }
    }
}

/// Keeps the known leader current (data of `/leader`).
async fn watch_leader(
    client: Client,
    path: &'static str,
    tx: watch::Sender<Option<LeaderInfo>>,
    done: CancellationToken,
) {
    loop {
        let watcher = match client.check_and_watch_stat(path).await {
            Ok((None, w)) => {
                tx.send_replace(None);
                w
            }
            Ok((Some(_), _)) => match client.get_and_watch_data(path).await {
                Ok((data, _, w)) => {
                    tx.send_replace(serde_json::from_slice(&data).ok());
                    w
                }
                Err(zookeeper_client::Error::NoNode) => continue,
                Err(_) => return,
            },
            Err(_) => return,
        };
        tokio::select! {
            _ = done.cancelled() => return,
            _ = watcher.changed() => {}
        }
    }
}
