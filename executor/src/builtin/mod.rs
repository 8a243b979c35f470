//! Handlers that ship with the `rondo-executor` binary, usable from any
//! executor: [`shell`](fn@shell) runs a command line, [`http`](fn@http)
//! calls a URL, [`demo`](fn@demo) logs and sleeps.
//!
//! `shell` runs commands: whoever may create a job in the executor's group
//! could run anything on its host. [`register`] offers it only when the
//! executor's config enables it (`executor.command_handlers = true`).

mod demo;
mod http;
mod script;
mod shell;

pub use demo::demo;
pub use http::{Http, http};
pub use script::{Script, script};
pub use shell::{JobEnv, Shell, shell};

use crate::executor::ExecutorBuilder;

/// Checks the built-in handlers' part of an executor's config (the `http`
/// handler's CA file and limits), for a process to refuse a bad config at
/// start; [`register`] cannot fail.
pub use http::check_config;

pub use crate::handler::COMMAND_HANDLERS;

/// Registers the built-in handlers under their usual names: `http` (with
/// the executor's `http_*` keys) and `demo`, `shell` only when
/// `executor.command_handlers` is on, and `script:<interpreter>` for each
/// interpreter of `executor.script_handlers` found on the `PATH`.
pub fn register(builder: ExecutorBuilder) -> ExecutorBuilder {
    let commands = builder.config().executor.command_handlers;
    let interpreters = builder.config().executor.script_handlers.clone();
    let env = JobEnv::inherit(&builder.config().executor.job_env);
    let configured = Http::from_config(&builder.config().executor);
    let mut builder = match configured {
        Ok(configured) => builder.handler("http", configured),
        // `build` refuses this config, naming the key (`check_config`);
        // the defaults stand in until then.
        Err(_) => builder.handler("http", http),
    }
    .handler("demo", demo);
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
