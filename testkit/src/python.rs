//! The example Python executor (`examples/python-executor/rondo_executor.py`)
//! as a process of a test's world: written from the executor protocol
//! document alone, it shows an unchanged cluster works with a non-Rust
//! executor. It runs on the virtualenv `scripts/python-env.sh` makes (that
//! script is idempotent and prints the venv's python), and is killed when
//! its guard drops, also when the test panics.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::{Config, clock};
use tokio::process::{Child, Command};

use crate::{PATIENCE, eventually, procs};

/// The workspace's root directory.
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the testkit crate is in the workspace")
}

/// The venv's python, made (once per test process) by
/// `scripts/python-env.sh`.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let root = workspace_root();
        let out = std::process::Command::new("bash")
            .arg(root.join("scripts/python-env.sh"))
            .current_dir(root)
            .output()
            .expect("running scripts/python-env.sh");
        assert!(
            out.status.success(),
            "scripts/python-env.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let python = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        assert!(python.exists(), "{} is missing", python.display());
        python
    })
}

/// A running Python executor of group `app` with id `id`.
pub struct PythonExecutor {
    pub app: String,
    pub id: String,
    /// Its stderr (its own log).
    pub log: PathBuf,
    child: Child,
}

impl PythonExecutor {
    /// Starts it with the world's `config` (namespace, services, registry
    /// timings, `executor.*` keys), its log in `log_dir/<id>.log`.
    pub fn spawn(config: &Config, app: &str, id: &str, log_dir: &Path) -> PythonExecutor {
        let log = log_dir.join(format!("{id}.log"));
        let file = std::fs::File::create(&log).expect("python executor log file");
        let script = workspace_root().join("examples/python-executor/rondo_executor.py");
        let r = &config.registry;
        let e = &config.executor;
        let flags = [
            ("--namespace", config.namespace.clone()),
            ("--redis-url", config.redis.url.clone()),
            ("--amqp-url", config.amqp.url.clone()),
            ("--app", app.to_owned()),
            ("--id", id.to_owned()),
            ("--lease-ms", r.lease_ms.to_string()),
            ("--heartbeat-ms", r.heartbeat_ms.to_string()),
            ("--dead-after-ms", r.dead_after_ms.to_string()),
            ("--dedupe-ttl-s", e.dedupe_ttl_s.to_string()),
            ("--prefetch", e.prefetch.to_string()),
            ("--shutdown-grace-ms", e.shutdown_grace_ms.to_string()),
            ("--log-flush-ms", e.log_flush_ms.to_string()),
        ];
        let child = Command::new(python())
            .arg(script)
            .args(
                flags
                    .iter()
                    .flat_map(|(flag, value)| [*flag, value.as_str()]),
            )
            .env_clear()
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the python executor");
        PythonExecutor {
            app: app.to_owned(),
            id: id.to_owned(),
            log,
            child,
        }
    }

    /// Waits until it is live in the registry (a lease younger than
    /// `registry.lease_ms`, and its hash names its group); panics with its
    /// log if it exits meanwhile.
    pub async fn until_registered(&mut self, config: &Config) {
        let pool = rondo_core::redis::pool(&config.redis).expect("a redis pool");
        let names = config.names();
        let (registry, hash) = (names.registry(&self.app), names.executor(&self.id));
        let (id, app, log) = (self.id.clone(), self.app.clone(), self.log.clone());
        let lease = config.registry.lease_ms as i64;
        let child = &mut self.child;
        eventually(
            &format!("python executor {id} to register"),
            PATIENCE,
            || {
                let exited = child.try_wait().ok().flatten();
                let (pool, registry, hash, id, app, log) = (
                    pool.clone(),
                    registry.clone(),
                    hash.clone(),
                    id.clone(),
                    app.clone(),
                    log.clone(),
                );
                async move {
                    if let Some(status) = exited {
                        let text = std::fs::read_to_string(&log).unwrap_or_default();
                        panic!(
                            "python executor {id} exited ({status}) before registering:\n{text}"
                        );
                    }
                    let mut conn = pool.get().await.ok()?;
                    let score: Option<f64> = conn.zscore(&registry, &id).await.ok()?;
                    let group: Option<String> = conn.hget(&hash, "app").await.ok()?;
                    let live = score? as i64 >= clock::now_ms() - lease;
                    (live && group.as_deref() == Some(app.as_str())).then_some(())
                }
            },
        )
        .await;
    }

    /// Stops it with SIGTERM (its graceful stop) and waits up to `timeout`
    /// for its exit status (`None`: it did not exit in time, and is killed).
    pub async fn terminate(mut self, timeout: Duration) -> Option<ExitStatus> {
        procs::terminate(&mut self.child, timeout).await
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
