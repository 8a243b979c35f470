//! Issue 47: a persistence worker started at the same moment as a
//! scheduler node exited 1 on `1062 Duplicate entry` and the node logged
//! "migration … is partially applied": both ran the migrations at once
//! (sqlx's own lock asks MariaDB for `GET_LOCK(name, -1)`, which it
//! answers NULL at once). One process migrates under the named lock
//! `<database>.rondo.migrate`; the other waits for it, then finds
//! everything applied.

use std::time::Duration;

use rondo_history::MIGRATOR;
use rondo_history::testing::TestDatabase;
use rondo_history::testing::users::TEST_PASSWORD;
use rondo_testkit::procs::{self, free_addr, rondo_child};
use rondo_testkit::{World, eventually};

const ROUNDS: usize = 5;

/// `GET url` answers 200.
async fn ready(url: &str) -> bool {
    reqwest::get(url)
        .await
        .is_ok_and(|r| r.status() == reqwest::StatusCode::OK)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_and_a_worker_started_together_on_an_empty_database_both_come_up() {
    let world = World::new("migrate").await;
    let log_dir = procs::log_dir(&world.config.namespace);
    for round in 1..=ROUNDS {
        let db = TestDatabase::empty(&world.config.mysql.url).await;
        let mut config = world.config.clone();
        config.mysql.url = db.url.clone();
        config.persist.metrics_addr = free_addr().to_string();
        let node_addr = free_addr();
        let node_log = log_dir.join(format!("node-{round}.log"));
        let node_env = [
            ("RONDO_SCHEDULER_NODE_ID", format!("migrate-{round}")),
            ("RONDO_SCHEDULER_API_ADDR", node_addr.to_string()),
            ("RONDO_AUTH_ADMIN_USER", "admin".to_owned()),
            ("RONDO_AUTH_ADMIN_PASSWORD", TEST_PASSWORD.to_owned()),
        ];
        // The same instant: one spawn right after the other.
        let file = std::fs::File::create(&node_log).unwrap();
        let mut node = rondo_child("rondo-scheduler", &config, node_env, file);
        let worker = std::sync::Mutex::new(procs::spawn_persist_worker(&config, &log_dir));

        // Up: the worker consumes (ready), the node answers ready and has
        // made the first admin, which it does once the schema is there.
        let worker_ready = format!("http://{}/readyz", config.persist.metrics_addr);
        let node_ready = format!("http://{node_addr}/readyz");
        eventually(
            &format!("round {round}: both processes up"),
            Duration::from_secs(60),
            || async {
                let exited = worker.lock().unwrap().try_wait();
                if let Ok(Some(exit)) = exited {
                    let log = std::fs::read_to_string(log_dir.join("persist-worker.log"));
                    panic!("round {round}: the worker exited ({exit}): {log:?}");
                }
                let admins: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM user WHERE username = 'admin'")
                        .fetch_one(&db.pool)
                        .await
                        .ok()?;
                let up = admins == 1 && ready(&worker_ready).await && ready(&node_ready).await;
                up.then_some(())
            },
        )
        .await;
        let (applied, succeeded): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), CAST(COALESCE(SUM(success), 0) AS SIGNED) FROM _sqlx_migrations",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        let migrations = MIGRATOR.migrations.len() as i64;
        assert_eq!(
            (applied, succeeded),
            (migrations, migrations),
            "round {round}: every migration applied once, all succeeded"
        );
        assert!(
            node.try_wait().unwrap().is_none(),
            "round {round}: the node runs"
        );
        let mut worker = worker.into_inner().unwrap();
        procs::terminate(&mut worker, Duration::from_secs(10)).await;
        procs::terminate(&mut node, Duration::from_secs(10)).await;
        db.pool.close().await;
    }
}
