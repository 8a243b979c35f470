//! Group commit: many callers submit one item each and await its outcome;
//! a background task sends whatever has gathered meanwhile as one batch per
//! key, and hands every caller the batch's outcome.
//!
//! This is how rondo puts many triggers in one AMQP message (key: the
//! executor), many events in one message (key: the routing key), many Redis
//! writes in one pipeline (key: the partition) without changing what a
//! single caller sees: its `submit` returns only once *its* item is
//! confirmed (or failed), exactly as a lone publish would. Under light load
//! a batch holds one item and costs nothing extra; under heavy load the
//! batches grow by themselves while earlier ones are in flight, which is
//! what lifts the ceiling of one confirmed message per fire.
//!
//! An item waits for company at most its linger after it was submitted
//! ([`Limits::linger`], or what [`Batcher::submit_within`] asks for; zero:
//! the batch takes what is queued *now*); a batch goes once the first of its
//! items' lingers ends (or a full batch has gathered), with up to
//! `max_items` items. At most `max_flushes` batches are in flight at once;
//! when all are, items queue up, and the next batch is larger and goes at
//! once if its first item's linger ended while it queued. Under light load
//! the linger is what batches: at 1,000 items a second a 5 ms linger puts
//! about five in a message where there would be one, for at most 5 ms more
//! on each item's wait. A caller that cannot wait (one that sends items one
//! after another) asks for a shorter linger, and its item ends the wait of
//! the batch it joins.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::{Duration, Instant};

use crate::Error;

type Waiter<R> = oneshot::Sender<Result<R, Error>>;

/// One submitted item, with the instant its batch must go by.
struct Queued<K, T, R> {
    key: K,
    item: T,
    done: Waiter<R>,
    send_by: Instant,
}

/// Submits items to be flushed in batches; cheap to clone.
pub struct Batcher<K, T, R> {
    tx: mpsc::UnboundedSender<Queued<K, T, R>>,
    name: &'static str,
    linger: Duration,
}

impl<K, T, R> Clone for Batcher<K, T, R> {
    fn clone(&self) -> Self {
        Batcher {
            tx: self.tx.clone(),
            name: self.name,
            linger: self.linger,
        }
    }
}

/// Sizes of a batcher.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Items per batch at most (per key).
    pub max_items: usize,
    /// Batches in flight at once at most (all keys together).
    pub max_flushes: usize,
    /// How long an item waits for others after its submission (zero: not
    /// at all), unless its caller asks for another linger. Ends early once a
    /// full batch's worth has gathered.
    pub linger: Duration,
}

impl<K, T, R> Batcher<K, T, R>
where
    K: Eq + Hash + Clone + Send + 'static,
    T: Send + 'static,
    R: Clone + Send + 'static,
{
    /// Starts the batching task on the current tokio runtime. `flush` sends
    /// one batch (all items of one key, in submission order) and returns its
    /// outcome, which every item of the batch receives. The task ends when
    /// every clone of the batcher is dropped, after the batches in flight.
    pub fn spawn<F, Fut>(name: &'static str, limits: Limits, flush: F) -> Self
    where
        F: Fn(K, Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, Error>> + Send + 'static,
    {
        assert!(limits.max_items > 0 && limits.max_flushes > 0);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx, limits, Arc::new(flush)));
        Batcher {
            tx,
            name,
            linger: limits.linger,
        }
    }

    /// Queues `item` under `key` and waits for the outcome of the batch it
    /// went out in.
    pub async fn submit(&self, key: K, item: T) -> Result<R, Error> {
        self.submit_within(key, item, self.linger).await
    }

    /// [`Batcher::submit`] with the item's own linger: its batch goes at
    /// most `linger` after this call (sooner if another item's linger ends
    /// first or the batch is full).
    pub async fn submit_within(&self, key: K, item: T, linger: Duration) -> Result<R, Error> {
        let (done, outcome) = oneshot::channel();
        let queued = Queued {
            key,
            item,
            done,
            send_by: Instant::now() + linger,
        };
        if self.tx.send(queued).is_err() {
            return Err(Error::unavailable(format!("{} batcher stopped", self.name)));
        }
        outcome
            .await
            .unwrap_or_else(|_| Err(Error::unavailable(format!("{} batcher stopped", self.name))))
    }
}

async fn run<K, T, R, F, Fut>(
    mut rx: mpsc::UnboundedReceiver<Queued<K, T, R>>,
    limits: Limits,
    flush: Arc<F>,
) where
    K: Eq + Hash + Clone + Send + 'static,
    T: Send + 'static,
    R: Clone + Send + 'static,
    F: Fn(K, Vec<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, Error>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_flushes));
    // Waiting for a free slot *before* draining the queue is what lets the
    // next batch grow while the previous ones are in flight.
    while let Ok(slot) = slots.clone().acquire_owned().await {
        let Some(first) = rx.recv().await else { break };
        let mut pending: HashMap<K, Vec<(T, Waiter<R>)>> = HashMap::new();
        let mut order: Vec<K> = Vec::new();
        // The batch goes when the first of its items' lingers ends.
        let mut deadline = first.send_by;
        let mut add = |q: Queued<K, T, R>| {
            let list = pending.entry(q.key.clone()).or_default();
            if list.is_empty() {
                order.push(q.key);
            }
            list.push((q.item, q.done));
        };
        add(first);
        // Everything queued now and, within the linger, what arrives: a
        // bounded amount so one burst cannot make a batch of unbounded size.
        let mut budget = limits.max_items * limits.max_flushes;
        let (mut gathered, mut open) = (1, true);
        while budget > 0 && open {
            let next = match rx.try_recv() {
                Ok(next) => next,
                // A full batch's worth gathered, or a linger ended.
                Err(_) if gathered >= limits.max_items || Instant::now() >= deadline => break,
                Err(_) => match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(next)) => next,
                    Ok(None) => {
                        open = false;
                        continue;
                    }
                    Err(_) => break,
                },
            };
            deadline = deadline.min(next.send_by);
            add(next);
            gathered += 1;
            budget -= 1;
        }
        let mut slot = Some(slot);
        for key in order {
            let items = pending.remove(&key).unwrap_or_default();
            let mut items = items.into_iter().peekable();
            while items.peek().is_some() {
                let chunk: Vec<(T, Waiter<R>)> = items.by_ref().take(limits.max_items).collect();
                let permit = match slot.take() {
                    Some(p) => p,
                    None => match slots.clone().acquire_owned().await {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                let flush = flush.clone();
                let key = key.clone();
                tokio::spawn(async move {
                    let (batch, waiters): (Vec<T>, Vec<Waiter<R>>) = chunk.into_iter().unzip();
                    let outcome = flush(key, batch).await;
                    for w in waiters {
                        let _ = w.send(outcome.clone());
                    }
                    drop(permit);
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use futures_util::future::join_all;

    use super::*;

    type Log = Arc<Mutex<Vec<(u32, Vec<u32>)>>>;

    /// The item whose batch fails.
    const UNLUCKY: u32 = 1_000_013;

    fn recording(limits: Limits, delay_ms: u64) -> (Batcher<u32, u32, usize>, Log) {
        let log: Log = Arc::default();
        let seen = log.clone();
        let batcher = Batcher::spawn("test", limits, move |key, items: Vec<u32>| {
            let seen = seen.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                let n = items.len();
                if items.contains(&UNLUCKY) {
                    return Err(Error::unavailable("unlucky batch"));
                }
                seen.lock().unwrap().push((key, items));
                Ok(n)
            }
        });
        (batcher, log)
    }

    #[tokio::test]
    async fn a_lone_item_goes_out_alone() {
        let limits = Limits {
            max_items: 100,
            max_flushes: 2,
            linger: Duration::ZERO,
        };
        let (batcher, log) = recording(limits, 0);
        assert_eq!(batcher.submit(1, 7).await.unwrap(), 1);
        assert_eq!(*log.lock().unwrap(), vec![(1, vec![7])]);
    }

    #[tokio::test]
    async fn concurrent_items_share_batches_per_key_in_order_within_limits() {
        let limits = Limits {
            max_items: 10,
            max_flushes: 1,
            linger: Duration::ZERO,
        };
        let (batcher, log) = recording(limits, 5);
        let subs = (0..100u32).map(|i| {
            let b = batcher.clone();
            async move { b.submit(i % 2, i).await }
        });
        let outcomes = join_all(subs).await;
        assert!(outcomes.iter().all(|o| o.is_ok()));
        let log = log.lock().unwrap();
        let items: usize = log.iter().map(|(_, v)| v.len()).sum();
        assert_eq!(items, 100, "every item flushed exactly once");
        assert!(log.iter().all(|(_, v)| v.len() <= 10));
        assert!(log.len() < 100, "items were batched: {} batches", log.len());
        for (key, v) in log.iter() {
            assert!(v.iter().all(|i| i % 2 == *key), "one key per batch");
            assert!(v.windows(2).all(|w| w[0] < w[1]), "submission order kept");
        }
    }

    #[tokio::test]
    async fn a_failed_batch_fails_each_of_its_items_and_only_those() {
        let limits = Limits {
            max_items: 100,
            max_flushes: 1,
            linger: Duration::ZERO,
        };
        let (batcher, _log) = recording(limits, 0);
        assert!(batcher.submit(1, UNLUCKY).await.is_err());
        assert_eq!(batcher.submit(1, 14).await.unwrap(), 1);
    }
    #[tokio::test(start_paused = true)]
    async fn a_linger_gathers_items_that_arrive_apart_and_ends_when_it_runs_out() {
        let limits = Limits {
            max_items: 100,
            max_flushes: 2,
            linger: Duration::from_millis(10),
        };
        let (batcher, log) = recording(limits, 0);
        let started = tokio::time::Instant::now();
        let subs = (0..4u32).map(|i| {
            let batcher = batcher.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(3 * u64::from(i))).await;
                batcher.submit(1, i).await.unwrap()
            }
        });
        // Items 0..=3 arrive at 0, 3, 6 and 9 ms: one batch, sent at 10 ms.
        assert_eq!(join_all(subs).await, vec![4, 4, 4, 4]);
        assert_eq!(started.elapsed(), Duration::from_millis(10));
        // A lone item waits the linger out, then goes alone.
        let started = tokio::time::Instant::now();
        assert_eq!(batcher.submit(2, 9).await.unwrap(), 1);
        assert_eq!(started.elapsed(), Duration::from_millis(10));
        assert_eq!(
            *log.lock().unwrap(),
            vec![(1, vec![0, 1, 2, 3]), (2, vec![9])]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn each_item_waits_its_own_linger_and_the_shortest_sends_the_batch() {
        let limits = Limits {
            max_items: 100,
            max_flushes: 2,
            linger: Duration::from_millis(25),
        };
        let (batcher, log) = recording(limits, 0);
        // A patient item alone waits its own linger, not the default.
        let started = tokio::time::Instant::now();
        let within = Duration::from_millis(5);
        assert_eq!(batcher.submit_within(1, 1, within).await.unwrap(), 1);
        assert_eq!(started.elapsed(), within);
        // An item of the default linger at 0 ms, one that waits 1 ms at 3 ms:
        // both go at 4 ms, together.
        let started = tokio::time::Instant::now();
        let patient = batcher.submit(2, 2);
        let hurried = async {
            tokio::time::sleep(Duration::from_millis(3)).await;
            batcher
                .submit_within(2, 3, Duration::from_millis(1))
                .await
                .unwrap()
        };
        let (patient, hurried) = tokio::join!(patient, hurried);
        assert_eq!((patient.unwrap(), hurried), (2, 2));
        assert_eq!(started.elapsed(), Duration::from_millis(4));
        assert_eq!(*log.lock().unwrap(), vec![(1, vec![1]), (2, vec![2, 3])]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_does_not_wait_for_the_linger() {
        let limits = Limits {
            max_items: 3,
            max_flushes: 1,
            linger: Duration::from_secs(60),
        };
        let (batcher, log) = recording(limits, 0);
        let started = tokio::time::Instant::now();
        let subs = (0..3u32).map(|i| batcher.submit(1, i));
        assert_eq!(join_all(subs).await.len(), 3);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(*log.lock().unwrap(), vec![(1, vec![0, 1, 2])]);
    }
}
