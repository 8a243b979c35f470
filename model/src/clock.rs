//! Wall-clock time in milliseconds since the Unix epoch (UTC).

/// Milliseconds since the Unix epoch, the unit of every score and fire time.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
