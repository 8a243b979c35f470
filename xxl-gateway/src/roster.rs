//! Who this gateway instance serves, as plain state the other parts share:
//! the [`Fleet`] (every executor served, the broker connection their
//! queues are consumed on) and each [`Served`] executor (its record, whether
//! it answers, whether its queue is consumed here). The tasks that act on
//! them are `fleet`'s and `served`'s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use lapin::Connection;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::Target;
use crate::executors::Record;
use crate::wire::Generation;

/// The executors this instance serves, and the broker connection their
/// queues are consumed on.
pub(crate) struct Fleet {
    pub(crate) served: RwLock<HashMap<String, Arc<Served>>>,
    /// The connection queues are consumed on (`None` while there is none).
    pub(crate) connection: watch::Sender<Option<Arc<Connection>>>,
    /// A registration or removal came here: read the fleet again now.
    pub(crate) changed: Notify,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            served: RwLock::default(),
            connection: watch::Sender::new(None),
            changed: Notify::new(),
        }
    }
}

impl Fleet {
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Served>> {
        self.served.read().expect("fleet lock").get(id).cloned()
    }

    pub(crate) fn all(&self) -> Vec<Arc<Served>> {
        self.served
            .read()
            .expect("fleet lock")
            .values()
            .cloned()
            .collect()
    }

    pub(crate) fn connection(&self) -> watch::Receiver<Option<Arc<Connection>>> {
        self.connection.subscribe()
    }

    /// Reads the fleet again now (a registration or removal came here).
    pub(crate) fn changed(&self) {
        self.changed.notify_one();
    }
}

/// One XXL-JOB executor as this instance serves it.
pub(crate) struct Served {
    pub(crate) id: String,
    record: RwLock<Record>,
    /// The access token it is sent (its group's, as [`crate::access`]
    /// picks it).
    token: RwLock<String>,
    /// When `/beat` was last answered (ms); 0: never.
    pub(crate) answered_ms: AtomicI64,
    /// Whether it answers: its queue is consumed only then.
    pub(crate) reachable: watch::Sender<bool>,
    /// `running_jobs` may have changed.
    pub(crate) dirty: Notify,
    /// Stops its tasks (removed from the fleet, or the gateway stops).
    pub(crate) stop: CancellationToken,
    /// Removed from the fleet (not only this gateway stopping): retire.
    pub(crate) removed: AtomicBool,
    /// Its hand-offs in progress.
    pub(crate) handoffs: TaskTracker,
    /// This instance declared its queue: until then it neither renews its
    /// lease nor writes its registration, so no trigger is routed to a
    /// queue that does not exist yet (the broker would return it).
    pub(crate) queue_declared: AtomicBool,
}

impl Served {
    pub(crate) fn new(record: Record, token: String, stop: CancellationToken) -> Served {
        Served {
            id: record.id.clone(),
            record: RwLock::new(record),
            token: RwLock::new(token),
            answered_ms: AtomicI64::new(0),
            reachable: watch::Sender::new(false),
            dirty: Notify::new(),
            stop,
            removed: AtomicBool::new(false),
            handoffs: TaskTracker::new(),
            queue_declared: AtomicBool::new(false),
        }
    }

    pub(crate) fn record(&self) -> Record {
        self.record.read().expect("record lock").clone()
    }

    /// Takes what another instance (or a registration) changed, and the
    /// token it is now sent.
    pub(crate) fn update(&self, record: Record, token: String) {
        *self.token.write().expect("token lock") = token;
        let mut mine = self.record.write().expect("record lock");
        if record.generation.is_none() {
            // This instance may know it already; the record not yet.
            let generation = mine.generation;
            *mine = Record {
                generation,
                ..record
            };
        } else {
            *mine = record;
        }
    }

    pub(crate) fn target(&self) -> Target {
        let r = self.record.read().expect("record lock");
        Target {
            address: r.address.clone(),
            app: r.app.clone(),
            generation: r.generation.unwrap_or(Generation::Two),
            token: self.token.read().expect("token lock").clone(),
        }
    }

    pub(crate) fn set_generation(&self, generation: Generation) {
        self.record.write().expect("record lock").generation = Some(generation);
    }

    pub(crate) fn is_reachable(&self) -> bool {
        *self.reachable.borrow()
    }

    /// A send found it unreachable: stop consuming now, before the next
    /// beat says so.
    pub(crate) fn unreachable(&self) {
        self.reachable
            .send_if_modified(|r| std::mem::replace(r, false));
    }

    pub(crate) fn jobs_changed(&self) {
        self.dirty.notify_one();
    }

    /// Removes it from this instance's service for good (it left the
    /// fleet): its tasks retire it from rondo's registry.
    pub(crate) fn remove(&self) {
        self.removed.store(true, Ordering::Relaxed);
        self.stop.cancel();
    }
}
