//! The real binaries as separate OS processes (`rondo-scheduler`,
//! `rondo-executor`, `rondo-persist-worker`), for tests that kill, freeze,
//! stop and restart them. A child is killed when its handle is dropped, so
//! a failing test leaves no process behind.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rondo_core::Config;
use serde_json::Value;
use tokio::process::{Child, Command};

use crate::Api;

/// A workspace binary next to the test binary (`scripts/test.sh` builds
/// them before `cargo test`).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --bins` (scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// Runs the `rondo` CLI against the API at `api` (a URL) with `token`.
pub fn rondo_cli(api: &str, token: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary("rondo"))
        .env_clear()
        .env("RONDO_API", api)
        .env("RONDO_TOKEN", token)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run rondo")
}

pub fn scheduler_binary() -> PathBuf {
    binary("rondo-scheduler")
}

/// A `rondo-executor` process (built-in `shell`, `demo` and `http`
/// handlers) of `config.executor.app` with id `id`; killed when dropped.
pub fn spawn_executor(config: &Config, id: &str, log_dir: &Path) -> Child {
    let file = std::fs::File::create(log_dir.join(format!("{id}.log"))).expect("executor log file");
    Command::new(binary("rondo-executor"))
        .env_clear()
        .envs(config_env(config))
        .env("RONDO_EXECUTOR_APP", &config.executor.app)
        .env("RONDO_EXECUTOR_ID", id)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn rondo-executor")
}

/// A `rondo-persist-worker` process with `config` (including its
/// `persist.*` batching keys), its stderr in `log_dir/persist-worker.log`
/// (appended, so a restarted worker keeps the first one's log); killed when
/// dropped.
pub fn spawn_persist_worker(config: &Config, log_dir: &Path) -> Child {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_dir.join("persist-worker.log"))
        .expect("persist worker log file");
    let p = &config.persist;
    Command::new(binary("rondo-persist-worker"))
        .env_clear()
        .envs(config_env(config))
        .env("RONDO_PERSIST_BATCH_SIZE", p.batch_size.to_string())
        .env("RONDO_PERSIST_LINGER_MS", p.linger_ms.to_string())
        .env("RONDO_PERSIST_PREFETCH", p.prefetch.to_string())
        .env(
            "RONDO_PERSIST_SHUTDOWN_GRACE_MS",
            p.shutdown_grace_ms.to_string(),
        )
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn rondo-persist-worker")
}

/// A free loopback port (bound, then released for the child to take).
pub fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr")
}

/// The config as `RONDO_*` variables for a child.
pub(crate) fn config_env(config: &Config) -> Vec<(String, String)> {
    let z = &config.zookeeper;
    vec![
        ("RONDO_NAMESPACE".into(), config.namespace.clone()),
        ("RONDO_PARTITIONS".into(), config.partitions.to_string()),
        ("RONDO_REDIS_URL".into(), config.redis.url.clone()),
        ("RONDO_AMQP_URL".into(), config.amqp.url.clone()),
        (
            "RONDO_AMQP_QUEUE_TYPE".into(),
            config.amqp.queue_type.clone(),
        ),
        ("RONDO_ZOOKEEPER_CONNECT".into(), z.connect.clone()),
        (
            "RONDO_ZOOKEEPER_SESSION_TIMEOUT_MS".into(),
            z.session_timeout_ms.to_string(),
        ),
        ("RONDO_MYSQL_URL".into(), config.mysql.url.clone()),
        (
            "RONDO_REGISTRY_HEARTBEAT_MS".into(),
            config.registry.heartbeat_ms.to_string(),
        ),
        (
            "RONDO_REGISTRY_DEAD_AFTER_MS".into(),
            config.registry.dead_after_ms.to_string(),
        ),
        (
            "RONDO_REGISTRY_LEASE_MS".into(),
            config.registry.lease_ms.to_string(),
        ),
        (
            "RONDO_SCHEDULER_MISFIRE_THRESHOLD_MS".into(),
            config.scheduler.misfire_threshold_ms.to_string(),
        ),
        (
            "RONDO_SCHEDULER_PREREAD_MS".into(),
            config.scheduler.preread_ms.to_string(),
        ),
        (
            "RONDO_MONITOR_SCAN_INTERVAL_MS".into(),
            config.monitor.scan_interval_ms.to_string(),
        ),
        (
            "RONDO_MONITOR_LOST_AFTER_MS".into(),
            config.monitor.lost_after_ms.to_string(),
        ),
        (
            "RONDO_MONITOR_HANDLED_TTL_S".into(),
            config.monitor.handled_ttl_s.to_string(),
        ),
        (
            "RONDO_SCHEDULER_SHUTDOWN_GRACE_MS".into(),
            config.scheduler.shutdown_grace_ms.to_string(),
        ),
        (
            "RONDO_SCHEDULER_METRICS_PUBLIC".into(),
            config.scheduler.metrics_public.to_string(),
        ),
        (
            "RONDO_EXECUTOR_METRICS_ADDR".into(),
            config.executor.metrics_addr.clone(),
        ),
        (
            "RONDO_PERSIST_METRICS_ADDR".into(),
            config.persist.metrics_addr.clone(),
        ),
        (
            "RONDO_EXECUTOR_SCRIPT_HANDLERS".into(),
            config.executor.script_handlers.join(","),
        ),
        ("RONDO_ZONE".into(), config.zone.clone()),
        // Script interpreters are looked up on it.
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
    ]
}

/// One scheduler node process.
pub struct NodeProc {
    pub id: String,
    pub addr: SocketAddr,
    pub log: PathBuf,
    /// The API token its [`Api`] sends.
    pub token: String,
    child: Child,
}

impl NodeProc {
    /// Starts a node with `config`, id `id`, its stderr in `log_dir/<id>.log`;
    /// its API is called with `token`.
    pub fn spawn(config: &Config, id: &str, log_dir: &Path, token: &str) -> NodeProc {
        let addr = free_addr();
        let log = log_dir.join(format!("{id}.log"));
        let file = std::fs::File::create(&log).expect("node log file");
        let child = Command::new(scheduler_binary())
            .env_clear()
            .envs(config_env(config))
            .env("RONDO_SCHEDULER_NODE_ID", id)
            .env("RONDO_SCHEDULER_API_ADDR", addr.to_string())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn rondo-scheduler");
        NodeProc {
            id: id.to_owned(),
            addr,
            log,
            token: token.to_owned(),
            child,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running child")
    }

    pub fn api(&self) -> Api {
        Api::new(self.addr).with_token(&self.token)
    }

    /// Sends a signal by name (`KILL`, `STOP`, `CONT`, `TERM`).
    pub fn signal(&self, name: &str) {
        signal(&self.child, name);
    }

    /// Whether the process is known to have exited: it was killed or
    /// terminated here, and reaped.
    pub fn has_exited(&self) -> bool {
        self.child.id().is_none()
    }

    /// `kill -9` and reap.
    pub async fn kill9(&mut self) {
        self.signal("KILL");
        let _ = self.child.wait().await;
    }

    /// SIGTERM and wait up to `timeout` for the exit.
    pub async fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        terminate(&mut self.child, timeout).await
    }

    /// The node's cluster status, if it answers.
    pub async fn status(&self) -> Option<Value> {
        status(self.addr, &self.token).await
    }

    /// The node's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Sends a signal by name (`KILL`, `STOP`, `CONT`, `TERM`) to a running
/// child.
pub fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("running child");
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
    assert!(status.is_ok_and(|s| s.success()), "kill -{name} {pid}");
}

/// SIGTERM a child and wait up to `timeout` for its exit.
pub async fn terminate(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    signal(child, "TERM");
    tokio::time::timeout(timeout, child.wait())
        .await
        .ok()
        .and_then(Result::ok)
}

/// The cluster status (`GET /api/v1/cluster`) of the node whose API is at
/// `addr`, if it answers within 2 s (a killed or frozen node does not).
pub async fn status(addr: SocketAddr, token: &str) -> Option<Value> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let resp = client
        .get(format!("http://{addr}/api/v1/cluster"))
        .bearer_auth(token)
        .send()
        .await
        .ok()?;
    resp.json().await.ok()
}

/// A fresh directory for node logs.
pub fn log_dir(namespace: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rondo-{namespace}"));
    std::fs::create_dir_all(&dir).expect("log dir");
    dir
}
