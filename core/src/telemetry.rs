//! Tracing set-up for the binaries: `RUST_LOG` wins over the configured
//! filter; plain or JSON lines on stderr.

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

/// Installs the global subscriber. Safe to call twice (the second is a no-op),
/// which tests rely on.
pub fn init(config: &LogConfig) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.filter));
    // Colours only for a person at a terminal, never in log files.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = if config.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
