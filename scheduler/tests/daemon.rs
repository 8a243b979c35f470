//! `rondo-scheduler` as a daemon: it answers `--help` and `--version`,
//! exits 64 on a bad config, and exits non-zero when a core task fails
//! (here: its API address is taken, so the API cannot serve).

use std::time::Duration;

use rondo_core::daemon::EXIT_FAILURE;
use rondo_core::testkit::daemon::{assert_daemon_shape, run_binary};

const BINARY: &str = env!("CARGO_BIN_EXE_rondo-scheduler");

#[test]
fn help_version_and_bad_config_follow_the_daemon_shape() {
    assert_daemon_shape(BINARY);
}

#[test]
fn a_core_task_that_fails_exits_non_zero() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("its address").to_string();
    // The tests' Redis: the node refuses one whose `default` user is open.
    let redis = rondo_core::testkit::redis_admin_url();
    let env = [
        ("RONDO_SCHEDULER_API_ADDR", addr.as_str()),
        ("RONDO_REDIS_URL", redis.as_str()),
    ];
    let out = run_binary(BINARY, &[], &env, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(i32::from(EXIT_FAILURE)), "{out:?}");
}
