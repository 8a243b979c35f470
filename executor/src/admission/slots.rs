//! The trigger ids in flight in this process: one slot per id, from its
//! admission until its delivery may be acked.
//!
//! A slot makes a second delivery of the same id wait for the first
//! (instead of running it again), carries the trigger's [`Interrupt`] (so a
//! kill finds it in any phase), and says whether its job still counts as
//! running here (the registry's `running_jobs`): from admission until the
//! handler ended, or until it is clear the trigger will not run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::workers::interrupt::{Interrupt, KILLED};

/// Where a trigger ended up, as far as its delivery is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Nothing more to do: the delivery may be acked.
    Done,
    /// A transient failure (Redis unavailable) before the run: redeliver.
    Requeue,
    /// The executor is going away: leave the delivery to be redelivered.
    Abandoned,
}

/// What a kill request found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kill {
    /// The trigger was stopped (or will not start).
    Sent,
    /// No trigger of that id is here.
    Unknown,
    /// The trigger id is here, but for another job than the request said.
    OtherJob(u64),
    /// Its handler already ended; the result is on its way.
    Ended,
}

pub(crate) struct Slots {
    by_id: Mutex<HashMap<String, Slot>>,
    /// Parent of every trigger's token: the executor's shutdown kill.
    kill: CancellationToken,
    /// Notified whenever [`Slots::running_jobs`] may have changed.
    changes: Arc<Notify>,
}

struct Slot {
    job_id: u64,
    /// The handler ended, or the trigger will not run.
    ended: bool,
    interrupt: Interrupt,
    settled: watch::Receiver<Option<Settled>>,
}

pub(crate) enum Reservation<'a> {
    Reserved(SlotGuard<'a>),
    /// The id is in flight here already: how that ends.
    Joined(watch::Receiver<Option<Settled>>),
}

impl Slots {
    pub(crate) fn new(kill: CancellationToken, changes: Arc<Notify>) -> Self {
        Slots {
            by_id: Mutex::new(HashMap::new()),
            kill,
            changes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn reserve(&self, trigger_id: &str, job_id: u64) -> Reservation<'_> {
        let mut slots = self.lock();
        if let Some(slot) = slots.get(trigger_id) {
            return Reservation::Joined(slot.settled.clone());
        }
        let (tx, rx) = watch::channel(None);
        let interrupt = Interrupt::new(self.kill.child_token());
        let slot = Slot {
            job_id,
            ended: false,
            interrupt: interrupt.clone(),
            settled: rx,
        };
        slots.insert(trigger_id.to_owned(), slot);
        drop(slots);
        self.changes.notify_one();
        Reservation::Reserved(SlotGuard {
            slots: self,
            trigger_id: trigger_id.to_owned(),
            interrupt,
            tx,
            value: None,
        })
    }

    /// Job ids with a trigger running or waiting here, sorted.
    pub(crate) fn running_jobs(&self) -> Vec<u64> {
        let mut jobs: Vec<u64> = self
            .lock()
            .values()
            .filter(|s| !s.ended)
            .map(|s| s.job_id)
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

    /// Stops trigger `trigger_id` of job `job_id` if it is here and its
    /// handler has not ended.
    pub(crate) fn kill(&self, trigger_id: &str, job_id: u64) -> Kill {
        let slots = self.lock();
        let Some(slot) = slots.get(trigger_id) else {
            return Kill::Unknown;
        };
        if slot.job_id != job_id {
            return Kill::OtherJob(slot.job_id);
        }
        if slot.ended {
            return Kill::Ended;
        }
        slot.interrupt.fire(KILLED);
        Kill::Sent
    }
}

/// Waits for another delivery's run of the same trigger id.
pub(crate) async fn wait_settled(mut rx: watch::Receiver<Option<Settled>>) -> Settled {
    match rx.wait_for(Option::is_some).await {
        Ok(value) => (*value).unwrap_or(Settled::Abandoned),
        Err(_) => Settled::Abandoned,
    }
}

/// A trigger id reserved in this process; dropping it releases the id and
/// tells the deliveries that joined how it ended.
pub(crate) struct SlotGuard<'a> {
    slots: &'a Slots,
    trigger_id: String,
    interrupt: Interrupt,
    tx: watch::Sender<Option<Settled>>,
    value: Option<Settled>,
}

impl SlotGuard<'_> {
    pub(crate) fn interrupt(&self) -> &Interrupt {
        &self.interrupt
    }

    /// The handler ended, or the trigger will not run: its job no longer
    /// counts as running here.
    pub(crate) fn end(&self) {
        let mut slots = self.slots.lock();
        let Some(slot) = slots.get_mut(&self.trigger_id) else {
            return;
        };
        if !slot.ended {
            slot.ended = true;
            drop(slots);
            self.slots.changes.notify_one();
        }
    }

    pub(crate) fn settle(mut self, settled: Settled) {
        self.value = Some(settled);
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let removed = self.slots.lock().remove(&self.trigger_id);
        if removed.is_some_and(|slot| !slot.ended) {
            self.slots.changes.notify_one();
        }
        // A guard dropped without a value was cancelled mid-way.
        self.tx
            .send_replace(Some(self.value.unwrap_or(Settled::Abandoned)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots() -> Slots {
        Slots::new(CancellationToken::new(), Arc::new(Notify::new()))
    }

    #[tokio::test]
    async fn a_second_reservation_joins_the_first() {
        let slots = slots();
        let Reservation::Reserved(guard) = slots.reserve("t", 1) else {
            panic!("the first reserves");
        };
        let Reservation::Joined(rx) = slots.reserve("t", 1) else {
            panic!("the second joins");
        };
        guard.settle(Settled::Done);
        assert_eq!(wait_settled(rx).await, Settled::Done);
        assert!(matches!(slots.reserve("t", 1), Reservation::Reserved(_)));
    }

    #[test]
    fn running_jobs_lists_jobs_until_their_trigger_ended() {
        let slots = slots();
        let reserve = |id: &str, job| match slots.reserve(id, job) {
            Reservation::Reserved(guard) => guard,
            Reservation::Joined(_) => panic!("{id} is new"),
        };
        let (a, b, c) = (reserve("a", 9), reserve("b", 3), reserve("c", 9));
        assert_eq!(slots.running_jobs(), vec![3, 9]);
        a.end();
        assert_eq!(slots.running_jobs(), vec![3, 9]);
        drop(c);
        assert_eq!(slots.running_jobs(), vec![3]);
        drop((a, b));
        assert!(slots.running_jobs().is_empty());
    }

    #[test]
    fn kills_reach_only_the_right_trigger_before_it_ended() {
        let slots = slots();
        let Reservation::Reserved(guard) = slots.reserve("t", 4) else {
            panic!("new");
        };
        assert_eq!(slots.kill("other", 4), Kill::Unknown);
        assert_eq!(slots.kill("t", 5), Kill::OtherJob(4));
        assert_eq!(guard.interrupt().reason(), None);
        assert_eq!(slots.kill("t", 4), Kill::Sent);
        assert_eq!(guard.interrupt().reason(), Some(KILLED));
        guard.end();
        assert_eq!(slots.kill("t", 4), Kill::Ended);
    }

    #[test]
    fn a_shutdown_reaches_every_trigger_without_a_reason() {
        let kill = CancellationToken::new();
        let slots = Slots::new(kill.clone(), Arc::new(Notify::new()));
        let Reservation::Reserved(guard) = slots.reserve("t", 1) else {
            panic!("new");
        };
        kill.cancel();
        assert!(guard.interrupt().token().is_cancelled());
        assert_eq!(guard.interrupt().reason(), None);
    }
}
