//! rondo's binaries as child processes: scheduler nodes and the
//! persistence worker.
//!
//! Each child runs under a small `sh` watchdog that reads the bench's end
//! of a pipe: when the bench goes away for any reason (even `kill -9`), the
//! pipe closes and the watchdog kills the child, so no node outlives the
//! run. The watchdog prints the child's real pid first; CPU figures and
//! `kill -9` use that pid. Dropping a [`Proc`] kills its child by pid.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use rondo_core::Config;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// Runs `"$0" "$@"` in the background, prints its pid, kills it when
/// stdin closes, exits with its status.
const WATCHDOG: &str = r#"exec 3<&0
"$0" "$@" </dev/null >/dev/null 3<&- &
child=$!
echo "$child"
( cat <&3 >/dev/null; kill -9 "$child" 2>/dev/null ) </dev/null >/dev/null 2>&1 &
watcher=$!
exec 3<&-
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;

/// A workspace binary the bench starts.
#[derive(Debug, Clone, Serialize)]
pub struct Binary {
    pub path: PathBuf,
    /// `release` or `debug`, from the directory it is in.
    pub profile: String,
    /// When it was built (its mtime), to spot a stale binary.
    pub modified: Option<chrono::DateTime<chrono::Utc>>,
}

/// Where the workspace's binaries are: `BENCH_BIN_DIR`, else the
/// directory of this executable (`target/<profile>`; a test binary is one
/// level deeper, in `deps`).
pub(crate) fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BENCH_BIN_DIR") {
        return dir.into();
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    dir
}

/// The binary `name` in [`bin_dir`], if it was built.
pub(crate) fn binary(name: &str) -> anyhow::Result<Binary> {
    let dir = bin_dir();
    let path = dir.join(name);
    let meta = std::fs::metadata(&path).with_context(|| {
        let profile = if dir.ends_with("release") {
            " --release"
        } else {
            ""
        };
        format!(
            "{} is missing: build it first (cargo build{profile} -p {name} --bins)",
            path.display()
        )
    })?;
    Ok(Binary {
        profile: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        modified: meta
            .modified()
            .ok()
            .map(|t: SystemTime| chrono::DateTime::<chrono::Utc>::from(t)),
        path,
    })
}

/// A free loopback port (bound, then released for the child to take).
pub(crate) fn free_addr() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a free port")?;
    Ok(listener.local_addr()?)
}

/// The config as `RONDO_*` variables for a child.
pub(crate) fn config_env(config: &Config) -> Vec<(String, String)> {
    let s = &config.scheduler;
    let p = &config.persist;
    let mut vars = vec![
        ("RONDO_NAMESPACE", config.namespace.clone()),
        ("RONDO_PARTITIONS", config.partitions.to_string()),
        ("RONDO_REDIS_URL", config.redis.url.clone()),
        ("RONDO_REDIS_POOL_SIZE", config.redis.pool_size.to_string()),
        ("RONDO_AMQP_URL", config.amqp.url.clone()),
        ("RONDO_AMQP_QUEUE_TYPE", config.amqp.queue_type.clone()),
        ("RONDO_ZOOKEEPER_CONNECT", config.zookeeper.connect.clone()),
        (
            "RONDO_ZOOKEEPER_SESSION_TIMEOUT_MS",
            config.zookeeper.session_timeout_ms.to_string(),
        ),
        ("RONDO_MYSQL_URL", config.mysql.url.clone()),
        ("RONDO_MYSQL_POOL_SIZE", config.mysql.pool_size.to_string()),
        (
            "RONDO_REGISTRY_HEARTBEAT_MS",
            config.registry.heartbeat_ms.to_string(),
        ),
        (
            "RONDO_REGISTRY_DEAD_AFTER_MS",
            config.registry.dead_after_ms.to_string(),
        ),
        (
            "RONDO_REGISTRY_LEASE_MS",
            config.registry.lease_ms.to_string(),
        ),
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
        (
            "RONDO_SCHEDULER_SHUTDOWN_GRACE_MS",
            s.shutdown_grace_ms.to_string(),
        ),
        ("RONDO_PERSIST_BATCH_SIZE", p.batch_size.to_string()),
        ("RONDO_PERSIST_LINGER_MS", p.linger_ms.to_string()),
        ("RONDO_PERSIST_PREFETCH", p.prefetch.to_string()),
        (
            "RONDO_PERSIST_SHUTDOWN_GRACE_MS",
            p.shutdown_grace_ms.to_string(),
        ),
    ];
    if let Ok(path) = std::env::var("PATH") {
        vars.push(("PATH", path));
    }
    vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A child process under the watchdog.
pub(crate) struct Proc {
    pub pid: u32,
    pub log: PathBuf,
    wrapper: Child,
    killed: bool,
}

/// What the bench's own environment passes on to the processes it starts:
/// tokio's `TOKIO_WORKER_THREADS` and mimalloc's `MIMALLOC_*` options, to
/// compare runtimes and allocators set up otherwise.
fn passed_through() -> impl Iterator<Item = (String, String)> {
    std::env::vars().filter(|(k, _)| {
        k == "TOKIO_WORKER_THREADS" || k.starts_with("MIMALLOC_") || k.starts_with("XXL_EXPERIMENT")
    })
}

impl Proc {
    /// Starts `binary` with exactly `env` (plus `RUST_LOG` and what
    /// [`passed_through`] names), its stderr in `log`.
    pub async fn spawn(
        name: &str,
        binary: &Binary,
        env: Vec<(String, String)>,
        rust_log: &str,
        log: PathBuf,
    ) -> anyhow::Result<Proc> {
        Self::spawn_with_args(name, binary, &[], env, rust_log, log).await
    }

    /// [`Proc::spawn`] with command-line arguments.
    pub async fn spawn_with_args(
        name: &str,
        binary: &Binary,
        args: &[String],
        env: Vec<(String, String)>,
        rust_log: &str,
        log: PathBuf,
    ) -> anyhow::Result<Proc> {
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut wrapper = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg(&binary.path)
            .args(args)
            .env_clear()
            .envs(env)
            .envs(passed_through())
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name} ({})", binary.path.display()))?;
        let stdout = wrapper.stdout.take().context("the watchdog's stdout")?;
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        let read = reader.read_line(&mut line);
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .with_context(|| format!("{name}: the watchdog did not print the pid"))?
            .context("reading the pid")?;
        let Ok(pid) = line.trim().parse::<u32>() else {
            bail!("the watchdog printed {line:?}, not a pid");
        };
        Ok(Proc {
            pid,
            log,
            wrapper,
            killed: false,
        })
    }

    /// `kill -<signal> <pid>` of the child itself.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid.to_string())
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -{signal} {} failed", self.pid);
        }
        Ok(())
    }

    /// `kill -9`, then waits (bounded) for the watchdog to exit.
    pub async fn kill9(&mut self) {
        if !self.killed {
            let _ = self.signal("KILL");
            self.killed = true;
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.wrapper.wait()).await;
    }

    /// SIGTERM; `kill -9` if it has not exited within `grace`.
    pub async fn terminate(&mut self, grace: Duration) {
        if self.killed {
            return;
        }
        if self.signal("TERM").is_ok()
            && tokio::time::timeout(grace, self.wrapper.wait())
                .await
                .is_ok()
        {
            self.killed = true;
            return;
        }
        self.kill9().await;
    }

    /// Whether the child has exited (its watchdog has).
    pub fn exited(&mut self) -> bool {
        self.killed || matches!(self.wrapper.try_wait(), Ok(Some(_)))
    }

    /// The last lines of its log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.killed && !matches!(self.wrapper.try_wait(), Ok(Some(_))) {
            let _ = self.signal("KILL");
        }
        // The wrapper itself is killed by `kill_on_drop`.
    }
}

/// One `rondo-scheduler` node.
pub(crate) struct NodeProc {
    pub id: String,
    pub addr: SocketAddr,
    pub proc: Proc,
}

impl NodeProc {
    pub async fn spawn(
        config: &Config,
        binary: &Binary,
        id: &str,
        rust_log: &str,
        log_dir: &Path,
    ) -> anyhow::Result<NodeProc> {
        let addr = free_addr()?;
        let mut env = config_env(config);
        env.push(("RONDO_SCHEDULER_NODE_ID".into(), id.to_owned()));
        env.push(("RONDO_SCHEDULER_API_ADDR".into(), addr.to_string()));
        let log = log_dir.join(format!("{id}.log"));
        let proc = Proc::spawn(id, binary, env, rust_log, log).await?;
        Ok(NodeProc {
            id: id.to_owned(),
            addr,
            proc,
        })
    }
}

/// A fresh directory for the children's logs (kept after the run).
pub(crate) fn log_dir(namespace: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("rondo-bench-{namespace}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
