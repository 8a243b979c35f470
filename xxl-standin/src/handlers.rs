//! The job handlers: a few built-in "BEAN" handlers like the ones of
//! xxl-job's sample executor, a pretend GLUE(Groovy) handler and a real
//! GLUE(Shell) one. A handler is a future: the job thread cancels it (kill,
//! cover early, timeout) by dropping it, which stops it at its next await and
//! kills a script's child process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;

use crate::joblog::RunLog;
use crate::wire::{FAIL, SUCCESS, Trigger};

const SAMPLE: &str = "com.xxl.job.executor.jobhandler.SampleXxlJob";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bean {
    Demo,
    Sharding,
    Sleep,
    Fail,
}

/// What a job thread was made for. Two triggers may share a thread only if
/// their handlers are the same in XXL-JOB's sense: the same bean, or glue of
/// the same kind and version (`glueUpdatetime`).
#[derive(Clone, Debug)]
pub enum Handler {
    Bean(Bean),
    Groovy { version: i64, source: String },
    Shell { version: i64, source: String },
}

impl Handler {
    /// The handler a trigger asks for, or the failure message to answer.
    pub fn resolve(t: &Trigger) -> Result<Handler, String> {
        let glue_type = t.glue_type.as_deref().unwrap_or("null");
        let source = || t.glue_source.clone().unwrap_or_default();
        match glue_type {
            "BEAN" => {
                let name = t.executor_handler.as_deref().unwrap_or("null");
                let bean = match name {
                    "demoJobHandler" => Bean::Demo,
                    "shardingJobHandler" => Bean::Sharding,
                    "sleepJobHandler" => Bean::Sleep,
                    "failJobHandler" => Bean::Fail,
                    _ => return Err(format!("job handler [{name}] not found.")),
                };
                Ok(Handler::Bean(bean))
            }
            "GLUE_GROOVY" => Ok(Handler::Groovy {
                version: t.glue_updatetime,
                source: source(),
            }),
            "GLUE_SHELL" => Ok(Handler::Shell {
                version: t.glue_updatetime,
                source: source(),
            }),
            // The other script kinds (python, nodejs, powershell, php) are
            // not carried by the stand-in.
            other => Err(format!("glueType[{other}] is not valid.")),
        }
    }

    /// Whether a thread made for `self` may run a trigger resolved to `new`.
    pub fn same_as(&self, new: &Handler) -> bool {
        match (self, new) {
            (Handler::Bean(a), Handler::Bean(b)) => a == b,
            (Handler::Groovy { version: a, .. }, Handler::Groovy { version: b, .. })
            | (Handler::Shell { version: a, .. }, Handler::Shell { version: b, .. }) => a == b,
            _ => false,
        }
    }

    /// The stop reason of an old thread replaced for a trigger of `self`.
    pub fn change_reason(&self) -> &'static str {
        match self {
            Handler::Bean(_) => "change jobhandler or glue type, and terminate the old job thread.",
            _ => "change job source or glue type, and terminate the old job thread.",
        }
    }
}

/// A handler's result, as XxlJobHelper.handleSuccess / handleFail set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub code: i32,
    pub msg: Option<String>,
}

impl Outcome {
    pub fn success() -> Self {
        Outcome {
            code: SUCCESS,
            msg: None,
        }
    }

    pub fn fail(msg: impl Into<String>) -> Self {
        Outcome {
            code: FAIL,
            msg: Some(msg.into()),
        }
    }
}

/// What a handler sees of its run.
pub struct RunContext<'a> {
    pub trigger: &'a Trigger,
    pub log: &'a RunLog,
    pub glue_dir: &'a Path,
}

pub async fn execute(handler: &Handler, ctx: &RunContext<'_>) -> Outcome {
    let t = ctx.trigger;
    let params = t.executor_params.as_deref().unwrap_or("");
    match handler {
        Handler::Bean(Bean::Demo) => {
            ctx.log.log(
                &format!("{SAMPLE}#demoJobHandler"),
                41,
                "XXL-JOB, Hello World.",
            );
            Outcome::success()
        }
        Handler::Bean(Bean::Sharding) => {
            let msg = format!(
                "分片参数：当前分片序号 = {}, 总分片数 = {}",
                t.broadcast_index, t.broadcast_total
            );
            ctx.log
                .log(&format!("{SAMPLE}#shardingJobHandler"), 68, &msg);
            Outcome::success()
        }
        Handler::Bean(Bean::Sleep) => sleep(params, ctx.log).await,
        Handler::Bean(Bean::Fail) => {
            ctx.log
                .log(&format!("{SAMPLE}#failJobHandler"), 90, "failing as asked");
            Outcome::fail(if params.is_empty() { "failed" } else { params })
        }
        Handler::Groovy { version, source } => groovy(*version, source, ctx.log),
        Handler::Shell { version, source } => {
            let file = ctx.glue_dir.join(format!("{}_{version}.sh", t.job_id));
            shell(&file, source, t, ctx.log).await
        }
    }
}

/// Sleeps `params` ms, logging progress every 100 ms.
async fn sleep(params: &str, log: &RunLog) -> Outcome {
    let origin = format!("{SAMPLE}#sleepJobHandler");
    let Ok(total) = params.trim().parse::<u64>() else {
        return Outcome::fail(format!("invalid sleep ms: {params}"));
    };
    log.log(&origin, 77, &format!("sleep {total} ms"));
    let mut slept = 0;
    while slept < total {
        let step = (total - slept).min(100);
        tokio::time::sleep(Duration::from_millis(step)).await;
        slept += step;
        log.log(&origin, 80, &format!("slept {slept} ms"));
    }
    Outcome::success()
}

/// The stand-in cannot run Groovy: it echoes what the source would log.
fn groovy(version: i64, source: &str, log: &RunLog) -> Outcome {
    let origin = "com.xxl.job.service.handler.DemoGlueJobHandler#execute";
    let first = source.lines().map(str::trim).find(|l| !l.is_empty());
    log.log(
        origin,
        18,
        &format!("glue(groovy) version {version}: {}", first.unwrap_or("")),
    );
    for line in source.lines() {
        if let Some(literal) = logged_literal(line) {
            log.log(origin, 20, &literal);
        }
    }
    if source.contains("XxlJobHelper.handleFail") {
        Outcome::fail("glue failed")
    } else {
        Outcome::success()
    }
}

/// The string literal of `XxlJobHelper.log("…")` on a line, if any.
fn logged_literal(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("XxlJobHelper.log(")?;
    let mut chars = rest.trim_start().strip_prefix('"')?.chars();
    let mut literal = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(literal),
            '\\' => literal.extend(chars.next()),
            c => literal.push(c),
        }
    }
    None
}

/// Runs the glue source with `sh <file> <params> <index> <total>`, its
/// output going into the job log line by line, as is.
async fn shell(file: &PathBuf, source: &str, t: &Trigger, log: &RunLog) -> Outcome {
    if !file.exists() {
        let written = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(file, source));
        if let Err(e) = written {
            return Outcome::fail(format!("script file write failed: {e}"));
        }
    }
    log.log(
        "com.xxl.job.core.handler.impl.ScriptJobHandler#execute",
        72,
        &format!("----------- script file:{} -----------", file.display()),
    );
    let child = Command::new("sh")
        .arg(file)
        .arg(t.executor_params.as_deref().unwrap_or(""))
        .arg(t.broadcast_index.to_string())
        .arg(t.broadcast_total.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return Outcome::fail(format!("script start failed: {e}")),
    };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (_, _, status) = tokio::join!(
        copy_lines(stdout, log),
        copy_lines(stderr, log),
        child.wait()
    );
    match status.map(|s| s.code().unwrap_or(-1)) {
        Ok(0) => Outcome::success(),
        Ok(n) => Outcome::fail(format!("script exit value({n}) is failed")),
        Err(e) => Outcome::fail(format!("script wait failed: {e}")),
    }
}

async fn copy_lines(pipe: Option<impl AsyncRead + Unpin>, log: &RunLog) {
    let Some(pipe) = pipe else { return };
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        log.raw(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(glue: &str, handler: &str, version: i64) -> Trigger {
        Trigger {
            glue_type: Some(glue.into()),
            executor_handler: Some(handler.into()),
            glue_updatetime: version,
            ..Trigger::default()
        }
    }

    #[test]
    fn resolves_and_compares() {
        let demo = Handler::resolve(&trigger("BEAN", "demoJobHandler", 0)).expect("demo");
        let sleep = Handler::resolve(&trigger("BEAN", "sleepJobHandler", 0)).expect("sleep");
        assert!(demo.same_as(&demo) && !demo.same_as(&sleep));
        assert_eq!(
            Handler::resolve(&trigger("BEAN", "nope", 0)).err(),
            Some("job handler [nope] not found.".into())
        );
        assert_eq!(
            Handler::resolve(&trigger("GLUE_PHP", "", 0)).err(),
            Some("glueType[GLUE_PHP] is not valid.".into())
        );
        assert_eq!(
            Handler::resolve(&Trigger::default()).err(),
            Some("glueType[null] is not valid.".into())
        );
        let g1 = Handler::resolve(&trigger("GLUE_GROOVY", "", 1)).expect("groovy");
        let g2 = Handler::resolve(&trigger("GLUE_GROOVY", "", 2)).expect("groovy");
        let s1 = Handler::resolve(&trigger("GLUE_SHELL", "", 1)).expect("shell");
        assert!(g1.same_as(&g1) && !g1.same_as(&g2) && !g1.same_as(&s1) && !s1.same_as(&demo));
    }

    #[tokio::test]
    async fn shell_glue_runs_with_its_arguments() {
        let dir = crate::joblog::testdir::fresh("shell");
        let log_file = dir.join("run.log");
        let log = RunLog::new(log_file.clone(), "t".into());
        let t = Trigger {
            job_id: 4,
            executor_params: Some("p".into()),
            broadcast_index: 1,
            broadcast_total: 2,
            ..trigger("GLUE_SHELL", "", 9)
        };
        let handler = Handler::Shell {
            version: 9,
            source: "echo out $1 $2 $3\necho err >&2\nexit 3\n".into(),
        };
        let ctx = RunContext {
            trigger: &t,
            log: &log,
            glue_dir: &dir,
        };
        let outcome = execute(&handler, &ctx).await;
        assert_eq!(outcome, Outcome::fail("script exit value(3) is failed"));
        assert!(dir.join("4_9.sh").exists());
        let text = std::fs::read_to_string(&log_file).expect("log");
        assert!(
            text.contains("script file:")
                && text.contains("\nout p 1 2\n")
                && text.contains("\nerr\n")
        );

        // Dropped (killed, timed out): the child goes with it.
        let slow = Handler::Shell {
            version: 10,
            source: "sleep 30\n".into(),
        };
        let started = std::time::Instant::now();
        let cut = tokio::time::timeout(Duration::from_millis(300), execute(&slow, &ctx)).await;
        assert!(cut.is_err() && started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn finds_logged_literals() {
        assert_eq!(
            logged_literal(r#"    XxlJobHelper.log("hello \"you\"");"#),
            Some(r#"hello "you""#.into())
        );
        assert_eq!(logged_literal("XxlJobHelper.log(x)"), None);
        assert_eq!(logged_literal("println 1"), None);
    }
}
