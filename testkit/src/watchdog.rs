//! A child process under a watchdog, for drivers that outlive a test's
//! `Drop` (the benchmark's clusters): each child runs under a small `sh`
//! watchdog that reads the driver's end of a pipe, so when the driver goes
//! away for any reason (even `kill -9`), the pipe closes and the watchdog
//! kills the child. The watchdog prints the child's real pid first; CPU
//! figures and `kill -9` use that pid. Dropping a [`Proc`] kills its child
//! by pid.
//!
//! The tests' processes ([`crate::procs`]) stay plain `kill_on_drop`
//! children: the tests wait on and signal their `Child` handles directly,
//! and a test binary killed from outside ends CI's run with it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
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
pub fn bin_dir() -> PathBuf {
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
pub fn binary(name: &str) -> anyhow::Result<Binary> {
    let dir = bin_dir();
    let profile = if dir.ends_with("release") {
        " --release"
    } else {
        ""
    };
    binary_at(&dir.join(name))
        .with_context(|| format!("build it first (cargo build{profile} -p {name} --bins)"))
}

/// The binary at `path` (one built elsewhere, an earlier build), if it is
/// there.
pub fn binary_at(path: &Path) -> anyhow::Result<Binary> {
    let meta = std::fs::metadata(path).with_context(|| format!("{} is missing", path.display()))?;
    Ok(Binary {
        profile: path
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        modified: meta
            .modified()
            .ok()
            .map(|t: SystemTime| chrono::DateTime::<chrono::Utc>::from(t)),
        path: path.to_path_buf(),
    })
}

/// A child process under the watchdog.
pub struct Proc {
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
