//! Script jobs (XXL-JOB's GLUE): the trigger carries the job's script and
//! its type; the executor runs it with the type's interpreter.
//!
//! # Convention (XXL-JOB's `ScriptJobHandler`)
//!
//! The script is written to a file of its own (mode 0700, in a directory
//! this process made for itself, `$TMPDIR/rondo-scripts-<pid>-<random>`,
//! mode 0700; the file is removed after the run) and run as
//!
//! ```text
//! <interpreter> <script file> <params> <shard_index> <shard_total>
//! ```
//!
//! so `$1`/`sys.argv[1]` is the job's params and the next two the shard, as
//! XXL-JOB passes them. The environment is the job's own, as for `shell`
//! ([`JobEnv`]: `PATH`, `HOME`, `LANG`, `executor.job_env`), with
//! `RONDO_TRIGGER_ID`, `RONDO_JOB_ID`, `RONDO_SHARD_INDEX`,
//! `RONDO_SHARD_TOTAL`, `RONDO_PARAMS` and `RONDO_SCRIPT_VERSION`. Interpreters: `GLUE_SHELL` → `sh`,
//! `GLUE_PYTHON` → `python3`, `GLUE_NODEJS` → `node`, `GLUE_POWERSHELL` →
//! `pwsh -NoLogo -NoProfile -NonInteractive -File`, `GLUE_PHP` → `php`.
//!
//! Output, exit codes, timeout and kill work as for `shell`: stdout and
//! stderr lines become the job log, exit 0 is success, and a cancelled run
//! (timeout, kill, shutdown) ends the script's whole process group.
//!
//! An executor offers `script:<interpreter>` only for the interpreters its
//! `executor.script_handlers` names and that it finds on its `PATH`.

use std::path::{Path, PathBuf};

use rondo_core::model::GlueType;
use tokio::process::Command;

use futures_util::future::BoxFuture;

use super::shell::{JobEnv, RunAs, run, with_trigger};
use crate::context::JobContext;
use crate::error::JobError;
use crate::handler::Handler;

/// The script handler with the environment `env` (see the module doc).
#[derive(Clone, Debug)]
pub struct Script(pub JobEnv);

impl Handler for Script {
    fn call(&self, ctx: JobContext) -> BoxFuture<'static, Result<(), JobError>> {
        let env = self.0.clone();
        Box::pin(async move { run_script(ctx, &env).await })
    }
}

/// The script handler of every script type (see the module doc), with
/// `PATH`, `HOME` and `LANG` only; [`Script`] passes more.
pub async fn script(ctx: JobContext) -> Result<(), JobError> {
    run_script(ctx, &JobEnv::inherit(&[])).await
}

async fn run_script(ctx: JobContext, env: &JobEnv) -> Result<(), JobError> {
    let Some(script) = ctx.script() else {
        return Err(JobError::abort(
            "script: the trigger carries no script (only script jobs run script:* handlers)",
        ));
    };
    let glue = GlueType::parse("glue_type", &script.glue_type)
        .map_err(|e| JobError::abort(format!("script: {}", e.message)))?;
    let Some(interpreter) = glue.interpreter() else {
        return Err(JobError::abort("script: a BEAN job has no script"));
    };
    let file = ScriptFile::write(&ctx, glue, &script.source, env.user())
        .map_err(|e| JobError::fail(format!("cannot write the script file: {e}")))?;
    ctx.log(format!(
        "[rondo] running {} version {} with {interpreter}",
        glue, script.version
    ));
    let cmd = command(&ctx, env, interpreter, &file.path, script.version);
    // The file lives until the run ends.
    let result = run(&ctx, cmd, interpreter, "script").await;
    drop(file);
    result
}

fn command(
    ctx: &JobContext,
    env: &JobEnv,
    interpreter: &str,
    file: &Path,
    version: u32,
) -> Command {
    let mut cmd = env.command(interpreter);
    if interpreter == "pwsh" {
        cmd.args(["-NoLogo", "-NoProfile", "-NonInteractive", "-File"]);
    }
    cmd.arg(file).arg(ctx.params());
    with_trigger(
        &mut cmd,
        ctx,
        env,
        &[("RONDO_SCRIPT_VERSION", version.to_string())],
    );
    cmd
}

/// This process's own script directory, made once: a fresh
/// `rondo-scripts-<pid>-<random>` under the temp dir, created (never
/// reused, so never another user's or a symlink) with mode 0700.
fn private_dir() -> std::io::Result<&'static Path> {
    use std::os::unix::fs::DirBuilderExt;
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(dir) = DIR.get() {
        return Ok(dir);
    }
    let dir = std::env::temp_dir().join(format!(
        "rondo-scripts-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(DIR.get_or_init(|| dir))
}

/// A run's script file, removed when dropped.
struct ScriptFile {
    path: PathBuf,
}

impl ScriptFile {
    /// Written by the executor, readable by `user` only when jobs run as
    /// another user: the file is theirs (mode 0500), and the directory lets
    /// them reach it by its random name without listing it (0711).
    fn write(
        ctx: &JobContext,
        glue: GlueType,
        source: &str,
        user: Option<&RunAs>,
    ) -> std::io::Result<ScriptFile> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let dir = private_dir()?;
        if user.is_some() {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))?;
        }
        let ext = match glue {
            GlueType::Shell => "sh",
            GlueType::Python => "py",
            GlueType::NodeJs => "js",
            GlueType::PowerShell => "ps1",
            GlueType::Php => "php",
            GlueType::Groovy => "groovy",
            GlueType::Bean => "txt",
        };
        let name = format!("job{}-{:016x}.{ext}", ctx.job_id(), rand::random::<u64>());
        let path = dir.join(name);
        // At most 64 KiB to a local temp dir: written in place.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&path)?;
        std::io::Write::write_all(&mut file, source.as_bytes())?;
        if let Some(user) = user {
            std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o500))?;
        }
        Ok(ScriptFile { path })
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::debug!(error = %e, path = %self.path.display(), "removing a script file failed");
        }
    }
}

/// Whether `name` is an executable file on `PATH`.
pub(crate) fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    // Without a PATH, exec looks in the usual places; so does this.
    let paths = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&paths).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestRun;

    #[tokio::test]
    async fn a_shell_script_gets_params_and_shards_as_xxl_job_passes_them() {
        let source = "echo \"params=$1 shard=$2/$3\"; echo \"v$RONDO_SCRIPT_VERSION\" >&2";
        let (outcome, lines) = TestRun::new("a b")
            .shard(1, 3)
            .script("GLUE_SHELL", source, 4)
            .run(script)
            .await;
        assert!(outcome.is_success(), "{outcome:?}");
        assert!(
            lines.contains(&"params=a b shard=1/3".to_owned()),
            "{lines:?}"
        );
        assert!(lines.contains(&"[stderr] v4".to_owned()), "{lines:?}");
    }

    #[tokio::test]
    async fn a_python_script_runs_with_python3_and_its_exit_code_counts() {
        let source = "import sys\nprint('py', sys.argv[1:])\nsys.exit(3)\n";
        let (outcome, lines) = TestRun::new("x")
            .script("GLUE_PYTHON", source, 1)
            .run(script)
            .await;
        assert!(
            lines.contains(&"py ['x', '0', '1']".to_owned()),
            "{lines:?}"
        );
        assert_eq!((outcome.code, outcome.msg.as_str()), (500, "exit code 3"));
    }

    #[tokio::test]
    async fn a_timeout_ends_the_scripts_whole_process_group() {
        let marker =
            std::env::temp_dir().join(format!("rondo-script-test-{}", rand::random::<u64>()));
        let source = format!("(sleep 3; touch {}) & sleep 30", marker.display());
        let started = std::time::Instant::now();
        let (outcome, _) = TestRun::new("")
            .timeout_s(1)
            .script("GLUE_SHELL", &source, 1)
            .run(script)
            .await;
        assert_eq!(outcome.code, 502);
        assert!(started.elapsed() < std::time::Duration::from_secs(3));
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        assert!(!marker.exists(), "the background child survived");
    }

    #[tokio::test]
    async fn a_trigger_without_a_script_is_refused_without_retry() {
        let (outcome, _) = TestRun::new("").run(script).await;
        assert!(!outcome.retryable, "{outcome:?}");
    }

    #[test]
    fn interpreters_are_found_on_the_path() {
        assert!(on_path("sh"));
        assert!(!on_path("rondo-no-such-interpreter"));
    }
}
