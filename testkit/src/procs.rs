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

/// A workspace binary beside this one ([`crate::watchdog::bin_dir`];
/// `scripts/test.sh` builds them before `cargo test`).
pub fn binary(name: &str) -> PathBuf {
    let bin = crate::watchdog::bin_dir().join(name);
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

/// The JSON report a `rondo` command printed: on stdout after a success,
/// on stderr after a refusal (after any text before it); null if none.
pub fn cli_report(out: &std::process::Output) -> serde_json::Value {
    let text = if out.status.success() {
        &out.stdout
    } else {
        &out.stderr
    };
    let text = String::from_utf8_lossy(text);
    let json = text.find('{').map_or("", |i| &text[i..]);
    serde_json::Deserializer::from_str(json)
        .into_iter::<serde_json::Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or(serde_json::Value::Null)
}

/// A `rondo-executor` process (built-in `shell`, `demo` and `http`
/// handlers) of `config.executor.app` with id `id`; killed when dropped.
pub fn spawn_executor(config: &Config, id: &str, log_dir: &Path) -> Child {
    let file = std::fs::File::create(log_dir.join(format!("{id}.log"))).expect("executor log file");
    let env = [
        ("RONDO_EXECUTOR_APP", config.executor.app.clone()),
        ("RONDO_EXECUTOR_ID", id.to_owned()),
    ];
    rondo_child("rondo-executor", config, env, file)
}

/// The workspace binary `name` with exactly `config` ([`config_env`]) and
/// `env` on top, logging at `info` to `log`; killed when dropped.
pub fn rondo_child<const N: usize>(
    name: &str,
    config: &Config,
    env: [(&str, String); N],
    log: std::fs::File,
) -> Child {
    Command::new(binary(name))
        .env_clear()
        .envs(config_env(config))
        .envs(env)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {name}: {e}"))
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
    rondo_child("rondo-persist-worker", config, [], file)
}

/// A free loopback port (bound, then released for the child to take).
pub fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr")
}

/// The config as `RONDO_*` variables for a child: every key a test or the
/// benchmark sets, so a child runs with exactly the config its driver holds.
pub fn config_env(config: &Config) -> Vec<(String, String)> {
    let (s, p, z) = (&config.scheduler, &config.persist, &config.zookeeper);
    let (r, m) = (&config.registry, &config.monitor);
    let vars = [
        ("RONDO_NAMESPACE", config.namespace.clone()),
        ("RONDO_PARTITIONS", config.partitions.to_string()),
        ("RONDO_ZONE", config.zone.clone()),
        ("RONDO_REDIS_URL", config.redis.url.clone()),
        ("RONDO_REDIS_POOL_SIZE", config.redis.pool_size.to_string()),
        (
            "RONDO_REDIS_ALLOW_OPEN_DEFAULT",
            config.redis.allow_open_default.to_string(),
        ),
        ("RONDO_AMQP_URL", config.amqp.url.clone()),
        ("RONDO_AMQP_QUEUE_TYPE", config.amqp.queue_type.clone()),
        (
            "RONDO_AMQP_SCHEDULER_USERS",
            config.amqp.scheduler_users.join(","),
        ),
        (
            "RONDO_AMQP_EXECUTOR_USER",
            config.amqp.executor_user.clone(),
        ),
        (
            "RONDO_AMQP_GATEWAY_USERS",
            config.amqp.gateway_users.join(","),
        ),
        ("RONDO_ZOOKEEPER_CONNECT", z.connect.clone()),
        (
            "RONDO_ZOOKEEPER_SESSION_TIMEOUT_MS",
            z.session_timeout_ms.to_string(),
        ),
        ("RONDO_MYSQL_URL", config.mysql.url.clone()),
        ("RONDO_MYSQL_POOL_SIZE", config.mysql.pool_size.to_string()),
        ("RONDO_REGISTRY_HEARTBEAT_MS", r.heartbeat_ms.to_string()),
        ("RONDO_REGISTRY_DEAD_AFTER_MS", r.dead_after_ms.to_string()),
        ("RONDO_REGISTRY_LEASE_MS", r.lease_ms.to_string()),
        ("RONDO_SCHEDULER_PREREAD_MS", s.preread_ms.to_string()),
        (
            "RONDO_SCHEDULER_MISFIRE_THRESHOLD_MS",
            s.misfire_threshold_ms.to_string(),
        ),
        (
            "RONDO_SCHEDULER_CLAIM_INTERVAL_MS",
            s.claim_interval_ms.to_string(),
        ),
        ("RONDO_SCHEDULER_CLAIM_BATCH", s.claim_batch.to_string()),
        (
            "RONDO_SCHEDULER_MAX_FIRES_PER_CLAIM",
            s.max_fires_per_claim.to_string(),
        ),
        (
            "RONDO_SCHEDULER_LOAD_INTERVAL_MS",
            s.load_interval_ms.to_string(),
        ),
        ("RONDO_SCHEDULER_LOAD_AHEAD_MS", s.load_ahead_ms.to_string()),
        (
            "RONDO_SCHEDULER_MAX_FIRES_IN_FLIGHT",
            s.max_fires_in_flight.to_string(),
        ),
        (
            "RONDO_SCHEDULER_MAX_FIRES_LOADED",
            s.max_fires_loaded.to_string(),
        ),
        ("RONDO_SCHEDULER_LEASE_MS", s.lease_ms.to_string()),
        (
            "RONDO_SCHEDULER_LEASE_RENEW_MS",
            s.lease_renew_ms.to_string(),
        ),
        (
            "RONDO_SCHEDULER_SHUTDOWN_GRACE_MS",
            s.shutdown_grace_ms.to_string(),
        ),
        (
            "RONDO_SCHEDULER_METRICS_PUBLIC",
            s.metrics_public.to_string(),
        ),
        (
            "RONDO_MONITOR_SCAN_INTERVAL_MS",
            m.scan_interval_ms.to_string(),
        ),
        ("RONDO_MONITOR_LOST_AFTER_MS", m.lost_after_ms.to_string()),
        ("RONDO_MONITOR_HANDLED_TTL_S", m.handled_ttl_s.to_string()),
        (
            "RONDO_EXECUTOR_METRICS_ADDR",
            config.executor.metrics_addr.clone(),
        ),
        (
            "RONDO_EXECUTOR_SCRIPT_HANDLERS",
            config.executor.script_handlers.join(","),
        ),
        (
            "RONDO_EXECUTOR_HTTP_ALLOW",
            config.executor.http_allow.join(","),
        ),
        ("RONDO_EXECUTOR_JOB_ENV", config.executor.job_env.join(",")),
        ("RONDO_EXECUTOR_RUN_AS", config.executor.run_as.clone()),
        (
            "RONDO_EXECUTOR_COMMAND_HANDLERS",
            config.executor.command_handlers.to_string(),
        ),
        (
            "RONDO_ALARM_WEBHOOK_ALLOW",
            config.alarm.webhook_allow.join(","),
        ),
        (
            "RONDO_XXL_ADDRESS_ALLOW",
            config.xxl.address_allow.join(","),
        ),
        (
            "RONDO_ALARM_EMAIL_ALLOW",
            config.alarm.email_allow.join(","),
        ),
        ("RONDO_PERSIST_BATCH_SIZE", p.batch_size.to_string()),
        ("RONDO_PERSIST_LINGER_MS", p.linger_ms.to_string()),
        ("RONDO_PERSIST_PREFETCH", p.prefetch.to_string()),
        (
            "RONDO_PERSIST_SHUTDOWN_GRACE_MS",
            p.shutdown_grace_ms.to_string(),
        ),
        ("RONDO_PERSIST_METRICS_ADDR", p.metrics_addr.clone()),
        // Script interpreters are looked up on it.
        ("PATH", std::env::var("PATH").unwrap_or_default()),
    ];
    vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
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
        let env = [
            ("RONDO_SCHEDULER_NODE_ID", id.to_owned()),
            ("RONDO_SCHEDULER_API_ADDR", addr.to_string()),
        ];
        let child = rondo_child("rondo-scheduler", config, env, file);
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
