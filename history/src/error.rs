//! The error the crate's public functions return.

use rondo_core::ErrorKind;

/// The message includes the underlying error (which is therefore not also
/// reported as the `source`, so `{:#}` chains do not repeat it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// MySQL refused the URL, did not answer, or failed a statement.
    #[error("mysql: {0}")]
    Mysql(sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("schema migration: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// A stored row does not decode into rondo's model.
    #[error("stored row: {0}")]
    Decode(rondo_core::Error),
    /// Another process holds the maintenance lock (a pass is running).
    #[error("log maintenance is running in another process; try again")]
    Busy,
}

impl Error {
    /// What a caller can do about it: fix the config, or retry later.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Mysql(sqlx::Error::Configuration(_)) => ErrorKind::InvalidInput,
            Error::Mysql(_) => ErrorKind::Unavailable,
            Error::Migrate(_) | Error::Decode(_) => ErrorKind::Internal,
            Error::Busy => ErrorKind::Conflict,
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Mysql(e)
    }
}

impl From<sqlx::migrate::MigrateError> for Error {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Error::Migrate(e)
    }
}

/// Into the error every rondo library boundary returns, with its kind.
impl From<Error> for rondo_core::Error {
    fn from(e: Error) -> Self {
        rondo_core::Error::new(e.kind(), e.to_string())
    }
}
