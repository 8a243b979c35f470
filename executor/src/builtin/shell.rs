//! `shell`: runs the job's params as a shell command line.
//!
//! # Convention
//!
//! The params are the script, so the command runs as
//!
//! ```text
//! sh -c '<params>' rondo <shard_index> <shard_total>
//! ```
//!
//! * `$0` is `rondo`, `$1` the shard index (0-based), `$2` the shard total;
//! * the environment is [`JobEnv`]'s, never the executor's own (which
//!   holds its credentials): `PATH`, `HOME`, `LANG`, what
//!   `executor.job_env` names, and `RONDO_TRIGGER_ID`, `RONDO_JOB_ID`,
//!   `RONDO_SHARD_INDEX`, `RONDO_SHARD_TOTAL` and `RONDO_PARAMS` (the
//!   command line itself), and the job's secrets by their names (write
//!   `"$DB_PASSWORD"` rather than `${secret.DB_PASSWORD}`, which would put
//!   the value on the command line, where `ps` shows it);
//! * stdin is empty; stdout lines go to the job log as they come, stderr
//!   lines too, prefixed with `[stderr] `;
//! * exit code 0 is success; any other code fails the run with
//!   `exit code N` (retryable), a signal with `killed by signal N`.
//!
//! XXL-JOB's GLUE shell passes the job params as `$1` and the shards as
//! `$2`/`$3`, because there the script and its params are separate. Here
//! they are one string, so passing the params again would only repeat the
//! script; to call a ported GLUE script, write the params as
//! `/path/script.sh "my params" "$1" "$2"`.
//!
//! The command runs in its own process group. When the run is cancelled
//! (timeout or shutdown) the whole group gets SIGTERM, then SIGKILL half a
//! second later, so children of the script stop too. Processes the script
//! leaves running in the background after a normal exit are not killed.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

pub use super::run_as::RunAs;
use tokio::task::JoinHandle;

use crate::context::JobContext;
use crate::error::JobError;
use crate::handler::Handler;
use crate::joblog::MAX_LINE_BYTES;

/// What a job's environment holds of the executor's besides `RONDO_*`
/// trigger values: these always (when set), then `executor.job_env`.
const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG"];

/// The environment a shell or script job starts from: `PATH`, `HOME`,
/// `LANG` and the variables `executor.job_env` names, as this process had
/// them when the handler was registered; nothing else of the executor's
/// (its `RONDO_*` settings hold the Redis, broker and MySQL credentials).
#[derive(Clone, Debug, Default)]
pub struct JobEnv {
    vars: Arc<[(String, String)]>,
    run_as: Option<Arc<RunAs>>,
}

impl JobEnv {
    /// [`BASE_ENV`] and `names`, read from this process's environment
    /// (one that is not set is left out).
    pub fn inherit(names: &[String]) -> JobEnv {
        let names = BASE_ENV
            .iter()
            .copied()
            .chain(names.iter().map(String::as_str));
        let vars: Vec<(String, String)> = names
            .filter_map(|name| Some((name.to_owned(), std::env::var(name).ok()?)))
            .collect();
        JobEnv {
            vars: vars.into(),
            run_as: None,
        }
    }

    /// The same environment, for jobs run as `user` (`executor.run_as`).
    pub fn run_as(mut self, user: RunAs) -> JobEnv {
        self.run_as = Some(Arc::new(user));
        self
    }

    /// Who the jobs run as, when not the executor's own user.
    pub fn user(&self) -> Option<&RunAs> {
        self.run_as.as_deref()
    }

    /// A command that runs `program` as the jobs' user: through
    /// `setpriv` (util-linux) when `executor.run_as` is set, started from
    /// `/` (the executor's directory may not be the user's to enter).
    pub(super) fn command(&self, program: &str) -> Command {
        match &self.run_as {
            None => Command::new(program),
            Some(user) => {
                let mut cmd = Command::new("setpriv");
                user.switch(&mut cmd);
                cmd.arg(program).current_dir("/");
                cmd
            }
        }
    }
}

/// The shell handler with the environment `env` (see the module doc).
#[derive(Clone, Debug)]
pub struct Shell(pub JobEnv);

impl Handler for Shell {
    fn call(&self, ctx: JobContext) -> BoxFuture<'static, Result<(), JobError>> {
        let env = self.0.clone();
        Box::pin(async move { run_shell(ctx, &env).await })
    }
}

/// Between SIGTERM and SIGKILL on cancellation (within the supervisor's
/// one-second grace).
const TERM_GRACE: Duration = Duration::from_millis(500);
/// After the script exits, output still in the pipes gets this long; a
/// background process holding the pipes open does not hold the run.
const OUTPUT_DRAIN: Duration = Duration::from_secs(1);

/// The shell handler (see the module doc) with `PATH`, `HOME` and `LANG`
/// only; [`Shell`] passes more (`executor.job_env`).
pub async fn shell(ctx: JobContext) -> Result<(), JobError> {
    run_shell(ctx, &JobEnv::inherit(&[])).await
}

async fn run_shell(ctx: JobContext, env: &JobEnv) -> Result<(), JobError> {
    if ctx.params().trim().is_empty() {
        return Err(JobError::abort(
            "shell: the params must hold the command line to run",
        ));
    }
    run(&ctx, command(&ctx, env), "sh", "command").await
}

/// Runs `cmd` (started by [`command`]'s conventions: piped output, its own
/// process group) as the run: output lines to the job log, the exit status
/// as the result, and on cancellation the whole group stopped. `program`
/// and `what` name it in messages ("cannot start sh", "command killed").
pub(super) async fn run(
    ctx: &JobContext,
    mut cmd: Command,
    program: &str,
    what: &str,
) -> Result<(), JobError> {
    let mut child = cmd
        .spawn()
        .map_err(|e| JobError::fail(format!("cannot start {program}: {e}")))?;
    let pid = child.id();
    let pumps = [
        child
            .stdout
            .take()
            .map(|out| spawn_pump(out, ctx.clone(), "")),
        child
            .stderr
            .take()
            .map(|err| spawn_pump(err, ctx.clone(), "[stderr] ")),
    ];
    let status = tokio::select! {
        status = child.wait() => status,
        () = ctx.cancelled() => {
            stop(&mut child, pid).await;
            finish_pumps(pumps).await;
            ctx.log(format!("[rondo] {what} killed: the run was cancelled"));
            return Err(JobError::fail("killed: the run was cancelled"));
        }
    };
    finish_pumps(pumps).await;
    let status = status.map_err(|e| JobError::fail(format!("waiting for {program}: {e}")))?;
    exit_result(status)
}

fn command(ctx: &JobContext, env: &JobEnv) -> Command {
    let mut cmd = env.command("sh");
    cmd.arg("-c").arg(ctx.params()).arg("rondo");
    with_trigger(&mut cmd, ctx, env, &[]);
    cmd
}

/// The shard index and total as arguments, an environment of `env` and
/// the trigger (plus `extra`) only, empty stdin, piped output, and a
/// process group of its own that [`run`] can stop as a whole.
pub(super) fn with_trigger(
    cmd: &mut Command,
    ctx: &JobContext,
    env: &JobEnv,
    extra: &[(&str, String)],
) {
    let shard_index = ctx.shard_index().to_string();
    let shard_total = ctx.shard_total().to_string();
    cmd.arg(&shard_index)
        .arg(&shard_total)
        .env_clear()
        .envs(env.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(ctx.secrets())
        .env("RONDO_TRIGGER_ID", ctx.trigger_id())
        .env("RONDO_JOB_ID", ctx.job_id().to_string())
        .env("RONDO_SHARD_INDEX", &shard_index)
        .env("RONDO_SHARD_TOTAL", &shard_total)
        .env("RONDO_PARAMS", ctx.params())
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .envs(env.user().map(|u| ("HOME", u.home.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
}

fn exit_result(status: ExitStatus) -> Result<(), JobError> {
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(()),
        (Some(code), _) => Err(JobError::fail(format!("exit code {code}"))),
        (None, Some(signal)) => Err(JobError::fail(format!("killed by signal {signal}"))),
        (None, None) => Err(JobError::fail(format!("ended with {status}"))),
    }
}

/// SIGTERM to the group, SIGKILL after the grace, and reap the child.
async fn stop(child: &mut Child, pid: Option<u32>) {
    if let Some(pid) = pid {
        signal_group(pid, "TERM").await;
    }
    if tokio::time::timeout(TERM_GRACE, child.wait()).await.is_ok() {
        return;
    }
    if let Some(pid) = pid {
        signal_group(pid, "KILL").await;
    }
    if let Err(e) = child.kill().await {
        tracing::warn!(error = %e, "killing the shell failed");
    }
}

/// Signals the process group led by `pid` (the child was started with
/// `process_group(0)`), with the shell's `kill` since `unsafe` is off limits.
async fn signal_group(pid: u32, signal: &str) {
    let sent = Command::new("sh")
        .arg("-c")
        .arg("kill -s \"$1\" -- \"-$2\" 2>/dev/null")
        .arg("rondo-kill")
        .arg(signal)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .status()
        .await;
    if let Err(e) = sent {
        tracing::warn!(error = %e, signal, "cannot signal the command's process group");
    }
}

fn spawn_pump<R>(reader: R, ctx: JobContext, prefix: &'static str) -> JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(pump(reader, ctx, prefix))
}

/// Gives the pumps a moment to read what is left, then stops them.
async fn finish_pumps(pumps: [Option<JoinHandle<()>>; 2]) {
    for pump in pumps.into_iter().flatten() {
        let abort = pump.abort_handle();
        if tokio::time::timeout(OUTPUT_DRAIN, pump).await.is_err() {
            abort.abort();
        }
    }
}

/// Copies lines from `reader` to the job log. Lines longer than the log
/// takes are split; bytes that are not UTF-8 are replaced.
async fn pump<R: AsyncRead + Unpin>(reader: R, ctx: JobContext, prefix: &'static str) {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        let buf = match reader.fill_buf().await {
            Ok([]) => break,
            Ok(buf) => buf,
            Err(e) => {
                tracing::debug!(error = %e, "reading command output failed");
                break;
            }
        };
        let newline = buf.iter().position(|&b| b == b'\n');
        let room = MAX_LINE_BYTES - prefix.len() - line.len();
        let take = newline.map_or(buf.len(), |i| i + 1).min(room);
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if newline.is_some_and(|i| i < take) || line.len() + prefix.len() >= MAX_LINE_BYTES {
            emit(&ctx, prefix, &mut line);
        }
    }
    if !line.is_empty() {
        emit(&ctx, prefix, &mut line);
    }
}

fn emit(ctx: &JobContext, prefix: &str, line: &mut Vec<u8>) {
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    ctx.log(format!("{prefix}{}", String::from_utf8_lossy(line)));
    line.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TestRun, run_handler};

    #[tokio::test]
    async fn streams_stdout_and_stderr_and_succeeds() {
        let (outcome, lines) = run_handler(shell, "echo one; echo two >&2; printf 'three'").await;
        assert!(outcome.is_success(), "{outcome:?}");
        assert!(lines.contains(&"one".to_owned()), "{lines:?}");
        assert!(lines.contains(&"[stderr] two".to_owned()), "{lines:?}");
        assert!(lines.contains(&"three".to_owned()), "{lines:?}");
    }

    /// `cargo test` gives this process `CARGO_*` variables, as a real
    /// executor has its `RONDO_*` settings: none reaches a job unless
    /// `executor.job_env` names it.
    #[tokio::test]
    async fn a_job_gets_only_its_own_environment() {
        assert!(std::env::var("CARGO_PKG_NAME").is_ok(), "run by cargo");
        let (outcome, lines) = run_handler(shell, "env").await;
        assert!(outcome.is_success(), "{outcome:?}");
        let names: Vec<&str> = lines.iter().filter_map(|l| l.split('=').next()).collect();
        assert!(names.contains(&"PATH"), "{names:?}");
        assert!(names.contains(&"RONDO_TRIGGER_ID"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("CARGO")), "{names:?}");
        let rondo: Vec<&&str> = names.iter().filter(|n| n.starts_with("RONDO_")).collect();
        assert_eq!(rondo.len(), 5, "only the trigger's values: {rondo:?}");

        let named = Shell(JobEnv::inherit(&["CARGO_PKG_NAME".into()]));
        let (_, lines) = run_handler(named, "env").await;
        assert!(
            lines.contains(&"CARGO_PKG_NAME=rondo-executor".to_owned()),
            "{lines:?}"
        );
        assert!(
            !lines.iter().any(|l| l.starts_with("CARGO_MANIFEST_DIR=")),
            "{lines:?}"
        );
    }

    #[tokio::test]
    async fn exit_codes_fail_the_run() {
        let (outcome, _) = run_handler(shell, "exit 3").await;
        assert_eq!((outcome.code, outcome.msg.as_str()), (500, "exit code 3"));
        let (outcome, _) = run_handler(shell, "kill -9 $$").await;
        assert_eq!(outcome.msg, "killed by signal 9");
    }

    #[tokio::test]
    async fn empty_params_abort() {
        let (outcome, _) = run_handler(shell, "  ").await;
        assert!(!outcome.retryable);
    }

    #[tokio::test]
    async fn shards_and_ids_reach_the_script() {
        let script = "echo \"$0 $1 $2\"; echo \"$RONDO_TRIGGER_ID $RONDO_JOB_ID $RONDO_SHARD_INDEX/$RONDO_SHARD_TOTAL\"";
        let (outcome, lines) = TestRun::new(script)
            .trigger_id("t-5")
            .job_id(8)
            .shard(2, 3)
            .run(shell)
            .await;
        assert!(outcome.is_success());
        assert_eq!(lines, vec!["rondo 2 3", "t-5 8 2/3"]);
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let marker = format!("/tmp/rondo-shell-test-{}", rand::random::<u64>());
        let script = format!("(sleep 3; touch {marker}) & sleep 30");
        let started = std::time::Instant::now();
        let (outcome, _) = TestRun::new(script).timeout_s(1).run(shell).await;
        assert_eq!(outcome.code, 502);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !std::path::Path::new(&marker).exists(),
            "the background child survived"
        );
    }

    #[tokio::test]
    async fn very_long_lines_are_split() {
        let (outcome, lines) = run_handler(shell, "head -c 40000 /dev/zero | tr '\\0' x").await;
        assert!(outcome.is_success());
        assert_eq!(
            lines.len(),
            3,
            "{:?}",
            lines.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(lines.iter().map(String::len).sum::<usize>(), 40000);
    }
}
