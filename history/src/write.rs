//! Writing a batch of events in one transaction, and isolating the events
//! MySQL rejects so that one bad row never blocks the rest.
//!
//! The fast path writes the whole batch with one multi-row statement per
//! table and commits. If a statement fails with a row error (a value too
//! long, out of range, …) the transaction is rolled back and the batch is
//! written again by bisection inside one new transaction: each slice runs
//! under a savepoint; a slice that fails is rolled back to its savepoint and
//! split in two, down to single events, which are reported as rejected.
//! `k` bad events in `n` cost about `2·k·log2(n)` extra statements. Any other
//! error (I/O, deadlock, timeout) aborts the whole batch for a retry.

use rondo_core::Event;
use sqlx::{Connection, MySqlConnection, MySqlPool};

use crate::error::Error;
use crate::mysql::is_row_error;
use crate::rows::Rows;
use crate::upsert::write_rows;

/// An event MySQL refused, by its index in the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub index: usize,
    /// The SQL error, for the dead-letter reason.
    pub reason: String,
}

/// What a committed batch wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Events stored (idempotently: a repeated event counts again).
    pub written: usize,
    /// Events refused for their values; everything else is committed.
    pub rejected: Vec<Rejected>,
}

/// Stores `events` idempotently in one transaction. On `Ok` everything but
/// `rejected` is committed; on `Err` nothing is, and the same events may be
/// written again later.
pub async fn write_events(pool: &MySqlPool, events: &[Event]) -> Result<WriteReport, Error> {
    let first_error = {
        let mut tx = pool.begin().await?;
        match write_slice(&mut tx, events).await {
            Ok(()) => {
                tx.commit().await?;
                return Ok(WriteReport {
                    written: events.len(),
                    rejected: Vec::new(),
                });
            }
            Err(error) if is_row_error(&error) => {
                tx.rollback().await?;
                error
            }
            Err(error) => return Err(error.into()),
        }
    };
    tracing::warn!(events = events.len(), error = %first_error, "batch refused by mysql; isolating the bad events");
    let mut tx = pool.begin().await?;
    let rejected = isolate(&mut tx, events).await?;
    tx.commit().await?;
    Ok(WriteReport {
        written: events.len() - rejected.len(),
        rejected,
    })
}

async fn write_slice(conn: &mut MySqlConnection, events: &[Event]) -> sqlx::Result<()> {
    let rows = Rows::from_events(events);
    if rows.is_empty() {
        return Ok(());
    }
    write_rows(conn, &rows).await
}

/// Bisects `events` under savepoints until every failing slice is a single
/// event. The caller commits.
async fn isolate(conn: &mut MySqlConnection, events: &[Event]) -> sqlx::Result<Vec<Rejected>> {
    let mut rejected = Vec::new();
    let mut pending = halves(0..events.len());
    while let Some(range) = pending.pop() {
        let mut savepoint = conn.begin().await?;
        let error = match write_slice(&mut savepoint, &events[range.clone()]).await {
            Ok(()) => {
                savepoint.commit().await?;
                continue;
            }
            Err(error) if is_row_error(&error) => error,
            Err(error) => return Err(error),
        };
        savepoint.rollback().await?;
        if range.len() == 1 {
            rejected.push(Rejected {
                index: range.start,
                reason: error.to_string(),
            });
        } else {
            pending.extend(halves(range));
        }
    }
    rejected.sort_by_key(|r| r.index);
    Ok(rejected)
}

/// The two halves of a range (one range if it cannot be split), the lower
/// half last so that it is popped first.
fn halves(range: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
    if range.len() < 2 {
        return vec![range];
    }
    let mid = range.start + range.len() / 2;
    vec![mid..range.end, range.start..mid]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_split_evenly_and_pop_the_lower_half_first() {
        assert_eq!(halves(0..5), vec![2..5, 0..2]);
        assert_eq!(halves(3..4), vec![3..4]);
        assert_eq!(halves(0..0), vec![0..0]);
    }
}
