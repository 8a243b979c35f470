//! Throw-away MySQL databases for tests, in this crate and in others.
//!
//! ```no_run
//! # async fn example() {
//! use rondo_history::testing::TestDatabase;
//! let base = "mysql://rondo:rondo@127.0.0.1:3306/rondo"; // config.mysql.url
//! let db = TestDatabase::migrated(base).await;
//! // … use `db.pool` (or `db.url`, e.g. as `config.mysql.url` for a worker) …
//! # }   // dropped here: the database is dropped, also when the test panics
//! ```
//!
//! The MySQL user needs the right to create databases named `rondo_t_…`
//! (`scripts/mysql-init.sql` grants `rondo%`). The helpers panic on failure:
//! they are for tests.

pub mod story;
pub mod users;

use sqlx::{Connection, Executor, MySqlConnection, MySqlPool};

use crate::mysql::{connect_options, lazy_pool};

/// Prefix of every test database; [`drop_database`] refuses other names.
pub const TEST_DATABASE_PREFIX: &str = "rondo_t_";

/// A test's own database, dropped when the guard drops,
/// also when the test panics.
pub struct TestDatabase {
    pub pool: MySqlPool,
    /// Its URL, for a process's `mysql.url`.
    pub url: String,
    pub name: String,
    base_url: String,
}

impl TestDatabase {
    /// A fresh database with the schema.
    pub async fn migrated(base_url: &str) -> TestDatabase {
        let (pool, url, name) = fresh_database(base_url).await;
        TestDatabase::guard(pool, url, name, base_url)
    }

    /// A fresh database without any migration (for tests of the
    /// migrations themselves).
    pub async fn empty(base_url: &str) -> TestDatabase {
        let (pool, url, name) = empty_database(base_url).await;
        TestDatabase::guard(pool, url, name, base_url)
    }

    fn guard(pool: MySqlPool, url: String, name: String, base_url: &str) -> TestDatabase {
        TestDatabase {
            pool,
            url,
            name,
            base_url: base_url.to_owned(),
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // The pool's connections belong to the test's runtime; they are
        // not touched here (closing them from another runtime can hang).
        // Idle connections do not block `DROP DATABASE`.
        let (base, name) = (self.base_url.clone(), self.name.clone());
        rondo_core::testkit::on_side_thread(async move { drop_database(&base, &name).await });
    }
}

/// Creates a database `rondo_t_<random>` on the server of `base_url`, runs
/// the migrations, and returns a pool on it, its URL and its name.
pub async fn fresh_database(base_url: &str) -> (MySqlPool, String, String) {
    let (pool, url, name) = empty_database(base_url).await;
    crate::migrate(&pool)
        .await
        .unwrap_or_else(|e| panic!("migrate {name}: {e}"));
    (pool, url, name)
}

/// Like [`fresh_database`] without the migrations: for tests of the
/// migrations themselves (e.g. upgrading from an older schema).
pub async fn empty_database(base_url: &str) -> (MySqlPool, String, String) {
    let name = format!("{TEST_DATABASE_PREFIX}{:016x}", rand::random::<u64>());
    let mut admin = server_connection(base_url).await;
    let create = format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin");
    admin
        .execute(sqlx::AssertSqlSafe(create))
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    let _ = admin.close().await;
    let url = with_database(base_url, &name);
    let options = connect_options(&url).expect("test database url");
    let pool = lazy_pool(options, 4);
    (pool, url, name)
}

/// Drops a database made by [`fresh_database`]. Close its pools first.
pub async fn drop_database(base_url: &str, name: &str) {
    let valid = name.starts_with(TEST_DATABASE_PREFIX)
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    assert!(valid, "refusing to drop {name:?}: not a test database");
    let mut admin = server_connection(base_url).await;
    // A test that failed mid-transaction may still hold a metadata lock:
    // give up after a few seconds rather than hang (the default is a year).
    admin
        .execute("SET SESSION lock_wait_timeout = 5")
        .await
        .unwrap_or_else(|e| panic!("set lock_wait_timeout: {e}"));
    let drop = format!("DROP DATABASE IF EXISTS `{name}`");
    admin
        .execute(sqlx::AssertSqlSafe(drop))
        .await
        .unwrap_or_else(|e| panic!("drop database {name}: {e}"));
    let _ = admin.close().await;
}

async fn server_connection(base_url: &str) -> MySqlConnection {
    let options = connect_options(&with_database(base_url, "")).expect("mysql url");
    MySqlConnection::connect_with(&options)
        .await
        .unwrap_or_else(|e| panic!("connect to mysql for a test database: {e}"))
}

/// `url` with its database path replaced by `name` (query kept).
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let path = base[authority..]
        .find('/')
        .map_or(base.len(), |i| authority + i);
    let mut out = format!("{}/{name}", &base[..path]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_path_is_swapped() {
        let base = "mysql://rondo:rondo@127.0.0.1:3306/rondo";
        assert_eq!(
            with_database(base, "rondo_t_1"),
            "mysql://rondo:rondo@127.0.0.1:3306/rondo_t_1"
        );
        assert_eq!(with_database("mysql://h:1", "x"), "mysql://h:1/x");
        assert_eq!(
            with_database("mysql://h/db?ssl-mode=disabled", "x"),
            "mysql://h/x?ssl-mode=disabled"
        );
        assert_eq!(
            with_database(base, ""),
            "mysql://rondo:rondo@127.0.0.1:3306/"
        );
    }
}
