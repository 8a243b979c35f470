//! The MySQL schema, as sqlx migrations embedded from `migrations/`, and
//! [`migrate`], the one way every process brings it up to date.
//!
//! # Migrations once
//!
//! Scheduler nodes, persistence workers and the tests' databases all
//! migrate at start, often in the same second. sqlx's own lock does not
//! hold on MariaDB (it asks `GET_LOCK(name, -1)`, which MariaDB answers
//! with NULL at once, lock not taken), and two processes applying the same
//! migration end in `1062 Duplicate entry` in `_sqlx_migrations` for one
//! and "migration … is partially applied" for the other. So [`migrate`]
//! takes the named lock `<database>.rondo.migrate` itself, waiting in
//! steps of [`LOCK_WAIT_S`] for as long as another process migrates, and
//! runs the migrations on the connection that holds it; the others then
//! find everything applied. A process that dies mid-migration frees the
//! lock with its session.

use std::time::Instant;

use sqlx::MySqlPool;
use sqlx::migrate::Migrator;

use crate::Error;
use crate::lock::NamedLock;

/// The migrations of `history/migrations/`, in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!();

/// The lock's name: the database's (at most 50 of its characters, as a
/// lock name has at most 64) and `.rondo.migrate`.
const LOCK_NAME: &str = "CONCAT(LEFT(DATABASE(), 50), '.rondo.migrate')";

/// How long one wait for the lock lasts; a process waits again (and says
/// so) until the one migrating is done.
pub const LOCK_WAIT_S: u32 = 10;

/// Brings the database's schema up to date, one process at a time (see
/// the module doc); idempotent, run on every start.
pub async fn migrate(pool: &MySqlPool) -> Result<(), Error> {
    let started = Instant::now();
    let mut lock = loop {
        if let Some(lock) = NamedLock::acquire(pool, LOCK_NAME, LOCK_WAIT_S).await? {
            break lock;
        }
        tracing::info!(
            waited_s = started.elapsed().as_secs(),
            "another process is migrating the mysql schema; waiting for it"
        );
    };
    // `run` on a connection trips "`Send` is not general enough" in a
    // spawned task (sqlx's `Acquire` bound); `run_direct` is sqlx's way
    // around it: `run` without the acquire (no target, no skipping).
    MIGRATOR.run_direct(None, lock.conn(), false).await?;
    lock.release().await
}
