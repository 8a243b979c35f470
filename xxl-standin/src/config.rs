//! The command line, and the settings derived from it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

/// Which xxl-job-core the stand-in behaves as. The generations differ on the
/// wire (response envelope, trigger path, field names, auth headers), not in
/// how jobs run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Generation {
    /// xxl-job-core 2.3 – 3.2: `ReturnT`, `/run`, `logDateTim`, token header only.
    #[value(name = "2")]
    V2,
    /// xxl-job-core 3.3 – 3.4.x: `Response`, still `/run` and `logDateTim`.
    #[value(name = "3")]
    V3,
    /// xxl-job-core 3.5 (HEAD): `Response`, `/trigger`, `logDateTime`,
    /// token and appname headers both required.
    #[value(name = "3.5")]
    V35,
}

impl Generation {
    /// The path the admin posts a trigger to.
    pub fn trigger_path(self) -> &'static str {
        match self {
            Generation::V2 | Generation::V3 => "/run",
            Generation::V35 => "/trigger",
        }
    }

    /// The first word of the refusal of a logId already queued: the 2.x line
    /// (up to 3.3) misspells it.
    pub fn repeat_word(self) -> &'static str {
        match self {
            Generation::V2 => "repeate",
            Generation::V3 | Generation::V35 => "repeat",
        }
    }
}

#[derive(Clone, Debug, Parser)]
#[command(
    name = "xxl-standin",
    about = "A stand-in XXL-JOB executor for rondo's tests"
)]
pub struct Cli {
    /// The xxl-job-core generation to speak.
    #[arg(long, value_enum, default_value = "2")]
    pub generation: Generation,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// The port of the embedded HTTP server.
    #[arg(long)]
    pub port: u16,
    /// The address registered with the admin (default `http://127.0.0.1:<port>/`).
    #[arg(long)]
    pub address: Option<String>,
    /// Comma-separated admin base URLs (`/api/...` is appended).
    #[arg(long, default_value = "")]
    pub admin_addresses: String,
    /// The shared access token (may be empty).
    #[arg(long, default_value = "")]
    pub access_token: String,
    /// The executor's appname (its registry key).
    #[arg(long)]
    pub appname: String,
    /// The directory of the job logs, glue sources and failed callbacks.
    #[arg(long)]
    pub log_path: PathBuf,
    #[arg(long, default_value_t = 30_000)]
    pub registry_interval_ms: u64,
    #[arg(long, default_value_t = 30_000)]
    pub callback_retry_interval_ms: u64,
    /// A job thread idle this long removes itself.
    #[arg(long, default_value_t = 90_000)]
    pub idle_remove_ms: u64,
    /// The timeout of one request to an admin.
    #[arg(long, default_value_t = 3_000)]
    pub admin_timeout_ms: u64,
    /// Append one JSON line per handler start and end here.
    #[arg(long)]
    pub runs_file: Option<PathBuf>,
}

impl Cli {
    pub fn address(&self) -> String {
        self.address
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{}/", self.port))
    }

    /// The admins' `/api` bases, in order, each without a trailing slash.
    pub fn admin_bases(&self) -> Vec<String> {
        self.admin_addresses
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| format!("{}/api", a.trim_end_matches('/')))
            .collect()
    }

    pub fn registry_interval(&self) -> Duration {
        Duration::from_millis(self.registry_interval_ms.max(1))
    }

    pub fn callback_retry_interval(&self) -> Duration {
        Duration::from_millis(self.callback_retry_interval_ms.max(1))
    }

    pub fn idle_remove(&self) -> Duration {
        Duration::from_millis(self.idle_remove_ms)
    }

    pub fn admin_timeout(&self) -> Duration {
        Duration::from_millis(self.admin_timeout_ms.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_generations_and_admins() {
        let cli = Cli::try_parse_from([
            "xxl-standin",
            "--generation",
            "3.5",
            "--port",
            "9999",
            "--appname",
            "demo",
            "--log-path",
            "/tmp/x",
            "--admin-addresses",
            "http://a:1/xxl-job-admin/, http://b:2/xxl-job-admin",
        ])
        .expect("parses");
        assert_eq!(cli.generation, Generation::V35);
        assert_eq!(cli.address(), "http://127.0.0.1:9999/");
        assert_eq!(
            cli.admin_bases(),
            vec![
                "http://a:1/xxl-job-admin/api".to_string(),
                "http://b:2/xxl-job-admin/api".to_string()
            ]
        );
        let default = Cli::try_parse_from([
            "xxl-standin",
            "--port",
            "1",
            "--appname",
            "a",
            "--log-path",
            "/tmp",
        ])
        .expect("parses");
        assert_eq!(default.generation, Generation::V2);
    }
}
