//! What every alarm channel shares: the errors of its setup, its time
//! bound, and an error told with its sources.

use std::time::Duration;

use rondo_core::config::AlarmConfig;

/// The timeout used when `[alarm] timeout_ms` is 0.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// An `[alarm]` section that cannot send (see [`Alarmer::try_new`](super::Alarmer::try_new)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlarmConfigError {
    #[error("alarm.smtp_from {from:?} is not a mailbox: {reason}")]
    From { from: String, reason: String },
    #[error("alarm.smtp_tls must be none, starttls or tls, not {0:?}")]
    Tls(String),
    #[error("alarm.smtp_host {host:?}: {reason}")]
    Smtp { host: String, reason: String },
    #[error("alarm webhook client: {0}")]
    Http(String),
    #[error("alarm.email_allow: {0}")]
    EmailAllow(String),
}

pub(super) fn timeout(config: &AlarmConfig) -> Duration {
    match config.timeout_ms {
        0 => DEFAULT_TIMEOUT,
        ms => Duration::from_millis(ms),
    }
}

pub(super) fn timed_out(timeout: Duration) -> String {
    format!("timed out after {} ms", timeout.as_millis())
}
