//! The intake: where the session hands deliveries over as tasks, and the
//! gate that shutdown closes so the drain waits for a fixed set of tasks.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use tokio_util::task::TaskTracker;

#[derive(Debug, Default)]
pub(crate) struct Intake {
    open: Mutex<bool>,
    tracker: TaskTracker,
}

impl Intake {
    pub(crate) fn new() -> Self {
        Intake {
            open: Mutex::new(true),
            tracker: TaskTracker::new(),
        }
    }

    /// Spawns `task` unless the intake is closed; returns whether it did.
    pub(crate) fn spawn<F>(&self, task: F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // The lock makes "check open, then spawn" atomic against `close`, so
        // no task slips in after the drain started waiting.
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if !*open {
            return false;
        }
        self.tracker.spawn(task);
        true
    }

    /// Refuses further tasks.
    pub(crate) fn close(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.tracker.close();
    }

    /// Resolves when the intake is closed and every task has ended.
    pub(crate) async fn wait(&self) {
        self.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn closed_intake_refuses_and_waits_for_the_rest() {
        let intake = Intake::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        assert!(intake.spawn(async move {
            let _ = rx.await;
        }));
        intake.close();
        assert!(!intake.spawn(async {}));
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), intake.wait());
        assert!(waiting.await.is_err());
        tx.send(()).unwrap();
        intake.wait().await;
    }
}
