//! What a job's worker and the map of workers share: the messages between
//! an admission and a worker ([`Submit`], [`Decision`], [`Turn`]) and the
//! state every worker of the executor sees ([`Shared`]).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rondo_core::BlockStrategy;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::interrupt::Interrupt;
use crate::handler::Handlers;
use crate::outcome::Outcome;

/// A trigger handed to its job's worker.
pub(crate) struct Submit {
    pub(crate) trigger_id: String,
    pub(crate) handler: String,
    pub(crate) block: BlockStrategy,
    pub(crate) interrupt: Interrupt,
    pub(crate) reply: oneshot::Sender<Decision>,
}

/// What the worker decided for a trigger.
pub(crate) enum Decision {
    /// Run it now.
    Run(Turn),
    /// Do not run it; answer with this outcome.
    Refuse(Outcome),
}

/// The job's right to run, held while the handler runs; dropping it lets
/// the job's next trigger start.
#[derive(Debug)]
pub(crate) struct Turn {
    pub(super) _ended: oneshot::Sender<()>,
}

/// A job's worker as the map knows it.
pub(crate) struct WorkerEntry {
    /// `None` once the worker retired (it is running `destroy`).
    pub(crate) inbox: Option<mpsc::UnboundedSender<Submit>>,
    pub(crate) generation: u64,
    /// Fires when the worker is gone.
    pub(crate) exited: CancellationToken,
}

/// What the workers share.
pub(crate) struct Shared {
    pub(crate) executor_id: String,
    pub(crate) handlers: Handlers,
    pub(crate) idle_timeout: Duration,
    pub(crate) shutdown: CancellationToken,
    pub(crate) workers: Mutex<HashMap<u64, WorkerEntry>>,
    pub(crate) generations: AtomicU64,
    pub(crate) tracker: TaskTracker,
}

impl Shared {
    pub(crate) fn workers(&self) -> MutexGuard<'_, HashMap<u64, WorkerEntry>> {
        self.workers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
