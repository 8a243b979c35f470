//! The hand-offs in progress in this instance, by trigger id: a trigger
//! delivered again while this instance still hands off an earlier delivery
//! of it (a redelivery after its consuming connection broke) waits for
//! that one instead of taking the earlier one's records for finished.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Local {
    handoffs: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    count: usize,
    ended: Arc<Notify>,
}

/// One hand-off in progress; its end is announced when it drops.
pub(crate) struct Guard<'a> {
    local: &'a Local,
    trigger_id: String,
}

impl Local {
    pub(crate) fn enter(&self, trigger_id: &str) -> Guard<'_> {
        let mut map = self.handoffs.lock().expect("local lock");
        map.entry(trigger_id.to_owned())
            .or_insert_with(|| Entry {
                count: 0,
                ended: Arc::new(Notify::new()),
            })
            .count += 1;
        Guard {
            local: self,
            trigger_id: trigger_id.to_owned(),
        }
    }

    /// Waits until the caller's is the only hand-off of `trigger_id` here;
    /// true if another one was in progress.
    pub(crate) async fn wait_others(&self, trigger_id: &str) -> bool {
        let mut waited = false;
        loop {
            let ended = {
                let map = self.handoffs.lock().expect("local lock");
                match map.get(trigger_id) {
                    Some(e) if e.count > 1 => e.ended.clone(),
                    _ => return waited,
                }
            };
            let notified = ended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let still = {
                let map = self.handoffs.lock().expect("local lock");
                map.get(trigger_id).is_some_and(|e| e.count > 1)
            };
            if !still {
                return true;
            }
            notified.await;
            waited = true;
        }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let mut map = self.local.handoffs.lock().expect("local lock");
        if let Some(entry) = map.get_mut(&self.trigger_id) {
            entry.count -= 1;
            entry.ended.notify_waiters();
            if entry.count == 0 {
                map.remove(&self.trigger_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_hand_off_waits_for_the_first() {
        let local = Arc::new(Local::default());
        let first = local.enter("t");
        let waiter = {
            let local = local.clone();
            tokio::spawn(async move {
                let _second = local.enter("t");
                local.wait_others("t").await
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(first);
        assert!(waiter.await.unwrap(), "it waited");
        let _only = local.enter("u");
        assert!(!local.wait_others("u").await, "alone: no wait");
    }
}
