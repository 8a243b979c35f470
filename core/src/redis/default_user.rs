//! The start-up check that Redis's `default` user is not open: anyone who
//! reaches the port without a user (a job on an executor's host, any
//! process on the Redis host) must not read or write rondo's keys. An open
//! `default` let an operator's `shell` job write a session and become
//! admin (issue 47, attack 6).
//!
//! The check connects to each Redis `redis.url` names (each seed of a
//! cluster) **without credentials** and asks one read of a key of the
//! namespace (`EXISTS <ns>:session:<probe>`; nothing is written):
//!
//! * `NOAUTH`: `default` is off or has a password: closed;
//! * `NOPERM`: `default` may not touch the namespace's keys: closed;
//! * `DENIED`: Redis's protected mode, which it enters only when `default`
//!   has no password: open (from Redis's own host);
//! * any other answer (a number, `MOVED`, `LOADING`, …) passed
//!   authentication and the ACL: open;
//! * no answer within [`PROBE_TIMEOUT`] (refused, unreachable, silent):
//!   unknown; the process starts and reaches Redis with its usual retries,
//!   and the next start checks again.
//!
//! Blocking on purpose: it runs in a daemon's `prepare`, before the runtime
//! exists, so an open `default` exits with the bad-config code (64).

use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::config::RedisConfig;
use crate::names::Names;

/// How long one Redis may take to accept the connection, and then to
/// answer the probe.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a Redis said to a connection without credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultUser {
    /// `default` cannot be used without a password, or reaches none of
    /// the namespace's keys (the answer that says so).
    Closed(String),
    /// Anyone who reaches the port reads and writes the namespace's keys
    /// (the answer that shows it).
    Open(String),
    /// No answer: Redis is down or out of reach (why).
    Unknown(String),
}

/// `default` is open on a Redis this process uses, and config does not say
/// that this Redis is a throwaway demo.
#[derive(Debug, thiserror::Error)]
#[error(
    "redis at {addr} lets anyone in without a password: its `default` user answered {answer:?} to a connection without credentials, so any process that reaches the port (a shell job included) can read and write rondo's keys and forge an admin session; turn it off (`ACL SETUSER default off`, scripts/redis-acl.sh does) and give each process its own user (docs/security.md, \"Redis users\"), or, for a throwaway demo Redis only, set redis.allow_open_default = true"
)]
pub struct OpenDefault {
    pub addr: String,
    pub answer: String,
}

/// Refuses a Redis whose `default` user is open, unless
/// `redis.allow_open_default` (then it warns). Checks every Redis of
/// `redis.url` (each seed of a cluster); a Redis that does not answer is
/// warned about and passed.
pub fn refuse_open_default(config: &RedisConfig, names: &Names) -> Result<(), OpenDefault> {
    for addr in addresses(config) {
        match probe(&addr, names, PROBE_TIMEOUT) {
            DefaultUser::Closed(_) => {}
            DefaultUser::Unknown(why) => tracing::warn!(
                redis = %addr,
                "could not check whether redis's default user is open ({why}); going on, the next start checks again"
            ),
            DefaultUser::Open(answer) if config.allow_open_default => tracing::warn!(
                redis = %addr,
                answer,
                "redis's default user is open to anyone who reaches the port; allowed by redis.allow_open_default (a throwaway demo only)"
            ),
            DefaultUser::Open(answer) => {
                return Err(OpenDefault {
                    addr: addr.to_string(),
                    answer,
                });
            }
        }
    }
    Ok(())
}

/// The address of each Redis `redis.url` names (each seed of a cluster),
/// without the credentials. A URL that does not parse is left to the pool,
/// which names it.
fn addresses(config: &RedisConfig) -> Vec<ConnectionAddr> {
    let urls = match config.cluster_seeds() {
        Ok(Some(seeds)) => seeds,
        _ => vec![config.url.trim().to_owned()],
    };
    urls.iter()
        .filter_map(|url| url.as_str().into_connection_info().ok())
        .map(|info| info.addr().clone())
        .collect()
}

/// Asks the Redis at `addr`, without credentials, for one read of a key of
/// the namespace, within `timeout` to connect and `timeout` to answer.
pub fn probe(addr: &ConnectionAddr, names: &Names, timeout: Duration) -> DefaultUser {
    // No user, no password, database 0, RESP2 and no `CLIENT SETINFO`: the
    // connection sends nothing before the probe.
    let info: ConnectionInfo = match addr.clone().into_connection_info() {
        Ok(info) => info.set_redis_settings(RedisConnectionInfo::default().set_skip_set_lib_name()),
        Err(e) => return DefaultUser::Unknown(e.to_string()),
    };
    let conn = redis::Client::open(info).and_then(|c| c.get_connection_with_timeout(timeout));
    let mut conn = match conn {
        Ok(conn) => conn,
        // A refusal sent as the connection opens (protected mode) is an
        // answer; anything else is no answer.
        Err(e) if e.code().is_some() => return judge(Err(e)),
        Err(e) => return DefaultUser::Unknown(e.to_string()),
    };
    if let Err(e) = conn
        .set_read_timeout(Some(timeout))
        .and_then(|()| conn.set_write_timeout(Some(timeout)))
    {
        return DefaultUser::Unknown(e.to_string());
    }
    let reply = redis::cmd("EXISTS")
        .arg(names.session("rondo-default-user-probe"))
        .query::<redis::Value>(&mut conn);
    judge(reply)
}

/// [`DefaultUser`] from the probe's reply.
fn judge(reply: redis::RedisResult<redis::Value>) -> DefaultUser {
    let e = match reply {
        Ok(redis::Value::Int(n)) => return DefaultUser::Open(format!("(integer) {n}")),
        Ok(value) => return DefaultUser::Open(format!("{value:?}")),
        Err(e) => e,
    };
    match e.code() {
        Some("NOAUTH" | "NOPERM") => DefaultUser::Closed(as_sent(&e)),
        Some(_) => DefaultUser::Open(as_sent(&e)),
        None => DefaultUser::Unknown(e.to_string()),
    }
}

/// An error reply as Redis sent it: `NOAUTH Authentication required.`
fn as_sent(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        (None, _) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(line: &str) -> redis::RedisError {
        let reply = format!("-{line}\r\n");
        redis::parse_redis_value(reply.as_bytes())
            .and_then(|v| v.extract_error())
            .expect_err("an error reply")
    }

    #[test]
    fn an_answer_past_authentication_and_the_acl_is_open() {
        assert!(matches!(
            judge(Ok(redis::Value::Int(0))),
            DefaultUser::Open(_)
        ));
        for past_the_acl in [
            "MOVED 3999 127.0.0.1:7001",
            "LOADING Redis is loading the dataset in memory",
            "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user",
        ] {
            let judged = judge(Err(server_error(past_the_acl)));
            assert!(
                matches!(judged, DefaultUser::Open(_)),
                "{past_the_acl}: {judged:?}"
            );
        }
    }

    #[test]
    fn noauth_and_noperm_are_closed_and_no_answer_is_unknown() {
        for closed in [
            "NOAUTH Authentication required.",
            "NOPERM User default has no permissions to access one of the keys used as arguments",
        ] {
            let judged = judge(Err(server_error(closed)));
            assert!(
                matches!(judged, DefaultUser::Closed(_)),
                "{closed}: {judged:?}"
            );
        }
        let io = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(matches!(judge(Err(io)), DefaultUser::Unknown(_)));
    }

    #[test]
    fn every_seed_of_a_cluster_is_checked_without_its_credentials() {
        let config = RedisConfig {
            url: "redis+cluster://u:secret@10.0.0.5:7000,10.0.0.6:7001".into(),
            ..RedisConfig::default()
        };
        let addrs: Vec<String> = addresses(&config).iter().map(|a| a.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.5:7000", "10.0.0.6:7001"]);
        let one = RedisConfig {
            url: "redis://u:secret@127.0.0.1:6380/2".into(),
            ..RedisConfig::default()
        };
        let addrs: Vec<String> = addresses(&one).iter().map(|a| a.to_string()).collect();
        assert_eq!(addrs, ["127.0.0.1:6380"]);
    }
}
