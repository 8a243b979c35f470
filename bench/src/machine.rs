//! What the figures were measured on.

use serde::Serialize;
use sqlx::MySqlPool;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu_model: String,
    pub memory_mb: u64,
    pub kernel: String,
    pub mysql_version: String,
    /// `release` or `debug`: a debug build's figures are not comparable.
    pub build: &'static str,
}

impl Machine {
    /// Reads `/proc` and asks MySQL its version (unknown fields are empty).
    pub async fn describe(pool: &MySqlPool) -> Machine {
        let mysql_version = sqlx::query_scalar::<_, String>("SELECT VERSION()")
            .fetch_one(pool)
            .await
            .unwrap_or_default();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine {
            cores: cores(),
            cpu_model: value_of(&cpuinfo, "model name").unwrap_or_default(),
            memory_mb: value_of(&meminfo, "MemTotal")
                .and_then(|kb| kb.trim_end_matches(" kB").parse::<u64>().ok())
                .map_or(0, |kb| kb / 1024),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            mysql_version,
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
        }
    }
}

/// Cores this process may run on.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The value of the first `key: value` line of a /proc file.
fn value_of(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}
