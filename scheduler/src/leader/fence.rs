//! How a leader's duty treats an error: a `StaleTerm` (Redis refused the
//! term, a newer leader exists) ends the duty and, through the task set,
//! every duty of the term; anything else (a service briefly unavailable) is
//! logged and the duty tries again at its next pass.

use rondo_core::{Error, ErrorKind};

/// `Ok(Some(value))` on success, `Ok(None)` after logging a failure the
/// next pass retries, `Err` for a stale term.
pub(crate) fn carry_on<T>(
    what: &str,
    term: u64,
    outcome: Result<T, Error>,
) -> Result<Option<T>, Error> {
    match outcome {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind == ErrorKind::StaleTerm => Err(e),
        Err(e) => {
            tracing::warn!(term, error = %e, "{what} failed; the next pass retries");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stale_term_ends_the_duty() {
        assert_eq!(carry_on("x", 1, Ok::<_, Error>(3)).unwrap(), Some(3));
        let down = Error::unavailable("redis: connection refused");
        assert_eq!(carry_on::<u8>("x", 1, Err(down)).unwrap(), None);
        let stale = Error::new(ErrorKind::StaleTerm, "STALE_TERM");
        assert_eq!(
            carry_on::<u8>("x", 1, Err(stale)).unwrap_err().kind,
            ErrorKind::StaleTerm
        );
    }
}
