//! Connecting to MySQL the way the worker needs it, and telling a bad row
//! from an unavailable server.

use std::str::FromStr;
use std::time::Duration;

use rondo_core::config::MysqlConfig;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, MySqlPool};
use tokio_util::sync::CancellationToken;

use rondo_core::backoff::Backoff;

/// How long a write waits for a pooled connection before it counts as a
/// failed attempt (sqlx retries refused connections until then).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Every session fails a statement instead of silently truncating or
/// coercing a value, whatever the server's default `sql_mode`; the worker
/// then isolates and dead-letters that one event.
const SESSION_SETUP: &str = "SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')";

/// Parses the URL into connect options (UTC session time zone, utf8mb4).
pub fn connect_options(url: &str) -> Result<MySqlConnectOptions, sqlx::Error> {
    if !(url.starts_with("mysql://") || url.starts_with("mariadb://")) {
        return Err(sqlx::Error::Configuration(
            "the url must start with mysql:// or mariadb://".into(),
        ));
    }
    Ok(MySqlConnectOptions::from_str(url)?.timezone(Some("+00:00".to_owned())))
}

/// A pool over `options` that does not connect until first used.
pub(crate) fn lazy_pool(options: MySqlConnectOptions, size: u32) -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(size.max(1))
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute(SESSION_SETUP).await?;
                Ok(())
            })
        })
        .connect_lazy_with(options)
}

/// Opens one connection to check the server answers, then returns a pool.
pub async fn connect(config: &MysqlConfig) -> Result<MySqlPool, sqlx::Error> {
    let options = connect_options(&config.url)?;
    let probe = options.connect().await?;
    probe.close().await?;
    Ok(lazy_pool(options, config.pool_size))
}

/// Connects, retrying with backoff (and logging each failure) until the
/// server answers. `None` when `shutdown` fires first; an error only for a
/// URL that cannot be parsed.
pub async fn connect_with_retry(
    config: &MysqlConfig,
    shutdown: &CancellationToken,
) -> Result<Option<MySqlPool>, sqlx::Error> {
    let options = connect_options(&config.url)?;
    let server = format!("{}:{}", options.get_host(), options.get_port());
    let mut backoff = Backoff::default();
    loop {
        match connect(config).await {
            Ok(pool) => {
                tracing::info!(%server, "connected to mysql");
                return Ok(Some(pool));
            }
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(%server, %error, retry_in_ms = delay.as_millis() as u64, "mysql is not answering");
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(None),
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// MySQL error numbers that belong to one row's values, whatever their
/// SQLSTATE (1366 incorrect string value and 1265 data truncated are
/// reported as `HY000` / `01000`).
const ROW_ERROR_NUMBERS: &[u16] = &[1048, 1062, 1264, 1265, 1292, 1366, 1406, 1452, 3140, 4025];

/// True when `error` is about the data of the statement (a value too long,
/// out of range, not allowed), so retrying the same rows cannot succeed.
/// Everything else (I/O, timeouts, deadlocks, a missing table, a read-only
/// server) is treated as transient: the batch is retried, never dropped.
pub(crate) fn is_row_error(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Encode(_) => true,
        sqlx::Error::Database(db) => {
            let state = db.code();
            let data_state = state
                .as_deref()
                .is_some_and(|s| s.starts_with("22") || s.starts_with("23"));
            let number = db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .map(|e| e.number());
            data_state || number.is_some_and(|n| ROW_ERROR_NUMBERS.contains(&n))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_and_pool_errors_are_transient() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(!is_row_error(&io));
        assert!(!is_row_error(&sqlx::Error::PoolTimedOut));
        assert!(!is_row_error(&sqlx::Error::PoolClosed));
    }

    #[test]
    fn bad_urls_are_errors_and_good_ones_parse() {
        assert!(connect_options("postgres://x").is_err());
        assert!(connect_options("mysql://u:p@[::1:3306/x").is_err());
        let options = connect_options("mysql://u:p@db.example:3307/rondo").unwrap();
        assert_eq!(options.get_host(), "db.example");
        assert_eq!(options.get_port(), 3307);
        assert_eq!(options.get_database(), Some("rondo"));
    }
}
