//! Handlers that ship with the `rondo-executor` binary, usable from any
//! executor: [`shell`](fn@shell) runs a command line, [`http`](fn@http)
//! calls a URL, [`demo`](fn@demo) logs and sleeps.
//!
//! `shell` runs commands: whoever may create a job in the executor's group
//! could run anything on its host. [`register`] offers it only when the
//! executor's config enables it (`executor.command_handlers = true`).

mod demo;
mod http;
mod shell;

pub use demo::demo;
pub use http::http;
pub use shell::shell;

use crate::executor::ExecutorBuilder;

pub use crate::handler::COMMAND_HANDLERS;

/// Registers the built-in handlers under their usual names: `http` and
/// `demo`, and `shell` only when `executor.command_handlers` is on.
pub fn register(builder: ExecutorBuilder) -> ExecutorBuilder {
    let commands = builder.config().executor.command_handlers;
    let builder = builder.handler("http", http).handler("demo", demo);
    if commands {
        builder.handler("shell", shell)
    } else {
        builder
    }
}
