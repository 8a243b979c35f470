//! The phases of an executor's life after shutdown is requested, as tokens
//! every task selects on.
//!
//! 1. `shutdown` (the caller's token): retire from the registry, stop
//!    consuming, hand back the triggers that had not started.
//! 2. `kill`, after `executor.shutdown_grace_ms`: cancel the handlers that
//!    are still running (their contexts' tokens are children of it).
//! 3. `abandon`, after the kill grace and a publishing grace: stop retrying
//!    publishes; deliveries not settled stay unacked and are redelivered.
//! 4. `close`, when the drain is over: the session closes the connection.

use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub(crate) struct Lifecycle {
    pub(crate) shutdown: CancellationToken,
    pub(crate) kill: CancellationToken,
    pub(crate) abandon: CancellationToken,
    pub(crate) close: CancellationToken,
}

impl Lifecycle {
    pub(crate) fn new(shutdown: CancellationToken) -> Self {
        Lifecycle {
            shutdown,
            kill: CancellationToken::new(),
            abandon: CancellationToken::new(),
            close: CancellationToken::new(),
        }
    }
}
