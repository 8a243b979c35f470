//! `rondo-persist-worker` as a daemon: it answers `--help` and
//! `--version`, exits 64 on a bad config, and exits non-zero when a core
//! task fails (here: the database's schema was migrated by a newer rondo,
//! which this binary must not write to).

use std::time::Duration;

use rondo_core::daemon::{EXIT_CONFIG, EXIT_FAILURE};
use rondo_core::testkit::{self, daemon::assert_daemon_shape, daemon::run_binary};
use rondo_history::testing::TestDatabase;

const BINARY: &str = env!("CARGO_BIN_EXE_rondo-persist-worker");

#[test]
fn help_version_and_bad_config_follow_the_daemon_shape() {
    assert_daemon_shape(BINARY);
    let env = [("RONDO_MYSQL_URL", "postgres://elsewhere/db")];
    let out = run_binary(BINARY, &[], &env, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(i32::from(EXIT_CONFIG)), "{out:?}");
}

#[tokio::test]
async fn a_schema_from_a_newer_rondo_fails_the_run() {
    let config = testkit::config("pwdaemon");
    let db = TestDatabase::migrated(&config.mysql.url).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99991231000001, 'from a newer rondo', 1, x'00', 0)",
    )
    .execute(&db.pool)
    .await
    .expect("record a migration this binary does not know");
    let (url, namespace, amqp) = (db.url.clone(), config.namespace.clone(), config.amqp.url);
    let out = tokio::task::spawn_blocking(move || {
        let env = [
            ("RONDO_MYSQL_URL", url.as_str()),
            ("RONDO_NAMESPACE", namespace.as_str()),
            ("RONDO_AMQP_URL", amqp.as_str()),
        ];
        run_binary(BINARY, &[], &env, Duration::from_secs(60))
    })
    .await
    .expect("the run");
    assert_eq!(out.status.code(), Some(i32::from(EXIT_FAILURE)), "{out:?}");
}
