//! One Redis: a few multiplexed connections shared by every caller.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisFuture, RedisResult};

use super::health::{Health, recorded, unanswered};

/// One Redis: `redis.pool_size` multiplexed connections, each opened on
/// first use and shared by every caller (a request is pipelined on one of
/// them, taken in turn: no checkout, no per-use `PING`). A connection that
/// breaks (dropped, reset) or lets a request time out is opened anew by the
/// next caller that takes it; after a failed open, callers of that slot
/// fail at once for [`REOPEN_AFTER_MS`] instead of each waiting out its own
/// connect timeout.
///
/// A checked-out pool (deadpool's) sent `UNWATCH` + `PING` each time a
/// connection was taken, which at 1,000 fires/s was half of every Redis
/// round trip a fire made. rondo uses neither `WATCH` nor blocking
/// commands, so connections hold no per-caller state and can be shared.
#[derive(Clone)]
pub struct SinglePool {
    pub(super) client: redis::Client,
    pub(super) config: AsyncConnectionConfig,
    pub(super) slots: Arc<[Arc<SharedSlot>]>,
    pub(super) next: Arc<std::sync::atomic::AtomicUsize>,
    /// Numbers each connection opened, so that only the one that broke is
    /// dropped from its slot.
    pub(super) generations: Arc<std::sync::atomic::AtomicU64>,
    pub(super) health: Arc<Health>,
}

/// After a slot failed to open its connection, its callers are refused at
/// once for this long (then the next one tries again).
const REOPEN_AFTER_MS: i64 = 1_000;

/// One shared connection (`None` until opened, or after it broke) with its
/// generation, and when opening it last failed.
#[derive(Default)]
pub(super) struct SharedSlot {
    open: tokio::sync::RwLock<Option<(u64, MultiplexedConnection)>>,
    failed_at_ms: std::sync::atomic::AtomicI64,
}

impl SharedSlot {
    /// Drops the connection of `generation`, if the slot still holds it.
    async fn drop_broken(&self, generation: u64) {
        let holds = |open: &Option<(u64, MultiplexedConnection)>| {
            open.as_ref().is_some_and(|(g, _)| *g == generation)
        };
        if !holds(&*self.open.read().await) {
            return;
        }
        let mut open = self.open.write().await;
        if holds(&open) {
            *open = None;
        }
    }
}

impl SinglePool {
    pub(super) async fn get(&self) -> RedisResult<SingleConnection> {
        use std::sync::atomic::Ordering::Relaxed;
        let slot = self.slots[self.next.fetch_add(1, Relaxed) % self.slots.len()].clone();
        if let Some((generation, conn)) = slot.open.read().await.as_ref() {
            return Ok(self.handed_out(conn.clone(), &slot, *generation));
        }
        let mut open = slot.open.write().await;
        if let Some((generation, conn)) = open.as_ref() {
            return Ok(self.handed_out(conn.clone(), &slot, *generation));
        }
        let asked = crate::clock::now_ms();
        let failed_at = slot.failed_at_ms.load(Relaxed);
        if failed_at != 0 && asked - failed_at < REOPEN_AFTER_MS {
            // Opening it failed moments ago (each try may take the whole
            // connect timeout): part of the same outage.
            self.health.note_outage(asked, asked);
            return Err(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "connecting to redis failed moments ago",
            )));
        }
        let conn = match self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
        {
            Ok(conn) => conn,
            Err(e) => {
                let now = crate::clock::now_ms();
                slot.failed_at_ms.store(now, Relaxed);
                if unanswered(&e) {
                    self.health.note_outage(asked, now);
                }
                return Err(e);
            }
        };
        slot.failed_at_ms.store(0, Relaxed);
        let generation = self.generations.fetch_add(1, Relaxed);
        *open = Some((generation, conn.clone()));
        Ok(self.handed_out(conn, &slot, generation))
    }

    fn handed_out(
        &self,
        conn: MultiplexedConnection,
        slot: &Arc<SharedSlot>,
        generation: u64,
    ) -> SingleConnection {
        SingleConnection {
            conn,
            health: self.health.clone(),
            slot: slot.clone(),
            generation,
        }
    }
}

/// A shared connection to one Redis, as handed out.
pub struct SingleConnection {
    pub(super) conn: MultiplexedConnection,
    pub(super) health: Arc<Health>,
    pub(super) slot: Arc<SharedSlot>,
    pub(super) generation: u64,
}

impl SingleConnection {
    /// `reply`, noted in `health`; a reply that says the connection broke,
    /// or a request that timed out (Redis gone without a reset: the
    /// connection would wait on it until the kernel gives up), drops it from
    /// its slot, so the next caller opens a new one.
    pub(super) fn checked<'a, T: Send + 'a>(
        &'a mut self,
        send: impl FnOnce(&'a mut MultiplexedConnection) -> RedisFuture<'a, T>,
    ) -> RedisFuture<'a, T> {
        let (slot, generation) = (self.slot.clone(), self.generation);
        let reply = recorded(&self.health.clone(), send(&mut self.conn));
        Box::pin(async move {
            let reply = reply.await;
            if let Err(e) = &reply
                && (e.is_unrecoverable_error() || e.is_timeout())
            {
                slot.drop_broken(generation).await;
            }
            reply
        })
    }
}
