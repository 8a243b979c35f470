//! `[persist]` (the persistence worker) and `[log]`.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PersistConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (open, so
    /// keep it on loopback or a private network); empty: not served.
    pub metrics_addr: String,
    /// Events per transaction at most.
    pub batch_size: usize,
    /// A batch is written when it is full or this old.
    pub linger_ms: u64,
    /// Unacked events in flight (AMQP prefetch); at least `batch_size`.
    pub prefetch: u16,
    pub shutdown_grace_ms: u64,
    /// Trigger logs older than this many days are dropped, once a day
    /// (XXL-JOB's `logretentiondays`); below 7 disables retention.
    pub retention_days: u32,
    /// How often the daily report counts (the last three days) are
    /// refreshed; retention runs at start and every 24 h.
    pub report_interval_ms: u64,
}

impl Default for PersistConfig {
    fn default() -> Self {
        PersistConfig {
            metrics_addr: String::new(),
            batch_size: 1000,
            linger_ms: 50,
            prefetch: 2000,
            shutdown_grace_ms: 10_000,
            retention_days: 30,
            report_interval_ms: 60_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `plain` or `json`.
    pub format: String,
    /// A tracing filter; `RUST_LOG` wins when set.
    pub filter: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: "plain".into(),
            filter: "info".into(),
        }
    }
}
