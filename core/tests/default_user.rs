//! The start-up check of Redis's `default` user against real Redis
//! servers of the test's own: open as Redis ships it, closed each way
//! scripts/redis-acl.sh and an operator may close it, and no answer.

use std::time::{Duration, Instant};

use redis::ConnectionAddr;
use rondo_core::config::RedisConfig;
use rondo_core::redis::default_user::{DefaultUser, PROBE_TIMEOUT, probe};
use rondo_core::redis::refuse_open_default;
use rondo_core::testkit::ThrowawayRedis;

fn names() -> rondo_core::Names {
    rondo_core::Names::new("t_default_user", 4)
}

fn at(port: u16) -> ConnectionAddr {
    ConnectionAddr::Tcp("127.0.0.1".into(), port)
}

fn config(url: &str, allow_open_default: bool) -> RedisConfig {
    RedisConfig {
        url: url.into(),
        allow_open_default,
        ..RedisConfig::default()
    }
}

#[test]
fn a_redis_as_it_ships_is_open_and_refused_unless_allowed() {
    let redis = ThrowawayRedis::start();
    let judged = probe(&at(redis.port), &names(), PROBE_TIMEOUT);
    assert!(matches!(judged, DefaultUser::Open(_)), "{judged:?}");
    let refused = refuse_open_default(&config(&redis.url(), false), &names())
        .expect_err("an open default is refused");
    let message = refused.to_string();
    for names_it in [
        &format!("127.0.0.1:{}", redis.port),
        "default",
        "redis.allow_open_default",
    ] {
        assert!(message.contains(names_it), "{names_it}: {message}");
    }
    // Credentials in the URL change nothing: the check connects without.
    let signed_in = format!("redis://someone:secret@127.0.0.1:{}", redis.port);
    assert!(refuse_open_default(&config(&signed_in, false), &names()).is_err());
    // A cluster URL: each seed is checked.
    let seeds = format!("redis+cluster://u:p@127.0.0.1:1,127.0.0.1:{}", redis.port);
    assert!(refuse_open_default(&config(&seeds, false), &names()).is_err());
    refuse_open_default(&config(&redis.url(), true), &names())
        .expect("allowed for a throwaway demo");
}

#[test]
fn default_off_with_a_password_or_without_rights_is_closed() {
    let redis = ThrowawayRedis::start();
    let mut admin = redis.connect();
    let ok = |conn: &mut redis::Connection, args: &[&str]| {
        let () = redis::cmd(args[0])
            .arg(&args[1..])
            .query(conn)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    };
    ok(
        &mut admin,
        &["ACL", "SETUSER", "admin", "on", ">pw", "~*", "&*", "+@all"],
    );
    ok(&mut admin, &["AUTH", "admin", "pw"]);
    // Reaches no key of the namespace, though it answers PING.
    ok(
        &mut admin,
        &["ACL", "SETUSER", "default", "resetkeys", "-@all", "+ping"],
    );
    let judged = probe(&at(redis.port), &names(), PROBE_TIMEOUT);
    assert!(
        matches!(judged, DefaultUser::Closed(ref a) if a.contains("NOPERM")),
        "{judged:?}"
    );
    // A password (requirepass's way).
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "default",
            "+@all",
            "~*",
            "resetpass",
            ">pw",
        ],
    );
    let judged = probe(&at(redis.port), &names(), PROBE_TIMEOUT);
    assert!(
        matches!(judged, DefaultUser::Closed(ref a) if a.contains("NOAUTH")),
        "{judged:?}"
    );
    // Off (scripts/redis-acl.sh's way).
    ok(&mut admin, &["ACL", "SETUSER", "default", "off", "nopass"]);
    let judged = probe(&at(redis.port), &names(), PROBE_TIMEOUT);
    assert!(
        matches!(judged, DefaultUser::Closed(ref a) if a.contains("NOAUTH")),
        "{judged:?}"
    );
    refuse_open_default(&config(&redis.url(), false), &names()).expect("a closed default passes");
}

/// A Redis that is down, or takes the connection and never answers, is no
/// refusal (the process reaches it later with its retries), and does not
/// hold the start longer than the probe's timeouts.
#[test]
fn no_answer_is_unknown_within_the_timeout() {
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address").port()
    };
    let judged = probe(&at(down), &names(), PROBE_TIMEOUT);
    assert!(matches!(judged, DefaultUser::Unknown(_)), "{judged:?}");

    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = silent.local_addr().expect("its address").port();
    let timeout = Duration::from_millis(300);
    let asked = Instant::now();
    let judged = probe(&at(port), &names(), timeout);
    assert!(matches!(judged, DefaultUser::Unknown(_)), "{judged:?}");
    // Connect, then one answer waited for: two timeouts at most (and some
    // slack for a loaded machine).
    assert!(
        asked.elapsed() < timeout * 2 + Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    let url = format!("redis://127.0.0.1:{port}");
    refuse_open_default(&config(&url, false), &names()).expect("no answer is no refusal");
    drop(silent);
}
