//! The runs this instance handed off and reads the log of while they run
//! (`logs` reads them).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::runs::Run;

/// Runs tailed by one instance at once at most (the rest get their log
/// after their callback only).
const MAX_TAILS: usize = 10_000;

/// The runs this instance handed off and reads the log of while they run.
#[derive(Default)]
pub(crate) struct Tails {
    runs: Mutex<HashMap<i64, Tail>>,
}

#[derive(Debug, Clone)]
pub(crate) struct Tail {
    pub(crate) run: Run,
    /// The next line to read (1-based).
    pub(crate) next_line: i32,
}

impl Tails {
    /// Tails `run`, just sent.
    pub(crate) fn track(&self, run: &Run) {
        let mut runs = self.runs.lock().expect("tails lock");
        if runs.len() < MAX_TAILS {
            runs.insert(
                run.log_id,
                Tail {
                    run: run.clone(),
                    next_line: 1,
                },
            );
        }
    }

    /// Stops tailing a run; the next line to read, if it was tailed here.
    pub(crate) fn take(&self, log_id: i64) -> Option<i32> {
        self.runs
            .lock()
            .expect("tails lock")
            .remove(&log_id)
            .map(|t| t.next_line)
    }

    pub(crate) fn due(&self, older_than_ms: i64) -> Vec<Tail> {
        self.runs
            .lock()
            .expect("tails lock")
            .values()
            .filter(|t| t.run.since_ms <= older_than_ms)
            .cloned()
            .collect()
    }

    pub(crate) fn advance(&self, log_id: i64, next_line: i32) {
        if let Some(t) = self.runs.lock().expect("tails lock").get_mut(&log_id) {
            t.next_line = t.next_line.max(next_line);
        }
    }
}
