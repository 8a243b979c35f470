//! The MySQL tests' own database per test, and the event story.

#![allow(dead_code)] // each test binary uses a different subset

use rondo_core::testkit;
use rondo_history::testing::TestDatabase;
use sqlx::MySqlPool;

#[allow(unused_imports)] // not every test binary tells the story
pub use rondo_history::testing::story::*;

/// A fresh migrated database; dropped with the guard.
pub async fn fresh_database() -> (MySqlPool, TestDatabase) {
    let db = TestDatabase::migrated(&testkit::config("history").mysql.url).await;
    (db.pool.clone(), db)
}

/// A fresh database without any migration; dropped with the guard.
pub async fn empty_database() -> (MySqlPool, TestDatabase) {
    let db = TestDatabase::empty(&testkit::config("history").mysql.url).await;
    (db.pool.clone(), db)
}
