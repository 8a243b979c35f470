//! The closed set of error kinds callers branch on, and the error every
//! library boundary returns.

use serde::Serialize;

/// What went wrong, in the few ways a caller can act on. Maps to an HTTP
/// status in the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The caller's input is wrong; retrying the same input will not help.
    InvalidInput,
    /// The thing named does not exist.
    NotFound,
    /// The thing exists already or changed under the caller.
    Conflict,
    /// No credentials, or credentials that prove nothing (wrong, expired,
    /// revoked).
    Unauthenticated,
    /// The caller is known but may not do this.
    Forbidden,
    /// Too many attempts (sign-in throttling); try again later.
    TooManyRequests,
    /// A leader term older than the one the store accepts (fencing).
    StaleTerm,
    /// A service (Redis, RabbitMQ, ZooKeeper, MySQL) did not answer.
    Unavailable,
    /// A bug or an unexpected state.
    Internal,
}

impl ErrorKind {
    /// The HTTP status the admin API answers with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::InvalidInput => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict | ErrorKind::StaleTerm => 409,
            ErrorKind::Unauthenticated => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::TooManyRequests => 429,
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
        }
    }
}

/// An error with its kind, the input field it concerns (if any) and a
/// lowercase message.
#[derive(Debug, Clone, thiserror::Error, Serialize, utoipa::ToSchema)]
#[error("{kind:?}{}: {message}", field.as_deref().map(|f| format!(" ({f})")).unwrap_or_default())]
pub struct Error {
    pub kind: ErrorKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            field: None,
            message: message.into(),
        }
    }

    /// Invalid input in the named field.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::InvalidInput,
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    pub fn not_found(field: &str, message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::NotFound,
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// No valid credentials; `field` names where they were looked for.
    pub fn unauthenticated(field: &str, message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Unauthenticated,
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// A right the caller lacks; `field` names what it was refused on.
    pub fn forbidden(field: &str, message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Forbidden,
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }
}

/// Redis errors (feature `redis`, which `rondo-core` turns on): a fenced
/// write's refusal is [`ErrorKind::StaleTerm`], anything else unavailable.
#[cfg(feature = "redis")]
impl From<::redis::RedisError> for Error {
    fn from(e: ::redis::RedisError) -> Self {
        if e.to_string().contains("STALE_TERM") {
            return Error::new(ErrorKind::StaleTerm, e.to_string());
        }
        Error::unavailable(format!("redis: {e}"))
    }
}

/// Broker errors (feature `lapin`, which `rondo-core` turns on).
#[cfg(feature = "lapin")]
impl From<lapin::Error> for Error {
    fn from(e: lapin::Error) -> Self {
        Error::unavailable(format!("amqp: {e}"))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::internal(format!("json: {e}"))
    }
}

/// An error and its sources, each once, for a log line or a run's
/// message: a client library's own message alone rarely says why (some errors print their source
/// in their own message, some wrap an error of the same kind).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split(": ") {
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    }
    parts.join(": ")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chains_name_each_cause_once() {
        let inner = std::io::Error::other("refused");
        let outer = std::io::Error::other(format!("Connection error: Connection error: {inner}"));
        assert_eq!(chain(&outer), "Connection error: refused");
    }
}
