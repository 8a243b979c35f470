//! Handlers that ship with the `rondo-executor` binary, usable from any
//! executor: [`shell`](fn@shell) runs a command line, [`http`](fn@http)
//! calls a URL, [`demo`](fn@demo) logs and sleeps.

mod demo;
mod http;
mod shell;

pub use demo::demo;
pub use http::http;
pub use shell::shell;

use crate::executor::ExecutorBuilder;

/// Registers every built-in handler under its usual name (`shell`, `http`,
/// `demo`).
pub fn register(builder: ExecutorBuilder) -> ExecutorBuilder {
    builder
        .handler("shell", shell)
        .handler("http", http)
        .handler("demo", demo)
}
