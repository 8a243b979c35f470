//! Connecting to Redis the way every rondo process must: a pool of
//! multiplexed connections with a response timeout long enough for big
//! pipelines (redis-rs's default of 500 ms fails them under load).

use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use redis::AsyncConnectionConfig;

use crate::config::RedisConfig;
use crate::error::Error;

pub use deadpool_redis::Connection as PooledConnection;

/// Builds the pool; connections are opened lazily, so this fails only on a
/// malformed URL.
pub fn pool(config: &RedisConfig) -> Result<Pool, Error> {
    let conn_config = AsyncConnectionConfig::new()
        .set_response_timeout(Some(Duration::from_millis(config.response_timeout_ms)))
        .set_connection_timeout(Some(Duration::from_secs(5)));
    let manager = Manager::new_with_config(config.url.as_str(), conn_config)
        .map_err(|e| Error::invalid("redis.url", format!("{e}")))?;
    Pool::builder(manager)
        .max_size(config.pool_size)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| Error::internal(format!("redis pool: {e}")))
}
