//! Stopping one trigger from outside: its cancellation token plus the reason
//! it was stopped for.
//!
//! Every trigger admitted here gets an [`Interrupt`] when it is reserved,
//! long before it runs, so a kill or a COVER_EARLY replacement reaches it in
//! whatever phase it is: waiting in its job's queue, waiting for a permit or
//! its dedupe claim, or running (the handler's token is this token).
//!
//! The token is a child of the executor's shutdown `kill` token. A token
//! cancelled *with* a reason ([`Interrupt::fire`]) was stopped on purpose
//! and the run ends with that reason (500, not retryable), whatever the
//! handler answers; cancelled *without* one, it is the executor shutting
//! down (or the trigger's timeout) and the handler's own answer counts.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

/// The reason a kill through the control exchange gives.
pub(crate) const KILLED: &str = "killed";

#[derive(Debug, Clone)]
pub(crate) struct Interrupt {
    token: CancellationToken,
    reason: Arc<OnceLock<String>>,
}

impl Interrupt {
    pub(crate) fn new(token: CancellationToken) -> Self {
        Interrupt {
            token,
            reason: Arc::new(OnceLock::new()),
        }
    }

    /// Stops the trigger for `reason`; the first reason given wins. Returns
    /// whether this call gave the reason.
    pub(crate) fn fire(&self, reason: &str) -> bool {
        let first = self.reason.set(reason.to_owned()).is_ok();
        // The reason is set before the token fires, so whoever wakes up on
        // the token finds it.
        self.token.cancel();
        first
    }

    /// Why the trigger was stopped on purpose, if it was.
    pub(crate) fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_wins_and_the_token_fires() {
        let interrupt = Interrupt::new(CancellationToken::new());
        assert_eq!(interrupt.reason(), None);
        assert!(interrupt.fire(KILLED));
        assert!(!interrupt.fire("block strategy COVER_EARLY: replaced by trigger t2"));
        assert_eq!(interrupt.reason(), Some(KILLED));
        assert!(interrupt.token().is_cancelled());
    }

    #[test]
    fn a_shutdown_cancels_without_a_reason() {
        let parent = CancellationToken::new();
        let interrupt = Interrupt::new(parent.child_token());
        parent.cancel();
        assert!(interrupt.token().is_cancelled());
        assert_eq!(interrupt.reason(), None);
    }
}
