//! The MySQL schema, as sqlx migrations embedded from `migrations/`.

use sqlx::MySqlPool;
use sqlx::migrate::{MigrateError, Migrator};

/// The migrations of `history/migrations/`, in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!();

/// Brings the database's schema up to date. Safe to run from several
/// workers at once (sqlx holds a MySQL advisory lock while migrating) and
/// on every start.
pub async fn migrate(pool: &MySqlPool) -> Result<(), MigrateError> {
    MIGRATOR.run(pool).await
}
