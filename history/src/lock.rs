//! MySQL named locks (`GET_LOCK`), each held by one connection for as long
//! as the work under it lasts: the maintenance pass and the migrations.
//!
//! A named lock belongs to the session that took it, so the connection is
//! kept out of the pool while it is held; dropped without
//! [`NamedLock::release`] (an error, a cancelled task), the connection is
//! closed rather than returned to the pool, which frees the lock on the
//! server. The wait is always a positive number of seconds: MariaDB
//! answers `GET_LOCK(name, -1)` ("wait forever" on MySQL) with NULL at
//! once, without the lock.

use sqlx::MySqlPool;
use sqlx::pool::PoolConnection;

use crate::Error;

/// A named lock taken by one pooled connection.
pub(crate) struct NamedLock {
    conn: Option<PoolConnection<sqlx::MySql>>,
    /// The SQL expression of the name (it may read `DATABASE()`).
    name_sql: &'static str,
}

impl NamedLock {
    /// Takes the lock named by the SQL expression `name_sql`, waiting at
    /// most `wait_s` seconds; `None` when another session holds it.
    pub(crate) async fn acquire(
        pool: &MySqlPool,
        name_sql: &'static str,
        wait_s: u32,
    ) -> Result<Option<Self>, Error> {
        let mut conn = pool.acquire().await?;
        let sql = format!("SELECT GET_LOCK({name_sql}, ?)");
        let got: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(wait_s)
            .fetch_one(&mut *conn)
            .await?;
        // Not taken: the connection goes back to the pool holding nothing.
        Ok((got == Some(1)).then(|| NamedLock {
            conn: Some(conn),
            name_sql,
        }))
    }

    /// The connection that holds the lock: work under the lock uses it.
    pub(crate) fn conn(&mut self) -> &mut sqlx::MySqlConnection {
        self.conn.as_mut().expect("held until released")
    }

    /// Releases the lock and returns the connection to the pool.
    pub(crate) async fn release(mut self) -> Result<(), Error> {
        let sql = format!("DO RELEASE_LOCK({})", self.name_sql);
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(self.conn())
            .await?;
        self.conn = None;
        Ok(())
    }
}

impl Drop for NamedLock {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // Closing the session is what frees a named lock we could not
            // release.
            drop(conn.detach());
        }
    }
}
