//! [`Cluster`]: what a test runs in its [`World`], against the real
//! services: scheduler nodes, executors and the persistence worker, each
//! in-process (`start_*`) or as the real binary's process (`spawn_*`).
//!
//! [`Cluster::stop`] stops everything gracefully, in the order a deployment
//! would (nodes, then executors, then the persistence worker), asserts each
//! in-process part stopped cleanly and removes the processes' logs.
//! Dropping a cluster instead (a failing test) cancels the in-process parts
//! and kills the processes, and keeps their logs to read; the world then
//! removes the namespace and the database.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use crate::redis_acl;
use rondo_core::Config;
use rondo_executor::{Executor, ExecutorBuilder, ExecutorError};
use rondo_scheduler::NodeHandle;
use serde_json::Value;
use sqlx::MySqlPool;
use tokio::process::Child;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::procs::{self, NodeProc};
use crate::recorder::Recorder;
use crate::{Api, World};

/// A scheduler node of the cluster.
pub enum Node {
    InProcess {
        id: String,
        addr: std::net::SocketAddr,
        handle: Option<NodeHandle>,
        token: CancellationToken,
        /// The API token its [`Api`] sends.
        api_token: String,
    },
    Process(NodeProc),
}

impl Node {
    pub fn id(&self) -> &str {
        match self {
            Node::InProcess { id, .. } => id,
            Node::Process(p) => &p.id,
        }
    }

    /// Its API, as the world's admin.
    pub fn api(&self) -> Api {
        Api::new(self.addr()).with_token(self.api_token())
    }

    fn api_token(&self) -> &str {
        match self {
            Node::InProcess { api_token, .. } => api_token,
            Node::Process(p) => &p.token,
        }
    }

    /// Where its API listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        match self {
            Node::InProcess { addr, .. } => *addr,
            Node::Process(p) => p.addr,
        }
    }

    /// Whether it still runs: not stopped (in-process), not killed or
    /// terminated by the test (process).
    pub fn is_running(&self) -> bool {
        match self {
            Node::InProcess { handle, .. } => handle.is_some(),
            Node::Process(p) => !p.has_exited(),
        }
    }

    /// Its view of the cluster (`GET /api/v1/cluster`), if it answers
    /// within 2 s (a killed or frozen node does not).
    pub async fn status(&self) -> Option<Value> {
        procs::status(self.addr(), self.api_token()).await
    }
}

/// The persistence worker of the cluster.
enum Persist {
    InProcess {
        task: JoinHandle<anyhow::Result<()>>,
        token: CancellationToken,
    },
    Process(Child),
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    executors: Vec<(String, JoinHandle<Result<(), ExecutorError>>)>,
    executor_procs: Vec<(String, Child)>,
    persist: Option<Persist>,
    /// Cancels the in-process executors.
    executors_token: CancellationToken,
    /// Where the processes write their logs.
    pub log_dir: PathBuf,
    // Dropped last: the namespace and the database go once nothing runs.
    pub world: World,
}

impl Cluster {
    pub fn new(world: World) -> Cluster {
        Cluster {
            nodes: Vec::new(),
            executors: Vec::new(),
            executor_procs: Vec::new(),
            persist: None,
            executors_token: CancellationToken::new(),
            log_dir: procs::log_dir(&world.config.namespace),
            world,
        }
    }

    pub fn config(&self) -> &Config {
        &self.world.config
    }

    pub fn db(&self) -> &MySqlPool {
        &self.world.db
    }

    /// The API of node `i`.
    /// Where node `i`'s API listens (a browser test opens it).
    pub fn addr(&self, i: usize) -> std::net::SocketAddr {
        self.nodes[i].addr()
    }

    pub fn api(&self, i: usize) -> Api {
        self.nodes[i].api()
    }

    /// Starts a scheduler node in-process (its API on a free port); its
    /// index.
    pub async fn start_node(&mut self) -> usize {
        let token = CancellationToken::new();
        let handle = rondo_scheduler::start(self.world.config.clone(), token.clone())
            .await
            .expect("the scheduler node starts");
        self.nodes.push(Node::InProcess {
            id: handle.node_id.clone(),
            addr: handle.api_addr,
            handle: Some(handle),
            token,
            api_token: self.world.admin.token.clone(),
        });
        self.nodes.len() - 1
    }

    /// The chaos tests' cluster, all processes: the `rondo-executor`s
    /// `executors` (of `executor.app`), the persistence worker and `nodes`
    /// scheduler nodes `n1`, `n2`, …; waits for every node and a leader,
    /// creates the group and waits until its executors are live.
    pub async fn spawn_processes(&mut self, executors: &[&str], nodes: usize) {
        for id in executors {
            self.spawn_executor(id);
        }
        self.spawn_persist_worker();
        for i in 1..=nodes {
            self.spawn_node(&format!("n{i}"));
        }
        let first = &self.nodes[0];
        crate::eventually(
            "every node and a leader",
            Duration::from_secs(30),
            || async {
                let s = first.status().await?;
                (s["nodes"].as_array()?.len() == nodes && s["leader"]["term"].as_u64().is_some())
                    .then_some(())
            },
        )
        .await;
        let app = self.world.config.executor.app.clone();
        let api = self.api(0);
        let (status, group) = api
            .post("/api/v1/groups", serde_json::json!({ "app": app }))
            .await;
        assert_eq!(status, 201, "{group}");
        let mut ids = executors.to_vec();
        ids.sort_unstable();
        api.until_executors(&app, &ids).await;
    }

    /// Starts a `rondo-scheduler` process with node id `id`; its index.
    pub fn spawn_node(&mut self, id: &str) -> usize {
        let node = NodeProc::spawn(
            &self.world.config,
            id,
            &self.log_dir,
            &self.world.admin.token,
        );
        self.nodes.push(Node::Process(node));
        self.nodes.len() - 1
    }

    /// The process of node `i` (to kill, freeze or restart it).
    pub fn node_proc(&mut self, i: usize) -> &mut NodeProc {
        match &mut self.nodes[i] {
            Node::Process(p) => p,
            Node::InProcess { .. } => panic!("node {i} runs in-process"),
        }
    }

    /// Stops in-process node `i` gracefully and asserts it stopped cleanly.
    /// It keeps its index; [`Cluster::start_node`] starts a new one (on a
    /// new index), as a restart would.
    pub async fn stop_node(&mut self, i: usize) {
        let Node::InProcess { handle, token, .. } = &mut self.nodes[i] else {
            panic!("node {i} is a process: signal it");
        };
        token.cancel();
        if let Some(handle) = handle.take() {
            handle.wait().await.expect("the node stops cleanly");
        }
    }

    /// Starts an in-process executor of `config.executor.app` with id `id`
    /// and the handlers `add` registers; its queue is removed with the
    /// world.
    pub fn start_executor(
        &mut self,
        id: &str,
        add: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
    ) -> String {
        let mut config = self.world.config.clone();
        config.executor.id = id.to_owned();
        let app = config.executor.app.clone();
        self.world
            .as_redis_user(&mut config, redis_acl::Role::Executor { app: &app, id });
        let queue = self.world.executor_queue(&config.executor.app, id);
        let executor = add(Executor::builder(config))
            .build()
            .expect("the executor builds");
        let task = tokio::spawn(executor.run(self.executors_token.clone()));
        self.executors.push((id.to_owned(), task));
        queue
    }

    /// Starts an in-process executor whose handler `record` records every
    /// run in `recorder`.
    pub fn start_recording_executor(&mut self, id: &str, recorder: &Recorder) -> String {
        let recorder = recorder.clone();
        self.start_executor(id, move |b| recorder.register(b))
    }

    /// Starts a `rondo-executor` process (built-in handlers) with id `id`.
    pub fn spawn_executor(&mut self, id: &str) -> &mut Child {
        let app = self.world.config.executor.app.clone();
        self.world.executor_queue(&app, id);
        let mut config = self.world.config.clone();
        self.world
            .as_redis_user(&mut config, redis_acl::Role::Executor { app: &app, id });
        let child = procs::spawn_executor(&config, id, &self.log_dir);
        self.executor_procs.push((id.to_owned(), child));
        &mut self.executor_procs.last_mut().expect("just pushed").1
    }

    /// Kills executor process `id` with SIGKILL and reaps it: it dies
    /// without answering, retiring or acking. Its queue stays (and is
    /// removed with the world).
    pub async fn kill_executor(&mut self, id: &str) {
        let mut child = self.take_executor_proc(id);
        child.start_kill().expect("kill -9 the executor");
        let _ = child.wait().await;
    }

    /// Stops executor process `id` with SIGTERM and waits up to `timeout`
    /// for its exit status (`None`: it did not exit in time, and is killed).
    pub async fn terminate_executor(&mut self, id: &str, timeout: Duration) -> Option<ExitStatus> {
        let mut child = self.take_executor_proc(id);
        procs::terminate(&mut child, timeout).await
    }

    fn take_executor_proc(&mut self, id: &str) -> Child {
        let i = self
            .executor_procs
            .iter()
            .position(|(e, _)| e == id)
            .unwrap_or_else(|| panic!("no executor process {id}"));
        self.executor_procs.remove(i).1
    }

    /// Starts the persistence worker in-process (it migrates the schema).
    pub fn start_persist_worker(&mut self) {
        self.start_persist_worker_with(|_| {});
    }

    /// Starts the persistence worker in-process with the world's config as
    /// `tune` changes it (say, a MySQL out of reach).
    pub fn start_persist_worker_with(&mut self, tune: impl FnOnce(&mut Config)) {
        assert!(self.persist.is_none(), "one persistence worker at a time");
        let mut config = self.world.config.clone();
        tune(&mut config);
        let token = CancellationToken::new();
        let task = tokio::spawn(rondo_persist_worker::run(config, token.clone()));
        self.persist = Some(Persist::InProcess { task, token });
    }

    /// Starts a `rondo-persist-worker` process.
    pub fn spawn_persist_worker(&mut self) -> &mut Child {
        assert!(self.persist.is_none(), "one persistence worker at a time");
        let child = procs::spawn_persist_worker(&self.world.config, &self.log_dir);
        self.persist = Some(Persist::Process(child));
        match self.persist.as_mut() {
            Some(Persist::Process(child)) => child,
            _ => unreachable!("just set"),
        }
    }

    /// Stops the persistence worker: gracefully in-process (asserting a
    /// clean stop), by SIGKILL as a process.
    pub async fn stop_persist_worker(&mut self) {
        match self.persist.take() {
            Some(Persist::InProcess { task, token }) => {
                token.cancel();
                let stopped = task.await.expect("the persistence worker task");
                stopped.expect("the persistence worker stops cleanly");
            }
            Some(Persist::Process(mut child)) => {
                let _ = child.kill().await;
            }
            None => {}
        }
    }

    /// The persistence worker's process, which must run (to check on it).
    fn persist_child(&mut self) -> &mut Child {
        match self.persist.as_mut() {
            Some(Persist::Process(child)) => child,
            Some(Persist::InProcess { .. }) => panic!("the persistence worker runs in-process"),
            None => panic!("no persistence worker runs"),
        }
    }

    /// Kills the persistence worker's process with SIGKILL (a crash, in the
    /// middle of whatever it was doing) and reaps it;
    /// [`Cluster::spawn_persist_worker`] restarts it.
    pub async fn kill_persist_worker(&mut self) {
        assert!(
            matches!(self.persist, Some(Persist::Process(_))),
            "no persistence worker process runs"
        );
        self.stop_persist_worker().await;
    }

    /// The exit status of the persistence worker's process if it has exited
    /// on its own; `None` while it runs.
    pub fn persist_worker_exit(&mut self) -> Option<ExitStatus> {
        self.persist_child()
            .try_wait()
            .expect("the worker's status")
    }

    /// Sends SIGTERM to the persistence worker's process (its graceful
    /// drain) and waits up to `timeout`; its exit status, `None` if it did
    /// not exit in time (it is then killed).
    pub async fn terminate_persist_worker(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let exit = procs::terminate(self.persist_child(), timeout).await;
        self.persist = None;
        exit
    }

    /// Stops everything gracefully, in a deployment's order: nodes (their
    /// fires in flight finish; SIGTERM for processes), then executors
    /// (their runs finish, results are published), then the persistence
    /// worker (its last batch is stored); asserts every in-process part
    /// stopped cleanly. Then removes the processes' logs.
    pub async fn stop(mut self) {
        for i in 0..self.nodes.len() {
            match &mut self.nodes[i] {
                Node::InProcess { .. } => self.stop_node(i).await,
                Node::Process(p) if !p.has_exited() => {
                    let _ = p.terminate(Duration::from_secs(30)).await;
                }
                Node::Process(_) => {}
            }
        }
        self.executors_token.cancel();
        for (id, task) in self.executors.drain(..) {
            let stopped = task.await.expect("the executor task");
            stopped.unwrap_or_else(|e| panic!("executor {id} stops cleanly: {e}"));
        }
        for (_, child) in &mut self.executor_procs {
            let _ = child.kill().await;
        }
        self.stop_persist_worker().await;
        let _ = std::fs::remove_dir_all(&self.log_dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            if let Node::InProcess { token, .. } = node {
                token.cancel();
            }
        }
        self.executors_token.cancel();
        if let Some(Persist::InProcess { token, .. }) = &self.persist {
            token.cancel();
        }
        // Processes are killed when their `Child` drops (`kill_on_drop`).
    }
}

/// Waits until the wall clock reaches `ms`: a test's disruptions follow the
/// schedule of the fires, not any state of the system.
pub async fn at(ms: i64) {
    let wait = ms - rondo_core::clock::now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

/// Index of a live node that is not the leader; waits for one to answer
/// (a busy machine may be slow to).
pub async fn a_follower(nodes: &[Node]) -> usize {
    in_role(nodes, false).await
}

/// Index of the live node that is the leader; waits for it to answer.
pub async fn the_leader(nodes: &[Node]) -> usize {
    in_role(nodes, true).await
}

async fn in_role(nodes: &[Node], leader: bool) -> usize {
    let what = if leader {
        "the leader"
    } else {
        "a live follower"
    };
    crate::eventually(what, Duration::from_secs(30), || async {
        for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.is_running()) {
            if n.status()
                .await
                .is_some_and(|s| s["role"]["leader"] == leader)
            {
                return Some(i);
            }
        }
        None
    })
    .await
}

/// The (job, fire) a run's trigger id belongs to: a scheduled fire's id is
/// `<job>-<fire_ms>-<shard>`, its retry's the same with `-retry<n>`.
pub fn fire_of(id: &str) -> Option<(u64, i64)> {
    let mut parts = rondo_core::trigger_id::base(id).split('-');
    let job = parts.next()?.parse().ok()?;
    let fire = parts.next()?.parse().ok()?;
    Some((job, fire))
}
