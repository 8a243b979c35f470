//! Handlers that ship with the `rondo-executor` binary, usable from any
//! executor: [`shell`](fn@shell) runs a command line, [`http`](fn@http)
//! calls a URL, [`demo`](fn@demo) logs and sleeps.
//!
//! `shell` runs commands: whoever may create a job in the executor's group
//! could run anything on its host. [`register`] offers it only when the
//! executor's config enables it (`executor.command_handlers = true`).

mod demo;
mod http;
mod run_as;
mod script;
mod shell;

pub use demo::demo;
pub use http::{Http, http};
pub use script::{Script, script};
pub use shell::{JobEnv, RunAs, Shell, shell};

use rondo_core::config::ExecutorConfig;

use crate::ExecutorError;
use crate::executor::ExecutorBuilder;

/// Checks the built-in handlers' part of an executor's config (the `http`
/// handler's CA file and limits, and that `executor.run_as` is a user this
/// process can become), for a process to refuse a bad config at start;
/// [`register`] cannot fail.
pub fn check_config(config: &ExecutorConfig) -> Result<(), ExecutorError> {
    http::check_config(config)?;
    job_env(config).map(drop).map_err(ExecutorError::Config)
}

/// What shell and script jobs start from: [`JobEnv`], run as
/// `executor.run_as` when set.
fn job_env(config: &ExecutorConfig) -> Result<JobEnv, String> {
    let env = JobEnv::inherit(&config.job_env);
    if config.run_as.is_empty() {
        return Ok(env);
    }
    Ok(env.run_as(RunAs::resolve(&config.run_as)?))
}

pub use crate::handler::COMMAND_HANDLERS;

/// Registers the built-in handlers under their usual names: `http` (with
/// the executor's `http_*` keys) and `demo`, `shell` only when
/// `executor.command_handlers` is on, and `script:<interpreter>` for each
/// interpreter of `executor.script_handlers` found on the `PATH`.
pub fn register(builder: ExecutorBuilder) -> ExecutorBuilder {
    let commands = builder.config().executor.command_handlers;
    let interpreters = builder.config().executor.script_handlers.clone();
    // `check_config` refuses a `run_as` this process cannot become; an
    // embedder that skipped it gets no shell or script handler at all
    // rather than jobs run as the executor's own user.
    let env = job_env(&builder.config().executor)
        .inspect_err(|e| tracing::error!(error = %e, "shell and script jobs are not offered"))
        .ok();
    let configured = Http::from_config(&builder.config().executor);
    let mut builder = match configured {
        Ok(configured) => builder.handler("http", configured),
        // `build` refuses this config, naming the key (`check_config`);
        // the defaults stand in until then.
        Err(_) => builder.handler("http", http),
    }
    .handler("demo", demo);
    let Some(env) = env else {
        return builder;
    };
    if commands {
        builder = builder.handler("shell", Shell(env.clone()));
    }
    for interpreter in interpreters {
        if script::on_path(&interpreter) {
            tracing::info!(interpreter, "script jobs enabled");
            builder = builder.handler(format!("script:{interpreter}"), Script(env.clone()));
        } else {
            tracing::warn!(
                interpreter,
                "executor.script_handlers names an interpreter that is not on the PATH; its script jobs are refused here"
            );
        }
    }
    builder
}
